#!/usr/bin/python3
"""pycell side-by-side benchmark (issues 7 and 17).

Runs the same Python workloads under several runners, alternating between
the runners every iteration, and prints markdown tables:

  latency      median, p90, p99 (ms) per workload and runner, and the ratio
               of each median to bare python3's
  throughput   runs/s of print("hello") at concurrency 1, 2 and 8
  CPU per run  the machine's CPU time per run of print("hello") (every process
               and the kernel's workers), beside the kernel's floor and,
               for warm runs, a fork of python3 with no jail
  memory       supervisor RSS idle, RSS of one running jail
  step costs   where `pycell run` spends its time (its --debug timings)
  targets      the issue's goals against the measured ratios

Runners: bare `/usr/bin/python3 -c CODE`, `bwrap` with a jail as close to
pycell's as bwrap allows, `pycell run -c CODE` (cold CLI) and `pycell mcp`
driven by a raw newline-delimited JSON-RPC client that keeps one server open
and times tools/call run_python round trips.  Standard library only; see
tests/bench/README.md for the method and its caveats.

  /usr/bin/python3 tests/bench/bench.py [--quick] [--iterations N] [--out FILE]
"""

import argparse
import ctypes
import datetime
import inspect
import json
import math
import os
import platform
import resource
import select
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PYTHON = "/usr/bin/python3"
MIB = 1 << 20
PROTOCOL_VERSION = "2025-11-25"
PR_SET_CHILD_SUBREAPER = 36
MEM_MARK = "pcbench-mem"

# The environment every runner gets (pycell and bwrap set the same one inside
# the jail), so bare python3 does not start with a different one.
RUN_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "TMPDIR": "/tmp",
}


class BenchError(Exception):
    """A failure that ends the benchmark with a message (exit 1)."""


class SetupError(BenchError):
    """Something the benchmark needs is missing (exit 2)."""


# ------------------------------------------------------------------ statistics

def percentile(values, p):
    """Nearest-rank percentile (p in 0..100) of a non-empty list."""
    s = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(s)))
    return s[rank - 1]


def summary(values):
    return {
        "n": len(values),
        "median": statistics.median(values),
        "p90": percentile(values, 90),
        "p99": percentile(values, 99),
    }


# ------------------------------------------------------------------ processes

class Reaper:
    """Owns every process the benchmark starts.  The driver is a child
    subreaper, so anything a runner leaves behind (a jail that outlived its
    pycell) is reparented to it; sweep() kills and reaps those and reports
    them, and kill_all() ends everything on the way out."""

    def __init__(self):
        self.lock = threading.Lock()
        self.live = {}
        self.leftovers = []
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            raise SetupError(f"prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(ctypes.get_errno())}")

    def popen(self, argv, **kw):
        kw.setdefault("start_new_session", True)
        try:
            proc = subprocess.Popen(argv, **kw)
        except OSError as e:
            raise BenchError(f"cannot start {argv[0]}: {e}") from None
        with self.lock:
            self.live[proc.pid] = proc
        return proc

    def done(self, proc):
        with self.lock:
            self.live.pop(proc.pid, None)

    def kill(self, proc):
        """SIGKILL a runner's process group and every process below it."""
        for pid in descendants(proc.pid):
            _kill(pid)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        _kill(proc.pid)

    def sweep(self):
        """Kill and reap children that no runner owns (left behind)."""
        with self.lock:
            owned = set(self.live)

        def strays():
            return {p: st for p, st in children_of(os.getpid()).items() if p not in owned}

        # A jail whose runner just exited may still be dying: give it a
        # moment (on a loaded machine, more than half a second).
        deadline = time.monotonic() + 2
        while (any(st[0] != "Z" for st in strays().values())
               and time.monotonic() < deadline):
            time.sleep(0.01)
        for pid, (state, _) in strays().items():
            if state != "Z":
                self.leftovers.append(f"pid {pid} state {state} comm {comm(pid)!r} "
                                      f"cmdline {cmdline(pid)[:120]!r}")
                for sub in descendants(pid):
                    _kill(sub)
                _kill(pid)
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass

    def kill_all(self):
        with self.lock:
            procs = list(self.live.values())
        for proc in procs:
            self.kill(proc)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            self.done(proc)
        # A jail that was still dying has a moment to be reparented to us.
        time.sleep(0.2)
        self.sweep()


def _kill(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def proc_stat(pid):
    """(state, ppid) of a process, or None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return fields[0], int(fields[1])


def all_stats():
    out = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            st = proc_stat(int(d))
            if st:
                out[int(d)] = st
    return out


def children_of(pid):
    return {p: st for p, st in all_stats().items() if st[1] == pid}


def descendants(pid):
    stats = all_stats()
    found, frontier = [], [pid]
    while frontier:
        cur = frontier.pop()
        kids = [p for p, st in stats.items() if st[1] == cur]
        found.extend(kids)
        frontier.extend(kids)
    return found


def cmdline(pid):
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace")


def comm(pid):
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def pid_ns(pid):
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def status_kib(pid, key):
    """A kB field of /proc/PID/status (VmRSS, ...) or of smaps_rollup (Pss)."""
    name = "smaps_rollup" if key == "Pss" else "status"
    try:
        text = Path(f"/proc/{pid}/{name}").read_text()
    except OSError:
        return 0
    for line in text.splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def memory_cgroup_bytes(pid):
    """Memory charged to pid's memory cgroup (v1 usage_in_bytes or v2
    memory.current), or None when pid shares the benchmark's own cgroup."""
    def paths(p):
        out = {}
        try:
            for line in Path(f"/proc/{p}/cgroup").read_text().splitlines():
                _, ctrls, path = line.split(":", 2)
                out[ctrls] = path
        except (OSError, ValueError):
            pass
        return out

    theirs, ours = paths(pid), paths(os.getpid())
    for ctrls, path in theirs.items():
        if "memory" in ctrls.split(",") and path != ours.get(ctrls):
            got = read_int(Path("/sys/fs/cgroup/memory" + path) / "memory.usage_in_bytes")
            if got is not None:
                return got
    path = theirs.get("")
    if path is not None and path != ours.get(""):
        for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
            got = read_int(Path(root + path) / "memory.current")
            if got is not None:
                return got
    return None


def read_int(f):
    """The number in a cgroup file, or None where there is none (the run's
    cgroup may be removed as it is read: its jail ended meanwhile)."""
    try:
        return int(f.read_text())
    except (OSError, ValueError):
        return None


def tree_memory(pids):
    """Summed VmRSS and Pss (bytes) of pids."""
    rss = sum(status_kib(p, "VmRSS") for p in pids) * 1024
    pss = sum(status_kib(p, "Pss") for p in pids) * 1024
    return rss, pss


# ------------------------------------------------------------------ runners

class CliRunner:
    """A runner that starts one command per run."""

    kind = "cli"

    def __init__(self, name, prefix, env, cwd, reaper, timeout):
        self.name = name
        self.prefix = prefix
        self.env = env
        self.cwd = cwd
        self.reaper = reaper
        self.timeout = timeout

    def argv(self, code):
        return [*self.prefix, code]

    def start(self, code):
        return self.reaper.popen(self.argv(code), stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 env=self.env, cwd=self.cwd)

    def finish(self, proc, timeout=None):
        try:
            out, err = proc.communicate(timeout=timeout or self.timeout)
        except subprocess.TimeoutExpired:
            self.reaper.kill(proc)
            out, err = proc.communicate()
            self.reaper.done(proc)
            raise BenchError(f"{self.name}: no exit within {timeout or self.timeout} s "
                             f"(killed); stderr: {err[-1000:]!r}") from None
        self.reaper.done(proc)
        return proc.returncode, out, err

    def run(self, workload):
        """One run; returns its wall time in seconds (spawn to exit, output
        read in full)."""
        t0 = time.perf_counter()
        proc = self.start(workload.code)
        rc, out, err = self.finish(proc)
        elapsed = time.perf_counter() - t0
        if rc != 0:
            raise BenchError(f"{self.name} {workload.key}: exit status {rc}; "
                             f"stderr: {err[-2000:]!r}")
        workload.check(self.name, out)
        return elapsed


