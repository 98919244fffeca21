"""The jail's properties (issue 2), one test per property, each asserting the
exact outcome (errno, listing, id) so it fails if the property breaks."""

import errno
import json
import os
import signal
import socket
import subprocess
import tempfile
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from conftest import (DATADIR, EXIT_SETUP_FAILED, EXIT_TIMEOUT, HOST_ID_BASE, HOST_IS_ROOT,
                      JAIL_GID, JAIL_UID, PYCELL, check_no_leftovers, children_of,
                      jail_procs, kill_tree, parse_result, proc_stat, pycell_run, run_json,
                      start_pycell, wait_for_jail_python, RUN_FLAGS, pycell_env)

MiB = 1 << 20

pytestmark = pytest.mark.usefixtures("reap_leftovers")


def probe(code, *opts, **kw):
    """Run code in the jail; it prints one JSON value, which is returned."""
    res = run_json(textwrap.dedent(code), *opts, **kw)
    assert res["status"] == "ok", f"probe failed: {res!r} stderr {res.stderr_bytes!r}"
    return json.loads(res["stdout"])


def bind_policy(policy_file, binds):
    """A policy with extra binds: [{"src", "dst", "optional"?, "writable"?}]."""
    return policy_file({"filesystem": {"binds": binds}})


def alive(pid, starttime):
    st = proc_stat(pid)
    return st is not None and st[2] == starttime


def running(pid, starttime):
    """alive and not a zombie: it has not ended."""
    st = proc_stat(pid)
    return st is not None and st[2] == starttime and st[0] != "Z"


# ---------------------------------------------------------------- filesystem

def test_host_files_invisible(tmp_path):
    tag = f"pycell-canary-{uuid.uuid4().hex}"
    home = "/root" if HOST_IS_ROOT else os.path.expanduser("~")
    planted = [f"/tmp/{tag}", f"/etc/{tag}", f"{home}/{tag}", f"{tmp_path}/{tag}"]
    try:
        for p in planted:
            Path(p).write_text("host secret\n")
        # no cache: no font list linked into /tmp (test_fonts.py's)
        got = probe(f"""
            import os, json
            paths = {planted!r}
            print(json.dumps({{"exists": [p for p in paths if os.path.lexists(p)],
                               "tmp": os.listdir("/tmp"),
                               "workspace": os.listdir("/workspace")}}))
        """, env={"PYCELL_CACHE_DIR": "none"})
    finally:
        for p in planted:
            Path(p).unlink(missing_ok=True)
    assert got == {"exists": [], "tmp": [], "workspace": []}


# Everything the root may hold: the jail's own mounts and the merged-/usr
# symlinks (bin -> usr/bin, ...).  Nothing of the host's root.
ROOT_REQUIRED = {"dev", "etc", "proc", "tmp", "usr", "workspace", "run"}
ROOT_ALLOWED = ROOT_REQUIRED | {"bin", "sbin", "lib", "lib32", "lib64", "libx32"}


def test_root_holds_only_the_jail():
    got = probe("""
        import os, json
        print(json.dumps({n: os.readlink("/" + n) if os.path.islink("/" + n) else None
                          for n in os.listdir("/")}))
    """)
    names = set(got)
    assert ROOT_REQUIRED <= names, f"missing {ROOT_REQUIRED - names}"
    assert names <= ROOT_ALLOWED, f"unexpected entries in /: {names - ROOT_ALLOWED}"
    for n in names & {"bin", "sbin", "lib", "lib32", "lib64", "libx32"}:
        assert got[n] in (f"usr/{n}", f"/usr/{n}", None), f"/{n} -> {got[n]}"


# Generated in the jail, and the host's bound read-only (when it has them).
ETC_GENERATED = {"passwd", "group", "hosts", "hostname"}
ETC_COPIED = {"ld.so.cache", "nsswitch.conf", "services", "protocols", "localtime",
              "host.conf", "gai.conf",
              "matplotlibrc",  # Debian's matplotlib reads only /etc/matplotlibrc
              "alternatives",  # bound read-only: library links (numpy's libblas)
              "fonts"}  # bound read-only: fontconfig's (matplotlib's and PIL's text)
# Debian's Python keeps its site hook in /etc/python3.X (bound read-only)
ETC_PYTHON = {n for n in os.listdir("/etc") if n.startswith("python3") and os.path.isdir("/etc/" + n)}


def test_etc_is_generated():
    expected = ETC_GENERATED | {n for n in ETC_COPIED if os.path.exists("/etc/" + n)} | ETC_PYTHON
    got = probe("""
        import os, json, pwd, grp
        print(json.dumps({"etc": sorted(os.listdir("/etc")),
                          "users": [p.pw_name for p in pwd.getpwall()],
                          "me": pwd.getpwuid(os.getuid()).pw_name,
                          "my_group": grp.getgrgid(os.getgid()).gr_name,
                          "hosts": open("/etc/hosts").read()}))
    """)
    assert set(got["etc"]) == expected
    host_users = {line.split(":")[0] for line in Path("/etc/passwd").read_text().splitlines()
                  if line and not line.startswith("#")}
    leaked = (set(got["users"]) & host_users) - {"root", "nobody", got["me"]}
    assert not leaked, f"host accounts in the jail's /etc/passwd: {leaked}"
    assert "localhost" in got["hosts"]


# (path, what the probe does): every change to the root, /etc and /usr fails
# with EROFS, not merely EACCES (chmod, link and creation check the mount
# before permissions).  Each probe is harmless if it succeeds (a unique new
# name that is removed again, chmod to the mode the file already has), so a
# broken jail fails this test without damaging the host.
TAG = f"pycell-probe-{uuid.uuid4().hex[:12]}"
READONLY_PROBES = [
    (f"/{TAG}", "create"),
    (f"/{TAG}.d", "mkdir"),
    ("/etc/hosts", "chmod"),
    ("/etc/passwd", "chmod"),
    (f"/etc/{TAG}", "create"),
    (f"/usr/{TAG}.d", "mkdir"),
    (f"/usr/lib/{TAG}", "create"),
    ("/usr/bin/python3", "chmod"),
    ("/usr/bin/python3", "link"),
] + [  # the host's files bound into /etc (not copied: rootfs.c, host_etc_file)
    (f"/etc/{n}", "chmod") for n in ("ld.so.cache", "services", "matplotlibrc")
    if os.path.isfile(f"/etc/{n}") and not os.path.islink(f"/etc/{n}")]

