"""Tool calls from inside the jail (issue 5): fd 3, the pycell module, the
bridge's checks, upstream MCP servers, the audit log.

Real parts: the upstreams are the npm servers @modelcontextprotocol/
server-memory and server-filesystem (installed by `npm ci --prefix
tests/tools`) and tests/tools/fake_mcp_server.py, a small stdio MCP server that
hangs, crashes and misbehaves on purpose.  Every run goes through
`pycell run --config CFG --policy P.json`.
"""

import hashlib
import json
import re
import shutil
import textwrap
import time
from pathlib import Path

import pytest

from conftest import REPO, pycell_run, run_json

HERE = Path(__file__).resolve().parent
FAKE_SERVER = HERE.parent / "tools" / "fake_mcp_server.py"
TOOLS_DIR = REPO / "tests" / "tools"
MEMORY_JS = TOOLS_DIR / "node_modules/@modelcontextprotocol/server-memory/dist/index.js"
FS_JS = TOOLS_DIR / "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
PYTHON = "/usr/bin/python3"
ERR_DENIED = -32001
ERR_UPSTREAM = -32002
FAKE_TOOLS = ["echo", "pid", "hang", "slow", "crash", "big", "fail", "tool_error", "env", "Echo"]


_npm_ci_failed = []


def need_node_servers():
    """Skip (with the reason) unless node and the npm servers are there;
    installs them from tests/tools/package-lock.json the first time, as
    tests/mcp/run.sh does for its packages."""
    if not shutil.which("node"):
        pytest.skip("node is not installed (apt-get install nodejs npm)")
    if (not MEMORY_JS.exists() or not FS_JS.exists()) and not _npm_ci_failed and shutil.which("npm"):
        import subprocess
        proc = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=TOOLS_DIR,
                              capture_output=True, timeout=600)
        if proc.returncode != 0:
            _npm_ci_failed.append(proc.stderr.decode(errors="replace")[-500:])
    if not MEMORY_JS.exists() or not FS_JS.exists():
        pytest.skip("the npm MCP servers are not installed (`npm ci --prefix tests/tools` failed: %s)"
                    % (_npm_ci_failed[0] if _npm_ci_failed else "npm is missing"))


