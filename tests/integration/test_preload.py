"""python.preload (src/run/zygote.c, runtime/pycell/_warm.py): modules a
warm server's zygote imports once, which every warm run and session
inherits; what they drew at import drawn afresh in each; a module that
fails to import left out and said, one that leaves a thread, a child or an
open descriptor behind refused; and the thread pools of numerical
libraries sized to the jail (OMP_NUM_THREADS and the like)."""
import json
import os
import re
import signal
import subprocess
import textwrap
import time

import pytest

from conftest import PYCELL, run_json, pycell_env
from test_warm import Mcp, ready_jails, zygote_of

DATA = ("numpy", "pandas", "matplotlib.pyplot")
PY_VERSION = tuple(int(x) for x in subprocess.run(
    ["/usr/bin/python3", "-c", "import sys; print(*sys.version_info[:2])"], capture_output=True,
    text=True).stdout.split())


def need_data_stack():
    r = subprocess.run(["/usr/bin/python3", "-c", "import numpy, pandas, matplotlib"], capture_output=True)
    if r.returncode != 0:
        pytest.skip("the data stack is not installed for /usr/bin/python3 (apt-get install python3-pandas "
                    "python3-matplotlib): " + r.stderr.decode()[-200:])


def huge_pages_refused_here():
    """Why this kernel cannot collapse the zygote's memory into huge
    pages (MADV_COLLAPSE), or None."""
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            mode = f.read()
    except OSError:
        return "this kernel has no transparent huge pages"
    if "[never]" in mode:
        return "transparent huge pages are off here ([never])"
    if tuple(int(x) for x in os.uname().release.split(".")[:2]) < (6, 1):
        return "MADV_COLLAPSE came in Linux 6.1"
    return None


def smaps_kib(pid, key):
    """A line of /proc/PID/smaps_rollup, in KiB."""
    with open(f"/proc/{pid}/smaps_rollup") as f:
        return sum(int(line.split()[1]) for line in f if line.startswith(key + ":"))


def zygote_memory(pol, extra_env=None):
    """(the zygote's Anonymous and AnonHugePages in KiB, the MiB it said it
    moved into huge pages, its server's stderr) of a warm server of
    policy pol, after a run."""
    s = Mcp(["-vv", "--warm", "--policy", pol], pycell_env(extra_env))
    try:
        assert s.run("print(1)")["stdout"] == "1\n"
        z = zygote_of(s.proc.pid)
        anon, huge = smaps_kib(z, "Anonymous"), smaps_kib(z, "AnonHugePages")
    finally:
        err = stop(s)
    moved = re.findall(r"warm starts: (\d+) MiB of the zygote's memory in huge pages \(\d+ ms\)", err)
    refused = re.findall(r"warm starts: huge pages refused for the zygote's memory \((.*)\): it stays in 4 KiB "
                         r"pages", err)
    assert len(moved + refused) == 1, err[-3000:]
    return anon, huge, int(moved[0]) if moved else 0, err


def test_the_zygotes_memory_is_in_huge_pages(policy_file):
    """Every warm jail's python is a fork of the zygote: its memory in huge
    pages, a fork copies (and an exit clears) an entry of the page table
    per 2 MiB instead of per 4 KiB (src/run/huge_pages.c; the
    refusal, and the bound on the memory it adds: test_faults.py)."""
    need_data_stack()
    why = huge_pages_refused_here()
    if why:
        pytest.skip(why)
    _, huge, moved, _ = zygote_memory(policy_file({"python": {"preload": list(DATA)}}))
    assert moved >= 8 and huge >= 4096, (moved, huge)


def info(s):
    return s.call("tools/call", {"name": "sandbox_info", "arguments": {}})["structuredContent"]


def stop(s):
    s.close()
    return s.proc.stderr.read().decode()


