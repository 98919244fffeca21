"""Run a command the way a container's default seccomp profile (Docker's,
Podman's) would let it: clone3 answers ENOSYS, so that glibc falls back to
clone, whose flags a filter can read; clone and unshare with CLONE_NEWUSER
answer EPERM.  A host where pycell, even as root, cannot make namespaces.

    python3 container_seccomp.py COMMAND [ARGS...]
"""
import ctypes
import errno
import os
import sys

SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_CMP_MASKED_EQ = 7
CLONE_NEWUSER = 0x10000000


class ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64),
                ("datum_b", ctypes.c_uint64)]


def errno_action(e):
    return 0x00050000 | e


def main():
    lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
                                           ctypes.POINTER(ArgCmp)]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    ctx = lib.seccomp_init(SCMP_ACT_ALLOW)
    assert ctx, "seccomp_init"
    nr = lib.seccomp_syscall_resolve_name
    assert lib.seccomp_rule_add_array(ctx, errno_action(errno.ENOSYS), nr(b"clone3"), 0, None) == 0
    newuser = ArgCmp(0, SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER)
    for name in (b"clone", b"unshare"):
        assert lib.seccomp_rule_add_array(ctx, errno_action(errno.EPERM), nr(name), 1, ctypes.byref(newuser)) == 0
    assert lib.seccomp_load(ctx) == 0, "seccomp_load"
    os.execvp(sys.argv[1], sys.argv[1:])


if __name__ == "__main__":
    main()