class McpClient:
    """One `pycell mcp` process spoken to with newline-delimited JSON-RPC.
    A reader thread matches responses to requests by id and stamps the
    arrival time as soon as the line is read (before it is parsed), so the
    client's JSON decoding is not counted in the round trip."""

    def __init__(self, name, argv, env, cwd, reaper, timeout):
        self.name = name
        self.timeout = timeout
        self.reaper = reaper
        self.proc = reaper.popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, env=env, cwd=cwd)
        self.write_lock = threading.Lock()
        self.pending_lock = threading.Lock()
        self.pending = {}
        self.next_id = 1
        self.closed = False
        self.stderr_tail = b""
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read_stdout(self):
        for line in self.proc.stdout:
            t = time.perf_counter()
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if "method" in msg and "id" in msg:
                # A server-to-client request we do not implement.
                self._send({"jsonrpc": "2.0", "id": msg["id"],
                            "error": {"code": -32601, "message": "not supported by the client"}})
                continue
            with self.pending_lock:
                slot = self.pending.pop(msg.get("id"), None)
            if slot is not None:
                slot["t"], slot["msg"] = t, msg
                slot["event"].set()
        self.closed = True
        with self.pending_lock:
            slots, self.pending = list(self.pending.values()), {}
        for slot in slots:
            slot["event"].set()

    def _read_stderr(self):
        for line in self.proc.stderr:
            self.stderr_tail = (self.stderr_tail + line)[-4000:]

    def _send(self, obj):
        data = json.dumps(obj).encode() + b"\n"
        with self.write_lock:
            try:
                self.proc.stdin.write(data)
                self.proc.stdin.flush()
            except (BrokenPipeError, ValueError):
                raise BenchError(f"{self.name}: the server closed its stdin (exit "
                                 f"{self.proc.poll()}); stderr: {self.stderr_tail!r}") from None

    def request(self, method, params=None, timeout=None):
        """Send a request; returns (seconds from send to response, message)."""
        slot = {"event": threading.Event(), "msg": None, "t": None}
        with self.pending_lock:
            rid = self.next_id
            self.next_id += 1
            self.pending[rid] = slot
        msg = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        t0 = time.perf_counter()
        self._send(msg)
        if not slot["event"].wait(timeout or self.timeout):
            with self.pending_lock:
                self.pending.pop(rid, None)
            raise BenchError(f"{self.name}: no answer to {method} within "
                             f"{timeout or self.timeout} s; stderr: {self.stderr_tail!r}")
        if slot["msg"] is None:
            raise BenchError(f"{self.name}: the server closed stdout (exit {self.proc.poll()}) "
                             f"before answering {method}; stderr: {self.stderr_tail!r}")
        if "error" in slot["msg"]:
            raise BenchError(f"{self.name}: {method} failed: {slot['msg']['error']!r}")
        return slot["t"] - t0, slot["msg"]["result"]

    def initialize(self):
        self.request("initialize", {"protocolVersion": PROTOCOL_VERSION, "capabilities": {},
                                    "clientInfo": {"name": "pycell-bench", "version": "1"}})
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        _, tools = self.request("tools/list")
        names = [t.get("name") for t in tools.get("tools", [])]
        if "run_python" not in names:
            raise BenchError(f"{self.name}: tools/list has no run_python: {names!r}")

    def run_python(self, code, timeout=None):
        """One tools/call run_python; returns (seconds, structuredContent)."""
        elapsed, res = self.request("tools/call",
                                    {"name": "run_python", "arguments": {"code": code}},
                                    timeout=timeout)
        sc = res.get("structuredContent")
        if not isinstance(sc, dict):
            raise BenchError(f"{self.name}: tools/call result has no structuredContent: "
                             f"{json.dumps(res)[:1000]}")
        if res.get("isError") or sc.get("status") != "ok":
            raise BenchError(f"{self.name}: run_python status {sc.get('status')!r}: "
                             f"stderr {sc.get('stderr', '')[-2000:]!r}")
        return elapsed, sc

    def close(self):
        """EOF on stdin ends the server; it is killed if it lingers."""
        try:
            with self.write_lock:
                self.proc.stdin.close()
        except OSError:
            pass
        reap(self.reaper, self.proc)


def reap(reaper, proc):
    """Wait up to 10 s for a server that was told to stop; kill it if it lingers."""
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        reaper.kill(proc)
        proc.wait()
    reaper.done(proc)


class McpRunner:
    """A runner backed by one long-lived `pycell mcp` server."""

    kind = "mcp"

    def __init__(self, name, argv, env, cwd, reaper, timeout):
        self.name = name
        self.argv = argv
        self.env = env
        self.cwd = cwd
        self.reaper = reaper
        self.timeout = timeout
        self.client = None

    client_class = McpClient

    def new_client(self):
        client = self.client_class(self.name, self.argv, self.env, self.cwd, self.reaper, self.timeout)
        try:
            client.initialize()
        except BaseException:
            client.close()
            raise
        return client

    def open(self):
        self.client = self.new_client()

    def close(self):
        if self.client:
            self.client.close()
            self.client = None

    def run(self, workload):
        elapsed, sc = self.client.run_python(workload.code)
        workload.check(self.name, sc.get("stdout", "").encode())
        # the server's own measure of the jail's run, whole milliseconds
        self.last_run_s = sc.get("duration_ms", 0) / 1000
        return elapsed


class HttpClient:
    """One `pycell serve` on an ephemeral loopback port, spoken to with
    protocol 2026-07-28 (stateless POSTs) over keep-alive connections, one
    per thread, by a minimal HTTP/1.1 client (Python's http.client adds
    0.06-0.09 ms a request of its own here: it would be measured, not
    pycell).  The round trip ends when the whole body is read (before it is parsed), as
    for McpClient."""

    def __init__(self, name, argv, env, cwd, reaper, timeout):
        self.name = name
        self.timeout = timeout
        self.reaper = reaper
        self.proc = reaper.popen(argv + ["--listen", "127.0.0.1:0"], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=cwd)
        self.local = threading.local()
        self.stderr_tail = b""
        self.port = None
        found = threading.Event()

        def read_stderr():
            for line in self.proc.stderr:
                self.stderr_tail = (self.stderr_tail + line)[-4000:]
                m = re.search(rb"listening on http://127\.0\.0\.1:(\d+)/mcp", line)
                if m and not found.is_set():
                    self.port = int(m.group(1))
                    found.set()
            found.set()
        threading.Thread(target=read_stderr, daemon=True).start()
        if not found.wait(timeout) or self.port is None:
            raise BenchError(f"{name}: pycell serve did not start; stderr: {self.stderr_tail!r}")

    def _conn(self):
        c = getattr(self.local, "conn", None)
        if c is not None and select.select([c], [], [], 0)[0]:
            # an idle keep-alive connection that is readable was closed by
            # the server (its idle timeout): a new one, not a failed call
            c.close()
            c = self.local.conn = None
        if c is None:
            c = self.local.conn = socket.create_connection(("127.0.0.1", self.port), timeout=self.timeout)
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.local.buf = b""
        return c

    def _recv(self, c):
        data = c.recv(1 << 16)
        if not data:
            raise OSError("the server closed the connection")
        self.local.buf += data

    def _read_response(self, c):
        """One HTTP/1.1 response: (status, headers dict, body), by
        Content-Length or chunked."""
        while b"\r\n\r\n" not in self.local.buf:
            self._recv(c)
        head, self.local.buf = self.local.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {k.strip().lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while True:
                while b"\r\n" not in self.local.buf:
                    self._recv(c)
                size_line, self.local.buf = self.local.buf.split(b"\r\n", 1)
                n = int(size_line.split(b";")[0], 16)
                while len(self.local.buf) < n + 2:
                    self._recv(c)
                body += self.local.buf[:n]
                self.local.buf = self.local.buf[n + 2:]
                if n == 0:
                    return status, headers, body
        n = int(headers.get("content-length", "0"))
        while len(self.local.buf) < n:
            self._recv(c)
        body, self.local.buf = self.local.buf[:n], self.local.buf[n:]
        return status, headers, body

    def request(self, method, params=None, timeout=None, name=None):
        params = dict(params or {})
        params["_meta"] = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                           "io.modelcontextprotocol/clientCapabilities": {}}
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
        head = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n"
                "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
                f"MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: {method}\r\n"
                + (f"Mcp-Name: {name}\r\n" if name else "") + f"Content-Length: {len(body)}\r\n\r\n")
        c = self._conn()
        c.settimeout(timeout or self.timeout)
        t0 = time.perf_counter()
        try:
            c.sendall(head.encode() + body)
            status, headers, data = self._read_response(c)
        except (OSError, ValueError, IndexError) as e:
            self.local.conn = None
            c.close()
            raise BenchError(f"{self.name}: {method}: {e}; stderr: {self.stderr_tail!r}") from None
        elapsed = time.perf_counter() - t0
        if headers.get("connection", "").lower() == "close":
            self.local.conn = None
            c.close()
        if headers.get("content-type", "").startswith("text/event-stream"):
            events = [json.loads(l[5:]) for l in data.decode().splitlines() if l.startswith("data:")]
            data = json.dumps(next((m for m in events if "method" not in m), {})).encode()
        msg = json.loads(data) if data else {}
        if status != 200 or "error" in msg or "result" not in msg:
            raise BenchError(f"{self.name}: {method}: HTTP {status}: {data[:500]!r}")
        return elapsed, msg["result"]

    def initialize(self):
        _, tools = self.request("tools/list")
        names = [t.get("name") for t in tools.get("tools", [])]
        if "run_python" not in names:
            raise BenchError(f"{self.name}: tools/list has no run_python: {names!r}")

    def run_python(self, code, timeout=None):
        elapsed, res = self.request("tools/call", {"name": "run_python", "arguments": {"code": code}},
                                    timeout=timeout, name="run_python")
        sc = res.get("structuredContent")
        if res.get("isError") or not isinstance(sc, dict) or sc.get("status") != "ok":
            raise BenchError(f"{self.name}: run_python failed: {json.dumps(res)[:1000]}")
        return elapsed, sc

    def close(self):
        self.proc.terminate()
        reap(self.reaper, self.proc)


