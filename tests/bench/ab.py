#!/usr/bin/python3
"""Two pycell builds side by side: is a change faster or slower?

    tests/bench/ab.py OLD_TREE NEW_TREE [--iterations N]

Each tree is a built source tree (its ./pycell, its policies and runtime).
Under the same load, alternating the two every iteration (order swapped
each time), it measures the warm MCP tools/call print("hello") (one
`pycell mcp` per tree, warm starts being its default), the same as a
cell of a session open on each server, and the cold
`pycell run -c 'print("hello")'`, beside bare /usr/bin/python3 -c.
Prints p50 and p90 and the ratio to python3.  For the committed numbers
of one build against python3 and bwrap, use `make bench`.
"""

import argparse
import json
import os
import statistics
import subprocess
import time
from pathlib import Path

CODE = 'print("hello")'


def mcp_server(tree):
    env = dict(os.environ, PYCELL_DATADIR=str(tree))
    p = subprocess.Popen([str(tree / "pycell"), "mcp", "--warm"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)

    def call(i, method, params):
        p.stdin.write((json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params})
                       + "\n").encode())
        p.stdin.flush()
        while True:
            m = json.loads(p.stdout.readline())
            if m.get("id") == i:
                return m

    call(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "ab", "version": "1"}})
    return p, call


def pct(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, int(len(v) * q))]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path)
    ap.add_argument("--iterations", type=int, default=200)
    a = ap.parse_args()
    trees = {"old": a.old.resolve(), "new": a.new.resolve()}
    warmup = max(5, a.iterations // 10)

    servers = {n: mcp_server(t) for n, t in trees.items()}
    time.sleep(1)   # ready jails made ahead
    warm = {n: [] for n in trees}
    for i in range(1, a.iterations + warmup + 1):
        for n in (["old", "new"] if i % 2 else ["new", "old"]):
            t0 = time.perf_counter()
            m = servers[n][1](i, "tools/call", {"name": "run_python", "arguments": {"code": CODE}})
            if i > warmup:
                warm[n].append(time.perf_counter() - t0)
            assert m["result"]["structuredContent"]["stdout"] == "hello\n", m
    cells = {n: [] for n in trees}
    sids = {n: servers[n][1](0, "tools/call", {"name": "session_open", "arguments": {}})
            ["result"]["structuredContent"]["session_id"] for n in trees}
    for i in range(1, a.iterations + warmup + 1):
        for n in (["old", "new"] if i % 2 else ["new", "old"]):
            t0 = time.perf_counter()
            m = servers[n][1](i, "tools/call", {"name": "run_python",
                                                "arguments": {"code": CODE, "session_id": sids[n]}})
            if i > warmup:
                cells[n].append(time.perf_counter() - t0)
            assert m["result"]["structuredContent"]["stdout"] == "hello\n", m
    for p, _ in servers.values():
        p.stdin.close()
        p.wait()

    cold = {n: [] for n in trees}
    py = []
    for i in range(a.iterations + warmup):
        for n in (["old", "new"] if i % 2 else ["new", "old"]):
            t0 = time.perf_counter()
            subprocess.run([str(trees[n] / "pycell"), "run", "-c", CODE], check=True, stdout=subprocess.DEVNULL,
                           env=dict(os.environ, PYCELL_DATADIR=str(trees[n])))
            if i >= warmup:
                cold[n].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        subprocess.run(["/usr/bin/python3", "-c", CODE], check=True, stdout=subprocess.DEVNULL)
        if i >= warmup:
            py.append(time.perf_counter() - t0)

    base = statistics.median(py)
    print(f"python3 -c: p50 {base * 1000:.2f} ms   load {os.getloadavg()[0]:.2f}")
    for kind, data in (("warm mcp tools/call", warm), ("session cell", cells), ("cold pycell run", cold)):
        for n in trees:
            m = statistics.median(data[n])
            print(f"{kind:20} {n}: p50 {m * 1000:6.2f} ms  p90 {pct(data[n], 0.9) * 1000:6.2f} ms  "
                  f"{m / base:.2f}x python3")


if __name__ == "__main__":
    main()
