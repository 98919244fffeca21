"""probe: the escape probes of `pycell policy-test`, run as the jailed program.

    probe.py CATEGORY CANARIES_JSON

CANARIES_JSON describes what the suite planted on the host before the run
(a file, an env var, an open fd, a loopback TCP listener, an abstract unix
socket, SysV IPC objects, a POSIX message queue) and the limits in force, so
a leak is detected, not assumed.  Output, one JSON object per line on
stdout: first {"plan": [NAME, ...]}, then for each probe
{"name": NAME, "status": "contained" | "escaped" | "error", "reason": ...}.
The resource category is different: "resources NAME" runs one bomb, and
pycell policy-test judges it from the run's result as well as from what the
bomb printed.
"""

import ctypes
import errno
import json
import os
import signal
import socket
import stat
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)) if "__file__" in globals() else "")
sys.path.insert(0, "/run/pycell/lib/probes")

C = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
libc = ctypes.CDLL(None, use_errno=True)
PROBES = {}  # category -> [(name, fn)]
EGRESS_PROBES = {}  # the same, run only under a policy whose network is an egress list
EGRESS = C.get("egress")  # {"allow": [...], "gateway_port": N} for such a policy


def probe(category, name, egress=False):
    def reg(fn):
        (EGRESS_PROBES if egress else PROBES).setdefault(category, []).append((name, fn))
        return fn
    return reg


class Escaped(Exception):
    pass


def ename(e):
    return errno.errorcode.get(e, str(e))


def report(name, status, reason):
    print(json.dumps({"name": name, "status": status, "reason": reason}), flush=True)


def expect_fail(what, fn, ok_errnos=None):
    """fn() must raise OSError (with one of ok_errnos when given)."""
    try:
        fn()
    except OSError as e:
        if ok_errnos and e.errno not in ok_errnos:
            raise Escaped(f"{what}: unexpected {ename(e.errno)}, expected "
                          f"{'/'.join(ename(x) for x in ok_errnos)}")
        return ename(e.errno)
    raise Escaped(f"{what}: succeeded")


# ------------------------------------------------------------------ filesystem

def host_objects():
    return {(d, i): p for p, d, i in C.get("host_inodes", [])}


def walk_for_host_inodes(limit=60000):
    """Stat every entry to depth 3 below / and below each mount point;
    return the host objects found (path in jail, host path)."""
    want = host_objects()
    found, seen, n = [], set(), 0
    roots = ["/"]
    try:
        for line in open("/proc/self/mountinfo"):
            roots.append(line.split()[4].replace("\\040", " "))
    except OSError:
        pass
    stack = [(r, 0) for r in roots]
    while stack and n < limit:
        path, depth = stack.pop()
        if path in seen or path.startswith(("/proc", "/sys")):
            continue
        seen.add(path)
        try:
            st = os.stat(path, follow_symlinks=False)
        except OSError:
            continue
        n += 1
        if (st.st_dev, st.st_ino) in want:
            found.append(f"{path} is host {want[(st.st_dev, st.st_ino)]}")
        if stat.S_ISDIR(st.st_mode) and depth < 3:
            try:
                for e in os.scandir(path):
                    stack.append((os.path.join(path, e.name), depth + 1))
            except OSError:
                pass
    return found


@probe("filesystem", "host-files-by-inode")
def fs_host_inodes():
    found = walk_for_host_inodes()
    if found:
        raise Escaped("; ".join(found[:5]))
    return f"none of {len(C.get('host_inodes', []))} host directories/files is reachable"


@probe("filesystem", "host-canary-by-path")
def fs_canary_path():
    p = C["file"]
    tries = [p, "/.." + p, "/../../.." + p, "/proc/self/root" + p, "/proc/1/root" + p,
             "/proc/1/cwd/../.." + p]
    for t in tries:
        try:
            data = open(t, "rb").read()
        except OSError:
            continue
        raise Escaped(f"read {t}: {data[:40]!r}")
    return f"{p} unreachable by {len(tries)} paths"


@probe("filesystem", "symlink-tricks")
def fs_symlinks():
    p = C["file"]
    d = "/tmp/pycell-probe-links"
    os.makedirs(d, exist_ok=True)
    for i, target in enumerate([p, "../../../../.." + p, "/proc/1/root" + p]):
        link = f"{d}/l{i}"
        try:
            os.symlink(target, link)
        except FileExistsError:
            pass
        try:
            data = open(link, "rb").read()
        except OSError:
            continue
        raise Escaped(f"symlink to {target} read {data[:40]!r}")
    return "symlinks to the host canary resolve inside the jail"


