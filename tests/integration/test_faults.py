"""Faults (issue 13): a setup step that fails, too few file descriptors, a
full disk under the audit log.  Each ends in a clear result or error for the
call it hit, nothing leaks (process, cgroup, fd), and the server goes on
serving the others.

The failing setup steps are fault sites built in by ./configure
--enable-fault-injection (src/base/fault.h; CI's sanitizer and coverage
builds), driven by PYCELL_FAULT; without them those tests skip and say so.
The others need no help: the limit and the full disk are real.  A killed
supervisor, a dead zygote and a crashed or hung upstream are in
test_lifetime.py, test_warm.py and test_tools.py."""

import json
import os
import re
import signal
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from conftest import HOST_IS_ROOT, PYCELL, pycell_env, pycell_run, run_json
from test_limits import doctor as limits_doctor, python_cgroups, run_dir_parents, run_dirs_of, \
    run_waiting_on_stdin
from test_mcp_raw import Server
from test_tools import Tools
from test_preload import DATA, huge_pages_refused_here, need_data_stack, zygote_memory
from test_warm import children, comm, zygote_of

BUILD_CONFIG = Path(PYCELL).resolve().parent / "config.h"
FAULTS = BUILD_CONFIG.exists() and "#define PYCELL_FAULT_INJECTION 1" in BUILD_CONFIG.read_text()
needs_faults = pytest.mark.skipif(
    not FAULTS, reason="pycell was built without --enable-fault-injection (CI's sanitizer and "
                       "coverage stages build it with)")

START = [pytest.param(("--cold",), id="cold"), pytest.param(("--warm",), id="warm")]   # servers


def call(srv, rid, code, timeout=30):
    res = srv.request(rid, "tools/call", {"name": "run_python", "arguments": {"code": code}},
                      timeout=timeout)
    assert res["id"] == rid and "result" in res, res
    return res["result"]


def fds_of(pid):
    return sorted(os.listdir(f"/proc/{pid}/fd"))


def settles(what, want, timeout=3.0):
    """what() == want within timeout: a run's cgroup dirs go (and the fds
    watching them close) when its last processes have left, which the
    loop waits for after the answer is sent (src/jail/cgroup.c)."""
    deadline = time.monotonic() + timeout
    while True:
        got = what()
        if got == want or time.monotonic() > deadline:
            assert got == want
            return
        time.sleep(0.02)


def no_run_dirs(srv):
    settles(lambda: run_dirs_of({srv.proc.pid}), [])


def ready_jail_dir(d):
    """A run dir that holds a jail made ahead: processes, each one a
    pycell-ready (a warm server keeps such jails, each in its own dirs)."""
    try:
        with open(os.path.join(d, "cgroup.procs")) as f:
            pids = f.read().split()
        names = set()
        for p in pids:
            with open(f"/proc/{p}/comm") as f:
                names.add(f.read().strip())
    except OSError:
        return False
    return bool(pids) and names == {"pycell-ready"}


def no_run_dirs_but_ready_jails(srv):
    settles(lambda: [d for d in run_dirs_of({srv.proc.pid}) if not ready_jail_dir(d)], [])


def fault_env(fault):
    """A server's environment with PYCELL_FAULT: and no cache, so that no
    font list is built at its start (src/run/fonts.c): that build is a
    jail of its own, which would take the count's first clone, id maps
    and cgroup dirs whenever the list is missing or stale (a fresh
    machine, a build whose runtime moved), and the fault would hit it
    instead of the run the test counts on."""
    return {"PYCELL_FAULT": fault, "PYCELL_CACHE_DIR": "none"}


def cgroup_sites():
    """How many run cgroup directories one run makes here (the "cgroup"
    fault site is reached once for each)."""
    return len(run_dir_parents())


# ------------------------------------------------------------ injected faults

