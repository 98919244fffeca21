"""`pycell mcp` on raw pipes (issue 4): every malformed input gets the
JSON-RPC error the spec names, with the id when it has a valid one, and
the next good request is still answered; floods of garbage do not crash
or wedge the server."""

import array
import fcntl
import json
import os
import queue
import random
import select
import subprocess
import termios
import threading
import time

import pytest

from conftest import TOOLS, check_no_leftovers, children_of, run_jails, start_pycell

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602


class Server:
    """One `pycell mcp` process with a reader thread on its stdout."""

    def __init__(self, *args, stdin=subprocess.PIPE, read=True, env=None, preexec=None):
        self.before = set(children_of(os.getpid()))
        self.proc = start_pycell(["mcp", *args], env=env, stdin=stdin, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, preexec_fn=preexec)
        self.lines = queue.Queue()
        self.stderr = b""
        self._stderr_reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._stderr_reader.start()
        if read:
            self.start_reading()

    def start_reading(self):
        threading.Thread(target=self._read_stdout, daemon=True).start()

    # What a client that keeps no list of resources does with
    # notifications/resources/list_changed: counts them, and reads on
    # (tests/mcp/test/resources.test.js checks them with the SDK).
    LIST_CHANGED = b'{"jsonrpc":"2.0","method":"notifications/resources/list_changed"}\n'
    list_changed = 0

    def _read_stdout(self):
        for line in self.proc.stdout:
            if line == self.LIST_CHANGED:
                self.list_changed += 1
                continue
            self.lines.put(line)
        self.lines.put(None)

    def _read_stderr(self):
        self.stderr = self.proc.stderr.read()

    def send_raw(self, data):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, obj):
        self.send_raw(json.dumps(obj).encode() + b"\n")

    def recv(self, timeout=10):
        line = self.lines.get(timeout=timeout)
        assert line is not None, f"pycell mcp closed stdout; stderr: {self.stderr[-2000:]!r}"
        assert line.endswith(b"\n")
        return json.loads(line)

    def nothing_pending(self, wait=0.3):
        """True when no message arrives within `wait` seconds."""
        try:
            msg = self.lines.get(timeout=wait)
        except queue.Empty:
            return True
        raise AssertionError(f"unexpected message: {msg!r}")

    def request(self, rid, method, params=None, timeout=10):
        msg = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        return self.recv(timeout)

    def initialize(self, version="2025-11-25"):
        res = self.request(0, "initialize", {"protocolVersion": version, "capabilities": {},
                                             "clientInfo": {"name": "pytest", "version": "1"}})
        assert res["result"]["protocolVersion"] == version
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return res

    def assert_serving(self, rid="alive"):
        res = self.request(rid, "ping")
        assert res == {"jsonrpc": "2.0", "id": rid, "result": {}}

    def close(self):
        """EOF on stdin: pycell exits 0 and leaves no process behind."""
        self.proc.stdin.close()
        rc = self.proc.wait(timeout=10)
        self._stderr_reader.join(timeout=10)
        assert rc == 0, f"exit {rc}; stderr {self.stderr[-2000:]!r}"
        check_no_leftovers(self.before, "pycell mcp")

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def server():
    s = Server()
    s.initialize()
    yield s
    s.kill()


def assert_error(msg, code, rid=None):
    assert msg.get("jsonrpc") == "2.0", msg
    assert "result" not in msg, msg
    # an id that could not be read is left out (MCP's schemas since
    # 2025-11-25 and the SDKs), not sent as JSON-RPC's null
    assert msg.get("id") == rid and (rid is not None or "id" not in msg), msg
    assert msg["error"]["code"] == code, msg
    assert isinstance(msg["error"]["message"], str) and msg["error"]["message"], msg


# ------------------------------------------------------------ -32700

@pytest.mark.parametrize("line", [
    b"{not json",
    b'{"jsonrpc":"2.0","id":1,"method":"ping"',
    b"\xff\xfe\x00garbage",
    b'{"jsonrpc":"2.0","id":1,"method":"ping"} trailing',
    b'{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}',
    b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":"\xc3\x28"}}',
    b"[" * 100000,
])
def test_parse_error_then_next_request_works(server, line):
    server.send_raw(line + b"\n")
    assert_error(server.recv(), PARSE_ERROR, None)
    server.assert_serving()


