#!/usr/bin/python3
"""What code mode saves an agent's context: the bytes of tool definitions
it receives, and a scripted task done both ways.

    /usr/bin/python3 tests/bench/codemode.py [--files N] [--out FILE]

Three real MCP servers from npm (tests/tools: server-memory,
server-filesystem and server-everything).  Definitions: the tools/list an
agent gets from each server directly, against the one it gets from
`pycell mcp` with the three as upstreams (run_python and pycell's own tools; the servers' tools stay
inside, reached as modules).  The tasks, each as an agent would do it
with the servers connected directly (one tool call per step, every
request and result passing through the model) and with pycell (one
run_python call whose code does the steps and returns only the answer):

  graph  record N people with an employer, who knows whom, then name the
         people who know someone at one company;
  files  count the lines of every .txt file in a directory of N files.

Bytes through the model are the JSON of each call's arguments plus its
result (content and structuredContent), as a client hands them to the
model; both ways must give the same answer.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TOOLS = REPO / "tests" / "tools" / "node_modules" / "@modelcontextprotocol"
MEMORY_JS = TOOLS / "server-memory" / "dist" / "index.js"
FS_JS = TOOLS / "server-filesystem" / "dist" / "index.js"
EVERYTHING_JS = TOOLS / "server-everything" / "dist" / "index.js"


class Stdio:
    """An MCP server over stdio, spoken to line by line."""

    def __init__(self, argv, env=None):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  env=env, text=True)
        self.n = 0
        self.call("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                 "clientInfo": {"name": "codemode-bench", "version": "1"}})
        self.p.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
        self.p.stdin.flush()

    def call(self, method, params):
        self.n += 1
        self.p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": self.n, "method": method, "params": params}) + "\n")
        self.p.stdin.flush()
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise SystemExit("codemode.py: %s ended before answering %s" % (self.p.args, method))
            msg = json.loads(line)
            if msg.get("id") == self.n:
                if "error" in msg:
                    raise SystemExit("codemode.py: %s: %s" % (method, msg["error"]))
                return msg["result"]

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=20)


class Agent:
    """Counts what passes through the model: each call's arguments and its
    result."""

    def __init__(self):
        self.calls = 0
        self.bytes = 0

    def tool(self, server, name, args):
        res = server.call("tools/call", {"name": name, "arguments": args})
        self.calls += 1
        seen = {k: res[k] for k in ("content", "structuredContent", "isError") if k in res}
        self.bytes += len(json.dumps(args)) + len(json.dumps(seen))
        if res.get("isError"):
            raise SystemExit("codemode.py: %s failed: %s" % (name, json.dumps(res)[:500]))
        return res


def people(n):
    companies = ["acme", "globex", "initech"]
    ppl = [{"name": "p%03d" % i, "entityType": "person", "observations": ["works at %s" % companies[i % 3]]}
           for i in range(n)]
    rel = [{"from": "p%03d" % i, "to": "p%03d" % ((i * 7 + 1) % n), "relationType": "knows"} for i in range(n)]
    return ppl, rel


def graph_answer(ppl, rel):
    at = {p["name"] for p in ppl if "works at globex" in p["observations"]}
    return sorted({r["from"] for r in rel if r["to"] in at})


GRAPH_CODE = """
from pycell.tools import memory
memory.create_entities(entities=people)
memory.create_relations(relations=relations)
g = memory.read_graph()
at = {e["name"] for e in g["entities"] if "works at globex" in e["observations"]}
sorted({r["from"] for r in g["relations"] if r["to"] in at})
"""

FILES_CODE = """
from pycell.tools import filesystem
listing = filesystem.list_directory(path=root)
text = listing if isinstance(listing, str) else listing["content"]
names = [l.split("] ", 1)[1] for l in text.splitlines() if l.startswith("[FILE]") and l.endswith(".txt")]
counts = {}
for name in names:
    got = filesystem.read_text_file(path=root + "/" + name)
    body = got if isinstance(got, str) else got["content"]
    counts[name] = len(body.splitlines())
