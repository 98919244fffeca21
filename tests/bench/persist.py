#!/usr/bin/python3
"""Paused, resumed and forked sessions (pycell.conf state_dir): how long
a session takes to pause to disk, to resume at its next cell, and to
fork, for a small session and for one holding a 100 MB DataFrame.

    /usr/bin/python3 tests/bench/persist.py [--quick] [--iterations N]
                                            [--frame-mb N] [--out FILE]

Each case runs on its own `pycell mcp -v` with a state directory under
/var/tmp (a disk, as /var/lib/pycell is) and a policy whose sessions
pause after 1 s idle: the small case extends the default policy, the
frame case the data policy (pandas preloaded, as a data session would
run).  Measured per iteration: the pause (the server's own log line: from
the snapshot's start to its record synced), the resume (the server's log
line: from the cell's start to the state restored, a fresh jail
included; and the cell's round trip beside it), and the fork (session_fork's
round trip).  Beside them, in the same run, the floor: python3 with the
modules imported pickling the same globals (protocol 5) to a file on the
same disk (with the files it wrote) and syncing it, and a second python3
loading it back: what
keeping the state costs without pycell.  Ratios are to the floor.
"""

import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import PYTHON, REPO, RUN_ENV, BenchError, McpClient, Reaper, SetupError  # noqa: E402

SMALL = ("import json, collections\n"
         "rows = [{'id': i, 'name': 'row %d' % i, 'tags': ['a', 'b']} for i in range(20000)]\n"
         "index = collections.Counter(r['name'][-1] for r in rows)\n"
         "def score(r):\n    return r['id'] * 2 + len(r['tags'])\n"
         "open('/workspace/notes.txt', 'w').write('x' * 100000)\n")
SMALL_CHECK = "sum(score(r) for r in rows)"


def frame(mb):
    n = mb * (1 << 20) // 16
    return ("import numpy as np, pandas as pd\n"
            "df = pd.DataFrame({'a': np.arange(%d, dtype='f8'), 'b': np.arange(%d, dtype='i8')})\n" % (n, n))


FRAME_CHECK = "float(df.a.sum())"

# the floor: pickle the globals a cell left (modules aside) to a synced
# file, and load them in another python3 that has the modules imported
FLOOR_DUMP = r"""
import os, pickle, sys, time, types
code, path, ws = sys.argv[1], sys.argv[2], sys.argv[3]
ns = {"__name__": "__main__"}
exec(compile(code.replace("/workspace/", ws + "/"), "<cell>", "exec"), ns)
values = {k: v for k, v in ns.items() if not k.startswith("__") and not isinstance(v, types.ModuleType)
          and not callable(v)}
t = time.perf_counter()
values["workspace"] = {n: open(os.path.join(ws, n), "rb").read() for n in os.listdir(ws)}
with open(path, "wb") as f:
    pickle.dump(values, f, protocol=5)
    f.flush()
    os.fsync(f.fileno())
print(time.perf_counter() - t)
"""
FLOOR_LOAD = r"""
import pickle, sys, time
import numpy, pandas
t = time.perf_counter()
with open(sys.argv[1], "rb") as f:
    pickle.load(f)
print(time.perf_counter() - t)
"""


def p50(v):
    return statistics.median(v)


def fmt(s):
    return "%.1f ms" % (s * 1000) if s < 10 else "%.1f s" % s


