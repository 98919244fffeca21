#!/usr/bin/python3
"""The data stack through pycell: pandas, numpy and matplotlib cells, a
session cell that reuses a frame, what a session holds, and a warm run's
CPU, with the shipped policies default (nothing preloaded) and data
(python.preload: numpy, pandas, matplotlib.pyplot) side by side.

    /usr/bin/python3 tests/bench/data.py [--quick] [--iterations N]
                                         [--sessions N] [--out FILE]

Beside them, in the same run: bare python3 running the same code (one
process per run, its imports included: what a user pays without pycell),
and the floor, the same code exec'd in one python3 that has the modules
imported already (what the cell's own work costs).  Ratios are to bare
python3.  The session rows open N sessions on one `pycell mcp` (a policy
that extends the one measured, with sessions.max N) and take the PSS of
every process of every session's jail (/proc/PID/smaps_rollup) and the
drop in MemAvailable, per session, idle and after a cell that imported
pandas and built a small DataFrame.  Needs what bench.py needs, and
python3-pandas and python3-matplotlib.
"""

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import (PYTHON, REPO, RUN_ENV, BenchError, McpClient, Reaper,  # noqa: E402
                   SetupError, descendants, machine_busy_s, page_fault_us, status_kib)

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

# The floor: one python3 with the modules imported, timing exec(code) of
# each line it is sent (a JSON string) in a fresh namespace.
FLOOR = r"""
import io, json, sys, time
import numpy, pandas, matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot
for line in sys.stdin:
    code = json.loads(line)
    t = time.perf_counter()
    exec(compile(code, "<cell>", "exec"), {"__name__": "__main__"})
    print(time.perf_counter() - t, flush=True)
"""


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