def test_preloaded_modules_are_every_runs_and_sessions(policy_file):
    need_data_stack()
    pol = policy_file({"python": {"preload": [*DATA, "no_such_module_pycell"]}})
    s = Mcp(["--policy", pol], pycell_env())
    try:
        pre = info(s)["preload"]
        assert pre == {"loaded": list(DATA), "failed": {
            "no_such_module_pycell": "ModuleNotFoundError: No module named 'no_such_module_pycell'"}}
        look = "import sys\n[m for m in %r if m in sys.modules]" % (DATA,)
        assert s.run(look)["return_value"] == list(DATA)
        sid = s.call("tools/call", {"name": "session_open", "arguments": {}})["structuredContent"]["session_id"]
        cell = s.call("tools/call", {"name": "run_python", "arguments": {"code": look, "session_id": sid}})
        assert cell["structuredContent"]["return_value"] == list(DATA)
        # the import a run does is a lookup: far below the 0.5 s of a real one
        r = s.run("import pandas as pd\npd.DataFrame({'k': [1, 1, 2], 'v': [1, 2, 3]}).groupby('k').v.sum().tolist()")
        assert r["return_value"] == [3, 3]
        assert r["cpu_ms"] < 200, r["cpu_ms"]
        # matplotlib's directories are the jail's again (the zygote's own
        # were private and are gone), and a figure comes back as an image
        r = s.run("import matplotlib, tempfile\n[matplotlib.get_configdir(), matplotlib.get_cachedir(), "
                  "tempfile.gettempdir()]")
        assert r["return_value"] == ["/tmp/matplotlib", "/tmp/matplotlib", "/tmp"]
        res = s.call("tools/call", {"name": "run_python", "arguments": {
            "code": "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.plot([1, 2], [2, 1])\nfig"}})
        assert [c["type"] for c in res["content"]] == ["text", "image"], res
    finally:
        err = stop(s)
    assert ("python.preload: no_such_module_pycell is left out: ModuleNotFoundError: No module named "
            "'no_such_module_pycell'") in err
    assert not [d for d in os.listdir("/tmp") if d.startswith("pycell-zygote-")]


FIRST_USE = textwrap.dedent("""\
    import os, sys
    import matplotlib.font_manager as fm, matplotlib.pyplot as plt
    fds = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            fds.append(os.readlink("/proc/self/fd/" + fd))
        except OSError:   # the listing's own
            pass
    [[m in sys.modules for m in ("matplotlib.backends.backend_agg", "PIL.JpegImagePlugin",
                                 "pandas.io.formats.string")],
     plt.get_fignums(), fm._get_font.cache_info().currsize, [f for f in fds if f.endswith(".ttf")]]
    """)


def test_the_first_figure_and_frame_are_drawn_in_the_zygote(policy_file):
    """A run's first figure imports the Agg backend and PIL's writers and finds its
    font, and its first frame shown builds pandas' formatting: the zygote
    does that once (_warm.py _FIRST_USES), so a run starts with them, with
    no figure open and no font (an open file) inherited; a figure and a
    frame in a run and in a session are as ever."""
    need_data_stack()
    s = Mcp(["--policy", policy_file({"python": {"preload": list(DATA)}})], pycell_env())
    try:
        assert s.run(FIRST_USE)["return_value"] == [[True, True, True], [], 0, []]
        res = s.call("tools/call", {"name": "run_python", "arguments": {
            "code": "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.plot([1, 2], [2, 1])\n"
                    "print(fig.number)\nfig"}})
        assert [c["type"] for c in res["content"]] == ["text", "image"], res
        assert res["structuredContent"]["stdout"] == "1\n"
        assert res["content"][1]["data"].startswith("iVBORw0KGgo")   # PNG's signature
        sid = s.call("tools/call", {"name": "session_open", "arguments": {}})["structuredContent"]["session_id"]
        # a session is a clone of the same zygote: it starts with them too
        first = s.call("tools/call", {"name": "run_python", "arguments": {"code": FIRST_USE, "session_id": sid}})
        assert first["structuredContent"]["return_value"] == [[True, True, True], [], 0, []], first
        cell = s.call("tools/call", {"name": "run_python", "arguments": {
            "code": "import pandas as pd\nprint(pd.DataFrame({'k': [1, 2, 1], 'v': [3, 4, 5]}).groupby('k').v.sum())",
            "session_id": sid}})
        assert cell["structuredContent"]["stdout"] == "k\n1    8\n2    4\nName: v, dtype: int64\n", cell
    finally:
        stop(s)
    # without matplotlib.pyplot and pandas preloaded, none of it is there
    s = Mcp(["--policy", policy_file({"python": {"preload": ["numpy"]}})], pycell_env())
    try:
        assert s.run(FIRST_USE)["return_value"] == [[False, False, False], [], 0, []]
    finally:
        stop(s)


