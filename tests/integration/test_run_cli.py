"""`pycell run` as a command: program sources, stdin, argv, output, exit
statuses and the --json result object."""

import errno
import hashlib
import json
import textwrap
import time

import pytest

from conftest import (EXIT_MEMORY_LIMIT, EXIT_SETUP_FAILED, EXIT_TIMEOUT, EXIT_USAGE,
                      pycell_run, run_json)

MiB = 1 << 20

pytestmark = pytest.mark.usefixtures("reap_leftovers")

def limit(res, name):
    """The limits entry for name ("memory" matches "memory_bytes")."""
    found = [lim for lim in res["limits"]
             if lim.get("name") == name or lim.get("name", "").startswith(name + "_")]
    assert len(found) == 1, f"limit {name!r} in {res['limits']!r}"
    return found[0]


RESULT_KEYS = {"status", "exit_code", "signal", "stdout", "stderr", "truncated",
               "return_value", "duration_ms", "cpu_ms", "memory_peak_bytes", "backend", "layers", "limits",
               "warnings"}


def program_stderr(err):
    """pycell's stderr without its own diagnostics ("pycell: ..." lines)."""
    return b"".join(line for line in err.splitlines(keepends=True)
                    if not line.startswith(b"pycell: "))


def test_plain_output_passes_through():
    rc, out, err = pycell_run(["run", "-c",
                               "import sys; print('to out'); print('to err', file=sys.stderr)"])
    assert (rc, out, program_stderr(err)) == (0, b"to out\n", b"to err\n")


@pytest.mark.parametrize("code, rc, status, exit_code, sig", [
    ("pass", 0, "ok", 0, None),
    ("import sys; sys.exit(3)", 3, "error", 3, None),
    ("raise SystemExit(255)", 255, "error", 255, None),
    ("raise ValueError('boom')", 1, "error", 1, None),
    ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", 137, "error", None, 9),
    ("import os, signal; os.kill(os.getpid(), signal.SIGTERM)", 143, "error", None, 15),
])
def test_exit_status_mirrors_program(code, rc, status, exit_code, sig):
    got_rc, _, err = pycell_run(["run", "-c", code])
    assert got_rc == rc, err
    res = run_json(code)
    assert res.rc == rc
    assert res["status"] == status
    assert (res["exit_code"], res["signal"]) == (exit_code, sig)
    if "ValueError" in code:
        assert "ValueError: boom" in res["stderr"]


EXIT_WORK = """
import atexit, sys, threading, time
class D:
    def __init__(self, n): self.n = n
    def __del__(self): print("del", self.n, flush=True)
a = D("a")
f = open(1, "w", closefd=False)
f.write("never flushed by the program\\n")
b = D("b")
_c = D("_c")
atexit.register(lambda: print("atexit ran"))
def late():
    time.sleep(0.2)
    print("thread ran", flush=True)
threading.Thread(target=late).start()
sys.stderr.write("no newline, no flush")
print("main done")
"""


def test_exit_runs_what_teardown_runs():
    """What python does at exit and a program can see: non-daemon threads
    joined, atexit handlers, __main__'s objects released in order (their
    __del__ and the flush of an open file), the streams flushed.  The same
    with --warm (run-warm.sh), whose python does not tear down the
    interpreter it inherited."""
    res = run_json(EXIT_WORK)
    assert (res["status"], res["exit_code"]) == ("ok", 0), res
    assert res["stdout"] == ("main done\nthread ran\natexit ran\ndel a\n"
                             "never flushed by the program\ndel b\ndel _c\n")
    assert res["stderr"] == "no newline, no flush"


@pytest.mark.parametrize("code, out, status", [
    # sys.stdout replaced: the original object is still flushed
    ("import sys\nsys.stdout.write('x')\nsys.stdout = None\n", "x", 0),
    # a closed stdout is not flushed (and is no error)
    ("import sys\nprint('hi')\nsys.stdout.close()\n", "hi\n", 0),
    ("import sys\nprint('hi', end='')\nsys.exit(3)\n", "hi", 3),
])
def test_exit_flushes_the_streams(code, out, status):
    res = run_json(code)
    assert (res["stdout"], res["exit_code"]) == (out, status), res


