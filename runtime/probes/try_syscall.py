"""try_syscall: call system calls with harmless bad arguments and report
what the kernel (or the seccomp filter in front of it) answered.

Run inside the jail (`pycell run runtime/probes/try_syscall.py [NAME...]`) or
anywhere else.  Every probe's arguments are chosen so that a call that gets
past the filter fails cheaply in the kernel's own argument checks (a bad
pointer: EFAULT, a bad fd: EBADF, bad flags: EINVAL), while a filtered call
answers ENOSYS or EPERM (or the process is killed).  So a test can tell
"allowed" from "filtered" by the errno alone.

Output: one JSON object on stdout,
  {"arch": "x86_64", "results": {NAME: RESULT, ...}}
where RESULT is 0 (the call succeeded), an errno number, or "SIGSYS"-style
the name of the signal that killed the probe.  Each probe runs in a forked
child when fork is allowed, so a killed or forking probe ends only itself.

`--list` prints the probe names.  No names: every probe.
Only x86_64: the numbers below are that table's (the jail runs the host's
native architecture only).
"""

import ctypes
import json
import mmap
import os
import platform
import signal
import sys

PIPE = object()  # the read end of a fresh pipe
BUF = object()   # a writable 256-byte buffer
HI = 1 << 32     # a high bit the kernel ignores in 32-bit arguments

# x86_64 syscall numbers
NR = dict(
    read=0, ioctl=16, getpid=39, socket=41, socketpair=53, clone=56, fork=57, vfork=58,
    uname=63, shmget=29, getppid=110, mkdir=83, personality=135, modify_ldt=154,
    pivot_root=155, prctl=157, adjtimex=159, chroot=161, acct=163, settimeofday=164,
    mount=165, umount2=166, swapon=167, swapoff=168, reboot=169, sethostname=170,
    setdomainname=171, iopl=172, ioperm=173, init_module=175, delete_module=176,
    quotactl=179, sched_setaffinity=203, io_setup=206, clock_settime=227, mlock=149,
    kexec_load=246, add_key=248, request_key=249, keyctl=250, openat=257,
    unshare=272, vmsplice=278, fanotify_init=300, name_to_handle_at=303,
    open_by_handle_at=304, clock_adjtime=305, syncfs=306, setns=308,
    process_vm_readv=310, process_vm_writev=311, kcmp=312, finit_module=313,
    seccomp=317, bpf=321, userfaultfd=323, kexec_file_load=320, perf_event_open=298,
    syslog=103, ptrace=101, io_uring_setup=425, io_uring_enter=426,
    io_uring_register=427, open_tree=428, move_mount=429, fsopen=430, fsconfig=431,
    fsmount=432, fspick=433, pidfd_getfd=438, process_madvise=440, mount_setattr=442,
    clone3=435,
)

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
CLONE_THREAD = 0x00010000
CLONE_FS = 0x00000200
CLONE_VM = 0x00000100
CLONE_VFORK = 0x00004000
SIGCHLD = 17
TIOCSTI = 0x5412
TIOCLINUX = 0x541C
TIOCSETD = 0x5423
TCGETS = 0x5401
FIONREAD = 0x541B
AF_UNIX, AF_INET, AF_INET6, AF_NETLINK, AF_PACKET, AF_VSOCK = 1, 2, 10, 16, 17, 40
SOCK_STREAM, SOCK_DGRAM, SOCK_RAW = 1, 2, 3
PR_GET_DUMPABLE, PR_SET_NAME, PR_SET_MM, PR_SET_MM_MAP_SIZE = 3, 15, 35, 15
SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER = 1, 8
AT_FDCWD = -100
BAD = 1  # a pointer that faults