@probe("filesystem", "read-only-mounts")
def fs_ro_mounts():
    checked = []
    for line in open("/proc/self/mountinfo"):
        f = line.split()
        mnt, opts = f[4].replace("\\040", " "), f[5].split(",")
        if "ro" not in opts or mnt.startswith(("/proc", "/sys")):
            continue
        path = os.path.join(mnt, ".pycell-probe-write")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as e:
            if e.errno in (errno.ENOTDIR,):  # a file bind: try writing it
                try:
                    os.close(os.open(mnt, os.O_WRONLY))
                except OSError:
                    checked.append(mnt)
                    continue
                raise Escaped(f"opened read-only bind {mnt} for writing")
            checked.append(mnt)
            continue
        os.close(fd)
        os.unlink(path)
        raise Escaped(f"created a file in read-only mount {mnt}")
    for d in ("/", "/etc", "/usr", "/run/pycell"):
        expect_fail(f"create in {d}", lambda d=d: os.close(
            os.open(d.rstrip("/") + "/.pycell-probe", os.O_WRONLY | os.O_CREAT, 0o600)))
    return f"{len(checked)} read-only mounts refuse writes"


@probe("filesystem", "proc-self-exe")
def fs_proc_self_exe():
    r = expect_fail("open /proc/self/exe for writing", lambda: open("/proc/self/exe", "r+b"))
    return f"interpreter binary not writable ({r})"


@probe("filesystem", "sys")
def fs_sys():
    if not os.path.exists("/sys"):
        return "/sys is absent"
    for p in ("/sys/kernel/uevent_helper", "/sys/fs/cgroup/cgroup.procs",
              "/sys/kernel/mm/transparent_hugepage/enabled"):
        try:
            os.close(os.open(p, os.O_WRONLY))
        except OSError:
            continue
        raise Escaped(f"{p} opened for writing")
    return "/sys present but read-only"


# ------------------------------------------------------------------ devices

@probe("devices", "only-the-five")
def dev_list():
    allowed = {"null", "zero", "full", "random", "urandom", "shm", "fd", "stdin", "stdout",
               "stderr", "pts", "ptmx", "mqueue"}
    extra = []
    for e in os.listdir("/dev"):
        p = "/dev/" + e
        st = os.lstat(p)
        if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
            if e not in ("null", "zero", "full", "random", "urandom"):
                extra.append(e)
        elif e not in allowed:
            extra.append(e)
    if extra:
        raise Escaped("unexpected entries in /dev: " + ", ".join(sorted(extra)))
    return "/dev holds null, zero, full, random, urandom (+ symlinks, shm, the jail's devpts)"


@probe("devices", "pty-private-instance")
def dev_pty():
    """/dev/pts is a devpts of the jail's own: not the host's (by device),
    empty but for ptmx, and the jail's first pty is its number 0."""
    host = {p: d for p, d, _ in C.get("host_inodes", [])}.get("/dev/pts")
    st = os.stat("/dev/pts")
    if host is not None and st.st_dev == host:
        raise Escaped("/dev/pts is the host's devpts instance")
    listed = sorted(os.listdir("/dev/pts"))
    if listed != ["ptmx"]:
        raise Escaped("/dev/pts shows ptys this jail did not open: " + ", ".join(listed))
    m, s = os.openpty()
    try:
        name = os.ttyname(s)
        listed = sorted(os.listdir("/dev/pts"))
    finally:
        os.close(m)
        os.close(s)
    if name != "/dev/pts/0" or listed != ["0", "ptmx"]:
        raise Escaped(f"the jail's first pty is {name} and /dev/pts holds {listed}: "
                      "not an instance of its own")
    return "a devpts of the jail's own (not the host's); its first pty is /dev/pts/0"


@probe("devices", "mknod")
def dev_mknod():
    r = expect_fail("mknod /tmp/mem c 1 1",
                    lambda: os.mknod("/tmp/pycell-probe-mem", 0o600 | stat.S_IFCHR, os.makedev(1, 1)))
    return f"mknod refused ({r})"


# ------------------------------------------------------------------ procfs

@probe("procfs", "host-pids")
def proc_pids():
    pids = sorted(int(d) for d in os.listdir("/proc") if d.isdigit())
    sup = C.get("supervisor_pid")
    if sup in pids:
        try:
            comm = open(f"/proc/{sup}/comm").read().strip()
        except OSError:
            comm = ""
        if comm == "pycell":
            raise Escaped(f"the supervisor (host pid {sup}) is visible")
    if len(pids) > 16:
        raise Escaped(f"{len(pids)} processes visible: {pids[:20]}")
    return f"only the jail's pids are visible: {pids}"


@probe("procfs", "kernel-pointers")
def proc_kptr():
    bad = []
    for path in ("/proc/kallsyms", "/proc/modules"):
        try:
            lines = open(path).read().splitlines()[:200]
        except OSError:
            continue
        for ln in lines:
            for word in ln.split():
                if word.startswith("0x"):
                    word = word[2:]
                if len(word) == 16 and all(c in "0123456789abcdef" for c in word) \
                        and int(word, 16) != 0:
                    bad.append(f"{path}: {ln[:60]}")
                    break
    if bad:
        raise Escaped("kernel addresses readable: " + bad[0])
    return "no kernel address readable in /proc/kallsyms, /proc/modules"