def fault_cases():
    """(PYCELL_FAULT, step, message) failing the second run: the first one
    shows what a served run leaves open."""
    cases = [("clone:2", "clone3", "clone3 into new namespaces: Resource temporarily unavailable"),
             ("idmap:2", "idmap", "Operation not permitted (injected fault)")]
    n = cgroup_sites() if FAULTS else 0
    if n:
        cases.append((f"cgroup:{n + 1}", "cgroup", "No space left on device (injected fault)"))
    if n > 1:
        # the last of the run's dirs: the ones made before it must go too
        cases.append((f"cgroup:{2 * n}", "cgroup", "No space left on device (injected fault)"))
    return cases


@needs_faults
@pytest.mark.parametrize("fault,step,message", fault_cases())
def test_a_setup_step_that_fails_fails_its_run_alone(fault, step, message):
    """Cold, through pycell mcp: the second run's step fails (setup_failed,
    the step and why in the message), nothing of it is left (no cgroup, no
    fd, no process), and the next runs of the same server are served."""
    srv = Server("--cold", env=fault_env(fault))
    try:
        srv.initialize()
        assert call(srv, 1, "print(1)")["structuredContent"]["stdout"] == "1\n"
        no_run_dirs(srv)
        fds = fds_of(srv.proc.pid)
        second = call(srv, 2, "print('second')")
        sc = second["structuredContent"]
        assert second["isError"] is True
        assert sc["status"] == "setup_failed", sc
        assert sc["setup_error"]["step"] == step and message in sc["setup_error"]["message"], sc
        no_run_dirs(srv)
        settles(lambda: fds_of(srv.proc.pid), fds)
        for rid in (3, 4):
            res = call(srv, rid, f"print({rid})")
            assert res["structuredContent"]["status"] == "ok", res
            assert res["structuredContent"]["stdout"] == f"{rid}\n"
        no_run_dirs(srv)
        settles(lambda: fds_of(srv.proc.pid), fds)
    finally:
        srv_close(srv)


@needs_faults
@pytest.mark.parametrize("fault", ["clone", "idmap"])
def test_a_warm_server_whose_every_jail_fails_answers_every_call(fault):
    """Warm, the step failing every time (in the zygote too, for clone): the
    ready pool cannot fill, the warm start falls back to cold, which fails
    the same way; every call is answered setup_failed, and the server still
    answers pings and exits cleanly."""
    srv = Server("--warm", env=fault_env(fault))
    try:
        srv.initialize()
        for rid in (1, 2, 3):
            res = call(srv, rid, "print('never')")
            sc = res["structuredContent"]
            assert (res["isError"], sc["status"], sc["stdout"]) == (True, "setup_failed", ""), sc
            assert sc["setup_error"]["errno_name"] in ("EPERM", "EAGAIN"), sc
        srv.assert_serving()
        no_run_dirs(srv)
    finally:
        srv_close(srv)
    assert b"could not make a ready jail" in srv.stderr


@needs_faults
def test_a_zygote_refused_its_small_init_makes_jails_as_before():
    """clone(2) into namespaces refused (an injected EPERM here; a container
    runtime's profile made before pycell-init existed, in life), the zygote
    says so once and clones its jails as a cold run's are cloned: the run is
    warm still, its init a copy of the zygote (megabytes resident, not
    pycell-init's few hundred KiB), and no descriptor of pycell-init reaches
    the program."""
    code = textwrap.dedent("""
        import os
        f = dict(l.split(":", 1) for l in open("/proc/1/status").read().splitlines())
        print(int(f["VmRSS"].split()[0]) > 4096, sorted(os.listdir("/proc/self/fd")))
    """)
    res = run_json(code, "--warm", env=pycell_env({"PYCELL_FAULT": "small_clone"}))
    assert (res["status"], res["stdout"]) == ("ok", "True ['0', '1', '2', '3', '4']\n"), res
    assert not [w for w in res["warnings"] if "cold" in w], res["warnings"]
    assert (b"clone into new namespaces (injected fault): Operation not permitted; a warm jail's init is a copy "
            b"of the zygote from now on") in res.stderr_bytes, \
        res.stderr_bytes


