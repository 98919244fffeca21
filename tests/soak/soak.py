#!/usr/bin/env python3
"""Soak: many mixed runs through one `pycell mcp`, then the books.

    tests/soak/soak.py RUNS [--mode cold|warm] [--cli-runs N] [--pycell PATH]
    make soak SOAK_RUNS=10000        (half through a cold server, half warm;
                                      SOAK_CLI_RUNS=2000 `pycell run`s)

The mix, by run number: plain runs that print (60%), timeouts (10%),
memory bombs (10%), tool calls to a real stdio MCP server (10%,
tests/tools/fake_mcp_server.py) and calls the client cancels
(10%), four in flight at once.  Each answer is checked exactly (status,
stdout).  At the end the server gets EOF and must exit 0, and:
  - no process of it is left, no run cgroup of it, no mount added on the
    host, and it holds as many fds after the runs as after the first tenth;
  - its RSS at the end is within 1 MiB of its RSS after the first tenth;
  - the p99 latency of plain runs in the last tenth is within 1.5x that of
    the first tenth (judged from 1000 runs up: below, a p99 of a few dozen
    samples is noise, so it is printed and not judged).
Then --cli-runs cold `pycell run -c` processes, two at a time (plain runs,
errors, timeouts, and runs that leave a detached process behind in the
jail), each answer checked (exit status, stdout): `pycell run` returns as
soon as the result is out and a child of it finishes the teardown
(cmd_run.c), so afterwards no process, run cgroup or mount of any of
them may be left.
Prints one line of figures and closes with "soak: P passed, F failed"."""

import argparse
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
FAKE = REPO / "tests/tools/fake_mcp_server.py"
IN_FLIGHT = 4
RSS_SLACK_KIB = 1024
P99_RATIO = 1.5
P99_MIN_RUNS = 1000


def kind_of(i):
    k = i % 10
    return {6: "timeout", 7: "memory", 8: "tool", 9: "cancel"}.get(k, "plain")


def code_of(kind, i):
    if kind == "timeout":
        return "while True: pass"
    if kind == "memory":
        return "x = bytearray(512 << 20)\nprint('not reached')"
    if kind == "tool":
        return f"import pycell\nprint(pycell.call_tool('fake.echo', {{'text': 'e{i}'}})['echo'])"
    if kind == "cancel":
        return "import time\ntime.sleep(5)"
    return f"print({i})"


def expect(kind, i, sc):
    """None when the answer is right, else what is wrong."""
    want = {"plain": ("ok", f"{i}\n"), "tool": ("ok", f"e{i}\n"), "timeout": ("timeout", ""),
            "memory": ("memory_limit", "")}[kind]
    got = (sc.get("status"), sc.get("stdout"))
    return None if got == want else f"run {i} ({kind}): got {got!r}, expected {want!r}"


def rss_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def descendants(pid):
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            kids = open(f"/proc/{p}/task/{p}/children").read().split()
        except OSError:
            continue
        out += [int(k) for k in kids]
        todo += [int(k) for k in kids]
    return out


def run_dirs(pid):
    hits = []
    for root, dirs, _ in os.walk("/sys/fs/cgroup"):
        for d in dirs:
            if d.startswith(f"pycell-{pid}-"):
                hits.append(os.path.join(root, d))
        # run dirs sit at most a few levels down: do not walk every cgroup
        if root.count("/") > 8:
            dirs[:] = []
    return hits


def leftovers(wait=1.0):
    """Processes of the server still running after it exited: orphans come
    to us (subreaper); the ones that died are reaped, the others named."""
    deadline = time.monotonic() + wait
    while True:
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            pass
        alive = [p for p in descendants(os.getpid()) if state_of(p) not in ("Z", None)]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


def state_of(pid):
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def quiet_sample(pid):
    """RSS and fds of the server once the jails of the runs just answered
    (and cancelled) have gone: their cgroups go a moment after the answer."""
    time.sleep(0.5)
    return rss_kib(pid), sorted(os.listdir(f"/proc/{pid}/fd"))


def p99(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * 0.99))] if xs else 0.0


class Client:
    def __init__(self, argv, env):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env)
        self.answers = queue.Queue()
        self.stderr = b""
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            msg = json.loads(line)
            if "id" in msg and "method" not in msg:
                self.answers.put(msg)
        self.answers.put(None)

    def _read_err(self):
        self.stderr = self.proc.stderr.read()

    def send(self, msg):
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        self.proc.stdin.flush()