READONLY_PROBE = f"""
    import os, json
    out = []
    for path, op in {READONLY_PROBES!r}:
        try:
            if op == "create":
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
                os.unlink(path)
            elif op == "mkdir":
                os.mkdir(path)
                os.rmdir(path)
            elif op == "chmod":
                os.chmod(path, os.stat(path).st_mode & 0o7777)
            elif op == "link":
                os.link(path, path + "-{TAG}", follow_symlinks=False)
                os.unlink(path + "-{TAG}")
            out.append(0)
        except OSError as e:
            out.append(e.errno)
    print(json.dumps(out))
"""


def test_root_etc_usr_read_only():
    got = probe(READONLY_PROBE)
    assert dict(zip(READONLY_PROBES, got)) == {p: errno.EROFS for p in READONLY_PROBES}


DEVICES = {"null": (1, 3), "zero": (1, 5), "full": (1, 7), "random": (1, 8), "urandom": (1, 9)}

DEV_PROBE = """
    import os, json, stat
    out = {}
    for n in sorted(os.listdir("/dev")):
        st = os.lstat("/dev/" + n)
        kind = ("chr" if stat.S_ISCHR(st.st_mode) else "dir" if stat.S_ISDIR(st.st_mode)
                else "lnk" if stat.S_ISLNK(st.st_mode) else "other")
        out[n] = ([kind, os.major(st.st_rdev), os.minor(st.st_rdev)] if kind != "lnk"
                  else [kind, os.readlink("/dev/" + n)])
    fs = {}
    for line in open("/proc/self/mountinfo"):
        left, right = line.split(" - ")
        fs[left.split()[4]] = right.split()[0]
    with open("/dev/zero", "rb") as f:
        zero = f.read(8) == bytes(8)
    with open("/dev/urandom", "rb") as f:
        rnd = len(f.read(16)) == 16
    with open("/dev/null", "wb") as f:
        null = f.write(b"x") == 1
    try:
        with open("/dev/full", "wb", buffering=0) as f:
            f.write(b"x")
        full = 0
    except OSError as e:
        full = e.errno
    print(json.dumps({"dev": out, "shm_fs": fs.get("/dev/shm"), "pts_fs": fs.get("/dev/pts"), "zero": zero,
                      "urandom": rnd, "null": null, "full": full}))
"""


# The usual symlinks into /proc/self/fd are allowed; nothing else.
DEV_LINKS = {"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1",
             "stderr": "/proc/self/fd/2", "ptmx": "pts/ptmx"}


def split_dev(dev):
    links = {n: v[1] for n, v in dev.items() if v[0] == "lnk"}
    return {n: v for n, v in dev.items() if v[0] != "lnk"}, links


def test_dev_holds_exactly_the_devices():
    got = probe(DEV_PROBE)
    dev, links = split_dev(got.pop("dev"))
    shm = dev.pop("shm", None)
    # the jail's own devpts instance, and /dev/ptmx a link into it
    assert dev.pop("pts") == ["dir", 0, 0] and got.pop("pts_fs") == "devpts"
    assert dev == {n: ["chr", ma, mi] for n, (ma, mi) in DEVICES.items()}
    assert links == DEV_LINKS
    # /dev/shm only as the policy's tmpfs
    if shm is not None:
        assert shm == ["dir", 0, 0] and got["shm_fs"] == "tmpfs"
    assert got == {"shm_fs": got["shm_fs"], "zero": True, "urandom": True, "null": True,
                   "full": errno.ENOSPC}


@pytest.mark.parametrize("enabled", [True, False])
def test_dev_shm_follows_policy(policy_file, enabled):
    pol = policy_file({"filesystem": {"dev_shm": enabled}})
    got = probe(DEV_PROBE, "--policy", pol)
    dev, _ = split_dev(got["dev"])
    want = {n: ["chr", ma, mi] for n, (ma, mi) in DEVICES.items()}
    want["pts"] = ["dir", 0, 0]
    if enabled:
        want["shm"] = ["dir", 0, 0]
    assert dev == want
    assert got["shm_fs"] == ("tmpfs" if enabled else None)


def test_old_root_detached():
    """Every mount in the jail is one the jail made: no trace of the host's
    mount table (the old root is detached after pivot_root)."""
    got = probe("""
        import json
        print(json.dumps([line.split(" - ")[0].split()[4] for line in open("/proc/self/mountinfo")]))
    """)
    allowed_prefixes = ("/usr", "/etc", "/dev", "/proc", "/tmp", "/workspace", "/run/pycell",
                        "/lib", "/lib64", "/bin", "/sbin")
    foreign = [m for m in got if m != "/" and not m.startswith(allowed_prefixes)]
    assert foreign == []
    assert got.count("/") == 1


