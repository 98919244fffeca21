"""Warm starts: the Python the zygote (src/run/zygote.c) runs.

The zygote is pycell re-executed with libpython loaded: one interpreter,
initialised once, that every warm jail inherits by being cloned from it.
This module is loaded by the zygote before any jail exists, compiled under
the path it has in a jail (/run/pycell/lib/pycell/_warm.py) so tracebacks
name no host path.  It is trusted code: it never runs a program itself,
and it holds nothing of the supervisor (no configuration, no tokens).

    preload(host, jail)   in the zygote: pycell, pycell._cell, pycell._session
                          (a first cell's setup, _cell.prime, is the zygote's
                          last step: src/run/zygote.c settle)
    preload_modules(names) in the zygote: the policy's python.preload
    set_environment(env)  in the zygote: os.environ as a run's python has it
    script_prelude(path)  in a warm jail's python, before a script
    ready()               in a ready jail's python, before its cell comes
    finish()              in a warm jail's python, after the program: 0, or
                          120 when a standard stream could not be flushed
"""

import sys

LIB = "/run/pycell/lib"


def preload(host, jail=LIB):
    """Load the runtime modules every cell imports (pycell, pycell._cell)
    and a session's loop (pycell._session, with the C modules it uses:
    compiled in each session, it and its imports were 1.7 MiB of every
    idle session's own memory) from the host's runtime dir, compiled and
    registered under the paths they have in a jail: tracebacks and
    __file__ name /run/pycell/lib, never a host path, and pycell's
    submodules are found there."""
    import importlib.machinery
    import importlib.util
    for name, rel in (("pycell", "/pycell/__init__.py"), ("pycell._cell", "/pycell/_cell.py"),
                      ("pycell._session", "/pycell/_session.py")):
        path = jail + rel
        spec = importlib.util.spec_from_file_location(
            name, path, loader=importlib.machinery.SourceFileLoader(name, path),
            submodule_search_locations=[jail + "/pycell"] if name == "pycell" else None)
        m = importlib.util.module_from_spec(spec)
        with open(host + rel, "rb") as f:
            code = compile(f.read(), path, "exec", dont_inherit=True)
        sys.modules[name] = m
        exec(code, m.__dict__)
    sys.modules["pycell"]._cell = sys.modules["pycell._cell"]
    sys.modules["pycell"]._session = sys.modules["pycell._session"]
    sys.modules["pycell"]._warm = sys.modules[__name__]


# What the zygote's environment says while the policy's modules load: the
# jail's paths (HOME /workspace, MPLCONFIGDIR /tmp/matplotlib) are the
# host's here, where the zygote runs, so whatever a module writes at import
# goes to a directory the supervisor made for it instead; and one thread per pool
# (a thread started now would not survive the clone into a jail).
_PRELOAD_DIRS = ("HOME", "TMPDIR", "MPLCONFIGDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME")
_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS",
                "NUMEXPR_NUM_THREADS", "NUMEXPR_MAX_THREADS")


def _left_behind(fds_before):
    """The threads, children and new descriptors of this process, named;
    the children are killed (the zygote will not start, and nothing it
    started may outlive it)."""
    import os
    import signal
    left = []
    t = sys.modules.get("threading")
    names = {th.native_id: th.name for th in t.enumerate()} if t else {}
    for tid in os.listdir("/proc/self/task"):
        if int(tid) != os.getpid():
            left.append("a thread (%s)" % names.get(int(tid), _read("/proc/self/task/%s/comm" % tid)))
    for child in _children(os.getpid()):
        left.append("a child process (%s, pid %d)" % (_read("/proc/%d/comm" % child), child))
        try:
            os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)
        except OSError:
            pass
    for fd in sorted(_open_fds() - fds_before, key=int):
        try:
            left.append("open descriptor %s (%s)" % (fd, os.readlink("/proc/self/fd/" + fd)))
        except OSError:
            left.append("open descriptor %s" % fd)
    return left