class HttpRunner(McpRunner):
    """A runner backed by one `pycell serve` (kind "mcp": the same tables)."""

    client_class = HttpClient


# ------------------------------------------------------------------ workloads

class Workload:
    def __init__(self, key, title, code, expect):
        self.key = key
        self.title = title
        self.code = code
        self.expect = expect

    def check(self, runner, out):
        if not self.expect(out):
            raise BenchError(f"{runner} {self.key}: unexpected output "
                             f"({len(out)} bytes): {out[:200]!r}")


CPU_FUNC = "def f(n):\n    s = 0\n    for i in range(n):\n        s += i\n    return s\n"


def calibrate_cpu_loop(target_ms, timeout):
    """Loop count n for which f(n) takes target_ms in bare python3 (median of
    five timings in separate interpreters)."""
    n0 = 1_000_000
    probe = CPU_FUNC + ("import time\nt = time.perf_counter()\nf(%d)\n"
                        "print(time.perf_counter() - t)\n" % n0)
    per_iter = []
    for _ in range(5):
        try:
            out = subprocess.run([PYTHON, "-c", probe], capture_output=True, env=RUN_ENV,
                                 timeout=timeout, check=True).stdout
        except subprocess.TimeoutExpired:
            raise BenchError(f"CPU loop calibration: no exit within {timeout} s") from None
        except subprocess.CalledProcessError as e:
            raise BenchError(f"CPU loop calibration: exit status {e.returncode}; "
                             f"stderr {e.stderr[-1000:]!r}") from None
        per_iter.append(float(out) / n0)
    n = max(1000, round(target_ms / 1000 / statistics.median(per_iter)))
    return n, statistics.median(per_iter) * n * 1000


def make_workloads(cpu_n, output_bytes):
    out_code = f"import sys\nsys.stdout.write('x' * {output_bytes - 1} + '\\n')\n"
    return [
        Workload("hello", 'print("hello")', 'print("hello")', lambda o: o == b"hello\n"),
        Workload("import", "import json, re, collections", "import json, re, collections",
                 lambda o: o == b""),
        Workload("cpu", f"CPU loop f({cpu_n})", CPU_FUNC + f"f({cpu_n})\n", lambda o: o == b""),
        Workload("output", f"{output_bytes} bytes of output" if output_bytes != MIB
                 else "1 MiB of output", out_code,
                 lambda o, n=output_bytes: len(o) == n and o.endswith(b"x\n")),
    ]


# ------------------------------------------------------------------ phases

def rotated(items, k):
    k %= len(items)
    return items[k:] + items[:k]


def latency_phase(runners, workloads, warmup, iterations, log):
    """samples[workload][runner] = [seconds]; each iteration runs every
    runner once, in an order rotated by one every iteration.  outside[..]
    is the same for the MCP runners, less the server's run time of the jail
    (what the call costs besides the jail)."""
    samples = {w.key: {r.name: [] for r in runners} for w in workloads}
    outside = {w.key: {r.name: [] for r in runners if r.kind == "mcp"} for w in workloads}
    for w in workloads:
        log(f"latency: {w.title}: {warmup} warm-up + {iterations} iterations "
            f"x {len(runners)} runners")
        for it in range(warmup + iterations):
            for r in rotated(runners, it):
                t = r.run(w)
                if it >= warmup:
                    samples[w.key][r.name].append(t)
                    if r.kind == "mcp":
                        outside[w.key][r.name].append(t - r.last_run_s)
    return samples, outside


class SdkClient:
    """`pycell mcp` under the official v1 SDK client: tests/bench/sdk_client.mjs
    on node, which times each call from callTool to its result (the
    SDK's parsing and outputSchema check included) and says so a line at a
    time.  Not a runner of the other tables: one call at a time."""

    name = "pycell mcp, v1 SDK client"

    def __init__(self, sdk, pycell, args, env, cwd, reaper, timeout):
        self.timeout = timeout
        self.reaper = reaper
        self.proc = reaper.popen(["node", str(REPO / "tests" / "bench" / "sdk_client.mjs"), sdk, pycell, *args],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                 env=env, cwd=cwd)
        line = self._line()
        if line != b"ready\n":
            raise BenchError(f"{self.name}: did not start: {line[:500]!r}")

    def _line(self):
        ready = select.select([self.proc.stdout], [], [], self.timeout)[0]
        if not ready:
            raise BenchError(f"{self.name}: no answer within {self.timeout} s")
        return self.proc.stdout.readline()

    def run(self, workload):
        self.proc.stdin.write(json.dumps(workload.code).encode() + b"\n")
        self.proc.stdin.flush()
        line = self._line()
        try:
            ans = json.loads(line)
        except ValueError:
            raise BenchError(f"{self.name}: {line[:500]!r}") from None
        if "error" in ans:
            raise BenchError(f"{self.name}: {ans['error']}")
        workload.check(self.name, ans["stdout"].encode())
        return ans["ms"] / 1000

    def close(self):
        self.proc.stdin.close()
        reap(self.reaper, self.proc)


def sdk_phase(sdk, base, workload, warmup, iterations, log):
    """samples[name] = [seconds] of bare python3 and of the SDK client's
    calls, one of each per iteration, which goes first alternating."""
    samples = {base.name: [], sdk.name: []}
    log(f"through the SDK client: {warmup} warm-up + {iterations} iterations")
    for it in range(warmup + iterations):
        for r in rotated([base, sdk], it):
            t = r.run(workload)
            if it >= warmup:
                samples[r.name].append(t)
    return samples


def session_phase(runner, base, workload, warmup, iterations, log):
    """samples[...] = [seconds] of: bare python3; a cell of the workload in one
    live session over MCP (tools/call run_python with its session_id, to its
    answer); and session_open (to its answer; each opened session is closed
    before the next iteration).  One of each per iteration."""
    client = runner.client
    log(f"sessions: {warmup} warm-up + {iterations} iterations")

    def call(name, args):
        t, res = client.request("tools/call", {"name": name, "arguments": args})
        if res.get("isError"):
            raise BenchError(f"{runner.name}: {name} failed: {json.dumps(res)[:1000]}")
        return t, res["structuredContent"]
    _, opened = call("session_open", {})
    sid = opened["session_id"]
    names = (base.name, f"{runner.name}: a cell in a live session", f"{runner.name}: session_open")
    samples = {n: [] for n in names}
    try:
        for it in range(warmup + iterations):
            t_base = base.run(workload)
            t_cell, sc = call("run_python", {"session_id": sid, "code": workload.code})
            if sc.get("status") != "ok":
                raise BenchError(f"{runner.name}: a session's cell: status {sc.get('status')!r}")
            workload.check(names[1], sc["stdout"].encode())
            t_open, o = call("session_open", {})
            call("session_close", {"session_id": o["session_id"]})
            if it >= warmup:
                for n, t in zip(names, (t_base, t_cell, t_open)):
                    samples[n].append(t)
    finally:
        call("session_close", {"session_id": sid})
    return samples


def http_added(samples, outside):
    """What HTTP adds to a call, paired: {workload: {serve runner: summary}}
    of (serve - stdio) per iteration, `pycell serve X` beside `pycell mcp X`.
    Both ran in the same iteration, next to each other, so the slow drift
    of a machine's load falls out of each difference; the medians of two
    separate distributions keep it.  A cold jail's own time varies by
    milliseconds from run to run, more than the transport costs: "outside"
    pairs the calls less the server's time of their jails (whole ms: a
    rounding error of at most 1 ms per difference, centred on zero)."""
    out = {}
    for w, per in samples.items():
        for name, times in per.items():
            stdio = "pycell mcp" + name[len("pycell serve"):]
            if name.startswith("pycell serve") and stdio in per:
                d = [a - b for a, b in zip(times, per[stdio])]
                o = [a - b for a, b in zip(outside[w][name], outside[w][stdio])]
                out.setdefault(w, {})[name] = dict(summary(d), p10=percentile(d, 10), stdio=stdio,
                                                   outside=dict(summary(o), p10=percentile(o, 10)))
    return out


