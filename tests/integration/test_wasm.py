"""The WASM backend (issue 15): Pyodide in Node, in the same kernel jail as
a native run.

The run matrix runs on both backends with the same assertions, where the
backends agree; what differs is tested as a difference.  The escapes from
Python to JavaScript (the `js` module, pyodide_js, run_js, the Function
constructor, dynamic import) are probed by ESCAPE_PROBE, which is shown to
report an escape on a deliberately weakened runner (a copy of the data dir
whose runner leaves Node's globals to Python), never on the host.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from conftest import (DATADIR, EXIT_TIMEOUT, EXIT_MEMORY_LIMIT, RawMcp, descendants, proc_stat,
                      pycell_run, run_json)
from test_tools import Tools, need_node_servers

BACKENDS = ["native", "wasm"]

_built = []


def need_wasm():
    if not _built:
        rc, out, err = pycell_run(["run", "--backend", "wasm", "-c", "pass"], timeout=60)
        _built.append((rc, err.decode(errors="replace").strip()))
    rc, why = _built[0]
    if rc != 0:
        pytest.skip("the wasm backend is not usable here: " + why)


def wasm_policy(tmp_path):
    pol = tmp_path / "wasm.json"
    pol.write_text(json.dumps({"extends": "default", "backend": "wasm"}))
    return pol


def run(backend, code, *opts, **kw):
    if backend == "wasm":
        need_wasm()
    return run_json(textwrap.dedent(code), "--backend", backend, *opts, timeout=kw.pop("timeout", 60), **kw)


# ------------------------------------------------------------ the matrix

@pytest.mark.parametrize("backend", BACKENDS)
def test_output_argv_and_exit_status(backend):
    res = run(backend, """
        import sys
        print("out", sys.argv[1:])
        sys.stderr.write("err\\n")
        raise SystemExit(3)
    """, args=["a", "b c"])
    assert (res["status"], res["exit_code"]) == ("error", 3)
    assert res["stdout"] == "out ['a', 'b c']\n"
    assert res["stderr"] == "err\n"
    assert res["backend"] == backend
    jail = ["namespaces", "private root", "no capabilities", "no_new_privs", "seccomp", "rlimits"]
    assert res["layers"] == jail + (["node permissions", "webassembly"] if backend == "wasm" else [])


@pytest.mark.parametrize("backend", BACKENDS)
def test_stdin_is_the_programs(backend):
    # from a writer that pauses: the program's reads wait for the rest
    # (node's read of a pipe with nothing in it yet is EAGAIN, not the end)
    writer = subprocess.Popen([sys.executable, "-c", "import sys, time\n"
                               "sys.stdout.buffer.write(b'hello' + b'x' * 70000); sys.stdout.flush()\n"
                               "time.sleep(0.5); sys.stdout.buffer.write(b'y' * 30000)"], stdout=subprocess.PIPE)
    try:
        res = run(backend, "import sys; data = sys.stdin.buffer.read(); print(len(data), data[:5], data[-1:])",
                  "--stdin", "-", stdin=writer.stdout)
    finally:
        writer.stdout.close()
        writer.wait()
    assert res["status"] == "ok", res["stderr"]
    assert res["stdout"] == "100005 b'hello' b'y'\n"


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_uncaught_exception_is_a_traceback_and_status_1(backend):
    res = run(backend, "def f():\n    return 1 / 0\nf()\n")
    assert (res["status"], res["exit_code"]) == ("error", 1)
    lines = res["stderr"].splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert lines[-1] == "ZeroDivisionError: division by zero"
    assert '  File "/run/pycell/main.py", line 3, in <module>' in lines


@pytest.mark.parametrize("backend", BACKENDS)
def test_timeout(backend):
    res = run(backend, "while True: pass", "--timeout", "3")
    assert res["status"] == "timeout"
    assert res.rc == EXIT_TIMEOUT
    assert 3000 <= res["duration_ms"] < 8000


@pytest.mark.parametrize("backend", BACKENDS)
def test_memory_limit(backend):
    # the wasm heap grows in place; Node itself takes about 150 MiB
    res = run(backend, """
        chunks = []
        while True:
            chunks.append(bytearray(16 << 20))
    """, "--memory", "400M")
    assert res["status"] == "memory_limit", (res["status"], res["stderr"][-500:])
    assert res.rc == EXIT_MEMORY_LIMIT


@pytest.mark.parametrize("backend", BACKENDS)
def test_output_cap(backend):
    res = run(backend, "import sys\nfor i in range(200000): sys.stdout.write('%07d\\n' % i)\n",
              "--output-limit", "4K")
    assert res["status"] == "ok", res["stderr"]
    assert res["truncated"]["stdout"] is True
    assert res["stdout"].startswith("0000000\n0000001\n")
    assert res["stdout"].endswith("0199998\n0199999\n")
    assert len(res["stdout"].encode()) <= 4096 + 200


@pytest.mark.parametrize("backend", BACKENDS)
def test_files_in_the_workspace_and_tmp(backend):
    res = run(backend, """
        import os
        open("/workspace/a.txt", "w").write("x" * 10)
        open("/tmp/t", "w").write("t")
        print(os.getcwd(), sorted(os.listdir(".")), os.path.getsize("a.txt"))
    """)
    assert res["status"] == "ok", res["stderr"]
    assert res["stdout"] == "/workspace ['a.txt'] 10\n"
    # the jail's /tmp tmpfs is not the wasm program's: its /tmp is in the heap
    assert ("tmp_bytes" in [lim["name"] for lim in res["limits"]]) == (backend == "native")


@pytest.mark.parametrize("backend", BACKENDS)
def test_tool_calls_through_fd_3(backend, tmp_path):
    if backend == "wasm":
        need_wasm()
    tools = Tools(tmp_path)
    res = tools.run("""
        import pycell
        print(pycell.call_tool("fake.echo", {"text": "hi"}))
        try:
            pycell.call_tool("fake.pid", {})
        except pycell.ToolDenied as e:
            print("denied", e.reason)
    """, allow=["fake.echo"], extra=("--backend", backend))
    assert res["status"] == "ok", res["stderr"]
    assert res["stdout"].splitlines() == ["{'echo': 'hi'}", "denied not_allowed"]
    assert (res["tool_calls"]["count"], res["tool_calls"]["denied"]) == (2, 1)
    assert res["tool_calls"]["tools"]["fake.echo"]["calls"] == 1
    events = [(a["event"], a.get("tool"), a.get("reason")) for a in tools.audit_lines()]
    assert events == [("tool_denied", "fake.pid", "not_allowed"), ("run", None, None)]


def test_a_real_npm_server_through_the_wasm_bridge(tmp_path):
    """@modelcontextprotocol/server-memory (npm) as the upstream of a wasm
    run: entities written and read back through fd 3, stored by the server
    outside the jail."""
    need_wasm()
    need_node_servers()
    tools = Tools(tmp_path)
    res = tools.run("""
        import json, pycell
        pycell.call_tool("memory.create_entities", {"entities": [
            {"name": "Ada", "entityType": "person", "observations": ["wrote the first program"]}]})
        graph = pycell.call_tool("memory.read_graph")
        print(json.dumps([(e["name"], e["observations"]) for e in graph["entities"]]))
    """, allow=["memory.*"], upstreams={"memory": tools.memory()}, extra=("--backend", "wasm"))
    assert res["status"] == "ok", res["stderr"]
    assert res["stdout"] == '[["Ada", ["wrote the first program"]]]\n'
    assert res["backend"] == "wasm"
    assert (res["tool_calls"]["count"], res["tool_calls"]["errors"]) == (2, 0)
    assert "Ada" in tools.memory_file.read_text()


# ------------------------------------------------------------ the differences

def test_what_pyodide_cannot_do_names_the_native_backend():
    res = run("wasm", """
        import threading, subprocess, socket
        for name, f in [("thread", lambda: threading.Thread(target=print).start()),
                        ("subprocess", lambda: subprocess.run(["true"])),
                        ("socket", lambda: socket.socket()),
                        ("numpy", lambda: __import__("numpy"))]:
            try:
                f()
                print(name, "ran")
            except Exception as e:
                print(name, type(e).__name__, "native backend" in str(e))
    """)
    assert res["status"] == "ok", res["stderr"]
    assert res["stdout"].splitlines() == ["thread WasmUnsupported True", "subprocess WasmUnsupported True",
                                          "socket WasmUnsupported True", "numpy ModuleNotFoundError True"]


def test_a_module_pyodide_lacks_is_one_line_of_traceback():
    res = run("wasm", "import numpy")
    assert res["stderr"] == ("Traceback (most recent call last):\n"
                             '  File "/run/pycell/main.py", line 1, in <module>\n'
                             "    import numpy\n"
                             "ModuleNotFoundError: No module named 'numpy': the wasm backend has Pyodide's standard "
                             "library only; run this code on the native backend for numpy\n")


def test_the_policy_refuses_what_wasm_cannot_give(tmp_path):
    need_wasm()
    cases = [({"network": {"egress": ["192.0.2.1:443"]}}, "network: an egress list needs the native backend"),
             ({"packages": {"index": "http://127.0.0.1:1/simple/", "allow": ["*"]}},
              "packages: packages on request need the native backend"),
             ({"python": {"env": {"NODE_OPTIONS": "--allow-child-process"}}}, "python.env: NODE_OPTIONS: not with"),
             ({"limits": {"open_files": 4096}}, "limits.open_files: at most 1000 with the wasm backend")]
    for i, (extra, msg) in enumerate(cases):
        pol = tmp_path / ("p%d.json" % i)
        pol.write_text(json.dumps(dict({"extends": "default", "backend": "wasm"}, **extra)))
        rc, out, err = pycell_run(["run", "--policy", str(pol), "-c", "pass"])
        assert rc == 2, (extra, rc, err)
        assert msg in err.decode(), err
    rc, out, err = pycell_run(["run", "--backend", "wasm", "--python", "/usr/bin/python3", "-c", "pass"])
    assert rc == 2 and b"--python: the wasm backend runs Pyodide's own Python" in err


ESCAPE_PROBE = r"""
import json
found = {}
def probe(name, f):
    try:
        found[name] = repr(f())[:80]
    except BaseException as e:
        found[name] = "refused: " + type(e).__name__