class Tools:
    """A test directory with a config of upstream servers, policies and the
    audit log; run() is one `pycell run --json` with them."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.audit = tmp / "audit.log"
        self.memory_file = tmp / "memory.jsonl"
        self.fsroot = tmp / "fsroot"
        self.fsroot.mkdir()
        self.state = tmp / "fake-state"
        self.state.mkdir()

    def fake(self, name="fake", timeout="10", env=None, script=FAKE_SERVER):
        e = {"FAKE_MCP_STATE": str(self.state), "FAKE_MCP_NAME": name}
        e.update(env or {})
        return {"command": [PYTHON, str(script)], "env": e, "timeout": timeout}

    def memory(self):
        return {"command": ["node", str(MEMORY_JS)], "env": {"MEMORY_FILE_PATH": str(self.memory_file)}}

    def filesystem(self):
        return {"command": ["node", str(FS_JS), str(self.fsroot)]}

    def config(self, upstreams, audit=True, name="pycell.conf"):
        doc = {"upstreams": upstreams}
        if audit:
            doc["audit_log"] = str(self.audit)
        path = self.tmp / name
        path.write_text(json.dumps(doc, indent=2))
        return str(path)

    def policy(self, allow, name="test", **tools):
        doc = {"extends": "default", "tools": dict(allow=list(allow), **tools)}
        path = self.tmp / f"{name}.json"
        path.write_text(json.dumps(doc, indent=2))
        return str(path)

    def run(self, code, allow=(), upstreams=None, tools=None, policy_name="test", audit=True,
            timeout=60, extra=()):
        if upstreams is None:
            upstreams = {"fake": self.fake()}
        cfg = self.config(upstreams, audit=audit)
        pol = self.policy(allow, name=policy_name, **(tools or {}))
        return run_json(textwrap.dedent(code), "--config", cfg, "--policy", pol, *extra,
                        timeout=timeout)

    def audit_lines(self):
        if not self.audit.exists():
            return []
        return [json.loads(line) for line in self.audit.read_text().splitlines()]

    def lines(self, what):
        p = self.state / what
        return p.read_text().splitlines() if p.exists() else []


@pytest.fixture
def tools(tmp_path):
    return Tools(tmp_path)


def out_lines(res):
    assert res["status"] == "ok", (res["status"], res["stderr"])
    return res["stdout"].splitlines()


# ------------------------------------------------------------ the npm servers

def test_memory_entities_written_and_read_in_same_and_later_run(tools):
    need_node_servers()
    ups = {"memory": tools.memory()}
    res = tools.run("""
        import json, pycell
        made = pycell.call_tool("memory.create_entities", {"entities": [
            {"name": "Ada", "entityType": "person", "observations": ["wrote the first program"]},
            {"name": "Engine", "entityType": "machine", "observations": ["analytical"]}]})
        print(json.dumps(sorted(e["name"] for e in made["entities"])))
        graph = pycell.call_tool("memory.read_graph")
        print(json.dumps(sorted((e["name"], e["entityType"], e["observations"]) for e in graph["entities"])))
    """, allow=["memory.*"], upstreams=ups)
    assert out_lines(res) == [
        '["Ada", "Engine"]',
        '[["Ada", "person", ["wrote the first program"]], ["Engine", "machine", ["analytical"]]]',
    ]
    tc = res["tool_calls"]
    assert (tc["count"], tc["denied"], tc["errors"], tc["denials"]) == (2, 0, 0, [])
    assert sorted(tc["tools"]) == ["memory.create_entities", "memory.read_graph"]
    assert all(t["calls"] == 1 and t["errors"] == 0 for t in tc["tools"].values())
    # the server really stored them, outside the jail
    assert "Ada" in tools.memory_file.read_text()

    later = tools.run("""
        import pycell
        found = pycell.call_tool("memory.open_nodes", {"names": ["Ada"]})
        print([(e["name"], e["observations"]) for e in found["entities"]])
    """, allow=["memory.open_nodes"], upstreams=ups)
    assert out_lines(later) == ["[('Ada', ['wrote the first program'])]"]


def test_filesystem_reads_a_file_the_jail_cannot_see(tools):
    need_node_servers()
    secret = tools.fsroot / "report.txt"
    secret.write_text("quarterly numbers: 42\n")
    res = tools.run(f"""
        import pycell
        try:
            open({str(secret)!r})
        except FileNotFoundError:
            print("not visible in the jail")
        print(repr(pycell.call_tool("fs.read_text_file", {{"path": {str(secret)!r}}})))
    """, allow=["fs.read_text_file"], upstreams={"fs": tools.filesystem()})
    assert out_lines(res) == ["not visible in the jail", "{'content': 'quarterly numbers: 42\\n'}"]


def test_filesystem_write_outside_its_root_raises(tools):
    need_node_servers()
    outside = tools.tmp / "outside.txt"
    inside = tools.fsroot / "inside.txt"
    res = tools.run(f"""
        import pycell
        pycell.call_tool("fs.write_file", {{"path": {str(inside)!r}, "content": "fine"}})
        try:
            pycell.call_tool("fs.write_file", {{"path": {str(outside)!r}, "content": "escape"}})
        except pycell.ToolError as e:
            print(type(e).__name__, e.reason, e.tool)
            print(e)
    """, allow=["fs.*"], upstreams={"fs": tools.filesystem()})
    lines = out_lines(res)
    assert lines[0] == "ToolError tool_error fs.write_file"
    assert lines[1].startswith("Access denied - path outside allowed directories"), lines
    assert inside.read_text() == "fine"
    assert not outside.exists()
    assert res["tool_calls"]["tools"]["fs.write_file"] == {
        "calls": 2, "errors": 1, "total_ms": res["tool_calls"]["tools"]["fs.write_file"]["total_ms"]}
    assert res["tool_calls"]["errors"] == 1


# ------------------------------------------------------------ the module

def test_list_schema_search_and_aliases(tools):
    res = tools.run("""
        import json, pycell
        print(json.dumps([t["name"] for t in pycell.list_tools()]))
        print(json.dumps(pycell.get_tool_schema("fake.echo")["inputSchema"], sort_keys=True))
        try:
            pycell.get_tool_schema("fake.hang")
        except pycell.ToolNotFound as e:
            print("not found:", e)
        print(json.dumps([t["name"] for t in pycell.search_tools("ECHO back")]))
        print(json.dumps(pycell.search_tools("nothing like this")))
        print(pycell.discover_mcp_tools is pycell.list_tools, pycell.get_tool_schema("fake.big")["name"])
        print(pycell.call_mcp_tool("fake.echo", {"text": "via alias"}))
        print(repr(pycell.call_tool("fake.big", {"bytes": 3})))
    """, allow=["fake.echo", "fake.big"])
    assert out_lines(res) == [
        '["fake.echo", "fake.big"]',
        '{"properties": {"text": {"type": "string"}}, "required": ["text"], "type": "object"}',
        "not found: no tool named 'fake.hang' is available to this run",
        '["fake.echo"]',
        "[]",
        "True fake.big",
        "{'echo': 'via alias'}",
        "'xxx'",
    ]


def test_async_twins_run_calls_concurrently(tools):
    res = tools.run("""
        import asyncio, json, time, pycell
        async def main():
            t0 = time.monotonic()
            a, b = await asyncio.gather(pycell.call_tool_async("fake.slow", {"seconds": 0.6}),
                                        pycell.call_tool_async("fake2.slow", {"seconds": 0.6}))
            took = time.monotonic() - t0
            print(a, b, "concurrent" if took < 1.1 else "serial %.2f" % took)
            names = [t["name"] for t in await pycell.list_tools_async("slow")]
            print(json.dumps(names))
            print((await pycell.get_tool_schema_async("fake.slow"))["name"])
            print(len(await pycell.search_tools_async("slow", 1)))
        asyncio.run(main())
    """, allow=["fake.slow", "fake2.slow"],
        upstreams={"fake": tools.fake(), "fake2": tools.fake("fake2")})
    assert out_lines(res) == ["slept slept concurrent", '["fake.slow", "fake2.slow"]', "fake.slow", "1"]


def test_import_pycell_stays_cheap(pycell_bin):
    res = run_json("import sys, pycell\n"
                   "print('pycell.tools' in sys.modules, 'socket' in sys.modules)\n"
                   "pycell.call_tool\n"
                   "print('pycell.tools' in sys.modules)\n")
    assert res["stdout"] == "False False\nTrue\n", res["stderr"]


def test_without_upstreams_calls_fail_cleanly():
    res = run_json("import pycell\n"
                   "try:\n"
                   "    pycell.call_tool('memory.read_graph')\n"
                   "except pycell.ToolError as e:\n"
                   "    print(type(e).__name__, e.code, e)\n")
    assert res["stdout"] == "ToolError -32601 no tools are available in this run\n", res["stderr"]
    assert res["tool_calls"] is None


# ------------------------------------------------------------ the allowlist

# Every one of these must be refused; the servers have tools named
# echo and Echo.  fake allows only "fake.echo", fake2 allows "fake2.*".
BYPASS_NAMES = [
    "FAKE.echo", "Fake.echo", "fake.ECHO", "fake.Echo", " fake.echo", "fake.echo ", "\tfake.echo",
    "fake.echo\n", "fake.echo\x00", "fake\x00.echo", "fake.echo\x00.pid", "fake.e\u0441ho",
    "f\u0430ke.echo", "fake.ech\u043e", "\uff46\uff41\uff4b\uff45.echo", "fake\uff0eecho",
    "fake\u200b.echo", "fake.echo\u200b", "fake.\u0435cho", "fake.ech", "fake.echoo", "fake.",
    "fake", "fake.*", "*", "", ".", ".echo", "fake..echo", "fake.echo.", "fake/echo", "fake.pid",
    "fake.hang", "fake2", "fake2.", "fake2.*", "fake2.nope", "FAKE2.echo", "fake2x.echo",
    "fake2 .echo", "fake2.echo\x00", "fake2.ECHO", "fake2.e\u0441ho", "fake.fake2.echo",
    "fake2.echo/../pid", "fake2..echo", "fake2.echo ", "fake2\u2024echo", "memory.read_graph",
    "x" * 5000,
]


def test_allowlist_cannot_be_bypassed(tools):
    code = """
        import json, pycell
        names = json.loads(%r)
        for n in names:
            try:
                pycell.call_tool(n, {"text": "leak"})
                print("ALLOWED", json.dumps(n))
            except pycell.ToolDenied as e:
                assert e.reason == "not_allowed" and e.code == -32001, (n, e.reason, e.code)
        for n in ["fake.echo", "fake2.echo", "fake2.Echo"]:
            print(n, pycell.call_tool(n, {"text": "ok"}))
    """ % json.dumps(BYPASS_NAMES)
    res = tools.run(code, allow=["fake.echo", "fake2.*"], tools={"budget": 1000},
                    upstreams={"fake": tools.fake(), "fake2": tools.fake("fake2")})
    assert out_lines(res) == ["fake.echo {'echo': 'ok'}", "fake2.echo {'echo': 'ok'}",
                              "fake2.Echo {'echo': 'ok'}"]
    # exactly the allowed calls reached the servers
    assert sorted(tools.lines("calls")) == ['fake "echo"', 'fake2 "Echo"', 'fake2 "echo"']
    tc = res["tool_calls"]
    assert (tc["count"], tc["denied"], tc["errors"]) == (len(BYPASS_NAMES) + 3, len(BYPASS_NAMES), 0)
    assert len(tc["denials"]) == 20
    assert all(d["reason"] == "not_allowed" for d in tc["denials"])
    # what the jail sent is echoed back cut to 128 bytes, NULs and all
    assert tc["denials"][8] == {"tool": "fake.echo\x00", "reason": "not_allowed"}


def test_default_policy_allows_nothing(tools):
    cfg = tools.config({"fake": tools.fake()})
    res = run_json("import pycell\n"
                   "print(pycell.list_tools())\n"
                   "try:\n"
                   "    pycell.call_tool('fake.echo', {'text': 'x'})\n"
                   "except pycell.ToolDenied as e:\n"
                   "    print(e)\n", "--config", cfg)
    assert res["stdout"] == ('[]\ntool "fake.echo" is not available: unknown or not allowed by '
                             'policy "default"\n'), res["stderr"]
    assert tools.lines("calls") == []
    assert res["tool_calls"]["denials"] == [{"tool": "fake.echo", "reason": "not_allowed"}]


# ------------------------------------------------------------ budget and size caps

def test_budget_denies_calls_beyond_it(tools):
    res = tools.run("""
        import pycell
        for i in range(5):
            try:
                pycell.call_tool("fake.echo", {"text": str(i)})
                print("ok")
            except pycell.ToolDenied as e:
                print(e.reason, e)
    """, allow=["fake.echo"], tools={"budget": 3})
    assert out_lines(res) == ["ok"] * 3 + [
        'budget_exhausted the run\'s budget of 3 tool calls (policy "test") is used up'] * 2
    tc = res["tool_calls"]
    assert (tc["count"], tc["denied"], tc["tools"]["fake.echo"]["calls"]) == (5, 2, 3)
    assert len(tools.lines("calls")) == 3


def test_budget_zero(tools):
    res = tools.run("""
        import pycell
        try:
            pycell.call_tool("fake.echo", {"text": "x"})
        except pycell.ToolDenied as e:
            print(e.reason)
    """, allow=["fake.*"], tools={"budget": 0})
    assert out_lines(res) == ["budget_exhausted"]
    assert tools.lines("calls") == []


def test_argument_size_cap_is_exact(tools):
    # {"text":"<n bytes>"} is n + 11 bytes compact: 1013 fits 1K, 1014 does not
    res = tools.run("""
        import pycell
        print(len(pycell.call_tool("fake.echo", {"text": "a" * 1013})["echo"]))
        try:
            pycell.call_tool("fake.echo", {"text": "a" * 1014})
        except pycell.ToolDenied as e:
            print(e.reason, e)
    """, allow=["fake.echo"], tools={"max_argument_bytes": "1K"})
    assert out_lines(res) == [
        "1013",
        "arguments_too_large fake.echo: the arguments are 1025 bytes, over the policy's "
        "max_argument_bytes of 1024"]
    assert len(tools.lines("calls")) == 1


def test_result_size_cap_is_exact(tools):
    envelope = len(json.dumps({"content": [{"type": "text", "text": ""}]}, separators=(",", ":")))
    fits = 1024 - envelope
    res = tools.run(f"""
        import pycell
        print(len(pycell.call_tool("fake.big", {{"bytes": {fits}}})))
        try:
            pycell.call_tool("fake.big", {{"bytes": {fits + 1}}})
        except pycell.ToolDenied as e:
            print(e.reason, e)
    """, allow=["fake.big"], tools={"max_result_bytes": "1K"})
    assert out_lines(res) == [
        str(fits),
        "result_too_large fake.big: the result is 1025 bytes, over the policy's max_result_bytes of 1024"]
    tc = res["tool_calls"]
    assert (tc["count"], tc["denied"], tc["errors"]) == (2, 1, 1)


def test_large_result_crosses_the_socket(tools):
    res = tools.run("""
        import pycell
        print(len(pycell.call_tool("fake.big", {"bytes": 3 << 20})))
    """, allow=["fake.big"], tools={"max_result_bytes": "4M"})
    assert out_lines(res) == [str(3 << 20)]


def test_large_arguments_cross_to_the_server(tools):
    # 1.5 MiB through fd 3 and the server's stdin pipe (partial writes),
    # 3 MiB back (text and structuredContent)
    res = tools.run("""
        import pycell
        r = pycell.call_tool("fake.echo", {"text": "y" * (3 << 19)})
        print(len(r["echo"]), set(r["echo"]))
    """, allow=["fake.echo"], tools={"max_argument_bytes": "2M", "max_result_bytes": "4M"})
    assert out_lines(res) == [f"{3 << 19} {{'y'}}"]


def test_result_too_large_for_one_packet(tools):
    # the policy allows 16M, but a message on fd 3 cannot pass 4 MiB
    res = tools.run("""
        import pycell
        try:
            pycell.call_tool("fake.big", {"bytes": 6 << 20})
        except pycell.ToolDenied as e:
            print(e.reason, "could not be passed into the jail" in str(e))
        print(pycell.call_tool("fake.echo", {"text": "next"}))
    """, allow=["fake.big", "fake.echo"], tools={"max_result_bytes": "16M"})
    assert out_lines(res) == ["result_too_large True", "{'echo': 'next'}"]


# ------------------------------------------------------------ errors reported by tools

def test_tool_errors_raise_with_the_tools_message(tools):
    res = tools.run("""
        import pycell
        for name in ["fake.tool_error", "fake.fail"]:
            try:
                pycell.call_tool(name)
            except pycell.ToolDenied:
                print("wrongly a denial")
            except pycell.ToolError as e:
                print(e.reason, e.code, e)
    """, allow=["fake.*"])
    assert out_lines(res) == ["tool_error None the tool reported a problem",
                              "upstream_error -32002 fake.fail: it failed on purpose"]
    tc = res["tool_calls"]
    assert (tc["count"], tc["denied"], tc["errors"]) == (2, 0, 2)
    statuses = [t["status"] for t in tools.audit_lines()[-1]["tools"]]
    assert statuses == ["tool_error", "error"]


def test_client_timeout_cancels_the_call(tools):
    res = tools.run("""
        import time, pycell
        t0 = time.monotonic()
        try:
            pycell.call_tool("fake.slow", {"seconds": 1.5}, timeout=0.3)
        except pycell.ToolTimeout as e:
            print(e.reason, e, time.monotonic() - t0 < 1)
        # the late answer is dropped; the next call gets its own
        print(pycell.call_tool("fake.echo", {"text": "after"}))
    """, allow=["fake.slow", "fake.echo"])
    assert out_lines(res) == ["timeout no answer within 0.3 s True", "{'echo': 'after'}"]
    statuses = [t["status"] for t in tools.audit_lines()[-1]["tools"]]
    assert statuses == ["cancelled", "ok"]


# ------------------------------------------------------------ abuse from inside

RAW = """
import json, os, select, socket
raw = socket.socket(fileno=os.dup(3))
def reply(timeout=10):
    if not select.select([raw], [], [], timeout)[0]:
        return None
    m = json.loads(raw.recv(1 << 20))
    return [m.get("id"), m["error"]["code"] if "error" in m else "result"]
