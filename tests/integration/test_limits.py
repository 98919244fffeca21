"""Resource limits of a run, through `pycell run --json`: memory (cgroup
OOM -> memory_limit), pids (fork bombs), cpu (a share of a core), the /tmp
tmpfs size, rlimits (file size, open files, core, nproc), the cgroup
device filter, and that no cgroup directory or process outlives a run.

Which mechanism enforces memory/pids/cpu depends on the host (`pycell
doctor`): cgroup v1 on the development machine, cgroup v2 in the
`make check-vm` VM.  A test whose limit nothing enforces here is skipped
with the reason; a result that claims enforcement but does not hold is a
failure."""

import concurrent.futures
import ctypes
import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from conftest import (EXIT_MEMORY_LIMIT, PYCELL, check_no_leftovers, children_of, descendants,
                      pycell_env, reap_orphans, run_json, start_pycell)

MiB = 1 << 20
CGROUP_ENFORCERS = ("cgroup1", "cgroup2")

MEMORY_BOMB = """
chunks = []
while True:
    chunks.append(bytearray(1 << 20))   # touched: bytearray zero-fills
"""

FORK_COUNT = """
import errno, os, time
n = 0
try:
    while True:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        n += 1
except OSError as e:
    print(n, errno.errorcode[e.errno])
"""

FORK_BOMB = """
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
"""

SPIN = """
import time
t = time.monotonic()
while time.monotonic() - t < 2.0:
    pass
"""

FILL_TMP = """
import errno
n = 0
with open("/tmp/fill", "wb", buffering=0) as f:
    try:
        while True:
            n += f.write(b"x" * 65536)
    except OSError as e:
        print(n, errno.errorcode[e.errno])
"""


_doctor = None


def doctor():
    """`pycell doctor --json` of this host (once per session)."""
    global _doctor
    if _doctor is None:
        p = subprocess.run([PYCELL, "doctor", "--json"], env=pycell_env(), capture_output=True,
                           timeout=60)
        _doctor = json.loads(p.stdout)
    return _doctor


def limit(res, name):
    found = [lim for lim in res["limits"] if lim["name"] == name]
    assert len(found) == 1, f"limit {name!r} reported {len(found)} times: {res['limits']}"
    return found[0]


def need_cgroup(res, name):
    """Skip unless a cgroup enforced the limit; when none did, the result
    must say so in its warnings (that part is checked, not skipped)."""
    by = limit(res, name)["enforced_by"]
    if by not in CGROUP_ENFORCERS:
        assert any("not enforced" in w for w in res["warnings"]), res["warnings"]
        pytest.skip(f"{name} is enforced by {by} on this host, not a cgroup "
                    f"(pycell doctor: {doctor()['cgroups']})")
    return by


def run_dir_parents():
    """Where run cgroups are made on this host, from pycell doctor."""
    cg = doctor()["cgroups"]
    dirs = {d for d in cg["dirs"].values() if d}
    if cg.get("v2_parent"):
        dirs.add(cg["v2_parent"])
    return sorted(dirs)


def run_dirs_of(pids):
    """Run cgroups named after any of the supervisor pids."""
    names = re.compile(r"pycell-(\d+)-\d+$")
    left = []
    for parent in run_dir_parents():
        for entry in os.listdir(parent):
            m = names.match(entry)
            if m and int(m.group(1)) in pids:
                left.append(os.path.join(parent, entry))
    return left


# ------------------------------------------------------------------- memory

# warm jails come from the zygote: it clones them into the v2 dir, and they
# enter their v1 cgroups themselves, as cold ones do
START = [pytest.param((), id="cold"), pytest.param(("--warm",), id="warm")]


def started_as_asked(res, start):
    assert [w for w in res["warnings"] if "warm start failed" in w] == [], start


@pytest.mark.parametrize("start", START)
def test_memory_bomb_ends_as_memory_limit(start):
    res = run_json(MEMORY_BOMB, *start, "--memory", "64M", timeout=60)
    started_as_asked(res, start)
    by = need_cgroup(res, "memory_bytes")
    assert limit(res, "memory_bytes")["value"] == 64 * MiB
    assert res["status"] == "memory_limit", res
    # the supervisor survived to report it and chose the exit status itself
    assert res.rc == EXIT_MEMORY_LIMIT
    assert res["signal"] == 9
    assert 48 * MiB <= res["memory_peak_bytes"] <= 64 * MiB, (by, res["memory_peak_bytes"])
    assert b"Traceback" not in res.stderr_bytes