def test_the_jail_mounts_four_file_systems_and_its_root_is_read_only_but_tmp_and_dev_shm():
    """Every file system a jail mounts costs the kernel bookkeeping in every
    memory cgroup, growing with the jails there are: a jail mounts four
    (besides its binds and its IPC namespace's mqueue).  /tmp and /dev/shm
    are directories of the root, each bound on itself writable (/dev/shm
    noexec), apart (neither sees the other's files) and holding limits.tmp
    together; /dev and /run/pycell are directories of the root, which is
    read-only everywhere else, and a file of /tmp cannot be linked or
    renamed out of it."""
    got = probe("""
        import json, os
        fs = {}
        for line in open("/proc/self/mountinfo"):
            left, right = line.split(" - ")
            f = left.split()
            # a file system's own root, not a bind of a part of it (but
            # /tmp and /dev/shm, which are)
            if f[3] == "/" or f[4] in ("/tmp", "/dev/shm"):
                fs[f[4]] = [right.split()[0], f[2], f[3], "noexec" in f[5].split(",")]
        writes = {}
        for path in ("/dev/x", "/run/pycell/x", "/run/pycell/main.py", "/x", "/tmp/t", "/dev/shm/s"):
            try:
                open(path, "w").close()
                writes[path] = 0
            except OSError as e:
                writes[path] = e.errno
        moves = {}
        for name, call in (("link", os.link), ("rename", os.rename)):
            for dst in ("/x", "/dev/shm/m", "/etc/m"):
                try:
                    call("/tmp/t", dst)
                    moves[name + " " + dst] = 0
                except OSError as e:
                    moves[name + " " + dst] = e.errno
        print(json.dumps({"fs": fs, "writes": writes, "moves": moves, "tmp": sorted(os.listdir("/tmp")),
                          "shm": sorted(os.listdir("/dev/shm")),
                          "free": [os.statvfs(d).f_bavail * os.statvfs(d).f_frsize for d in ("/tmp", "/dev/shm")]}))
    """)
    kinds = {m: v[0] for m, v in got["fs"].items()}
    assert kinds == {"/": "tmpfs", "/dev/pts": "devpts", "/dev/shm": "tmpfs", "/proc": "proc",
                     "/tmp": "tmpfs", "/workspace": "tmpfs"}
    assert len({v[1] for v in got["fs"].values()}) == 4    # four superblocks
    fs = got["fs"]
    assert fs["/tmp"][1] == fs["/dev/shm"][1] == fs["/"][1], fs
    assert (fs["/tmp"][2], fs["/dev/shm"][2]) == ("/tmp", "/dev/shm"), fs
    assert (fs["/tmp"][3], fs["/dev/shm"][3]) == (False, True), fs     # /dev/shm is noexec, as it was
    assert got["free"] == [64 << 20, 64 << 20]      # limits.tmp, the two together
    # (matplotlib's directory when a font list is bound)
    assert ([n for n in got["tmp"] if n != "matplotlib"], got["shm"]) == (["t"], ["s"]), got
    assert got["writes"] == {"/dev/x": errno.EROFS, "/run/pycell/x": errno.EROFS,
                             "/run/pycell/main.py": errno.EROFS, "/x": errno.EROFS, "/tmp/t": 0, "/dev/shm/s": 0}
    # a link into a read-only mount is refused for that, any other for
    # crossing a mount, as is every rename
    assert got["moves"] == {"link /x": errno.EROFS, "link /etc/m": errno.EROFS, "link /dev/shm/m": errno.EXDEV,
                            "rename /x": errno.EXDEV, "rename /etc/m": errno.EXDEV,
                            "rename /dev/shm/m": errno.EXDEV}, got["moves"]


def test_workspace_is_cwd_writable_and_fresh():
    # writes only where the cwd is /workspace, so a broken jail cannot
    # litter the directory pycell was started in
    code = """
        import os, json
        out = {"cwd": os.getcwd(), "before": sorted(os.listdir("."))}
        if out["cwd"] == "/workspace":
            with open("f", "wb") as f:
                f.write(b"y" * (1 << 20))
            os.mkdir("d")
            out["after"] = sorted(os.listdir("/workspace"))
            out["size"] = os.path.getsize("/workspace/f")
        print(json.dumps(out))
    """
    first = probe(code)
    assert first == {"cwd": "/workspace", "before": [], "after": ["d", "f"], "size": 1 << 20}
    # nothing survives into the next run
    assert probe(code)["before"] == []


# Fills PATH up to at most 64 MiB and removes the file again.
FILL_PROBE = """
    import os, json
    st = os.statvfs({path!r})
    free = st.f_bavail * st.f_frsize
    name = {path!r} + "/fill-" + {TAG!r}
    written, err = 0, 0
    chunk = b"z" * (1 << 20)
    try:
        with open(name, "wb", buffering=0) as f:
            while written < (64 << 20):
                written += f.write(chunk)
    except OSError as e:
        err = e.errno
    finally:
        if os.path.exists(name):
            os.unlink(name)
    print(json.dumps({{"free": free, "written": written, "errno": err}}))
"""


@pytest.mark.parametrize("path", ["/tmp", "/workspace"])
def test_tmpfs_size_limited(policy_file, path):
    # smaller than the default file_size rlimit, so the tmpfs is what stops it
    pol = policy_file({"limits": {"tmp": "8M", "workspace": "8M"}})
    got = probe(FILL_PROBE.format(path=path, TAG=TAG), "--policy", pol)
    assert got == {"free": 8 * MiB, "written": 8 * MiB, "errno": errno.ENOSPC}


@pytest.mark.parametrize("path", ["/tmp", "/workspace"])
def test_tmpfs_default_size(path):
    # what is free in an empty one (/tmp's file system is the root's)
    got = probe(f"import os; st = os.statvfs({path!r}); print(st.f_bavail * st.f_frsize)")
    assert got == 64 * MiB


# ---------------------------------------------------------------- processes

def test_python_is_pid_2_and_only_jail_pids_visible():
    got = probe("""
        import os, json
        print(json.dumps({"pid": os.getpid(), "ppid": os.getppid(),
                          "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
                          "sid": os.getsid(0)}))
    """)
    # setsid happens in the jail: python leads a session there or is in init's
    assert got["sid"] in (1, 2)
    assert got == {"pid": 2, "ppid": 1, "pids": [1, 2], "sid": got["sid"]}


def test_cgroup_namespace_rooted_at_the_run():
    """The jail enters its run's cgroups before it unshares the cgroup
    namespace: every hierarchy shows "/" and no host cgroup name (the
    supervisor's pid is in the run's)."""
    got = probe("""
        import json
        print(json.dumps(open("/proc/self/cgroup").read().splitlines()))
    """)
    host = Path("/proc/self/cgroup").read_text().splitlines()
    assert [ln.split(":", 2)[:2] for ln in got] == [ln.split(":", 2)[:2] for ln in host]
    assert [ln.split(":", 2)[2] for ln in got] == ["/"] * len(host)


