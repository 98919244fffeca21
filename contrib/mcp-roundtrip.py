#!/usr/bin/env python3
"""A minimal MCP round trip with `pycell mcp`, standard library only:
initialize, tools/list, tools/call run_python; prints what came back and
exits non-zero if anything is off.  Usage: mcp-roundtrip.py [PYCELL [ARGS...]]"""
import json
import subprocess
import sys

cmd = sys.argv[1:] or ["pycell"]
proc = subprocess.Popen(cmd + ["mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def request(i, method, params):
    proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n")
    proc.stdin.flush()
    while True:
        msg = json.loads(proc.stdout.readline())
        if msg.get("id") == i:
            if "error" in msg:
                sys.exit(f"mcp-roundtrip: {method}: {msg['error']}")
            return msg["result"]


init = request(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                 "clientInfo": {"name": "mcp-roundtrip", "version": "1"}})
proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
print(f"initialize: {init['serverInfo']['name']} {init['serverInfo']['version']}, "
      f"protocol {init['protocolVersion']}")
tools = request(2, "tools/list", {})
print("tools/list:", ", ".join(t["name"] for t in tools["tools"]))
code = "import os, platform\nprint('hello over MCP from pid', os.getpid())\nsum(range(10))"
res = request(3, "tools/call", {"name": "run_python", "arguments": {"code": code}})
sc = res["structuredContent"]
print(f"tools/call run_python: status {sc['status']}, stdout {sc['stdout']!r}, "
      f"return_value {sc['return_value']!r}, {sc['duration_ms']} ms")
proc.stdin.close()
proc.wait(timeout=10)
ok = sc["status"] == "ok" and sc["return_value"] == 45 and not res.get("isError")
sys.exit(0 if ok else 1)
