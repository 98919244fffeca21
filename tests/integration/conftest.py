"""Shared fixtures for the pycell integration tests.

Every test drives the real binary: $PYCELL (default <repo>/pycell), with
$PYCELL_DATADIR passed through (default: the source tree, so policies and
the runtime are found without `make install`).

Fixtures other test files can use:
  pycell_bin     path of the binary
  pycell_run     run(args, input=None, timeout=30, ...) -> (rc, stdout, stderr)
  run_json       run_json(code, *opts, ...) -> Result (the parsed --json dict,
                 with .rc, .stderr_bytes and .elapsed attributes)
  policy_file    policy_file({...overrides}) -> path of a policy extending default
  host_tmp       a fresh host directory (mode 0755, under /tmp) that the jail's
                 mapped ids can traverse: use it for bind sources (pytest's
                 tmp_path sits below a 0700 directory)
  host_is_root   bool
  require_root   skips the test (with its reason) unless running as root
  jail_procs     jail_procs(pid) -> the processes below a host pid, with their
                 in-jail pids, host uids and gids
  reap_leftovers kills processes a test left behind, even if it failed early

The test process makes itself a child subreaper, so a jail process that
outlives its pycell is reparented to us; pycell_run fails the test when it
finds one (the "no process left behind" property, checked after every run).
"""

import ctypes
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PYCELL = os.environ.get("PYCELL") or str(REPO / "pycell")
DATADIR = os.environ.get("PYCELL_DATADIR") or str(REPO)


def _man_tools():
    """The tools pycell(1) lists in pycell mcp's section (".TP", then ".B
    name"), in its order: what tools/list shows when the policy enables them
    all.  The unit suite holds that list to the table of tools, so no test
    names them."""
    import re
    man = (REPO / "man" / "pycell.1").read_text()
    section = man[man.index('.SS "pycell mcp'):man.index('.SS "pycell serve')]
    return re.findall(r"\n\.TP\n\.B ([a-z_]+)\n", section)


TOOLS = _man_tools()
HOST_IS_ROOT = os.geteuid() == 0
# pycell maps jail id N to host id base + N when it runs as root.
HOST_ID_BASE = 100000
JAIL_UID = 1000
JAIL_GID = 1000

# Exit statuses of `pycell run` (man pycell(1)).
EXIT_USAGE = 2
EXIT_MEMORY_LIMIT = 123
EXIT_TIMEOUT = 124
EXIT_SETUP_FAILED = 125

PR_SET_CHILD_SUBREAPER = 36


def _become_subreaper():
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


_become_subreaper()


def pytest_configure(config):
    if config.option.collectonly:
        return
    if not os.access(PYCELL, os.X_OK):
        raise pytest.UsageError(
            f"pycell binary not found or not executable: {PYCELL} "
            "(build it: autoreconf -fi && ./configure && make, or set PYCELL)")


def pycell_env(extra=None):
    env = dict(os.environ)
    env["PYCELL_DATADIR"] = DATADIR
    if extra:
        env.update(extra)
    return env


# ------------------------------------------------------------ host processes

def proc_status(pid):
    """The fields of /proc/PID/status as a dict of strings, or None."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    out = {}
    for line in text.splitlines():
        key, _, val = line.partition(":")
        out[key] = val.strip()
    return out


def proc_stat(pid):
    """(state, ppid, starttime) from /proc/PID/stat, or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = text[text.rindex(")") + 2:].split()
    return fields[0], int(fields[1]), int(fields[19])


def all_pids():
    return [int(d) for d in os.listdir("/proc") if d.isdigit()]


def children_of(pid):
    """Pids whose parent is pid, with their stat, as {pid: (state, ppid, start)}."""
    out = {}
    for p in all_pids():
        st = proc_stat(p)
        if st and st[1] == pid:
            out[p] = st
    return out


def run_jails(pid):
    """The processes below a server that belong to runs: its descendants
    less the warm-start zygote and the ready jails it keeps made ahead."""
    out = []
    for p in descendants(pid):
        try:
            with open(f"/proc/{p}/comm") as f, open(f"/proc/{p}/cmdline", "rb") as g:
                comm, cmd = f.read().strip(), g.read()
        except OSError:
            continue
        # a ready jail's init is pycell-ready by its command line from its exec
        # on, by its name a moment later (src/jail/init_main.c); in its exec,
        # it is named by the path it execs (/proc/self/fd/N: "N") and has no
        # command line yet
        if comm == "pycell-ready" or cmd == b"pycell\0__zygote\0" or cmd.startswith(b"pycell-ready\0"):
            continue
        if comm.isdigit() and cmd == b"":
            continue
        out.append(p)
    return out


