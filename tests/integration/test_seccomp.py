"""The seccomp filter inside a real jail (issue 3): tests/probes/try_syscall.py
runs as the jailed program and reports what each call answered; the tests
assert the exact errno.  Then real programs that must keep working.

The probe's arguments make a call that gets past the filter fail in the
kernel's argument checks (EFAULT, EBADF, EINVAL), so EPERM/ENOSYS here is
the filter's answer.  For a few calls (mount API, reboot, ...) the kernel
would answer EPERM to the unprivileged jail anyway; the C unit test
(tests/unit/test_seccomp.c) and test_probe_arguments_reach_the_kernel below
run the same calls unfiltered as root, where they do not answer EPERM."""

import errno
import json
import subprocess
import textwrap
from pathlib import Path

import pytest

from conftest import HOST_IS_ROOT, parse_result, pycell_run, run_json

PROBE = str(Path(__file__).resolve().parents[1] / "probes" / "try_syscall.py")
HOST_PYTHON = "/usr/bin/python3"

HOSTILE = [
    "unshare", "setns", "mount", "umount2", "fsopen", "fsconfig", "fsmount", "fspick",
    "move_mount", "open_tree", "mount_setattr", "pivot_root", "chroot", "keyctl", "add_key",
    "request_key", "bpf", "perf_event_open", "userfaultfd", "io_uring_setup",
    "io_uring_enter", "io_uring_register", "ptrace", "process_vm_readv", "process_vm_writev",
    "process_madvise", "kcmp", "pidfd_getfd", "open_by_handle_at", "name_to_handle_at",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot",
    "swapon", "swapoff", "iopl", "ioperm", "modify_ldt", "acct", "syslog", "quotactl",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "sethostname",
    "setdomainname", "fanotify_init",
]


def run_probe(*names, policy=None, timeout=60, warm=False):
    """The probe's results inside the jail: {name: 0 | errno | "SIGNAME"}."""
    argv = ["run", "--json"] + (["--warm"] if warm else [])
    if policy:
        argv += ["--policy", policy]
    argv += [PROBE, *names]
    rc, out, err = pycell_run(argv, timeout=timeout)
    res = parse_result(rc, out, err, argv)
    assert res["status"] == "ok", f"probe run failed: {res!r} stderr {err!r}"
    got = json.loads(res["stdout"])
    assert got["arch"] == "x86_64"
    return got["results"]


def run_probe_on_host(*names):
    """The same probe without a jail or filter, as this test process."""
    out = subprocess.run([HOST_PYTHON, PROBE, *names], check=True, capture_output=True,
                         timeout=60).stdout
    return json.loads(out)["results"]


def errname(v):
    return errno.errorcode.get(v, v) if isinstance(v, int) and v else v


def assert_results(got, want):
    """Compare with errno names in the message, all mismatches at once."""
    bad = {k: (errname(got.get(k)), errname(v)) for k, v in want.items() if got.get(k) != v}
    assert not bad, "name: (got, expected): " + ", ".join(f"{k}: {v}" for k, v in bad.items())


def program(code, *opts, timeout=60):
    """Run code in the jail; returns (result, stdout)."""
    res = run_json(textwrap.dedent(code), *opts, timeout=timeout)
    return res, res["stdout"]


# ---------------------------------------------------------------- denied calls

def test_hostile_calls_answer_eperm():
    got = run_probe(*HOSTILE)
    assert_results(got, {name: errno.EPERM for name in HOSTILE})


def test_clone3_answers_enosys_so_glibc_falls_back():
    assert_results(run_probe("clone3"), {"clone3": errno.ENOSYS})


def test_clone_with_namespace_flags_is_refused():
    names = ["clone CLONE_NEWUSER", "clone CLONE_NEWNS", "clone CLONE_NEWPID",
             "clone CLONE_NEWNET", "clone CLONE_NEWIPC", "clone CLONE_NEWUTS",
             "clone CLONE_NEWCGROUP", "clone CLONE_NEWNS|high bits"]
    want = {n: errno.EPERM for n in names}
    # a thread-style clone gets through to the kernel (EINVAL: no CLONE_SIGHAND),
    # forks work
    want.update({"clone CLONE_THREAD": errno.EINVAL, "fork": 0, "vfork": 0, "clone fork": 0})
    assert_results(run_probe(*want), want)


