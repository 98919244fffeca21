"""Warm starts: the Python the zygote (src/run/zygote.c) runs.

The zygote is pycell re-executed with libpython loaded: one interpreter,
initialised once, that every warm jail inherits by being cloned from it.
This module is loaded by the zygote before any jail exists, compiled under
the path it has in a jail (/run/pycell/lib/pycell/_warm.py) so tracebacks
name no host path.  It is trusted code: it never runs a program itself,
and it holds nothing of the supervisor (no configuration, no tokens).

    preload(host, jail)   in the zygote: pycell and pycell._cell
    script_prelude(path)  in a warm jail's python, before a script
    ready(env)            in a ready jail's python, before its cell comes
    finish()              in a warm jail's python, after the program: 0, or
                          120 when a standard stream could not be flushed
"""

import sys

LIB = "/run/pycell/lib"


def preload(host, jail=LIB):
    """Load the runtime modules every cell imports (pycell, pycell._cell)
    from the host's runtime dir, compiled and registered under the paths
    they have in a jail: tracebacks and __file__ name /run/pycell/lib,
    never a host path, and pycell's submodules are found there."""
    import importlib.machinery
    import importlib.util
    for name, rel in (("pycell", "/pycell/__init__.py"), ("pycell._cell", "/pycell/_cell.py")):
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
    sys.modules["pycell"]._warm = sys.modules[__name__]


def _environment(env):
    """The zygote started with the policy's environment: mostly equal."""
    import os
    if dict(os.environ) != env:
        os.environ.clear()
        os.environ.update(env)


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


def ready(env):
    """In a ready jail before its cell arrives: what `python -c "import
    pycell._cell ..."` would have for sys.argv, sys.path[0] and os.environ,
    then the cell runtime's warm-up."""
    _environment(env)
    sys.argv[:] = ["-c"]
    sys.path.insert(0, "")
    _forget_lib()
    sys.modules["pycell._cell"].warm_up()


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