@probe("procfs", "proc-sys-writes")
def proc_sys():
    opened = []
    for p in ("/proc/sys/kernel/hostname", "/proc/sys/kernel/core_pattern",
              "/proc/sys/vm/drop_caches", "/proc/sysrq-trigger", "/proc/sys/kernel/modprobe",
              "/proc/sys/user/max_user_namespaces"):
        try:
            fd = os.open(p, os.O_WRONLY)
        except OSError:
            continue
        os.close(fd)  # nothing is written: opening is the escape
        opened.append(p)
    if opened:
        raise Escaped("opened for writing: " + ", ".join(opened))
    return "no /proc/sys file opens for writing"


@probe("procfs", "cgroup-paths")
def proc_cgroup():
    # a cgroup namespace rooted at the run's own cgroups: no host cgroup
    # names (nor the supervisor's pid in the run's) show
    lines = open("/proc/self/cgroup").read().splitlines()
    shown = [ln for ln in lines if ln.split(":", 2)[2] != "/"]
    if shown:
        raise Escaped(f"/proc/self/cgroup shows host cgroup paths: {shown[:3]}")
    return f"/proc/self/cgroup: {len(lines)} hierarchies, each at /"


@probe("procfs", "init-hidden")
def proc_init():
    for what in ("cmdline", "environ"):
        try:
            data = open(f"/proc/1/{what}", "rb").read()
        except OSError:
            continue
        # init is a clone of the supervisor: its argv and environment
        # (the host's) must be gone, only a name may remain
        for secret in [C.get("token", "")] + C.get("supervisor_argv", []):
            if secret and secret.encode() in data:
                raise Escaped(f"/proc/1/{what} shows the supervisor's {secret!r}: {data[:60]!r}")
    try:
        open("/proc/1/mem", "r+b")
    except OSError as e:
        return f"/proc/1 cmdline/environ hold nothing of the host, mem refused ({ename(e.errno)})"
    raise Escaped("/proc/1/mem opened for writing")


# ------------------------------------------------------------------ network

def connect(family, addr, kind=socket.SOCK_STREAM):
    s = socket.socket(family, kind)
    s.settimeout(2)
    try:
        s.connect(addr)
    finally:
        s.close()


@probe("network", "host-loopback-tcp")
def net_tcp():
    port = C["tcp_port"]
    try:
        connect(socket.AF_INET, ("127.0.0.1", port))
    except OSError as e:
        return f"127.0.0.1:{port} (host listener) unreachable: {ename(e.errno) if e.errno else e}"
    raise Escaped(f"connected to the host listener on 127.0.0.1:{port}")


@probe("network", "host-abstract-socket")
def net_abstract():
    try:
        connect(socket.AF_UNIX, "\0" + C["abstract"])
    except OSError as e:
        return f"host abstract socket unreachable: {ename(e.errno) if e.errno else e}"
    raise Escaped("connected to the host abstract socket @" + C["abstract"])


@probe("network", "interfaces")
def net_ifaces():
    try:  # the jail's own net namespace, as procfs sees it (netlink may be filtered)
        names = sorted(ln.split(":")[0].strip() for ln in open("/proc/net/dev").readlines()[2:])
    except OSError as e:
        return f"interfaces cannot be listed ({ename(e.errno)})"
    allowed = {"lo", "eth0"} if EGRESS else {"lo"}
    if set(names) - allowed:
        raise Escaped("interfaces beyond " + " and ".join(sorted(allowed)) + ": " + ", ".join(names))
    return f"interfaces: {names or 'none'}"


@probe("network", "outside-route")
def net_route():
    if EGRESS:
        return "an egress jail has a route out (eth0); the egress probes test what it may reach"
    # UDP connect sends nothing; it only asks for a route.
    for fam, addr in ((socket.AF_INET, ("192.0.2.1", 9)), (socket.AF_INET6, ("2001:db8::1", 9))):
        try:
            connect(fam, addr, socket.SOCK_DGRAM)
        except OSError as e:
            continue
        raise Escaped(f"a route to {addr[0]} exists")
    return "no route to any outside address"


@probe("network", "socket-families")
def net_families():
    import try_syscall
    names = ["socket AF_NETLINK", "socket AF_PACKET", "socket AF_VSOCK",
             "socket AF_VSOCK|high bits", "socket AF_UNIX|high bits", "socketpair AF_INET"]
    got = {n: try_syscall.run_forked(n) or try_syscall.call(n) for n in names}
    bad = {n: v for n, v in got.items() if v == 0}
    if bad:
        raise Escaped("created: " + ", ".join(bad))
    return "refused: " + ", ".join(f"{n}={ename(v) if isinstance(v, int) else v}"
                                    for n, v in got.items())


# ------------------------------------------------------------------ egress
# Under an egress policy the jail has a route out, and the kernel's
# socket-address filters on its cgroup are all that stand between it and
# any address: each of these must be refused with EPERM, the filters'
# answer (no route, a timeout or a reset would not prove them there).