def test_memory_bomb_in_a_child_is_seen_by_the_cgroup():
    """The OOM victim is a subprocess; python itself exits 0.  Only the
    cgroup's oom_kill counter can tell, and the status must say so."""
    code = ("import subprocess, sys\n"
            f"p = subprocess.run([sys.executable, '-c', {MEMORY_BOMB!r}])\n"
            "print(p.returncode)\n")
    res = run_json(code, "--memory", "64M", timeout=60)
    need_cgroup(res, "memory_bytes")
    assert res["stdout"] == "-9\n"
    assert (res["status"], res["exit_code"]) == ("memory_limit", 0)


def test_memory_below_the_limit_is_ok_and_measured():
    code = "b = bytearray(24 << 20)\nprint(len(b))"
    res = run_json(code, "--memory", "64M")
    need_cgroup(res, "memory_bytes")
    assert (res["status"], res["stdout"]) == ("ok", f"{24 * MiB}\n")
    assert 24 * MiB <= res["memory_peak_bytes"] < 64 * MiB


# --------------------------------------------------------------------- pids

@pytest.mark.parametrize("start", START)
def test_fork_bomb_is_capped_at_the_pids_limit(start):
    res = run_json(FORK_COUNT, *start, "--pids", "20", timeout=60)
    started_as_asked(res, start)
    need_cgroup(res, "pids")
    assert limit(res, "pids")["value"] == 20
    # 20 tasks: the jail's init, python and 18 children
    assert (res["status"], res["stdout"]) == ("ok", "18 EAGAIN\n"), res


def test_endless_fork_bomb_times_out_and_the_host_keeps_working():
    t0 = time.monotonic()
    res = run_json(FORK_BOMB, "--pids", "32", "--timeout", "3", timeout=60)
    need_cgroup(res, "pids")
    assert res["status"] == "timeout"
    assert time.monotonic() - t0 < 8, "killing the bomb took too long"
    # no process left (conftest checks after every run), and the host forks
    pid = os.fork()
    if pid == 0:
        os._exit(7)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 7
    after = run_json("print('still fine')")
    assert (after["status"], after["stdout"]) == ("ok", "still fine\n")


# ---------------------------------------------------------------------- cpu

def cpu_ratio(cores):
    res = run_json(SPIN, "--cpu", cores, timeout=60)
    need_cgroup(res, "cpu_millis")
    assert res["status"] == "ok", res
    assert limit(res, "cpu_millis")["value"] == int(float(cores) * 1000)
    return res["cpu_ms"] / res["duration_ms"], res


def test_cpu_half_a_core():
    # The control first: unthrottled, the spin must get (nearly) a whole
    # core, else this host is too contended to tell a limit from noise.
    for _ in range(3):
        full, res_full = cpu_ratio("1")
        if full >= 0.75:
            break
    else:
        pytest.skip(f"host CPU too contended to measure: an unthrottled spin got {full:.2f} of a core")
    ratio, res = cpu_ratio("0.5")
    assert 0.35 <= ratio <= 0.6, f"cpu_ms {res['cpu_ms']} over {res['duration_ms']} ms"


# ------------------------------------------------------------- tmpfs, rlimits

def test_tmp_fill_stops_at_its_size(policy_file):
    res = run_json(FILL_TMP, "--policy", policy_file({"limits": {"tmp": "8M"}}))
    assert limit(res, "tmp_bytes") == {"name": "tmp_bytes", "value": 8 * MiB, "enforced_by": "tmpfs"}
    assert (res["status"], res["stdout"]) == ("ok", f"{8 * MiB} ENOSPC\n"), res["stderr"]


def test_file_size_rlimit(policy_file):
    res = run_json(FILL_TMP, "--policy", policy_file({"limits": {"tmp": "8M", "file_size": "1M"}}))
    assert limit(res, "file_bytes") == {"name": "file_bytes", "value": MiB, "enforced_by": "rlimit"}
    assert (res["status"], res["stdout"]) == ("ok", f"{MiB} EFBIG\n"), res["stderr"]


