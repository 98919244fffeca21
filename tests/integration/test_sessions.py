"""Sessions and files (issue 14): session_open mints a handle, run_python
with it runs the next cell of one live interpreter in one jail, and
session_close ends it; run_python's files land in /workspace.  Driven on
raw pipes (`pycell mcp`) and, for the owner of a handle, over HTTP with two
tokens."""

import base64
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import DATADIR, PYCELL, TOOLS, RawMcp, descendants, jail_procs, proc_status, pycell_env, run_jails
from test_mcp_raw import Server
from test_serve import serve, sha  # noqa: F401 (serve is a fixture)

NOT_FOUND = ("no such session: it was closed, ran out of time or ended, or it is another client's; "
             "session_list shows yours, session_open makes a new one")


class Client(Server):
    """A `pycell mcp` that calls tools by name."""

    rid = 0

    def call(self, name, args, timeout=30):
        self.rid += 1
        res = self.request(self.rid, "tools/call", {"name": name, "arguments": args}, timeout=timeout)
        assert "result" in res, res
        return res["result"]

    def ok(self, name, args, **kw):
        res = self.call(name, args, **kw)
        assert not res.get("isError"), res
        return res["structuredContent"]

    def error_text(self, name, args):
        res = self.call(name, args)
        assert res.get("isError") is True and "structuredContent" not in res, res
        return res["content"][0]["text"]

    def open(self, **args):
        return self.ok("session_open", args)["session_id"]

    def cell(self, sid, code, **args):
        return self.call("run_python", {"session_id": sid, "code": code, **args})["structuredContent"]


@pytest.fixture
def client():
    c = Client()
    c.initialize()
    yield c
    c.kill()