def unlisted_target():
    """An address and port no destination of the policy covers."""
    import ipaddress
    nets = []
    for d in EGRESS["allow"]:
        host, _, port = d.rpartition(":")
        try:
            nets.append((ipaddress.ip_network(host), None if port == "*" else int(port)))
        except ValueError:
            pass  # a name: its addresses are its own, none of these
    for addr in ("192.0.2.1", "198.51.100.1", "203.0.113.1"):
        for port in (9, 7, 13):
            if not any(ipaddress.ip_address(addr) in n and p in (None, port) for n, p in nets):
                return addr, port
    raise Escaped("the policy lists every test address (192.0.2.1, 198.51.100.1, 203.0.113.1)")


def gateway():
    for line in open("/etc/resolv.conf"):
        if line.startswith("nameserver"):
            return line.split()[1]
    raise Escaped("no nameserver in /etc/resolv.conf")


def refused(what, fn):
    return expect_fail(what, fn, [errno.EPERM])


def tcp_nonblocking(family, addr):
    s = socket.socket(family, socket.SOCK_STREAM | socket.SOCK_NONBLOCK)
    try:
        s.connect(addr)
    finally:
        s.close()


@probe("network", "egress-unlisted-tcp", egress=True)
def egress_tcp():
    a = unlisted_target()
    refused(f"TCP connect to {a[0]}:{a[1]}", lambda: tcp_nonblocking(socket.AF_INET, a))
    t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        refused("TCP fast open (sendto MSG_FASTOPEN)", lambda: t.sendto(b"x", socket.MSG_FASTOPEN, a))
    finally:
        t.close()
    return f"{a[0]}:{a[1]}: connect and fast open refused (EPERM)"


@probe("network", "egress-unlisted-udp", egress=True)
def egress_udp():
    a = unlisted_target()
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        refused(f"UDP sendto {a[0]}:{a[1]}", lambda: u.sendto(b"x", a))
        refused(f"UDP connect {a[0]}:{a[1]}", lambda: u.connect(a))
        refused(f"UDP sendto {a[0]}:53 (another resolver)", lambda: u.sendto(b"x", (a[0], 53)))
    finally:
        u.close()
    # UDP-Lite's connect passes by the address hooks: it must not be made
    lite = expect_fail("a UDP-Lite socket", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM, 136),
                       [errno.EPERM, errno.EPROTONOSUPPORT])
    return f"{a[0]}: sendto, connect and a query to another resolver refused (EPERM); UDP-Lite {lite}"


@probe("network", "egress-ipv6", egress=True)
def egress_v6():
    a = unlisted_target()
    refused("TCP connect to 2001:db8::1", lambda: tcp_nonblocking(socket.AF_INET6, ("2001:db8::1", 80)))
    refused(f"TCP connect to ::ffff:{a[0]}", lambda: tcp_nonblocking(socket.AF_INET6, ("::ffff:" + a[0], a[1])))
    u = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    try:
        refused("UDP sendto fe80::1 (link-local)", lambda: u.sendto(b"x", ("fe80::1", 53, 0, 2)))
    finally:
        u.close()
    return "IPv6 and IPv4-mapped destinations refused (EPERM)"


@probe("network", "egress-metadata", egress=True)
def egress_metadata():
    if any(d.startswith("169.254.169.254") for d in EGRESS["allow"]):
        return "169.254.169.254 is listed by the policy"
    refused("TCP connect to 169.254.169.254:80", lambda: tcp_nonblocking(socket.AF_INET, ("169.254.169.254", 80)))
    refused("TCP connect to 169.254.0.1:80", lambda: tcp_nonblocking(socket.AF_INET, ("169.254.0.1", 80)))
    return "the metadata address and link-local refused (EPERM)"


@probe("network", "egress-gateway", egress=True)
def egress_gateway():
    gw, port = gateway(), EGRESS["gateway_port"]
    refused(f"TCP connect to the host at {gw}:{port} (a canary listener)",
            lambda: tcp_nonblocking(socket.AF_INET, (gw, port)))
    refused(f"TCP connect to {gw}:53", lambda: tcp_nonblocking(socket.AF_INET, (gw, 53)))
    return f"the host behind the gateway {gw} refused but for DNS over UDP (EPERM)"


def dns_query(server, name, qtype):
    import struct
    q = struct.pack(">HHHHHH", 0x5043, 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(l)]) + l for l in name.encode().split(b".")) + b"\0" + struct.pack(">HH", qtype, 1)
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.settimeout(3)
    try:
        u.sendto(q, (server, 53))
        r = u.recv(4096)
    finally:
        u.close()
    return r[3] & 15, struct.unpack(">H", r[6:8])[0]