def test_no_capabilities():
    got = probe("""
        import json
        st = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines())
        print(json.dumps({k: st[k].strip() for k in
                          ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs")}))
    """)
    zero = "0000000000000000"
    assert got == {"CapInh": zero, "CapPrm": zero, "CapEff": zero, "CapBnd": zero,
                   "CapAmb": zero, "NoNewPrivs": "1"}


def test_hostname():
    got = probe("""
        import os, json, socket
        print(json.dumps({"uname": os.uname().nodename, "gethostname": socket.gethostname(),
                          "etc": open("/etc/hostname").read(),
                          "localhost": socket.gethostbyname("localhost")}))
    """)
    assert got == {"uname": "pycell", "gethostname": "pycell", "etc": "pycell\n",
                   "localhost": "127.0.0.1"}


# ---------------------------------------------------------------- identity

UID_PROBE = """
    import os, json
    print(json.dumps({"ids": [os.getuid(), os.geteuid(), os.getgid(), os.getegid()],
                      "uid_map": open("/proc/self/uid_map").read().split(),
                      "gid_map": open("/proc/self/gid_map").read().split(),
                      "setgroups": open("/proc/self/setgroups").read().strip()}))
"""


def host_id(flat_map, jail_id):
    """Map jail_id to the host through a flattened /proc/PID/uid_map."""
    nums = [int(x) for x in flat_map]
    for inside, outside, count in zip(nums[0::3], nums[1::3], nums[2::3]):
        if inside <= jail_id < inside + count:
            return outside + jail_id - inside
    return None


def host_zero_mapped(flat_map):
    nums = [int(x) for x in flat_map]
    return any(outside <= 0 < outside + count
               for outside, count in zip(nums[1::3], nums[2::3]))


def test_ids_inside_and_maps():
    got = probe(UID_PROBE)
    assert got["ids"] == [JAIL_UID, JAIL_UID, JAIL_GID, JAIL_GID]
    assert got["setgroups"] == "deny"
    assert not host_zero_mapped(got["uid_map"]), got["uid_map"]
    assert not host_zero_mapped(got["gid_map"]), got["gid_map"]
    want_uid = HOST_ID_BASE + JAIL_UID if HOST_IS_ROOT else os.getuid()
    want_gid = HOST_ID_BASE + JAIL_GID if HOST_IS_ROOT else os.getgid()
    assert host_id(got["uid_map"], JAIL_UID) == want_uid
    assert host_id(got["gid_map"], JAIL_GID) == want_gid


def observe_host_ids(user=None):
    """Start a jail that waits on stdin, find its python from the host and
    return (python's entry, init's entry) of jail_procs."""
    marker = f"marker-{uuid.uuid4().hex}"
    before = set(children_of(os.getpid()))
    proc = start_pycell(["run", "-c", "import sys; sys.stdin.read(); print('done')", marker],
                        user=user, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE)
    try:
        py = wait_for_jail_python(proc.pid, marker)
        init = [p for p in jail_procs(proc.pid) if p["nspid"][-1:] == [1]]
        out, err = proc.communicate(b"", timeout=10)
    except BaseException:
        kill_tree(proc.pid)
        proc.communicate()
        raise
    assert (proc.returncode, out) == (0, b"done\n"), err
    check_no_leftovers(before, "the uid probe")
    assert len(init) == 1, jail_procs(proc.pid)
    return py, init[0]


def test_host_uid_as_root(require_root):
    py, init = observe_host_ids()
    host_uid, host_gid = HOST_ID_BASE + JAIL_UID, HOST_ID_BASE + JAIL_GID
    assert py["nspid"][-1] == 2
    assert py["uid"] == [host_uid] * 4
    assert py["gid"] == [host_gid] * 4
    # the jail's init is not host root either
    assert 0 not in init["uid"] and 0 not in init["gid"], init


def nobody_can_run():
    if not os.path.exists("/usr/bin/setpriv"):
        return "setpriv(1) not installed"
    if int(Path("/proc/sys/user/max_user_namespaces").read_text()) == 0:
        return "user.max_user_namespaces is 0"
    p = Path("/proc/sys/kernel/unprivileged_userns_clone")
    if p.exists() and p.read_text().strip() == "0":
        return "kernel.unprivileged_userns_clone is 0"
    p = Path("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
    if p.exists() and p.read_text().strip() == "1":
        return "AppArmor restricts unprivileged user namespaces"
    check = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c",
         'test -x "$1" && test -r "$2/policy" && test -x "$2/policy" && test -r "$2/runtime"',
         "sh", PYCELL, DATADIR])
    if check.returncode != 0:
        return f"{PYCELL} or {DATADIR} is not readable by uid 65534"
    return None


def test_host_uid_as_nobody():
    if not HOST_IS_ROOT:
        pytest.skip("needs root to switch to uid 65534")
    why = nobody_can_run()
    if why:
        pytest.skip(why)
    res = run_json(textwrap.dedent(UID_PROBE), user=65534)
    assert res["status"] == "ok", (res, res.stderr_bytes)
    got = json.loads(res["stdout"])
    assert got["ids"] == [JAIL_UID, JAIL_UID, JAIL_GID, JAIL_GID]
    assert host_id(got["uid_map"], JAIL_UID) == 65534
    assert host_id(got["gid_map"], JAIL_GID) == 65534
    py, _ = observe_host_ids(user=65534)
    assert py["uid"] == [65534] * 4 and py["gid"] == [65534] * 4


# ---------------------------------------------------------------- leaks

