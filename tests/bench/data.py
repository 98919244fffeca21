#!/usr/bin/python3
"""The data stack through pycell: pandas, numpy and matplotlib cells, a
session cell that reuses a frame, what a session holds, and a warm run's
CPU, with the shipped policies default (nothing preloaded) and data
(python.preload: numpy, pandas, matplotlib.pyplot) side by side.  A warm
run's CPU is set beside what the kernel charges for its parts alone: a
fork of python3 with the policy's modules imported (no jail), and the
jail's floor (tests/bench/floor, when built and run as root).

    /usr/bin/python3 tests/bench/data.py [--quick] [--iterations N]
                                         [--sessions N] [--out FILE]

Beside them, in the same run: bare python3 running the same code (one
process per run, its imports included: what a user pays without pycell),
the floor, the same code exec'd in one python3 that has the modules
imported already (what the cell's own work costs), and the fork, the same
code's first run in a forked child of a python3 that has the modules
imported and has run it once (what a fresh process per run costs at the
least, with no jail).  Ratios are to bare python3.  The session rows open
N sessions on one `pycell mcp` (or spread over --servers S of them; a
policy that extends the one measured, with sessions.max N) and take the
PSS of every process of every session's jail (/proc/PID/smaps_rollup) and
the drop in MemAvailable, per session, idle and after a cell that imported
pandas and built a small DataFrame, and the servers' descriptors per
session; the opening stops early, and says so, when MemAvailable falls
under --mem-floor.  10,000 sessions:

    tests/bench/data.py --phases density --policies default --sessions 10000
                        --servers 8 --pandas-sessions 0

Needs what bench.py needs, and python3-pandas and python3-matplotlib.
"""

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import (PYTHON, REPO, RUN_ENV, BenchError, McpClient, Reaper,  # noqa: E402
                   SetupError, descendants, floor_machine_cpu_s, fork_floor, jail_floor_table,
                   machine_busy_s, page_fault_us, status_kib)

MIB = 1 << 20

PANDAS = ("import pandas as pd\n"
          "df = pd.DataFrame({'k': [i % 97 for i in range(20000)], 'v': range(20000)})\n"
          "r = int(df.groupby('k').v.sum().sum())\n")
NUMPY = ("import numpy as np\n"
         "a = np.arange(40000, dtype=float).reshape(200, 200) / 40000\n"
         "r = float((a @ a).sum())\n")
# the figure as PNG bytes: what pycell's image content encodes
PLOT = ("import io\nimport matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
        "fig, ax = plt.subplots()\nax.plot(range(50), [i * i for i in range(50)])\n"
        "ax.set_title('squares')\n")
PLOT_BARE = PLOT + "b = io.BytesIO()\nfig.savefig(b, format='png')\nplt.close(fig)\nr = len(b.getvalue())\n"
PLOT_CELL = PLOT + "fig\n"
WORKLOADS = [("pandas", "a pandas groupby (20,000 rows)", PANDAS, PANDAS + "r\n"),
             ("numpy", "a numpy matmul (200 x 200)", NUMPY, NUMPY + "r\n"),
             ("plot", "a matplotlib figure as PNG (an image in the result)", PLOT_BARE, PLOT_CELL)]
SESSION_SETUP = ("import pandas as pd\n"
                 "df = pd.DataFrame({'k': [i % 97 for i in range(20000)], 'v': range(20000)})\n")
SESSION_CELL = "int(df.groupby('k').v.sum().sum())\n"
SMALL_FRAME = "import pandas as pd\ndf = pd.DataFrame({'a': range(100), 'b': [str(i) for i in range(100)]})\n"

# What the FLOOR and FORK helpers import before any code.
HELPER_IMPORTS = "import numpy, pandas, matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot\n"

