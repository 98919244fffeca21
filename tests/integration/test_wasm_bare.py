"""The wasm backend on a host that refuses namespaces (issue 15): the run
goes on without them, in a "bare" jail (no namespace, no root of its own),
and says which layers hold.  Three such hosts, each simulated here:

  userns        root of a child user namespace whose
                user.max_user_namespaces is 0 (a sysctl of the host)
  unprivileged  the same, as an unprivileged user (nobody)
  container     real root under a container's seccomp profile: clone3
                ENOSYS, clone/unshare of a user namespace EPERM (Docker's)

On each the native backend fails, naming the reason; the wasm backend runs
the matrix, and what confines it is probed from outside (node's
/proc/PID/status) and from inside (what Python can read and write).
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import (DATADIR, EXIT_TIMEOUT, PYCELL, RawMcp, check_no_leftovers, children_of, descendants,
                      proc_status)
from test_wasm import need_wasm

HERE = Path(__file__).resolve().parent
NOBODY = 65534
BARE_LAYERS = ["no capabilities", "no_new_privs", "seccomp", "rlimits", "node permissions", "webassembly"]
WHY = {
    "userns": "clone3 into new namespaces: No space left on device",
    "unprivileged": "clone3 into new namespaces: No space left on device",
    "container": "clone3 into new namespaces: Function not implemented",
}
WARNING = ("this host refuses namespaces (%s): the wasm run has no namespace and no root of its own; \"layers\" "
           "lists what confines it (SECURITY.md, \"The wasm backend without namespaces\")")
HOSTS = ["userns", "unprivileged", "container"]

NO_USERNS = ["unshare", "-Ur", "sh", "-c", 'echo 0 > /proc/sys/user/max_user_namespaces && exec "$@"', "sh"]


def prefix(host):
    if host == "userns":
        return NO_USERNS
    if host == "unprivileged":
        return ["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups", *NO_USERNS]
    return [sys.executable, str(HERE.parent / "tools" / "container_seccomp.py")]


def host_uid(host):
    """The host uid node runs as: the unshare(1) map sends the namespace's
    root to its creator; a root supervisor gives a bare jail the unused
    host id its namespaced jails' uid 1000 maps to."""
    return {"userns": 0, "unprivileged": NOBODY, "container": 101000}[host]


def start(host, args, **kw):
    return subprocess.Popen([*prefix(host), PYCELL, *args], env=dict(os.environ, PYCELL_DATADIR=DATADIR), **kw)


