#!/usr/bin/python3
"""What a zygote per client costs `pycell serve`: each token's first warm
run (its zygote started then) beside its next ones, and each zygote's
memory with its ready jails.

    tests/bench/tokens.py [TREE] [--tokens N]

TREE is a built source tree (its ./pycell, policies and runtime; default:
this one).  One `pycell serve` on loopback with N tokens (default 4); for
each token in turn: its first run_python call, then ten more 0.3 s apart
(so that each finds a ready jail), p50.  Then the PSS of every zygote and
of the jails below it (/proc/PID/smaps_rollup).
"""

import argparse
import hashlib
import http.client
import json
import os
import re
import statistics
import subprocess
import tempfile
import time
from pathlib import Path


def pss_kib(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            return sum(int(line.split()[1]) for line in f if line.startswith("Pss:"))
    except OSError:
        return 0


def children():
    kids = {}
    for d in os.listdir("/proc"):
        try:
            with open(f"/proc/{d}/stat") as f:
                st = f.read()
        except OSError:
            continue
        if d.isdigit():
            kids.setdefault(int(st[st.rindex(")") + 2:].split()[1]), []).append(int(d))
    return kids


def tree_pss(pid, kids):
    return pss_kib(pid) + sum(tree_pss(k, kids) for k in kids.get(pid, []))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tree", type=Path, nargs="?", default=Path(__file__).resolve().parents[2])
    ap.add_argument("--tokens", type=int, default=4)
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="pycell-bench-")
    toks = os.path.join(d, "tokens.json")
    names = [f"t{i}" for i in range(a.tokens)]
    with open(toks, "w") as f:
        json.dump({"tokens": [{"name": n, "sha256": hashlib.sha256(n.encode()).hexdigest()} for n in names]}, f)
    os.chmod(toks, 0o600)
    p = subprocess.Popen([str(a.tree / "pycell"), "serve", "--listen", "127.0.0.1:0", "--tokens", toks],
                         stderr=subprocess.PIPE, env=dict(os.environ, PYCELL_DATADIR=str(a.tree)))
    buf = b""
    while not (m := re.search(rb"listening on \S+:(\d+)", buf)):
        chunk = p.stderr.read1(4096)
        if not chunk:
            raise SystemExit("tokens.py: pycell serve did not start: " + buf.decode(errors="replace"))
        buf += chunk
    port = int(m.group(1))

    def call(token):
        c = http.client.HTTPConnection("127.0.0.1", port)
        meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                           "params": {"name": "run_python", "arguments": {"code": "1"}, "_meta": meta}})
        t0 = time.perf_counter()
        c.request("POST", "/mcp", body, {"Content-Type": "application/json",
                                         "Accept": "application/json, text/event-stream",
                                         "Authorization": "Bearer " + token, "MCP-Protocol-Version": "2026-07-28",
                                         "Mcp-Method": "tools/call", "Mcp-Name": "run_python"})
        data = c.getresponse().read()
        assert json.loads(data)["result"]["structuredContent"]["return_value"] == 1, data
        return (time.perf_counter() - t0) * 1000

    try:
        time.sleep(1)
        print(f"load {os.getloadavg()[0]:.2f}")
        for n in names:
            first = call(n)
            later = []
            for _ in range(10):
                time.sleep(0.3)
                later.append(call(n))
            print(f"{n}: first run {first:.1f} ms (its zygote started), then p50 {statistics.median(later):.2f} ms")
        time.sleep(1)
        kids = children()
        for z in sorted(kids.get(p.pid, [])):
            print(f"zygote {z}: PSS {pss_kib(z)} KiB, with its ready jails {tree_pss(z, kids)} KiB")
    finally:
        p.terminate()
        p.wait(10)


if __name__ == "__main__":
    main()