# ------------------------------------------------------------ -32600

@pytest.mark.parametrize("msg,rid", [
    (42, None),
    ("a string", None),
    (None, None),
    (True, None),
    ({}, None),
    ({"jsonrpc": "1.0", "id": 1, "method": "ping"}, 1),
    ({"id": 2, "method": "ping"}, 2),
    ({"jsonrpc": "2.0", "id": 3}, 3),
    ({"jsonrpc": "2.0", "id": 4, "method": 5}, 4),
    ({"jsonrpc": "2.0", "id": 5, "method": ""}, 5),
    ({"jsonrpc": "2.0", "id": "six", "method": "ping", "params": "x"}, "six"),
    # not a valid notification either: JSON-RPC answers it, without an id
    ({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": "bad"}, None),
    ({"jsonrpc": "2.0", "method": 1, "params": "bar"}, None),
    ({"jsonrpc": "2.0", "id": None, "method": "ping"}, None),
    ({"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}, None),
    ({"jsonrpc": "2.0", "id": [7], "method": "ping"}, None),
    ({"jsonrpc": "2.0", "id": 8, "result": {}, "error": {}}, 8),
    ([], None),
])
def test_invalid_request_then_next_request_works(server, msg, rid):
    server.send(msg)
    assert_error(server.recv(), INVALID_REQUEST, rid)
    server.assert_serving()


def test_batch_refused_in_this_version(server):
    server.send([{"jsonrpc": "2.0", "id": 1, "method": "ping"}])
    assert_error(server.recv(), INVALID_REQUEST, None)
    server.assert_serving()


def test_the_message_cap_comes_from_the_config_unless_the_option_says(tmp_path):
    conf = tmp_path / "pycell.conf"
    conf.write_text('{"max_message": "8K"}')
    line = b'{"jsonrpc":"2.0","id":7,"method":"ping","params":{"pad":"' + b"p" * 10000 + b'"}}\n'
    for args, answer in ((["--config", str(conf)], "too large"),
                         (["--config", str(conf), "--max-message", "16K"], "ok")):
        s = Server(*args)
        try:
            s.initialize()
            s.send_raw(line)
            res = s.recv()
            if answer == "ok":
                assert res == {"jsonrpc": "2.0", "id": 7, "result": {}}
            else:
                assert_error(res, INVALID_REQUEST, 7)
                assert res["error"]["data"] == {"max_bytes": 8192}
            s.close()
        finally:
            s.kill()


def test_oversized_line_is_dropped_with_bounded_memory():
    s = Server("--max-message", "64K")
    try:
        s.initialize()
        s.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"' + b"x" * 100000 + b'"}}\n')
        err = s.recv()
        # answered with the request's id, which the client waits for (it was null)
        assert_error(err, INVALID_REQUEST, 1)
        assert err["error"]["data"] == {"max_bytes": 65536}
        s.assert_serving("after-one")
        # the id after the large part, as the SDKs write it, and one with escapes
        s.send_raw(b'{"method":"tools/call","params":{"name":"run_python","arguments":{"code":"'
                   + b"x" * 100000 + b'","id":"inner"}},"jsonrpc":"2.0","id":"l\\"ate"}\n')
        assert_error(s.recv(), INVALID_REQUEST, 'l"ate')
        # 64 MiB in one line, fed in pieces: one error, and the server
        # never holds the line (its peak RSS stays far below 64 MiB)
        chunk = b"y" * (1 << 20)
        for _ in range(64):
            s.send_raw(chunk)
        s.send_raw(b"\n")
        assert_error(s.recv(), INVALID_REQUEST, None)
        s.assert_serving("after-big")
        status = open(f"/proc/{s.proc.pid}/status").read()
        hwm_kb = int(next(l for l in status.splitlines() if l.startswith("VmHWM:")).split()[1])
        assert hwm_kb < 32 * 1024, f"peak RSS {hwm_kb} kB while a 64 MiB line went by"
        # a message just under the cap is accepted
        pad = 65536 - len(b'{"jsonrpc":"2.0","id":2,"method":"ping","params":{"pad":""}}')
        s.send_raw(b'{"jsonrpc":"2.0","id":2,"method":"ping","params":{"pad":"' + b"z" * pad + b'"}}\n')
        assert s.recv() == {"jsonrpc": "2.0", "id": 2, "result": {}}
        s.close()
    finally:
        s.kill()


# ------------------------------------------------------------ -32601 / -32602

@pytest.mark.parametrize("method", ["resources/subscribe", "prompts/get", "tools/nope", "completion/complete",
                                    "sampling/createMessage", "PING"])
def test_unknown_method(server, method):
    res = server.request(9, method, {})
    assert_error(res, METHOD_NOT_FOUND, 9)
    server.assert_serving()


@pytest.mark.parametrize("method,params", [
    ("tools/call", {}),
    ("tools/call", {"name": 5}),
    ("tools/call", {"name": "run_ruby", "arguments": {}}),
    ("tools/call", [1, 2]),
    ("tools/list", {"cursor": "nonsense"}),
    ("tools/list", {"cursor": 3}),
    ("logging/setLevel", {}),
    ("logging/setLevel", {"level": "loud"}),
])
def test_invalid_params(server, method, params):
    res = server.request("p", method, params)
    assert_error(res, INVALID_PARAMS, "p")
    server.assert_serving()


def test_initialize_needs_a_protocol_version():
    s = Server()
    try:
        res = s.request(1, "initialize", {"capabilities": {}, "clientInfo": {"name": "x", "version": "1"}})
        assert_error(res, INVALID_PARAMS, 1)
        assert_error(s.request(2, "initialize", [1]), INVALID_PARAMS, 2)
        s.initialize()
        s.assert_serving()
        s.close()
    finally:
        s.kill()


def test_a_nul_in_a_name_makes_it_another_name(server):
    """\\u0000 is valid JSON and loads (code may hold it), but a tool name,
    a method or a log level with one is not the name without it."""
    res = server.request(1, "tools/call", {"name": "run_python\x00x", "arguments": {"code": "print(1)"}})
    assert res["error"]["code"] == INVALID_PARAMS and res["id"] == 1, res
    assert res["error"]["data"] == {"name": "run_python\x00x"}
    res = server.request(2, "ping\x00")
    assert (res["id"], res["error"]["code"]) == (2, INVALID_REQUEST), res
    assert "\\u0000" in res["error"]["message"]
    res = server.request(3, "logging/setLevel", {"level": "debug\x00"})
    assert (res["id"], res["error"]["code"]) == (3, INVALID_PARAMS), res
    server.assert_serving()


def test_tool_argument_errors_are_tool_results(server):
    res = server.request(3, "tools/call", {"name": "run_python", "arguments": {"code": ["print(1)"]}})
    assert res["id"] == 3
    assert res["result"]["isError"] is True
    assert "structuredContent" not in res["result"]
    text = res["result"]["content"][0]["text"]
    assert text == 'Invalid arguments for run_python: "code" must be a string of Python source, got an array'


@pytest.mark.parametrize("start", [pytest.param(("--cold",), id="cold"), pytest.param(("--warm",), id="warm")])
@pytest.mark.parametrize("args, text", [
    # a name that is not an identifier: 1, 62 x a, then é (bytes 64-65)
    ({"code": "1", "variables": {"1" + "a" * 62 + "é": 1}},
     'Invalid arguments for run_python: variables: "1' + "a" * 62 + '" is not a valid Python identifier'),
    # an unknown argument: 63 x b, then é (bytes 64-65)
    ({"code": "1", "b" * 63 + "é": 1},
     'Invalid arguments for run_python: unknown argument "' + "b" * 63 + '"; run_python takes code, '
     'variables, stdin, timeout_s, files, session_id, max_output_bytes and packages'),
    # the whole name fits: it is kept whole
    ({"code": "1", "b" * 62 + "é": 1},
     'Invalid arguments for run_python: unknown argument "' + "b" * 62 + 'é"; run_python takes code, '
     'variables, stdin, timeout_s, files, session_id, max_output_bytes and packages'),
])
def test_a_name_cut_in_a_message_keeps_whole_characters(start, args, text):
    """A message cut at a byte count split a UTF-8 character: jansson
    refused the text and the client got {"result": {}}."""
    s = Server(*start)
    try:
        s.initialize()
        res = s.request(5, "tools/call", {"name": "run_python", "arguments": args})
        assert res["id"] == 5
        assert res["result"]["isError"] is True, res
        assert res["result"]["content"] == [{"type": "text", "text": text}]
        s.assert_serving()
    finally:
        s.kill()


@pytest.mark.parametrize("start", [pytest.param(("--cold",), id="cold"), pytest.param(("--warm",), id="warm")])
def test_numbers_jansson_cannot_hold(start):
    """Valid JSON with an integer beyond 64 bits or a real past a double
    was a parse error with id null, and the client waited for ever: in
    run_python's variables such numbers reach Python whole; elsewhere the
    request is refused with its id and the number named."""
    s = Server(*start)
    try:
        s.initialize()
        s.send_raw(b'{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"run_python",'
                   b'"arguments":{"code":"type(x).__name__ + \' \' + str(x == 2**64) + \' \' + str(y)",'
                   b'"variables":{"x":18446744073709551616,"y":1e99999}}}}\n')
        res = s.recv(timeout=30)
        assert res["id"] == 11, res
        assert res["result"]["structuredContent"]["return_value"] == "int True inf", res
        s.send_raw(b'{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"run_python",'
                   b'"arguments":{"code":"1","timeout_s":1e99999}}}\n')
        assert s.recv() == {"jsonrpc": "2.0", "id": 12, "error": {"code": -32602, "message":
            "Invalid params: the number 1e99999 is out of range: numbers here must fit a 64-bit integer "
            "or a double"}}
        s.send_raw(b'{"jsonrpc":"2.0","id":"t","method":"ping","params":{"n":-99999999999999999999}}\n')
        assert s.recv()["id"] == "t"
        # the id itself out of range: no id to give back
        s.send_raw(b'{"jsonrpc":"2.0","id":99999999999999999999,"method":"ping"}\n')
        assert_error(s.recv(), INVALID_PARAMS, None)
        s.assert_serving()
    finally:
        s.kill()


# ------------------------------------------------------------ no response

@pytest.mark.parametrize("msg", [
    {"jsonrpc": "2.0", "method": "notifications/unknown"},
    {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 12345}},
    {"jsonrpc": "2.0", "method": "notifications/progress", "params": {}},
    {"jsonrpc": "2.0", "id": 77, "result": {}},
    {"jsonrpc": "2.0", "id": 78, "error": {"code": 1, "message": "x"}},
])
def test_notifications_and_responses_get_no_answer(server, msg):
    server.send(msg)
    assert server.nothing_pending()
    server.assert_serving()


def test_blank_lines_and_crlf(server):
    server.send_raw(b"\n\n   \n\r\n")
    server.send_raw(b'{"jsonrpc":"2.0","id":"crlf","method":"ping"}\r\n')
    assert server.recv() == {"jsonrpc": "2.0", "id": "crlf", "result": {}}
    assert server.nothing_pending(0.1)


def test_duplicate_id_of_a_request_in_progress(server):
    server.send({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                 "params": {"name": "run_python", "arguments": {"code": "import time\ntime.sleep(1)\n'first'"}}})
    time.sleep(0.2)
    server.send({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                 "params": {"name": "run_python", "arguments": {"code": "'second'"}}})
    assert_error(server.recv(), INVALID_REQUEST, 5)
    res = server.recv(timeout=20)
    assert res["id"] == 5 and res["result"]["structuredContent"]["return_value"] == "first"


# ------------------------------------------------------------ floods

def garbage_lines(rng, n):
    """n lines of mixed garbage, none of which starts a run."""
    valid = [
        {"jsonrpc": "2.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "id": "x", "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "run_python", "arguments": {}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]
    out = []
    for i in range(n):
        kind = rng.randrange(10)
        if kind == 0:
            line = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200))).replace(b"\n", b" ")
        elif kind == 1:
            text = json.dumps(rng.choice(valid))
            line = text[:rng.randrange(1, len(text))].encode()
        elif kind == 2:
            line = json.dumps(rng.choice([0, -1, 1e308, "s", None, [], {}, [[[]]], {"a": {}}])).encode()
        elif kind == 3:
            msg = dict(rng.choice(valid))
            key = rng.choice(["jsonrpc", "id", "method", "params"])
            msg[key] = rng.choice([None, 0, "", [], {}, 1.5, True, "2.0", "x" * 300])
            line = json.dumps(msg).encode()
        elif kind == 4:
            line = (rng.choice(["[", "{", "\"", "{\"a\":"]) * rng.randrange(1, 5000)).encode()
        elif kind == 5:
            line = json.dumps({"jsonrpc": "2.0", "id": i, "method": rng.choice(
                ["a", "tools/", "initialize", "x" * 1000, "tools/call"]), "params": {}}).encode()
        elif kind == 6:
            line = b'{"jsonrpc":"2.0","id":' + str(rng.randrange(-2**70, 2**70)).encode() + b',"method":"ping"}'
        elif kind == 7:
            line = b'{"jsonrpc":"2.0","id":"\\ud800","method":"ping"}'
        elif kind == 8:
            line = b"\x00" * rng.randrange(1, 50)
        else:
            line = json.dumps([rng.choice(valid) for _ in range(rng.randrange(0, 4))]).encode()
        out.append(line + rng.choice([b"\n", b"\r\n"]))
    return out