def test_ioctl_tiocsti_and_tioclinux_refused_including_high_bits():
    """CVE-2019-10063: the kernel uses the low 32 bits of the request, so
    0x100005412 is TIOCSTI too and must be refused as well."""
    want = {
        "ioctl TIOCSTI": errno.EPERM,
        "ioctl TIOCSTI|high bits": errno.EPERM,
        "ioctl TIOCSTI|all high bits": errno.EPERM,
        "ioctl TIOCLINUX": errno.EPERM,
        "ioctl TIOCLINUX|high bits": errno.EPERM,
        "ioctl TIOCSETD": errno.EPERM,
        "ioctl TIOCSETD|high bits": errno.EPERM,
        # other requests reach the kernel (a pipe is not a terminal)
        "ioctl TCGETS": errno.ENOTTY,
        "ioctl TCGETS|high bits": errno.ENOTTY,
        "ioctl TIOCSTI+1": errno.ENOTTY,
        "ioctl FIONREAD": 0,
    }
    assert_results(run_probe(*want), want)


def test_socket_families_without_network(policy_file):
    want = {
        "socket AF_UNIX": 0,
        "socketpair AF_UNIX": 0,
        "socket AF_INET": errno.EAFNOSUPPORT,
        "socket AF_INET6": errno.EAFNOSUPPORT,
        "socket AF_NETLINK": errno.EAFNOSUPPORT,
        "socket AF_PACKET": errno.EAFNOSUPPORT,
        "socket AF_VSOCK": errno.EAFNOSUPPORT,
        "socket AF_VSOCK|high bits": errno.EAFNOSUPPORT,
        "socket AF_UNIX|high bits": errno.EAFNOSUPPORT,
        "socketpair AF_INET": errno.EAFNOSUPPORT,
    }
    assert_results(run_probe(*want, policy=policy_file({"network": "none"})), want)


def test_socket_families_with_loopback_network(policy_file):
    want = {
        "socket AF_UNIX": 0,
        "socket AF_INET": 0,
        "socket AF_INET6": 0,
        "socket AF_INET|high bits": errno.EAFNOSUPPORT,
        "socket AF_NETLINK": errno.EAFNOSUPPORT,
        "socket AF_PACKET": errno.EAFNOSUPPORT,
        "socket AF_VSOCK": errno.EAFNOSUPPORT,
        "socketpair AF_INET": errno.EAFNOSUPPORT,
    }
    got = run_probe(*want, policy=policy_file({"network": "loopback"}))
    assert_results(got, want)


def test_personality_only_default_and_query():
    want = {
        "personality query": 0,
        "personality PER_LINUX": 0,
        "personality READ_IMPLIES_EXEC": errno.EPERM,
        "personality ADDR_NO_RANDOMIZE": errno.EPERM,
        "personality high bits": errno.EPERM,
    }
    assert_results(run_probe(*want), want)


def test_prctl_safe_set_only():
    want = {
        "prctl PR_GET_DUMPABLE": 0,
        "prctl PR_SET_NAME": 0,
        "prctl PR_SET_MM": errno.EPERM,
        "prctl PR_GET_DUMPABLE|high bits": errno.EPERM,
    }
    assert_results(run_probe(*want), want)


def test_seccomp_stacking_without_flags_only():
    want = {"seccomp SET_MODE_FILTER": errno.EFAULT, "seccomp NEW_LISTENER": errno.ENOSYS}
    assert_results(run_probe(*want), want)


def test_unlisted_calls_answer_enosys():
    want = {"syncfs": errno.ENOSYS, "vmsplice": errno.ENOSYS, "mlock": errno.ENOSYS,
            "io_setup": errno.ENOSYS}
    assert_results(run_probe(*want), want)


def test_other_architectures_are_killed():
    got = run_probe("x32 getpid", "i386 getpid")
    assert got["x32 getpid"] == "SIGSYS"
    host = run_probe_on_host("i386 getpid")["i386 getpid"]
    if host != 0:
        pytest.skip(f"this kernel does not run i386 system calls ({host}); x32 checked only")
    assert got["i386 getpid"] == "SIGSYS"


def test_allowed_calls_reach_the_kernel():
    want = {
        "getpid": 0,
        "read -1": errno.EBADF,
        "openat bad path": errno.EFAULT,
        "mkdir bad path": errno.EFAULT,
        "shmget size 0": errno.EINVAL,
        "sched_setaffinity bad mask": errno.EFAULT,
    }
    assert_results(run_probe(*want), want)