def test_host_env_not_visible():
    key = f"PYCELL_CANARY_{uuid.uuid4().hex}"
    secret = f"secret-{uuid.uuid4().hex}"
    # the code is in init's argv (/proc/1/cmdline): spell the secret reversed
    got = probe(f"""
        import os, json
        secret = {secret[::-1]!r}[::-1]
        seen = {{}}
        for p in ("/proc/self/environ", "/proc/1/environ", "/proc/1/cmdline"):
            try:
                seen[p] = secret in open(p, "rb").read().decode("latin-1")
            except OSError as e:
                seen[p] = e.errno
        print(json.dumps({{"env": dict(os.environ), "seen": seen}}))
    """, env={key: secret})
    assert key not in got["env"]
    assert secret not in json.dumps(got["env"])
    for path, v in got["seen"].items():
        assert v is not True, f"{path} holds the host's canary"


def test_host_fds_not_inherited(tmp_path):
    canary = tmp_path / "canary"
    canary.write_bytes(b"stdin from a host file\n")
    f = os.open(canary, os.O_RDONLY)
    root = os.open("/", os.O_RDONLY | os.O_DIRECTORY)
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(1)
    stdin = open(canary, "rb")
    fds = (f, root, lsock.fileno())
    try:
        for fd in fds:
            os.set_inheritable(fd, True)
        got = probe("""
            import os, json, sys
            fds = sorted(int(x) for x in os.listdir("/proc/self/fd"))
            links = {fd: os.readlink(f"/proc/self/fd/{fd}") for fd in (0, 1, 2, 3)}
            print(json.dumps({"fds": fds, "links": links, "stdin": sys.stdin.read()}))
        """, pass_fds=fds, stdin=stdin)
    finally:
        os.close(f)
        os.close(root)
        lsock.close()
        stdin.close()
    assert got["fds"] == [0, 1, 2, 3, 4]
    links = got["links"]
    # stdio are pipes from the supervisor, never a host file or tty
    assert [links[k][:6] for k in ("0", "1", "2")] == ["pipe:["] * 3, links
    assert links["3"].startswith("socket:["), links
    assert got["stdin"] == "stdin from a host file\n"


PTY_HOLDER = """
import json, os, sys
m, s = os.openpty()
st = os.stat(os.ttyname(s))
print(json.dumps({"name": os.ttyname(s), "pts_dev": os.stat("/dev/pts").st_dev,
                  "rdev": [os.major(st.st_rdev), os.minor(st.st_rdev)]}), flush=True)
sys.stdin.read()
"""