@needs_faults
def test_a_zygote_refused_clone3_moves_its_small_init_into_the_run_cgroup():
    """clone3 refused (an injected ENOSYS here; Docker's default profile
    in life), a warm jail's small init is cloned by clone(2) and moved
    into the run's cgroup2 directory by a write, where clone3 makes it
    there: its python is in the run's directory either way (the path
    without the fault: test_limits.py's every_run_cgroup, warm)."""
    if not HOST_IS_ROOT or not limits_doctor()["cgroups"]["v2_parent"]:
        pytest.skip("no cgroup2 directory for runs on this host (made as root)")
    err = []
    lines = run_waiting_on_stdin(("--warm", "--debug"), python_cgroups, "the jail's python never showed up",
                                 env={"PYCELL_FAULT": "small_clone3"}, stderr=err)
    [v2] = [line[3:] for line in lines if line.startswith("0::")]
    assert re.search(r"/pycell-\d+-\d+$", v2), lines
    assert (b"clone3 of a warm jail's init: Function not implemented; clone, and a move into its "
            b"cgroup, from now on") in err[0], err


@needs_faults
def test_a_zygote_refused_huge_pages_keeps_its_memory_in_small_ones(policy_file):
    """MADV_COLLAPSE refused (an injected EINVAL; a kernel before 6.1, or
    huge pages off, in life): the zygote says so and serves as before, its
    memory in 4 KiB pages.  Allowed, only spans at least half in memory
    are collapsed: the holes it fills are at most half of what it moved
    (the small init's stack, 8 MiB hardly touched, is not among them)."""
    need_data_stack()
    pol = policy_file({"python": {"preload": list(DATA)}})
    anon0, huge0, moved0, err = zygote_memory(pol, {"PYCELL_FAULT": "huge_pages"})
    assert moved0 == 0
    assert "warm starts: huge pages refused for the zygote's memory (Invalid argument): it stays in 4 KiB pages" in err
    why = huge_pages_refused_here()
    if why:
        pytest.skip(why)
    anon1, huge1, moved1, _ = zygote_memory(pol)
    assert huge1 > huge0 and moved1 >= 8, (huge0, huge1, moved1)
    assert anon1 - anon0 <= moved1 * 1024 // 2 + 1024, (anon0, anon1, moved1)


@needs_faults
def test_a_warm_server_recovers_when_the_fault_passes():
    """The first ready jail cannot be made: it is made again, and every
    call succeeds warm."""
    srv = Server("--warm", env=fault_env("idmap:1"))
    try:
        srv.initialize()
        # the pool asks for its two jails as the server starts, and the
        # zygote clones them in turn, the loop releasing them as they
        # come: once every jail below the zygote is a ready one, its
        # python waiting, the first (the first id maps written) has
        # failed.  One, or two: the pool asks again a second after the
        # failure, which may come before the second is ready (a loaded
        # machine, a sanitizer build)
        z = zygote_of(srv.proc.pid)
        deadline = time.monotonic() + 20
        while True:
            tree = {k: [comm(g) for g in children(k)] for k in children(z)}
            if tree and all(g == ["pycell-ready"] for g in tree.values()):
                break
            if time.monotonic() > deadline:
                srv.kill()
                srv._stderr_reader.join(timeout=5)
                raise AssertionError(f"the zygote's children, with theirs: "
                                     f"{ {k: (comm(k), g) for k, g in tree.items()} }; "
                                     f"the server said: {srv.stderr[-3000:]!r}")
            time.sleep(0.01)
        for rid in (1, 2, 3, 4):
            res = call(srv, rid, f"print({rid})")
            assert res["structuredContent"]["status"] == "ok", res
            assert res["structuredContent"]["stdout"] == f"{rid}\n"
        # the runs' dirs are gone; the pool's next jails, if the second
        # after the failure has passed and they were asked for, have theirs
        no_run_dirs_but_ready_jails(srv)
    finally:
        srv_close(srv)
    assert b"pool: could not make a ready jail: idmap: " in srv.stderr
    assert b"injected fault" in srv.stderr