def _children(pid):
    """The processes whose parent is pid (from /proc/PID/stat: every kernel
    has it, unlike .../task/TID/children)."""
    import os
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            st = _read("/proc/%s/stat" % d, "")
            if st and st[st.rindex(")") + 2:].split()[1] == str(pid):
                out.append(int(d))
    return out


def _open_fds():
    """This process's open descriptors (not the listing's own, closed by
    the time it is checked)."""
    import os
    fds = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            os.fstat(int(fd))
            fds.add(fd)
        except OSError:
            pass
    return fds


def _read(path, missing="?"):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return missing


def _matplotlib_ready():
    """matplotlib's font list built now (it took a run 0.5 s), and its
    configuration and cache directories forgotten: they were the zygote's;
    in a jail they are MPLCONFIGDIR's (/tmp/matplotlib) again."""
    import matplotlib
    import matplotlib.font_manager  # noqa: F401 (builds fontManager)
    for name, fmt in (("get_configdir", "CONFIGDIR=%s"), ("get_cachedir", "CACHEDIR=%s")):
        f = getattr(matplotlib, name, None)
        if getattr(f, "__wrapped__", None) is not None and hasattr(matplotlib, "_logged_cached"):
            setattr(matplotlib, name, matplotlib._logged_cached(fmt, f.__wrapped__))


def _pyplot_first_figure():
    """What a run's first figure does once per process, done here: the Agg
    backend and PIL's writers (a savefig's) imported, the default font found,
    pyplot's backend resolved, a figure drawn and encoded as a cell's image
    is (pycell._cell._png).  The figure is closed; the fonts loaded are
    let go (each holds its file open, which a jail must not inherit, and
    matplotlib lets them go in every fork anyway)."""
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots()
    try:
        ax.plot([0, 1, 2], [0, 1, 4])
        ax.set_title("pycell")
        sys.modules["pycell._cell"]._png(fig)
    finally:
        plt.close(fig)
    try:
        from PIL import Image
        Image.preinit()   # PIL's writers, as a user's savefig imports them first (a cell's image needs none)
    except ImportError:
        pass
    fm = sys.modules["matplotlib.font_manager"]
    if hasattr(fm, "_get_font"):
        fm._get_font.cache_clear()
    text = sys.modules.get("matplotlib.text")
    f = getattr(text, "_get_text_metrics_with_cache_impl", None)
    if f is not None and hasattr(f, "cache_clear"):
        f.cache_clear()   # keyed by the closed figure's renderer


def _pandas_first_frame():
    """What a run's first DataFrame work does once per process, done here:
    a frame grouped and shown as a cell's value is (repr), which imports and
    builds pandas' formatting machinery."""
    import pandas
    df = pandas.DataFrame({"k": [1, 2, 1], "v": [1.5, 2.0, 3.0]})
    repr(df.groupby("k").v.sum())
    repr(df)


# The preloaded modules whose first use a run would repeat: done once in
# the zygote after the imports, each when its module loaded (a failure is
# reported as "unused" and is never fatal; what one leaves behind is
# refused as an import's is)
_FIRST_USES = (("matplotlib.pyplot", _pyplot_first_figure), ("pandas", _pandas_first_frame))

# Those done in the zygote, by module name, in order: first use i of the
# zygote's hot pages (zygote.c) is _used[i]
_used = []


def _hot_use(i):
    """Replaced by the zygote's (zygote.c give_hot_use), which copies the
    pages first use i writes.  The pages copied."""
    return 0


def first_uses():
    """How many first uses the zygote did (zygote.c hot_probe)."""
    return len(_used)


def first_use(i):
    """In the zygote's probe (zygote.c hot_probe), after what a ready jail
    does before its cell: first use i again, as a cell's first figure or
    frame would do it in a clone, so that the pages it writes are learned.
    0, or 1 when it raised."""
    try:
        dict(_FIRST_USES)[_used[i]]()
    except Exception:
        return 1
    return 0


def _names(code, into):
    """The names code and the code nested in it use (imports among them:
    `import pandas` is the name "pandas", `import matplotlib.pyplot`
    "matplotlib.pyplot")."""
    into.update(code.co_names)
    for c in code.co_consts:
        if type(c) is type(code):
            _names(c, into)


