"""A tiny stdio MCP server for the tool-call tests: tools that misbehave
on purpose.  Run with /usr/bin/python3; no dependencies.

Tools:
  echo {text}        -> text content "text", structuredContent {"echo": text}
  pid {}             -> {"pid": os.getpid()}: tells restarts apart
  hang {}            -> never answers; the whole server stops reading (a
                        wedged process: it does not answer ping either)
  slow {seconds}     -> answers after `seconds` (single-threaded: nothing
                        else is answered meanwhile)
  crash {}           -> exits with status 3 without answering
  big {bytes}        -> a text result of `bytes` bytes
  fail {}            -> a JSON-RPC error (-32603 "it failed on purpose")
  tool_error {}      -> a result with isError true
  env {}             -> the server's environment (checks what it was given)
  Echo {text}        -> like echo: a name that differs only in case

Environment: FAKE_MCP_STATE, a directory where each start appends
"NAME PID" to "starts" and each tools/call appends "NAME TOOL" to "calls"
(NAME is $FAKE_MCP_NAME), so a test can count restarts and see exactly
which calls reached a server.  FAKE_MCP_START_DELAY (seconds) holds the
server back before it reads anything, as a slow-starting server would.
"""

import json
import os
import sys
import time

TOOLS = [
    {"name": "echo", "description": "Echo the text back",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}},
                     "required": ["text"]}},
    {"name": "pid", "description": "The server's pid", "inputSchema": {"type": "object"}},
    {"name": "hang", "description": "Never answer", "inputSchema": {"type": "object"}},
    {"name": "slow", "description": "Answer after some seconds",
     "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}}}},
    {"name": "crash", "description": "Exit without answering", "inputSchema": {"type": "object"}},
    {"name": "big", "description": "A large text result",
     "inputSchema": {"type": "object", "properties": {"bytes": {"type": "integer"}}}},
    {"name": "fail", "description": "A JSON-RPC error", "inputSchema": {"type": "object"}},
    {"name": "tool_error", "description": "isError result", "inputSchema": {"type": "object"}},
    {"name": "env", "description": "The server's environment", "inputSchema": {"type": "object"}},
    {"name": "Echo", "description": "Same as echo, different case", "inputSchema": {"type": "object"}},
]

# FAKE_MCP_CODEMODE=1: tools whose names and schemas exercise code mode
# (runtime/pycell/_codemode.py): names that are not identifiers, two that
# map to one, a typed schema with an output schema.  Each answers with
# the arguments it got.
CODEMODE_TOOLS = [
    {"name": "read-graph", "description": "The graph (no arguments)", "inputSchema": {"type": "object"}},
    {"name": "read_graph", "description": "Another tool whose name maps to read_graph too",
     "inputSchema": {"type": "object"}},
    {"name": "class", "description": "A keyword as a name",
     "inputSchema": {"type": "object", "properties": {"from": {"type": "string", "description": "where"},
                                                      "to-x": {"type": "integer"}},
                     "required": ["from"]}},
    {"name": "2fa", "description": "A leading digit", "inputSchema": {"type": "object"}},
    {"name": "typed", "title": "Typed", "description": "Every JSON type.\nSecond line.",
     "inputSchema": {"type": "object", "required": ["name", "tags"], "properties": {
         "name": {"type": "string", "description": "a name"},
         "count": {"type": "integer", "default": 3},
         "ratio": {"type": "number"},
         "flag": {"type": "boolean"},
         "tags": {"type": "array", "items": {"type": "string"}},
         "opts": {"type": "object"},
         "mode": {"type": "string", "enum": ["fast", "slow"]},
         "note": {"type": ["string", "null"]}}},
     "outputSchema": {"type": "object", "properties": {"got": {"type": "object"}}, "required": ["got"]}},
    {"name": "dup", "description": "Two properties that map to one",
     "inputSchema": {"type": "object", "properties": {"a-b": {"type": "string"}, "a_b": {"type": "string"}}}},
    {"name": "open", "description": "Takes any property",
     "inputSchema": {"type": "object", "properties": {"known": {"type": "string"}}, "additionalProperties": True}},
]
if os.environ.get("FAKE_MCP_CODEMODE") == "1":
    TOOLS = TOOLS + CODEMODE_TOOLS


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def result(rid, res):
    send({"jsonrpc": "2.0", "id": rid, "result": res})


def text(t, structured=None):
    r = {"content": [{"type": "text", "text": t}]}
    if structured is not None:
        r["structuredContent"] = structured
    return r


def call(rid, name, args):
    if name in ("echo", "Echo"):
        t = str(args.get("text", ""))
        result(rid, text(t, {"echo": t}))
    elif name == "pid":
        result(rid, text(str(os.getpid()), {"pid": os.getpid()}))
    elif name == "hang":
        while True:
            time.sleep(3600)
    elif name == "slow":
        time.sleep(float(args.get("seconds", 1)))
        result(rid, text("slept"))
    elif name == "crash":
        os._exit(3)
    elif name == "big":
        result(rid, text("x" * int(args.get("bytes", 0))))
    elif name == "fail":
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32603, "message": "it failed on purpose"}})
    elif name == "tool_error":
        result(rid, {"content": [{"type": "text", "text": "the tool reported a problem"}], "isError": True})
    elif name == "env":
        result(rid, text(json.dumps(dict(os.environ)), {"env": dict(os.environ)}))
    elif name == "typed":
        result(rid, text(json.dumps({"got": args}), {"got": args}))
    elif any(t["name"] == name for t in CODEMODE_TOOLS) and os.environ.get("FAKE_MCP_CODEMODE") == "1":
        result(rid, text(json.dumps({"tool": name, "got": args})))
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": "unknown tool " + name}})


STATE = os.environ.get("FAKE_MCP_STATE")
NAME = os.environ.get("FAKE_MCP_NAME", "fake")


def record(what, text):
    if STATE:
        with open(os.path.join(STATE, what), "a") as f:
            f.write("%s %s\n" % (NAME, text))


def main():
    record("starts", os.getpid())
    print("fake MCP server starting", file=sys.stderr, flush=True)
    time.sleep(float(os.environ.get("FAKE_MCP_START_DELAY", "0")))
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        method, rid = msg.get("method"), msg.get("id")
        if method == "initialize":
            result(rid, {"protocolVersion": msg["params"]["protocolVersion"],
                         "capabilities": {"tools": {}},
                         "serverInfo": {"name": "fake", "version": "1"}})
        elif method == "tools/list":
            result(rid, {"tools": TOOLS})
        elif method == "ping":
            result(rid, {})
        elif method == "tools/call":
            p = msg.get("params") or {}
            record("calls", json.dumps(p.get("name")))
            call(rid, p.get("name"), p.get("arguments") or {})
        elif rid is not None:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no " + str(method)}})


if __name__ == "__main__":
    main()