def test_timeout_exit_status():
    t0 = time.monotonic()
    rc, out, _ = pycell_run(["run", "--timeout", "0.5", "-c",
                             "print('started', flush=True)\nwhile True: pass"])
    elapsed = time.monotonic() - t0
    assert rc == EXIT_TIMEOUT
    assert out == b"started\n"
    # the program would run forever: the bounds leave room for a slow machine
    assert 0.5 <= elapsed < 3.0
    res = run_json("import time; time.sleep(100)", "--timeout", "0.3")
    assert (res["status"], res.rc) == ("timeout", EXIT_TIMEOUT)
    assert 300 <= res["duration_ms"] < 2000


def test_missing_interpreter_is_setup_failed():
    rc, out, err = pycell_run(["run", "--python", "/usr/bin/no-such-python", "-c", "pass"])
    assert rc == EXIT_SETUP_FAILED
    assert out == b""
    assert b"/usr/bin/no-such-python" in err
    res = run_json("pass", "--python", "/usr/bin/no-such-python")
    assert (res["status"], res.rc) == ("setup_failed", EXIT_SETUP_FAILED)
    assert res["setup_error"]["errno"] == errno.ENOENT
    assert "/usr/bin/no-such-python" in res["setup_error"]["message"]


def test_stdin_is_forwarded():
    data = bytes(range(256)) * 4096 + b"\n\0end"
    res = run_json("import sys, hashlib; d = sys.stdin.buffer.read();"
                   "print(len(d), hashlib.sha256(d).hexdigest())", input=data)
    assert res["status"] == "ok", res
    assert res["stdout"] == f"{len(data)} {hashlib.sha256(data).hexdigest()}\n"


def test_stdin_file(tmp_path):
    path = tmp_path / "in.bin"
    data = b"line one\nline two\n\xff\x00"
    path.write_bytes(data)
    res = run_json("import sys; d = sys.stdin.buffer.read(); print(d.hex())",
                   "--stdin", str(path), input=b"not this")
    assert res["status"] == "ok", res
    assert res["stdout"] == data.hex() + "\n"


def test_unread_stdin_does_not_block():
    t0 = time.monotonic()
    rc, out, err = pycell_run(["run", "-c", "print('done')"], input=b"x" * (16 * MiB))
    assert (rc, out) == (0, b"done\n"), err
    assert time.monotonic() - t0 < 5


def test_args_become_argv():
    args = ["a", "b c", "", "ünï", "--json", "-x", "--timeout", "1", "-"]
    res = run_json("import sys, json; print(json.dumps(sys.argv))", args=args)
    assert res["status"] == "ok", res
    argv = json.loads(res["stdout"])
    assert argv[1:] == args


def test_file_mode(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent(f"""
        import os, sys, json
        print(json.dumps({{"file": __file__, "argv": sys.argv,
                           "host_dir_visible": os.path.exists({str(tmp_path)!r}),
                           "cwd": os.getcwd()}}))
    """))
    rc, out, err = pycell_run(["run", str(prog), "one", "two"])
    assert rc == 0, err
    assert json.loads(out) == {"file": "/run/pycell/prog.py",
                               "argv": ["/run/pycell/prog.py", "one", "two"],
                               "host_dir_visible": False, "cwd": "/workspace"}


def test_dash_reads_program_from_stdin():
    prog = b"import sys, json\nprint(json.dumps([sys.argv[1:], sys.stdin.read()]))\n"
    rc, out, err = pycell_run(["run", "-", "x", "y"], input=prog)
    assert rc == 0, err
    assert json.loads(out) == [["x", "y"], ""]


@pytest.mark.parametrize("args", [
    ["run"],
    ["run", "--no-such-option", "-c", "pass"],
    ["run", "--timeout", "soon", "-c", "pass"],
    ["run", "--memory", "12Q", "-c", "pass"],
    ["run", "--output-limit", "lots", "-c", "pass"],
    ["run", "-c"],
    ["run", "--json"],
    ["no-such-command"],
])
def test_usage_errors(args):
    rc, out, err = pycell_run(args)
    assert rc == EXIT_USAGE
    assert out == b""
    assert err.strip(), "a usage error must say what is wrong"