"""


def raw(code):
    """code after RAW: `raw` is a second socket on the jail's fd 3."""
    return RAW + textwrap.dedent(code)


def test_garbage_and_oversized_packets_get_errors(tools):
    res = tools.run(raw("""
        import errno, pycell
        packets = [b"not json", b"\\xff\\xfe\\x00", b"[1,2,3]", b"42", b'{"jsonrpc":"2.0"}',
                   b'{"jsonrpc":"2.0","id":7,"method":"nope"}',
                   b'{"jsonrpc":"1.0","id":8,"method":"tools/list"}',
                   b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":5}}',
                   b'{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"fake.echo","arguments":[1]}}',
                   b'{"jsonrpc":"2.0","id":11,"id":12,"method":"ping"}',
                   b'{"jsonrpc":"2.0","id":13,"method":"ping"}']
        for p in packets:
            raw.send(p)
            print(json.dumps(reply()))
        raw.send(b"")                 # an empty packet: ignored, the channel stays
        print(json.dumps(reply(0.3)))
        try:
            # over the supervisor's 4 MiB cap; a host with a small
            # net.core.wmem_max refuses it already in the kernel
            raw.send(b"{" + b" " * (4 << 20) + b"}")
            print(json.dumps(reply()))
        except OSError as e:
            print(json.dumps([None, -32600]) if e.errno in (errno.EMSGSIZE, errno.ENOBUFS) else e)
        print(pycell.call_tool("fake.echo", {"text": "still fine"}))
    """), allow=["fake.echo"])
    assert out_lines(res) == [
        "[null, -32700]", "[null, -32700]", "[null, -32700]", "[null, -32700]", "[null, -32600]",
        "[7, -32601]", "[8, -32600]", "[9, -32602]", "[10, -32602]", "[null, -32700]",
        '[13, "result"]', "null", "[null, -32600]", "{'echo': 'still fine'}"]