# name -> (syscall, args); None: machine code of its own (see call())
PROBES = {
    # the known-hostile set
    "unshare": ("unshare", [0x1]),
    "setns": ("setns", [-1, 0]),
    "mount": ("mount", [BAD, BAD, BAD, 0, BAD]),
    "umount2": ("umount2", [BAD, 0]),
    "fsopen": ("fsopen", [BAD, 0]),
    "fsconfig": ("fsconfig", [-1, 0xdead, 0, 0, 0]),
    "fsmount": ("fsmount", [-1, 0, 0]),
    "fspick": ("fspick", [-1, BAD, 0]),
    "move_mount": ("move_mount", [-1, BAD, -1, BAD, 0]),
    "open_tree": ("open_tree", [-1, BAD, 0]),
    "mount_setattr": ("mount_setattr", [-1, BAD, 0, BAD, 0]),
    "pivot_root": ("pivot_root", [BAD, BAD]),
    "chroot": ("chroot", [BAD]),
    "keyctl": ("keyctl", [0xdead]),
    "add_key": ("add_key", [BAD, BAD, 0, 0, 0]),
    "request_key": ("request_key", [BAD, BAD, 0, 0]),
    "bpf": ("bpf", [0xdead, 0, 0]),
    "perf_event_open": ("perf_event_open", [BAD, 0, -1, -1, 0]),
    "userfaultfd": ("userfaultfd", [0xdead0000]),
    "io_uring_setup": ("io_uring_setup", [0, BAD]),
    "io_uring_enter": ("io_uring_enter", [-1, 0, 0, 0, 0, 0]),
    "io_uring_register": ("io_uring_register", [-1, 0, 0, 0]),
    "ptrace": ("ptrace", [0xdead, 0, 0, 0]),
    "process_vm_readv": ("process_vm_readv", [0, 0, 0, 0, 0, 1]),
    "process_vm_writev": ("process_vm_writev", [0, 0, 0, 0, 0, 1]),
    "process_madvise": ("process_madvise", [-1, 0, 0, 0, 0]),
    "kcmp": ("kcmp", [0, 0, 0xdead, 0, 0]),
    "pidfd_getfd": ("pidfd_getfd", [-1, 0, 0]),
    "open_by_handle_at": ("open_by_handle_at", [-1, BAD, 0]),
    "name_to_handle_at": ("name_to_handle_at", [-1, BAD, BAD, BAD, 0]),
    "kexec_load": ("kexec_load", [0, 0, 0, 0xdead0000]),
    "kexec_file_load": ("kexec_file_load", [-1, -1, 0, 0, 0xdead0000]),
    "init_module": ("init_module", [BAD, 0, BAD]),
    "finit_module": ("finit_module", [-1, BAD, 0]),
    "delete_module": ("delete_module", [BAD, 0]),
    "reboot": ("reboot", [0, 0, 0, 0]),       # wrong magic: EINVAL if it got through
    "swapon": ("swapon", [BAD, 0]),
    "swapoff": ("swapoff", [BAD]),
    "iopl": ("iopl", [4]),
    "ioperm": ("ioperm", [0x10000, 8, 0]),
    "modify_ldt": ("modify_ldt", [0xdead, 0, 0]),
    "acct": ("acct", [BAD]),                  # never NULL: that turns accounting off
    "syslog": ("syslog", [0xdead, 0, 0]),
    "quotactl": ("quotactl", [0xdead0000, BAD, 0, 0]),
    "settimeofday": ("settimeofday", [BAD, BAD]),
    "clock_settime": ("clock_settime", [0x7fff, BAD]),
    "clock_adjtime": ("clock_adjtime", [0x7fff, BAD]),
    "adjtimex": ("adjtimex", [BAD]),
    "sethostname": ("sethostname", [BAD, 100000]),
    "setdomainname": ("setdomainname", [BAD, 100000]),
    "fanotify_init": ("fanotify_init", [0xdead0000, 0]),
    # clone3: ENOSYS so glibc falls back to clone
    "clone3": ("clone3", [BAD, 0]),
    # clone with namespace flags; CLONE_THREAD without CLONE_SIGHAND makes
    # a call that gets through fail with EINVAL
    "clone CLONE_NEWUSER": ("clone", [CLONE_NEWUSER | CLONE_THREAD]),
    "clone CLONE_NEWNS": ("clone", [CLONE_NEWNS | CLONE_THREAD]),
    "clone CLONE_NEWPID": ("clone", [CLONE_NEWPID | CLONE_THREAD]),
    "clone CLONE_NEWNET": ("clone", [CLONE_NEWNET | CLONE_THREAD]),
    "clone CLONE_NEWIPC": ("clone", [CLONE_NEWIPC | CLONE_THREAD]),
    "clone CLONE_NEWUTS": ("clone", [CLONE_NEWUTS | CLONE_THREAD]),
    "clone CLONE_NEWCGROUP": ("clone", [CLONE_NEWCGROUP | CLONE_THREAD]),
    "clone CLONE_NEWNS|high bits": ("clone", [HI | CLONE_NEWNS | CLONE_THREAD]),
    "clone CLONE_THREAD": ("clone", [CLONE_THREAD]),
    "fork": ("fork", []),
    "vfork": None,
    "clone fork": ("clone", [SIGCHLD, 0, 0, 0, 0]),
    # ioctl: TIOCSTI/TIOCLINUX/TIOCSETD refused on the low 32 bits of the request
    "ioctl TIOCSTI": ("ioctl", [PIPE, TIOCSTI, BAD]),
    "ioctl TIOCSTI|high bits": ("ioctl", [PIPE, HI | TIOCSTI, BAD]),
    "ioctl TIOCSTI|all high bits": ("ioctl", [PIPE, 0xffffffff00000000 | TIOCSTI, BAD]),
    "ioctl TIOCLINUX": ("ioctl", [PIPE, TIOCLINUX, BAD]),
    "ioctl TIOCLINUX|high bits": ("ioctl", [PIPE, HI | TIOCLINUX, BAD]),
    "ioctl TIOCSETD": ("ioctl", [PIPE, TIOCSETD, BAD]),
    "ioctl TIOCSETD|high bits": ("ioctl", [PIPE, HI | TIOCSETD, BAD]),
    "ioctl TCGETS": ("ioctl", [PIPE, TCGETS, BUF]),
    "ioctl TCGETS|high bits": ("ioctl", [PIPE, HI | TCGETS, BUF]),
    "ioctl TIOCSTI+1": ("ioctl", [PIPE, TIOCSTI + 1, BUF]),
    "ioctl FIONREAD": ("ioctl", [PIPE, FIONREAD, BUF]),
    # socket families (only socket(): nothing connects anywhere)
    "socket AF_UNIX": ("socket", [AF_UNIX, SOCK_STREAM, 0]),
    "socket AF_INET": ("socket", [AF_INET, SOCK_STREAM, 0]),
    "socket AF_INET6": ("socket", [AF_INET6, SOCK_DGRAM, 0]),
    "socket AF_INET|high bits": ("socket", [HI | AF_INET, SOCK_STREAM, 0]),
    "socket AF_NETLINK": ("socket", [AF_NETLINK, SOCK_RAW, 0]),
    "socket AF_PACKET": ("socket", [AF_PACKET, SOCK_RAW, 0]),
    "socket AF_VSOCK": ("socket", [AF_VSOCK, SOCK_STREAM, 0]),
    "socket AF_VSOCK|high bits": ("socket", [HI | AF_VSOCK, SOCK_STREAM, 0]),
    "socket AF_UNIX|high bits": ("socket", [HI | AF_UNIX, SOCK_STREAM, 0]),
    "socketpair AF_UNIX": ("socketpair", [AF_UNIX, SOCK_STREAM, 0, BUF]),
    "socketpair AF_INET": ("socketpair", [AF_INET, SOCK_STREAM, 0, BUF]),
    # personality: the default persona and the query only
    "personality query": ("personality", [0xffffffff]),
    "personality PER_LINUX": ("personality", [0]),
    "personality READ_IMPLIES_EXEC": ("personality", [0x0400000]),
    "personality ADDR_NO_RANDOMIZE": ("personality", [0x0040000]),
    "personality high bits": ("personality", [HI]),
    # prctl: a safe set
    "prctl PR_GET_DUMPABLE": ("prctl", [PR_GET_DUMPABLE]),
    "prctl PR_SET_NAME": ("prctl", [PR_SET_NAME, BUF]),
    "prctl PR_SET_MM": ("prctl", [PR_SET_MM, PR_SET_MM_MAP_SIZE, BAD]),
    "prctl PR_GET_DUMPABLE|high bits": ("prctl", [HI | PR_GET_DUMPABLE]),
    # seccomp: more filters, but no flags (no listener, no TSYNC)
    "seccomp SET_MODE_FILTER": ("seccomp", [SECCOMP_SET_MODE_FILTER, 0, BAD]),
    "seccomp NEW_LISTENER": ("seccomp", [SECCOMP_SET_MODE_FILTER,
                                         SECCOMP_FILTER_FLAG_NEW_LISTENER, BAD]),
    # not on the allowlist: ENOSYS
    "syncfs": ("syncfs", [-1]),
    "vmsplice": ("vmsplice", [-1, 0, 0, 0]),
    "mlock": ("mlock", [0, 0]),
    "io_setup": ("io_setup", [0, BAD]),
    # other architectures' calling conventions: killed
    "x32 getpid": None,
    "i386 getpid": None,
    # allowed, and they work
    "getpid": ("getpid", []),
    "read -1": ("read", [-1, BAD, 1]),
    "openat bad path": ("openat", [AT_FDCWD, BAD, 0]),
    "mkdir bad path": ("mkdir", [BAD, 0o700]),
    "shmget size 0": ("shmget", [0, 0, 0]),
    "sched_setaffinity bad mask": ("sched_setaffinity", [0, 8, BAD]),
}