def test_probe_arguments_reach_the_kernel():
    """Unfiltered, as root: the hostile probes do not answer EPERM by
    themselves, so the EPERM in the jail is the filter's."""
    if not HOST_IS_ROOT:
        pytest.skip("needs root: unprivileged, the kernel itself answers EPERM to many")
    got = run_probe_on_host(*HOSTILE, "clone3", "clone CLONE_NEWUSER", "ioctl TIOCSTI",
                            "ioctl TIOCSTI|high bits", "personality READ_IMPLIES_EXEC",
                            "prctl PR_SET_MM", "syncfs", "socket AF_NETLINK")
    eperm = sorted(k for k in HOSTILE if got[k] == errno.EPERM)
    # a host may lock down kexec or module loading; more means bad arguments
    assert len(eperm) <= 3, f"answer EPERM without a filter: {eperm}"
    assert_results({k: got[k] for k in ("clone3", "clone CLONE_NEWUSER", "ioctl TIOCSTI",
                                        "ioctl TIOCSTI|high bits", "personality READ_IMPLIES_EXEC",
                                        "prctl PR_SET_MM", "syncfs", "socket AF_NETLINK")},
                   {"clone3": errno.EINVAL, "clone CLONE_NEWUSER": errno.EINVAL,
                    "ioctl TIOCSTI": errno.ENOTTY, "ioctl TIOCSTI|high bits": errno.ENOTTY,
                    "personality READ_IMPLIES_EXEC": 0, "prctl PR_SET_MM": errno.EFAULT,
                    "syncfs": errno.EBADF, "socket AF_NETLINK": 0})


def test_warm_start_is_filtered_the_same(policy_file):
    """`pycell mcp` starts jails from a zygote (no exec of python): every
    probe answers exactly as in a cold start, with and without "process"."""
    assert run_probe(warm=True) == run_probe()
    policy = policy_file({"seccomp": {"groups": ["base", "threads", "fs_write", "sockets"]}})
    cold, warm = run_probe(policy=policy), run_probe(policy=policy, warm=True)
    assert warm == cold
    assert (warm["fork"], warm["clone fork"]) == (errno.EPERM, errno.EPERM)


# ---------------------------------------------------------------- policy groups and rules

def test_policy_without_process_cannot_fork(policy_file):
    policy = policy_file({"seccomp": {"groups": ["base", "threads", "fs_write", "sockets"]}})
    want = {"fork": errno.EPERM, "vfork": errno.EPERM, "clone fork": errno.EPERM,
            "clone CLONE_THREAD": errno.EINVAL, "shmget size 0": errno.ENOSYS,
            "sched_setaffinity bad mask": errno.ENOSYS, "getpid": 0}
    assert_results(run_probe(*want, policy=policy), want)
    res, out = program("""
        import subprocess, threading
        t = threading.Thread(target=print, args=("thread",))
        t.start(); t.join()
        try:
            subprocess.run(["/usr/bin/python3", "-c", "pass"])
        except PermissionError as e:
            print("subprocess", e.errno)
    """, "--policy", policy)
    assert res["status"] == "ok", res
    assert out == f"thread\nsubprocess {errno.EPERM}\n"


def test_policy_without_threads(policy_file):
    policy = policy_file({"seccomp": {"groups": ["base", "process", "fs_write", "sockets"]}})
    assert_results(run_probe("clone CLONE_THREAD", "fork", policy=policy),
                   {"clone CLONE_THREAD": errno.EPERM, "fork": 0})
    res, out = program("""
        import threading
        try:
            threading.Thread(target=print).start()
        except RuntimeError as e:
            print(e)
    """, "--policy", policy)
    assert res["status"] == "ok", res
    assert out == "can't start new thread\n"


def test_optional_groups(policy_file):
    # network "none": the default's loopback would imply the sockets group
    policy = policy_file({"seccomp": {"groups": ["base", "process", "memlock", "aio"]}, "network": "none"})
    want = {"mlock": 0, "io_setup": errno.EFAULT, "mkdir bad path": errno.ENOSYS,
            "socket AF_UNIX": errno.ENOSYS}
    assert_results(run_probe(*want, policy=policy), want)


