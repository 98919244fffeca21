"""Warm starts (src/run/zygote.h): what SECURITY.md says a warm jail inherits.

Every warm jail is a copy of the zygote's memory, so the zygote itself must
hold nothing of the supervisor: not its environment, not its configuration
(upstream commands and their secrets).  Checked from the host by scanning
the zygote's environment and every readable byte of its memory for canaries
that only the supervisor was given.  And runs cloned from one zygote must
not share the `random` module's state, which the zygote has loaded."""
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid

import pytest

from conftest import HOST_IS_ROOT, PYCELL, REPO, descendants, pycell_env, require_root  # noqa: F401

FAKE = REPO / "tests" / "tools" / "fake_mcp_server.py"


class Mcp:
    def __init__(self, args, env):
        self.proc = subprocess.Popen([PYCELL, "mcp", *args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        self.next = 1
        self.call("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                 "clientInfo": {"name": "test_warm", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, msg):
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        self.proc.stdin.flush()

    def call(self, method, params):
        i = self.next
        self.next += 1
        self.send({"jsonrpc": "2.0", "id": i, "method": method, "params": params})
        while True:
            line = self.proc.stdout.readline()
            assert line, f"server ended: {self.proc.stderr.read()[-2000:]!r}"
            msg = json.loads(line)
            if msg.get("id") == i:
                assert "error" not in msg, msg
                return msg["result"]

    def run(self, code, **args):
        res = self.call("tools/call", {"name": "run_python", "arguments": {"code": code, **args}})
        sc = res["structuredContent"]
        assert sc["status"] == "ok", sc
        assert not any("warm" in w for w in sc["warnings"]), sc["warnings"]
        return sc

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=20)


def zygote_of(pid):
    for p in descendants(pid):
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                if f.read() == b"pycell\0__zygote\0":
                    return p
        except OSError:
            pass
    raise AssertionError(f"no zygote below {pid}")


# ASan's shadow memory is terabytes of readable, untouched zero pages
# that hold nothing of the program: a sanitizer build skips mappings that
# large (its heap and everything else are far smaller).
SHADOW_MIN = 1 << 36 if os.environ.get("PYCELL_SANITIZERS") else None
CHUNK = 64 << 20


def memory_holds(pid, needles):
    """Which needles occur in the readable memory of pid (read in chunks
    that overlap by the longest needle, so none is missed at a border)."""
    found = set()
    overlap = max(len(n) for n in needles)
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for line in maps:
            addr, perms = line.split()[:2]
            if "r" not in perms or line.rstrip().endswith(("[vvar]", "[vsyscall]")):
                continue
            lo, hi = (int(x, 16) for x in addr.split("-"))
            if SHADOW_MIN and hi - lo >= SHADOW_MIN:
                continue
            pos = lo
            while pos < hi:
                try:
                    mem.seek(pos)
                    chunk = mem.read(min(CHUNK + overlap, hi - pos))
                except OSError:
                    break
                found |= {n for n in needles if n in chunk}
                pos += CHUNK
    return found


def test_zygote_holds_nothing_of_the_supervisor(tmp_path, require_root):
    env_secret = "env-canary-" + uuid.uuid4().hex
    conf_secret = "conf-canary-" + uuid.uuid4().hex
    conf = tmp_path / "pycell.conf"
    conf.write_text(json.dumps({"upstreams": {"fake": {
        "command": ["/usr/bin/python3", str(FAKE)], "env": {"FAKE_TOKEN": conf_secret}}}}))
    env = pycell_env({"PYCELL_TEST_SECRET": env_secret})
    s = Mcp(["--warm", "--config", str(conf)], env)
    try:
        sc = s.run("import os\nos.getpid()")
        assert sc["return_value"] == 2
        z = zygote_of(s.proc.pid)
        needles = {env_secret.encode(), conf_secret.encode(), str(conf).encode()}
        with open(f"/proc/{z}/environ", "rb") as f:
            zenv = f.read()
        assert not any(n in zenv for n in needles), zenv
        # the scan itself must be able to see a secret: the supervisor has them
        assert memory_holds(s.proc.pid, needles) >= {env_secret.encode(), conf_secret.encode()}
        assert memory_holds(z, needles) == set()
    finally:
        s.close()


def test_random_differs_between_warm_runs():
    s = Mcp(["--warm"], pycell_env())
    try:
        code = "import random, sys\n[random.getrandbits(62), 'random' in sys.modules]"
        a, b = (s.run(code)["return_value"] for _ in range(2))
        assert a[1] is True and b[1] is True
        assert a[0] != b[0], "two warm runs drew the same random numbers"
    finally:
        s.close()


def test_nothing_a_module_draws_repeats_across_warm_runs():
    """random (reseeded at fork), tempfile's names (its generator is made
    in the run: every jail's python is pid 2, so a pid check would not
    tell two runs apart), uuid4 and secrets (the kernel's): two warm runs,
    and two cells of two sessions, never draw the same."""
    s = Mcp(["--warm"], pycell_env())
    code = ("import random, tempfile, uuid, secrets\n"
            "[random.getrandbits(62), next(tempfile._get_candidate_names()), str(uuid.uuid4()),"
            " secrets.token_hex(16)]")
    try:
        a, b = (s.run(code)["return_value"] for _ in range(2))
        sids = [s.call("tools/call", {"name": "session_open", "arguments": {}})["structuredContent"]["session_id"]
                for _ in range(2)]
        c, d = (s.call("tools/call", {"name": "run_python", "arguments": {"code": code, "session_id": sid}})
                ["structuredContent"]["return_value"] for sid in sids)
        for i, what in enumerate(("random", "tempfile's names", "uuid4", "secrets")):
            drawn = [a[i], b[i], c[i], d[i]]
            assert len(set(drawn)) == 4, (what, drawn)
    finally:
        s.close()


# ------------------------------------------------------------ ready jails

def children(pid):
    kids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    st = f.read()
            except OSError:
                continue
            if int(st[st.rindex(")") + 2:].split()[1]) == pid:
                kids.append(int(d))
    return kids


def comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().rstrip("\n")
    except OSError:
        return None


def holds_a_runs_files(z):
    """The zygote still holds a jail's files (its pipes, its memfd, its
    cgroup files): from its request until that jail's small init has
    executed pycell-init (src/run/zygote.c, after jail_small_wait).  A
    small init names itself pycell-ready before that, while it forks
    python: in a sanitizer build, for tens of ms."""
    try:
        # 0-2: the server's own (the test's pipes)
        fds = [os.readlink(f"/proc/{z}/fd/{f}") for f in os.listdir(f"/proc/{z}/fd") if int(f) > 2]
    except OSError:
        return True
    return any(t.startswith(("pipe:", "/memfd:", "/sys/fs/cgroup")) for t in fds)


def ready_jails(server, n, timeout=10):
    """The jails the idle server keeps made ahead, once there are n: the
    zygote's children (a jail's init is one), all named pycell-ready, and
    the zygote done with them (a test that stops it then stops none)."""
    z = zygote_of(server.proc.pid)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        kids = children(z)
        if len(kids) == n and all(comm(k) == "pycell-ready" for k in kids) and not holds_a_runs_files(z):
            return kids
        time.sleep(0.01)
    raise AssertionError(f"the zygote has children {[(k, comm(k)) for k in children(z)]}, "
                         f"expected {n} ready jails; it holds a run's files: {holds_a_runs_files(z)}")


def status_fields(pid, *keys):
    with open(f"/proc/{pid}/status") as f:
        fields = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
    return [fields[k].strip() for k in keys]


def ready_python(init, timeout=10):
    """The python a ready jail made ahead: its init's one child, named
    pycell-ready until its cell comes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        kids = children(init)
        if len(kids) == 1 and comm(kids[0]) == "pycell-ready":
            return kids[0]
        time.sleep(0.005)
    raise AssertionError(f"ready jail {init} has children {[(k, comm(k)) for k in children(init)]}")


WARMED = "import sys\nsys.modules['pycell._cell'].warmed"


def test_a_ready_jail_warms_up_and_a_session_or_a_cell_that_came_at_once_does_not(tmp_path):
    """A ready jail made ahead of its run goes once through a sample cell
    while it waits (pycell._cell.warm_up), so that the run's cell finds the
    pages it writes copied already.  A jail whose cell comes at once (none
    was ready) would only wait for it, and a session's is one of its own,
    not one of the pool: an idle session kept the warm-up's copies (0.25
    MiB of its own with the default policy, 0.35 with the data stack)."""
    conf = tmp_path / "pycell.conf"
    conf.write_text(json.dumps({"warm": {"ready": 1}}))
    s = Mcp(["--warm", "--config", str(conf)], pycell_env())

    def warmed(**args):
        return s.run(WARMED, **args)["return_value"]

    def two_at_once():
        ids = [s.next, s.next + 1]
        s.next += 2
        for i in ids:
            s.send({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                    "params": {"name": "run_python", "arguments": {"code": WARMED}}})
        got = {}
        while len(got) < 2:
            msg = json.loads(s.proc.stdout.readline())
            if msg.get("id") in ids:
                got[msg["id"]] = msg["result"]["structuredContent"]["return_value"]
        return sorted(got.values())
    try:
        ready_jails(s, 1)
        assert warmed() is True        # the ready one
        # two at once: the ready jail, and one made for its cell (the
        # pool asks for its next once a run is answered)
        for _ in range(20):
            ready_jails(s, 1)
            got = two_at_once()
            if got == [False, True]:
                break
        assert got == [False, True], got
        [ready] = ready_jails(s, 1)
        sid = s.call("tools/call", {"name": "session_open", "arguments": {}})["structuredContent"]["session_id"]
        assert warmed(session_id=sid) is False
        # and the session left the ready jail to a run: a jail of its own
        # is the zygote's other child
        kids = {k: comm(k) for k in children(zygote_of(s.proc.pid))}
        assert len(kids) == 2 and kids[ready] == "pycell-ready", kids
        assert warmed() is True
    finally:
        s.close()


def test_a_ready_jail_holds_no_program_and_serves_one_run(require_root, tmp_path):
    conf = tmp_path / "pycell.conf"
    conf.write_text(json.dumps({"warm": {"ready": 1}}))
    # no cache: no font list bound into the run dir (test_fonts.py's)
    s = Mcp(["--warm", "--config", str(conf)], pycell_env({"PYCELL_CACHE_DIR": "none"}))
    try:
        [first] = ready_jails(s, 1)
        py = ready_python(first)
        # made ahead and waiting: confined as a running python is (the
        # jail's filter, the only one under the default policy, which
        # allows processes; no capabilities; the jail's uid), and holding
        # no program: its program dir is the runtime alone
        assert status_fields(py, "Seccomp", "Seccomp_filters", "NoNewPrivs", "CapEff", "CapPrm",
                             "CapBnd") == ["2", "1", "1"] + ["0000000000000000"] * 3
        assert status_fields(first, "Seccomp", "Seccomp_filters", "CapEff") == ["2", "1", "0000000000000000"]
        assert status_fields(py, "Uid")[0].split() == [str(100000 + 1000)] * 4
        assert os.listdir(f"/proc/{py}/root/run/pycell") == ["lib"]
        # init holds none of the run's pipes (nor the tool socket) while it
        # waits: their end is python's, not init's hearing that a cell came
        init_fds = {int(fd): os.readlink(f"/proc/{first}/fd/{fd}") for fd in os.listdir(f"/proc/{first}/fd")}
        assert not {0, 1, 2, 3} & set(init_fds) and not [v for v in init_fds.values() if v.startswith("pipe:")], init_fds
        # init learns that its cell came after python has it (the
        # supervisor sends the cell to python straight): it renames
        # itself pycell-init then, while the cell runs
        sc = s.run("import os, time\nopen('/tmp/mark', 'w').write('x')\n"
                   "t = time.monotonic()\n"
                   "while open('/proc/1/comm').read() != 'pycell-init\\n' and time.monotonic() - t < 5:\n"
                   "    time.sleep(0.001)\n"
                   "[sorted(os.listdir('/run/pycell')), open('/proc/1/comm').read(), "
                   "open('/proc/self/comm').read(), os.getpid()]")
        assert sc["return_value"] == [["lib"], "pycell-init\n", "python3\n", 2]
        [second] = ready_jails(s, 1)
        assert second != first and not os.path.exists(f"/proc/{first}")
        # the next run is the next jail: nothing of the first is there
        sc = s.run("import os\n[os.path.exists('/tmp/mark'), os.getpid()]")
        assert sc["return_value"] == [False, 2]
        [third] = ready_jails(s, 1)
        assert third not in (first, second)
    finally:
        s.close()


def test_a_dead_zygote_falls_back_to_cold_and_is_started_again(tmp_path):
    """The zygote dies (SIGKILL): the next call still gets its answer, from
    a cold jail, with a warning that says why; a call a second later has a
    new zygote and is warm again."""
    conf = tmp_path / "pycell.conf"
    conf.write_text(json.dumps({"warm": {"enabled": True, "ready": 0}}))
    s = Mcp(["--config", str(conf)], pycell_env())
    try:
        assert s.run("6 * 7")["return_value"] == 42
        z = zygote_of(s.proc.pid)
        os.kill(z, 9)
        deadline = time.monotonic() + 10
        while os.path.exists(f"/proc/{z}/cmdline") and open(f"/proc/{z}/stat").read().split()[2] != "Z" \
                and time.monotonic() < deadline:
            time.sleep(0.01)
        res = s.call("tools/call", {"name": "run_python", "arguments": {"code": "6 * 7"}})
        sc = res["structuredContent"]
        assert (sc["status"], sc["return_value"]) == ("ok", 42), sc
        fell_back = [w for w in sc["warnings"] if w.startswith("warm start failed, started cold: warm: ")]
        assert fell_back, sc["warnings"]
        time.sleep(1.1)   # a dead zygote is started again at most once a second
        assert s.run("6 * 7")["return_value"] == 42
        assert zygote_of(s.proc.pid) != z
    finally:
        s.close()


def test_a_dead_ready_jail_is_replaced():
    s = Mcp(["--warm"], pycell_env())
    try:
        jails = ready_jails(s, 2)  # the default count
        for jail in jails:
            os.kill(jail, 9)
        deadline = time.monotonic() + 10
        while any(os.path.exists(f"/proc/{j}") for j in jails) and time.monotonic() < deadline:
            time.sleep(0.01)
        # they died while waiting: the call notices and starts another jail
        sc = s.run("6 * 7")
        assert sc["return_value"] == 42
        again = ready_jails(s, 2)
        assert not set(again) & set(jails)
    finally:
        s.close()


def test_a_zygote_slow_to_answer_holds_no_call():
    """The pool asks the zygote for its next jails without waiting for the
    answer (src/run/spawn_warm.c, ahead): with the zygote stopped, the two
    jails made ahead still serve two calls at once, and ping is answered
    between them; a refill that waited would hold each for the zygote's
    10 s deadline.  Once it goes on, the pool is full again."""
    s = Mcp(["--warm"], pycell_env())
    try:
        ready_jails(s, 2)
        z = zygote_of(s.proc.pid)
        os.kill(z, signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            assert s.run("6 * 7")["return_value"] == 42
            assert s.call("ping", {}) == {}
            assert s.run("6 * 8")["return_value"] == 48
            assert s.call("ping", {}) == {}
            took = time.monotonic() - t0
            assert took < 5, f"two ready jails and two pings took {took:.1f} s"
        finally:
            os.kill(z, signal.SIGCONT)
        assert len(ready_jails(s, 2)) == 2
        assert s.run("6 * 9")["return_value"] == 54
    finally:
        s.close()
    assert s.proc.returncode == 0


def test_a_zygote_that_dies_owing_jails_is_replaced():
    """The zygote dies with two jails asked of it and not answered: the
    pool hears of it (its socket ends), a call meanwhile falls back to a
    cold start and says so, and a call a second later has a new zygote."""
    s = Mcp(["--warm"], pycell_env())
    try:
        ready_jails(s, 2)
        z = zygote_of(s.proc.pid)
        os.kill(z, signal.SIGSTOP)
        assert s.run("1")["return_value"] == 1
        assert s.run("2")["return_value"] == 2   # two asked, none answered
        os.kill(z, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while zygote_of_or_none(s.proc.pid) == z and time.monotonic() < deadline:
            time.sleep(0.01)
        res = s.call("tools/call", {"name": "run_python", "arguments": {"code": "3"}})
        sc = res["structuredContent"]
        assert (sc["status"], sc["return_value"]) == ("ok", 3), sc
        assert [w for w in sc["warnings"] if w.startswith("warm start failed, started cold: warm: ")], sc
        time.sleep(1.1)   # a dead zygote is started again at most once a second
        assert s.run("4")["return_value"] == 4
        assert zygote_of(s.proc.pid) != z
        assert len(ready_jails(s, 2)) == 2
        assert s.run("5")["return_value"] == 5
    finally:
        s.close()
    assert s.proc.returncode == 0
    assert b"pool: could not make a ready jail: warm: the zygote stopped answering" in s.proc.stderr.read()


def zygote_of_or_none(pid):
    try:
        return zygote_of(pid)
    except AssertionError:
        return None


def test_a_ready_jails_init_is_small_and_not_dumpable():
    """A ready jail's init, once made: pycell-init (src/jail/init_main.c),
    named pycell-ready until its cell comes and pycell-init after, a few
    hundred KiB resident instead of a copy of the zygote, and its memory
    closed to the cell (same uid: not dumpable)."""
    s = Mcp(["--warm"], pycell_env())
    try:
        jails = ready_jails(s, 2)
        for j in jails:
            name, size, rss = status_fields(j, "Name", "VmSize", "VmRSS")
            assert name == "pycell-ready" and int(size.split()[0]) < 8 * 1024 and \
                int(rss.split()[0]) < 2 * 1024, (j, name, size, rss)
            with open(f"/proc/{j}/cmdline", "rb") as f:
                assert f.read().split(b"\0")[0] == b"pycell-ready"
        sc = s.run("import errno\n"
                   "f = dict(l.split(':', 1) for l in open('/proc/1/status').read().splitlines())\n"
                   "try:\n    open('/proc/1/mem', 'r+b'); mem = 'opened'\n"
                   "except OSError as e:\n    mem = errno.errorcode[e.errno]\n"
                   "(f['Name'].strip(), int(f['VmRSS'].split()[0]) < 2048, mem)")
        # its name: pycell-ready until init hears (after python) that the cell came
        assert sc["return_value"] in (["pycell-init", True, "EACCES"], ["pycell-ready", True, "EACCES"]), sc
    finally:
        s.close()


TRACEFS = next((d for d in ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")
                if os.path.exists(d + "/uprobe_events")), None)
HEAP_CALLS = ("malloc", "calloc", "realloc", "free")


def file_offsets(lib, names):
    """Where the dynamic symbols names begin in the file lib (a uprobe's
    address): nm's values, which are addresses, through the program
    header of the executable segment that holds each."""
    import struct
    with open(lib, "rb") as f:
        elf = f.read()
    phoff, = struct.unpack_from("<Q", elf, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", elf, 0x36)
    loads = []
    for i in range(phnum):
        p_type, p_flags, p_offset, p_vaddr, _, _, p_memsz = struct.unpack_from("<IIQQQQQ", elf, phoff + i * phentsize)
        if p_type == 1 and p_flags & 1:   # PT_LOAD, executable
            loads.append((p_vaddr, p_memsz, p_offset))
    out = {}
    nm = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True, check=True).stdout
    for line in nm.splitlines():
        value, _, name = line.split()
        name = name.split("@")[0]
        if name in names:
            v = int(value, 16)
            [off] = [v - va + po for va, size, po in loads if va <= v < va + size]
            out[name] = off
    assert sorted(out) == sorted(names), (lib, out)
    return out


def uprobe_events(line):
    """A uprobe defined or removed (tracefs appends; it refuses a seek)."""
    fd = os.open(f"{TRACEFS}/uprobe_events", os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, line.encode() + b"\n")
    finally:
        os.close(fd)


@pytest.mark.skipif(not HOST_IS_ROOT or not TRACEFS, reason="uprobes need root and tracefs")
@pytest.mark.skipif(bool(os.environ.get("PYCELL_SANITIZERS")),
                    reason="sanitizer build: ASan's allocator replaces the C library's, which the probe counts")
def test_a_small_init_never_calls_the_heap_it_shares_with_the_zygote():
    """A warm jail's init builds the jail in the zygote's memory
    (src/jail/small_init.h), where a kill in the middle of a malloc or
    free (a run cancelled, a supervisor out of descriptors) would leave the
    heap of the zygote, and of every jail after, torn: with ASan's
    allocator, a lock held for ever, which CI saw as a jail that spun for
    10 s until the zygote was killed.  So it calls none.  Uprobes on the C
    library's malloc, calloc, realloc and free record every call of a
    process named pycell-init or pycell-ready (a small init's names, and
    a ready python's) while the pool makes its jails and one is used; the
    small inits are the processes that execute pycell-init
    (/proc/self/fd/N).  None of theirs may be among the calls, and the
    readies' pythons' calls must be: the probe sees the heap."""
    group = f"pycell_test_{os.getpid()}"
    inst = f"{TRACEFS}/instances/{group}"
    ldd = subprocess.run(["ldd", PYCELL], capture_output=True, text=True, check=True).stdout
    [lib] = re.findall(r"^\s*libc\.so\.6 => (\S+)", ldd, re.M)
    offsets = file_offsets(lib, HEAP_CALLS)
    defined, s = [], None
    try:
        os.mkdir(inst)
        for name, off in offsets.items():
            uprobe_events(f"p:{group}/{name} {lib}:{off:#x}")
            defined.append(name)
        for name in HEAP_CALLS:
            with open(f"{inst}/events/{group}/{name}/filter", "w") as f:
                f.write('comm == "pycell-init" || comm == "pycell-ready"')
            with open(f"{inst}/events/{group}/{name}/enable", "w") as f:
                f.write("1")
        with open(f"{inst}/events/sched/sched_process_exec/enable", "w") as f:
            f.write("1")
        # the pool's jails, made at the start; one used, and made again
        s = Mcp(["--warm"], pycell_env())
        ready_jails(s, 2, timeout=20)
        assert s.run("print('used')")["stdout"] == "used\n"
        ready_jails(s, 2, timeout=20)
        with open(f"{inst}/tracing_on", "w") as f:
            f.write("0")
        with open(f"{inst}/trace") as f:
            trace = f.read()
    finally:
        if s:
            s.close()
        if os.path.isdir(inst):
            os.rmdir(inst)
        for name in defined:
            uprobe_events(f"-:{group}/{name}")
    inits, calls = set(), {}
    for line in trace.splitlines():
        m = re.match(r"\s*.+?-(\d+)\s+\[\d+\].*?: (\S+): (.*)", line)
        if not m:
            continue
        pid, event, rest = int(m[1]), m[2], m[3]
        if event == "sched_process_exec" and re.match(r"filename=/proc/self/fd/\d+ ", rest):
            inits.add(pid)
        elif event in HEAP_CALLS:
            calls.setdefault(pid, []).append(event)
    assert len(inits) >= 3, trace[-3000:]
    assert {p: c for p, c in calls.items() if p in inits} == {}
    assert [p for p in calls if p not in inits], trace[-3000:]


def test_a_ready_jail_whose_python_died_is_replaced():
    """The python made ahead is killed while it waits: its jail ends with
    it, no call gets it, and another is made."""
    s = Mcp(["--warm"], pycell_env())
    try:
        jails = ready_jails(s, 2)
        os.kill(ready_python(jails[0]), 9)
        deadline = time.monotonic() + 10
        while os.path.exists(f"/proc/{jails[0]}") and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not os.path.exists(f"/proc/{jails[0]}")
        for _ in range(3):
            assert s.run("6 * 7")["return_value"] == 42
        assert jails[0] not in ready_jails(s, 2)
    finally:
        s.close()


@pytest.mark.parametrize("n", [0, 3])
def test_ready_count_from_the_config(tmp_path, n):
    conf = tmp_path / "pycell.conf"
    conf.write_text(json.dumps({"warm": {"ready": n}}))
    s = Mcp(["--warm", "--config", str(conf)], pycell_env())
    try:
        assert len(ready_jails(s, n)) == n
        for _ in range(n + 1):
            assert s.run("1 + 1")["return_value"] == 2
        assert len(ready_jails(s, n)) == n
    finally:
        s.close()
    assert s.proc.returncode == 0


@pytest.mark.parametrize("start", ["--cold", "--warm"])
def test_a_cell_ends_like_a_python_exit(start):
    """atexit handlers, __del__ of the cell's objects and a file never
    flushed by the cell: a warm cell (its python does not tear down the
    interpreter inherited from the zygote) shows what a cold one does."""
    s = Mcp([start], pycell_env())
    try:
        sc = s.run("import atexit\n"
                   "class D:\n"
                   "    def __del__(self): print('del', flush=True)\n"
                   "d = D()\n"
                   "f = open(1, 'w', closefd=False)\n"
                   "f.write('unflushed\\n')\n"
                   "atexit.register(lambda: print('atexit'))\n"
                   "print('cell')\n"
                   "7")
        assert (sc["stdout"], sc["return_value"]) == ("cell\natexit\ndel\nunflushed\n", 7)
    finally:
        s.close()


@pytest.mark.parametrize("start", ["--cold", "--warm"])
@pytest.mark.parametrize("code, stdout, stderr_end, exit_code", [
    ("class D:\n    def __del__(self): print('del')\nd = D()\nraise ValueError('x')",
     "del\n", "ValueError: x\n", 1),
    ("import sys\nsys.exit(3)", "", "", 3),
    ("import sys\nsys.exit('bye')", "", "bye\n", 1),
    ("import sys\nprint('out')\nsys.exit()", "out\n", "", 0),
    # stdout closed under a buffered line: the flush at exit fails, status 120
    ("import os\nprint('lost')\nos.close(1)", "",
     "Exception ignored in: <_io.TextIOWrapper name='<stdout>' mode='w' encoding='utf-8'>\n"
     "OSError: [Errno 9] Bad file descriptor\n", 120),
])
def test_a_cell_that_fails_or_exits_ends_the_same(start, code, stdout, stderr_end, exit_code):
    s = Mcp([start], pycell_env())
    try:
        res = s.call("tools/call", {"name": "run_python", "arguments": {"code": code}})
        sc = res["structuredContent"]
        assert (sc["stdout"], sc["exit_code"]) == (stdout, exit_code), sc
        assert sc["stderr"].endswith(stderr_end), sc["stderr"]
        assert sc["status"] == ("ok" if exit_code == 0 else "error")
    finally:
        s.close()


# ------------------------------------------- one run to the next, cold = warm

LEAVE = r"""
import builtins, ctypes, os, socket, sys, time
libc = ctypes.CDLL(None, use_errno=True)
for d in ("/tmp", "/workspace", "/dev/shm"):
    open(d + "/trace", "w").write("left by the first run")
os.environ["PYCELL_TRACE"] = "1"
builtins.pycell_trace = 1
sys.modules["pycell_trace"] = sys
sys.path.insert(0, "/tmp/trace-path")
import json
json.pycell_trace = 1                       # a module the zygote has loaded
shm = libc.shmget(0x7079636c, 4096, 0o1000 | 0o600)     # IPC_CREAT
assert shm >= 0, ctypes.get_errno()
tcp = socket.socket(); tcp.bind(("127.0.0.1", 47931)); tcp.listen()
unix = socket.socket(socket.AF_UNIX); unix.bind("\0pycell-trace"); unix.listen()
if os.fork() == 0:                          # a process that stays behind
    os.setsid()
    if os.fork() == 0:
        time.sleep(30)
    os._exit(0)
os.wait()
[hash("pycell"), ctypes.cast(libc.printf, ctypes.c_void_p).value]   # the C library's place
"""

LOOK = r"""
import builtins, ctypes, errno, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
import json

def refused(family, addr):
    s = socket.socket(family)
    try:
        s.connect(addr)
        return "connected"
    except OSError as e:
        return errno.errorcode[e.errno]

seen = {
    "files": [d for d in ("/tmp", "/workspace", "/dev/shm") if os.path.exists(d + "/trace")],
    "env": os.environ.get("PYCELL_TRACE"),
    "builtins": hasattr(builtins, "pycell_trace"),
    "modules": "pycell_trace" in sys.modules or hasattr(json, "pycell_trace"),
    "path": "/tmp/trace-path" in sys.path,
    "shm": libc.shmget(0x7079636c, 0, 0) >= 0 or errno.errorcode[ctypes.get_errno()],
    "tcp": refused(socket.AF_INET, ("127.0.0.1", 47931)),
    "unix": refused(socket.AF_UNIX, "\0pycell-trace"),
    "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
    "me": os.getpid(),
}
[seen, hash("pycell"), ctypes.cast(libc.printf, ctypes.c_void_p).value]
"""


@pytest.mark.parametrize("start", ["--cold", "--warm"])
def test_a_run_leaves_nothing_for_the_next(start):
    """What SECURITY.md states for warm starts: a run finds nothing the
    previous one left (files in each writable place, the environment, the
    interpreter's modules and builtins, System V IPC, listening TCP and
    abstract sockets, a process that detached itself), the same with warm
    starts as cold ones.  What warm runs do share by construction, the
    zygote's address-space layout and hash seed, is asserted too, so that
    the statement is exact: it holds for warm runs and not for cold ones."""
    s = Mcp([start], pycell_env())
    try:
        first = s.run(LEAVE)["return_value"]
        seen, *second = s.run(LOOK)["return_value"]
        assert seen == {"files": [], "env": None, "builtins": False, "modules": False, "path": False,
                        "shm": "ENOENT", "tcp": "ECONNREFUSED", "unix": "ECONNREFUSED",
                        "pids": [1, 2], "me": 2}, seen
        if start == "--warm":
            assert second == first, "warm runs share the zygote's layout and hash seed, as SECURITY.md says"
        else:
            assert second[0] != first[0] and second[1] != first[1], (first, second)
    finally:
        s.close()


@pytest.mark.parametrize("args, warm", [([], True), (["--cold"], False), (["--warm"], True)])
def test_servers_start_warm_by_default(args, warm):
    """`pycell mcp` keeps a zygote unless told --cold (the config's
    warm.enabled defaults to true); runs say nothing of falling back."""
    s = Mcp(args, pycell_env())
    try:
        assert s.run("6 * 7")["return_value"] == 42
        if warm:
            zygote_of(s.proc.pid)
        else:
            with pytest.raises(AssertionError, match="no zygote"):
                zygote_of(s.proc.pid)
    finally:
        s.close()


@pytest.mark.parametrize("start", ["--cold", "--warm"])
def test_a_ready_jails_warm_up_leaves_no_output(start):
    """A ready jail's python goes once through a cell of its own before
    the real one comes (_cell.warm_up: a value, the workspace looked at):
    none of it reaches a result, and the files the call brings are not
    the cell's output, as in a cold run."""
    s = Mcp([start], pycell_env())
    try:
        for _ in range(2):
            sc = s.run("print(1)")
            assert (sc["stdout"], sc["stderr"], sc["return_value"]) == ("1\n", "", None), sc
            assert "files" not in sc and "images" not in sc, sc
        res = s.call("tools/call", {"name": "run_python", "arguments": {
            "code": "open('/workspace/out.txt', 'w').write(open('/workspace/in/given.txt').read() * 2)",
            "files": [{"path": "in/given.txt", "text": "ab"}]}})
        sc = res["structuredContent"]
        assert sc["return_value"] == 4, sc
        assert [(f["path"], f["size"]) for f in sc["files"]] == [("out.txt", 4)], sc
    finally:
        s.close()


def test_what_a_cells_run_imports_is_the_zygotes():
    """The modules a cell's way through pycell._cell imports (atexit,
    errno, _ast: the warm-up's) are made once in the zygote, before its
    gc.freeze (_cell.prime), not in every ready jail: a module made in the
    jail is in one of the collector's generations, where gc.get_objects
    finds it; one inherited from the zygote is frozen, where it does not.
    The same in a session's first cell."""
    s = Mcp(["--warm"], pycell_env())
    code = ("import gc, sys\nyoung = {id(o) for o in gc.get_objects()}\n"
            "[sorted(n for n, m in sys.modules.items() if id(m) in young), 'atexit' in sys.modules,"
            " '_ast' in sys.modules]")
    try:
        for _ in range(2):
            assert s.run(code)["return_value"] == [[], True, True]
        sid = s.call("tools/call", {"name": "session_open", "arguments": {}})["structuredContent"]["session_id"]
        sc = s.call("tools/call", {"name": "run_python", "arguments": {"code": code, "session_id": sid}})
        assert sc["structuredContent"]["return_value"] == [[], True, True], sc
    finally:
        s.close()


def test_a_cells_python_holds_only_its_four_descriptors():
    """A ready jail's python gets its cell over a socket of its own, which
    it closes once the cell came (and whose other end the supervisor
    closes): the cell finds stdin, stdout, stderr and the tool socket,
    nothing else, no end of init's socket to the supervisor either."""
    s = Mcp(["--warm"], pycell_env())
    try:
        for _ in range(2):
            sc = s.run("import os\nfds = sorted(int(x) for x in os.listdir('/proc/self/fd'))\n"
                       "[fds, [os.readlink(f'/proc/self/fd/{fd}')[:6] for fd in fds[:4]]]")
            # 4: the listing's own descriptor, gone once it is done
            assert sc["return_value"] == [[0, 1, 2, 3, 4], ["pipe:[", "pipe:[", "pipe:[", "socket"]], sc
    finally:
        s.close()


def jailed_pythons(server_pid):
    """Pythons in a jail below server_pid that have had a cell (a ready
    jail's is named pycell-ready until then)."""
    out = []
    for p in descendants(server_pid):
        try:
            nspid = [ln for ln in open(f"/proc/{p}/status") if ln.startswith("NSpid:")]
        except OSError:
            continue
        if comm(p) == "python3" and nspid and len(nspid[0].split()) > 2:
            out.append(p)
    return out


def test_an_answered_cells_jail_is_killed_soon_after_its_answer():
    """After its report of how it ended, a warm cell's python waits to be
    killed instead of exiting (at most a second: zygote.c), so that the
    kernel's teardown of its address space comes after the answer; the
    server kills the jail 3 ms after answering (calls.c, AFTER_ANSWER_MS).
    Each jail is gone well before the second python would wait, one call
    after another, and a cell that sleeps past its answer is not waited
    for."""
    s = Mcp(["--warm"], pycell_env())
    try:
        for i in range(5):
            t0 = time.monotonic()
            assert s.run(f"{i} * 2")["return_value"] == i * 2
            assert time.monotonic() - t0 < 0.9
            deadline = time.monotonic() + 0.5
            while jailed_pythons(s.proc.pid) and time.monotonic() < deadline:
                time.sleep(0.005)
            assert not jailed_pythons(s.proc.pid), i
        # a daemon thread still running at the end does not hold the answer
        t0 = time.monotonic()
        sc = s.run("import threading, time\nthreading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n7")
        assert sc["return_value"] == 7 and time.monotonic() - t0 < 0.9
        deadline = time.monotonic() + 0.5
        while jailed_pythons(s.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.005)
        assert not jailed_pythons(s.proc.pid)
    finally:
        s.close()
    assert s.proc.returncode == 0, s.proc.stderr.read()[-2000:]


def test_a_cell_that_says_it_ended_and_goes_on_gets_nothing_more(tmp_path):
    """A warm cell's python tells the supervisor how it ended just before it
    exits (pycell/exit on fd 3, zygote.c report_end), and the answer goes
    out on that.  Code can send it too, then go on: here it says "3", then
    asks the tool bridge for a call and sleeps.  The call is answered on
    what it said, with no tool call made (nothing more is read from the
    jail once the run is over: the bridge has let go of it; the fuzz_tool
    target asserts the socket is closed at that moment, corpus/tool/exit),
    the jail is killed, and the server serves the next call."""
    import sys as _sys
    sys_path = str(REPO / "tests" / "integration")
    if sys_path not in _sys.path:
        _sys.path.insert(0, sys_path)
    from test_tools import Tools
    tools = Tools(tmp_path)
    cfg = tools.config({"fake": tools.fake()})
    pol = tools.policy(["fake.echo"])
    s = Mcp(["--warm", "--config", cfg, "--policy", pol], pycell_env())
    try:
        code = ("import os, socket, sys, time\n"
                "print('said', flush=True)\n"
                "t = socket.socket(fileno=3)\n"
                "os.close(1)\n"
                "os.close(2)\n"
                "t.send(b'{\"jsonrpc\":\"2.0\",\"method\":\"pycell/exit\",\"params\":{\"status\":3}}')\n"
                "t.send(b'{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",'\n"
                "       b'\"params\":{\"name\":\"fake.echo\",\"arguments\":{\"text\":\"x\"}}}')\n"
                "time.sleep(30)\n")
        t0 = time.monotonic()
        res = s.call("tools/call", {"name": "run_python", "arguments": {"code": code}})
        sc = res["structuredContent"]
        assert (sc["status"], sc["exit_code"], sc["stdout"]) == ("error", 3, "said\n"), sc
        assert time.monotonic() - t0 < 10
        assert sc["tool_calls"]["count"] == 0, sc["tool_calls"]
        assert s.run("6 * 7")["return_value"] == 42
        # the jail that said it had ended is gone, sleep and all
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and jailed_pythons(s.proc.pid):
            time.sleep(0.02)
        assert not jailed_pythons(s.proc.pid)
    finally:
        s.close()
    assert s.proc.returncode == 0, s.proc.stderr.read()[-2000:]
