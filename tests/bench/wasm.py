#!/usr/bin/python3
"""The wasm backend's cold start, side by side with python3 and native runs.

    tests/bench/wasm.py [--iterations N] [--pace S] [--tree DIR] [--out FILE]

Alternating every iteration, it times bare /usr/bin/python3 -c
'print("hello")', `pycell run` of the same (native), `pycell run --backend
wasm` of the same (Node, Pyodide from its memory snapshot, in the same
jail), and bare node loading Pyodide from the same snapshot outside any
jail (what the jail adds); then warm calls of `pycell mcp` on the wire,
native and wasm, one every --pace seconds (a wasm ready jail takes about
0.4 s of CPU to make).  Prints p50 and p90 and each against python3.
DIR is a built source tree with the wasm backend (default: this one).
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

CODE = 'print("hello")'


def mcp_calls(pycell, env, backend, n, pace):
    """p50 of tools/call run_python print("hello") on the wire (request
    written to response read), one call every `pace` seconds: the pool
    refills between calls, as it does at an agent's pace."""
    import json
    import tempfile
    pol = Path(tempfile.mkdtemp(prefix="pycell-bench-wasm-")) / "p.json"
    pol.write_text(json.dumps({"extends": "default", "backend": backend[0] if backend else "native"}))
    p = subprocess.Popen([pycell, "mcp", "--policy", str(pol)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)

    def call(i, method, params):
        p.stdin.write((json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n").encode())
        p.stdin.flush()
        while True:
            m = json.loads(p.stdout.readline())
            if m.get("id") == i:
                return m

    try:
        call(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                               "clientInfo": {"name": "bench", "version": "1"}})
        out = []
        for i in range(1, n + 1):
            time.sleep(pace)
            t0 = time.perf_counter()
            r = call(i, "tools/call", {"name": "run_python", "arguments": {"code": CODE}})
            out.append((time.perf_counter() - t0) * 1000)
            if r["result"]["structuredContent"]["stdout"] != "hello\n":
                sys.exit("wasm.py: a call failed: %r" % r)
    finally:
        p.stdin.close()
        p.wait()
        shutil.rmtree(pol.parent, ignore_errors=True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--pace", type=float, default=1.0, help="seconds between MCP calls (default 1)")
    ap.add_argument("--out", help="also write the report to this file (tests/bench/RESULTS-wasm.md)")
    ap.add_argument("--tree", default=os.environ.get("PYCELL_DATADIR") or str(Path(__file__).resolve().parents[2]),
                    help="a built source tree (default: $PYCELL_DATADIR, else this one); "
                         "its pycell, or $PYCELL")
    a = ap.parse_args()
    tree = Path(a.tree)
    pycell = os.environ.get("PYCELL") or str(tree / "pycell")
    wasm = tree / "runtime" / "wasm"
    if not (wasm / "pyodide" / "snapshot.bin").exists():
        sys.exit("wasm.py: %s has no built wasm backend (configure found no Node 20 or Pyodide?)" % tree)
    env = dict(os.environ, PYCELL_DATADIR=str(tree))
    work = Path("/tmp/pycell-bench-wasm")
    (work / "run").mkdir(parents=True, exist_ok=True)
    (work / "ws").mkdir(exist_ok=True)
    (work / "run" / "main.py").write_text(CODE)
    import shutil
    shutil.rmtree(work / "run" / "lib", ignore_errors=True)
    shutil.copytree(tree / "runtime" / "pycell", work / "run" / "lib" / "pycell")
    runners = {
        "python3": ["/usr/bin/python3", "-c", CODE],
        "pycell run (native)": [pycell, "run", "-c", CODE],
        "pycell run --backend wasm": [pycell, "run", "--backend", "wasm", "-c", CODE],
        "node + Pyodide, no jail": ["node", "--experimental-permission", "--allow-fs-read=%s" % wasm,
                                    "--allow-fs-read=%s" % work, "--allow-fs-write=%s" % (work / "ws"),
                                    "--disallow-code-generation-from-strings", "--liftoff-only",
                                    "--no-warnings", str(wasm / "runner.mjs"),
                                    str(work / "run"), str(work / "ws"), "script", "main.py"],
    }
    load0 = os.getloadavg()[0]
    times = {k: [] for k in runners}
    warm = {}
    for name, extra in (("pycell mcp, native", []), ("pycell mcp --backend wasm", ["wasm"])):
        warm[name] = mcp_calls(pycell, env, extra, a.iterations, a.pace)
    for _ in range(a.iterations):
        for name, argv in runners.items():
            t0 = time.perf_counter()
            out = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            dt = time.perf_counter() - t0
            if out.returncode != 0 or out.stdout != b"hello\n":
                sys.exit("wasm.py: %s failed (%d): %r %r" % (name, out.returncode, out.stdout, out.stderr[-500:]))
            times[name].append(dt * 1000)
    base = statistics.median(times["python3"])
    lines = ["load average %.2f at the start, %.2f at the end; %d iterations" % (load0, os.getloadavg()[0],
                                                                             a.iterations),
             "", "| | p50 ms | p90 ms | p50 / python3 |", "|---|---:|---:|---:|"]
    for name, t in list(times.items()) + list(warm.items()):
        t.sort()
        p50, p90 = statistics.median(t), t[int(len(t) * 0.9) - 1]
        lines.append("| %s | %.1f | %.1f | %.2fx |" % (name, p50, p90, p50 / base))
    lines += ["", "`pycell mcp`: warm starts, one call every %g s, request written to response read; "
              "the rest alternate, one run each, `print(\"hello\")`." % a.pace]
    report = "\n".join(lines) + "\n"
    print(report, end="")
    if a.out:
        Path(a.out).write_text("# The wasm backend beside python3 and native runs\n\n"
                               "`%s`, %s\n\n%s" % (" ".join(["tests/bench/wasm.py"] + sys.argv[1:]),
                                                   time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), report))


if __name__ == "__main__":
    main()