def soak(runs, mode, pycell, tmp):
    failures = []
    state = tmp / f"fake-{mode}"
    state.mkdir()
    conf = tmp / f"pycell-{mode}.conf"
    conf.write_text(json.dumps({
        "upstreams": {"fake": {"command": ["/usr/bin/python3", str(FAKE)],
                               "env": {"FAKE_MCP_STATE": str(state), "FAKE_MCP_NAME": "fake"}}},
        "audit_log": str(tmp / f"audit-{mode}.log")}))
    policy = tmp / "soak.json"
    policy.write_text(json.dumps({"extends": "default", "limits": {"memory": "128M", "timeout": "10s"},
                                  "tools": {"allow": ["fake.echo"], "budget": 10}}))
    env = dict(os.environ, PYCELL_DATADIR=os.environ.get("PYCELL_DATADIR", str(REPO)))
    mounts0 = open("/proc/self/mountinfo").read().count("\n")
    c = Client([pycell, "mcp", f"--{mode}", "--config", str(conf), "--policy", str(policy),
                "--max-runs", str(IN_FLIGHT)], env)
    c.send({"jsonrpc": "2.0", "id": "init", "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "soak", "version": "1"}}})
    assert c.answers.get(timeout=30)["id"] == "init"
    c.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    sent, latency, pending = {}, {}, 0
    tenth = max(1, runs // 10)
    base_rss = base_fds = None
    i = 0
    cancels = []
    while i < runs or pending:
        # hold the pipeline at the first tenth until the baseline is taken
        while i < runs and pending < IN_FLIGHT and not (i >= tenth and base_rss is None):
            kind = kind_of(i)
            args = {"code": code_of(kind, i)}
            if kind == "timeout":
                args["timeout_s"] = 0.3
            c.send({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                    "params": {"name": "run_python", "arguments": args}})
            sent[i] = (kind, time.monotonic())
            if kind == "cancel":
                cancels.append((time.monotonic() + 0.1, i))
            else:
                pending += 1
            i += 1
        for due, rid in [x for x in cancels if x[0] <= time.monotonic()]:
            c.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                    "params": {"requestId": rid, "reason": "soak"}})
            cancels.remove((due, rid))
        if base_rss is None and i >= tenth and pending == 0 and not cancels:
            # the baseline: after the first tenth, with nothing in flight.
            # Here, not only after an answer: the tenth's last request is
            # a cancel, which gets none once its notification is sent
            base_rss, base_fds = quiet_sample(c.proc.pid)
            continue
        try:
            msg = c.answers.get(timeout=0.05)
        except queue.Empty:
            late = [r for r, (k, t) in sent.items() if k != "cancel" and time.monotonic() - t > 60]
            if late:
                failures.append(f"runs {late[:10]} unanswered after 60 s")
                break
            continue
        if msg is None:
            failures.append(f"the server closed its output; stderr: {c.stderr[-1500:]!r}")
            break
        rid = msg["id"]
        kind, t0 = sent.pop(rid, ("?", 0))
        if kind == "cancel":
            # answered before the cancel was sent: a legal race, counted
            pending += 1
        pending -= 1
        if kind == "?":
            failures.append(f"an answer for no request: {msg!r}")
            continue
        sc = msg.get("result", {}).get("structuredContent")
        if kind != "cancel":
            why = expect(kind, rid, sc or {})
            if why:
                failures.append(why)
        if kind == "plain":
            latency[rid] = (time.monotonic() - t0) * 1000
    pid = c.proc.pid
    end_rss, end_fds = quiet_sample(pid)
    c.proc.stdin.close()
    rc = c.proc.wait(timeout=60)
    left = leftovers()
    first = [v for k, v in latency.items() if k < tenth]
    last = [v for k, v in latency.items() if k >= runs - tenth]
    p_first, p_last = p99(first), p99(last)
    checks = {
        "exit 0": rc == 0,
        "every answer right": not failures,
        "no process left": not left,
        "no run cgroup left": not run_dirs(pid),
        "no host mount added": open("/proc/self/mountinfo").read().count("\n") == mounts0,
        # a count: a ready jail made again holds the same fds under new numbers
        "fds flat": base_fds is not None and len(end_fds) == len(base_fds),
        "rss flat (1 MiB)": base_rss is not None and end_rss - base_rss <= RSS_SLACK_KIB,
    }
    if runs >= P99_MIN_RUNS:
        checks[f"p99 last/first <= {P99_RATIO}"] = p_last <= P99_RATIO * p_first
    sys.stdout.flush()
    print(f"soak {mode}: {runs} runs; p99 plain first {p_first:.1f} ms, last {p_last:.1f} ms "
          f"(x{(p_last / p_first) if p_first else 0:.2f}{'' if runs >= P99_MIN_RUNS else ', not judged'}); "
          f"RSS {base_rss} -> {end_rss} KiB; fds {len(base_fds or [])} -> {len(end_fds)}; exit {rc}")
    for name, ok in checks.items():
        print(f"  {'ok  ' if ok else 'FAIL'} {name}")
    for f in failures[:10]:
        print(f"  {f}")
    for p in left:
        try:
            print(f"  left: pid {p} {open(f'/proc/{p}/cmdline').read().replace(chr(0), ' ')[:200]!r} "
                  f"state {open(f'/proc/{p}/stat').read().split()[2]}")
        except OSError:
            pass
    if left:
        subprocess.run(["kill", "-9", *map(str, left)])
    return sum(checks.values()), sum(not v for v in checks.values())


CLI_MIX = [
    # (code, extra options, exit status, stdout)
    ('print("hello")', [], 0, b"hello\n"),
    ('print("hello")', [], 0, b"hello\n"),
    ('print("hello")', [], 0, b"hello\n"),
    ('print("hello")', [], 0, b"hello\n"),
    ('print("hello")', [], 0, b"hello\n"),
    ('print("hello")', [], 0, b"hello\n"),
    ("import sys\nprint('out')\nsys.exit(3)", [], 3, b"out\n"),
    ("import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(60)\nprint('parent')",
     [], 0, b"parent\n"),
    ("import time\ntime.sleep(30)", ["--timeout", "0.3"], 124, b""),
    ("raise ValueError('x')", [], 1, b""),
]


def all_run_dirs(pids):
    """Run cgroup dirs (pycell-<pid>-<n>) of any of pids, anywhere."""
    prefixes = tuple(f"pycell-{p}-" for p in pids)
    hits = []
    for root, dirs, _ in os.walk("/sys/fs/cgroup"):
        hits += [os.path.join(root, d) for d in dirs if d.startswith(prefixes)]
        if root.count("/") > 8:
            dirs[:] = []
    return hits


def soak_cli(runs, pycell):
    env = dict(os.environ)
    mounts0 = open("/proc/self/mountinfo").read().count("\n")
    failures, pids = [], set()
    lock = threading.Lock()
    todo = iter(range(runs))

    def worker():
        for i in todo:
            code, extra, want_rc, want_out = CLI_MIX[i % len(CLI_MIX)]
            p = subprocess.Popen([pycell, "run", *extra, "-c", code], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
            out, err = p.communicate(timeout=60)
            with lock:
                pids.add(p.pid)
                if (p.returncode, out) != (want_rc, want_out):
                    failures.append(f"cli run {i}: exit {p.returncode}, stdout {out[:200]!r}, "
                                    f"stderr {err[-300:]!r}")
    t0 = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.monotonic() - t0
    left = leftovers()
    checks = {
        "every answer right": not failures,
        "no process left": not left,
        "no run cgroup left": not all_run_dirs(pids),
        "no host mount added": open("/proc/self/mountinfo").read().count("\n") == mounts0,
    }
    print(f"soak cli: {runs} cold `pycell run`s, two at a time, in {took:.0f} s")
    for name, ok in checks.items():
        print(f"  {'ok  ' if ok else 'FAIL'} {name}")
    for f in failures[:10]:
        print(f"  {f}")
    for p in left:
        try:
            print(f"  left: pid {p} {open(f'/proc/{p}/cmdline').read().replace(chr(0), ' ')[:200]!r}")
        except OSError:
            pass
    if left:
        subprocess.run(["kill", "-9", *map(str, left)])
    return sum(checks.values()), sum(not v for v in checks.values())


def main():
    # orphans of the server come to us, so "no process left" sees them
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", type=int)
    ap.add_argument("--mode", choices=["cold", "warm", "both"], default="both")
    ap.add_argument("--cli-runs", type=int, default=0,
                    help="cold `pycell run` processes after the server soak (default 0)")
    ap.add_argument("--pycell", default=os.environ.get("PYCELL", str(REPO / "pycell")))
    a = ap.parse_args()
    modes = ["cold", "warm"] if a.mode == "both" else [a.mode]
    passed = failed = 0
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="pycell-soak.") as tmp:
        for m in modes:
            p, f = soak(a.runs // len(modes), m, a.pycell, Path(tmp))
            passed += p
            failed += f
    if a.cli_runs:
        p, f = soak_cli(a.cli_runs, a.pycell)
        passed += p
        failed += f
    print(f"soak: {a.runs} runs in {time.monotonic() - t0:.0f} s")
    print(f"soak: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