@probe("network", "egress-dns", egress=True)
def egress_dns():
    gw = gateway()
    got = {}
    for what, name, qtype in (("TXT", "pycell-probe.exfil.example", 16),
                              ("long label", "x" * 63 + ".pycell-probe.exfil.example", 1),
                              ("AAAA", "pycell-probe.exfil.example", 28)):
        rcode, answers = dns_query(gw, name, qtype)
        if answers or rcode != 3:
            raise Escaped(f"{what} query for an unlisted name: rcode {rcode}, {answers} answers")
        got[what] = "NXDOMAIN"
    try:
        socket.getaddrinfo("pycell-probe.exfil.example", 80)
    except socket.gaierror as e:
        got["getaddrinfo"] = e.strerror
    else:
        raise Escaped("an unlisted name resolved")
    return "unlisted names do not resolve: " + ", ".join(f"{k}={v}" for k, v in got.items())


@probe("network", "egress-raw-icmp", egress=True)
def egress_raw():
    r = expect_fail("raw socket", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))
    p = expect_fail("ICMP (ping) socket", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP))
    return f"raw socket {r}, ping socket {p}"


# ------------------------------------------------------------------ ipc

def sysv(name, fn):
    ctypes.set_errno(0)
    r = fn()
    return r, ctypes.get_errno()


@probe("ipc", "host-sysv")
def ipc_sysv():
    out = []
    for kind, key, oid in (("shm", C["shm_key"], C["shm_id"]), ("msg", C["msg_key"], C["msg_id"]),
                           ("sem", C["sem_key"], C["sem_id"])):
        get = {"shm": lambda k: libc.shmget(k, 0, 0), "msg": lambda k: libc.msgget(k, 0),
               "sem": lambda k: libc.semget(k, 0, 0)}[kind]
        r, e = sysv(kind, lambda: get(key))
        if r >= 0:
            raise Escaped(f"host SysV {kind} key {key:#x} found (id {r})")
        out.append(f"{kind}get={ename(e)}")
        if kind == "shm":
            libc.shmat.restype = ctypes.c_void_p
            ctypes.set_errno(0)
            a = libc.shmat(oid, None, 0)
            if a not in (None, ctypes.c_void_p(-1).value):
                raise Escaped(f"attached the host shm segment id {oid}")
            out.append(f"shmat={ename(ctypes.get_errno())}")
    try:
        rows = open("/proc/sysvipc/shm").read().splitlines()[1:]
        if rows:
            raise Escaped(f"{len(rows)} shm segments visible")
    except OSError:
        pass
    return ", ".join(out)


@probe("ipc", "host-posix-mqueue")
def ipc_mq():
    libc.mq_open.restype = ctypes.c_int
    ctypes.set_errno(0)
    r = libc.mq_open(("/" + C["mq_name"]).encode(), os.O_RDONLY)
    if r >= 0:
        raise Escaped("opened the host message queue /" + C["mq_name"])
    return f"mq_open={ename(ctypes.get_errno())}"


# ------------------------------------------------------------------ identity

def status_fields():
    return dict(ln.rstrip("\n").split(":\t", 1) for ln in open("/proc/self/status") if ":\t" in ln)


@probe("identity", "ids")
def id_ids():
    ids = os.getresuid() + os.getresgid()
    if 0 in ids:
        raise Escaped(f"running with id 0: {ids}")
    want = (C.get("jail_uid"), C.get("jail_gid"))
    if want[0] is not None and (os.getuid(), os.getgid()) != want:
        raise Escaped(f"uid/gid {os.getuid()}/{os.getgid()}, policy says {want}")
    for fn, arg in ((os.setuid, 0), (os.setgid, 0), (os.setgroups, [0])):
        expect_fail(f"{fn.__name__}({arg})", lambda fn=fn, arg=arg: fn(arg))
    return f"uid/gid {os.getuid()}/{os.getgid()}, setuid/setgid/setgroups refused"


@probe("identity", "capabilities")
def id_caps():
    st = status_fields()
    bad = {k: st[k] for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")
           if int(st.get(k, "0"), 16)}
    if bad:
        raise Escaped(f"capabilities held: {bad}")
    return "CapInh, CapPrm, CapEff, CapBnd, CapAmb all empty"


@probe("identity", "no-new-privs-and-seccomp")
def id_nnp():
    st = status_fields()
    if st.get("NoNewPrivs") != "1":
        raise Escaped(f"NoNewPrivs is {st.get('NoNewPrivs')}")
    if st.get("Seccomp") != "2":
        raise Escaped(f"Seccomp mode is {st.get('Seccomp')}, not 2 (filter)")
    return "NoNewPrivs 1, Seccomp 2"


@probe("identity", "setuid-binaries")
def id_setuid():
    found = []
    for d in ("/usr/bin", "/usr/sbin", "/usr/lib/dbus-1.0", "/usr/lib/openssh"):
        try:
            for e in os.scandir(d):
                try:
                    if e.is_file(follow_symlinks=False) and e.stat().st_mode & (stat.S_ISUID | stat.S_ISGID):
                        found.append(e.path)
                except OSError:
                    pass
        except OSError:
            pass
    nosuid = {ln.split()[4] for ln in open("/proc/self/mountinfo") if "nosuid" in ln.split()[5]}
    st = status_fields()
    gaining = [p for p in found if not any(p.startswith(m.rstrip("/") + "/") for m in nosuid)]
    if gaining and st.get("NoNewPrivs") != "1":
        raise Escaped("setuid binaries on suid mounts without no_new_privs: " + ", ".join(gaining[:5]))
    return f"{len(found)} setuid/setgid files, all on nosuid mounts or ignored (no_new_privs)"