def assert_no_jails_soon(client, timeout=5):
    """Within timeout, no run's process is left below the server (its
    zygote and ready jails aside)."""
    deadline = time.monotonic() + timeout
    while run_jails(client.proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert run_jails(client.proc.pid) == []


def policy_args(policy_file, **sessions):
    return ["--policy", policy_file({"sessions": sessions}, name="sessions")]


# ------------------------------------------------------------ the tools

def test_the_session_tools_are_listed_with_their_schemas(client):
    tools = {t["name"]: t for t in client.request(1, "tools/list")["result"]["tools"]}
    assert list(tools) == TOOLS
    assert tools["session_close"]["inputSchema"]["required"] == ["session_id"]
    assert tools["session_list"]["annotations"]["readOnlyHint"] is True
    assert tools["session_close"]["annotations"]["destructiveHint"] is True
    props = tools["run_python"]["inputSchema"]["properties"]
    assert props["session_id"]["type"] == "string" and props["files"]["type"] == "array"
    assert "After 10m without a cell a session is paused if the server keeps state" in tools["session_open"]["description"]
    assert "it is closed once it has lived 1h" in tools["session_open"]["description"]


def test_a_policy_without_sessions_lists_no_session_tool_and_refuses_one(policy_file):
    c = Client(*policy_args(policy_file, max=0))
    try:
        c.initialize()
        names = [t["name"] for t in c.request(1, "tools/list")["result"]["tools"]]
        # the session tools (pycell(1): "not listed when sessions are off") go
        assert names == [t for t in TOOLS if not t.startswith("session_")]
        assert "run_python" in names
        res = c.request(2, "tools/call", {"name": "session_open", "arguments": {}})
        assert res["error"]["code"] == -32602
        assert res["error"]["message"] == ("Unknown tool: sessions are off in this server's policy "
                                           "(sessions.max is 0)")
    finally:
        c.kill()


# ------------------------------------------------------------ cells

def test_cells_share_globals_imports_and_workspace(client):
    opened = client.ok("session_open", {})
    sid = opened["session_id"]
    assert re.fullmatch(r"[0-9a-f]{32}", sid)
    assert opened["idle_timeout_s"] == 600 and opened["max_lifetime_s"] == 3600
    assert isinstance(opened["open_ms"], int)
    r1 = client.cell(sid, "import statistics\nrows = open('data/in.csv').read().split()\n"
                          "with open('out.txt', 'w') as f: f.write('kept')\nprint('cell 1')\nlen(rows)",
                     files=[{"path": "data/in.csv", "text": "a,b\n1,2\n3,4\n"}])
    assert r1["status"] == "ok" and r1["stdout"] == "cell 1\n" and r1["stderr"] == ""
    assert r1["return_value"] == 3
    # its output stays readable as a resource; the file it wrote is listed
    base = "pycell://sessions/" + sid
    assert r1["session"] == {"id": sid, "cell": 1, "alive": True,
                             "output": {"stdout": base + "/cells/1/stdout"}}
    assert r1["files"] == [{"path": "out.txt", "size": 4, "mime_type": "text/plain",
                            "uri": base + "/files/out.txt"}]
    r2 = client.cell(sid, "print(open('out.txt').read())\nstatistics.mean([1, 2, 3]), rows[0]")
    assert r2["status"] == "ok" and r2["stdout"] == "kept\n" and r2["return_value"] == [2, "a,b"]
    assert r2["session"] == {"id": sid, "cell": 2, "alive": True,
                             "output": {"stdout": base + "/cells/2/stdout"}}
    assert "files" not in r2   # nothing changed
    # an exception fails its cell only; SystemExit ends the cell with its code
    r3 = client.cell(sid, "del rows\n1/0")
    assert r3["status"] == "error" and r3["exit_code"] == 1
    assert r3["stderr"].endswith("ZeroDivisionError: division by zero\n")
    r4 = client.cell(sid, "import sys\nsys.exit(3)")
    assert (r4["status"], r4["exit_code"]) == ("error", 3)
    r5 = client.cell(sid, "'rows' in globals(), statistics.__name__, y * 2", variables={"y": 21})
    assert r5["status"] == "ok" and r5["return_value"] == [False, "statistics", 42]
    listed = client.ok("session_list", {})["sessions"]
    assert [(s["session_id"], s["cells"], s["busy"]) for s in listed] == [(sid, 5, False)]
    assert client.ok("session_close", {"session_id": sid}) == {"session_id": sid, "cells": 5}
    assert client.error_text("run_python", {"session_id": sid, "code": "1"}) == "run_python: " + NOT_FOUND
    assert client.ok("session_list", {}) == {"sessions": []}
    client.close()


def test_a_cell_past_its_timeout_is_interrupted_and_the_session_keeps_its_state(client):
    sid = client.open()
    client.cell(sid, "x = 41")
    t0 = time.monotonic()
    r = client.cell(sid, "x += 1\nwhile True: pass", timeout_s=1)
    assert 1.0 <= time.monotonic() - t0 < 2.5
    assert r["status"] == "timeout" and r["exit_code"] == 1
    assert r["stderr"].endswith("KeyboardInterrupt\n") and 'File "<cell>", line 2' in r["stderr"]
    assert r["session"]["alive"] is True
    assert {"name": "timeout_ms", "value": 1000, "enforced_by": "supervisor"} in r["limits"]
    assert client.cell(sid, "x")["return_value"] == 42


def test_a_cell_that_ignores_the_interrupt_has_its_session_killed(client):
    sid = client.open()
    t0 = time.monotonic()
    r = client.cell(sid, "import time\nwhile True:\n    try:\n        time.sleep(10)\n"
                         "    except KeyboardInterrupt:\n        print('ignored', flush=True)", timeout_s=1)
    # the interrupt at 1 s, the kill 2 s later
    assert 2.9 <= time.monotonic() - t0 < 5
    assert r["status"] == "timeout" and r["stdout"] == "ignored\n"
    assert r["session"] == {"id": sid, "cell": 1, "alive": False}
    assert "the session ended: its interpreter is gone" in r.get("warnings", [])
    assert client.error_text("run_python", {"session_id": sid, "code": "1"}) == "run_python: " + NOT_FOUND
    # its jail is gone with it
    assert_no_jails_soon(client)
    client.close()


# A cell's code can write to the tool socket (fd 3) what the session loop
# writes there: a cell's end.  It never moves another cell's boundary.
FORGED_END = ('import json, os, sys, time\n'
              'def end(n):\n'
              '    os.write(3, json.dumps({"jsonrpc": "2.0", "method": "pycell/cell_end",\n'
              '                            "params": {"cell": n, "exit_code": 0}}).encode())\n')


def test_an_end_the_cell_sends_itself_that_is_not_its_own_changes_nothing(client):
    sid = client.open()
    # no number, another cell's, a string: none ends the running cell
    r = client.cell(sid, FORGED_END + 'print("one", flush=True)\nend(None); end(7); end("1")\n'
                    'time.sleep(0.5)\nprint("two")\n5')
    assert r["status"] == "ok" and r["stdout"] == "one\ntwo\n" and r["return_value"] == 5, r
    assert client.cell(sid, 'print("next")')["stdout"] == "next\n"


def test_a_cell_that_ends_itself_early_prints_into_no_other_cell(client):
    sid = client.open()
    client.cell(sid, "x = 1")
    # cell 2 sends its own end with its own number, then goes on printing:
    # its result is cut there, and what it prints after reaches no one
    t0 = time.monotonic()
    r = client.cell(sid, FORGED_END + 'print("before", flush=True)\nend(2)\ntime.sleep(1)\n'
                    'try:\n    print("after", flush=True)\nexcept BrokenPipeError:\n    x = 2\n'
                    'print("unflushed")\nsys.stderr.write("late\\n")')
    assert time.monotonic() - t0 < 0.9, "the cell's own end ended it"
    assert r["status"] == "ok" and r["stdout"] == "before\n" and r["stderr"] == "", r
    # the next cell waits for cell 2's code to end; what it gets is its own
    r = client.cell(sid, 'print("three")\nx', timeout_s=10)
    assert r["status"] == "ok" and r["stdout"] == "three\n" and r["stderr"] == "", r
    assert r["return_value"] == 2 and r["session"]["cell"] == 3
    # cell 2's loop end (numbered 2) came after cell 3 began: it ended nothing
    r = client.cell(sid, 'import time\ntime.sleep(0.5)\nprint("four")')
    assert r["status"] == "ok" and r["stdout"] == "four\n", r


def test_output_between_cells_is_no_cells(client):
    sid = client.open()
    # a thread that outlives its cell prints while no cell runs
    r = client.cell(sid, "import threading, time, sys\n"
                    "def late():\n    time.sleep(0.5)\n    print('between', flush=True)\n"
                    "threading.Thread(target=late).start()\nprint('own')")
    assert r["stdout"] == "own\n"
    time.sleep(1.0)
    r = client.cell(sid, "print('next')")
    assert r["stdout"] == "next\n" and r["stderr"] == "", r
    # said, not lost in silence
    assert "8 bytes written while no cell ran (by a thread or process that outlived its cell) were dropped" \
        in r["warnings"], r


def test_a_cell_that_replaces_fd_3_keeps_its_session(client):
    sid = client.open()
    client.cell(sid, "x = 1")
    r = client.cell(sid, "import os\nr, w = os.pipe()\nos.dup2(r, 3)\nx = 2")
    assert r["status"] == "ok", r
    # the loop has its own copy of the socket: the next cell runs at once
    t0 = time.monotonic()
    r = client.cell(sid, "print(x)", timeout_s=20)
    assert time.monotonic() - t0 < 3 and r["status"] == "ok" and r["stdout"] == "2\n", r
    # and closing fd 3 is as harmless to the session
    assert client.cell(sid, "import os\nos.close(3)")["status"] == "ok"
    assert client.cell(sid, "x + 1")["return_value"] == 3


def test_a_cell_that_replaces_the_loops_channel_ends_its_session_at_once(client):
    sid = client.open()
    t0 = time.monotonic()
    r = client.cell(sid, "import os, pycell._session as s\nr, w = os.pipe()\nos.dup2(r, s._sock.fileno())",
                    timeout_s=20)
    assert time.monotonic() - t0 < 3, "reported at once, not at the cell's timeout"
    assert r["status"] == "error" and r["session"]["alive"] is False, r
    assert r["stderr"] == ("pycell: the session's channel to the supervisor was closed or replaced: "
                           "the session ends\n"), r
    assert "the session ended: its interpreter is gone" in r.get("warnings", [])
    assert client.error_text("run_python", {"session_id": sid, "code": "1"}) == "run_python: " + NOT_FOUND
    assert_no_jails_soon(client)


def test_a_cell_can_be_cancelled_and_the_session_goes_on(client):
    sid = client.open()
    client.send({"jsonrpc": "2.0", "id": "c", "method": "tools/call",
                 "params": {"name": "run_python", "arguments": {"session_id": sid, "code":
                            "import time\nprint('started', flush=True)\ntime.sleep(30)"}}})
    time.sleep(0.5)
    # one cell at a time
    assert client.error_text("run_python", {"session_id": sid, "code": "1"}) == (
        "run_python: the session is busy running a cell; wait for it to finish, then call again")
    client.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "c"}})
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        listed = client.ok("session_list", {})["sessions"]
        if not listed[0]["busy"]:
            break
        time.sleep(0.05)
    assert listed[0]["busy"] is False
    assert client.cell(sid, "'still here'")["return_value"] == "still here"