def test_rlimits_in_the_jail(policy_file):
    code = """
import errno, os, resource
r = resource
print(r.getrlimit(r.RLIMIT_CORE), r.getrlimit(r.RLIMIT_NOFILE), r.getrlimit(r.RLIMIT_AS),
      r.getrlimit(r.RLIMIT_NPROC))
fds = []
try:
    while True:
        fds.append(os.open("/dev/null", os.O_RDONLY))
except OSError as e:
    print(max(fds), errno.errorcode[e.errno])
"""
    res = run_json(code, "--pids", "24", "--policy", policy_file({"limits": {"open_files": 32}}))
    assert limit(res, "open_files") == {"name": "open_files", "value": 32, "enforced_by": "rlimit"}
    inf = -1
    first, second = res["stdout"].splitlines()
    # RLIMIT_NPROC is a per-run backstop only where the kernel counts it per
    # user namespace (5.14+); never RLIMIT_AS
    release = tuple(int(x) for x in os.uname().release.split(".")[:2])
    nproc = (24, 24) if release >= (5, 14) else (inf, inf)
    assert first == f"(0, 0) (32, 32) ({inf}, {inf}) {nproc}"
    assert second == "31 EMFILE"


# ------------------------------------------------------------ device filter

BPF_PROG_QUERY = 16
BPF_CGROUP_DEVICE = 6