def throughput_batch(runner, workload, concurrency, total):
    """runs/s of `total` runs spread over `concurrency` threads."""
    counter = iter(range(total))
    lock = threading.Lock()
    errors = []
    barrier = threading.Barrier(concurrency + 1)

    def worker():
        barrier.wait()
        while not errors:
            with lock:
                if next(counter, None) is None:
                    return
            try:
                runner.run(workload)
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)
                return

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(concurrency)]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return total / elapsed


def throughput_phase(runners, workload, levels, rounds, runs_for, log):
    """rates[runner][level] = [runs/s per round]."""
    rates = {r.name: {c: [] for c in levels} for r in runners}
    for rnd in range(rounds):
        for c in levels:
            total = runs_for(c)
            log(f"throughput: round {rnd + 1}/{rounds}, concurrency {c}, {total} runs per runner")
            for r in rotated(runners, rnd + c):
                rates[r.name][c].append(throughput_batch(r, workload, c, total))
    return rates


# ------------------------------------------------------------------ CPU per run

CPU_SETTLE_S = 0.3   # after a batch: the teardown the kernel's workers finish later


def machine_busy_s():
    """Busy time of every CPU (user, nice, system, irq, softirq; not steal,
    which in a VM is the host running something else), in seconds, from
    /proc/stat, as tests/bench/floor.c reads it."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return (v[0] + v[1] + v[2] + v[5] + v[6]) / os.sysconf("SC_CLK_TCK")


def page_fault_us(pages=8192):
    """What a page fault costs this machine, in microseconds: (a fresh
    anonymous page, a page copied on write after fork).  A warm run's
    python takes some 500 of the latter (every page of the zygote's it
    writes), so this is what makes CPU per run differ between machines
    most; the reports say it beside their numbers.  The loop's own cost
    (writing pages already there) is taken out."""
    import mmap
    size = pages * mmap.PAGESIZE
    m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)

    def touch(v):
        t0 = time.perf_counter()
        for i in range(0, size, mmap.PAGESIZE):
            m[i] = v
        return time.perf_counter() - t0
    fresh = touch(1)
    loop = touch(2)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(w, repr(touch(3)).encode())
        os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    with os.fdopen(r) as f:
        cow = float(f.read())
    m.close()
    return (max(fresh - loop, 0) / pages * 1e6, max(cow - loop, 0) / pages * 1e6)


def own_cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def cpu_phase(runners, workload, runs, reaper, log):
    """cpu[runner] = the machine's CPU seconds per run over `runs` runs one
    after another, less the driver's own: whatever a run costs anywhere
    (the runner's processes, a zygote, the kernel's workers tearing down a
    namespace) counts, and so does anything else the machine does, so the
    report says how loaded it was."""
    out = {}
    for r in runners:
        log(f"CPU per run: {runs} runs of {r.name}")
        r.run(workload)
        reaper.sweep()
        time.sleep(CPU_SETTLE_S)
        m0, d0 = machine_busy_s(), own_cpu_s()
        for _ in range(runs):
            r.run(workload)
        reaper.sweep()       # reaps what outlived its runner (pycell run's teardown)
        time.sleep(CPU_SETTLE_S)
        m1, d1 = machine_busy_s(), own_cpu_s()
        out[r.name] = max(0.0, (m1 - m0) - (d1 - d0)) / runs
    return out


FLOOR_ROW = "+ all seven + tmpfs + cgroup (a jail's floor)"

# A warm run's python is a fork of an interpreter that has its modules
# imported (the zygote's): this is that fork with no jail around it, so
# what the kernel charges for the address space alone (its page tables
# copied and torn down, the child's copies on write and first reads) is
# measured beside the jail's floor.  argv: runs, then the modules; the
# busy time is machine_busy_s's, whose source fork_floor puts before it.
FORK_FLOOR = r"""
import gc, json, os, sys, time
for m in sys.argv[2:]:
    __import__(m)
runs = int(sys.argv[1])
code = compile("print('hello')", "<cell>", "exec")
gc.collect()
gc.freeze()

def one():
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.dup2(w, 1)
        exec(code, {"__name__": "__main__"})
        sys.stdout.flush()
        os._exit(0)
    os.close(w)
    out = b""
    while True:
        b = os.read(r, 4096)
        if not b:
            break
        out += b
    os.close(r)
    _, status = os.waitpid(pid, 0)
    if out != b"hello\n" or status != 0:
        sys.exit("the child wrote %r and ended with status %d" % (out, status))

for _ in range(5):
    one()
time.sleep(0.3)
b0, t0 = machine_busy_s(), time.perf_counter()
for _ in range(runs):
    one()