def test_two_sessions_see_nothing_of_each_other(client):
    a, b = client.open(), client.open()
    client.cell(a, "secret = 'a'\nopen('/tmp/t', 'w').write('a')\nopen('w', 'w').write('a')\n"
                   "import subprocess\np = subprocess.Popen(['sleep', '60'])")
    r = client.cell(b, "import os\n('secret' in globals(), os.path.exists('/tmp/t'), os.listdir('.'), "
                       "sorted(int(d) for d in os.listdir('/proc') if d.isdigit()))")
    assert r["return_value"] == [False, False, [], [1, 2]]


def test_a_session_imports_nothing_a_warm_run_has_not(client):
    """A session's loop (pycell._session) and what it uses are the
    zygote's, shared by every jail: a session's first cell finds no module
    that a warm run's python has not, and none of socket, signal and
    selectors, whose enum classes cost every idle session about 0.3 MiB
    of its own (tests/bench/data.py's density rows)."""
    look = "import sys\nsorted(sys.modules)"
    sid = client.open()
    in_session = client.cell(sid, look)["return_value"]
    in_run = client.ok("run_python", {"code": look})["return_value"]
    assert sorted(set(in_session) - set(in_run)) == []
    assert [m for m in ("socket", "signal", "selectors") if m in in_session] == []
    assert "pycell._session" in in_run