@probe("identity", "rlimit-raise")
def id_rlimits():
    import resource
    done = []
    for name in ("RLIMIT_NOFILE", "RLIMIT_NPROC", "RLIMIT_FSIZE", "RLIMIT_AS", "RLIMIT_CORE"):
        r = getattr(resource, name)
        soft, hard = resource.getrlimit(r)
        if hard == resource.RLIM_INFINITY:
            continue
        try:
            resource.setrlimit(r, (soft, hard + 1))
        except (ValueError, OSError):
            done.append(name)
            continue
        raise Escaped(f"raised the hard {name} above {hard}")
    return "hard limits cannot be raised: " + (", ".join(done) or "(all unlimited)")


# ------------------------------------------------------------------ kernel

HOSTILE = [
    "unshare", "setns", "mount", "umount2", "fsopen", "fsconfig", "fsmount", "fspick",
    "move_mount", "open_tree", "mount_setattr", "pivot_root", "chroot", "keyctl", "add_key",
    "request_key", "bpf", "perf_event_open", "userfaultfd", "io_uring_setup",
    "io_uring_enter", "io_uring_register", "ptrace", "process_vm_readv", "process_vm_writev",
    "process_madvise", "kcmp", "pidfd_getfd", "open_by_handle_at", "name_to_handle_at",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot",
    "swapon", "swapoff", "iopl", "ioperm", "modify_ldt", "acct", "syslog", "quotactl",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "sethostname",
    "setdomainname", "fanotify_init", "clone3",
    "clone CLONE_NEWUSER", "clone CLONE_NEWNS", "clone CLONE_NEWPID", "clone CLONE_NEWNET",
    "clone CLONE_NEWIPC", "clone CLONE_NEWUTS", "clone CLONE_NEWCGROUP",
    "clone CLONE_NEWNS|high bits", "personality READ_IMPLIES_EXEC",
    "personality ADDR_NO_RANDOMIZE", "prctl PR_SET_MM", "seccomp NEW_LISTENER",
    "x32 getpid", "i386 getpid",
]
TTY = ["ioctl TIOCSTI", "ioctl TIOCSTI|high bits", "ioctl TIOCSTI|all high bits",
       "ioctl TIOCLINUX", "ioctl TIOCLINUX|high bits", "ioctl TIOCSETD", "ioctl TIOCSETD|high bits"]


def filtered(v):
    return v in (errno.EPERM, errno.ENOSYS, errno.EACCES) or (isinstance(v, str) and v.startswith("SIG"))


def try_calls(names):
    import try_syscall
    out, can_fork = {}, True
    for n in names:
        r = try_syscall.run_forked(n) if can_fork else None
        if r is None:
            can_fork = False
            r = "skipped: no fork" if n in try_syscall.KILLERS else try_syscall.call(n)
        out[n] = r
    return out


@probe("kernel", "denied-syscalls")
def k_denied():
    got = try_calls(HOSTILE)
    bad = [f"{n}={ename(v) if isinstance(v, int) else v}" for n, v in got.items()
           if not filtered(v) and v != "skipped: no fork"]
    if bad:
        raise Escaped("reached the kernel (not EPERM/ENOSYS/SIGSYS): " + ", ".join(bad))
    return f"{len(got)} calls refused by the filter (EPERM/ENOSYS/SIGSYS, never EFAULT)"


@probe("kernel", "tiocsti")
def k_tiocsti():
    got = try_calls(TTY)
    bad = [f"{n}={ename(v) if isinstance(v, int) else v}" for n, v in got.items() if not filtered(v)]
    if bad:
        raise Escaped("terminal injection ioctls reached the kernel: " + ", ".join(bad))
    return "TIOCSTI/TIOCLINUX/TIOCSETD refused, high-bits forms included"


@probe("kernel", "line-disciplines")
def k_ldisc():
    """No line discipline but N_TTY on the jail's own pty: TIOCSETD is
    refused whole (n_gsm, n_hdlc and the rest are kernel attack surface)."""
    import fcntl
    import struct
    m, s = os.openpty()
    try:
        for ld, name in ((21, "N_GSM"), (13, "N_HDLC"), (1, "N_SLIP"), (0, "N_TTY")):
            try:
                fcntl.ioctl(s, 0x5423, struct.pack("i", ld))  # TIOCSETD
            except OSError as e:
                if e.errno != errno.EPERM:
                    raise Escaped(f"TIOCSETD {name} on a pty reached the kernel ({ename(e.errno)})")
                continue
            raise Escaped(f"TIOCSETD {name} on a pty was accepted")
    finally:
        os.close(m)
        os.close(s)
    return "TIOCSETD refused (EPERM) on the jail's own pty for N_GSM, N_HDLC, N_SLIP and N_TTY"