class Bench:
    def __init__(self, args):
        self.args = args
        self.reaper = Reaper()
        self.env = dict(RUN_ENV, PYCELL_DATADIR=str(REPO), MPLBACKEND="Agg")
        self.tmp = Path(tempfile.mkdtemp(prefix="pycell-bench-data-"))
        self.pycell = str(REPO / "pycell")

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
        servers = {pol: self.mcp(pol) for pol in ("default", "data")}
        try:
            for key, title, bare_code, cell in WORKLOADS:
                r = rows[key] = {"title": title, "python3": [], "floor": [], "default": [], "data": []}
                for i in range(it + 1):
                    samples = {"python3": self.bare(bare_code)}
                    floor.stdin.write(json.dumps(bare_code) + "\n")
                    floor.stdin.flush()
                    samples["floor"] = float(floor.stdout.readline())
                    for pol, c in servers.items():
                        time.sleep(0.2)   # a ready jail in the pool, as between an agent's calls
                        samples[pol] = c.run_python(cell)[0]
                    if i:   # the first of each is a warm-up
                        for k, v in samples.items():
                            r[k].append(v)
                print("%-7s python3 %s, floor %s, pycell default %s, pycell data %s" % (
                    key, *(fmt(p50(r[k])) for k in ("python3", "floor", "default", "data"))), file=sys.stderr)
            # a session's cell that reuses its frame
            r = rows["session"] = {"title": "a session cell reusing its DataFrame (groupby)",
                                   "python3": [], "floor": [], "default": [], "data": []}
            sids = {}
            for pol, c in servers.items():
                _, res = c.request("tools/call", {"name": "session_open", "arguments": {}})
                sids[pol] = res["structuredContent"]["session_id"]
                c.request("tools/call", {"name": "run_python", "arguments": {"code": SESSION_SETUP,
                                                                             "session_id": sids[pol]}})
            floor.stdin.write(json.dumps("import builtins\nbuiltins.df = __import__('pandas').DataFrame("
                                         "{'k': [i % 97 for i in range(20000)], 'v': range(20000)})\n") + "\n")
            floor.stdin.flush()
            floor.stdout.readline()
            for i in range(it + 1):
                samples = {"python3": self.bare(SESSION_SETUP + SESSION_CELL)}
                floor.stdin.write(json.dumps(SESSION_CELL) + "\n")
                floor.stdin.flush()
                samples["floor"] = float(floor.stdout.readline())
                for pol, c in servers.items():
                    samples[pol] = c.request("tools/call", {"name": "run_python", "arguments": {
                        "code": SESSION_CELL, "session_id": sids[pol]}})[0]
                if i:
                    for k, v in samples.items():
                        r[k].append(v)
        finally:
            for c in servers.values():
                c.close()
            floor.stdin.close()
            floor.wait()
        return rows

    # ---------------------------------------------------------- CPU of a warm run
    def warm_cpu(self):
        out = {}
        n = self.args.cpu_runs
        for pol in ("default", "data"):
            c = self.mcp(pol)
            try:
                for _ in range(5):
                    c.run_python("print('hello')")
                time.sleep(1)
                b0 = machine_busy_s()
                t0 = time.perf_counter()
                for _ in range(n):
                    c.run_python("print('hello')")
                out[pol] = {"cpu": (machine_busy_s() - b0) / n, "wall": (time.perf_counter() - t0) / n}
            finally:
                c.close()
        print("warm cpu: %s" % out, file=sys.stderr)
        return out

    # ---------------------------------------------------------- session density
    def density(self):
        """N idle sessions; then a pandas cell in K of them (K = min(N, 100):
        a session that imported pandas without the preload holds 35 MiB,
        and a thousand of those do not fit this machine)."""
        n = self.args.sessions
        k = min(n, 100)
        out = {}
        for pol in ("default", "data"):
            path = self.tmp / (pol + "-sessions.json")
            path.write_text(json.dumps({"extends": pol, "sessions": {"max": n, "max_per_client": n,
                                                                        "idle_timeout": "1h"}}))
            c = self.mcp(str(path))
            try:
                time.sleep(1)
                avail0 = mem_available()
                before = set(descendants(c.proc.pid))
                sids = []
                for _ in range(n):
                    _, res = c.request("tools/call", {"name": "session_open", "arguments": {}})
                    sids.append(res["structuredContent"]["session_id"])
                time.sleep(2)
                idle_pids = [p for p in descendants(c.proc.pid) if p not in before]
                avail1 = mem_available()
                idle = {"pss": sum(pss(p) for p in idle_pids) / n, "avail": (avail0 - avail1) / n}
                for sid in sids[:k]:
                    c.request("tools/call", {"name": "run_python", "arguments": {"code": SMALL_FRAME,
                                                                                 "session_id": sid}})
                time.sleep(2)
                after = [p for p in descendants(c.proc.pid) if p not in before]
                # every session's processes now, less the idle ones' share
                total = sum(pss(p) for p in after)
                pandas = {"pss": (total - idle["pss"] * (n - k)) / k,
                          "avail": idle["avail"] + (avail1 - mem_available()) / k}
                out[pol] = {"n": n, "k": k, "idle": idle, "pandas": pandas, "procs": len(after)}
            finally:
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
             "included); `floor`: the same code in a python3 that has the modules imported already. Ratios "
             "are to `python3`.\n")
    L.append("| workload | python3 | floor | pycell mcp, default | ratio | pycell mcp, data | ratio |")
    L.append("|---|---|---|---|---|---|---|")
    for key, r in rows.items():
        b = p50(r["python3"])
        L.append("| %s | %s | %s | %s | %.2fx | %s | %.3fx |" % (
            r["title"], fmt(b), fmt(p50(r["floor"])), fmt(p50(r["default"])), p50(r["default"]) / b,
            fmt(p50(r["data"])), p50(r["data"]) / b))
    L.append("")
    L.append("A warm `print('hello')` through `pycell mcp` (%d runs one after another): the machine's "
             "CPU per run (its busy time in /proc/stat, as bench.py counts it: steal left out) and wall time per run.\n" % args.cpu_runs)
    L.append("| policy | CPU per run | wall per run |")
    L.append("|---|---|---|")
    for pol, v in cpu.items():
        L.append("| %s | %s | %s |" % (pol, fmt(v["cpu"]), fmt(v["wall"])))
    L.append("")
    L.append("%d sessions on one `pycell mcp`: per session, the PSS of its jail's processes and the drop "
             "in MemAvailable (page tables, namespaces, tmpfs and cgroups included), idle, and for %d of "
             "them after a cell that imported pandas and built a 100-row DataFrame.\n"
             % (args.sessions, min(args.sessions, 100)))
    L.append("| policy | idle PSS | idle MemAvailable | pandas PSS | pandas MemAvailable |")
    L.append("|---|---|---|---|---|")
    for pol, v in dens.items():
        L.append("| %s | %.1f MiB | %.1f MiB | %.1f MiB | %.1f MiB |" % (
            pol, v["idle"]["pss"] / MIB, v["idle"]["avail"] / MIB, v["pandas"]["pss"] / MIB,
            v["pandas"]["avail"] / MIB))
    return "\n".join(L) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iterations", type=int, default=15, help="runs per workload and runner (default 15)")
    ap.add_argument("--sessions", type=int, default=100, help="sessions for the density rows (default 100)")
    ap.add_argument("--cpu-runs", type=int, default=200, help="warm runs for the CPU rows (default 200)")
    ap.add_argument("--quick", action="store_true", help="3 iterations, 10 sessions, 20 CPU runs")
    ap.add_argument("--phases", default="latency,cpu,density",
                    help="which tables (default latency,cpu,density)")
    ap.add_argument("--out", help="write the report here too (markdown)")
    args = ap.parse_args()
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
        dens = b.density() if "density" in phases else {}
    except SetupError as e:
        print("data.py: %s" % e, file=sys.stderr)
        return 2
    except BenchError as e:
        print("data.py: %s" % e, file=sys.stderr)
        return 1
    finally:
        b.reaper.kill_all()
    text = report(args, rows, cpu, dens)
    sys.stdout.write(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