def maps(pid):
    try:
        with open(f"/proc/{pid}/maps") as f:
            return f.read()
    except OSError:   # it ended meanwhile
        return ""


def zygote_jail_init(pid):
    """The pid of the init of the one jail below pid that runs a program
    (a ready jail's is named pycell-ready) and is a clone of the zygote,
    which maps libpython (a cold run's does not: the font list's, built
    once, may be running)."""
    inits = [p["pid"] for p in jail_procs(pid)
             if p["name"] == "pycell-init" and p["nspid"][-1] == 1 and "libpython" in maps(p["pid"])]
    assert len(inits) == 1, inits
    return inits[0]


def vm_pte_kib(pid):
    return int(proc_status(pid)["VmPTE"].split()[0])


def test_a_sessions_init_is_pycell_init(client):
    """A session's init, once its python is forked, is pycell-init
    (src/jail/small_init.h): small from the start, no copy of the zygote
    to give back; the session goes on, and its end is init's to report."""
    sid = client.open()
    inits = [p["pid"] for p in jail_procs(client.proc.pid) if p["name"] == "pycell-init" and p["nspid"][-1] == 1]
    assert len(inits) == 1, inits
    st = proc_status(inits[0])
    with open(f"/proc/{inits[0]}/cmdline", "rb") as f:
        assert f.read().split(b"\0")[0] == b"pycell-init"   # its own: the zygote's is "pycell __zygote"
    assert "libpython" not in maps(inits[0])
    assert int(st["VmRSS"].split()[0]) < 2048 and vm_pte_kib(inits[0]) <= 64, st
    assert client.cell(sid, "6 * 7")["return_value"] == 42
    r = client.cell(sid, "import os\nos._exit(3)")
    assert r["status"] == "error" and r["exit_code"] == 3, r
    assert_no_jails_soon(client)


@pytest.mark.skipif(bool(os.environ.get("PYCELL_SANITIZERS")),
                    reason="a sanitizer build's init keeps all it inherited: the runtime's own memory "
                           "is mapped after the start (src/jail/init_mem.h)")
def test_a_sessions_init_without_pycell_init_gives_back_what_it_inherited(host_tmp):
    """With no pycell-init to execute (a data dir without one, and none
    installed: pycell doctor warns, the zygote logs why), a session's init
    is a clone of the zygote; once python has run a second, it unmaps all
    but what the process had at its start (libpython and python's memory
    among what goes), and its page tables shrink; the session goes on,
    and its end is still init's to report."""
    data = host_tmp / "data"   # copies: a jail binds runtime/ from it, and follows no link
    for d in ("runtime", "policy"):
        shutil.copytree(Path(DATADIR) / d, data / d, ignore=shutil.ignore_patterns("wasm", "__pycache__"))
    env = pycell_env({"PYCELL_DATADIR": str(data)})
    doctor = json.loads(subprocess.run([PYCELL, "doctor", "--json"], env=env, capture_output=True,
                                       timeout=60).stdout)
    check = [c for c in doctor["checks"] if c["name"] == "init"][0]
    if check["status"] == "ok":
        pytest.skip(f"an installed pycell-init is found: {check['detail']}")
    assert check["status"] == "warn" and "a warm jail's init stays a copy of the zygote" in check["detail"], check
    client = Client(env=env)
    try:
        client.initialize()
        sid = client.open()
        init = zygote_jail_init(client.proc.pid)
        before = vm_pte_kib(init)
        deadline = time.monotonic() + 10
        while "libpython" in maps(init) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "libpython" not in maps(init) and maps(init) != ""
        assert vm_pte_kib(init) < before
        assert client.cell(sid, "6 * 7")["return_value"] == 42
        r = client.cell(sid, "import os\nos._exit(3)")
        assert r["status"] == "error" and r["exit_code"] == 3, r
        assert_no_jails_soon(client)
    finally:
        client.kill()
        client._stderr_reader.join(10)
    assert b"a jail's init is a copy of the zygote" in client.stderr, client.stderr[-2000:]