import js
probe("js.process", lambda: js.process)
probe("js.require", lambda: js.require)
probe("js.globalThis.process", lambda: js.globalThis.process)
probe("import pyodide_js", lambda: __import__("pyodide_js").FS)
from pyodide.ffi import to_js
arr = to_js([1, 2])
probe("Function constructor", lambda: arr.constructor.constructor("return globalThis.process")())
probe("dynamic import", lambda: arr.constructor.constructor("return import('node:child_process')")())
def run_js():
    from pyodide.code import run_js
    return run_js("process")
probe("run_js", run_js)
def eval_js():
    from js import eval as e
    return e("process")
probe("js.eval", eval_js)
print(json.dumps(found, sort_keys=True))
"""


def escapes(res):
    assert res["status"] == "ok", res["stderr"]
    found = json.loads(res["stdout"])
    return {k: v for k, v in found.items() if not v.startswith("refused: ")}


def test_os_getuid_is_the_jails():
    """Pyodide answers os.getuid() with Node's process.getuid(), at each
    call: the runner keeps that one function (a fatal error of Pyodide's
    without it), and the uid is the jail's, as python's is."""
    for backend in BACKENDS:
        res = run(backend, "import os\nprint(os.getuid())")
        assert (res["status"], res["stdout"]) == ("ok", "1000\n"), res


def test_python_reaches_nothing_of_node():
    res = run("wasm", ESCAPE_PROBE)
    assert escapes(res) == {}
    found = json.loads(res["stdout"])
    assert found["js.process"] == "refused: AttributeError"
    assert found["Function constructor"] == "refused: JsException"   # EvalError: code generation disallowed


# What Python holds of JavaScript is an allowlist (the empty js module and
# asyncio's scheduler), and Emscripten's system() runs nothing: issue 34's
# first two defects, as a run sees them.
REACH_PROBE = r"""
import ctypes, errno, gc, json, os, posix, sys
from pyodide.ffi import JsProxy
out = {"modules": sorted(n for n in sys.modules if n.startswith("pyodide_js"))}
held = set()
for o in gc.get_objects():
    for r in gc.get_referents(o):
        if isinstance(r, JsProxy) and not isinstance(r, type):
            held.add(repr(r)[:40])
    if not isinstance(o, type) and isinstance(getattr(o, "__dict__", None), dict):
        held |= {repr(v)[:40] for v in vars(o).values() if isinstance(v, JsProxy) and not isinstance(v, type)}