def test_a_pty_of_one_jail_is_invisible_to_other_jails_and_the_host():
    """Each jail mounts a devpts instance of its own: while one jail holds
    a pty, another jail's /dev/pts holds ptmx alone and its first pty is
    number 0 too, and the host's devpts is another file system."""
    holder = start_pycell(["run", "-c", PTY_HOLDER], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        a = json.loads(holder.stdout.readline())
        assert a["name"] == "/dev/pts/0" and a["rdev"] == [136, 0], a
        b = probe("""
            import json, os
            before = sorted(os.listdir("/dev/pts"))
            m, s = os.openpty()
            print(json.dumps({"before": before, "name": os.ttyname(s),
                              "pts_dev": os.stat("/dev/pts").st_dev}))
        """)
        assert b["before"] == ["ptmx"] and b["name"] == "/dev/pts/0", b
        host_dev = os.stat("/dev/pts").st_dev
        assert len({a["pts_dev"], b["pts_dev"], host_dev}) == 3, (a, b, host_dev)
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    assert holder.returncode == 0, holder.stderr.read()


def test_ptys_and_terminal_line_discipline():
    """pty.fork gives the child a controlling terminal; TIOCSETD (another
    line discipline) is refused on it, N_TTY included."""
    got = probe("""
        import errno, fcntl, json, os, pty, struct
        pid, fd = pty.fork()
        if pid == 0:
            os.write(1, b"tty %d %d" % (os.isatty(0), os.getsid(0) == os.getpid()))
            os._exit(0)
        out = os.read(fd, 64)
        os.waitpid(pid, 0)
        m, s = os.openpty()
        ld = {}
        for n in (0, 21):
            try:
                fcntl.ioctl(s, 0x5423, struct.pack("i", n))
                ld[n] = 0
            except OSError as e:
                ld[n] = errno.errorcode[e.errno]
        print(json.dumps({"child": out.decode(), "tiocsetd": ld}))
    """)
    assert got == {"child": "tty 1 1", "tiocsetd": {"0": "EPERM", "21": "EPERM"}}


# ---------------------------------------------------------------- network

def test_no_inet_sockets_without_network(policy_file):
    got = probe("""
        import socket, json, errno
        out = {}
        for fam in (socket.AF_INET, socket.AF_INET6):
            try:
                socket.socket(fam, socket.SOCK_STREAM)
                out[fam.name] = "created"
            except OSError as e:
                out[fam.name] = errno.errorcode[e.errno]
        print(json.dumps(out))
    """, "--policy", policy_file({"network": "none"}))
    assert got == {"AF_INET": "EAFNOSUPPORT", "AF_INET6": "EAFNOSUPPORT"}


# The netns's interfaces without netlink (which the policy may forbid):
# /proc/net/dev lists the reader's network namespace.
IFACES = """
        ifs = [l.split(":")[0].strip() for l in open("/proc/net/dev").read().splitlines()[2:]]
        try:
            ifs_nl = [name for _, name in socket.if_nameindex()]
        except OSError:
            ifs_nl = None
"""


@pytest.mark.parametrize("network", ["none", "loopback"])
def test_only_loopback_and_it_is_up_where_usable(policy_file, network):
    code = """
        import socket, json
        """ + IFACES + """
        echo = None
        if NETWORK == "loopback":
            srv = socket.socket()
            srv.bind(("127.0.0.1", 0))
            srv.listen(1)
            c = socket.create_connection(srv.getsockname(), timeout=2)
            a, _ = srv.accept()
            c.sendall(b"ping")
            echo = a.recv(4).decode()
        try:
            v6 = [l.split()[-1] for l in open("/proc/net/if_inet6").read().splitlines()]
        except FileNotFoundError:
            v6 = None
        print(json.dumps({"ifs": ifs, "ifs_nl": ifs_nl, "echo": echo, "v6": v6}))
    """
    got = probe(code.replace("NETWORK", repr(network)),
                "--policy", policy_file({"network": network}))
    assert got["ifs"] == ["lo"]
    assert got["ifs_nl"] in (None, ["lo"])
    assert got["echo"] == ("ping" if network == "loopback" else None)
    # lo is up (it has ::1) only where a socket could use it
    if got["v6"] is not None:
        assert got["v6"] == (["lo"] if network == "loopback" else [])


def test_host_network_unreachable(policy_file):
    """With network "loopback" the jail may make sockets, but its netns has
    only its own lo: the host's loopback, abstract unix sockets and every
    other address are out of reach."""
    host = socket.socket()
    host.bind(("127.0.0.1", 0))
    host.listen(8)
    host.setblocking(False)
    abstract = socket.socket(socket.AF_UNIX)
    abstract_name = f"\0pycell-test-{uuid.uuid4().hex}"
    abstract.bind(abstract_name)
    abstract.listen(8)
    abstract.setblocking(False)
    port = host.getsockname()[1]
    targets = [
        ("host-loopback", int(socket.AF_INET), ("127.0.0.1", port)),
        ("private", int(socket.AF_INET), ("10.255.255.1", 80)),
        ("test-net", int(socket.AF_INET), ("192.0.2.1", 80)),
        ("v6-doc", int(socket.AF_INET6), ("2001:db8::1", 80)),
    ]
    try:
        got = probe(f"""
            import socket, json, errno
            out = {{}}
            for name, fam, addr in {targets!r}:
                s = socket.socket(fam, socket.SOCK_STREAM)
                s.settimeout(3)
                try:
                    s.connect(tuple(addr))
                    out[name] = "connected"
                except socket.timeout:
                    out[name] = "timeout"
                except OSError as e:
                    out[name] = errno.errorcode.get(e.errno, e.errno)
                s.close()
            u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            try:
                u.sendto(b"x", ("192.0.2.1", 9))
                out["udp"] = "sent"
            except OSError as e:
                out["udp"] = errno.errorcode.get(e.errno, e.errno)
            a = socket.socket(socket.AF_UNIX)
            try:
                a.connect({abstract_name!r})
                out["abstract"] = "connected"
            except OSError as e:
                out["abstract"] = errno.errorcode.get(e.errno, e.errno)
            print(json.dumps(out))
        """, "--policy", policy_file({"network": "loopback"}))
        with pytest.raises(BlockingIOError):
            host.accept()
        with pytest.raises(BlockingIOError):
            abstract.accept()
    finally:
        host.close()
        abstract.close()
    assert got == {"host-loopback": "ECONNREFUSED", "private": "ENETUNREACH",
                   "test-net": "ENETUNREACH", "v6-doc": "ENETUNREACH", "udp": "ENETUNREACH",
                   "abstract": "ECONNREFUSED"}


# ---------------------------------------------------------------- binds

def test_missing_bind_source_is_setup_failed(policy_file, host_tmp):
    missing = str(host_tmp / f"missing-{uuid.uuid4().hex}")
    pol = bind_policy(policy_file, [{"src": missing, "dst": "/mnt/data"}])
    res = run_json("print('ran')", "--policy", pol)
    assert res["status"] == "setup_failed"
    assert res.rc == EXIT_SETUP_FAILED
    assert res["stdout"] == ""
    err = res["setup_error"]
    assert err["errno"] == errno.ENOENT
    assert err.get("errno_name", "ENOENT") == "ENOENT"
    assert missing in err["message"]
    assert isinstance(err["step"], str) and err["step"]


def test_optional_missing_bind_is_skipped(policy_file, host_tmp):
    missing = str(host_tmp / "missing")
    pol = bind_policy(policy_file, [{"src": missing, "dst": "/mnt/data", "optional": True}])
    got = probe("import os; print(str(os.path.exists('/mnt/data')).lower())", "--policy", pol)
    assert got is False


@pytest.mark.parametrize("wanted", [False, True])
def test_ca_certificates_follow_policy(policy_file, wanted):
    """filesystem.ca_certificates binds the host's /etc/ssl/certs (and
    /etc/ca-certificates) read-only; without it the jail has none."""
    if wanted and not os.path.isdir("/etc/ssl/certs"):
        pytest.skip("this host has no /etc/ssl/certs to bind")
    got = probe("""
        import errno, json, os
        try:
            open("/etc/ssl/certs/pycell-probe", "w")
            w = "written"
        except OSError as e:
            w = errno.errorcode[e.errno]
        print(json.dumps({"certs": os.path.isdir("/etc/ssl/certs"),
                          "same": sorted(os.listdir("/etc/ssl/certs"))[:5] if os.path.isdir("/etc/ssl/certs") else [],
                          "write": w}))
    """, "--policy", policy_file({"filesystem": {"ca_certificates": wanted}}))
    if wanted:
        assert got == {"certs": True, "same": sorted(os.listdir("/etc/ssl/certs"))[:5], "write": "EROFS"}
    else:
        assert got == {"certs": False, "same": [], "write": "ENOENT"}


def test_policy_environment_is_merged_with_the_base(policy_file):
    """python.env adds variables and replaces those of the base environment
    with the same name; the others of the base stay, once each."""
    got = probe("""
        import json, os
        print(json.dumps(dict(os.environ)))
    """, "--policy", policy_file({"python": {"env": {"USER": "analyst", "PYCELL_EXTRA": "a=b"}}}))
    assert got == {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/workspace", "TMPDIR": "/tmp",
                   "LANG": "C.UTF-8", "PYTHONPATH": "/run/pycell/lib", "PYTHONDONTWRITEBYTECODE": "1",
                   "MPLBACKEND": "Agg", "MPLCONFIGDIR": "/tmp/matplotlib", "XDG_CACHE_HOME": "/tmp/.cache",
                   "LOGNAME": "pycell", "USER": "analyst", "PYCELL_EXTRA": "a=b",
                   # the default policy's one core, in every thread-pool variable
                   **{k: "1" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                                       "BLIS_NUM_THREADS", "NUMEXPR_NUM_THREADS", "NUMEXPR_MAX_THREADS")}}