# What the cell's python has written of its own (KiB), and whether it is
# a ready jail made ahead of its cell
OWN = textwrap.dedent("""\
    import sys as _s
    [_s.modules["pycell._cell"].warmed,
     [int(l.split()[1]) for l in open("/proc/self/smaps_rollup") if l.startswith("Private_Dirty:")][0]]
    """)


def test_a_cell_that_names_pyplot_or_pandas_finds_their_first_use_copied(policy_file, tmp_path):
    """The pages of the zygote that a run's first figure and first frame
    write (learned once, by the zygote's probe) are copied in a few calls
    when the cell names matplotlib or pandas, before it runs (_warm.py
    cell_uses, zygote.c hot_use), in a ready jail made ahead; a cell that
    does not name them copies nothing more, and neither does a session,
    which stays small."""
    need_data_stack()
    conf = tmp_path / "pycell.conf"
    conf.write_text(json.dumps({"warm": {"ready": 1}}))
    s = Mcp(["--policy", policy_file({"python": {"preload": list(DATA)}}), "--config", str(conf)], pycell_env())

    def own(code, **args):
        if not args:
            ready_jails(s, 1)
        warmed, kib = s.run(code + "\n" + OWN, **args)["return_value"]
        assert warmed is (not args)
        return kib
    try:
        # the modules used, not named: nothing copied
        base = own("m = __import__('sys').modules['matplotlib.pyplot']")
        fig = own("import matplotlib.pyplot as plt")
        frame = own("def later():\n    import pandas")   # named in nested code
        both = own("from matplotlib import pyplot\nimport pandas as pd")
        assert fig - base > 1024 and frame - base > 512, (base, fig, frame)
        # a sanitizer build: up to 1 MiB apart, the shadow (one anonymous mapping in
        # /proc/self/smaps) of the stack a jail's python runs on (src/jail/small_init.h),
        # written in each cell as deep as it goes: the probe, there on another stack
        # (no swapcontext under ASan), does not learn it
        slack = 256 + (1024 if os.environ.get("PYCELL_SANITIZERS") else 0)
        assert abs((both - base) - (fig - base) - (frame - base)) < slack, (base, fig, frame, both)
        assert abs(own("import json") - base) < slack
        # a session's cells copy nothing ahead
        sids = [s.call("tools/call", {"name": "session_open", "arguments": {}})["structuredContent"]["session_id"]
                for _ in range(2)]
        named = own("import matplotlib.pyplot, pandas", session_id=sids[0])
        unnamed = own("m = __import__('sys').modules['pandas']", session_id=sids[1])
        assert abs(named - unnamed) < 512, (named, unnamed)
    finally:
        stop(s)


# A pandas of the user site, found before Debian's, whose first use (not
# its import) fails or leaves a thread behind
FAKE_PANDAS = {
    "fails": ("class DataFrame:\n    def __init__(self, data):\n        raise ValueError('no frames here')\n",
              None),
    "leaves_thread": ("import threading, time\n"
                      "class DataFrame:\n    def __init__(self, data):\n"
                      "        threading.Thread(target=time.sleep, args=(600,), name='framer', daemon=True).start()\n"
                      "        raise ValueError('no frames here')\n",
                      "python.preload: the first use of pandas left a thread (framer) behind"),
}


@pytest.mark.parametrize("case", sorted(FAKE_PANDAS))
def test_a_first_use_that_fails_is_said_and_one_that_leaves_something_is_refused(case, host_tmp, policy_file):
    src, refused = FAKE_PANDAS[case]
    site = host_tmp / "lib" / ("python%d.%d" % PY_VERSION) / "site-packages"
    site.mkdir(parents=True)
    (site / "pandas.py").write_text(src)
    pol = policy_file({"python": {"preload": ["json", "pandas"], "env": {"PYTHONUSERBASE": str(host_tmp)}}})
    s = Mcp(["--policy", pol], pycell_env())
    try:
        pre = info(s)["preload"]
        assert s.run("6 * 7")["return_value"] == 42
    finally:
        err = stop(s)
    if refused is None:
        # loaded, and a warm run has it; the log, sandbox_info and doctor
        # say its first use failed
        assert pre == {"loaded": ["json", "pandas"], "failed": {}, "unused": {"pandas": "ValueError: no frames here"}}
        assert ("python.preload: pandas is loaded, but its first use in the zygote failed (a run does that "
                "work itself): ValueError: no frames here") in err, err
        p = subprocess.run([PYCELL, "doctor", "--json", "--policy", pol], env=pycell_env(), capture_output=True,
                           timeout=60)
        check = {c["name"]: c for c in json.loads(p.stdout)["checks"]}["preload"]
        assert check == {"name": "preload", "status": "warn",
                         "detail": "policy test: all 2 modules imported by its zygote, but the first use of pandas "
                                   "(ValueError: no frames here) failed there",
                         "fix": "fix the module's installation (each run does that work itself until then)"}, check
    else:
        assert pre == {"loaded": [], "failed": {}}
        line = [ln for ln in err.splitlines() if "warm starts unavailable" in ln]
        assert len(line) == 1 and refused in line[0], err