def descendants(pid):
    """Every live process below pid (any depth), as a list of pids."""
    parent = {}
    for p in all_pids():
        st = proc_stat(p)
        if st:
            parent[p] = st[1]
    found, frontier = [], [pid]
    while frontier:
        cur = frontier.pop()
        kids = [p for p, pp in parent.items() if pp == cur]
        found.extend(kids)
        frontier.extend(kids)
    return found


def _ids(line):
    return [int(x) for x in line.split()]


def jail_procs(pid):
    """The processes below host pid, as dicts: pid (host), nspid (list, the
    last entry is the pid inside the innermost namespace), uid and gid
    (real, effective, saved, fs, as seen from the host), name, cmdline,
    starttime."""
    out = []
    for p in descendants(pid):
        st = proc_status(p)
        stat = proc_stat(p)
        if not st or not stat:
            continue
        try:
            cmdline = Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")
        except OSError:
            cmdline = []
        out.append({
            "pid": p,
            "nspid": _ids(st.get("NSpid", "")),
            "uid": _ids(st["Uid"]),
            "gid": _ids(st["Gid"]),
            "name": st.get("Name"),
            "state": stat[0],
            "cmdline": cmdline,
            "starttime": stat[2],
        })
    return out


def wait_for_jail_python(pid, marker, timeout=10.0):
    """Poll until the jail's pid-2 process has exec'd (its cmdline holds
    marker, e.g. a unique ARG); returns its jail_procs entry."""
    deadline = time.monotonic() + timeout
    mark = marker.encode()
    while time.monotonic() < deadline:
        for pr in jail_procs(pid):
            # a warm jail's python never execs: its cmdline is not its argv
            if pr["nspid"][-1:] == [2] and (mark in pr["cmdline"] or "--warm" in RUN_FLAGS):
                return pr
        time.sleep(0.005)
    raise AssertionError(f"no jailed process with {marker!r} in its argv below pid {pid} "
                         f"within {timeout}s: {jail_procs(pid)}")


def kill_tree(pid):
    for p in [pid] + descendants(pid):
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass


def reap_orphans(before):
    """Kill and reap children of the test process that are not in before
    (the jail processes reparented to us because their pycell left them
    behind).  Returns a description of the live ones."""
    leftover = []
    for p, (state, _, _) in children_of(os.getpid()).items():
        if p in before:
            continue
        if state != "Z":
            st = proc_status(p) or {}
            try:
                cmd = Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                cmd = b""
            leftover.append(f"pid {p} uid {st.get('Uid')} state {state} cmd {cmd[:200]!r}")
            kill_tree(p)
        try:
            os.waitpid(p, 0)
        except ChildProcessError:
            pass
    return leftover


def check_no_leftovers(before, what):
    # A process that outlived pycell was reparented to us (subreaper); give
    # an exiting jail a moment to finish dying before calling it left behind.
    deadline = time.monotonic() + 0.5
    while True:
        alive = [p for p, st in children_of(os.getpid()).items()
                 if p not in before and st[0] != "Z"]
        if not alive or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    leftover = reap_orphans(before)
    assert not leftover, f"{what} left processes behind: {leftover}"


class RawMcp:
    """`pycell mcp ARGS` over raw pipes, initialized (2025-06-18), run under
    the command prefix when one is given; close() checks that nothing of it
    is left."""

    def __init__(self, args, prefix=()):
        self.before = set(children_of(os.getpid()))
        self.p = subprocess.Popen([*prefix, PYCELL, "mcp", *args], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  env=dict(os.environ, PYCELL_DATADIR=DATADIR))
        self.next = 1
        self.call("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                 "clientInfo": {"name": "t", "version": "1"}})

    def call(self, method, params):
        i, self.next = self.next, self.next + 1
        self.p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}).encode()
                           + b"\n")
        self.p.stdin.flush()
        while True:
            line = self.p.stdout.readline()
            assert line, "the server ended: " + self.p.stderr.read().decode()[-2000:]
            m = json.loads(line)
            if m.get("id") == i:
                return m["result"]

    def tool(self, name, args):
        return self.call("tools/call", {"name": name, "arguments": args})

    def close(self):
        self.p.stdin.close()
        err = self.p.stderr.read()
        assert self.p.wait(timeout=30) == 0, err
        check_no_leftovers(self.before, "pycell mcp")
        return err


# ------------------------------------------------------------ running pycell

# Extra options for every `pycell run`, e.g. PYCELL_RUN_FLAGS=--warm reruns
# the suite with jails cloned from a zygote (tests/integration/run-warm.sh).
RUN_FLAGS = os.environ.get("PYCELL_RUN_FLAGS", "").split()
# And for every `pycell mcp` and `pycell serve` started by start_pycell,
# e.g. PYCELL_MCP_FLAGS=--cold (run-warm.sh: servers start warm by
# default, so the rerun starts them cold).  A test's own flags come after
# these and win.
MCP_FLAGS = os.environ.get("PYCELL_MCP_FLAGS", "").split()