def bpf_device_progs(cgroup_dir):
    """How many BPF_CGROUP_DEVICE programs are attached to a cgroup2 dir."""
    libc = ctypes.CDLL(None, use_errno=True)
    attr = (ctypes.c_uint8 * 64)()
    fd = os.open(cgroup_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        ctypes.c_uint32.from_buffer(attr, 0).value = fd
        ctypes.c_uint32.from_buffer(attr, 4).value = BPF_CGROUP_DEVICE
        if libc.syscall(321, BPF_PROG_QUERY, attr, 64) != 0:
            raise OSError(ctypes.get_errno(), "bpf(BPF_PROG_QUERY)")
        return ctypes.c_uint32.from_buffer(attr, 24).value
    finally:
        os.close(fd)


def run_waiting_on_stdin(start, look, what, env=None, stderr=None):
    """Start `pycell run` with a program that waits on its stdin, poll the
    processes below it until look(pid) returns something (an OSError is
    a process gone meanwhile), then let the program end.  What look
    returned, once the run has ended with status 0 (its stderr appended
    to the list stderr, if given)."""
    before = set(children_of(os.getpid()))
    proc = start_pycell(["run", *start, "-c", "import sys; sys.stdin.read()"], env=env, stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        found = None
        while time.monotonic() < deadline and found is None:
            for p in descendants(proc.pid):
                try:
                    found = look(p)
                except OSError:
                    continue
                if found is not None:
                    break
            time.sleep(0.01)
        assert found is not None, what
    finally:
        out, err = proc.communicate(b"", timeout=30)
        reap_orphans(before)
    assert proc.returncode == 0, err
    if stderr is not None:
        stderr.append(err)
    return found


@pytest.mark.parametrize("start", START)
def test_device_filter_is_attached_to_the_run(start):
    if os.geteuid() != 0:
        pytest.skip("querying cgroup BPF programs needs root")
    cg = doctor()["cgroups"]
    if not cg["device_filter"]:
        pytest.skip(f"no cgroup device filter on this host: {doctor()['checks']}")

    def run_dir(p):
        lines = [x for x in Path(f"/proc/{p}/cgroup").read_text().splitlines() if x.startswith("0::")]
        if lines and re.search(r"/pycell-\d+-\d+$", lines[0]):
            path = cg["v2_mount"] + lines[0][3:]
            # while the jail runs: attached to the run's own cgroup only
            assert bpf_device_progs(path) == 1
            assert bpf_device_progs(cg["v2_parent"]) == 0
            return path
        return None
    path = run_waiting_on_stdin(start, run_dir, "the jail never showed up in a run cgroup2 dir")
    deadline = time.monotonic() + 2   # removed by the child that finishes the teardown
    while os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not os.path.exists(path)


def python_cgroups(p):
    """/proc/p/cgroup's lines if p is a python3, else None."""
    if Path(f"/proc/{p}/comm").read_text().strip() != "python3":
        return None
    return Path(f"/proc/{p}/cgroup").read_text().splitlines()


@pytest.mark.parametrize("start", START)
def test_the_program_runs_in_every_run_cgroup(start):
    """Seen from the host, the jail's python is in the run's own cgroup in
    every hierarchy pycell limits with, and in its cgroup2 dir: a cold
    `pycell run` makes its v1 cgroups while the jail builds its root, and
    the jail enters them before its program starts (jail.c,
    step_cgroups_later); a warm one is made in them.  A python outside them
    would be limited by nothing."""
    if os.geteuid() != 0:
        pytest.skip("run cgroups are made as root on this host")
    cg = doctor()["cgroups"]
    used = {cg["dirs"][c] for c in ("memory", "pids", "cpu") if cg["limits"][c] == "cgroup1"}
    if not used and not cg["v2_parent"]:
        pytest.skip(f"no cgroup for runs on this host: {cg}")
    points = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()
              if line.split()[line.split().index("-") + 1] == "cgroup"]
    lines = run_waiting_on_stdin(start, python_cgroups, "the jail's python never showed up")
    # each v1 hierarchy's line, as a host path (mount point + path)
    seen = set()
    for line in lines:
        _, ctrls, path = line.split(":", 2)
        for point in points:
            if ctrls and set(ctrls.split(",")) == set(Path(point).name.split(",")):
                seen.add(str(Path(point) / path.lstrip("/")))
    name = None
    for d in used:
        inside = [x for x in seen if x.startswith(d + "/pycell-")]
        assert len(inside) == 1, (d, lines)
        name = Path(inside[0]).name
        assert re.fullmatch(r"pycell-\d+-\d+", name)
    if cg["v2_parent"]:
        [v2] = [line[3:] for line in lines if line.startswith("0::")]
        assert re.search(r"/pycell-\d+-\d+$", v2), lines
        assert name is None or v2.endswith("/" + name)   # one name for all of the run's dirs


# ------------------------------------------------------- nothing left behind

def test_many_runs_leave_no_cgroup_or_process():
    """200 runs, 4 at a time, mixing clean exits, fork bombs and memory bombs;
    afterwards no run cgroup of any of those supervisors exists and no
    process of theirs is alive.  In the check-vm VM (PYCELL_TEST_VM), 60
    runs of the same mix: its emulated CPU took 94 s for 200 there, where
    the cgroup v2 teardown it checks is the same at every run."""
    runs = 60 if os.environ.get("PYCELL_TEST_VM") else 200
    jobs = [
        (["run", "--json", "-c", "pass"], "ok"),
        (["run", "--json", "--pids", "12", "-c", FORK_COUNT], "ok"),
        (["run", "--json", "--memory", "40M", "-c", MEMORY_BOMB], None),
    ]
    before = set(children_of(os.getpid()))
    pids = set()

    def one(i):
        args, want = jobs[i % len(jobs)]
        proc = start_pycell(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
        pids.add(proc.pid)
        out, err = proc.communicate(timeout=120)
        res = json.loads(out)
        return i, want, res, err

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        for i, want, res, err in pool.map(one, range(runs)):
            if want is None:   # the memory bomb: memory_limit where a cgroup enforces it
                enforced = limit(res, "memory_bytes")["enforced_by"] in CGROUP_ENFORCERS
                want = "memory_limit" if enforced else res["status"]
            assert res["status"] == want, (i, res["status"], err[-500:])
    assert len(pids) == runs
    # `pycell run` returns once the result is out; a child of it finishes
    # the teardown (cmd_run.c, teardown_later) within the grace
    check_no_leftovers(before, f"{runs} runs")
    assert run_dirs_of(pids) == []


# ------------------------------------------------------ cgroup v2 delegation

def own_cgroup2():
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        if line.startswith("0::"):
            return line[3:]
    return None


def delegated_cgroup():
    """A child of our own cgroup2 for a test's pycell, with memory, pids and
    cpu available to it; skips where there is none to make (only the
    check-vm VM enables the controllers for our cgroup's children)."""
    mount = doctor()["cgroups"]["v2_mount"]
    own = own_cgroup2()
    if os.geteuid() != 0 or not mount or own is None:
        pytest.skip("needs root and a cgroup2 mount")
    own_dir = Path(mount + own)
    enabled = set((own_dir / "cgroup.subtree_control").read_text().split())
    if not {"memory", "pids", "cpu"} <= enabled:
        pytest.skip(f"{own_dir}/cgroup.subtree_control enables {sorted(enabled)}, not memory pids cpu "
                    "(cgroup v2 delegation is tested in the make check-vm VM)")
    deleg = own_dir / f"pycell-test-deleg-{os.getpid()}"
    deleg.mkdir()
    return deleg


def bomb_in(deleg, enter):
    """pycell run's memory bomb from a child moved into DELEG by ENTER:
    enforced by cgroup2, memory_limit; once pycell run has exited, its
    teardown child (pycell-teardown, in the supervisor leaf) removes the
    run's cgroup and exits too, leaving the leaf alone and empty."""
    try:
        proc = subprocess.Popen([PYCELL, "run", "--json", "--memory", "48M", "-c", MEMORY_BOMB],
                                env=pycell_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, preexec_fn=enter)
        out, err = proc.communicate(timeout=120)
        res = json.loads(out)
        assert limit(res, "memory_bytes")["enforced_by"] == "cgroup2", (res, err)
        assert res["status"] == "memory_limit"
        deadline = time.monotonic() + 5
        while True:
            children = [p.name for p in deleg.iterdir() if p.is_dir()]
            procs = (deleg / "pycell-supervisor" / "cgroup.procs").read_text()
            if (children, procs) == (["pycell-supervisor"], "") or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        assert children == ["pycell-supervisor"], children
        assert procs == ""
        assert {"memory", "pids", "cpu"} <= set((deleg / "cgroup.subtree_control").read_text().split())
    finally:
        for sub in sorted(deleg.glob("*/"), reverse=True):
            if sub.is_dir():
                sub.rmdir()
        deleg.rmdir()


def test_v2_delegated_cgroup_gets_a_supervisor_leaf():
    """pycell alone in a cgroup whose controllers it may hand on (what
    systemd Delegate=yes gives a service): it moves itself into
    <cgroup>/pycell-supervisor, enables memory/pids/cpu in <cgroup> and puts
    each run beside it.  Runs only where our own cgroup2 already enables the
    controllers for its children (the check-vm VM)."""
    deleg = delegated_cgroup()

    def enter():
        (deleg / "cgroup.procs").write_text("0")
    bomb_in(deleg, enter)


CLONE_NEWNS, CLONE_NEWCGROUP = 0x00020000, 0x02000000
MS_REC, MS_PRIVATE, MNT_DETACH = 0x4000, 0x40000, 2


def test_v2_delegated_cgroup_seen_from_a_cgroup_namespace():
    """The same cgroup as a container on cgroup v2 sees its own (podman's,
    Docker's and Kubernetes' default there): a cgroup namespace rooted at
    it and a cgroup2 mount of that namespace, so /proc/self/cgroup says
    "0::/".  That "/" is not the host's root cgroup (it has cgroup.type,
    which only a real root lacks): pycell takes it as the delegated cgroup
    it is, and the memory bomb ends as memory_limit.  (Before: "pycell runs
    in the root cgroup", nothing enforced.)"""
    deleg = delegated_cgroup()
    libc = ctypes.CDLL(None, use_errno=True)

    def enter():
        (deleg / "cgroup.procs").write_text("0")
        for ok in (libc.unshare(CLONE_NEWCGROUP | CLONE_NEWNS) == 0,
                   libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) == 0,
                   libc.umount2(b"/sys/fs/cgroup", MNT_DETACH) == 0,
                   libc.mount(b"cgroup2", b"/sys/fs/cgroup", b"cgroup2", 0, None) == 0):
            if not ok:
                raise OSError(ctypes.get_errno(), "the cgroup namespace and its cgroup2 mount")
        if Path("/proc/self/cgroup").read_text() != "0::/\n":
            raise OSError(0, "not at the root of a cgroup namespace")
    bomb_in(deleg, enter)