NUMPY_DRAWS = textwrap.dedent("""\
    import numpy as np, random, secrets, tempfile, uuid
    [int(np.random.randint(0, 2**62)), int(np.random.default_rng().integers(0, 2**62)),
     np.random.get_state()[1][:4].tolist(), str(np.random.SeedSequence().entropy),
     next(tempfile._get_candidate_names()), random.getrandbits(62), secrets.token_hex(8), uuid.uuid4().hex]
    """)
DRAWN = ("numpy.random", "default_rng", "RandomState's key", "SeedSequence's entropy", "tempfile's names",
         "random", "secrets", "uuid4")


def test_nothing_a_preloaded_module_drew_repeats(policy_file):
    """numpy's global RandomState is drawn at import, in the zygote: every
    clone reseeds it from the kernel (runtime/pycell/_warm.py's _reseed), as
    tempfile's names, and random is reseeded by its own at-fork hook; what
    draws from the kernel at each call (default_rng, SeedSequence, secrets,
    uuid4) is shown to as well: two warm runs and two sessions never draw the
    same."""
    need_data_stack()
    mods = ["numpy", "tempfile", "random", "secrets", "uuid"]
    pol = policy_file({"python": {"preload": mods}})
    s = Mcp(["--policy", pol], pycell_env())
    try:
        assert info(s)["preload"]["loaded"] == mods
        a, b = (s.run(NUMPY_DRAWS)["return_value"] for _ in range(2))
        sids = [s.call("tools/call", {"name": "session_open", "arguments": {}})["structuredContent"]["session_id"]
                for _ in range(2)]
        c, d = (s.call("tools/call", {"name": "run_python", "arguments": {"code": NUMPY_DRAWS, "session_id": sid}})
                ["structuredContent"]["return_value"] for sid in sids)
        assert len(a) == len(DRAWN), a
        for i, what in enumerate(DRAWN):
            drawn = [json.dumps(x[i]) for x in (a, b, c, d)]
            assert len(set(drawn)) == 4, (what, drawn)
    finally:
        stop(s)


LEAVERS = {
    "leaves_thread": ("import threading, time\n"
                      "threading.Thread(target=time.sleep, args=(600,), name='leftover', daemon=True).start()\n",
                      "left a thread (leftover) behind"),
    "leaves_file": ("kept = open(__file__)\n", "left open descriptor "),
    # a failed import is checked as well
    "leaves_thread_and_fails": ("import threading, time\n"
                                "threading.Thread(target=time.sleep, args=(600,), name='half', daemon=True).start()\n"
                                "raise ImportError('half done')\n", "left a thread (half) behind"),
    "leaves_child": ("import subprocess\nchild = subprocess.Popen(['sleep', '600'], stdin=subprocess.DEVNULL, "
                     "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n",
                     "left a child process (sleep, pid "),
}