counts
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--people", type=int, default=30, help="people in the graph task (default 30)")
    ap.add_argument("--files", type=int, default=20, help="files in the files task (default 20)")
    ap.add_argument("--out", help="write the report here too (markdown)")
    args = ap.parse_args()
    if not MEMORY_JS.exists() or not FS_JS.exists() or not EVERYTHING_JS.exists() or not shutil.which("node"):
        print("codemode.py: needs node and the npm servers (npm ci --prefix tests/tools)", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="pycell-bench-codemode-"))
    try:
        return run(args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(args, tmp):
    root = tmp / "files"
    root.mkdir()
    for i in range(args.files):
        (root / ("f%02d.txt" % i)).write_text("".join("line %d of file %d, some words to read\n" % (j, i)
                                                      for j in range(10 + 3 * i)))
    expect_files = {"f%02d.txt" % i: 10 + 3 * i for i in range(args.files)}
    ppl, rel = people(args.people)
    expect_graph = graph_answer(ppl, rel)
    env = dict(os.environ)

    # ---- directly: the servers' own tools/list, and the tasks step by step
    mem = Stdio(["node", str(MEMORY_JS)], dict(env, MEMORY_FILE_PATH=str(tmp / "direct.jsonl")))
    fs = Stdio(["node", str(FS_JS), str(root)])
    ev = Stdio(["node", str(EVERYTHING_JS)])
    defs_direct = {name: len(json.dumps(s.call("tools/list", {})["tools"])) for name, s in
                   (("memory", mem), ("filesystem", fs), ("everything", ev))}
    ev.close()
    g = Agent()
    g.tool(mem, "create_entities", {"entities": ppl})
    g.tool(mem, "create_relations", {"relations": rel})
    graph = g.tool(mem, "read_graph", {})["structuredContent"]
    at = {e["name"] for e in graph["entities"] if "works at globex" in e["observations"]}
    got_graph = sorted({r["from"] for r in graph["relations"] if r["to"] in at})
    f = Agent()
    listing = f.tool(fs, "list_directory", {"path": str(root)})["content"][0]["text"]
    names = [ln.split("] ", 1)[1] for ln in listing.splitlines() if ln.startswith("[FILE]")]
    got_files = {}
    for name in names:
        body = f.tool(fs, "read_text_file", {"path": str(root / name)})["content"][0]["text"]
        got_files[name] = len(body.splitlines())
    mem.close()
    fs.close()
    assert got_graph == expect_graph and got_files == expect_files, (got_graph, got_files)

    # ---- through pycell: one server, one run_python per task
    conf = tmp / "pycell.conf"
    conf.write_text(json.dumps({"upstreams": {
        "memory": {"command": ["node", str(MEMORY_JS)], "env": {"MEMORY_FILE_PATH": str(tmp / "pycell.jsonl")}},
        "filesystem": {"command": ["node", str(FS_JS), str(root)]},
        "everything": {"command": ["node", str(EVERYTHING_JS)]}}}))
    pol = tmp / "policy.json"
    pol.write_text(json.dumps({"extends": "default", "tools": {"allow": ["memory.*", "filesystem.*", "everything.*"],
                                                               "budget": 200}}))
    pc = Stdio([str(REPO / "pycell"), "mcp", "--config", str(conf), "--policy", str(pol)],
               dict(env, PYCELL_DATADIR=str(REPO)))
    defs_pycell = len(json.dumps(pc.call("tools/list", {})["tools"]))
    pg = Agent()
    r = pg.tool(pc, "run_python", {"code": GRAPH_CODE, "variables": {"people": ppl, "relations": rel}})
    pf = Agent()
    r2 = pf.tool(pc, "run_python", {"code": FILES_CODE, "variables": {"root": str(root)}})
    pc.close()
    assert r["structuredContent"]["return_value"] == expect_graph, r
    assert r2["structuredContent"]["return_value"] == expect_files, r2

    lines = ["# Code mode: what passes through the model (tests/bench/codemode.py)", "",
             "`%s`; the servers @modelcontextprotocol/server-memory, server-filesystem "
             "and server-everything (tests/tools); the tasks use the first two. Bytes of JSON." % " ".join(sys.argv[1:] or ["-"]), "",
             "| tool definitions an agent receives | bytes |", "|---|---|"]
    for name, n in defs_direct.items():
        lines.append("| %s, connected directly | %d |" % (name, n))
    lines.append("| the three, connected directly | %d |" % sum(defs_direct.values()))
    lines.append("| pycell with the three as upstreams (their tools inside, as modules) | %d |" % defs_pycell)
    lines += ["", "| task | directly: calls | bytes | pycell: calls | bytes | ratio |", "|---|---|---|---|---|---|"]
    for title, d, p in (("graph: %d people, who knows whom, who knows someone at globex" % args.people, g, pg),
                        ("files: the lines of each of %d .txt files" % args.files, f, pf)):
        lines.append("| %s | %d | %d | %d | %d | %.3fx |" % (title, d.calls, d.bytes, p.calls, p.bytes,
                                                             p.bytes / d.bytes))
    lines.append("")
    lines.append("Through pycell the people and relations still go in once (as `variables`); the graph read "
                 "back and each file's text stay in the jail, and only the answer comes out.")
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