@needs_faults
def test_a_zygote_that_cannot_be_started_again_kills_nothing_else(tmp_path):
    """The zygote dies, and the first try to start another fails before
    its fork (an fd limit, say): calls fall back to cold starts, and the
    next try, a second later, starts one.  A failed start leaves no pid:
    the next try killed "pid 0", the server's own process group (with the
    agent that started it, and here the whole test run)."""
    conf = tmp_path / "pycell.conf"
    conf.write_text(json.dumps({"warm": {"enabled": True, "ready": 0}}))
    # a session of its own: the old code kills only itself, not pytest
    srv = Server("--config", str(conf), env=fault_env("zygote:2"), preexec=os.setsid)
    try:
        srv.initialize()
        assert call(srv, 1, "6 * 7")["structuredContent"]["return_value"] == 42
        z = zygote_of(srv.proc.pid)
        os.kill(z, signal.SIGKILL)
        warnings = []
        for rid in (2, 3):   # the death is seen; then the start that fails
            time.sleep(1.1)  # a zygote is started at most once a second
            sc = call(srv, rid, "6 * 7")["structuredContent"]
            assert (sc["status"], sc["return_value"]) == ("ok", 42), sc
            warnings += [w for w in sc["warnings"] if w.startswith("warm start failed, started cold: warm: ")]
        assert any("injected fault" in w for w in warnings), warnings
        time.sleep(1.1)
        sc = call(srv, 4, "6 * 7")["structuredContent"]
        assert (sc["status"], sc["return_value"], sc["warnings"]) == ("ok", 42, []), sc
        assert srv.proc.poll() is None
        assert zygote_of(srv.proc.pid) != z
    finally:
        srv_close(srv)


@needs_faults
@pytest.mark.parametrize("nth", [1, 2, 3])
def test_a_jail_whose_descriptors_did_not_fit_ends_alone(nth):
    """The zygote's nth reply with a jail comes to a supervisor whose fd
    table is full (an injected MSG_CTRUNC: the kernel drops the jail's
    descriptors): that jail ends, alone, and the zygote serves on.  The
    zygote used to hold its copy of the supervisor's end of the jail's
    sync socket until the jail's small init let go of its memory, and that
    init waits on the socket for its release: each waited for the other,
    until a call's request to the zygote timed out 10 s later and the
    zygote was killed (the run CI saw take 10 s), or for ever when no call
    asked the zygote itself."""
    srv = Server("--warm", env=fault_env(f"warm_reply:{nth}"))
    try:
        srv.initialize()
        z = zygote_of(srv.proc.pid)
        warnings = []
        for rid in (1, 2, 3, 4):
            sc = call(srv, rid, f"print({rid})")["structuredContent"]
            assert (sc["status"], sc["stdout"]) == ("ok", f"{rid}\n"), sc
            warnings += sc["warnings"]
        # the zygote's children are ready jails only: the failed one ended
        settles(lambda: sorted({comm(k) for k in children(z)}), ["pycell-ready"], timeout=10)
        assert zygote_of(srv.proc.pid) == z
    finally:
        srv_close(srv)
    said = srv.stderr + "\n".join(warnings).encode()
    assert b"receive the jail's descriptors: Too many open files" in said, said
    assert b"stopped answering" not in said, said


def srv_close(srv):
    if srv.proc.poll() is None:
        srv.close()


# ------------------------------------------------------------ too few fds