def test_1000_garbage_lines_do_not_crash_it(server):
    rng = random.Random(4)
    lines = garbage_lines(rng, 1000)
    # between the garbage, numbered pings whose answers must all come back
    for i, line in enumerate(lines):
        server.send_raw(line)
        if i % 50 == 0:
            server.send({"jsonrpc": "2.0", "id": f"ping-{i}", "method": "ping"})
    server.send({"jsonrpc": "2.0", "id": "last", "method": "ping"})
    pings = set()
    codes = set()
    while True:
        msg = server.recv()
        if isinstance(msg, list):
            continue
        assert msg.get("jsonrpc") == "2.0"
        if "error" in msg:
            codes.add(msg["error"]["code"])
        elif isinstance(msg.get("id"), str) and msg["id"].startswith("ping-"):
            pings.add(msg["id"])
        if msg.get("id") == "last":
            break
    assert pings == {f"ping-{i}" for i in range(0, 1000, 50)}
    assert codes <= {PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS}
    assert {PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND} <= codes
    assert server.proc.poll() is None
    server.assert_serving()
    server.close()


@pytest.mark.parametrize("start", ["--cold", "--warm"])
def test_a_client_that_does_not_read_does_not_block_the_loop(start):
    """With stdout full and nobody reading, the loop still starts, reaps
    and answers runs: writes are queued, never blocking."""
    server = Server(start, read=False)
    try:
        check_unread_stdout(server)
    finally:
        server.kill()