@probe("kernel", "nested-user-namespace")
def k_userns():
    CLONE_NEWUSER = 0x10000000
    try:
        pid = os.fork()
    except OSError:
        pid = None
    if pid == 0:
        os._exit(0 if libc.unshare(CLONE_NEWUSER) == 0 else 1)
    if pid is None:  # no fork: try in-process (a success is then permanent for this run)
        if libc.unshare(CLONE_NEWUSER) == 0:
            raise Escaped("unshare(CLONE_NEWUSER) succeeded")
        return f"unshare(CLONE_NEWUSER) refused ({ename(ctypes.get_errno())})"
    _, st = os.waitpid(pid, 0)
    if os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0:
        raise Escaped("unshare(CLONE_NEWUSER) succeeded")
    return "unshare(CLONE_NEWUSER) refused"


# ------------------------------------------------------------------ leaks

@probe("leaks", "environment")
def leak_env():
    tok = C["token"]
    for k, v in os.environ.items():
        if tok in v or k == C["env_name"]:
            raise Escaped(f"host variable {k} visible")
    for p in ("/proc/self/environ", "/proc/1/environ"):
        try:
            if tok.encode() in open(p, "rb").read():
                raise Escaped(f"host canary in {p}")
        except OSError:
            pass
    return f"{C['env_name']} not in the environment: {sorted(os.environ)}"


@probe("leaks", "fds")
def leak_fds():
    extra = []
    for fd in range(4, 4096):
        try:
            os.fstat(fd)
        except OSError:
            continue
        try:
            extra.append(f"{fd} -> {os.readlink(f'/proc/self/fd/{fd}')}")
        except OSError:
            extra.append(str(fd))
    if extra:
        raise Escaped("fds beyond 0-3 open: " + ", ".join(extra[:5]))
    try:
        st = os.fstat(3)
        if not stat.S_ISSOCK(st.st_mode):
            raise Escaped("fd 3 is not the tool socket")
    except OSError:
        pass
    return "only fds 0-3 are open"


@probe("leaks", "hostname")
def leak_hostname():
    name = socket.gethostname()
    if name == C.get("host_hostname"):
        raise Escaped(f"the host's hostname {name!r} is visible")
    return f"hostname is {name!r}"


# ------------------------------------------------------------------ bridge

def bridge_sock():
    s = socket.socket(fileno=os.dup(3))
    s.settimeout(10)
    return s


def rpc(s, msg):
    s.send(json.dumps(msg).encode())
    while True:
        r = json.loads(s.recv(8 << 20))
        if r.get("id") == msg.get("id"):
            return r


@probe("bridge", "garbage-and-oversized")
def br_garbage():
    s = bridge_sock()
    for pkt in (b"\xff\xfe garbage", b"{", b"[]", b"{\"jsonrpc\": \"2.0\", \"id\": {}}"):
        s.send(pkt)
    try:
        s.send(b"[" + b" " * (5 << 20) + b"]")
    except OSError:
        pass
    s.settimeout(0.5)
    try:
        while True:
            s.recv(8 << 20)
    except (socket.timeout, BlockingIOError):
        pass
    s.settimeout(10)
    r = rpc(s, {"jsonrpc": "2.0", "id": "after", "method": "tools/list"})
    if "result" not in r and "error" not in r:
        raise Escaped(f"no answer after garbage: {r}")
    return "garbage and a 5 MiB packet were refused; the supervisor still answers"