FORKING = {"fork", "vfork", "clone fork"}
KILLERS = {"x32 getpid", "i386 getpid"}

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def raw_syscall(nr, args):
    # always six: the kernel must not see stale registers as arguments
    cargs = [ctypes.c_ulong(a & 0xffffffffffffffff) for a in list(args) + [0] * (6 - len(args))]
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *cargs)
    return r, ctypes.get_errno()


def run_code(code):
    """Call machine code that returns a value in rax."""
    m = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    m.write(code)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
    return ctypes.CFUNCTYPE(ctypes.c_long)(addr)()


def i386_getpid():
    # mov eax, 20 (getpid in the i386 table); int 0x80; ret
    return run_code(b"\xb8\x14\x00\x00\x00\xcd\x80\xc3")


def vfork_exit():
    """vfork; the child leaves at once with exit_group(0), before touching
    the stack it shares with us.  Returns the pid or -errno."""
    return run_code(b"\xb8\x3a\x00\x00\x00"   # mov eax, 58 (vfork)
                    b"\x0f\x05"                # syscall
                    b"\x48\x85\xc0"            # test rax, rax
                    b"\x75\x09"                # jnz ret
                    b"\xb8\xe7\x00\x00\x00"   # mov eax, 231 (exit_group)
                    b"\x31\xff"                # xor edi, edi
                    b"\x0f\x05"                # syscall
                    b"\xc3")                   # ret