# The floor: one python3 with the modules imported, timing exec(code) of
# each line it is sent (a JSON string) in a fresh namespace.
FLOOR = "import io, json, sys, time\n" + HELPER_IMPORTS + r"""
for line in sys.stdin:
    code = json.loads(line)
    t = time.perf_counter()
    exec(compile(code, "<cell>", "exec"), {"__name__": "__main__"})
    print(time.perf_counter() - t, flush=True)
"""

# The fork: a python3 with the modules imported that runs each code it is
# sent once itself (its first use, made where every fork shares it, as the
# zygote makes a figure's and a frame's), then collects and freezes its
# objects, and times the code's first run in a forked child, the parent
# running nothing more of it: what any fresh process per run pays at the
# least on this host (copies on write, pages met for the first time), with
# no jail, no pycell and no MCP.
FORK = "import gc, json, os, sys, time\n" + HELPER_IMPORTS + r"""
made = set()
for line in sys.stdin:
    code = compile(json.loads(line), "<cell>", "exec")
    if line not in made:
        exec(code, {"__name__": "__main__"})
        gc.collect()
        gc.freeze()
        made.add(line)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            t = time.perf_counter()
            exec(code, {"__name__": "__main__"})
            os.write(w, repr(time.perf_counter() - t).encode())
            os._exit(0)
        except BaseException:
            import traceback
            traceback.print_exc()
            os._exit(1)
    os.close(w)
    took = os.read(r, 64)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    print(float(took) if status == 0 and took else "failed", flush=True)
"""


def ask(helper, code):
    """Send code to a FLOOR or FORK helper; its answer line, stripped."""
    helper.stdin.write(json.dumps(code) + "\n")
    helper.stdin.flush()
    return helper.stdout.readline().strip()


def p50(values):
    return statistics.median(values)


def fmt(s):
    return "%.1f ms" % (s * 1000) if s < 10 else "%.1f s" % s


def mem_available():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def pss(pid):
    return (status_kib(pid, "Pss") or 0) * 1024


def policy_preload(name):
    """The modules the shipped policy `name` (policy/NAME.json, its extends
    followed) preloads: python.preload."""
    d = json.loads((REPO / "policy" / (name + ".json")).read_text())
    pre = d.get("python", {}).get("preload")
    if pre is None and d.get("extends"):
        return policy_preload(d["extends"])
    return list(pre or [])


