"""Sessions that outlive their processes (issue 37): with a state_dir, an
idle session pauses (its state written by its own interpreter, kept as
bytes by the supervisor) and its next cell resumes it in a fresh jail;
`pycell serve` pauses its sessions at SIGTERM and resumes them after a
restart, for their token only; session_fork copies a session.  And the
faults: a damaged snapshot or record, a state too big for the policy's
cap, a full disk, a state directory others could write."""

import ctypes
import json
import os
import re
import signal
import stat
import subprocess
import time

import pytest

from conftest import HOST_IS_ROOT, PYCELL, run_jails
from test_serve import TASKS, serve, sha, wait_for  # noqa: F401 (serve is a fixture)
from test_sessions import NOT_FOUND, Client

# what a cell leaves that a snapshot cannot take, by kind
STATE = """
import socket, threading
import pandas as pd
x = 41
def f(n):
    return n + x
g = lambda s: s * 2
class K:
    def __init__(self):
        self.v = 7
k = K()
class S(K):
    def __init__(self):
        super().__init__()   # a __class__ cell: a cycle through S
        self.v *= 2
s = S()
class Slotted:
    __slots__ = ("a",)   # not a plain class: dill keeps it (each such name apart)
slotted = Slotted()
slotted.a = 3
alias = df = pd.DataFrame({"a": [1, 2, 3], "b": ["p", "q", "r"]})
blob = bytes(range(256)) * 4096
conn = socket.socket()
t = threading.Thread(target=lambda: None)
gen = (i for i in range(3))
fh = open("/workspace/kept.txt", "w")
fh.write("written before the pause")
fh.close()
fh = open("/workspace/kept.txt")
"""
CHECK = ("(f(1), g('ab'), k.v, type(k).__name__, S().v, s.v, isinstance(s, K), slotted.a, alias is df, int(df.a.sum()), list(df.b), "
         "len(blob), list(blob[:3]), open('/workspace/kept.txt').read(), "
         "[n for n in ('conn', 't', 'gen', 'fh') if n in globals()])")
EXPECT = [42, "abab", 7, "K", 14, 14, True, 3, True, 6, ["p", "q", "r"], 1 << 20, [0, 1, 2], "written before the pause", []]
NOT_KEPT = [{"name": "conn", "why": "socket (socket)"}, {"name": "t", "why": "thread (Thread)"},
            {"name": "gen", "why": "generator (generator)"}, {"name": "fh", "why": "open file (TextIOWrapper)"}]


@pytest.fixture
def state(tmp_path, policy_file):
    """A state directory, a config naming it, and a policy whose sessions
    pause after 1 s."""
    d = tmp_path / "state"
    conf = tmp_path / "pycell.conf"
    conf.write_text(json.dumps({"state_dir": str(d)}))
    pol = policy_file({"sessions": {"idle_timeout": "1s"}}, name="persist")
    return d, ["--config", str(conf), "--policy", pol]


def files(d):
    return sorted(os.listdir(d / "sessions")) if (d / "sessions").exists() else []


def wait_paused(list_fn, sid, timeout=15):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = [s for s in list_fn() if s["session_id"] == sid]
        if got and got[0]["paused"] and not got[0]["busy"]:
            return got[0]
        time.sleep(0.1)
    raise AssertionError(f"session {sid} did not pause: {list_fn()}")


def stdio(args):
    c = Client(*args)
    c.initialize()
    return c


def listing(c):
    return lambda: c.ok("session_list", {})["sessions"]