def test_call_flood_beyond_budget(tools):
    res = tools.run(raw("""
        import collections, pycell
        for i in range(1, 101):
            raw.send(json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                                 "params": {"name": "fake.echo", "arguments": {"text": str(i)}}}).encode())
        outcomes, ids = collections.Counter(), set()
        for _ in range(100):
            m = json.loads(raw.recv(1 << 16))
            ids.add(m["id"])
            outcomes["ok" if "result" in m else m["error"]["data"]["reason"]] += 1
        print(ids == set(range(1, 101)), json.dumps(dict(outcomes), sort_keys=True))
        try:
            pycell.call_tool("fake.echo", {"text": "one more"})
        except pycell.ToolDenied as e:
            print(e.reason)
    """), allow=["fake.echo"], tools={"budget": 40})
    first, second = out_lines(res)
    flag, counts = first.split(" ", 1)
    counts = json.loads(counts)
    assert flag == "True"
    assert counts["budget_exhausted"] == 60
    assert counts.get("ok", 0) + counts.get("too_many_in_flight", 0) == 40
    assert counts["ok"] >= 32
    assert second == "budget_exhausted"
    assert len(tools.lines("calls")) == counts["ok"]
    tc = res["tool_calls"]
    assert (tc["count"], tc["denied"]) == (101, 101 - counts["ok"])