wall = time.perf_counter() - t0
time.sleep(0.3)
print(json.dumps({"cpu": (machine_busy_s() - b0) / runs, "wall": wall / runs}))
"""


def fork_floor(modules, runs, env, timeout):
    """{"cpu", "wall"} per run, in seconds, of print("hello") in a forked
    child of a python3 that has `modules` imported and its objects frozen
    (gc.freeze, as the zygote's are): the machine's busy CPU (every
    process, the kernel's workers) over the runs and 0.3 s after them, as
    cpu_phase counts it; the parent's own CPU counts, as the zygote's
    does.  BenchError when it fails."""
    script = "import os\n" + inspect.getsource(machine_busy_s) + FORK_FLOOR
    p = subprocess.run([PYTHON, "-c", script, str(runs), *modules], env=env, capture_output=True,
                       text=True, timeout=timeout)
    if p.returncode != 0:
        raise BenchError(f"the fork floor ({' '.join(modules) or 'nothing imported'}) exited "
                         f"{p.returncode}: {p.stderr[-500:]}")
    return json.loads(p.stdout)


def jail_floor_table(path, runs):
    """tests/bench/floor's table (markdown) over `runs` runs of each step;
    BenchError when it fails."""
    out = subprocess.run([str(path), "-n", str(runs)], capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise BenchError(f"{path} exited {out.returncode}: {out.stderr[-500:]}")
    return out.stdout.strip()


def floor_machine_cpu_s(table):
    """The machine CPU per run of the jail's floor row of floor.c's table,
    in seconds; None when it is not there (a step that failed)."""
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] == FLOOR_ROW:
            try:
                return float(cells[-1]) / 1000
            except ValueError:
                return None
    return None


# The probe names itself so the driver can find it: prctl(PR_SET_NAME), as
# /proc/self/comm is not writable for a non-dumpable process.
MEM_CODE = ("import time\n"
            "try:\n"
            "    import ctypes\n"
            "    ctypes.CDLL(None).prctl(15, %r, 0, 0, 0)\n"
            "except Exception:\n"
            "    open('/proc/self/comm', 'w').write(%r)\n"
            "time.sleep(%s)\n")


def mem_code(sleep_s):
    return MEM_CODE % (MEM_MARK.encode(), MEM_MARK, sleep_s)


def find_marked(root, timeout, running):
    """The process below (or at) root whose comm is MEM_MARK (None if it
    does not appear in time or running() turns false)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and running():
        for p in [root] + descendants(root):
            if comm(p) == MEM_MARK:
                return p
        time.sleep(0.01)
    return None


def jail_members(root, marked):
    """The processes in the marked process's pid namespace, among root and
    its descendants (for bare python3: the process alone)."""
    ns = pid_ns(marked)
    host_ns = pid_ns(os.getpid())
    if ns == host_ns:
        return [marked]
    return [p for p in [root] + descendants(root) if pid_ns(p) == ns]


def mem_row(runner, what, pids, cgroup=None):
    rss, pss = tree_memory(pids)
    return {"runner": runner, "what": what, "procs": len(pids), "rss": rss, "pss": pss,
            "cgroup": cgroup}


def memory_cli(runner, sleep_s, timeout):
    """Memory of one running jail of a CLI runner (the program sleeps)."""
    proc = runner.start(mem_code(sleep_s))
    rows = []
    try:
        marked = find_marked(proc.pid, timeout, lambda: proc.poll() is None)
        if marked is not None:
            time.sleep(min(0.2, sleep_s / 4))
            members = jail_members(proc.pid, marked)
            rows.append(mem_row(runner.name, "running jail (processes in its pid namespace)",
                                members, memory_cgroup_bytes(marked)))
            if members != [marked] or proc.pid != marked:
                rows.append(mem_row(runner.name, "whole command (runner + jail)",
                                    [proc.pid] + descendants(proc.pid)))
    finally:
        rc, _, err = runner.finish(proc, timeout=timeout + sleep_s)
    if not rows:
        raise BenchError(f"{runner.name}: no process named {MEM_MARK} appeared "
                         f"(exit status {rc}; stderr {err[-1000:]!r})")
    if rc != 0:
        raise BenchError(f"{runner.name} memory probe: exit status {rc}; stderr {err[-1000:]!r}")
    return rows


def wait_settled(pid, max_s):
    """Wait until pid's process tree (count and RSS) has not changed for 0.5 s."""
    deadline = time.monotonic() + max_s
    last, since = None, time.monotonic()
    while time.monotonic() < deadline:
        tree = [pid] + descendants(pid)
        state = (len(tree), tree_memory(tree)[0] // (256 << 10))
        if state != last:
            last, since = state, time.monotonic()
        elif time.monotonic() - since >= 0.5:
            return
        time.sleep(0.1)


def supervisor_rows(runner, client, when, settle_s):
    wait_settled(client.proc.pid, settle_s)
    sup = client.proc.pid
    below = descendants(sup)
    rows = [mem_row(runner.name, f"supervisor idle {when}", [sup])]
    rows.append(mem_row(runner.name, f"processes below the idle supervisor {when} "
                        f"(ready jails, zygote)", below))
    return rows


def memory_mcp(runner, sleep_s, settle_s, timeout):
    """A fresh server: idle RSS after initialize, then one running jail."""
    client = runner.new_client()
    try:
        rows = supervisor_rows(runner, client, "after initialize", settle_s)
        result = {}

        def call():
            try:
                result["r"] = client.run_python(mem_code(sleep_s), timeout=timeout + sleep_s)
            except BenchError as e:
                result["e"] = e

        t = threading.Thread(target=call, daemon=True)
        t.start()
        marked = find_marked(client.proc.pid, timeout, t.is_alive)
        if marked is None:
            t.join(timeout + sleep_s)
            raise result.get("e") or BenchError(
                f"{runner.name}: the memory probe ran but no process named {MEM_MARK} "
                f"appeared below the server")
        time.sleep(min(0.2, sleep_s / 4))
        rows.append(mem_row(runner.name, "running jail (processes in its pid namespace)",
                            jail_members(client.proc.pid, marked), memory_cgroup_bytes(marked)))
        t.join(timeout + sleep_s)
        if "e" in result:
            raise result["e"]
    finally:
        client.close()
    return rows


DEBUG_LINE = re.compile(r"^pycell: debug:\s+(\d+) us: (.*)$")


def step_costs(pycell_runner, runs, timeout):
    """Median timestamp of each `pycell run --debug` step, sorted by it;
    step labels have their numbers (pids) replaced by N."""
    stamps = {}
    argv = pycell_runner.prefix[:-1] + ["--debug", "-c"]
    for _ in range(runs):
        proc = pycell_runner.reaper.popen([*argv, 'print("hello")'], stdin=subprocess.DEVNULL,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          env=pycell_runner.env, cwd=pycell_runner.cwd)
        rc, _, err = pycell_runner.finish(proc, timeout)
        if rc != 0:
            raise BenchError(f"pycell run --debug: exit status {rc}; stderr {err[-1000:]!r}")
        for line in err.decode(errors="replace").splitlines():
            m = DEBUG_LINE.match(line)
            if not m:
                continue
            label = re.sub(r"\d+", "N", m.group(2))
            stamps.setdefault(label, []).append(int(m.group(1)))
    steps = [(label, statistics.median(v) / 1000, len(v)) for label, v in stamps.items()]
    return sorted(steps, key=lambda step: step[1])


# ------------------------------------------------------------------ report

def fmt_ms(s):
    return f"{s * 1000:.1f}"


def fmt_mib(b):
    return f"{b / MIB:.1f}"


def machine_info(pycell, bwrap):
    def first(path, prefix):
        try:
            for line in Path(path).read_text().splitlines():
                if line.startswith(prefix):
                    return line.split(":", 1)[1].strip() if ":" in line else line.split("=", 1)[1]
        except OSError:
            pass
        return "?"

    def version(argv):
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=10)
            return (out.stdout or out.stderr).strip().splitlines()[0]
        except (OSError, subprocess.TimeoutExpired, IndexError):
            return "?"

    mem_kib = first("/proc/meminfo", "MemTotal").split()[0]
    return {
        "cpu": first("/proc/cpuinfo", "model name"),
        "cores": os.cpu_count(),
        "memory": f"{int(mem_kib) // 1024} MiB" if mem_kib.isdigit() else "?",
        "os": first("/etc/os-release", "PRETTY_NAME=").strip('"'),
        "kernel": platform.release(),
        "python": version([PYTHON, "--version"]),
        "bwrap": version([bwrap, "--version"]) if bwrap else "not used",
        "pycell": version([pycell, "--version"]),
    }


def loadavg():
    return Path("/proc/loadavg").read_text().split()[:3]


def render(res):
    a = res["args"]
    m = res["machine"]
    lines = []
    add = lines.append
    add("# pycell benchmark results")
    add("")
    add(f"- Date: {res['date']}")
    add(f"- Machine: {m['cpu']}, {m['cores']} cores, {m['memory']}; {m['os']}; "
        f"kernel {m['kernel']}")
    add(f"- Software: {m['python']}; {m['bwrap']}; {m['pycell']}")
    add(f"- Load average (1, 5, 15 min): {' '.join(res['load_start'])} at the start, "
        f"{' '.join(res['load_end'])} at the end")
    if float(res["load_start"][0]) >= 0.5 or float(res["load_end"][0]) >= 0.5:
        add("- **The machine was not quiet (1-minute load average >= 0.5): "
            "the numbers are noisy.**")
    add(f"- Command: `{res['command']}` (the same as `make bench BENCH_ARGS='...'`, "
        "which sets PYCELL and PYCELL_DATADIR to the build and source trees)")
    add(f"- Iterations: {a['iterations']} per workload and runner after {a['warmup']} warm-up; "
        f"runners alternate round-robin every iteration (order rotated each time)")
    add(f"- CPU loop: f({res['cpu_n']}), calibrated to {res['cpu_calibrated_ms']:.1f} ms "
        f"in-process on bare python3 (target {a['cpu_ms']} ms)")
    add(f"- Spawn floor (`/bin/true` from the driver): {fmt_ms(res['spawn_floor'])} ms median")
    add("")
    add("Times are wall clock: spawn to exit with all output read (CLI runners), request "
        "written to response line read (MCP, one server kept open). Percentiles are "
        "nearest-rank; p99 of fewer than 100 samples is the maximum. Method and the "
        "differences between the bwrap jail and pycell's: tests/bench/README.md.")
    add("")

    add("## Latency (ms)")
    add("")
    add("| workload | runner | n | median | p90 | p99 | median / python3 |")
    add("|---|---|---:|---:|---:|---:|---:|")
    base = res["runners"][0]
    for w in res["workloads"]:
        row = res["latency"][w["key"]]
        b = row[base]["median"]
        for r in res["runners"]:
            s = row[r]
            add(f"| {w['title']} | {r} | {s['n']} | {fmt_ms(s['median'])} | {fmt_ms(s['p90'])} "
                f"| {fmt_ms(s['p99'])} | {s['median'] / b:.2f}x |")
    add("")

    add("## Through the official SDK client (ms)")
    add("")
    if res["sdk"]:
        add("`pycell mcp` (warm starts, as it starts by default) under the v1 SDK's Client and "
            "StdioClientTransport (tests/bench/sdk_client.mjs, node): each call timed from "
            "callTool to its result, the SDK's parsing and outputSchema check included, one "
            'call of print("hello") after one bare python3 run, which goes first alternating.')
        add("")
        add("| runner | n | median | p90 | p99 | median / python3 |")
        add("|---|---:|---:|---:|---:|---:|")
        for name, st in res["sdk"].items():
            add(f"| {name} | {st['n']} | {fmt_ms(st['median'])} | {fmt_ms(st['p90'])} "
                f"| {fmt_ms(st['p99'])} | {st['median'] / res['sdk'][base]['median']:.2f}x |")
    else:
        add(f"The SDK client's table was {res['sdk_note']}.")
    add("")

    if res.get("sessions"):
        add("## Sessions (ms)")
        add("")
        add('A print("hello") cell in one live session of `pycell mcp` (tools/call run_python '
            "with its session_id, to its answer), and session_open (to its answer: a jail with an "
            "interpreter waiting for cells; each is closed before the next), one of each per "
            "iteration after one bare python3 run.")
        add("")
        add("| what | n | median | p90 | p99 | median / python3 |")
        add("|---|---:|---:|---:|---:|---:|")
        sb = next(iter(res["sessions"].values()))["median"]
        for name, st in res["sessions"].items():
            add(f"| {name} | {st['n']} | {fmt_ms(st['median'])} | {fmt_ms(st['p90'])} "
                f"| {fmt_ms(st['p99'])} | {st['median'] / sb:.2f}x |")
        add("")

    if res["http_added"]:
        add("## What HTTP adds to a call (ms)")
        add("")
        add("Each iteration runs `pycell serve X` and `pycell mcp X` next to each other; "
            "the rows summarise the differences of those pairs (serve minus stdio): of the "
            "whole call, and of the call less the jail's run as the server timed it (whole "
            "milliseconds), which leaves out the jail's own variation of several milliseconds "
            "between runs.")
        add("")
        add("| workload | runners | n | whole call: median | p10 | p90 "
            "| besides the jail: median | p10 | p90 |")
        add("|---|---|---:|---:|---:|---:|---:|---:|---:|")
        for w in res["workloads"]:
            for name, s in res["http_added"].get(w["key"], {}).items():
                o = s["outside"]
                add(f"| {w['title']} | {name} - {s['stdio']} | {s['n']} "
                    f"| {s['median'] * 1000:+.2f} | {s['p10'] * 1000:+.2f} "
                    f"| {s['p90'] * 1000:+.2f} | {o['median'] * 1000:+.2f} "
                    f"| {o['p10'] * 1000:+.2f} | {o['p90'] * 1000:+.2f} |")
        add("")

    add(f"## Throughput (runs/s of print(\"hello\"), median of {a['rounds']} rounds)")
    add("")
    levels = a["levels"]
    add("| runner | " + " | ".join(f"c={c}" for c in levels) + " | "
        + " | ".join(f"c={c} / python3" for c in levels) + " |")
    add("|---|" + "---:|" * (2 * len(levels)))
    for r in res["runners"]:
        rates = [res["throughput"][r][str(c)] for c in levels]
        ratios = [rates[i] / res["throughput"][base][str(c)] for i, c in enumerate(levels)]
        add(f"| {r} | " + " | ".join(f"{x:.1f}" for x in rates) + " | "
            + " | ".join(f"{x:.2f}x" for x in ratios) + " |")
    add("")

    if res["cpu_per_run"]:
        cpu, cores = res["cpu_per_run"], res["machine"]["cores"]
        floor, fork = res["floor_cpu"], res.get("fork_floor_cpu")
        add(f"## CPU per run (print(\"hello\"), {res['cpu_runs']} runs one after another)")
        add("")
        add("The machine's busy CPU time (every CPU's, /proc/stat) over the runs and "
            f"{CPU_SETTLE_S} s after them, less the driver's own, per run: the runner's "
            "processes, a zygote, and the kernel's workers that finish a namespace's teardown "
            "all count, and so does whatever else the machine did (the load average is above). "
            "The reference of a cold run is the kernel's floor (tests/bench/floor's last row, "
            "measured the same way) plus bare python3's run. A warm run starts no interpreter: "
            "its python is a fork of one that has imported what it needs, so its reference is "
            "the floor plus such a fork with no jail (a python3 that forks a child per "
            "print(\"hello\"), measured the same way; nothing imported, where pycell's zygote "
            "holds its own runtime and a policy's preload too, so the reference is the lower). "
            "\"/ floor\" is each against the floor alone. \"Runs/s at most\" is the "
            f"{cores} cores divided by the CPU per run.")
        add("")
        add("| runner | CPU per run ms | / floor | reference | / reference | runs/s at most |")
        add("|---|---:|---:|---|---:|---:|")
        rows = [(r, cpu[r]) for r in res["runners"] if r in cpu]
        refs = [(n, v) for n, v in (("the kernel's floor (a jail)", floor),
                                    ("a fork of python3 (no jail)", fork)) if v is not None]
        rows[1:1] = refs
        for name, c in rows:
            warm = name in res["warm_runners"]
            if floor is None or name == base or (name, c) in refs:
                per_floor, ref, ratio = "", "", ""
            elif warm and fork is not None:
                per_floor, ref, ratio = f"{c / floor:.2f}x", "floor + a fork", f"{c / (floor + fork):.2f}x"
            elif warm:
                per_floor, ref, ratio = f"{c / floor:.2f}x", "floor", f"{c / floor:.2f}x"
            else:
                per_floor, ref, ratio = f"{c / floor:.2f}x", "floor + python3", f"{c / (floor + cpu[base]):.2f}x"
            most = f"{cores / c:.0f}" if c > 0 else "n/a"
            add(f"| {name} | {c * 1000:.2f} | {per_floor} | {ref} | {ratio} | {most} |")
        add("")

    add("## Memory")
    add("")
    add("| runner | what | processes | RSS MiB | PSS MiB | memory cgroup MiB |")
    add("|---|---|---:|---:|---:|---:|")
    for row in res["memory"]:
        cg = fmt_mib(row["cgroup"]) if row["cgroup"] is not None else "n/a"
        add(f"| {row['runner']} | {row['what']} | {row['procs']} | {fmt_mib(row['rss'])} "
            f"| {fmt_mib(row['pss'])} | {cg} |")
    add("")
    add("RSS counts shared pages (libpython, the C library) in every process; PSS splits them "
        "between the processes that share them. The memory cgroup column is the jail's own "
        "cgroup (it includes page cache charged to it, e.g. its tmpfs files).")
    add("")

    if res.get("floor"):
        add("## The kernel's floor (tests/bench/floor.c)")
        add("")
        add("What every jail needs with nothing of pycell in it: a clone3 child into one namespace "
            "at a time, then all seven, a tmpfs mounted in its mount namespace, one cgroup made "
            "for it and removed, an exec of /bin/true and the wait for its end (the teardown). "
            "CPU is ours and the child's, user + system; \"added\" is against the plain fork + exec.")
        add("")
        add(res["floor"])
        add("")

    if res["steps"] is not None:
        add(f"## Where `{res['step_runner']}` spends its time (`--debug`, median of "
            f"{a['debug_runs']} runs)")
        add("")
        if res["steps"]:
            add("| step | at ms | since previous ms | seen in runs |")
            add("|---|---:|---:|---:|")
            prev = 0.0
            for label, at, seen in res["steps"]:
                add(f"| {label} | {at:.1f} | {at - prev:.1f} | {seen} |")
                prev = at
        else:
            add("`pycell run --debug` printed no step timings.")
        add("")

    add("## Targets (issue 17)")
    add("")
    add("| target | measured | goal | met |")
    add("|---|---:|---:|---|")
    for t in res["targets"]:
        add(f"| {t['what']} | {t['value']} | {t['goal']} | {'yes' if t['met'] else 'no'} |")
    add("")
    if res["leftovers"]:
        add("Processes left behind by a runner (killed): " + "; ".join(res["leftovers"]))
        add("")
    return "\n".join(lines)


def targets(res):
    base = res["runners"][0]
    lat = res["latency"]["hello"]
    out = []

    def add(what, value, goal, met):
        out.append({"what": what, "value": value, "goal": goal, "met": met})

    for name in res["run_runners"]:
        r = lat[name]["median"] / lat[base]["median"]
        add(f'CLI `{name}` print("hello") / python3', f"{r:.2f}x", "<= 1.15x", r <= 1.15)
        if "bwrap" in lat:
            b = lat[name]["median"] / lat["bwrap"]["median"]
            add(f'CLI `{name}` print("hello") / bwrap', f"{b:.2f}x", "< 1x", b < 1)
    for name in res["mcp_runners"]:
        if name in res["warm_runners"]:
            ms = lat[name]["median"] * 1000
            add(f'{name} tools/call p50 print("hello"), on the wire', f"{ms:.2f} ms", "< 1 ms", ms < 1)
            if "output" in res["latency"]:
                o = res["latency"]["output"][name]["median"] / res["latency"]["output"][base]["median"]
                add(f"{name} tools/call p50 of {res['args']['output_bytes']} bytes of output / python3",
                    f"{o:.2f}x", "< 1.5x", o < 1.5)
            if "2" in res["throughput"][name]:
                t = res["throughput"][name]["2"] / res["throughput"][base]["2"]
                add(f"{name} throughput at c=2 / python3", f"{t:.2f}x", ">= 3x", t >= 3)
        for row in res["memory"]:
            if row["runner"] == name and row["what"] == "supervisor idle after initialize":
                add(f"{name} supervisor RSS idle", f"{fmt_mib(row['rss'])} MiB", "< 10 MiB",
                    row["rss"] < 10 * MIB)
    if res["sdk"]:
        names = list(res["sdk"])
        r = res["sdk"][names[1]]["median"] / res["sdk"][names[0]]["median"]
        add(f'{names[1]} tools/call p50 print("hello") / python3', f"{r:.2f}x", "<= 0.20x", r <= 0.20)
    if res.get("sessions"):
        names = list(res["sessions"])
        r = res["sessions"][names[1]]["median"] / res["sessions"][names[0]]["median"]
        add(f'{names[1]} p50 print("hello") / python3', f"{r:.2f}x", "< 0.1x", r < 0.1)
    # what HTTP adds to a call: `pycell serve X` beside `pycell mcp X`,
    # the median of the paired differences
    for name, s in res["http_added"].get("hello", {}).items():
        d = s["outside"]["median"] * 1000
        add(f'{name} tools/call - {s["stdio"]} besides the jail, median of paired differences',
            f"{d:+.2f} ms", "< 0.3 ms", d < 0.3)
    return out


# ------------------------------------------------------------------ main

RUNNER_KEYS = ("python3", "bwrap", "pycell-run", "pycell-mcp", "pycell-serve")


def parse_args(argv):
    ap = argparse.ArgumentParser(
        description="Side-by-side benchmark: bare python3, bwrap, pycell run, pycell mcp, pycell serve.",
        epilog="make bench BENCH_ARGS='--out tests/bench/RESULTS.md' runs it from the build tree.")
    ap.add_argument("--quick", action="store_true",
                    help="few iterations and short batches (a smoke test of the harness)")
    ap.add_argument("--iterations", type=int, help="measured iterations per workload and runner "
                    "(default 100; 5 with --quick)")
    ap.add_argument("--warmup", type=int, help="warm-up iterations (default 5; 1 with --quick)")
    ap.add_argument("--out", help="also write the markdown report to FILE")
    ap.add_argument("--json", dest="json_out", help="write the raw results as JSON to FILE")
    ap.add_argument("--pycell", default=os.environ.get("PYCELL") or str(REPO / "pycell"),
                    help="the pycell binary (default $PYCELL or <repo>/pycell)")
    ap.add_argument("--datadir", default=os.environ.get("PYCELL_DATADIR") or str(REPO),
                    help="PYCELL_DATADIR for pycell (default $PYCELL_DATADIR or the repo)")
    ap.add_argument("--bwrap", default="bwrap", help="the bwrap binary (default: bwrap on PATH)")
    ap.add_argument("--runners", default=",".join(RUNNER_KEYS),
                    help="comma-separated subset of " + ",".join(RUNNER_KEYS))
    ap.add_argument("--run", action="append", metavar="LABEL=ARGS",
                    help="a pycell run runner: LABEL and extra arguments for `pycell run` "
                    "(e.g. 'pycell run warm=--warm'); repeatable; default: 'pycell run=' "
                    "(no extra arguments). The runners start in a scratch directory, so a path "
                    "in ARGS (this option's, --mcp's or --serve's) must be absolute")
    ap.add_argument("--mcp", action="append", metavar="LABEL=ARGS",
                    help="a pycell mcp runner: LABEL and extra arguments for `pycell mcp`; "
                    "repeatable; default: 'pycell mcp=' (warm starts, the default) and "
                    "'pycell mcp cold=--cold'")
    ap.add_argument("--serve", action="append", metavar="LABEL=ARGS",
                    help="a pycell serve runner (Streamable HTTP, protocol 2026-07-28, keep-alive): "
                    "LABEL and extra arguments for `pycell serve`; repeatable; default: "
                    "'pycell serve=' and 'pycell serve cold=--cold'")
    ap.add_argument("--sdk", default=str(REPO / "tests" / "mcp" / "node_modules" / "@modelcontextprotocol" / "sdk"),
                    help="the v1 MCP SDK package dir for the SDK-client table (default: tests/mcp's, "
                    "which its npm ci installs; '' leaves the table out)")
    ap.add_argument("--floor", metavar="PATH",
                    help="the tests/bench/floor binary (make tests/bench/floor builds it): add the kernel's "
                    "floor table (make bench does)")
    ap.add_argument("--levels", default="1,2,8",
                    help="throughput concurrency levels (default 1,2,8)")
    ap.add_argument("--rounds", type=int, help="throughput rounds (default 3; 1 with --quick)")
    ap.add_argument("--throughput-runs", type=int,
                    help="runs per throughput batch and concurrency level c: max(this, 4c) "
                    "(default 40; 2c with --quick)")
    ap.add_argument("--cpu-ms", type=float, default=50, help="CPU loop length on bare python3 (ms)")
    ap.add_argument("--output-bytes", type=int, default=MIB, help="size of the output workload")
    ap.add_argument("--debug-runs", type=int, help="`pycell run --debug` runs for the step "
                    "table (default 20; 3 with --quick; 0 leaves it out)")
    ap.add_argument("--cpu-runs", type=int, help="runs per runner for the CPU-per-run table, and forks "
                    "of python3 for its warm runs' reference (default 200; 10 with --quick; 0 leaves "
                    "both out)")
    ap.add_argument("--timeout", type=float, default=60, help="seconds allowed to any one run")
    a = ap.parse_args(argv)
    q = a.quick
    a.iterations = a.iterations if a.iterations is not None else (5 if q else 100)
    a.warmup = a.warmup if a.warmup is not None else (1 if q else 5)
    a.rounds = a.rounds if a.rounds is not None else (1 if q else 3)
    a.debug_runs = a.debug_runs if a.debug_runs is not None else (3 if q else 20)
    a.cpu_runs = a.cpu_runs if a.cpu_runs is not None else (10 if q else 200)
    if a.cpu_runs < 0:
        ap.error("--cpu-runs must be >= 0")
    if a.iterations < 1 or a.warmup < 0 or a.rounds < 1 or a.output_bytes < 2 or a.cpu_ms <= 0:
        ap.error("--iterations, --rounds must be >= 1, --warmup >= 0, --output-bytes >= 2, "
                 "--cpu-ms > 0")
    try:
        a.levels = [int(x) for x in a.levels.split(",")]
    except ValueError:
        ap.error(f"--levels: expected comma-separated integers, got {a.levels!r}")
    if not a.levels or min(a.levels) < 1:
        ap.error("--levels: every level must be >= 1")
    a.runners = [x.strip() for x in a.runners.split(",") if x.strip()]
    unknown = set(a.runners) - set(RUNNER_KEYS)
    if unknown or not a.runners:
        ap.error(f"--runners: unknown {sorted(unknown)}; choose from {','.join(RUNNER_KEYS)}")
    if "python3" not in a.runners:
        ap.error("--runners: python3 is the baseline of every ratio and cannot be left out")
    def variants(opt, specs):
        out = []
        for spec in specs:
            label, sep, extra = spec.partition("=")
            if not sep or not label.strip():
                ap.error(f"--{opt}: expected LABEL=ARGS, got {spec!r}")
            out.append((label.strip(), shlex.split(extra)))
        return out

    a.run_variants = variants("run", a.run or ["pycell run="])
    a.mcp_variants = variants("mcp", a.mcp or [
        "pycell mcp=", "pycell mcp cold=--cold"])
    a.serve_variants = variants("serve", a.serve or [
        "pycell serve=", "pycell serve cold=--cold"])
    return a


def check_tools(a, env, cwd):
    if not os.access(PYTHON, os.X_OK):
        raise SetupError(f"{PYTHON} not found: the benchmark and the jail use the system python3")
    if "pycell-run" in a.runners or "pycell-mcp" in a.runners or "pycell-serve" in a.runners:
        if not (os.path.isfile(a.pycell) and os.access(a.pycell, os.X_OK)):
            raise SetupError(f"pycell binary not found or not executable: {a.pycell} "
                             "(build it: autoreconf -fi && ./configure && make; or pass --pycell)")
        if not (Path(a.datadir) / "policy" / "default.json").is_file():
            raise SetupError(f"no policy/default.json under PYCELL_DATADIR {a.datadir} "
                             "(pass --datadir, the source tree or the installed pkgdatadir)")
    if a.floor:
        # checked before any run: its table comes last, after every measure
        if not (os.path.isfile(a.floor) and os.access(a.floor, os.X_OK)):
            raise SetupError(f"--floor: {a.floor}: not found or not executable "
                             "(build it: make tests/bench/floor)")
        a.floor = os.path.abspath(a.floor)
    if "bwrap" in a.runners:
        path = shutil.which(a.bwrap)
        if not path:
            raise SetupError(f"bwrap not found ({a.bwrap}): install the Debian package bubblewrap "
                             "(apt-get install bubblewrap), or leave it out with "
                             "--runners python3,pycell-run,pycell-mcp")
        a.bwrap = path
        try:
            probe = subprocess.run([*bwrap_prefix(path), "pass"], capture_output=True,
                                   env=env, cwd=cwd, timeout=a.timeout)
        except subprocess.TimeoutExpired:
            raise SetupError(f"bwrap did not finish a trivial run within {a.timeout} s") from None
        if probe.returncode != 0:
            raise SetupError(f"bwrap cannot build its jail here (exit {probe.returncode}): "
                             f"{probe.stderr.decode(errors='replace').strip()}")


def bwrap_prefix(bwrap):
    """bwrap with a jail as close to pycell's default policy as it allows
    (differences: tests/bench/README.md)."""
    size = str(64 * MIB)
    argv = [bwrap, "--unshare-all", "--die-with-parent", "--new-session",
            "--uid", "1000", "--gid", "1000", "--hostname", "pycell", "--cap-drop", "ALL",
            "--ro-bind", "/usr", "/usr"]
    for alias in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        if os.path.islink("/" + alias):
            argv += ["--symlink", os.readlink("/" + alias), "/" + alias]
    for name in ("ld.so.cache", "nsswitch.conf", "services", "protocols", "localtime",
                 "host.conf", "gai.conf"):
        argv += ["--ro-bind-try", "/etc/" + name, "/etc/" + name]
    argv += ["--proc", "/proc", "--dev", "/dev",
             "--size", size, "--tmpfs", "/tmp", "--size", size, "--tmpfs", "/workspace",
             "--remount-ro", "/", "--chdir", "/workspace", "--clearenv"]
    for k, v in {**RUN_ENV, "HOME": "/workspace"}.items():
        argv += ["--setenv", k, v]
    return argv + [PYTHON, "-c"]


def pycell_env(a, env):
    return dict(env, PYCELL_DATADIR=a.datadir)


def build_runners(a, reaper, cwd):
    env = dict(RUN_ENV, HOME=cwd)
    penv = pycell_env(a, env)
    runners = [CliRunner("python3", [PYTHON, "-c"], env, cwd, reaper, a.timeout)]
    if "bwrap" in a.runners:
        runners.append(CliRunner("bwrap", bwrap_prefix(a.bwrap), env, cwd, reaper, a.timeout))
    if "pycell-run" in a.runners:
        for label, extra in a.run_variants:
            runners.append(CliRunner(label, [a.pycell, "run", *extra, "-c"], penv, cwd,
                                     reaper, a.timeout))
            runners[-1].warm = "--warm" in extra
    if "pycell-mcp" in a.runners:
        for label, extra in a.mcp_variants:
            argv = [a.pycell, "mcp", *extra]
            if "--max-runs" not in extra:
                argv += ["--max-runs", str(max(a.levels))]
            runners.append(McpRunner(label, argv, penv, cwd, reaper, a.timeout))
            runners[-1].warm = "--cold" not in extra
    if "pycell-serve" in a.runners:
        for label, extra in a.serve_variants:
            argv = [a.pycell, "serve", *extra]
            if "--max-runs" not in extra:
                argv += ["--max-runs", str(max(a.levels))]
            runners.append(HttpRunner(label, argv, penv, cwd, reaper, a.timeout))
            runners[-1].warm = "--cold" not in extra
    names = [r.name for r in runners]
    if len(set(names)) != len(names):
        raise SetupError(f"runner names must differ: {names}")
    return runners


def spawn_floor(reaper, env, cwd, n, timeout):
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        proc = reaper.popen(["/bin/true"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=cwd)
        proc.communicate(timeout=timeout)
        reaper.done(proc)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def run(a):
    def log(msg):
        print(f"bench: {msg}", file=sys.stderr, flush=True)

    reaper = Reaper()
    cwd = tempfile.mkdtemp(prefix="pycell-bench-")
    os.chmod(cwd, 0o755)
    runners = []
    try:
        env = dict(RUN_ENV, HOME=cwd)
        check_tools(a, env, cwd)
        res = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
               "load_start": loadavg(),
               "command": shlex.join([PYTHON, os.path.relpath(__file__)] + sys.argv[1:]),
               "machine": machine_info(a.pycell, a.bwrap if "bwrap" in a.runners else None)}
        log(f"load average {' '.join(res['load_start'])}")
        cpu_n, cpu_ms = calibrate_cpu_loop(a.cpu_ms, a.timeout)
        res["cpu_n"], res["cpu_calibrated_ms"] = cpu_n, cpu_ms
        log(f"CPU loop: f({cpu_n}) = {cpu_ms:.1f} ms on bare python3")
        workloads = make_workloads(cpu_n, a.output_bytes)
        runners = build_runners(a, reaper, cwd)
        res["run_runners"] = [label for label, _ in a.run_variants if "pycell-run" in a.runners]
        for r in runners:
            if r.kind == "mcp":
                r.open()
        res["spawn_floor"] = spawn_floor(reaper, env, cwd, 20, a.timeout)
        # A first run of each: a broken runner fails here, not mid-table.
        for r in runners:
            r.run(workloads[0])

        samples, outside = latency_phase(runners, workloads, a.warmup, a.iterations, log)
        reaper.sweep()
        sdk_samples, sdk_note = None, None
        if "pycell-mcp" not in a.runners or not a.sdk:
            sdk_note = "left out (--runners without pycell-mcp, or --sdk '')"
        elif not shutil.which("node") or not (Path(a.sdk) / "package.json").exists():
            sdk_note = (f"left out: needs node and the SDK in {a.sdk} "
                        "(tests/mcp/run.sh installs it: npm ci in tests/mcp)")
        else:
            sdk = SdkClient(a.sdk, a.pycell, ["--max-runs", str(max(a.levels))], pycell_env(a, env),
                            cwd, reaper, a.timeout)
            try:
                sdk_samples = sdk_phase(sdk, runners[0], workloads[0], a.warmup, a.iterations, log)
            finally:
                sdk.close()
        if sdk_note:
            log(f"through the SDK client: {sdk_note}")
        mcp = [r for r in runners if r.kind == "mcp" and type(r) is McpRunner]
        session_samples = session_phase(mcp[0], runners[0], workloads[0], a.warmup, a.iterations,
                                        log) if mcp else None
        rates = throughput_phase(runners, workloads[0], a.levels, a.rounds,
                                 lambda c: 2 * c if a.quick and a.throughput_runs is None
                                 else max(a.throughput_runs or 40, 4 * c), log)
        reaper.sweep()
        cpu = cpu_phase(runners, workloads[0], a.cpu_runs, reaper, log) if a.cpu_runs else {}

        log("memory")
        memory = []
        settle = 2 if a.quick else 5
        for r in runners:
            if r.kind == "cli":
                memory += memory_cli(r, 0.5 if a.quick else 1.0, a.timeout)
            else:
                memory += memory_mcp(r, 0.5 if a.quick else 1.0, settle, a.timeout)
                rows = supervisor_rows(r, r.client, "after the benchmark runs", settle)
                memory.append(rows[0])
        reaper.sweep()

        floor = None
        if a.floor:
            log(f"the kernel's floor: {a.floor}")
            floor = jail_floor_table(a.floor, 10 if a.quick else 200)
        fork = None
        if a.cpu_runs and any(getattr(r, "warm", False) for r in runners):
            log(f"the fork floor: {a.cpu_runs} forks of python3")
            fork = fork_floor([], a.cpu_runs, env, a.timeout + a.cpu_runs)["cpu"]

        steps = None
        pyrun = next((r for r in runners if r.name in res["run_runners"]), None)
        if pyrun and a.debug_runs > 0:
            log(f"step costs: {a.debug_runs} runs of {pyrun.name} --debug")
            steps = step_costs(pyrun, a.debug_runs, a.timeout)
    finally:
        for r in runners:
            if r.kind == "mcp":
                r.close()
        reaper.kill_all()
        shutil.rmtree(cwd, ignore_errors=True)

    res.update({
        "args": {"iterations": a.iterations, "warmup": a.warmup, "rounds": a.rounds,
                 "levels": a.levels, "cpu_ms": a.cpu_ms, "output_bytes": a.output_bytes,
                 "debug_runs": a.debug_runs, "quick": a.quick},
        "load_end": loadavg(),
        "runners": [r.name for r in runners],
        "mcp_runners": [r.name for r in runners if r.kind == "mcp"],
        "warm_runners": [r.name for r in runners if getattr(r, "warm", False)],
        "step_runner": pyrun.name if steps is not None else None,
        "workloads": [{"key": w.key, "title": w.title} for w in workloads],
        "latency": {w: {r: summary(v) for r, v in per.items()} for w, per in samples.items()},
        "http_added": http_added(samples, outside),
        "sdk": {r: summary(v) for r, v in sdk_samples.items()} if sdk_samples else None,
        "sdk_note": sdk_note,
        "sessions": {r: summary(v) for r, v in session_samples.items()} if session_samples else None,
        "throughput": {r: {str(c): statistics.median(v) for c, v in per.items()}
                       for r, per in rates.items()},
        "memory": memory,
        "cpu_per_run": cpu,
        "cpu_runs": a.cpu_runs,
        "steps": steps,
        "floor": floor,
        "floor_cpu": floor_machine_cpu_s(floor) if floor else None,
        "fork_floor_cpu": fork,
        "leftovers": reaper.leftovers,
    })
    res["targets"] = targets(res)
    return res


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    # SIGTERM unwinds like Ctrl-C, so every runner is killed on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        res = run(a)
    except SetupError as e:
        print(f"bench: {e}", file=sys.stderr)
        return 2
    except BenchError as e:
        print(f"bench: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("bench: interrupted", file=sys.stderr)
        return 130
    report = render(res)
    print(report)
    if a.out:
        Path(a.out).write_text(report + "\n")
    if a.json_out:
        Path(a.json_out).write_text(json.dumps(res, indent=2) + "\n")
    if res["leftovers"]:
        print(f"bench: error: processes were left behind: {res['leftovers']}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