def test_an_idle_session_pauses_to_disk_and_its_next_cell_resumes_it(state):
    d, args = state
    c = stdio(args)
    try:
        sid = c.open()
        assert c.cell(sid, STATE)["status"] == "ok"
        assert c.cell(sid, "x")["return_value"] == 41
        entry = wait_paused(listing(c), sid)
        assert entry["cells"] == 2
        # its jail is gone, its state on disk: the directory the server's
        # alone, the files too
        deadline = time.monotonic() + 5
        while run_jails(c.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert run_jails(c.proc.pid) == []
        assert files(d) == [f"{sid}.json", f"{sid}.snap"]
        assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
        assert stat.S_IMODE(os.stat(d / "sessions").st_mode) == 0o700
        for name in files(d):
            assert stat.S_IMODE(os.stat(d / "sessions" / name).st_mode) == 0o600
        record = json.loads((d / "sessions" / f"{sid}.json").read_text())
        assert record["id"] == sid and record["owner"] is None and record["cells"] == 2
        assert record["scope"].startswith("stdio.") and record["not_kept"] == NOT_KEPT
        assert record["bytes"] == os.path.getsize(d / "sessions" / f"{sid}.snap") > 1 << 20

        res = c.call("run_python", {"session_id": sid, "code": CHECK})
        st = res["structuredContent"]
        assert st["status"] == "ok", st
        assert st["return_value"] == EXPECT
        assert st["session"]["resumed"] is True and st["session"]["cell"] == 3
        assert st["session"]["not_kept"] == NOT_KEPT and st["session"]["paused_s"] >= 0
        assert any(w.startswith("the session was paused ") and "not kept: conn (socket (socket)), t (thread "
                   "(Thread)), gen (generator (generator)), fh (open file (TextIOWrapper))" in w
                   for w in st["warnings"]), st["warnings"]
        # the restored /workspace is where the cell started, not its output
        assert "files" not in st or st["files"] == []
        # resumed: its snapshot goes (once the cell was answered), and the
        # next cell is a plain one
        wait_for(lambda: files(d) == [], timeout=5, what="the snapshot to go")
        st = c.cell(sid, "x = 1\nf(1)")
        assert st["return_value"] == 2 and "resumed" not in st["session"]
        assert [s["paused"] for s in c.ok("session_list", {})["sessions"]] == [False]
    finally:
        c.kill()


def test_a_fork_diverges_and_leaves_the_original_as_it_was(state):
    d, args = state
    c = stdio(args)
    try:
        sid = c.open()
        assert c.cell(sid, "import socket\nx = [1]\nconn = socket.socket()\nopen('/workspace/f', 'w').write('a')")[
            "status"] == "ok"
        fork = c.ok("session_fork", {"session_id": sid})
        fid = fork["session_id"]
        assert fid != sid and fork["forked_from"] == sid and fork["snapshot_bytes"] > 0
        assert fork["not_kept"] == [{"name": "conn", "why": "socket (socket)"}]
        assert c.cell(fid, "x.append(2)\nopen('/workspace/f', 'a').write('b')\n(x, 'conn' in globals())")[
            "return_value"] == [[1, 2], False]
        assert c.cell(sid, "(x, open('/workspace/f').read(), type(conn).__name__)")["return_value"] == [
            [1], "a", "socket"]
        assert c.cell(fid, "open('/workspace/f').read()")["return_value"] == "ab"
        # a paused session forks from its snapshot, which stays
        wait_paused(listing(c), sid)
        fork2 = c.ok("session_fork", {"session_id": sid})
        assert fork2["forked_from"] == sid and fork2["not_kept"] == [{"name": "conn", "why": "socket (socket)"}]
        assert c.cell(fork2["session_id"], "x")["return_value"] == [1]
        assert f"{sid}.snap" in files(d)
        # session_close of a paused session removes its snapshot
        assert c.ok("session_close", {"session_id": sid}) == {"session_id": sid, "cells": 2}
        assert f"{sid}.snap" not in files(d)
        assert c.call("run_python", {"session_id": sid, "code": "x"})["content"][0]["text"] == \
            f"run_python: {NOT_FOUND}"
        # not another's, not a guess
        assert c.error_text("session_fork", {"session_id": "0" * 32}) == f"session_fork: {NOT_FOUND}"
        assert c.error_text("session_fork", {}) == ('Invalid arguments for session_fork: "session_id", the '
                                                    'handle of the session to fork, is required')
    finally:
        c.kill()


def test_a_stdio_servers_paused_sessions_go_with_it(state):
    d, args = state
    c = stdio(args)
    sid = c.open()
    c.cell(sid, "y = 3")
    wait_paused(listing(c), sid)
    assert files(d) == [f"{sid}.json", f"{sid}.snap"]
    c.proc.stdin.close()
    assert c.proc.wait(timeout=30) == 0
    assert files(d) == []
    # and a later server of the same user does not find it
    c = stdio(args)
    try:
        assert c.call("run_python", {"session_id": sid, "code": "y"})["content"][0]["text"] == \
            f"run_python: {NOT_FOUND}"
    finally:
        c.kill()


def test_serve_keeps_a_session_across_a_restart_for_its_token_only(serve, state, tmp_path):  # noqa: F811
    d, args = state
    tokens = [{"name": "a", "sha256": sha("ta")}, {"name": "b", "sha256": sha("tb")}]
    A, B = {"Authorization": "Bearer ta"}, {"Authorization": "Bearer tb"}

    def call(s, name, args, h):
        r, data = s.modern(1, "tools/call", {"name": name, "arguments": args}, headers=h)
        assert r.status == 200, data
        return json.loads(data)["result"]

    s = serve("--listen", "127.0.0.1:0", "-v", *args, tokens=tokens, tmp_path=tmp_path)
    sid = call(s, "session_open", {}, A)["structuredContent"]["session_id"]
    assert call(s, "run_python", {"session_id": sid, "code": STATE}, A)["structuredContent"]["status"] == "ok"
    s.proc.send_signal(signal.SIGTERM)
    assert s.proc.wait(30) == 0
    assert re.search(rf"session {sid} paused in \d+ ms after 1 cells".encode(), s.stderr())
    assert files(d) == [f"{sid}.json", f"{sid}.snap"]
    assert json.loads((d / "sessions" / f"{sid}.json").read_text())["owner"] == "a"

    second = tmp_path / "second"
    second.mkdir()
    # started again under another policy: the resumed session runs under it
    after = second / "after.json"
    after.write_text(json.dumps({"extends": args[3], "identity": {"hostname": "after-restart"}}))
    s = serve("--listen", "127.0.0.1:0", *args[:3], str(after), tokens=tokens, tmp_path=second)
    # another token: not found, not listed, not forked; and it is left as it was
    for name, a in (("run_python", {"session_id": sid, "code": "x"}), ("session_fork", {"session_id": sid}),
                    ("session_close", {"session_id": sid})):
        res = call(s, name, a, B)
        assert res["isError"] is True and res["content"][0]["text"] == f"{name}: {NOT_FOUND}"
    assert call(s, "session_list", {}, B)["structuredContent"] == {"sessions": []}
    listed = call(s, "session_list", {}, A)["structuredContent"]["sessions"]
    assert [(x["session_id"], x["paused"], x["cells"]) for x in listed] == [(sid, True, 1)]
    assert files(d) == [f"{sid}.json", f"{sid}.snap"]
    # its owner resumes it, and a fork of it goes its own way
    st = call(s, "run_python", {"session_id": sid, "code": CHECK}, A)["structuredContent"]
    assert st["return_value"] == EXPECT and st["session"]["resumed"] is True
    assert call(s, "run_python", {"session_id": sid, "code": "socket.gethostname()"}, A)["structuredContent"][
        "return_value"] == "after-restart"
    fid = call(s, "session_fork", {"session_id": sid}, A)["structuredContent"]["session_id"]
    assert call(s, "run_python", {"session_id": fid, "code": "x = 0\nf(1)"}, A)["structuredContent"][
        "return_value"] == 1
    assert call(s, "run_python", {"session_id": sid, "code": "f(1)"}, A)["structuredContent"]["return_value"] == 42


def pause_one(c, d, code="z = 'kept'"):
    sid = c.open()
    assert c.cell(sid, code)["status"] == "ok"
    wait_paused(listing(c), sid)
    return sid, d / "sessions" / f"{sid}.snap", d / "sessions" / f"{sid}.json"


def test_a_damaged_snapshot_or_record_is_refused_saying_so_and_removed(state):
    d, args = state
    c = stdio(args)
    try:
        # a byte changed: the checksum finds it, in the jail
        sid, snap, _ = pause_one(c, d)
        data = bytearray(snap.read_bytes())
        data[len(data) // 2] ^= 0xFF
        snap.write_bytes(bytes(data))
        st = c.cell(sid, "z")
        assert st["status"] == "setup_failed", st
        assert (st["setup_error"]["step"], st["setup_error"]["message"]) == (
            "restore", "the session could not be resumed, and is removed: the snapshot is damaged: its checksum "
            "does not match"), st
        assert files(d) == []
        assert c.call("run_python", {"session_id": sid, "code": "z"})["content"][0]["text"] == \
            f"run_python: {NOT_FOUND}"
        # cut short: its size is not its record's
        sid, snap, _ = pause_one(c, d)
        size = snap.stat().st_size
        os.truncate(snap, size - 10)
        st = c.cell(sid, "z")
        assert st["status"] == "setup_failed"
        assert (st["setup_error"]["step"], st["setup_error"]["message"]) == (
            "state_dir", f"the session could not be resumed, and is removed: the session's snapshot {snap} is "
            f"damaged: {size - 10} bytes where its record says {size}"), st
        assert files(d) == []
        # a record that is not one
        sid, _, rec = pause_one(c, d)
        rec.write_text('{"version": 1, "id": "' + sid + '"}')
        text = c.call("run_python", {"session_id": sid, "code": "z"})["content"][0]["text"]
        assert text.startswith("run_python: the session's record is damaged, and was removed: "), text
        assert files(d) == []
        # and the server goes on
        sid = c.open()
        assert c.cell(sid, "1 + 1")["return_value"] == 2
    finally:
        c.kill()


def test_a_state_over_the_policys_cap_is_not_kept_and_says_so(tmp_path, policy_file):
    d = tmp_path / "state"
    conf = tmp_path / "pycell.conf"
    conf.write_text(json.dumps({"state_dir": str(d)}))
    pol = policy_file({"sessions": {"idle_timeout": "1s", "snapshot_max": "1M"}}, name="capped")
    c = stdio(["--config", str(conf), "--policy", pol])
    try:
        sid = c.open()
        assert c.cell(sid, "big = bytes(2 << 20)")["status"] == "ok"
        text = c.error_text("session_fork", {"session_id": sid})
        assert text == ("The session could not be forked: snapshot: the session's state is more than the "
                        "1048576 bytes a snapshot may hold (the policy's sessions.snapshot_max)"), text
        # the original runs on; at its idle timeout it is closed, as without a state directory
        assert c.cell(sid, "len(big)")["return_value"] == 2 << 20
        deadline = time.monotonic() + 15
        while c.ok("session_list", {})["sessions"] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert c.ok("session_list", {})["sessions"] == []
        assert files(d) == []
    finally:
        c.proc.stdin.close()
        assert c.proc.wait(timeout=30) == 0
        c._stderr_reader.join(timeout=10)
    assert (b"could not be paused, and is closed: snapshot: the session's state is more than the 1048576 "
            b"bytes") in c.stderr, c.stderr


def test_a_state_dir_others_could_write_is_refused(tmp_path):
    d = tmp_path / "state"
    d.mkdir(mode=0o700)
    d.chmod(0o777)
    conf = tmp_path / "pycell.conf"
    conf.write_text(json.dumps({"state_dir": str(d)}))
    for cmd in (["mcp"], ["serve", "--listen", "127.0.0.1:0"]):
        p = subprocess.run([PYCELL, *cmd, "--config", str(conf)], stdin=subprocess.DEVNULL, capture_output=True,
                           timeout=30)
        assert p.returncode == 2, p
        assert (f"pycell {cmd[0]}: {d} is writable by its group or by others (mode 0777): another user could plant "
                f"or remove sessions there; chmod 0700 it").encode() in p.stderr, p.stderr


def small_tmpfs(path):
    """In the child before it runs pycell: a mount namespace of its own,
    where path is a tmpfs of 512 KiB."""
    libc = ctypes.CDLL(None, use_errno=True)
    MS_REC, MS_PRIVATE = 0x4000, 0x40000
    if (libc.unshare(0x00020000) != 0 or libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0
            or libc.mount(b"pycell-test", str(path).encode(), b"tmpfs", 0, b"size=512k,mode=0700") != 0):
        os._exit(99)


@pytest.mark.skipif(not HOST_IS_ROOT, reason="a small tmpfs for the state directory needs a mount namespace "
                    "made as root")
def test_a_full_disk_closes_the_session_with_the_reason_and_leaves_nothing(tmp_path, policy_file):
    d = tmp_path / "small"
    d.mkdir()
    conf = tmp_path / "pycell.conf"
    conf.write_text(json.dumps({"state_dir": str(d / "state")}))
    pol = policy_file({"sessions": {"idle_timeout": "1s"}}, name="full")
    c = Client("--config", str(conf), "--policy", pol, preexec=lambda: small_tmpfs(d))
    c.initialize()
    try:
        sid = c.open()
        assert c.cell(sid, "import os\nbig = os.urandom(2 << 20)\nsmall = 1")["status"] == "ok"
        deadline = time.monotonic() + 15
        while c.ok("session_list", {})["sessions"] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert c.ok("session_list", {})["sessions"] == []
        # a session that fits still pauses there
        sid2 = c.open()
        c.cell(sid2, "small = 2")
        wait_paused(listing(c), sid2)
        assert c.cell(sid2, "small")["return_value"] == 2
    finally:
        c.proc.stdin.close()
        assert c.proc.wait(timeout=30) == 0
        c._stderr_reader.join(timeout=10)
    assert b"could not be paused, and is closed: snapshot: writing the session's state: No space left on device" \
        in c.stderr, c.stderr


def test_tasks_are_kept_in_the_state_dir_across_a_restart(serve, state, tmp_path):  # noqa: F811
    """A task's record is there before its handle is answered; after a
    restart, an ended task still answers with its result, and one whose run
    the restart lost says so (failed), for its token only."""
    d, args = state
    tokens = [{"name": "a", "sha256": sha("ta")}, {"name": "b", "sha256": sha("tb")}]
    A, B = {"Authorization": "Bearer ta"}, {"Authorization": "Bearer tb"}

    def task_call(s, code):
        r, data = s.modern(1, "tools/call", {"name": "run_python", "arguments": {"code": code},
                                             "_meta": TASKS}, headers=A)
        res = json.loads(data)["result"]
        assert res["resultType"] == "task", res
        return res["taskId"]

    def get(s, tid, h=A):
        r, data = s.modern(2, "tasks/get", {"taskId": tid, "_meta": TASKS}, headers={**h, "Mcp-Name": tid})
        return json.loads(data)

    s = serve("--listen", "127.0.0.1:0", *args, tokens=tokens, tmp_path=tmp_path)
    done = task_call(s, "import time\ntime.sleep(1.5)\n6 * 7")
    # its record, before anything else of it: working
    rec = json.loads((d / "tasks" / f"{done}.json").read_text())
    assert (rec["id"], rec["owner"], rec["status"], rec["scope"]) == (done, "a", "working", "serve")
    wait_for(lambda: get(s, done).get("result", {}).get("status") == "completed", what="the task to complete")
    lost = task_call(s, "import time\ntime.sleep(60)")
    # the server goes, as a crash or a kill would take it: no time to say
    s.proc.kill()
    s.proc.wait(10)
    second = tmp_path / "second"
    second.mkdir()
    s = serve("--listen", "127.0.0.1:0", *args, tokens=tokens, tmp_path=second)
    got = get(s, done)
    assert "result" in got, (got, s.stderr()[-2000:])
    got = got["result"]
    assert got["status"] == "completed" and got["result"]["structuredContent"]["return_value"] == 42
    got = get(s, lost)
    assert "result" in got, (got, os.listdir(d / "tasks"), s.stderr()[-2000:])
    got = got["result"]
    assert got["status"] == "failed", got
    assert got["statusMessage"] == "the server stopped while the task ran: its run was lost"
    assert got["error"]["message"] == "the server stopped while the task ran: its run was lost"
    assert json.loads((d / "tasks" / f"{lost}.json").read_text())["status"] == "failed"
    # another token: no such task, here as before the restart
    for tid in (done, lost):
        err = get(s, tid, B)["error"]
        assert err["code"] == -32602 and err["message"].startswith("Invalid params: no such task"), err


def test_a_replica_resumes_a_session_another_paused_in_their_state_dir(serve, state, tmp_path):  # noqa: F811
    """Two replicas of one state directory: a session of r1 paused as r1
    stops is resumed by r2, its handle still naming r1 (a balancer sends
    it to r2 once r1 is down), and only once."""
    d, args = state
    tokens = [{"name": "a", "sha256": sha("ta")}]
    A = {"Authorization": "Bearer ta"}

    def call(s, name, args):
        r, data = s.modern(1, "tools/call", {"name": name, "arguments": args}, headers=A)
        assert r.status == 200, data
        return json.loads(data)["result"]

    r1 = serve("--listen", "127.0.0.1:0", "--replica", "r1", *args, tokens=tokens, tmp_path=tmp_path)
    second = tmp_path / "r2"
    second.mkdir()
    r2 = serve("--listen", "127.0.0.1:0", "--replica", "r2", "-v", *args, tokens=tokens, tmp_path=second)
    sid = call(r1, "session_open", {})["structuredContent"]["session_id"]
    assert sid.startswith("r1.")
    call(r1, "run_python", {"session_id": sid, "code": "n = 7\nbig = bytes(48 << 20)"})
    r1.proc.send_signal(signal.SIGTERM)
    assert r1.proc.wait(30) == 0
    st = call(r2, "run_python", {"session_id": sid, "code": "n * 6"})["structuredContent"]
    assert st["return_value"] == 42 and st["session"]["resumed"] is True and st["session"]["id"] == sid
    # r1's session lives on r2 only for its cells: paused again after each,
    # so that r1, back, finds it where it left it; a cell that comes while
    # it pauses waits for that, and runs resumed
    for i in range(5):
        st = call(r2, "run_python", {"session_id": sid, "code": "n += 1\nn"})["structuredContent"]
        assert st["status"] == "ok" and st["return_value"] == 8 + i, st
    assert b"a cell came while it paused: it runs once resumed" in r2.stderr()
    wait_for(lambda: f"{sid}.snap" in files(d) and f"{sid}.json" in files(d), what="r2 to pause it again")
    fork = call(r2, "session_fork", {"session_id": sid})["structuredContent"]
    assert fork["session_id"].startswith("r2.") and fork["forked_from"] == sid
    third = tmp_path / "r1-again"
    third.mkdir()
    r1 = serve("--listen", "127.0.0.1:0", "--replica", "r1", *args, tokens=tokens, tmp_path=third)
    st = call(r1, "run_python", {"session_id": sid, "code": "n"})["structuredContent"]
    assert st["return_value"] == 12 and st["session"]["resumed"] is True