class Bench:
    def __init__(self, args):
        self.args = args
        self.reaper = Reaper()
        self.env = dict(RUN_ENV, PYCELL_DATADIR=str(REPO))
        self.tmp = Path(tempfile.mkdtemp(prefix="pycell-bench-persist-", dir="/var/tmp"))
        self.pycell = str(REPO / "pycell")

    def server(self, name, base):
        state = self.tmp / (name + "-state")
        conf = self.tmp / (name + ".conf")
        conf.write_text(json.dumps({"state_dir": str(state)}))
        pol = self.tmp / (name + ".json")
        pol.write_text(json.dumps({"extends": base, "sessions": {"idle_timeout": "1s"}}))
        c = McpClient("pycell mcp (%s)" % name, [self.pycell, "mcp", "-v", "--config", str(conf), "--policy",
                                                  str(pol)], self.env, str(REPO), self.reaper, 300)
        c.initialize()
        return c

    def tool(self, c, name, args):
        t, res = c.request("tools/call", {"name": name, "arguments": args})
        if res.get("isError"):
            raise BenchError("%s: %s" % (name, json.dumps(res)[:1000]))
        return t, res.get("structuredContent") or {}

    def logged_ms(self, c, pattern, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = re.findall(pattern, c.stderr_tail.decode(errors="replace"))
            if m:
                return float(m[-1]) / 1000
            time.sleep(0.02)
        raise BenchError("no log line %r; stderr: %r" % (pattern, c.stderr_tail[-1000:]))

    def floor(self, code):
        path = self.tmp / "floor.pickle"
        ws = self.tmp / "workspace"
        ws.mkdir(exist_ok=True)
        dump = subprocess.run([PYTHON, "-c", FLOOR_DUMP, code, str(path), str(ws)], capture_output=True,
                              text=True, env=self.env, timeout=300)
        load = subprocess.run([PYTHON, "-c", FLOOR_LOAD, str(path)], capture_output=True, text=True,
                              env=self.env, timeout=300)
        if dump.returncode or load.returncode:
            raise BenchError("floor: %s %s" % (dump.stderr[-800:], load.stderr[-800:]))
        size = path.stat().st_size
        path.unlink()
        return float(dump.stdout), float(load.stdout), size

    def case(self, name, base, code, check):
        c = self.server(name, base)
        r = {k: [] for k in ("pause", "resume", "resume_rt", "fork", "floor_dump", "floor_load", "bytes",
                             "floor_bytes")}
        try:
            for i in range(self.args.iterations + 1):
                _, o = self.tool(c, "session_open", {})
                sid = o["session_id"]
                _, res = self.tool(c, "run_python", {"session_id": sid, "code": code})
                if res.get("status") != "ok":
                    raise BenchError("setup cell: %s" % json.dumps(res)[:1000])
                t_fork, fk = self.tool(c, "session_fork", {"session_id": sid})
                self.tool(c, "session_close", {"session_id": fk["session_id"]})
                # idle: paused at the next tick of the server's timer
                pause = self.logged_ms(c, r"session %s paused in (\d+) ms" % sid)
                t_res, res = self.tool(c, "run_python", {"session_id": sid, "code": check})
                if not res.get("session", {}).get("resumed"):
                    raise BenchError("the cell did not resume its session: %s" % json.dumps(res)[:1000])
                resume = self.logged_ms(c, r"session %s resumed in (\d+) ms" % sid)
                self.tool(c, "session_close", {"session_id": sid})
                d, l, fsize = self.floor(code)
                if i == 0:
                    continue   # warm-up
                for k, v in (("pause", pause), ("resume", resume), ("resume_rt", t_res), ("fork", t_fork),
                             ("floor_dump", d), ("floor_load", l), ("bytes", fk["snapshot_bytes"]),
                             ("floor_bytes", fsize)):
                    r[k].append(v)
                print("%s %d: pause %s, resume %s (cell %s), fork %s; floor dump %s load %s" % (
                    name, i, fmt(pause), fmt(resume), fmt(t_res), fmt(t_fork), fmt(d), fmt(l)), file=sys.stderr)
        finally:
            c.close()
        return r


def report(args, cases):
    lines = ["# Paused, resumed and forked sessions", "",
             "`/usr/bin/python3 tests/bench/persist.py --iterations %d --frame-mb %d` on %s, %s, %d CPUs, "
             "python3 %s; %s." % (args.iterations, args.frame_mb, platform.node(), platform.machine(),
                                   os.cpu_count(), platform.python_version(),
                                   datetime.date.today().isoformat()), "",
             "p50 of each. Pause: the snapshot written and synced (server log); resume: from the cell's start "
             "to the state restored in a fresh jail (server log), and the cell's whole round trip; fork: "
             "session_fork's round trip. Floor: python3 pickling the same globals (protocol 5) to a synced "
             "file on the same disk, and loading them in a python3 with the modules imported.", "",
             "| case | state | pause | floor dump | ratio | resume | cell round trip | floor load | ratio "
             "| fork |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name, title, r in cases:
        lines.append("| %s | %.1f MB | %s | %s | %.1fx | %s | %s | %s | %.1fx | %s |" % (
            title, p50(r["bytes"]) / 1e6, fmt(p50(r["pause"])), fmt(p50(r["floor_dump"])),
            p50(r["pause"]) / p50(r["floor_dump"]), fmt(p50(r["resume"])), fmt(p50(r["resume_rt"])),
            fmt(p50(r["floor_load"])), p50(r["resume"]) / p50(r["floor_load"]), fmt(p50(r["fork"]))))
    lines.append("")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iterations", type=int, default=7, help="per case (default 7)")
    ap.add_argument("--frame-mb", type=int, default=100, help="the DataFrame's size (default 100)")
    ap.add_argument("--quick", action="store_true", help="2 iterations, a 20 MB frame")
    ap.add_argument("--out", help="write the report here too (markdown)")
    args = ap.parse_args()
    if args.quick:
        args.iterations, args.frame_mb = 2, 20
    for mod in ("pandas", "dill"):
        if subprocess.run([PYTHON, "-c", "import " + mod], capture_output=True).returncode:
            print("persist.py: %s is not installed for %s (apt-get install python3-%s)" % (mod, PYTHON, mod),
                  file=sys.stderr)
            return 2
    b = Bench(args)
    try:
        cases = [("small", "a small session (20,000 dicts, a function, a 100 kB file)",
                  b.case("small", "default", SMALL, SMALL_CHECK)),
                 ("frame", "a %d MB DataFrame (data policy)" % args.frame_mb,
                  b.case("frame", "data", frame(args.frame_mb), FRAME_CHECK))]
    except SetupError as e:
        print("persist.py: %s" % e, file=sys.stderr)
        return 2
    except BenchError as e:
        print("persist.py: %s" % e, file=sys.stderr)
        return 1
    finally:
        b.reaper.kill_all()
        subprocess.run(["rm", "-rf", str(b.tmp)])
    text = report(args, cases)
    sys.stdout.write(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