def test_a_closed_session_leaves_no_process(client):
    sid = client.open()
    r = client.cell(sid, "import subprocess\nsubprocess.Popen(['sleep', '600'], start_new_session=True,"
                         " stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid")
    assert r["status"] == "ok" and isinstance(r["return_value"], int)
    assert run_jails(client.proc.pid) != []
    client.ok("session_close", {"session_id": sid})
    assert_no_jails_soon(client)
    client.close()


# ------------------------------------------------------------ limits

def test_sessions_per_client_are_capped(policy_file):
    c = Client(*policy_args(policy_file, max=3, max_per_client=2))
    try:
        c.initialize()
        a, b = c.open(), c.open()
        assert c.error_text("session_open", {}) == ("Too many sessions: this client has 2 open, the most "
                                                    "it may; close one (session_close) or let it expire")
        c.ok("session_close", {"session_id": a})
        assert c.open() != b
    finally:
        c.kill()


def test_an_idle_session_is_closed(policy_file):
    c = Client(*policy_args(policy_file, idle_timeout="5s"))
    try:
        c.initialize()
        sid = c.open(idle_timeout_s=1)
        assert c.error_text("session_open", {"idle_timeout_s": 6}) == (
            "Invalid arguments for session_open: \"idle_timeout_s\" 6 is above this server's limit of 5 s")
        assert c.cell(sid, "1")["status"] == "ok"
        time.sleep(2.5)
        assert c.error_text("run_python", {"session_id": sid, "code": "1"}) == "run_python: " + NOT_FOUND
        assert [s["session_id"] for s in c.ok("session_list", {})["sessions"]] != [sid]
    finally:
        c.kill()


def test_a_memory_bomb_ends_its_session_as_memory_limit(policy_file):
    c = Client("--policy", policy_file({"limits": {"memory": "64M"}}, name="small"))
    try:
        c.initialize()
        sid = c.open()
        c.cell(sid, "x = 1")
        r = c.cell(sid, "b = bytearray(256 << 20)")
        assert r["status"] == "memory_limit", r
        assert r["session"]["alive"] is False
        assert c.error_text("run_python", {"session_id": sid, "code": "x"}) == "run_python: " + NOT_FOUND
        # the server serves on: a new session works
        assert c.cell(c.open(), "2 + 2")["return_value"] == 4
    finally:
        c.kill()


def cgroups_of(pid):
    """{controller: path} of /proc/PID/cgroup ("" for cgroup v2's line)."""
    out = {}
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, ctrls, path = line.split(":", 2)
        for c in ctrls.split(","):
            out[c] = path
    return out


def cgroup_mount(ctrl):
    """Where the v1 hierarchy of ctrl, or cgroup v2 (""), is mounted."""
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        pre, post = line.split(" - ")
        fstype, _, opts = post.split(" ", 2)
        if (ctrl == "" and fstype == "cgroup2") or (ctrl and fstype == "cgroup" and ctrl in opts.split(",")):
            return pre.split()[4]
    return None


def session_jail(c, known=()):
    """(init, python) host pids of the one session jail of server c whose
    init is not in known (a ready jail's init is named pycell-ready)."""
    def comm(p):
        return Path(f"/proc/{p}/comm").read_text().strip()
    [init] = [p for p in descendants(c.proc.pid) if comm(p) == "pycell-init" and p not in known]
    [python] = [p for p in descendants(init) if comm(p) == "python3"]
    return init, python


def test_a_session_is_in_cgroups_of_its_own_with_the_device_filter(client):
    """A session's init and python are in the session's own cgroup in every
    hierarchy pycell limits with, and in a cgroup2 dir of the same name
    with the device filter attached to it alone (as a run's:
    test_limits.py); another session's are others; session_close removes
    the closed one's, and the server's exit the rest."""
    from test_limits import bpf_device_progs, doctor
    if os.geteuid() != 0:
        pytest.skip("session cgroups are made as root on this host")
    cg = doctor()["cgroups"]
    used = [c for c in ("memory", "pids", "cpu") if cg["limits"][c] == "cgroup1"]
    if not used and not cg["v2_parent"]:
        pytest.skip(f"no cgroup for sessions on this host: {cg}")

    def dirs(init, python):
        """The session's dirs, as host paths, and the name they share."""
        groups = cgroups_of(init)
        assert cgroups_of(python) == groups
        out = [cgroup_mount(c) + groups[c] for c in used]
        if cg["v2_parent"]:
            out.append(cg["v2_mount"] + groups[""])
        names = {os.path.basename(d) for d in out}
        assert len(names) == 1 and re.fullmatch(r"pycell-\d+-\d+", names.pop()), out
        for d in out:
            assert os.path.isdir(d), d
        if cg["v2_parent"] and cg["device_filter"]:
            assert bpf_device_progs(out[-1]) == 1
            assert bpf_device_progs(cg["v2_parent"]) == 0
        return out

    a = client.open()
    assert client.cell(a, "x = 1")["status"] == "ok"
    init_a, python_a = session_jail(client)
    dirs_a = dirs(init_a, python_a)
    b = client.open()
    assert client.cell(b, "y = 2")["status"] == "ok"
    dirs_b = dirs(*session_jail(client, known=(init_a,)))
    assert set(dirs_a).isdisjoint(dirs_b)
    assert client.ok("session_close", {"session_id": a}) == {"session_id": a, "cells": 1}
    deadline = time.monotonic() + 5
    while any(os.path.exists(d) for d in dirs_a) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert [d for d in dirs_a if os.path.exists(d)] == []
    assert all(os.path.isdir(d) for d in dirs_b)
    assert client.cell(b, "y")["return_value"] == 2
    client.close()
    assert [d for d in dirs_b if os.path.exists(d)] == []


