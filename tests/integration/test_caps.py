"""Privileges (issue 3): the jail holds no capability in any set, runs with
no_new_privs under a seccomp filter, and cannot get privileges back; the
supervisor is not dumpable and keeps only the capabilities it uses."""

import json
import os
import subprocess
import textwrap
import uuid
from pathlib import Path

import pytest

from conftest import (DATADIR, HOST_IS_ROOT, PYCELL, check_no_leftovers, children_of, kill_tree,
                      run_json, start_pycell, wait_for_jail_python)

ZERO = "0000000000000000"
CAP_FIELDS = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")

# What caps_harden_supervisor keeps when pycell runs as root (src/jail/caps.c).
CAP_DAC_OVERRIDE, CAP_KILL, CAP_SETGID, CAP_SETUID, CAP_SETPCAP = 1, 5, 6, 7, 8
CAP_NET_BIND_SERVICE, CAP_NET_ADMIN, CAP_SYS_ADMIN, CAP_BPF = 10, 12, 21, 39
SUPERVISOR_KEEP = sum(1 << c for c in (CAP_DAC_OVERRIDE, CAP_KILL, CAP_SETGID, CAP_SETUID,
                                        CAP_SYS_ADMIN))
# permitted (and in the bounding set), effective only while an egress run's
# network is set up: its veth pair and its DNS responder's port 53
SUPERVISOR_PERMITTED = SUPERVISOR_KEEP | (1 << CAP_NET_ADMIN) | (1 << CAP_NET_BIND_SERVICE)

STATUS = """
    import json
    def status(path):
        st = dict(l.split(":", 1) for l in open(path).read().splitlines())
        return {k: st[k].strip() for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb",
                                           "NoNewPrivs", "Seccomp", "Uid", "Gid")}
"""


def probe(code, *opts):
    res = run_json(textwrap.dedent(STATUS) + textwrap.dedent(code), *opts)
    assert res["status"] == "ok", f"probe failed: {res!r} stderr {res.stderr_bytes!r}"
    return json.loads(res["stdout"])


def confined(st):
    return ({k: st[k] for k in CAP_FIELDS} == {k: ZERO for k in CAP_FIELDS}
            and st["NoNewPrivs"] == "1" and st["Seccomp"] == "2")


def test_program_has_no_capabilities_and_is_filtered():
    st = probe('print(json.dumps(status("/proc/self/status")))')
    assert {k: st[k] for k in CAP_FIELDS} == {k: ZERO for k in CAP_FIELDS}
    assert st["NoNewPrivs"] == "1"
    assert st["Seccomp"] == "2"  # filter mode
    assert st["Uid"].split() == ["1000"] * 4 and st["Gid"].split() == ["1000"] * 4


def test_jail_init_has_no_capabilities_and_is_filtered():
    """pid 1 in the jail is the init that forked the program: it dropped
    everything before the filter and the fork."""
    st = probe('print(json.dumps(status("/proc/1/status")))')
    assert confined(st), st
    assert st["Uid"].split() == ["1000"] * 4


# pid 1's status as the program sees it, and the start of its command line
INIT_STATUS = """
    f = dict(l.split(":", 1) for l in open("/proc/1/status").read().splitlines())
    print(json.dumps({**status("/proc/1/status"), "Name": f["Name"].strip(),
                      "VmSize": int(f["VmSize"].split()[0]), "VmRSS": int(f["VmRSS"].split()[0]),
                      "cmdline": open("/proc/1/cmdline", "rb").read().split(b"\\0")[0].decode()}))
"""


def test_a_warm_jails_init_holds_nothing_of_the_zygote():
    """A jail cloned from the zygote: once python is forked, its init is
    pycell-init (src/jail/init_main.c, small_init.h), a small static
    program, not a copy of the zygote's address space (which was 9 MB
    resident of 30 MB with this policy, 66 MB with the data stack): a few
    MiB mapped, under 2 MiB resident, and as confined as before."""
    st = probe(INIT_STATUS, "--warm")
    assert confined(st), st
    assert st["Uid"].split() == ["1000"] * 4
    assert (st["Name"], st["cmdline"]) == ("pycell-init", "pycell-init"), st
    assert st["VmSize"] < 8 * 1024 and st["VmRSS"] < 2 * 1024, st


def test_exec_gains_nothing():
    """A program the jailed code starts (here python again, as the
    jail's uid 0 would be no different: the bounding set is empty)."""
    st = probe("""
        import subprocess
        out = subprocess.run(["/usr/bin/python3", "-c", "print(open('/proc/self/status').read())"],
                             capture_output=True, text=True).stdout
        st = dict(l.split(":", 1) for l in out.splitlines() if ":" in l)
        print(json.dumps({k: st[k].strip() for k in ("CapInh", "CapPrm", "CapEff", "CapBnd",
                                                      "CapAmb", "NoNewPrivs", "Seccomp", "Uid", "Gid")}))
    """)
    assert confined(st), st