def pycell(host, args, input=b"", timeout=60):
    before = set(children_of(os.getpid()))
    p = start(host, args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = p.communicate(input, timeout=timeout)
    finally:
        p.kill()
        p.wait()
    check_no_leftovers(before, "pycell run")
    return p.returncode, out, err


def run(host, code, *opts, args=(), input=b"", timeout=60):
    need_wasm()
    rc, out, err = pycell(host, ["run", "--json", "--backend", "wasm", *opts, "-c", textwrap.dedent(code), *args],
                          input=input, timeout=timeout)
    assert out, (rc, err)
    res = json.loads(out)
    res["rc"] = rc
    return res


def check_bare(res, host):
    assert res["backend"] == "wasm"
    assert res["layers"] == BARE_LAYERS, res
    assert WARNING % WHY[host] in res["warnings"], res["warnings"]
    names = [lim["name"] for lim in res["limits"]]
    # /tmp and /workspace are Pyodide's, in its memory: no tmpfs holds them
    assert "tmp_bytes" not in names and "workspace_bytes" not in names, names


@pytest.mark.parametrize("host", HOSTS)
def test_native_fails_naming_the_reason(host):
    rc, out, err = pycell(host, ["run", "-c", "print(1)"])
    assert (rc, out) == (125, b""), err
    # first; warnings of limits no cgroup holds (unprivileged) follow
    assert err.decode().splitlines()[0] == (
        "pycell: the jail could not be set up: clone3: clone3 into new namespaces: this host does not let pycell "
        "make them (`pycell doctor` says what to change): %s" % WHY[host].split(": ")[1])


@pytest.mark.parametrize("host", HOSTS)
def test_the_matrix_runs_and_says_what_holds(host):
    res = run(host, """
        import sys
        print("out", sys.argv[1:], sys.stdin.read().upper())
        print("err", file=sys.stderr)
        sys.exit(3)
    """, args=["a", "b c"], input=b"some input")
    check_bare(res, host)
    assert (res["status"], res["exit_code"], res["rc"]) == ("error", 3, 3), res
    assert (res["stdout"], res["stderr"]) == ("out ['a', 'b c'] SOME INPUT\n", "err\n")
    res = run(host, "x = 1\nraise ValueError('no')\n")
    assert (res["status"], res["exit_code"]) == ("error", 1)
    assert res["stderr"].endswith("ValueError: no\n") and 'File "/run/pycell/main.py", line 2' in res["stderr"]
    res = run(host, "print('y' * 5000)", "--output-limit", "1K")
    assert res["status"] == "ok" and res["truncated"]["stdout"] and len(res["stdout"].encode()) <= 1024
    assert res["dropped_bytes"]["stdout"] > 3900, res


@pytest.mark.parametrize("host", HOSTS)
def test_timeout(host):
    res = run(host, "while True: pass", "--timeout", "1s")
    check_bare(res, host)
    assert (res["status"], res["rc"]) == ("timeout", EXIT_TIMEOUT), res


@pytest.mark.parametrize("host", HOSTS)
def test_memory_where_a_cgroup_holds_it_and_says_so_where_none_does(host):
    res = run(host, "x = bytearray(700 << 20)\nprint(len(x))", "--memory", "256M")
    check_bare(res, host)
    by = {lim["name"]: lim["enforced_by"] for lim in res["limits"]}
    if by["memory_bytes"] == "none":
        # no cgroup this user may make: said, and the run is not stopped
        assert "memory limit of 268435456 bytes is not enforced: no usable memory cgroup controller (run " \
               "`pycell doctor`)" in res["warnings"]
        assert (res["status"], res["stdout"]) == ("ok", "734003200\n"), res
        assert host == "unprivileged", "as root this host's v1 memory controller serves: " + str(by)
    else:
        assert by["memory_bytes"] in ("cgroup1", "cgroup2")
        assert res["status"] == "memory_limit", res
    # no pids rlimit is claimed: without a user namespace of its own it
    # would count every task of the jail's uid, not this run's
    assert by["pids"] != "rlimit", by


def find_node(root_pid, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for pid in descendants(root_pid):
            try:
                if Path(f"/proc/{pid}/comm").read_text().strip() == "node":
                    return pid
            except OSError:
                pass
        time.sleep(0.05)
    raise AssertionError("no node below %d" % root_pid)


@pytest.mark.parametrize("host", HOSTS)
def test_node_has_no_privilege_and_dies_with_the_supervisor(host):
    """Seen from outside while it runs: node's ids, capabilities,
    no_new_privs and seccomp; then the supervisor is killed (SIGKILL, no
    cleanup of its own) and init and node go with it (PDEATHSIG)."""
    need_wasm()
    before = set(children_of(os.getpid()))
    code = "import time\nprint('up', flush=True)\nt = time.time()\nwhile time.time() < t + 60: pass\n"
    p = start(host, ["run", "--backend", "wasm", "-c", code], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
              stderr=subprocess.PIPE)
    try:
        assert p.stdout.readline() == b"up\n", p.stderr.read()
        node = find_node(p.pid)
        st = proc_status(node)
        uid = str(host_uid(host))
        assert st["Uid"].split() == [uid] * 4 and st["Gid"].split() == [uid] * 4, st
        assert st["Groups"] == "", st
        for cap in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
            assert int(st[cap], 16) == 0, (cap, st[cap])
        assert (st["NoNewPrivs"], st["Seccomp"]) == ("1", "2"), st
        # no namespace of its own: the same pid and mount namespaces as ours
        # (where the namespaces are visible to the test: not under unshare -U)
        if host == "container":
            for ns in ("pid", "mnt", "net"):
                assert os.readlink(f"/proc/{node}/ns/{ns}") == os.readlink(f"/proc/self/ns/{ns}")
        init = int(proc_status(node)["PPid"])
        assert Path(f"/proc/{init}/comm").read_text().strip() == "pycell-init"
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        deadline = time.monotonic() + 5
        while (proc_status(node) or proc_status(init)) and time.monotonic() < deadline:
            for pid in (node, init):
                st = proc_status(pid)
                if st and st["State"].startswith("Z"):
                    os.waitpid(pid, os.WNOHANG)   # reparented to us, the subreaper
            time.sleep(0.05)
        assert proc_status(node) is None and proc_status(init) is None, "outlived the supervisor"
    finally:
        p.kill()
        p.wait()
    check_no_leftovers(before, "pycell run")


FILES = """
import errno, json, os
out = {"root": sorted(os.listdir("/")), "run": sorted(os.listdir("/run/pycell")),
       "lib": "pycell" in os.listdir("/run/pycell/lib")}
for name, path in (("passwd", "/etc/passwd"), ("proc", "/proc/1/environ")):
    try:
        open(path, "rb").read()
        out[name] = "read"
    except OSError as e:
        out[name] = errno.errorcode[e.errno]
for name, f in (("write", lambda: open("/run/pycell/lib/pycell/evil.py", "w").write("x")),
                ("symlink", lambda: os.symlink("/etc", "/run/pycell/lib/etc")),
                ("mkdir", lambda: os.mkdir("/run/pycell/lib/d"))):
    try:
        f()
        out[name] = "done"
    except OSError as e:
        out[name] = errno.errorcode[e.errno]
open("/workspace/left", "w").write("1")
open("/tmp/left", "w").write("1")
json.LEFT = 1   # a module patched: sys.modules["json"]
print(json.dumps(out))
"""

LOOK = """
import os, json
print(os.path.exists("/workspace/left"), os.path.exists("/tmp/left"), hasattr(json, "LEFT"))
"""


@pytest.mark.parametrize("host", HOSTS)
def test_python_reads_no_host_file_and_writes_none(host):
    """The runtime is the only directory of the host Pyodide mounts, read
    only: node may write nowhere (no --allow-fs-write), which the
    permission model holds even where the kernel would let node write
    (userns: node is the files' owner there).  What a run writes is in its
    own memory, gone with it."""
    res = run(host, FILES)
    check_bare(res, host)
    out = json.loads(res["stdout"])
    assert out == {"root": ["dev", "home", "lib", "proc", "run", "tmp", "workspace"], "run": ["lib", "main.py"],
                   "lib": True, "passwd": "ENOENT", "proc": "ENOENT", "write": "EACCES", "symlink": "EACCES",
                   "mkdir": "EACCES"}, res
    lib = Path(DATADIR) / "runtime"
    assert not (lib / "pycell" / "evil.py").exists() and not (lib / "etc").exists() and not (lib / "d").exists()
    res = run(host, LOOK)
    assert res["stdout"] == "False False False\n", res


def wasm_policy(d):
    pol = d / "wasm.json"
    pol.write_text(json.dumps({"extends": "default", "backend": "wasm"}))
    pol.chmod(0o644)
    return pol


@pytest.mark.parametrize("host", ["container", "unprivileged"])
def test_mcp_cells_and_sandbox_info(host, host_tmp):
    """pycell mcp on such a host: sandbox_info lists the layers, cells run
    (from jails made ahead, bare as well) and share nothing."""
    need_wasm()
    m = RawMcp(["--policy", str(wasm_policy(host_tmp))], prefix=prefix(host))
    try:
        info = m.tool("sandbox_info", {})["structuredContent"]
        assert (info["backend"], info["layers"]) == ("wasm", BARE_LAYERS), info
        sc = m.tool("run_python", {"code": "x = 41\nopen('/workspace/f', 'w').write('1')\nx + 1"})
        sc = sc["structuredContent"]
        assert (sc["status"], sc["return_value"], sc["layers"]) == ("ok", 42, BARE_LAYERS), sc
        assert WARNING % WHY[host] in sc["warnings"]
        sc = m.tool("run_python", {"code": "import os\n('x' in globals(), os.path.exists('/workspace/f'))"})
        assert sc["structuredContent"]["return_value"] == [False, False], sc
    finally:
        m.close()


def test_doctor_says_the_wasm_backend_runs_without_namespaces():
    need_wasm()
    rc, out, err = pycell("userns", ["doctor", "--json"])
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    w = checks["wasm"]
    assert w["status"] == "warn", w
    assert w["detail"].endswith("runs without namespaces, as this host refuses them (%s): confined by no "
                                "capabilities, no_new_privs, seccomp, rlimits, node's permission model and "
                                "WebAssembly, without a root, pid or network namespace of its own" % WHY["userns"])
    assert checks["user namespaces"]["status"] == "fail" and rc == 1


def test_policy_test_contains_every_probe_without_namespaces():
    """`pycell policy-test --backend wasm` on such a host: every probe
    contained, the bombs by the cgroup root may make, and the run-dir probe
    says that /run/pycell is Pyodide's own there (its lib is the host's
    runtime, which no write reaches)."""
    need_wasm()
    rc, out, err = pycell("userns", ["policy-test", "--backend", "wasm", "--format", "json"], timeout=300)
    rep = json.loads(out)
    verdicts = {p["category"] + "/" + p["name"]: p["status"] for p in rep["probes"]}
    assert rc == 0 and set(verdicts.values()) == {"contained"}, (verdicts, err[-2000:])
    assert (rep["passed"], rep["failed"]) == (26, 0), rep
    run_dir = [p for p in rep["probes"] if p["name"] == "run-dir-read-only"][0]
    assert run_dir["reason"].endswith("/run/pycell itself is Pyodide's own (no namespaces here)"), run_dir