def test_help_names_every_option():
    rc, out, _ = pycell_run(["run", "--help"])
    assert rc == 0
    for opt in (b"--json", b"--timeout", b"--memory", b"--policy", b"--python", b"--stdin",
                b"--output-limit", b"-c"):
        assert opt in out, opt


def test_result_object_shape():
    code = textwrap.dedent("""
        import time, sys
        t = time.process_time()
        while time.process_time() - t < 0.3:
            pass
        data = b"m" * (64 << 20)
        print("hi")
        sys.stderr.write("warn\\n")
    """)
    res = run_json(code)
    assert set(res) == RESULT_KEYS | {"tool_calls"}
    assert res["status"] == "ok"
    assert res["layers"] == ["namespaces", "private root", "no capabilities", "no_new_privs", "seccomp", "rlimits"]
    assert (res["exit_code"], res["signal"]) == (0, None)
    assert (res["stdout"], res["stderr"]) == ("hi\n", "warn\n")
    assert res["truncated"] == {"stdout": False, "stderr": False}
    assert res["return_value"] is None
    assert 300 <= res["cpu_ms"] <= res["duration_ms"] + 50
    assert res["memory_peak_bytes"] >= 64 * MiB
    assert isinstance(res["limits"], list) and isinstance(res["warnings"], list)
    assert all(isinstance(w, str) for w in res["warnings"])
    assert limit(res, "timeout")["value"] == 30000
    assert limit(res, "output")["value"] == MiB
    assert limit(res, "memory")["value"] == 512 * MiB


def test_non_utf8_output_is_replaced():
    res = run_json("import sys; sys.stdout.buffer.write(b'a\\xffb\\xc3'); "
                   "sys.stderr.buffer.write(b'\\xfe')")
    assert (res["stdout"], res["stderr"]) == ("a\ufffdb\ufffd", "\ufffd")


def test_output_limit_option():
    """Past the limit a stream keeps its head (half the limit) and its
    tail, with a marker of what was dropped between them."""
    res = run_json("import sys; sys.stdout.write('h' * 2000 + 'x' * 5000 + 'RESULT=42\\n'); "
                   "sys.stderr.write('y' * 1024)", "--output-limit", "1K")
    assert res["status"] == "ok"
    tail = 1024 - 512 - 96   # the tail's share: the rest, less room for the marker
    dropped = 2000 + 5000 + 10 - 512 - tail
    marker = "\n[... pycell: %d bytes of stdout dropped here ...]\n" % dropped
    assert res["stdout"] == "h" * 512 + marker + "x" * (tail - 10) + "RESULT=42\n"
    assert len(res["stdout"]) <= 1024
    assert res["stderr"] == "y" * 1024   # it fits: all of it
    assert res["truncated"] == {"stdout": True, "stderr": False}
    assert res["dropped_bytes"] == {"stdout": dropped, "stderr": 0}


def test_output_limit_streams_the_head_then_the_tail():
    """Printed as it runs: the head as it comes, the rest at the end; the
    same bytes the JSON result holds."""
    code = "for i in range(5000):\n    print(i)\nprint('RESULT=42')\n"
    rc, out, err = pycell_run(["run", "--output-limit", "4K", "-c", code])
    assert rc == 0, err
    assert out.decode() == run_json(code, "--output-limit", "4K")["stdout"]
    assert out.startswith(b"0\n1\n2\n") and out.endswith(b"4999\nRESULT=42\n")
    assert b"bytes of stdout dropped here ...]\n" in out
    assert b"pycell: stdout truncated: " in err


def test_output_limit_below_policy_minimum_is_a_usage_error():
    rc, out, err = pycell_run(["run", "--output-limit", "1000", "-c", "pass"])
    assert (rc, out) == (EXIT_USAGE, b"")
    assert b"--output-limit: expected a size from 1K to 1G, got \"1000\"" in err


def test_memory_limit():
    res = run_json("b = b'x' * (512 << 20); print(len(b))", "--memory", "64M")
    memory = limit(res, "memory")
    assert memory["value"] == 64 * MiB
    by = memory["enforced_by"]
    if by not in ("cgroup2", "cgroup1"):
        pytest.skip(f"memory limit enforced by {by!r}, not a cgroup: no OOM status to check")
    assert (res["status"], res.rc) == ("memory_limit", EXIT_MEMORY_LIMIT)
    assert res["stdout"] == ""