@pytest.mark.parametrize("start", START)
def test_a_server_out_of_file_descriptors_fails_runs_clearly_and_recovers(start):
    """RLIMIT_NOFILE so low that one run fits and four at once do not:
    each call is answered, a run that could not get its fds says so
    (EMFILE, "Too many open files"), and a run after them is served.  The
    limit is the lowest, found by trying, that lets one run through: no
    count of the server's own descriptors is written in here."""
    import resource
    srv = None
    for limit in range(24, 80):
        srv = Server(*start, "--max-runs", "4", preexec=lambda n=limit: resource.setrlimit(
            resource.RLIMIT_NOFILE, (n, n)))
        try:
            srv.initialize()
            one = call(srv, 1, "print(1)")
            if "structuredContent" in one and one["structuredContent"]["status"] == "ok":
                break
        except (AssertionError, OSError, ValueError, KeyError):
            pass
        srv_close(srv)
        srv = None
    assert srv, "no descriptor limit from 24 to 80 let one run through"
    try:
        for rid in range(10, 16):
            srv.send({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                      "params": {"name": "run_python",
                                 "arguments": {"code": "import time; time.sleep(0.5); print('slept')"}}})
        got = {}
        while len(got) < 6:
            msg = srv.recv(timeout=60)
            if "id" in msg:
                got[msg["id"]] = msg["result"]["structuredContent"]
        statuses = sorted(sc["status"] for sc in got.values())
        assert set(statuses) <= {"ok", "setup_failed"}, got
        assert "setup_failed" in statuses, "the limit did not bite: the test proves nothing"
        for sc in got.values():
            if sc["status"] == "ok":
                assert sc["stdout"] == "slept\n"
            else:
                assert sc["setup_error"]["errno_name"] == "EMFILE", sc
        # a run after them is served: at once, or once the jails just
        # answered (whose teardown ends on the loop after their answers,
        # src/run/run.c) have given their descriptors back
        deadline, rid = time.monotonic() + 10, 99
        while True:
            last = call(srv, rid, "print('after')")["structuredContent"]
            if last["status"] == "ok" or time.monotonic() > deadline:
                break
            assert last["setup_error"]["errno_name"] == "EMFILE", last
            rid += 1
            time.sleep(0.05)
        assert last["stdout"] == "after\n", last
        no_run_dirs(srv)
    finally:
        srv_close(srv)


# ------------------------------------------------------------ a full disk

@pytest.mark.skipif(not HOST_IS_ROOT, reason="mounting a small tmpfs needs root (in a mount "
                                              "namespace of the test's own)")
def test_a_full_disk_under_the_audit_log_costs_no_call(tmp_path):
    """The audit log on a tmpfs that is full: the run and its tool calls go
    on as usual, and pycell says once that the audit log cannot be
    written."""
    tools = Tools(tmp_path)
    full = tmp_path / "full"
    full.mkdir()
    tools.audit = full / "audit.log"
    cfg = tools.config({"fake": tools.fake()})
    pol = tools.policy(["fake.echo"])
    code = textwrap.dedent("""
        import pycell
        for i in range(3):
            print(pycell.call_tool("fake.echo", {"text": f"hi {i}"})["echo"])
    """)
    script = (f"mount -t tmpfs -o size=8k tmpfs {full} && "
              f"dd if=/dev/zero of={full}/filler bs=1k count=64 2>/dev/null; "
              f"exec {PYCELL} run --json --config {cfg} --policy {pol} -c \"$CODE\"")
    proc = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                          env={**os.environ, "PYCELL_DATADIR": os.environ.get("PYCELL_DATADIR", ""),
                               "CODE": code},
                          capture_output=True, timeout=60)
    res = json.loads(proc.stdout)
    assert (proc.returncode, res["status"], res["stdout"]) == (0, "ok", "hi 0\nhi 1\nhi 2\n"), proc.stderr
    warnings = re.findall(rb"audit log [^\n]*: write failed: No space left on device", proc.stderr)
    assert len(warnings) == 1, proc.stderr
    assert not tools.audit.exists() or tools.audit.stat().st_size == 0