def cell_uses(*codes):
    """In a jail, for a cell compiled to codes (None for none) before it
    runs: a cell that names a module whose first use the zygote did (its
    package, as an import does) has the pages that first use writes
    copied now, in a few calls instead of a fault each (_hot_use, which
    does so in a ready jail made ahead only).  A hint: what the cell does
    is not changed, and a cell that imports the module another way takes
    the faults as before."""
    names = set()
    for code in codes:
        if code is not None:
            _names(code, names)
    packages = {n.partition(".")[0] for n in names}
    for i, name in enumerate(_used):
        if name.partition(".")[0] in packages:
            _hot_use(i)


def _reseed():
    """In every clone of the zygote (PyOS_AfterFork_Child runs it, after
    random's own reseed): what a preloaded module drew at import is drawn
    afresh from the kernel, so no two runs or sessions share it."""
    m = sys.modules.get("tempfile")
    if m is not None:
        m._name_sequence = None
    m = sys.modules.get("numpy.random")
    if m is not None:
        _reseed_numpy(m)


def _reseed_numpy(np_random):
    """numpy's global RandomState given a Mersenne Twister state of the
    kernel's words, as numpy.random.seed() makes one from its 128 bits
    (the first word 0x80000000, so the state is never all zeros, the rest
    drawn, pos 624 and no Gaussian kept), but 19,936 bits straight from
    os.urandom: seed() draws through SeedSequence's Python-level mixing,
    whose every object touched is a page copied in each clone (an idle
    data session's PSS 3.2 -> 2.9 MiB, tests/bench/RESULTS-data.md).  seed()
    still when the global generator refuses the state (one not MT19937)."""
    import array
    import os
    key = array.array("I", os.urandom(624 * 4))
    key[0] = 0x80000000
    try:
        np_random.set_state(("MT19937", key, 624, 0, 0.0))
    except Exception:
        np_random.seed()


def _why(e):
    """An exception as the preload's report gives it."""
    return ("%s: %s" % (type(e).__name__, e))[:300]


def _refusal(fds_before, what, hint=""):
    """The preload's report refusing it when what was done left a thread,
    a child or a descriptor behind (the zygote does not start), JSON; None
    when it left nothing."""
    import json
    left = _left_behind(fds_before)
    if not left:
        return None
    return json.dumps({"refused": "python.preload: %s left %s behind%s" % (what, ", ".join(left), hint)})


def preload_modules(names, own):
    """Import the policy's python.preload in the zygote, where every warm
    run and session inherits them.  A module that fails to import is left
    out and reported; one that leaves a thread, a child process or an open
    descriptor behind is refused, named, and the zygote does not start.
    Then the first use of those in _FIRST_USES, once.  names and the
    result are JSON: {"loaded": [...], "failed": {name: error}, "ms": N,
    and "unused": {name: error} if a first use failed}, or {"refused":
    why}.  own: an empty directory of the
    supervisor's (0700), where the imports' writes go; emptied here, and
    removed by the supervisor, also when this process is killed first."""
    import json
    names = json.loads(names)
    report = {"loaded": [], "failed": {}, "ms": 0}
    if not names:
        return json.dumps(report)
    import os
    import time
    import shutil
    import tempfile
    t0 = time.monotonic()
    saved = {k: os.environ.get(k) for k in _PRELOAD_DIRS + _THREAD_VARS}
    if not own:
        own = tempfile.mkdtemp(prefix="pycell-zygote-")
    os.environ.update({k: own + "/" + k.lower() for k in _PRELOAD_DIRS})
    os.environ.update({k: "1" for k in _THREAD_VARS})
    fds = _open_fds()
    try:
        for name in names:
            try:
                __import__(name)
                if name.split(".")[0] == "matplotlib":
                    _matplotlib_ready()
                report["loaded"].append(name)
            except BaseException as e:
                report["failed"][name] = _why(e)
            # a failed import may have started something too
            refused = _refusal(fds, "importing %s" % name, " (a warm jail is a clone of one thread; take it "
                               "out of the list)")
            if refused:
                return refused
        for name, use in _FIRST_USES:
            if sys.modules.get(name) is None:
                continue
            try:
                use()
                _used.append(name)
            except BaseException as e:
                report.setdefault("unused", {})[name] = _why(e)
            refused = _refusal(fds, "the first use of %s" % name)
            if refused:
                return refused
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(own, ignore_errors=True)
        tempfile.tempdir = None   # a jail's TMPDIR, looked up again there
    os.register_at_fork(after_in_child=_reseed)
    if _used:
        sys.modules["pycell._cell"].first_uses = cell_uses
    report["ms"] = round((time.monotonic() - t0) * 1000)
    return json.dumps(report)