def call(name):
    """Make the call in this process: 0 or an errno."""
    if name == "x32 getpid":
        r, e = raw_syscall(0x40000000 | NR["getpid"], [])
        return 0 if r >= 0 else e
    if name == "i386 getpid":
        return 0 if i386_getpid() >= 0 else -1
    if name == "vfork":
        r = vfork_exit()
        if r > 0:
            os.waitpid(r, 0)
        return 0 if r >= 0 else -r
    sysname, args = PROBES[name]
    rd, wr = os.pipe()
    buf = ctypes.create_string_buffer(b"pycell", 256)
    real = []
    for a in args:
        if a is PIPE:
            real.append(rd)
        elif a is BUF:
            real.append(ctypes.addressof(buf))
        else:
            real.append(a)
    me = os.getpid()
    r, e = raw_syscall(NR[sysname], real)
    if os.getpid() != me:
        os._exit(0)  # a fork that got through: the new child leaves at once
    if name in FORKING and r > 0:
        try:
            os.waitpid(r, 0)
        except ChildProcessError:
            pass
    os.close(rd)
    os.close(wr)
    return 0 if r >= 0 else e


def run_forked(name):
    """Run one probe in a child; None when this process may not fork."""
    rd, wr = os.pipe()
    try:
        pid = os.fork()
    except PermissionError:
        os.close(rd)
        os.close(wr)
        return None
    if pid == 0:
        os.close(rd)
        try:
            res = call(name)
            os.write(wr, json.dumps(res).encode())
        finally:
            os._exit(0)
    os.close(wr)
    data = b""
    while True:
        chunk = os.read(rd, 4096)
        if not chunk:
            break
        data += chunk
    os.close(rd)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return signal.Signals(os.WTERMSIG(status)).name
    return json.loads(data) if data else "no result"


def main(argv):
    if platform.machine() != "x86_64":
        print(f"try_syscall: only x86_64 is supported, not {platform.machine()}", file=sys.stderr)
        return 2
    if argv[1:2] == ["--list"]:
        print("\n".join(PROBES))
        return 0
    names = argv[1:] or list(PROBES)
    unknown = [n for n in names if n not in PROBES]
    if unknown:
        print(f"try_syscall: unknown probe(s): {', '.join(unknown)}", file=sys.stderr)
        return 2
    results = {}
    can_fork = True
    for name in names:
        res = run_forked(name) if can_fork else None
        if res is None:
            can_fork = False
            # killers and forks cannot run in this process
            res = "skipped: no fork" if name in KILLERS else call(name)
        results[name] = res
    json.dump({"arch": platform.machine(), "results": results}, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