@pytest.mark.parametrize("mod", sorted(LEAVERS))
def test_a_preload_that_leaves_something_behind_is_refused(mod, host_tmp, policy_file, reap_leftovers):
    """The zygote does not start: the server says which module left what,
    and runs start cold; never a warm jail cloned beside a thread, a child
    or a descriptor of the zygote's."""
    src, said = LEAVERS[mod]
    # the zygote runs on the host: it finds the module in the user site
    # that PYTHONUSERBASE names (a jail's python finds nothing there)
    site = host_tmp / "lib" / ("python%d.%d" % PY_VERSION) / "site-packages"
    site.mkdir(parents=True)
    (site / (mod + ".py")).write_text(src)
    pol = policy_file({"python": {"preload": ["json", mod], "env": {"PYTHONUSERBASE": str(host_tmp)}}})
    s = Mcp(["--policy", pol], pycell_env())
    try:
        assert info(s)["preload"] == {"loaded": [], "failed": {}}
        assert s.call("tools/call", {"name": "run_python", "arguments": {"code": "6 * 7"}})[
            "structuredContent"]["return_value"] == 42
    finally:
        err = stop(s)
    line = [ln for ln in err.splitlines() if "warm starts unavailable" in ln]
    assert len(line) == 1, err
    assert "python.preload: importing %s %s" % (mod, said) in line[0], line[0]
    assert "take it out of the list" in line[0]
    # the child the import started went with the zygote that refused it
    left = [p for p in os.listdir("/proc") if p.isdigit() and _cmdline(p) == b"sleep\0" b"600\0"]
    assert left == [], left


def test_a_zygote_started_again_holds_no_call(host_tmp, policy_file):
    """A zygote that died is started again without the server waiting for
    it (src/run/spawn_warm.c, zygote_restart): with python.preload its
    start takes as long as the imports, and the server's loop answers
    everything meanwhile, the runs from cold jails.  Here the new zygote's
    preload takes 6 s (a module of the test's that sleeps at its second
    import): a call and a ping meanwhile take well under that, where a
    restart that waited held both for all of it.  Once the new zygote is
    ready, the pool fills with no call to ask, and runs are warm again."""
    mark = str(host_tmp / "imported")
    s = preloading(host_tmp, policy_file, "slow_second", f"import os, time\nif os.path.exists({mark!r}):\n"
                   f"    time.sleep(6)\nelse:\n    open({mark!r}, 'w').close()\n")
    try:
        assert info(s)["preload"] == {"loaded": ["slow_second"], "failed": {}}
        z = kill_zygote(s)
        t0 = time.monotonic()
        sc = s.call("tools/call", {"name": "run_python", "arguments": {"code": "2"}})["structuredContent"]
        assert s.call("ping", {}) == {}
        took = time.monotonic() - t0
        # started the new zygote, and ran cold: no warning, nothing failed
        assert (sc["status"], sc["return_value"], sc["warnings"]) == ("ok", 2, []), sc
        assert took < 4, f"a call and a ping while the zygote starts again took {took:.1f} s"
        z2 = zygote_of(s.proc.pid)
        assert z2 != z
        assert len(ready_jails(s, 2, timeout=60)) == 2
        assert zygote_of(s.proc.pid) == z2
        sc = s.run("import sys\n'slow_second' in sys.modules")
        assert sc["return_value"] is True
    finally:
        err = stop(s)
    assert "warm starts: the zygote (pid %d) stopped; starting a new one" % z in err, err[-3000:]
    assert "could not be started" not in err, err[-3000:]


def test_a_zygote_that_fails_to_start_again_is_tried_again(host_tmp, policy_file):
    """A zygote started in place of one that died, and that dies before it
    is ready (a module of the test's ends the process at its second
    import), is logged and tried again a second later, with no call to
    ask: the pool fills from the third, where a first start of a client's
    zygote that failed is not tried again."""
    count = str(host_tmp / "imports")
    s = preloading(host_tmp, policy_file, "exits_second", f"import os\nwith open({count!r}, 'a') as f:\n"
                   f"    f.write('x')\nif os.path.getsize({count!r}) == 2:\n    os._exit(3)\n")
    try:
        kill_zygote(s)
        sc = s.call("tools/call", {"name": "run_python", "arguments": {"code": "2"}})["structuredContent"]
        assert (sc["status"], sc["return_value"]) == ("ok", 2), sc
        # no zygote at all, for a while: the next is tried a second later
        deadline = time.monotonic() + 60
        while True:
            try:
                assert len(ready_jails(s, 2, timeout=1)) == 2
                break
            except AssertionError:
                if time.monotonic() > deadline:
                    raise
        assert s.run("3")["return_value"] == 3
        with open(count) as f:
            assert f.read() == "xxx"
    finally:
        err = stop(s)
    said = [ln for ln in err.splitlines() if "could not be started; runs start cold until another is" in ln]
    assert len(said) == 1 and "the zygote exited before it was ready" in said[0], err[-3000:]