def test_pending_call_when_the_run_ends(tools):
    t0 = time.monotonic()
    res = tools.run(raw("""
        raw.send(b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fake.slow","arguments":{"seconds":30}}}')
        import time
        time.sleep(0.3)
        print("leaving", flush=True)
        os._exit(0)
    """), allow=["fake.slow"])
    assert out_lines(res) == ["leaving"]
    assert time.monotonic() - t0 < 15  # the call would take 30 s
    tc = res["tool_calls"]
    assert (tc["count"], tc["errors"], tc["tools"]["fake.slow"]["calls"]) == (1, 1, 1)
    run_line = tools.audit_lines()[-1]
    assert [t["status"] for t in run_line["tools"]] == ["abandoned"]


def test_pending_call_in_a_thread_at_exit(tools):
    res = tools.run("""
        import threading, pycell
        t = threading.Thread(target=pycell.call_tool, args=("fake.hang",), daemon=True)
        t.start()
        import time; time.sleep(0.3)
        print("main done")
    """, allow=["fake.hang"], upstreams={"fake": tools.fake(timeout="30")})
    assert out_lines(res) == ["main done"]
    assert res["duration_ms"] < 15000  # the call would wait 30 s


def test_pending_async_call_does_not_hold_up_the_exit(tools):
    res = tools.run("""
        import asyncio, pycell
        async def main():
            asyncio.get_running_loop().create_task(pycell.call_tool_async("fake.hang"))
            print(await pycell.call_tool_async("fake2.echo", {"text": "done"}))
        asyncio.run(main())
    """, allow=["fake.hang", "fake2.echo"],
        upstreams={"fake": tools.fake(timeout="30"), "fake2": tools.fake("fake2")})
    assert out_lines(res) == ["{'echo': 'done'}"]
    assert res["duration_ms"] < 15000  # the hung call would wait 30 s
    assert [t["status"] for t in tools.audit_lines()[-1]["tools"]] == ["ok", "abandoned"]