out["held"] = len(held)
for name, f in (("posix.system", posix.system), ("os.system", os.system)):
    try:
        out[name] = f("touch /workspace/ran")
    except OSError as e:
        out[name] = [type(e).__name__, e.errno == errno.EPERM]
from pyodide.ffi import to_js
try:
    to_js([1]).constructor.prototype.planted = 1
    out["prototype"] = "changed"
except Exception as e:
    out["prototype"] = type(e).__name__
out["ctypes"] = ctypes.CDLL(None).system(b"touch /workspace/ran")
out["ran"] = os.path.exists("/workspace/ran")
print(json.dumps(out, sort_keys=True))
"""
REACH_WANT = {"modules": [], "held": 2, "prototype": "JsException", "posix.system": ["PermissionError", True],
              "os.system": ["PermissionError", True], "ctypes": 127 << 8, "ran": False}


def test_python_holds_no_javascript_but_the_allowlist_and_runs_no_program(tmp_path):
    """Cold (pycell run) and from a ready jail (run_python), the same."""
    res = run("wasm", REACH_PROBE)
    assert res["status"] == "ok", res["stderr"]
    assert json.loads(res["stdout"]) == REACH_WANT
    m = Mcp(wasm_policy(tmp_path))
    try:
        for _ in range(2):   # the first may be made at once, the second from the pool
            sc = m.tool("run_python", {"code": REACH_PROBE})["structuredContent"]
            assert sc["status"] == "ok", sc["stderr"]
            assert json.loads(sc["stdout"]) == REACH_WANT
    finally:
        m.close()


@pytest.fixture
def weakened_datadir():
    """A copy of the data dir whose runner hands Node's globalThis to Python
    as `js` and keeps every Node global: what the probe must catch.  Out of
    pytest's tmp_path, which the jail's user may not enter."""
    d = Path(tempfile.mkdtemp(prefix="pycell-weak-"))
    d.chmod(0o755)
    try:
        yield make_weak(d)
    finally:
        shutil.rmtree(d)


def make_weak(d):
    shutil.copytree(Path(DATADIR) / "policy", d / "policy")
    shutil.copytree(Path(DATADIR) / "runtime" / "pycell", d / "runtime" / "pycell",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(Path(DATADIR) / "runtime" / "probes", d / "runtime" / "probes",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(Path(DATADIR) / "runtime" / "wasm" / "pyodide", d / "runtime" / "wasm" / "pyodide")
    runner = (Path(DATADIR) / "runtime" / "wasm" / "runner.mjs").read_text()
    weak = runner.replace("jsglobals: Object.create(null)", "jsglobals: globalThis")
    weak = weak.replace("\tdelete globalThis[name];", "\tvoid name;")
    stand_in = "globalThis.process = Object.freeze({ getuid: () => uid });"
    assert weak.count("jsglobals: globalThis") == 2 and "void name;" in weak and stand_in in weak
    weak = weak.replace(stand_in, "")   # Node's own process stays
    (d / "runtime" / "wasm" / "runner.mjs").write_text(weak)
    return d


def test_the_probe_finds_process_on_a_weakened_runner(weakened_datadir):
    need_wasm()
    d = weakened_datadir
    res = run("wasm", ESCAPE_PROBE, env={"PYCELL_DATADIR": str(d)})
    found = escapes(res)
    assert "js.process" in found and "js.require" not in found, found
    assert "process" in found["js.process"]
    # even so: Node's permission model refuses child processes
    res = run("wasm", """
        import js
        try:
            js.process.getBuiltinModule("node:child_process").execFileSync("/bin/true")
        except Exception as e:
            print(type(e).__name__, str(e))
    """, env={"PYCELL_DATADIR": str(d)})
    assert res["stdout"] == "JsException Error: Access to this API has been restricted\n", res["stderr"]


def policy_test(*args, env=None):
    rc, out, err = pycell_run(["policy-test", "--backend", "wasm", "--format", "json", *args], timeout=300,
                              env=env)
    return rc, json.loads(out), err


def test_policy_test_on_wasm_contains_every_probe():
    need_wasm()
    rc, doc, err = policy_test()
    names = {p["category"] + "/" + p["name"]: p for p in doc["probes"]}
    bad = {n: p["reason"] for n, p in names.items() if p["status"] != "contained"}
    assert (rc, bad) == (0, {}), err
    for n in ("javascript/js-module-empty", "javascript/function-constructor", "javascript/dynamic-import",
              "filesystem/run-dir-read-only", "network/raw-socket", "resources/memory-bomb",
              "resources/supervisor-alive", "network/host-listener-untouched"):
        assert n in names, n
    assert "stopped: memory_limit" in names["resources/memory-bomb"]["reason"]


def test_policy_test_fails_on_a_weakened_runner(weakened_datadir):
    need_wasm()
    rc, doc, err = policy_test("--only", "javascript", env={"PYCELL_DATADIR": str(weakened_datadir)})
    status = {p["name"]: p["status"] for p in doc["probes"]}
    assert rc == 1
    assert status["js-module-empty"] == "escaped"
    assert doc["failed"] >= 1


# State a run leaves wherever it can, and the look for it in the next run.
LEAVE_STATE = """
import sys, json, js
open("/tmp/left", "w").write("x")
open("/left", "w").write("x")
open("/workspace/left", "w").write("x")
json.leak = 1
sys.modules["leaky"] = json
try:
    js.leak = 1