def shared_policy(policy_file, memory, shared):
    return policy_file({"limits": {"memory": memory}, "sessions": {"shared_memory": shared}}, name="shared")


def test_sessions_that_share_a_memory_cgroup_are_each_held_to_their_limit(policy_file):
    """sessions.shared_memory: two sessions' jails are in one memory cgroup
    of that limit, each with pids and CPU cgroups of its own; a session
    whose processes hold more than limits.memory is killed within a tick
    (the cell sleeps on after its allocation, so only the watch ends it),
    its cell memory_limit; the other session goes on; one that grows by
    short cells is caught at a cell's end; the group goes with the
    server."""
    c = Client("--policy", shared_policy(policy_file, "64M", "1G"))
    try:
        c.initialize()
        a, b = c.open(), c.open()
        r = c.cell(a, "x = 1")
        limits = {x["name"]: x for x in r["limits"]}
        assert limits["memory_bytes"] == {"name": "memory_bytes", "value": 64 << 20, "enforced_by": "supervisor"}
        assert limits["shared_memory_bytes"]["value"] == 1 << 30
        assert limits["shared_memory_bytes"]["enforced_by"] in ("cgroup1", "cgroup2")
        v2 = limits["shared_memory_bytes"]["enforced_by"] == "cgroup2"
        # the server's processes by the memory cgroup they are charged to
        # (v2: the nearest dir with memory.max), and their pids cgroups
        root = cgroup_mount("" if v2 else "memory")
        by_group = {}
        for p in descendants(c.proc.pid):
            g = cgroups_of(p)
            d = root + (g[""] if v2 else g["memory"])
            while v2 and d != root and not Path(d, "memory.max").exists():
                d = os.path.dirname(d)
            by_group.setdefault(d, []).append(g["" if v2 else "pids"])
        limit_file = "memory.max" if v2 else "memory.limit_in_bytes"
        shared = [d for d in by_group if Path(d, limit_file).exists() and
                  Path(d, limit_file).read_text() == f"{1 << 30}\n"]
        assert len(shared) == 1, by_group
        shared_dir = shared[0]
        # each session's init and python, in a pids (v2: a) cgroup of its own
        assert len(by_group[shared_dir]) == 4 and len(set(by_group[shared_dir])) == 2, by_group
        t0 = time.monotonic()
        r = c.cell(a, "b = bytearray(256 << 20)\nimport time\ntime.sleep(20)")
        assert time.monotonic() - t0 < 5, r
        assert r["status"] == "memory_limit" and r["session"]["alive"] is False, r
        over = [w for w in r["warnings"] if "more than its memory limit of 67108864 (held by the supervisor" in w]
        assert len(over) == 1, r["warnings"]
        held = int(re.search(r"held (\d+) bytes", over[0]).group(1))
        assert 64 << 20 < held < 512 << 20
        assert c.error_text("run_python", {"session_id": a, "code": "x"}) == "run_python: " + NOT_FOUND
        # the other session keeps its state, and may hold what its limit allows
        assert c.cell(b, "y = bytearray(24 << 20)\nlen(y)")["return_value"] == 24 << 20
        r = c.cell(b, "len(y)")
        assert (r["status"], r["return_value"], r["warnings"]) == ("ok", 24 << 20, [])
        # memory grown by cells shorter than a tick is read at each end:
        # 8 MiB a cell (a few ms each) passes 64 MiB by the ninth cell
        d = c.open()
        n = 0
        for n in range(1, 13):
            r = c.cell(d, f"x{n} = bytearray(8 << 20)")
            if r["status"] != "ok":
                break
        assert (r["status"], r["session"]["alive"]) == ("memory_limit", False), r
        assert 4 <= n <= 9, n
        assert [w for w in r["warnings"] if "more than its memory limit of 67108864" in w] != []
        assert c.error_text("run_python", {"session_id": d, "code": "1"}) == "run_python: " + NOT_FOUND
        assert os.path.isdir(shared_dir)
        c.close()
        assert not os.path.exists(shared_dir)
    finally:
        c.kill()


