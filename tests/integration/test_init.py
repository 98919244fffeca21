"""pycell-init (src/jail/init_main.c) run by hand, outside a jail: what it
says to a user who runs it, and the errors it reports to the supervisor on
the sync socket, byte for byte.  On x86_64 it has no C library (its calls
are init_rt.c's system calls): these are its parser, its messages and its
signals in the wild.  The jails' own use of it is test_warm's and
test_sessions'."""
import os
import signal
import socket
import struct
import subprocess
import time
from pathlib import Path

import pytest

from conftest import DATADIR, PYCELL

INIT = Path(DATADIR) / "pycell-init"
USAGE = b"pycell-init: the init of a jail pycell's zygote makes; not a command\n"
# struct jail_msg (src/jail/jail.h): type, wait status, cpu us, maxrss kB,
# then struct pc_err: errnum, step[32], msg[480]; 8-aligned
JAIL_MSG = struct.Struct("=iiqqi32s480s4x")
JAIL_MSG_ERROR, JAIL_MSG_EXIT = 1, 2


@pytest.mark.parametrize("argv", [[], ["1", "2", "3"], ["1", "2", "3", "0", "5"], ["x", "2", "3", "0"],
                                  ["1", "0", "3", "0"], ["1", "2", "3", "2"], ["1", "-2", "3", "0"],
                                  ["1", "2147483648", "3", "0"], ["", "2", "3", "0"], ["1", "2", "3", "01x"]])
def test_by_hand_it_says_it_is_not_a_command(argv):
    r = subprocess.run([str(INIT)] + argv, capture_output=True, timeout=10)
    assert (r.returncode, r.stdout, r.stderr) == (2, b"", USAGE)


def caught(pid):
    """the signals pid has handlers for (SigCgt)"""
    with open(f"/proc/{pid}/status") as f:
        return int(next(l for l in f if l.startswith("SigCgt:")).split()[1], 16)


def error_from(sock):
    m = JAIL_MSG.unpack(sock.recv(1024))
    return m[0], m[4], m[5].rstrip(b"\0"), m[6].rstrip(b"\0")


def test_a_ready_pipe_it_cannot_write_is_reported():
    """Told a ready pipe that is not open: the error, with glibc's words
    for EBADF, on the sync socket, and exit 127."""
    sup, init = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with sup, init:
        p = subprocess.Popen([str(INIT), str(init.fileno()), str(os.getpid()), "999", "0"],
                             pass_fds=[init.fileno()], stdin=subprocess.DEVNULL)
        assert p.wait(timeout=10) == 127
        assert error_from(sup) == (JAIL_MSG_ERROR, 9, b"warm", b"tell python that init is ready: Bad file descriptor")


def test_a_ready_init_reports_a_bad_start_message_and_forwards_signals():
    """A ready jail's init (PARK 1): it writes python's go byte and names
    itself pycell-ready; a signal it forwards reaches python (here a
    sleeping child of ours, whose pid it is given); a start message of the
    wrong size is EPROTO, reported in glibc's words."""
    sup, init = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    rd, wr = os.pipe()
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        p = subprocess.Popen([str(INIT), str(init.fileno()), str(sleeper.pid), str(wr), "1"],
                             pass_fds=[init.fileno(), wr], stdin=subprocess.DEVNULL)
        os.close(wr)
        init.close()
        assert os.read(rd, 2) == b"g" and os.read(rd, 1) == b""
        with open(f"/proc/{p.pid}/comm") as f:
            assert f.read() == "pycell-ready\n"
        # its handlers come after the go byte: a signal before them would
        # end it (here, outside a jail, nothing blocks them at the exec)
        deadline = time.monotonic() + 10
        while not caught(p.pid) & (1 << (signal.SIGUSR1 - 1)) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert caught(p.pid) & (1 << (signal.SIGUSR1 - 1) | 1 << (signal.SIGCHLD - 1)) == \
            1 << (signal.SIGUSR1 - 1) | 1 << (signal.SIGCHLD - 1)
        p.send_signal(signal.SIGUSR1)
        assert sleeper.wait(timeout=10) == -signal.SIGUSR1
        sup.send(b"x")
        assert p.wait(timeout=10) == 127
        assert error_from(sup) == (JAIL_MSG_ERROR, 71, b"warm",
                                   b"bad start message for a ready jail: Protocol error")
    finally:
        sleeper.kill()
        sleeper.wait()
        os.close(rd)
        sup.close()


SRC = Path(__file__).resolve().parents[2]
SMASH = r"""
#include <string.h>
#include <unistd.h>
static void copy(const char *s, size_t n)
{
	char b[8];
	memcpy(b, s, n);
	__asm__ volatile("" :: "r"(b) : "memory");
}
int main(int argc, char **argv)
{
	static const char big[64] = "0123456789abcdef0123456789abcdef";
	(void)argv;
	copy(big, argc > 1 ? sizeof(big) : 4);
	return write(1, "clean\n", 6) == 6 ? 0 : 1;
}
"""


@pytest.mark.parametrize("flags", ["-O0 -fstack-protector-all", "-O2 -fstack-protector-all",
                                   "-O2 -fstack-protector-strong -D_FORTIFY_SOURCE=2"])
def test_its_runtime_under_each_stack_protector(tmp_path, flags):
    """init_rt.c built with the CFLAGS a user may give: pycell-init starts
    (a canary check before the start sets the thread pointer would read
    %fs:0x28 with %fs 0, and die of SIGSEGV, as it did with -O0
    -fstack-protector-all), and a stack overrun is caught (exit 127 and
    the message) where the same program without it runs clean.  The
    program is not fortified: its memcpy would be glibc's __memcpy_chk."""
    if os.uname().machine != "x86_64":
        pytest.skip("init_rt.c is pycell-init's runtime on x86_64 only (elsewhere it links glibc)")
    cc = next((c for c in ("cc", "gcc", "clang") if subprocess.run(["sh", "-c", f"command -v {c}"],
                                                                   capture_output=True).returncode == 0), None)
    if cc is None:
        pytest.skip("no C compiler here")
    common = [cc, *flags.split(), "-std=gnu11", f"-I{Path(PYCELL).parent}", f"-I{SRC}/src", "-static", "-nostdlib"]
    rt = str(SRC / "src/jail/init_rt.c")
    init = tmp_path / "init"
    subprocess.run(common + [str(SRC / "src/jail/init_main.c"), str(SRC / "src/jail/init_wait.c"), rt, "-o",
                             str(init)], check=True, capture_output=True, cwd=tmp_path)
    r = subprocess.run([str(init)], capture_output=True, timeout=10)
    assert (r.returncode, r.stdout, r.stderr) == (2, b"", USAGE)
    (tmp_path / "smash.c").write_text(SMASH)
    # (not fortified: its memcpy would be glibc's __memcpy_chk, which is not here)
    plain = [f for f in common if not f.startswith("-D_FORTIFY_SOURCE")]
    subprocess.run(plain + ["smash.c", rt, "-o", "smash"], check=True, capture_output=True, cwd=tmp_path)
    r = subprocess.run(["./smash"], capture_output=True, timeout=10, cwd=tmp_path)
    assert (r.returncode, r.stdout, r.stderr) == (0, b"clean\n", b"")
    # (caught where the frame returns: inlined into main, after its write)
    r = subprocess.run(["./smash", "overrun"], capture_output=True, timeout=10, cwd=tmp_path)
    assert (r.returncode, r.stderr) == (127, b"pycell-init: stack smashing detected\n")