def preloading(host_tmp, policy_file, name, src):
    """A warm server whose zygote preloads module name, of source src, from
    the user site that PYTHONUSERBASE names (the zygote runs on the host),
    once its pool is full."""
    site = host_tmp / "lib" / ("python%d.%d" % PY_VERSION) / "site-packages"
    site.mkdir(parents=True)
    (site / (name + ".py")).write_text(src)
    pol = policy_file({"python": {"preload": [name], "env": {"PYTHONUSERBASE": str(host_tmp)}}})
    s = Mcp(["--warm", "--policy", pol], pycell_env())
    try:
        ready_jails(s, 2)
    except BaseException:
        stop(s)
        raise
    return s


def kill_zygote(s):
    """Kill s's zygote, make the call that finds it gone (its jails went
    with it: that call starts cold), and wait until another may start (at
    most once a second).  Its pid."""
    z = zygote_of(s.proc.pid)
    os.kill(z, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while zygote_alive(z) and time.monotonic() < deadline:
        time.sleep(0.01)
    sc = s.call("tools/call", {"name": "run_python", "arguments": {"code": "1"}})["structuredContent"]
    assert (sc["status"], sc["return_value"]) == ("ok", 1), sc
    time.sleep(1.1)
    return z


def zygote_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _cmdline(pid):
    try:
        with open("/proc/%s/cmdline" % pid, "rb") as f:
            return f.read()
    except OSError:
        return b""


def test_a_module_name_is_checked_when_the_policy_loads(policy_file):
    for bad in ("a..b", "1abc", "numpy.", "a b", ".os", "os/path"):
        pol = policy_file({"python": {"preload": ["numpy", bad]}})
        r = subprocess.run([PYCELL, "run", "--policy", pol, "-c", "1"],
                           capture_output=True, text=True, env=pycell_env())
        assert r.returncode == 2, r
        assert r.stderr == ("pycell run: policy %s: python.preload[1]: expected a module name such as numpy "
                            "or matplotlib.pyplot, got %s\n" % (pol, json.dumps(bad))), r.stderr


THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS",
               "NUMEXPR_NUM_THREADS", "NUMEXPR_MAX_THREADS")
SHOW = "import os\nprint(' '.join(os.environ.get(k, '-') for k in %r))" % (THREAD_VARS,)


@pytest.mark.parametrize("warm", [False, True])
def test_thread_pools_are_sized_to_the_jail(warm, policy_file):
    """The CPU limit rounded up, at most the CPUs there are and half the
    task limit; a task limit below the host's core count gives one."""
    cpus = len(os.sched_getaffinity(0))
    flags = ["--warm"] if warm else []
    cases = [({"limits": {"cpu": 0.5}}, 1),
             ({"limits": {"cpu": 64}}, cpus),
             ({"limits": {"cpu": 0}}, cpus),
             ({"limits": {"cpu": 64, "pids": max(2, cpus - 1)}}, max(1, max(2, cpus - 1) // 2))]
    for over, n in cases:
        r = run_json(SHOW, "--policy", policy_file(over), *flags, env=pycell_env())
        assert (r["status"], r["stdout"]) == ("ok", " ".join([str(n)] * len(THREAD_VARS)) + "\n"), (over, r)
    if warm:
        # a session's interpreter has the same (a clone of the same zygote)
        s = Mcp(["--policy", policy_file({"limits": {"cpu": 0.5}})], pycell_env())
        try:
            sid = s.call("tools/call", {"name": "session_open", "arguments": {}})["structuredContent"]["session_id"]
            cell = s.call("tools/call", {"name": "run_python", "arguments": {"code": SHOW, "session_id": sid}})
            assert cell["structuredContent"]["stdout"] == " ".join(["1"] * len(THREAD_VARS)) + "\n", cell
        finally:
            s.close()
    # the policy's own value wins
    r = run_json(SHOW, "--policy", policy_file({"limits": {"cpu": 1}, "python": {"env": {"OMP_NUM_THREADS": "3"}}}),
                 *flags, env=pycell_env())
    assert r["stdout"] == "3 " + " ".join(["1"] * (len(THREAD_VARS) - 1)) + "\n", r