def test_the_shared_memory_cgroup_bounds_the_sessions_together(policy_file):
    """Past the shared group's limit the kernel's OOM killer acts, though
    no session passed limits.memory: the cell that was running when it did
    ends as memory_limit, without the supervisor's warning."""
    c = Client("--policy", shared_policy(policy_file, "512M", "96M"))
    try:
        c.initialize()
        sid = c.open()
        r = c.cell(sid, "b = bytearray(200 << 20)")
        assert r["status"] == "memory_limit" and r["session"]["alive"] is False, r
        assert [w for w in r["warnings"] if "held by the supervisor" in w] == []
        assert c.cell(c.open(), "2 + 2")["return_value"] == 4
    finally:
        c.kill()


def test_shared_memory_is_a_size_of_64m_or_more(policy_file):
    path = policy_file({"sessions": {"shared_memory": "1M"}}, name="tiny")
    c = Client("--policy", path)
    assert c.proc.wait(timeout=10) == 2
    c._stderr_reader.join(timeout=5)
    err = c.stderr
    assert err.decode().endswith(f"policy {path}: sessions.shared_memory: expected a size of at least 64M (or 0: a "
                                 "memory cgroup for each session), got \"1M\"\n"), err


# ------------------------------------------------------------ files

def test_files_land_in_the_workspace_of_a_fresh_run(client):
    blob = bytes(range(256)) * 3
    res = client.ok("run_python", {"code": "import os\n(open('notes/a.txt').read(), "
                                           "open('b.bin', 'rb').read() == bytes(range(256)) * 3, "
                                           "sorted(os.listdir('.')))",
                                   "files": [{"path": "notes/a.txt", "text": "héllo\n"},
                                             {"path": "b.bin", "base64": base64.b64encode(blob).decode()}]})
    assert res["status"] == "ok" and res["return_value"] == ["héllo\n", True, ["b.bin", "notes"]]


@pytest.mark.parametrize("files, why", [
    ("x", 'Invalid arguments for run_python: "files" must be an array of {"path": ..., "text" or "base64": ...}, got a string'),
    ([{"path": "/etc/x", "text": ""}], 'Invalid arguments for run_python: files[0]: the path "/etc/x" is absolute: give it relative to /workspace'),
    ([{"path": "a/../../x", "text": ""}], 'Invalid arguments for run_python: files[0]: the path "a/../../x" has an empty, "." or ".." component'),
    ([{"path": "a", "text": "", "base64": ""}], 'Invalid arguments for run_python: files[0] (a): give exactly one of "text" and "base64"'),
    ([{"path": "a", "base64": "***"}], 'Invalid arguments for run_python: files[0] (a): "base64" is not valid base64'),
    ([{"path": "a", "text": "", "mode": 7}], 'Invalid arguments for run_python: files[0]: unknown key "mode"; a file has path and text or base64'),
    ([{"path": str(i), "text": ""} for i in range(65)], 'Invalid arguments for run_python: "files" holds 65 files; at most 64 may be given'),
    ([{"path": "big", "text": "x" * (3 << 20)}, {"path": "b", "text": "x"}], 'Invalid arguments for run_python: "files" hold more than 3 MiB as sent (text, or base64); pass less, or in several calls of a session'),
])
def test_bad_files_are_refused_with_their_reason(client, files, why):
    assert client.error_text("run_python", {"code": "1", "files": files}) == why


# ------------------------------------------------------------ owners, over HTTP