@pytest.mark.parametrize("writable", [False, True])
def test_bind_is_read_only_unless_writable(policy_file, host_tmp, writable):
    src = host_tmp / "data"
    src.mkdir()
    (src / "hello.txt").write_text("from the host\n")
    src.chmod(0o777)
    pol = bind_policy(policy_file, [{"src": str(src), "dst": "/mnt/data", "writable": writable}])
    got = probe("""
        import os, json
        try:
            with open("/mnt/data/new", "w") as f:
                f.write("from the jail")
            err = 0
        except OSError as e:
            err = e.errno
        print(json.dumps({"ls": sorted(os.listdir("/mnt/data")),
                          "text": open("/mnt/data/hello.txt").read(), "errno": err}))
    """, "--policy", pol)
    if writable:
        assert got == {"ls": ["hello.txt", "new"], "text": "from the host\n", "errno": 0}
        assert (src / "new").read_text() == "from the jail"
        # written by the jail's unprivileged host id, never host root
        want = HOST_ID_BASE + JAIL_UID if HOST_IS_ROOT else os.getuid()
        assert (src / "new").stat().st_uid == want
    else:
        assert got == {"ls": ["hello.txt"], "text": "from the host\n", "errno": errno.EROFS}
        assert sorted(os.listdir(src)) == ["hello.txt"]


# ---------------------------------------------------------------- time and output

KILLABLE_TREE = """
    import os, signal, sys, time
    for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(s, signal.SIG_IGN)
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            time.sleep(1000)
        os._exit(0)
    os.wait()
    {python_then}
"""