def _environment(env):
    """os.environ made env (mostly equal already: the zygote's is)."""
    import os
    if dict(os.environ) != env:
        os.environ.clear()
        os.environ.update(env)


def set_environment(env):
    """In the zygote, once, after its imports: the environment a cell's
    python has (the policy's, without the interpreter flags' equivalents
    the zygote started with), JSON; every clone inherits it.  0."""
    import json
    _environment(json.loads(env))
    return 0


def _forget_lib():
    """The zygote looked for /run/pycell/lib before any jail had it; its
    other path entries are the same directories in a jail (/usr is bound)."""
    sys.path_importer_cache.pop(LIB, None)


def script_prelude(warm_file):
    """Before a script: its sys.argv, environment and sys.path[0], as
    python would have set them from the cold argv (.warm.json, written by
    the supervisor into the run dir)."""
    import json
    with open(warm_file, "rb") as f:
        cfg = json.load(f)
    _environment(cfg["env"])
    sys.argv[:] = cfg["argv"]
    sys.path.insert(0, cfg["path0"])
    _forget_lib()
    return 0


def ready(warm=1):
    """In a ready jail before its cell arrives: what `python -c "import
    pycell._cell ..."` would have for sys.argv and sys.path[0] (os.environ
    is the zygote's, set_environment's), then, in a jail made ahead of its
    request (warm), the cell runtime's warm-up.  0."""
    sys.argv[:] = ["-c"]
    sys.path.insert(0, "")
    _forget_lib()
    if warm:
        sys.modules["pycell._cell"].warm_up()
    return 0


def finish():
    """The end of a warm run: what Py_FinalizeEx does that a program can
    see (non-daemon threads joined, atexit handlers, __main__'s objects
    released so their __del__ and file flushes run, like the teardown of a
    cold python, and the standard streams flushed; returns 120, python's
    exit status then, when a flush failed, else 0), without tearing down
    the interpreter inherited from the zygote, which took 2 ms of
    copy-on-write faults per run and lost output written at teardown
    (test_run_cli.py::test_exit_runs_what_teardown_runs)."""
    import gc
    t = sys.modules.get("threading")
    if t is not None:
        try:
            t._shutdown()
        except Exception:
            sys.excepthook(*sys.exc_info())
    import atexit
    atexit._run_exitfuncs()
    g = sys.modules["__main__"].__dict__
    # in the order a cold python's teardown releases them: insertion
    for k in list(g):
        if k != "__builtins__":
            g[k] = None
    gc.collect()
    ok = True
    # sys.stdout and sys.stderr as the interpreter flushes them (a failure
    # is status 120), then the original objects, which a cold python
    # flushes when it frees them
    for name in ("stdout", "stderr", "__stdout__", "__stderr__"):
        f = getattr(sys, name, None)
        if f is None or getattr(f, "closed", False):
            continue
        try:
            f.flush()
        except Exception as e:
            if name.startswith("__"):
                continue
            ok = False
            try:   # as python's exit words it (PyErr_WriteUnraisable)
                import traceback
                sys.__stderr__.write("Exception ignored in: %r\n%s" % (
                    f, "".join(traceback.format_exception_only(type(e), e))))
            except Exception:
                pass
    return 0 if ok else 120