@pytest.mark.parametrize("when", ["before_first_call", "after_first_call", "replaced_by_a_file"])
def test_closing_fd3_early(tools, when):
    res = tools.run(f"""
        import os, pycell
        when = {when!r}
        if when == "after_first_call":
            print(pycell.call_tool("fake.echo", {{"text": "first"}}))
        os.close(3)
        if when == "replaced_by_a_file":
            assert os.open("/dev/null", os.O_RDONLY) == 3
        for i in range(2):
            try:
                pycell.call_tool("fake.echo", {{"text": "after"}})
            except pycell.ToolChannelError as e:
                print("channel error:", e)
    """, allow=["fake.echo"])
    expect = {
        "before_first_call": ["channel error: the tool channel (fd 3) is not available: Bad file descriptor"] * 2,
        "after_first_call": ["{'echo': 'first'}",
                             "channel error: the tool channel (fd 3) failed: Bad file descriptor"] * 1 +
                            ["channel error: the tool channel (fd 3) failed: Bad file descriptor"],
        "replaced_by_a_file": ["channel error: the tool channel (fd 3) is not available: "
                               "Socket operation on non-socket"] * 2,
    }[when]
    assert out_lines(res) == expect
    assert res["tool_calls"]["count"] == (1 if when == "after_first_call" else 0)


def test_the_next_run_works_after_abuse(tools):
    tools.run(raw("raw.send(b'x' * 100)\nos.close(3)\nos._exit(3)\n"), allow=["fake.echo"])
    res = tools.run("import pycell\nprint(pycell.call_tool('fake.echo', {'text': 'next'}))\n",
                    allow=["fake.echo"])
    assert out_lines(res) == ["{'echo': 'next'}"]


# ------------------------------------------------------------ upstreams that fail

def test_hung_upstream_times_out_is_restarted_and_blocks_nobody_else(tools):
    res = tools.run("""
        import threading, time, pycell
        first = pycell.call_tool("fake.pid")["pid"]
        other = {}
        def elsewhere():
            t = time.monotonic()
            other["echo"] = pycell.call_tool("fake2.echo", {"text": "meanwhile"})
            other["took"] = time.monotonic() - t
        t0 = time.monotonic()
        threading.Timer(0.2, elsewhere).start()
        try:
            pycell.call_tool("fake.hang")
        except pycell.ToolTimeout as e:
            print(e.reason, 0.9 < time.monotonic() - t0 < 2.0, e)
        print(other["echo"], other["took"] < 0.5)
        second = pycell.call_tool("fake.pid")["pid"]
        print("restarted:", first != second)
    """, allow=["fake.*", "fake2.echo"],
        upstreams={"fake": tools.fake(timeout="1"), "fake2": tools.fake("fake2")})
    assert out_lines(res) == [
        'timeout True fake.hang: upstream server "fake" did not answer within 1000 ms',
        "{'echo': 'meanwhile'} True",
        "restarted: True",
    ]
    assert [s.split()[0] for s in tools.lines("starts")].count("fake") == 2
    assert b"did not answer a ping" in res.stderr_bytes


def test_crashed_upstream_fails_the_call_and_is_restarted(tools):
    res = tools.run("""
        import pycell
        first = pycell.call_tool("fake.pid")["pid"]
        try:
            pycell.call_tool("fake.crash")
        except pycell.ToolError as e:
            print(e.reason, e)
        second = pycell.call_tool("fake.pid")["pid"]
        print("restarted:", first != second)
    """, allow=["fake.*"])
    assert out_lines(res) == [
        'upstream_exited fake.crash: upstream server "fake" exited with status 3 while the call was in progress',
        "restarted: True",
    ]
    assert len(tools.lines("starts")) == 2
    assert b"upstream fake exited with status 3" in res.stderr_bytes


def test_upstream_that_cannot_start(tools):
    res = tools.run("""
        import pycell
        print(pycell.list_tools())
        try:
            pycell.call_tool("broken.anything")
        except pycell.ToolError as e:
            print(type(e).__name__, e)
    """, allow=["broken.*"],
        upstreams={"broken": {"command": [str(tools.tmp / "no-such-server")], "timeout": "0.5"}})
    assert out_lines(res) == [
        "[]",
        'ToolTimeout broken.anything: upstream server "broken" is not running (it is being restarted) '
        "and did not come back within 500 ms",
    ]
    assert b"no-such-server: No such file or directory" in res.stderr_bytes


