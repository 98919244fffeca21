"""Nothing outlives its supervisor (SECURITY.md, "Nothing outlives a run").

However `pycell run` or `pycell mcp` dies (SIGTERM, SIGKILL, the timeout
of a `timeout` wrapper), its jails die with it: the jail's init carries a
parent-death signal armed again after its last credential change (the
kernel clears it at every one, prctl(2)), and a zygote's jails die with the
zygote, which dies with the supervisor.  What the dead supervisor could not
remove, its run cgroups, the next supervisor sweeps before it serves, and
it kills whatever is still in them first (a live owner keeps a flock on
each of its run dirs: src/jail/cgroup.c, sweep_dead).

Every test here kills a supervisor for real, as the user running the suite
(root in CI: the case the parent-death signal used to miss)."""

import fcntl
import json
import os
import signal
import subprocess
import time

import pytest

from conftest import (HOST_IS_ROOT, PYCELL, children_of, descendants, proc_stat, pycell_env, pycell_run,
                      reap_orphans, start_pycell)
from test_limits import doctor, run_dir_parents, run_dirs_of
from test_serve import wait_for
from test_tools import Tools

START = [pytest.param(("--cold",), id="cold"), pytest.param(("--warm",), id="warm")]
RUN_START = [pytest.param((), id="cold"), pytest.param(("--warm",), id="warm")]   # pycell run: cold by default
SIGNALS = [pytest.param(signal.SIGKILL, id="SIGKILL"), pytest.param(signal.SIGTERM, id="SIGTERM")]


def alive(pids):
    """The pids that are still running (a zombie has ended)."""
    out = []
    for p in pids:
        st = proc_stat(p)
        if st and st[0] != "Z":
            out.append(p)
    return out


def comms(pids):
    """The names of the pids still running."""
    out = []
    for p in alive(pids):
        try:
            with open(f"/proc/{p}/comm") as f:
                out.append(f.read().strip())
        except OSError:
            pass
    return out


def wait_jail_python(sup, timeout=15.0):
    """Wait until a jailed python runs below sup (pid 2 of a pid namespace,
    named python3, on a CPU); returns every process below sup then."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        below = descendants(sup)
        for p in below:
            try:
                status = open(f"/proc/{p}/status").read()
            except OSError:
                continue
            nspid = [ln.split()[1:] for ln in status.splitlines() if ln.startswith("NSpid:")]
            if nspid and nspid[0][-1] == "2" and len(nspid[0]) > 1 and "python3" in status.split("\n")[0]:
                if proc_stat(p)[0] == "R":
                    return below
        time.sleep(0.01)
    raise AssertionError(f"no jailed python running below {sup} within {timeout}s")


def assert_all_gone_within(pids, what, limit=1.0):
    """Every pid has ended within `limit` seconds; reap what was reparented
    to us (the suite is a subreaper)."""
    deadline = time.monotonic() + limit
    while alive(pids) and time.monotonic() < deadline:
        time.sleep(0.01)
    left = alive(pids)
    for p in left:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert not left, f"{what}: {len(left)} process(es) outlived the supervisor by {limit}s: {left}"


def assert_next_start_sweeps(sup, before):
    """A new supervisor removes the dead one's run cgroups before it serves."""
    rc, out, _ = pycell_run(["run", "-c", "print('next')"])
    assert (rc, out) == (0, b"next\n")
    assert run_dirs_of({sup}) == [], "the next supervisor left the dead one's run cgroups"
    reap_orphans(before)


@pytest.mark.parametrize("sig", SIGNALS)
@pytest.mark.parametrize("start", RUN_START)
def test_a_killed_pycell_run_takes_its_jail_along(start, sig):
    before = set(children_of(os.getpid()))
    proc = start_pycell(["run", *start, "--timeout", "60", "-c", "while True: pass"],
                        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    below = wait_jail_python(proc.pid)
    proc.send_signal(sig)
    proc.wait(timeout=10)
    assert_all_gone_within(below, f"pycell run {start} killed by {sig.name}")
    assert_next_start_sweeps(proc.pid, before)


def test_the_timeout_wrapper_case_of_the_report():
    """`timeout 2 pycell run --timeout 3 -c 'while True: pass'`: the jailed
    python burned a core for ever once `timeout` had killed pycell."""
    before = set(children_of(os.getpid()))
    t0 = time.monotonic()
    wrapper = subprocess.Popen(["timeout", "1", PYCELL, "run",
                                "--timeout", "3", "-c", "while True: pass"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wrapper.wait(timeout=10)
    assert wrapper.returncode == 124
    sup_children = [p for p in children_of(os.getpid()) if p not in before]
    deadline = t0 + 2.0
    while time.monotonic() < deadline:
        left = [p for p, st in children_of(os.getpid()).items() if p not in before and st[0] != "Z"]
        if not left:
            break
        time.sleep(0.01)
    leftover = reap_orphans(before)
    assert leftover == [], f"left running after pycell was killed: {leftover} ({sup_children})"


def mcp_call(proc, rid, code):
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "pytest", "version": "1"}}}
    call = {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
            "params": {"name": "run_python", "arguments": {"code": code, "timeout_s": 25}}}
    for msg in (init, {"jsonrpc": "2.0", "method": "notifications/initialized"}, call):
        proc.stdin.write(json.dumps(msg).encode() + b"\n")
    proc.stdin.flush()
    assert json.loads(proc.stdout.readline())["id"] == 0