class Bench:
    def __init__(self, args):
        self.args = args
        self.reaper = Reaper()
        self.env = dict(RUN_ENV, PYCELL_DATADIR=str(REPO), MPLBACKEND="Agg")
        self.tmp = Path(tempfile.mkdtemp(prefix="pycell-bench-data-"))
        self.pycell = str(REPO / "pycell")
        # the CPU table's floor (warm_cpu), or why there is none
        self.jail_floor, self.jail_floor_note = None, None

    # ---------------------------------------------------------- runners
    def bare(self, code):
        t = time.perf_counter()
        p = subprocess.run([PYTHON, "-c", code], env=self.env, capture_output=True, timeout=120)
        if p.returncode:
            raise BenchError("python3: exit %d: %s" % (p.returncode, p.stderr[-1000:]))
        return time.perf_counter() - t

    def mcp(self, policy, extra=()):
        c = McpClient("pycell mcp --policy " + policy, [self.pycell, "mcp", "--policy", policy, *extra],
                      self.env, str(REPO), self.reaper, 120)
        c.initialize()
        return c

    def latency(self):
        it = self.args.iterations
        rows = {}
        floor = subprocess.Popen([PYTHON, "-c", FLOOR], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 env=self.env, text=True)
        fork = subprocess.Popen([PYTHON, "-c", FORK], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                env=self.env, text=True)
        servers = {pol: self.mcp(pol) for pol in ("default", "data")}
        try:
            for key, title, bare_code, cell in WORKLOADS:
                r = rows[key] = {"title": title, "python3": [], "floor": [], "fork": [], "default": [],
                                 "data": []}
                for i in range(it + 1):
                    samples = {"python3": self.bare(bare_code)}
                    samples["floor"] = float(ask(floor, bare_code))
                    took = ask(fork, bare_code)
                    if took == "failed" or not took:
                        raise BenchError("the fork's run of the %s workload failed" % key)
                    samples["fork"] = float(took)
                    for pol, c in servers.items():
                        time.sleep(0.2)   # a ready jail in the pool, as between an agent's calls
                        samples[pol] = c.run_python(cell)[0]
                    if i:   # the first of each is a warm-up
                        for k, v in samples.items():
                            r[k].append(v)
                print("%-7s python3 %s, floor %s, fork %s, pycell default %s, pycell data %s" % (
                    key, *(fmt(p50(r[k])) for k in ("python3", "floor", "fork", "default", "data"))),
                      file=sys.stderr)
            # a session's cell that reuses its frame
            r = rows["session"] = {"title": "a session cell reusing its DataFrame (groupby)",
                                   "python3": [], "floor": [], "default": [], "data": []}
            sids = {}
            for pol, c in servers.items():
                _, res = c.request("tools/call", {"name": "session_open", "arguments": {}})
                sids[pol] = res["structuredContent"]["session_id"]
                c.request("tools/call", {"name": "run_python", "arguments": {"code": SESSION_SETUP,
                                                                             "session_id": sids[pol]}})
            ask(floor, "import builtins\nbuiltins.df = __import__('pandas').DataFrame("
                       "{'k': [i % 97 for i in range(20000)], 'v': range(20000)})\n")
            for i in range(it + 1):
                samples = {"python3": self.bare(SESSION_SETUP + SESSION_CELL)}
                samples["floor"] = float(ask(floor, SESSION_CELL))
                for pol, c in servers.items():
                    samples[pol] = c.request("tools/call", {"name": "run_python", "arguments": {
                        "code": SESSION_CELL, "session_id": sids[pol]}})[0]
                if i:
                    for k, v in samples.items():
                        r[k].append(v)
        finally:
            for c in servers.values():
                c.close()
            for p in (floor, fork):
                p.stdin.close()
                p.wait()
        return rows

    # ---------------------------------------------------------- CPU of a warm run
    def warm_cpu(self):
        """Per policy: CPU and wall per warm print, and beside them the
        references a warm run's CPU is set against: a fork of python3 with
        the policy's python.preload imported (no jail), and the jail's
        floor (tests/bench/floor, when built and run as root)."""
        out = {}
        n = self.args.cpu_runs
        floor_bin = REPO / "tests" / "bench" / "floor"
        if not floor_bin.exists():
            self.jail_floor_note = "%s is not built (make tests/bench/floor)" % floor_bin
        elif os.geteuid() != 0:
            self.jail_floor_note = "the jail's floor needs root (its cgroup rows)"
        else:
            table = jail_floor_table(floor_bin, 20 if self.args.quick else 200)
            self.jail_floor = floor_machine_cpu_s(table)
            if self.jail_floor is None:
                self.jail_floor_note = "%s's last row has no figure: %s" % (
                    floor_bin, table.splitlines()[-1] if table else "no output")
        for pol in self.args.policies:
            out[pol] = {"fork": fork_floor(policy_preload(pol), n, self.env, 120 + n)["cpu"]}
            c = self.mcp(pol)
            try:
                for _ in range(5):
                    c.run_python("print('hello')")
                time.sleep(1)
                b0 = machine_busy_s()
                t0 = time.perf_counter()
                for _ in range(n):
                    c.run_python("print('hello')")
                out[pol].update(cpu=(machine_busy_s() - b0) / n, wall=(time.perf_counter() - t0) / n)
            finally:
                c.close()
        print("warm cpu: %s" % out, file=sys.stderr)
        return out

    # ---------------------------------------------------------- session density
    def density(self):
        """N idle sessions (fewer if MemAvailable falls to --mem-floor first:
        the row says how many opened); then a pandas cell in K of them (K =
        min(N, --pandas-sessions): a session that imported pandas without the
        preload holds 35 MiB, and a thousand of those do not fit this
        machine).  Also the server's open files per session and the time the
        opening took."""
        n = self.args.sessions
        nsrv = self.args.servers
        out = {}
        for pol in self.args.policies:
            path = self.tmp / (pol + "-sessions.json")
            per = -(-n // nsrv)
            sessions = {"max": per, "max_per_client": per, "idle_timeout": "1h"}
            if self.args.shared_memory:
                sessions["shared_memory"] = self.args.shared_memory
            path.write_text(json.dumps({"extends": pol, "sessions": sessions}))
            servers = []
            try:
                for _ in range(nsrv):
                    servers.append(self.mcp(str(path)))
                time.sleep(1)
                pids = [c.proc.pid for c in servers]
                avail0 = mem_available()
                fds0 = sum(len(os.listdir("/proc/%d/fd" % p)) for p in pids)
                before = {p for q in pids for p in descendants(q)}
                sids = []
                stopped = None
                t0 = time.perf_counter()
                for i in range(n):
                    if mem_available() < self.args.mem_floor * MIB:
                        stopped = "MemAvailable fell below %d MiB" % self.args.mem_floor
                        break
                    c = servers[i % nsrv]
                    _, res = c.request("tools/call", {"name": "session_open", "arguments": {}})
                    if res.get("isError"):
                        stopped = res["content"][0]["text"]
                        break
                    sids.append((c, res["structuredContent"]["session_id"]))
                    if (i + 1) % 1000 == 0:
                        print("sessions %s: %d open, MemAvailable %.0f MiB" % (pol, i + 1, mem_available() / MIB),
                              file=sys.stderr)
                open_s = time.perf_counter() - t0
                m = len(sids)
                if not m:
                    raise BenchError("%s: no session opened: %s" % (pol, stopped))
                time.sleep(2)
                idle_pids = [p for q in pids for p in descendants(q) if p not in before]
                avail1 = mem_available()
                fds = (sum(len(os.listdir("/proc/%d/fd" % p)) for p in pids) - fds0) / m
                idle = {"pss": sum(pss(p) for p in idle_pids) / m, "avail": (avail0 - avail1) / m}
                k = min(m, self.args.pandas_sessions)
                pandas = None
                for c, sid in sids[:k]:
                    c.request("tools/call", {"name": "run_python", "arguments": {"code": SMALL_FRAME,
                                                                                 "session_id": sid}})
                if k:
                    time.sleep(2)
                    after = [p for q in pids for p in descendants(q) if p not in before]
                    # every session's processes now, less the idle ones' share
                    total = sum(pss(p) for p in after)
                    pandas = {"pss": (total - idle["pss"] * (m - k)) / k,
                              "avail": idle["avail"] + (avail1 - mem_available()) / k}
                out[pol] = {"n": m, "asked": n, "stopped": stopped, "k": k, "idle": idle, "pandas": pandas,
                            "procs": len(idle_pids), "fds": fds, "open_s": open_s}
            finally:
                for c in servers:
                    c.close()
            print("sessions %s: %s" % (pol, out[pol]), file=sys.stderr)
        return out


def report(args, rows, cpu, dens):
    L = []
    L.append("# The data stack through pycell (tests/bench/data.py)\n")
    L.append("%s, %s, %d CPUs, `%s`; %d iterations, p50; load %s at the start, %s at the end; a page "
             "fault here costs %.1f us (a fresh page) and %.1f us (copied on write).\n" % (
                 datetime.date.today().isoformat(), platform.release(), os.cpu_count(),
                 " ".join(sys.argv[1:]) or "-", args.iterations, args.load_start,
                 " ".join("%.2f" % x for x in os.getloadavg()), args.faults[0], args.faults[1]))
    L.append("Policies: `default` (nothing preloaded) and `data` (python.preload numpy, pandas, "
             "matplotlib.pyplot). `python3`: the same code in a fresh `/usr/bin/python3 -c` (its imports "
             "included); `floor`: the same code in a python3 that has the modules imported already; `fork`: "
             "the code's first run in a fork of a python3 that has the modules imported and has run it once "
             "(its objects then frozen, as the zygote's are): what a fresh process per run pays at the least "
             "here, with no jail, no pycell and no MCP. Ratios are to `python3`; the last, the data policy's "
             "to the fork.\n")
    L.append("| workload | python3 | floor | fork | pycell mcp, default | ratio | pycell mcp, data | ratio "
             "| data / fork |")
    L.append("|---|---|---|---|---|---|---|---|---|")
    for key, r in rows.items():
        b = p50(r["python3"])
        fork = p50(r["fork"]) if r.get("fork") else None
        L.append("| %s | %s | %s | %s | %s | %.2fx | %s | %.3fx | %s |" % (
            r["title"], fmt(b), fmt(p50(r["floor"])), fmt(fork) if fork else "-", fmt(p50(r["default"])),
            p50(r["default"]) / b, fmt(p50(r["data"])), p50(r["data"]) / b,
            "%.2fx" % (p50(r["data"]) / fork) if fork else "-"))
    L.append("")
    if cpu:
        jf = args.jail_floor
        L.append("A warm `print('hello')` through `pycell mcp` (%d runs one after another): the machine's "
                 "CPU per run (its busy time in /proc/stat, as bench.py counts it: steal left out) and wall "
                 "time per run; beside it, measured the same way, what the kernel charges for what a warm run "
                 "cannot do without: a fork of python3 with the policy's python.preload imported and its "
                 "objects frozen, printing in the child (no jail: the address space alone), and the jail's "
                 "floor (tests/bench/floor's last row: namespaces, a tmpfs root, a cgroup, a small exec). "
                 "The issue's target is CPU at most 2x the jail's floor.\n" % args.cpu_runs)
        if jf is None:
            L.append("The jail's floor was not measured: %s.\n" % args.jail_floor_note)
        L.append("| policy | CPU per run | wall per run | a fork (no jail) | the jail's floor | / floor "
                 "| / floor + fork |")
        L.append("|---|---|---|---|---|---|---|")
        for pol, v in cpu.items():
            L.append("| %s | %s | %s | %s | %s | %s | %s |" % (
                pol, fmt(v["cpu"]), fmt(v["wall"]), fmt(v["fork"]), fmt(jf) if jf else "-",
                "%.2fx" % (v["cpu"] / jf) if jf else "-", "%.2fx" % (v["cpu"] / (jf + v["fork"])) if jf else "-"))
        L.append("")
    if dens:
        L.append("%d sessions asked of %s: per session, the PSS of its jail's processes and the "
                 "drop in MemAvailable (page tables, namespaces, tmpfs and cgroups included), idle, and for "
                 "%d of them after a cell that imported pandas and built a 100-row DataFrame; the server's "
                 "open files per session; the time to open them all, one after another.\n"
                 % (args.sessions, "one `pycell mcp`" if args.servers == 1 else
                    "%d `pycell mcp` servers (in turn)" % args.servers, min(args.sessions, args.pandas_sessions)))
        if args.shared_memory:
            L.append("The sessions share one memory cgroup of %s (sessions.shared_memory), each held to "
                     "limits.memory by the server.\n" % args.shared_memory)
        L.append("| policy | sessions open | idle PSS | idle MemAvailable | pandas PSS | pandas MemAvailable | "
                 "server fds | opened in |")
        L.append("|---|---|---|---|---|---|---|---|")
        for pol, v in dens.items():
            pd_ = v["pandas"]
            L.append("| %s | %d%s | %.1f MiB | %.1f MiB | %s | %s | %.1f | %.0f s |" % (
                pol, v["n"], "" if v["n"] == v["asked"] else " of %d" % v["asked"], v["idle"]["pss"] / MIB,
                v["idle"]["avail"] / MIB, "%.1f MiB" % (pd_["pss"] / MIB) if pd_ else "-",
                "%.1f MiB" % (pd_["avail"] / MIB) if pd_ else "-", v["fds"], v["open_s"]))
        for pol, v in dens.items():
            if v["stopped"]:
                L.append("\n%s stopped at %d sessions: %s" % (pol, v["n"], v["stopped"]))
    return "\n".join(L) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iterations", type=int, default=15, help="runs per workload and runner (default 15)")
    ap.add_argument("--sessions", type=int, default=100, help="sessions for the density rows (default 100)")
    ap.add_argument("--cpu-runs", type=int, default=200, help="warm runs for the CPU rows (default 200)")
    ap.add_argument("--quick", action="store_true", help="3 iterations, 10 sessions, 20 CPU runs")
    ap.add_argument("--phases", default="latency,cpu,density",
                    help="which tables (default latency,cpu,density)")
    ap.add_argument("--policies", default="default,data",
                    help="the policies of the cpu and density tables (default default,data)")
    ap.add_argument("--pandas-sessions", type=int, default=100,
                    help="sessions given the pandas cell in the density table (default 100; 0: none)")
    ap.add_argument("--servers", type=int, default=1,
                    help="pycell mcp servers the density table's sessions are spread over (default 1; a "
                         "server holds about 14 open files a session, and its RLIMIT_NOFILE bounds them)")
    ap.add_argument("--mem-floor", type=int, default=1024,
                    help="MiB: the density table opens no more sessions once MemAvailable is below this "
                         "(default 1024), and says so")
    ap.add_argument("--shared-memory", metavar="SIZE",
                    help="the density table's sessions share one memory cgroup of SIZE (sessions.shared_memory, "
                         "e.g. 20G); default: a memory cgroup each")
    ap.add_argument("--out", help="write the report here too (markdown)")
    args = ap.parse_args()
    args.policies = [p for p in args.policies.split(",") if p]
    if not args.policies or not set(args.policies) <= {"default", "data"}:
        ap.error("--policies: default, data or both, got %r" % ",".join(args.policies))
    for name in ("servers", "sessions", "cpu_runs"):
        if getattr(args, name) < 1:
            ap.error("--%s: at least 1, got %d" % (name.replace("_", "-"), getattr(args, name)))
    if args.pandas_sessions < 0 or args.mem_floor < 0:
        ap.error("--pandas-sessions and --mem-floor: 0 or more")
    if args.quick:
        args.iterations, args.sessions, args.cpu_runs = 3, 10, 20
    if subprocess.run([PYTHON, "-c", "import numpy, pandas, matplotlib"], capture_output=True).returncode:
        print("data.py: the data stack is not installed for %s (apt-get install python3-pandas "
              "python3-matplotlib)" % PYTHON, file=sys.stderr)
        return 2
    args.load_start = " ".join("%.2f" % x for x in os.getloadavg())
    args.faults = page_fault_us()
    b = Bench(args)
    phases = args.phases.split(",")
    try:
        rows = b.latency() if "latency" in phases else {}
        cpu = b.warm_cpu() if "cpu" in phases else {}
        args.jail_floor, args.jail_floor_note = b.jail_floor, b.jail_floor_note
        dens = b.density() if "density" in phases else {}
    except SetupError as e:
        print("data.py: %s" % e, file=sys.stderr)
        return 2
    except BenchError as e:
        print("data.py: %s" % e, file=sys.stderr)
        return 1
    finally:
        b.reaper.kill_all()
        shutil.rmtree(b.tmp, ignore_errors=True)
    text = report(args, rows, cpu, dens)
    sys.stdout.write(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