def test_nothing_inside_reveals_how_upstreams_are_reached(tools):
    token = "tok-" + hashlib.sha256(str(tools.tmp).encode()).hexdigest()[:20]
    hidden_dir = tools.tmp / ("srv-" + token[4:12])
    hidden_dir.mkdir()
    script = hidden_dir / "server.py"
    shutil.copy(FAKE_SERVER, script)
    res = tools.run("""
        import glob, json, os, pycell
        fds = sorted(int(f) for f in os.listdir("/proc/self/fd"))
        print(fds)
        seen = [json.dumps(dict(os.environ)), json.dumps(pycell.list_tools())]
        for name in ["fake.crash", "fake.hang", "fake.nope", "fake.echo"]:
            try:
                seen.append(json.dumps(pycell.call_tool(name, {"text": "x"})))
            except pycell.ToolError as e:
                seen.append(str(e))
        for p in glob.glob("/proc/[0-9]*/cmdline") + glob.glob("/proc/[0-9]*/environ"):
            try:
                seen.append(open(p, "rb").read().decode("utf-8", "replace"))
            except OSError:
                pass
        print(json.dumps(seen))
    """, allow=["fake.echo", "fake.crash", "fake.hang"],
        upstreams={"fake": tools.fake(timeout="1", env={"SECRET_TOKEN": token}, script=script)})
    fds, text = out_lines(res)
    # 0-2, the tool socket, and the directory listdir was reading: no upstream pipe
    assert fds == "[0, 1, 2, 3, 4]"
    for secret in (token, token[4:12], str(hidden_dir), "server.py", str(tools.state), "FAKE_MCP"):
        assert secret not in text, secret
    # the calls did happen (the test would be vacuous otherwise)
    seen = json.loads(text)
    assert 'fake.crash: upstream server "fake" exited with status 3 while the call was in progress' in seen
    assert 'fake.hang: upstream server "fake" did not answer within 1000 ms' in seen
    assert '{"echo": "x"}' in seen


# ------------------------------------------------------------ the audit log

TIME_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def test_audit_records_runs_and_denials(tools):
    code = textwrap.dedent("""
        import pycell
        pycell.call_tool("fake.echo", {"text": "a"})
        try:
            pycell.call_tool("fake.pid")
        except pycell.ToolDenied:
            pass
    """)
    res = tools.run(code, allow=["fake.echo"], policy_name="audited")
    assert res["status"] == "ok", res["stderr"]
    denied, run = tools.audit_lines()
    sha = hashlib.sha256(code.encode()).hexdigest()
    assert TIME_RE.match(denied.pop("time")) and TIME_RE.match(run.pop("time"))
    assert denied == {"event": "tool_denied", "run": run["run"], "code_sha256": sha, "policy": "audited",
                      "tool": "fake.pid", "reason": "not_allowed"}
    ms = run["tools"][0]["ms"]
    assert isinstance(ms, int) and 0 <= ms < 10000
    assert run == {"event": "run", "run": run["run"], "code_sha256": sha, "policy": "audited", "status": "ok",
                   "duration_ms": run["duration_ms"], "tool_calls": {"count": 2, "denied": 1, "errors": 0},
                   "tools": [{"tool": "fake.echo", "status": "ok", "ms": ms}]}
    assert run["duration_ms"] == res["duration_ms"]


def test_audit_denial_lines_are_capped_per_run(tools):
    res = tools.run("""
        import pycell
        for i in range(150):
            try:
                pycell.call_tool("fake.pid")
            except pycell.ToolDenied:
                pass
    """, allow=[], tools={"budget": 1000})
    lines = tools.audit_lines()
    assert [ln["event"] for ln in lines] == ["tool_denied"] * 100 + ["run"]
    assert lines[-1]["denials_not_logged"] == 50
    assert lines[-1]["tool_calls"] == {"count": 150, "denied": 150, "errors": 0}
    assert (res["tool_calls"]["denied"], len(res["tool_calls"]["denials"])) == (150, 20)


def test_audit_goes_to_stderr_without_a_file(tools):
    res = tools.run("import pycell\npycell.call_tool('fake.echo', {'text': 'x'})\n", allow=["fake.echo"],
                    audit=False)
    records = [json.loads(ln) for ln in res.stderr_bytes.decode().splitlines() if ln.startswith("{")]
    assert [r["event"] for r in records] == ["run"]
    assert records[0]["tool_calls"] == {"count": 1, "denied": 0, "errors": 0}


def test_cli_exit_status_unchanged_with_tools(tools):
    cfg = tools.config({"fake": tools.fake()})
    rc, out, _ = pycell_run(["run", "--config", cfg, "-c", "import sys; print('hi'); sys.exit(7)"])
    assert (rc, out) == (7, b"hi\n")


# ------------------------------------------------------------ a long-lived supervisor: `pycell mcp`