@probe("bridge", "outside-allowlist")
def br_allowlist():
    s = bridge_sock()
    listed = rpc(s, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    allowed = {t["name"] for t in listed.get("result", {}).get("tools", [])}
    for i, name in enumerate(["pycell-probe.not_allowed", "*", "../etc", "", "a.*",
                              "pycell-probe.*", "\u0000x"]):
        if name in allowed:
            continue
        r = rpc(s, {"jsonrpc": "2.0", "id": 100 + i, "method": "tools/call",
                    "params": {"name": name, "arguments": {}}})
        if "error" not in r and not r.get("result", {}).get("isError"):
            raise Escaped(f"call to {name!r} outside the allowlist succeeded: {str(r)[:100]}")
    return f"calls outside the allowlist refused ({len(allowed)} tools allowed)"


@probe("bridge", "call-flood")
def br_flood():
    s = bridge_sock()
    n = 500
    for i in range(n):
        s.send(json.dumps({"jsonrpc": "2.0", "id": 1000 + i, "method": "tools/call",
                           "params": {"name": "pycell-probe.flood", "arguments": {}}}).encode())
    ok = errs = 0
    s.settimeout(10)
    try:
        while ok + errs < n:
            r = json.loads(s.recv(8 << 20))
            if "error" in r or r.get("result", {}).get("isError"):
                errs += 1
            else:
                ok += 1
    except socket.timeout:
        pass
    if ok:
        raise Escaped(f"{ok} of {n} flooded calls to a tool outside the allowlist succeeded")
    r = rpc(s, {"jsonrpc": "2.0", "id": "after", "method": "ping"})
    return f"{errs} of {n} flooded calls answered with errors; supervisor still answers ({'result' in r})"


# ------------------------------------------------------------------ resources
# One bomb per run; each prints {"verdict": ...} when it ends by itself.

def verdict(status, reason):
    print(json.dumps({"verdict": status, "reason": reason}), flush=True)


def bomb_fork(lim):
    cap = 4 * lim["pids"] + 16
    n = 0
    for _ in range(cap):
        try:
            pid = os.fork()
        except OSError as e:
            return verdict("contained" if n < lim["pids"] else "escaped",
                           f"fork failed with {ename(e.errno)} after {n} children (pids {lim['pids']})")
        if pid == 0:
            signal.pause()
            os._exit(0)
        n += 1
    verdict("escaped", f"{n} children created, the pids limit {lim['pids']} did not hold")


def bomb_thread(lim):
    import threading
    cap = 4 * lim["pids"] + 16
    n = 0
    ev = threading.Event()
    for _ in range(cap):
        try:
            threading.Thread(target=ev.wait, daemon=True).start()
        except RuntimeError as e:
            return verdict("contained" if n < lim["pids"] else "escaped",
                           f"thread start failed ({e}) after {n} threads (pids {lim['pids']})")
        n += 1
    verdict("escaped", f"{n} threads started, the pids limit {lim['pids']} did not hold")


def bomb_memory(lim):
    cap = 4 * lim["memory"]
    keep, total = [], 0
    try:
        while total < cap:
            keep.append(bytearray(b"\x01") * (1 << 20))
            total += 1 << 20
    except MemoryError:
        return verdict("contained" if total <= lim["memory"] else "escaped",
                       f"MemoryError after {total >> 20} MiB (limit {lim['memory'] >> 20} MiB)")
    verdict("escaped", f"allocated {total >> 20} MiB, limit {lim['memory'] >> 20} MiB")


def bomb_tmp(lim):
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    chunk = b"\0" * (1 << 20)
    out = []
    for d, size in (("/tmp", lim["tmp"]), (os.getcwd(), lim["workspace"])):
        total, i, cap = 0, 0, 2 * size + (4 << 20)
        while total < cap:
            try:
                with open(f"{d}/pycell-fill-{i}", "wb") as f:
                    while total < cap:
                        total += f.write(chunk)
            except OSError as e:
                if e.errno in (errno.EFBIG,):
                    i += 1
                    continue
                break
        if total > size + (1 << 20):
            return verdict("escaped", f"wrote {total >> 20} MiB to {d}, size {size >> 20} MiB")
        out.append(f"{d}: {total >> 20} MiB of {size >> 20}")
    verdict("contained", "filled: " + ", ".join(out))


def bomb_fds(lim):
    fds = []
    try:
        while len(fds) < 1 << 16:
            fds.append(os.open("/dev/null", os.O_RDONLY))
    except OSError as e:
        n = len(fds) + 4
        return verdict("contained" if n <= lim["open_files"] + 8 else "escaped",
                       f"{ename(e.errno)} after {n} fds (open_files {lim['open_files']})")
    verdict("escaped", f"opened {len(fds)} fds, open_files {lim['open_files']}")


def bomb_output(lim):
    chunk = b"x" * (1 << 20)
    for _ in range(64):
        os.write(2, chunk)
    verdict("flooded", "wrote 64 MiB to stderr")


def bomb_cpu(lim):
    while True:
        pass


BOMBS = {"fork-bomb": bomb_fork, "thread-bomb": bomb_thread, "memory-bomb": bomb_memory,
         "tmp-fill": bomb_tmp, "fd-exhaustion": bomb_fds, "output-flood": bomb_output,
         "cpu-spin": bomb_cpu}


def main():
    cat = sys.argv[1] if len(sys.argv) > 1 else ""
    if cat == "--list":
        for c, items in PROBES.items():
            for n, _ in items:
                print(f"{c}/{n}")
        for c, items in EGRESS_PROBES.items():
            for n, _ in items:
                print(f"{c}/{n} (egress policies)")
        for n in BOMBS:
            print(f"resources/{n}")
        return 0
    if cat.startswith("resources/"):
        BOMBS[cat.split("/", 1)[1]](C["limits"])
        return 0
    items = PROBES.get(cat)
    if items is not None and EGRESS:
        items = items + EGRESS_PROBES.get(cat, [])
    if items is None:
        print(f"probe: unknown category {cat!r}", file=sys.stderr)
        return 2
    print(json.dumps({"plan": [n for n, _ in items]}), flush=True)
    for name, fn in items:
        try:
            report(name, "contained", fn())
        except Escaped as e:
            report(name, "escaped", str(e))
        except Exception as e:  # a probe that could not decide
            report(name, "error", f"{type(e).__name__}: {e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