def start_pycell(args, env=None, user=None, **popen_kw):
    """Popen pycell (optionally as a host uid via setpriv)."""
    args = list(args)
    if RUN_FLAGS and args[:1] == ["run"]:
        args = ["run", *RUN_FLAGS, *args[1:]]
    if MCP_FLAGS and args[:1] in (["mcp"], ["serve"]):
        args = [args[0], *MCP_FLAGS, *args[1:]]
    argv = [PYCELL] + args
    if user is not None:
        argv = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups"] + argv
    return subprocess.Popen(argv, env=pycell_env(env), **popen_kw)


def pycell_run(args, input=None, timeout=30, env=None, user=None, pass_fds=(),
               stdin=None, check_leftovers=True):
    """Run `pycell ARGS`; returns (returncode, stdout bytes, stderr bytes).
    input: bytes for pycell's stdin (else stdin, default /dev/null).
    timeout: seconds before the test fails (pycell and its jail are killed)."""
    before = set(children_of(os.getpid()))
    if input is not None:
        stdin = subprocess.PIPE
    elif stdin is None:
        stdin = subprocess.DEVNULL
    proc = start_pycell(args, env=env, user=user, stdin=stdin, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, pass_fds=pass_fds)
    try:
        out, err = proc.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_tree(proc.pid)
        out, err = proc.communicate()
        reap_orphans(before)
        raise AssertionError(f"pycell {args!r} did not finish within {timeout}s; "
                             f"stdout {out[:500]!r} stderr {err[:2000]!r}")
    if check_leftovers:
        check_no_leftovers(before, f"pycell {args!r}")
    # a warm run that silently fell back to a cold start proves nothing
    assert "--warm" not in RUN_FLAGS or b"warm start failed" not in err + out, (
        f"pycell {args!r}: warm start fell back to cold: {err[-2000:]!r}")
    return proc.returncode, out, err


class Result(dict):
    """The --json result object, plus how the pycell process ended."""
    rc = None
    stderr_bytes = b""
    elapsed = 0.0


def parse_result(rc, out, err, args):
    try:
        obj = json.loads(out)
    except ValueError as e:
        raise AssertionError(f"pycell {args!r} (exit {rc}) printed no JSON result ({e}): "
                             f"stdout {out[:1000]!r} stderr {err[:2000]!r}")
    assert isinstance(obj, dict), f"result is not an object: {obj!r}"
    res = Result(obj)
    res.rc, res.stderr_bytes = rc, err
    return res


def run_json(code, *opts, input=None, timeout=30, env=None, user=None, args=(),
             pass_fds=(), stdin=None):
    """`pycell run --json OPTS -c CODE ARGS...` -> Result."""
    argv = ["run", "--json", *opts, "-c", code, *args]
    t0 = time.monotonic()
    rc, out, err = pycell_run(argv, input=input, timeout=timeout, env=env, user=user,
                              pass_fds=pass_fds, stdin=stdin)
    res = parse_result(rc, out, err, argv)
    res.elapsed = time.monotonic() - t0
    return res


@pytest.fixture(scope="session")
def pycell_bin():
    return PYCELL


@pytest.fixture(name="pycell_run")
def pycell_run_fixture():
    return pycell_run


@pytest.fixture(name="run_json")
def run_json_fixture():
    return run_json


@pytest.fixture(name="jail_procs")
def jail_procs_fixture():
    return jail_procs


@pytest.fixture
def host_tmp():
    path = Path(tempfile.mkdtemp(prefix="pycell-test-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def policy_file(host_tmp):
    """policy_file(overrides, name="test") writes {"extends": "default",
    **overrides} as NAME.json in host_tmp (readable by any uid, so an
    unprivileged pycell can load it too); returns its path."""
    def write(overrides=None, name="test"):
        path = host_tmp / f"{name}.json"
        doc = {"extends": "default"}
        doc.update(overrides or {})
        path.write_text(json.dumps(doc, indent=2))
        path.chmod(0o644)
        return str(path)
    return write


@pytest.fixture
def reap_leftovers():
    """Kill whatever a test leaves reparented to us, even when it fails
    before its own check (use per module: pytestmark = usefixtures(...);
    not autouse, as it would kill session-scoped servers started in a test)."""
    before = set(children_of(os.getpid()))
    yield
    reap_orphans(before)


@pytest.fixture(scope="session")
def host_is_root():
    return HOST_IS_ROOT


@pytest.fixture
def require_root():
    if not HOST_IS_ROOT:
        pytest.skip("needs root: pycell maps the jail to a host uid range only as root")