def test_over_http_a_cell_names_its_session_in_mcp_param_session(serve, tmp_path):  # noqa: F811
    """2026-07-28: run_python's inputSchema mirrors session_id into the
    Mcp-Param-Session header (x-mcp-header), which a balancer routes by; the
    server holds the header to the body."""
    s = serve("--listen", "127.0.0.1:0", tmp_path=tmp_path)
    _, data = s.modern(1, "tools/list", {})
    tools = {t["name"]: t for t in json.loads(data)["result"]["tools"]}
    assert tools["run_python"]["inputSchema"]["properties"]["session_id"]["x-mcp-header"] == "Session"
    assert tools["session_close"]["inputSchema"]["properties"]["session_id"]["x-mcp-header"] == "Session"
    _, data = s.modern(2, "tools/call", {"name": "session_open", "arguments": {}})
    sid = json.loads(data)["result"]["structuredContent"]["session_id"]
    cell = {"name": "run_python", "arguments": {"session_id": sid, "code": "6 * 7"}}
    for i, (h, why) in enumerate([
            ({"Mcp-Param-Session": None}, "Mcp-Param-Session is missing; it carries the argument session_id"),
            ({"Mcp-Param-Session": "0" * 32}, "Mcp-Param-Session does not match the argument session_id")]):
        headers = {k: v for k, v in h.items() if v is not None}
        r, data = s.modern(10 + i, "tools/call", cell, headers=headers, drop=[k for k, v in h.items() if v is None])
        assert r.status == 400, data
        assert json.loads(data)["error"] == {"code": -32020, "message": "Header mismatch: " + why}
    # the value may come base64-encoded, as any Mcp-* header's
    enc = "=?base64?" + base64.b64encode(sid.encode()).decode() + "?="
    r, data = s.modern(20, "tools/call", cell, headers={"Mcp-Param-Session": enc})
    assert r.status == 200 and json.loads(data)["result"]["structuredContent"]["return_value"] == 42
    # a call without a session_id sends no such header, and one is refused
    r, data = s.modern(21, "tools/call", {"name": "run_python", "arguments": {"code": "1"}},
                       headers={"Mcp-Param-Session": sid})
    assert r.status == 400 and "Mcp-Param-Session does not match the argument session_id" in data.decode()
    # the 2025 revisions do not know the header: their tools do not say it
    legacy = Client()
    try:
        legacy.initialize()
        props = {t["name"]: t for t in legacy.request(1, "tools/list")["result"]["tools"]}
        assert "x-mcp-header" not in props["run_python"]["inputSchema"]["properties"]["session_id"]
    finally:
        legacy.kill()


def test_a_handle_works_only_for_the_token_that_opened_it(serve, tmp_path):  # noqa: F811
    s = serve("--listen", "127.0.0.1:0", tokens=[
        {"name": "a", "sha256": sha("ta")}, {"name": "b", "sha256": sha("tb")}], tmp_path=tmp_path)
    A, B = {"Authorization": "Bearer ta"}, {"Authorization": "Bearer tb"}

    def call(i, name, args, h):
        r, data = s.modern(i, "tools/call", {"name": name, "arguments": args}, headers=h)
        assert r.status == 200, data
        return json.loads(data)["result"]
    sid = call(1, "session_open", {}, A)["structuredContent"]["session_id"]
    assert call(2, "run_python", {"session_id": sid, "code": "x = 5"}, A)["structuredContent"]["status"] == "ok"
    # every request is its own HTTP exchange: the handle is the state
    assert call(3, "run_python", {"session_id": sid, "code": "x"}, A)["structuredContent"]["return_value"] == 5
    for i, (name, args) in enumerate([("run_python", {"session_id": sid, "code": "x"}),
                                      ("session_close", {"session_id": sid}),
                                      ("run_python", {"session_id": "0" * 32, "code": "1"})]):
        res = call(10 + i, name, args, B)
        assert res["isError"] is True and res["content"][0]["text"] == f"{name}: {NOT_FOUND}"
    assert call(20, "session_list", {}, B)["structuredContent"] == {"sessions": []}
    assert [x["session_id"] for x in call(21, "session_list", {}, A)["structuredContent"]["sessions"]] == [sid]
    assert call(22, "session_close", {"session_id": sid}, A)["structuredContent"] == {"session_id": sid, "cells": 2}


def test_a_server_has_the_descriptors_its_sessions_need(tmp_path):
    """pycell mcp raises its soft RLIMIT_NOFILE to the hard one (a session
    holds about 14 descriptors of the server's), says so when even that is
    short of sessions.max, and a session past it fails to open naming why,
    the server serving on and ending cleanly."""
    pol = tmp_path / "sessions.json"
    pol.write_text(json.dumps({"extends": "default", "sessions": {"max": 50, "max_per_client": 50}}))
    s = RawMcp(["--policy", str(pol)], prefix=("prlimit", "--nofile=200:2000"))
    with open(f"/proc/{s.p.pid}/limits") as f:
        assert re.search(r"^Max open files +2000 +2000 ", f.read(), re.M)
    assert b"open files" not in s.close()

    s = RawMcp(["--policy", str(pol)], prefix=("prlimit", "--nofile=120:120"))
    opened = 0
    while (r := s.tool("session_open", {})).get("isError") is not True:
        opened += 1
        assert opened < 50, "every session opened with 120 descriptors"
    assert opened > 0
    assert r["content"][0]["text"].startswith("The session could not be opened: "), r
    assert r["content"][0]["text"].endswith(": Too many open files"), r
    err = s.close()
    assert (b"pycell: warning: mcp: sessions.max (50 in all) needs about 956 open files (14 a session), and "
            b"this process may open 120: sessions past that fail to open") in err