except Exception:
    pass
x = 41
x + 1
"""
LOOK_FOR_STATE = """
import os, sys, json, js
print(os.path.exists("/tmp/left"), os.path.exists("/left"), os.listdir("/workspace"),
      hasattr(json, "leak"), "leaky" in sys.modules, hasattr(js, "leak"), "x" in globals())
"""
NO_STATE = "False False [] False False False False\n"


def test_nothing_of_one_run_is_seen_by_the_next():
    first = run("wasm", LEAVE_STATE)
    assert first["status"] == "ok", first["stderr"]
    second = run("wasm", LOOK_FOR_STATE)
    assert second["stdout"] == NO_STATE, second["stderr"]


# ------------------------------------------------------------ over MCP

def Mcp(policy):
    return RawMcp(["--policy", str(policy)])


def test_run_python_cells_on_wasm(tmp_path):
    need_wasm()
    pol = wasm_policy(tmp_path)
    m = Mcp(pol)
    try:
        r = m.tool("run_python", {"code": "y = x * 2\nprint('y', y)\n{'y': y, 'l': [1, 2.5]}",
                                  "variables": {"x": 21}})
        sc = r["structuredContent"]
        assert (sc["status"], sc["stdout"], sc["return_value"], sc["backend"]) == \
            ("ok", "y 42\n", {"y": 42, "l": [1, 2.5]}, "wasm")
        r = m.tool("run_python", {"code": "raise ValueError('no')"})
        sc = r["structuredContent"]
        assert (sc["status"], sc["exit_code"]) == ("error", 1)
        assert sc["stderr"].endswith("ValueError: no\n")
        info = m.tool("sandbox_info", {})["structuredContent"]
        assert info["backend"] == "wasm"
        assert info["python_version"].startswith("3.")
        r = m.tool("session_open", {})
        assert r["isError"] is True
        assert "Sessions need the native backend" in r["content"][0]["text"]
    finally:
        err = m.close()
    assert b"warm starts unavailable" not in err, err


def ready_nodes(server_pid):
    """The server's ready wasm jails: node processes started for a cell
    that has not come (argv "cell-ready")."""
    found = set()
    for pid in descendants(server_pid):
        try:
            argv = Path("/proc/%d/cmdline" % pid).read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[0].endswith(b"node") and b"cell-ready" in argv:
            found.add(pid)
    return found


def wait_ready(server_pid, n, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        nodes = ready_nodes(server_pid)
        if len(nodes) >= n:
            return nodes
        time.sleep(0.05)
    raise AssertionError("no %d ready wasm jails within %d s" % (n, timeout))


def test_warm_cells_come_from_ready_jails_and_share_nothing(tmp_path):
    """The pool's jails: each one node that loaded Pyodide ahead and takes
    one cell; a cell that left state everywhere it could is not seen by
    the next, which comes from another ready jail."""
    need_wasm()
    pol = wasm_policy(tmp_path)
    m = Mcp(pol)
    try:
        before = wait_ready(m.p.pid, 2)
        sc = m.tool("run_python", {"code": LEAVE_STATE})["structuredContent"]
        assert (sc["status"], sc["return_value"]) == ("ok", 42), sc
        used = before - ready_nodes(m.p.pid)
        assert len(used) == 1, (before, used)
        before = wait_ready(m.p.pid, 2)
        sc = m.tool("run_python", {"code": LOOK_FOR_STATE})["structuredContent"]
        assert sc["stdout"] == NO_STATE, sc
        assert len(before - ready_nodes(m.p.pid)) == 1
    finally:
        m.close()


def test_a_ready_jail_whose_node_dies_is_replaced(tmp_path):
    """Its init sees the program pipe's reader gone and ends the jail; the
    next call is answered from another, and the pool makes up the number
    when it refills (as it does for native ready jails, at a call)."""
    need_wasm()
    pol = wasm_policy(tmp_path)
    m = Mcp(pol)
    try:
        before = wait_ready(m.p.pid, 2)
        victim = min(before)
        init = proc_stat(victim)[1]
        os.kill(victim, 9)
        # until its init has ended (a call in between may still be given
        # that jail, and fail with the signal: as a native ready jail would)
        deadline = time.monotonic() + 10
        while (proc_stat(init) or ("Z",))[0] != "Z" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert (proc_stat(init) or ("Z",))[0] == "Z"
        for _ in range(2):
            sc = m.tool("run_python", {"code": "6 * 7"})["structuredContent"]
            assert (sc["status"], sc["return_value"], sc["warnings"]) == ("ok", 42, []), json.dumps(sc)
        now = wait_ready(m.p.pid, 2)
        assert victim not in now and not (before & now), (before, now)
    finally:
        m.close()


def test_pycell_serve_runs_wasm_cells_over_http(tmp_path):
    """A 2026-07-28 call over Streamable HTTP to `pycell serve` with a wasm
    policy: the same runs, from its ready jails."""
    need_wasm()
    from test_serve import Serve
    pol = wasm_policy(tmp_path)
    s = Serve("--listen", "127.0.0.1:0", "--policy", str(pol), tmp_path=tmp_path)
    try:
        wait_ready(s.proc.pid, 1)
        r, data = s.modern(1, "tools/call", {"name": "run_python", "arguments": {"code": "print(6 * 7)\n'done'"}})
        sc = json.loads(data)["result"]["structuredContent"]
        assert (r.status, sc["status"], sc["stdout"], sc["return_value"], sc["backend"]) == \
            (200, "ok", "42\n", "done", "wasm"), sc
    finally:
        s.stop()