def test_privileges_cannot_be_regained():
    got = probe("""
        import ctypes, os, errno
        libc = ctypes.CDLL(None, use_errno=True)
        out = {}
        def err(f, *a):
            ctypes.set_errno(0)
            r = f(*a)
            return 0 if r >= 0 else ctypes.get_errno()
        out["setuid0"] = err(libc.setuid, 0)
        out["setgid0"] = err(libc.setgid, 0)
        # capset: ask for every capability back
        class Hdr(ctypes.Structure):
            _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]
        class Data(ctypes.Structure):
            _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                        ("inheritable", ctypes.c_uint32)]
        hdr = Hdr(0x20080522, 0)
        data = (Data * 2)(Data(0xffffffff, 0xffffffff, 0), Data(0xffffffff, 0xffffffff, 0))
        out["capset"] = err(libc.capset, ctypes.byref(hdr), data)
        # ambient raise of a capability we do not have
        out["ambient_raise"] = err(libc.prctl, 47, 2, 21, 0, 0)  # PR_CAP_AMBIENT RAISE SYS_ADMIN
        # a new user namespace would give full capabilities in it
        out["unshare_user"] = err(libc.unshare, 0x10000000)
        print(json.dumps(out))
    """)
    assert got == {"setuid0": 1, "setgid0": 1, "capset": 1, "ambient_raise": 1,
                   "unshare_user": 1}, got  # EPERM everywhere


def status_of(pid):
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        k, _, v = line.partition(":")
        out[k] = v.strip()
    return out


def running_supervisor(user=None):
    """Start `pycell run` on a program that sleeps; returns the Popen once
    the jailed python runs."""
    marker = f"pycell-caps-{uuid.uuid4().hex}"
    proc = start_pycell(["run", "-c", "import sys; sys.stdin.read()", marker], user=user,
                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for_jail_python(proc.pid, marker)
    except AssertionError:
        kill_tree(proc.pid)
        raise AssertionError(f"the jail did not start: {proc.communicate()!r}")
    return proc


def stop(proc, before):
    """End the program (EOF on its stdin) so pycell cleans up after it."""
    try:
        proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        kill_tree(proc.pid)
        proc.communicate()
    check_no_leftovers(before, "pycell")


def test_supervisor_keeps_only_what_it_uses(require_root):
    before = set(children_of(os.getpid()))
    proc = running_supervisor()
    try:
        st = status_of(proc.pid)
    finally:
        stop(proc, before)
    eff, prm, bnd = (int(st[k], 16) for k in ("CapEff", "CapPrm", "CapBnd"))
    assert eff & ~SUPERVISOR_KEEP == 0, f"CapEff {eff:#x}"
    assert prm == SUPERVISOR_PERMITTED, f"CapPrm {prm:#x}"
    assert bnd & ~SUPERVISOR_PERMITTED == 0, f"CapBnd {bnd:#x}"
    assert st["CapInh"] == ZERO and st["CapAmb"] == ZERO
    assert eff & (1 << CAP_SETUID) and eff & (1 << CAP_SETGID), "needed for the id range map"
    for cap in (CAP_SETPCAP, CAP_BPF):
        assert not eff & (1 << cap) and not bnd & (1 << cap), f"capability {cap} kept"
    for cap in (CAP_NET_ADMIN, CAP_NET_BIND_SERVICE):
        assert not eff & (1 << cap), f"capability {cap} effective outside an egress setup"
    assert st["Groups"] == "", f"supplementary groups: {st['Groups']!r}"


def skip_unless_nobody_can_run():
    if not HOST_IS_ROOT:
        pytest.skip("needs root to start pycell as uid 65534")
    if int(Path("/proc/sys/user/max_user_namespaces").read_text()) == 0:
        pytest.skip("user.max_user_namespaces is 0: no unprivileged user namespaces")
    check = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                            "test", "-x", PYCELL, "-a", "-r", f"{DATADIR}/runtime"])
    if check.returncode != 0:
        pytest.skip(f"{PYCELL} or {DATADIR} is not usable by uid 65534")


def test_supervisor_is_not_dumpable_and_jail_runs_as_nobody():
    """A non-dumpable process's /proc/<pid> files belong to root whatever its uid;
    pycell as uid 65534 still writes its jail's id maps (the jail child makes
    itself dumpable for that moment)."""
    skip_unless_nobody_can_run()
    before = set(children_of(os.getpid()))
    proc = running_supervisor(user=65534)
    try:
        st = status_of(proc.pid)
        owner = os.stat(f"/proc/{proc.pid}/status").st_uid
    finally:
        stop(proc, before)
    assert st["Uid"].split() == ["65534"] * 4
    assert owner == 0, "pycell is dumpable: /proc/<pid>/status belongs to its uid"
    assert st["CapEff"] == ZERO


def test_jail_of_unprivileged_pycell_has_no_capabilities():
    skip_unless_nobody_can_run()
    res = run_json(textwrap.dedent(STATUS) + 'print(json.dumps(status("/proc/self/status")))',
                   user=65534)
    assert res["status"] == "ok", (res, res.stderr_bytes)
    st = json.loads(res["stdout"])
    assert confined(st), st


INIT_MEM = """
    import errno
    try:
        open("/proc/1/mem", "r+b")
        print("opened")
    except OSError as e:
        print(errno.errorcode[e.errno])
"""


def test_program_cannot_write_jail_init_memory():
    """The jail's init holds the channel to the supervisor; the program (same
    uid) must not be able to rewrite it through /proc/1/mem: init is not
    dumpable."""
    res = run_json(textwrap.dedent(INIT_MEM))
    assert (res["status"], res["stdout"]) == ("ok", "EACCES\n"), res


def test_program_cannot_write_jail_init_memory_unprivileged():
    skip_unless_nobody_can_run()
    res = run_json(textwrap.dedent(INIT_MEM), user=65534)
    assert (res["status"], res["stdout"]) == ("ok", "EACCES\n"), res