@pytest.mark.parametrize("start", START)
def test_a_killed_pycell_mcp_takes_every_jail_along(start):
    """SIGKILL to `pycell mcp` with a run in flight and, warm, the zygote and
    its ready jails: nothing of it runs one second later."""
    before = set(children_of(os.getpid()))
    proc = start_pycell(["mcp", *start], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE)
    if start == ("--warm",):
        # the two ready jails made ahead (one stays ready while the call runs)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and comms(descendants(proc.pid)).count("pycell-ready") < 4:
            time.sleep(0.01)
    mcp_call(proc, 1, "while True: pass")
    below = wait_jail_python(proc.pid)
    if start == ("--warm",):
        # the zygote, a running jail and the ready ones made ahead (the
        # running jail's init names itself pycell-init once told that its
        # cell came, which is after python has it)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and "pycell-init" not in comms(descendants(proc.pid)):
            time.sleep(0.005)
        below = descendants(proc.pid)
        names = set(comms(below))
        assert {"exe", "pycell-init", "pycell-ready"} <= names, names  # exe: the zygote
    proc.kill()
    proc.wait(timeout=10)
    assert_all_gone_within(below, f"pycell mcp {start} killed by SIGKILL")
    assert_next_start_sweeps(proc.pid, before)


@pytest.mark.parametrize("start", START)
def test_a_killed_pycell_mcp_with_a_tool_call_in_flight_takes_all_along(start, tmp_path):
    """SIGKILL to `pycell mcp` while a run waits in a tool call that its
    upstream server (a real stdio process) never answers: the jail, the
    zygote and the upstream server are all gone one second later."""
    tools = Tools(tmp_path)
    cfg = tools.config({"fake": tools.fake(timeout="60")})
    pol = tools.policy(["fake.hang"])
    before = set(children_of(os.getpid()))
    proc = start_pycell(["mcp", *start, "--config", cfg, "--policy", pol], stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    mcp_call(proc, 1, "import pycell\npycell.call_tool('fake.hang')")
    deadline = time.monotonic() + 15
    while '"hang"' not in " ".join(tools.lines("calls")) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert tools.lines("calls") == ['fake "hang"'], "the call never reached the server"
    below = descendants(proc.pid)
    server = int(tools.lines("starts")[0].split()[1])
    assert server in below
    proc.kill()
    proc.wait(timeout=10)
    assert_all_gone_within(below, f"pycell mcp {start} with a tool call in flight, killed by SIGKILL")
    assert_next_start_sweeps(proc.pid, before)


# ------------------------------------------------------------------ the sweep

def make_leftover(owner, parents):
    """Run cgroups named after a dead supervisor `owner`, with a process in
    them, as a supervisor that died without its parent-death signal (an
    older pycell, a kernel that lost it) would leave them."""
    victim = subprocess.Popen(["sleep", "600"])
    dirs = []
    for parent in parents:
        d = os.path.join(parent, f"pycell-{owner}-1")
        os.mkdir(d)
        dirs.append(d)
        with open(os.path.join(d, "cgroup.procs"), "w") as f:
            f.write(str(victim.pid))
    return victim, dirs


def remove_leftover(dirs, *procs):
    """Kill and reap what make_leftover started, then remove its dirs."""
    for p in procs:
        p.kill()
        p.wait()
    time.sleep(0.05)
    for d in dirs:
        if os.path.exists(d):
            os.rmdir(d)


def assert_served_and_left_alone(victim, dirs, what):
    rc, out, _ = pycell_run(["run", "-c", "print('served')"])
    assert (rc, out) == (0, b"served\n")
    assert victim.poll() is None, what
    assert [d for d in dirs if os.path.exists(d)] == dirs


def dead_pid():
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def need_root_cgroups():
    if not HOST_IS_ROOT:
        pytest.skip("making cgroups beside pycell's needs root")
    parents = run_dir_parents()
    if not parents:
        pytest.skip("this host gives pycell no cgroup to make run dirs in (pycell doctor)")
    return parents


def test_the_next_supervisor_kills_and_removes_a_dead_ones_leftovers():
    parents = need_root_cgroups()
    owner = dead_pid()
    victim, dirs = make_leftover(owner, parents)
    try:
        rc, out, _ = pycell_run(["run", "-c", "print('served')"])
        assert (rc, out) == (0, b"served\n")
        # killed before the run was served, and reaped by us (its parent)
        assert victim.wait(timeout=1) == -signal.SIGKILL
        assert [d for d in dirs if os.path.exists(d)] == []
    finally:
        remove_leftover(dirs, victim)


def test_the_next_supervisor_removes_a_dead_ones_shared_memory_cgroup():
    """On cgroup v2 the sessions' shared memory cgroup (sessions.shared_memory)
    holds their dirs: a dead supervisor's is swept with what is inside it."""
    need_root_cgroups()
    v2 = doctor()["cgroups"].get("v2_parent")
    if not v2:
        pytest.skip("this host gives pycell no cgroup v2 dir to make run dirs in (pycell doctor)")
    owner = dead_pid()
    victim = subprocess.Popen(["sleep", "600"])
    shared = os.path.join(v2, f"pycell-{owner}-1")
    inner = os.path.join(shared, f"pycell-{owner}-2")
    os.mkdir(shared)
    os.mkdir(inner)
    try:
        with open(os.path.join(inner, "cgroup.procs"), "w") as f:
            f.write(str(victim.pid))
        rc, out, _ = pycell_run(["run", "-c", "print('served')"])
        assert (rc, out) == (0, b"served\n")
        assert victim.wait(timeout=1) == -signal.SIGKILL
        assert not os.path.exists(shared)
    finally:
        remove_leftover([inner, shared], victim)


def test_a_run_cgroup_whose_owner_holds_its_lock_is_left_alone():
    """The owner's pid is not what tells: a live owner in another pid
    namespace has a pid that means nothing here.  Its flock does."""
    parents = need_root_cgroups()
    owner = dead_pid()
    victim, dirs = make_leftover(owner, parents)
    locks = []
    try:
        for d in dirs:
            v2 = os.path.exists(os.path.join(d, "cgroup.events"))
            fd = os.open(d if v2 else os.path.join(d, "tasks"), os.O_RDONLY)
            fcntl.flock(fd, fcntl.LOCK_EX)
            locks.append(fd)
        assert_served_and_left_alone(victim, dirs, "a locked run cgroup's process was killed")
    finally:
        for fd in locks:
            os.close(fd)
        remove_leftover(dirs, victim)


def test_a_run_cgroup_of_a_live_supervisor_without_a_lock_is_left_alone():
    """A pycell from before the owner's flock, still running, holds none:
    its run cgroups are known by its pid, which is alive."""
    parents = need_root_cgroups()
    owner = subprocess.Popen(["sleep", "600"])   # stands in for the older supervisor
    victim, dirs = make_leftover(owner.pid, parents)
    try:
        assert_served_and_left_alone(victim, dirs, "a live supervisor's run was killed")
    finally:
        remove_leftover(dirs, victim, owner)


def test_a_live_supervisor_in_another_pid_namespace_keeps_its_runs():
    """The real lock, not one the test takes: a `pycell run` in a pid
    namespace of its own, whose pid is one that is free here (so its run
    dirs are named after a pid the sweep finds gone), runs a jail that
    sleeps; a `pycell run` here sweeps meanwhile; the first run's python is
    not killed, because its supervisor holds the flock on every run dir of
    its own (v2: the dir, v1: its tasks file) from creation to removal.
    Then the next sweep here removes what that run left (its supervisor
    was not pid 1 of its namespace, whose end killed the helper that
    removes them)."""
    parents = need_root_cgroups()
    ns_pid = dead_pid()
    code = "import time\ntime.sleep(4)\nprint('alive')\n"
    # pid 1 of the namespace is sh; the pid it gives pycell is ns_last_pid + 1
    sh = f'echo {ns_pid - 1} > /proc/sys/kernel/ns_last_pid && "$@"'
    proc = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", sh, "sh", PYCELL, "run", "-c",
                             code], env=pycell_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        wait_for(lambda: len(run_dirs_of([ns_pid])) == len(parents), what="run cgroups named pycell-%d-N" % ns_pid)
        assert not alive([ns_pid])
        rc, out, _ = pycell_run(["run", "-c", "print('served')"])
        assert (rc, out) == (0, b"served\n")
        out, err = proc.communicate(timeout=30)
        assert (proc.returncode, out) == (0, b"alive\n"), err
        rc, out, _ = pycell_run(["run", "-c", "print('served')"])
        assert (rc, out) == (0, b"served\n")
        assert run_dirs_of([ns_pid]) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