class McpTools:
    """`pycell mcp --config CFG --policy P` (test_mcp_raw.Server) with
    run_python as a function; replies are matched by id."""

    def __init__(self, tools, upstreams, allow, **tools_keys):
        from test_mcp_raw import Server
        self.server = Server("--config", tools.config(upstreams), "--policy", tools.policy(allow, **tools_keys))
        self.server.initialize()
        self.stash = {}
        self.next_id = 100

    def send_run(self, code):
        self.next_id += 1
        self.server.send({"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call",
                          "params": {"name": "run_python", "arguments": {"code": textwrap.dedent(code)}}})
        return self.next_id

    def wait(self, rid, timeout=30):
        deadline = time.monotonic() + timeout
        while rid not in self.stash:
            msg = self.server.recv(timeout=max(deadline - time.monotonic(), 0.01))
            if "id" in msg:
                self.stash[msg["id"]] = msg
        return self.stash.pop(rid)["result"]["structuredContent"]

    def run(self, code, timeout=30):
        return self.wait(self.send_run(code), timeout)

    def info_tools(self):
        """sandbox_info's tools, once the upstreams have listed theirs."""
        deadline = time.monotonic() + 15
        while True:
            self.next_id += 1
            res = self.server.request(self.next_id, "tools/call", {"name": "sandbox_info", "arguments": {}})
            tools = res["result"]["structuredContent"]["tools"]
            if tools or time.monotonic() > deadline:
                return tools
            time.sleep(0.1)

    def close(self):
        self.server.close()


@pytest.fixture
def mcp_tools(tools):
    made = []

    def start(upstreams, allow, **tools_keys):
        m = McpTools(tools, upstreams, allow, **tools_keys)
        made.append(m)
        return m
    yield start
    for m in made:
        m.server.kill()


def test_mcp_sandbox_info_lists_callable_tools_with_schemas(tools, mcp_tools):
    m = mcp_tools({"fake": tools.fake()}, ["fake.echo", "fake.pid"])
    assert m.info_tools() == [
        {"name": "fake.echo", "description": "Echo the text back",
         "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
        {"name": "fake.pid", "description": "The server's pid", "inputSchema": {"type": "object"}},
    ]
    res = m.run("import pycell\npycell.call_tool('fake.echo', {'text': 'cell'})")
    assert res["status"] == "ok", res["stderr"]
    assert res["return_value"] == {"echo": "cell"}
    assert res["tool_calls"]["tools"]["fake.echo"]["calls"] == 1
    m.close()


def test_mcp_upstream_restarts_for_later_runs_and_abuse_harms_no_later_run(tools, mcp_tools):
    m = mcp_tools({"fake": tools.fake(timeout="1"), "fake2": tools.fake("fake2")}, ["fake.*", "fake2.*"])
    assert m.info_tools()
    pid = "import pycell\npycell.call_tool('fake.pid')['pid']"

    first = m.run(pid)["return_value"]
    crashed = m.run("""
        import pycell
        try:
            pycell.call_tool("fake.crash")
        except pycell.ToolError as e:
            msg = str(e)
        msg
    """)
    assert crashed["return_value"] == ('fake.crash: upstream server "fake" exited with status 3 while the call '
                                       'was in progress')
    second = m.run(pid)["return_value"]
    assert isinstance(first, int) and isinstance(second, int) and first != second

    hung = m.run("""
        import pycell
        try:
            pycell.call_tool("fake.hang")
        except pycell.ToolTimeout as e:
            msg = str(e)
        msg
    """)
    assert hung["return_value"] == 'fake.hang: upstream server "fake" did not answer within 1000 ms'
    third = m.run(pid)["return_value"]
    assert third not in (first, second)

    # abuse: garbage, a flood, a call left pending, fd 3 closed, a bad exit
    abused = m.run(raw("""
        for p in [b"garbage", b"{" * 100000, b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fake.slow","arguments":{"seconds":0.5}}}']:
            raw.send(p)
        for i in range(200):
            raw.send(b'{"jsonrpc":"2.0","id":"f%d","method":"tools/call","params":{"name":"fake2.echo","arguments":{}}}' % i)
        os.close(3)
        raw.close()
        os._exit(3)
    """))
    assert abused["status"] == "error" and abused["exit_code"] == 3
    t0 = time.monotonic()
    after = m.run("import pycell\npycell.call_tool('fake2.echo', {'text': 'next run'})")
    assert after["return_value"] == {"echo": "next run"}
    assert time.monotonic() - t0 < 5
    # the pending fake.slow was cancelled with the run; fake answers again
    assert isinstance(m.run(pid, timeout=10)["return_value"], int)
    assert len([s for s in tools.lines("starts") if s.startswith("fake ")]) == 3
    m.close()


def test_mcp_hung_upstream_blocks_no_other_run(tools, mcp_tools):
    m = mcp_tools({"fake": tools.fake(timeout="10"), "fake2": tools.fake("fake2")}, ["fake.hang", "fake2.echo"])
    assert m.info_tools()
    t0 = time.monotonic()
    slow = m.send_run("""
        import pycell
        try:
            pycell.call_tool("fake.hang")
        except pycell.ToolTimeout as e:
            msg = str(e)
        msg
    """)
    time.sleep(0.3)
    quick = m.run("import pycell\npycell.call_tool('fake2.echo', {'text': 'meanwhile'})")
    assert quick["return_value"] == {"echo": "meanwhile"}
    assert time.monotonic() - t0 < 8  # long before the hung call's 10 s
    assert m.wait(slow)["return_value"] == 'fake.hang: upstream server "fake" did not answer within 10000 ms'
    assert time.monotonic() - t0 >= 10
    m.close()