def test_extra_rules(policy_file):
    policy = policy_file({"seccomp": {"rules": [
        {"syscall": "mkdir", "action": "errno:EROFS"},
        {"syscall": "getppid", "action": "kill"},
        {"syscall": "ptrace", "action": "allow"},
    ]}})
    assert_results(run_probe("ptrace", "unshare", policy=policy),
                   {"ptrace": errno.ESRCH, "unshare": errno.EPERM})
    res, out = program("""
        import os
        try:
            os.mkdir("/tmp/x")
        except OSError as e:
            print(e.errno, flush=True)
        os.getppid()
        print("not reached")
    """, "--policy", policy)
    assert out == f"{errno.EROFS}\n"
    assert res["status"] == "error" and res["signal"] == 31, res  # SIGSYS


def test_unknown_syscall_in_rules_is_a_policy_error(policy_file):
    policy = policy_file({"seccomp": {"rules": [{"syscall": "frobnicate", "action": "allow"}]}})
    rc, out, err = pycell_run(["run", "--policy", policy, "-c", "pass"])
    assert rc != 0
    assert b"frobnicate" in err, err


# ---------------------------------------------------------------- real programs still work

def test_threads():
    res, out = program("""
        import threading
        results = []
        lock = threading.Lock()
        def work(i):
            with lock:
                results.append(i * i)
        ts = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for t in ts: t.start()
        for t in ts: t.join()
        print(sorted(results))
    """)
    assert res["status"] == "ok", res
    assert out == "[0, 1, 4, 9, 16, 25, 36, 49]\n"


def test_asyncio_with_socketpair():
    res, out = program("""
        import asyncio, socket
        async def main():
            a, b = socket.socketpair()
            r1, w1 = await asyncio.open_connection(sock=a)
            r2, w2 = await asyncio.open_connection(sock=b)
            w1.write(b"ping\\n"); await w1.drain()
            line = await r2.readline()
            w2.write(line.upper()); await w2.drain()
            reply = await r1.readline()
            await asyncio.sleep(0.01)
            w1.close(); w2.close()
            return line, reply
        print(asyncio.run(main()))
    """)
    assert res["status"] == "ok", res
    assert out == "(b'ping\\n', b'PING\\n')\n"


def test_subprocess_of_python_inside():
    res, out = program("""
        import subprocess
        p = subprocess.run(["/usr/bin/python3", "-c", "import os; print(os.getpid(), os.getuid())"],
                           capture_output=True, text=True)
        print(p.returncode, p.stdout.split()[1])
    """)
    assert res["status"] == "ok", res
    assert out == "0 1000\n"


def test_multiprocessing_pool():
    res, out = program("""
        import multiprocessing
        def sq(x):
            return x * x
        if __name__ == "__main__":
            with multiprocessing.Pool(2) as p:
                print(p.map(sq, range(6)))
            with multiprocessing.get_context("spawn").Pool(2) as p:
                print(p.map(abs, [-1, -2]))
    """)
    assert res["status"] == "ok", res
    assert out == "[0, 1, 4, 9, 16, 25]\n[1, 2]\n"


def test_standard_library_imports():
    res, out = program("""
        import json, sqlite3, decimal, hashlib, ssl
        con = sqlite3.connect("/tmp/t.db")
        con.execute("create table t (x)")
        con.execute("insert into t values (41)")
        con.commit()
        print(con.execute("select x + 1 from t").fetchone()[0])
        print(json.dumps({"a": [1]}), decimal.Decimal(1) / 4, hashlib.sha256(b"").hexdigest()[:8])
        ssl.create_default_context()
        print("ssl", ssl.OPENSSL_VERSION.split()[0])
    """)
    assert res["status"] == "ok", res
    assert out == '42\n{"a": [1]} 0.25 e3b0c442\nssl OpenSSL\n'


def test_numpy_if_installed():
    have = subprocess.run([HOST_PYTHON, "-c", "import numpy"], capture_output=True)
    if have.returncode != 0:
        pytest.skip("numpy is not installed on the host (apt-get install python3-numpy)")
    res, out = program("""
        import numpy as np
        a = np.arange(12, dtype=np.float64).reshape(3, 4)
        print(int((a @ a.T).trace()), float(np.linalg.norm(np.ones(4))))
    """)
    assert res["status"] == "ok", res
    assert out == "506 2.0\n"