def test_init_reports_and_forwards_after_giving_back_its_memory():
    """A run's init unmaps what it inherited and no longer needs once python
    has run a second (src/jail/init_mem.h): after that it still forwards a
    signal to python and reports how python ended."""
    code = textwrap.dedent("""
        import signal, sys, time
        signal.signal(signal.SIGTERM, lambda *a: (print("got TERM", flush=True), sys.exit(7)))
        print("ready", flush=True)
        time.sleep(60)
    """)
    proc = start_pycell(["run", "-c", code], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"ready\n"
        time.sleep(2)
        # the CLI's child, or with --warm its zygote's
        inits = [p["pid"] for p in jail_procs(proc.pid) if p["name"] == "pycell-init"]
        assert len(inits) == 1, inits
        os.kill(inits[0], signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert (proc.returncode, out) == (7, b"got TERM\n"), err


def test_timeout_kills_forking_grandchild():
    marker = f"marker-{uuid.uuid4().hex}"
    code = textwrap.dedent(KILLABLE_TREE.format(python_then="time.sleep(1000)"))
    before = set(children_of(os.getpid()))
    t0 = time.monotonic()
    proc = start_pycell(["run", "--json", "--timeout", "2", "-c", code, marker],
                        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        seen = {}
        while time.monotonic() - t0 < 10 and proc.poll() is None:
            procs = jail_procs(proc.pid)
            # init, python and the orphaned grandchild (its parent exited)
            if len([p for p in procs if p["nspid"][-1:] != [1]]) >= 2:
                seen = {p["pid"]: p["starttime"] for p in procs}
                break
            time.sleep(0.005)
        proc.wait(timeout=30)
        elapsed = time.monotonic() - t0
        out, err = proc.communicate()
    except BaseException:
        kill_tree(proc.pid)
        proc.communicate()
        raise
    assert len(seen) >= 3, f"did not see init, python and the grandchild: {seen}"
    res = parse_result(proc.returncode, out, err, "timeout")
    assert res["status"] == "timeout"
    assert res.rc == EXIT_TIMEOUT
    # promptly: python and the grandchild sleep 1000 s; the margins are
    # for a slow or busy machine (and the sanitizer build)
    assert 2.0 <= elapsed < 6.0, f"run took {elapsed:.3f}s with --timeout 2"
    assert 2000 <= res["duration_ms"] < 4000
    still = [p for p, start in seen.items() if alive(p, start)]
    assert still == [], f"jail processes alive after the timeout: {still}"
    check_no_leftovers(before, "the timeout run")


def test_daemonized_grandchild_does_not_outlive_the_run():
    """python exits while a setsid'd grandchild that holds stdout sleeps on:
    the run ends with python and the grandchild dies with the jail."""
    marker = f"marker-{uuid.uuid4().hex}"
    code = textwrap.dedent(KILLABLE_TREE.format(
        python_then="sys.stdin.read(); print('bye', flush=True)"))
    before = set(children_of(os.getpid()))
    proc = start_pycell(["run", "--timeout", "30", "-c", code, marker],
                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for_jail_python(proc.pid, marker)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            procs = jail_procs(proc.pid)
            if len([p for p in procs if p["nspid"][-1:] != [1]]) >= 2:
                break
            time.sleep(0.005)
        seen = {p["pid"]: p["starttime"] for p in procs}
        t0 = time.monotonic()
        out, err = proc.communicate(b"", timeout=10)
        elapsed = time.monotonic() - t0
    except BaseException:
        kill_tree(proc.pid)
        proc.communicate()
        raise
    assert len(seen) >= 3, seen
    assert (proc.returncode, out) == (0, b"bye\n"), err
    assert elapsed < 3.0, f"the run outlived python by {elapsed:.3f}s (the grandchild sleeps 1000 s)"
    # killed with the jail's init before pycell exits (its end of stdout
    # closed, which is how the run knew it was over): within a moment none
    # runs.  pycell may exit before init is reaped; init's zombie then goes
    # to the nearest subreaper, the test process here (check_no_leftovers
    # reaps it), or to pid 1.
    deadline = time.monotonic() + 1
    while (still := [p for p, start in seen.items() if running(p, start)]) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert still == []
    check_no_leftovers(before, "the daemon run")


def test_output_flood_is_capped_and_supervisor_stays_small():
    if os.environ.get("PYCELL_SANITIZERS"):
        pytest.skip("sanitizer build: ASan's shadow memory makes the supervisor's RSS "
                    "unrepresentative (the normal build checks it)")
    code = textwrap.dedent("""
        import sys
        out, err = sys.stdout.buffer, sys.stderr.buffer
        chunk = b"o" * (1 << 20)
        for i in range(100):
            out.write(chunk)
            err.write(b"e" * (64 << 10))
        out.flush()
        err.flush()
    """)
    before = set(children_of(os.getpid()))
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.monotonic()
        proc = start_pycell(["run", "--json", "--timeout", "60", "-c", code],
                            stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        hwm_kb, ru = 0, None
        while time.monotonic() - t0 < 60:
            try:
                st = Path(f"/proc/{proc.pid}/status").read_text()
                hwm_kb = max(hwm_kb, int(st.split("VmHWM:")[1].split()[0]))
            except (FileNotFoundError, IndexError, ProcessLookupError):
                pass
            pid, status, _ = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                proc.returncode = os.waitstatus_to_exitcode(status)
                break
            time.sleep(0.005)
        else:
            kill_tree(proc.pid)
            proc.wait()
            pytest.fail("the flood run did not end within 60s")
        out.seek(0)
        err.seek(0)
        res = parse_result(proc.returncode, out.read(), err.read(), "flood")
    check_no_leftovers(before, "the flood run")
    assert res["status"] == "ok", res.stderr_bytes
    assert res.rc == 0
    assert res["truncated"] == {"stdout": True, "stderr": True}
    # each keeps its head (half the cap) and its tail (the rest, less room
    # for the marker between them)
    head, tail = MiB // 2, MiB - MiB // 2 - 96
    sizes = {"stdout": 100 * MiB, "stderr": 100 * (64 << 10)}
    assert res["dropped_bytes"] == {k: n - head - tail for k, n in sizes.items()}
    for k, c in (("stdout", "o"), ("stderr", "e")):
        marker = "\n[... pycell: %d bytes of %s dropped here ...]\n" % (sizes[k] - head - tail, k)
        assert res[k] == c * head + marker + c * tail
    # the supervisor's own peak, sampled while it ran, and the jail's peak
    # as the run measured it (its cgroup, or its processes' rusage).  Not
    # wait4's ru_maxrss of pycell: it also counts the copy of this pytest
    # process that fork made before exec, so it grew with earlier tests.
    assert 0 < hwm_kb < 20 * 1024, f"supervisor VmHWM {hwm_kb} kB"
    assert 0 < res["memory_peak_bytes"] < 40 * MiB, res["memory_peak_bytes"]


SPAWN_AND = "import os, subprocess\nsubprocess.Popen(['/usr/bin/python3', '-c', 'import time; time.sleep(60)'])\n"


@pytest.mark.parametrize("what, opts, code", [
    ("ok", [], SPAWN_AND + "print('bye')"),
    ("error", [], SPAWN_AND + "raise SystemExit(7)"),
    ("signal", [], SPAWN_AND + "os.kill(os.getpid(), 9)"),
    ("timeout", ["--timeout", "0.3"], SPAWN_AND + "import time; time.sleep(60)"),
    ("setup_failed", ["--python", "/usr/bin/no-such-python"], "pass"),
])
def test_no_process_left_behind(what, opts, code):
    """Every way a run ends leaves no process of it on the host: the test
    process is a subreaper, so anything that outlived pycell is our child."""
    before = set(children_of(os.getpid()))
    t0 = time.monotonic()
    rc, _, err = pycell_run(["run", *opts, "-c", code], check_leftovers=False)
    assert rc == {"ok": 0, "error": 7, "signal": 137, "timeout": EXIT_TIMEOUT,
                  "setup_failed": EXIT_SETUP_FAILED}[what], err
    assert time.monotonic() - t0 < 5
    check_no_leftovers(before, f"a run ending in {what}")


def test_proc_self_belongs_to_the_program():
    """/proc/self is the program's own (comm writable, owned by the jail
    uid), cold or warm: a warm python never execs, so pycell makes it
    dumpable as exec would; init's stays root's.  Which root: the kernel's
    owner of a process that is not dumpable is root of the user namespace
    its memory was made in.  A cold init's is a copy of the supervisor's,
    made in the host's (root there is no one here: 65534); a warm init's
    is pycell-init's, made by its exec in the jail's, whose root is the
    jail's 0 when pycell runs as root (no process of the jail has that id)
    and unmapped otherwise."""
    got = probe("""
        import os, json
        with open("/proc/self/comm", "w") as f:
            f.write("renamed")
        print(json.dumps({"comm": open("/proc/self/comm").read().strip(),
                          "self_uid": os.stat("/proc/self/comm").st_uid,
                          "init_uid": os.stat("/proc/1/comm").st_uid}))
    """)
    init_uid = 0 if "--warm" in RUN_FLAGS and HOST_IS_ROOT else 65534
    assert got == {"comm": "renamed", "self_uid": 1000, "init_uid": init_uid}


def test_runs_as_root_of_a_nested_user_namespace():
    """pycell started by root of a user namespace that is not the initial
    one (unshare -r, a rootless container) owns only its own id: the jail
    maps that one id, as for any unprivileged user."""
    code = "import os; print(os.getuid(), open('/proc/self/uid_map').read().split())"
    out = subprocess.run(["unshare", "-r", PYCELL, "run", *RUN_FLAGS, "-c", code],
                         env=pycell_env(), capture_output=True, timeout=30)
    assert (out.returncode, out.stdout) == (0, b"1000 ['1000', '0', '1']\n"), out.stderr