def check_unread_stdout(server):
    server.send({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                 "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                            "clientInfo": {"name": "pytest", "version": "1"}}})
    pad = "p" * 4000
    for i in range(400):   # ~1.6 MB of responses, far over a pipe's 64 KiB
        server.send({"jsonrpc": "2.0", "id": f"fill-{i}", "method": "ping", "params": {"pad": pad}})
    server.send({"jsonrpc": "2.0", "id": "run", "method": "tools/call",
                 "params": {"name": "run_python", "arguments": {"code": "import time\ntime.sleep(0.5)"}}})
    # the jail appears and is gone again without anyone reading stdout
    deadline = time.monotonic() + 10
    seen = False
    while time.monotonic() < deadline:
        n = len(run_jails(server.proc.pid))
        seen = seen or n >= 2
        if seen and n == 0:
            break
        time.sleep(0.02)
    assert seen and not run_jails(server.proc.pid)
    server.start_reading()
    assert server.recv()["id"] == 0
    got = []
    while True:
        msg = server.recv()
        got.append(msg["id"])
        if msg["id"] == "run":
            break
    assert got == [f"fill-{i}" for i in range(400)] + ["run"]


@pytest.mark.parametrize("start", ["--cold", "--warm"])
def test_an_answer_waits_until_its_progress_notification_was_read(start):
    """The SDKs handle a notification a microtask after a response read
    with it, and then no longer know its token: a run's answer is written
    only once the client has read the call's last progress notification
    out of the pipe (and at least 30 ms after it), never beside it."""
    server = Server(start, read=False)
    out = server.proc.stdout.fileno()
    os.set_blocking(out, False)

    def pipe_bytes():
        n = array.array("i", [0])
        fcntl.ioctl(out, termios.FIONREAD, n)
        return n[0]

    def read_line(timeout=10):
        buf, deadline = b"", time.monotonic() + timeout
        while not buf.endswith(b"\n"):
            assert time.monotonic() < deadline, f"no whole line; got {buf!r}"
            select.select([out], [], [], 0.05)
            try:
                buf += os.read(out, 1)
            except BlockingIOError:
                pass
        return json.loads(buf)

    try:
        server.send({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                     "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                                "clientInfo": {"name": "pytest", "version": "1"}}})
        assert read_line()["id"] == 0
        server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        for rid in range(1, 4):
            server.send({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                         "params": {"name": "run_python", "arguments": {"code": str(rid)},
                                    "_meta": {"progressToken": f"t{rid}"}}})
            time.sleep(0.4)   # the run is over; the client reads nothing
            # all the pipe holds is the notification: the answer waits
            data = os.read(out, pipe_bytes())
            assert data.count(b"\n") == 1 and data.endswith(b"\n"), data
            note = json.loads(data)
            assert note["method"] == "notifications/progress"
            assert note["params"]["progressToken"] == f"t{rid}"
            assert note["params"]["message"] == "started"
            res = read_line()
            assert res["id"] == rid and res["result"]["structuredContent"]["return_value"] == rid
    finally:
        server.kill()


@pytest.mark.parametrize("start", ["--cold", "--warm"])
def test_a_jail_that_shuts_its_tool_socket_does_not_make_the_server_spin(start):
    """Code in the jail shuts down the writing half of fd 3: the socket is
    at its end for the supervisor, which stops reading it (it was readable
    for good, and the loop spun on it at a full core until the run ended)."""
    server = Server(start)
    try:
        server.initialize()

        def cpu_s():
            f = open(f"/proc/{server.proc.pid}/stat").read().rsplit(")", 1)[1].split()
            return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")

        # the socket object is kept: were it collected, fd 3 would close
        code = ("import socket, time\n"
                "s = socket.socket(fileno=3)\n"
                "s.shutdown(socket.SHUT_WR)\n"
                "time.sleep(1.5)\n"
                "print('slept')")
        before = cpu_s()
        res = server.request(1, "tools/call", {"name": "run_python", "arguments": {"code": code}})
        used = cpu_s() - before
        sc = res["result"]["structuredContent"]
        assert (sc["status"], sc["stdout"]) == ("ok", "slept\n"), sc
        assert used < 0.3, f"the server used {used:.2f} s of CPU during a 1.5 s sleep"
        server.assert_serving()
    finally:
        server.kill()


def test_stdin_from_a_regular_file(tmp_path):
    """epoll cannot watch a file: pycell reads it anyway, answers, exits 0."""
    path = tmp_path / "in.jsonl"
    msgs = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "f", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    path.write_bytes(b"".join(json.dumps(m).encode() + b"\n" for m in msgs) + b'{"jsonrpc":"2.0","id":3,"method":"ping"}')
    with open(path, "rb") as f:
        s = Server(stdin=f)
        try:
            out = [s.recv() for _ in range(4)]
            assert [m["id"] for m in out] == [0, 1, 2, 3]
            assert [t["name"] for t in out[2]["result"]["tools"]] == TOOLS
            assert s.proc.wait(timeout=10) == 0
        finally:
            s.kill()


def test_help_and_bad_options(pycell_bin):
    out = subprocess.run([pycell_bin, "mcp", "--help"], capture_output=True, timeout=10)
    assert out.returncode == 0
    assert b"Usage: pycell mcp" in out.stdout and b"--max-runs" in out.stdout
    for bad in (["--max-runs", "0"], ["--max-runs", "x"], ["--max-message", "1"], ["--bogus"], ["extra"]):
        out = subprocess.run([pycell_bin, "mcp", *bad], capture_output=True, timeout=10, stdin=subprocess.DEVNULL)
        assert out.returncode == 2, bad
        assert out.stdout == b"", bad
        assert b"pycell mcp:" in out.stderr, bad
