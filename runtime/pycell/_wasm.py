"""The WASM backend's side of a run (runtime/wasm/runner.mjs calls run()).

Pyodide is CPython compiled to WebAssembly: no threads, no processes, no
sockets.  What needs them fails here with WasmUnsupported, which names the
limitation and the backend that has it, instead of Pyodide's own terser
errors.  fd 3 is the tool socket as on the native path (the runner maps it:
one read or write is one packet), so pycell.tools and pycell._cell work
unchanged but for the socket object (tools.py asks channel()).
"""

import os
import sys

TOOL_FD = 3
# The largest packet the supervisor sends (a tool result within
# max_result_bytes, JSON-RPC around it)
MAX_PACKET = 8 << 20


class WasmUnsupported(RuntimeError):
    """What Pyodide cannot do on pycell's wasm backend."""


def _refuse(what):
    def refuse(*args, **kwargs):
        raise WasmUnsupported("%s not available on pycell's wasm backend (Pyodide): "
                              "run this code on the native backend" % what)
    return refuse


class _Channel:
    """fd 3 as tools.py uses a socket: send() a packet, recv_packet() one."""

    def send(self, data):
        return os.write(TOOL_FD, data)

    def recv_packet(self):
        return os.read(TOOL_FD, MAX_PACKET)


def channel():
    return _Channel()


def _no_program(*args, **kwargs):
    import errno
    raise PermissionError(errno.EPERM, "system(): no other program runs on pycell's wasm backend "
                          "(Pyodide): run this code on the native backend")


def _confine():
    import _thread
    import posix
    import threading
    _thread.start_new_thread = _refuse("threads are")
    threading.Thread.start = _refuse("threads are")
    # Emscripten's system() is Node's child_process (the runner gives it a
    # stand-in that runs nothing): an OSError here, whichever name is called
    os.system = posix.system = _no_program
    for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "execv", "execve", "execvp"):
        if hasattr(os, name):
            setattr(os, name, _refuse("processes are"))
    import socket
    socket.socket = _refuse("sockets are")
    socket.socketpair = _refuse("sockets are")
    socket.create_connection = _refuse("sockets are")
    import subprocess
    subprocess.Popen = _refuse("processes are")


# The last finder on sys.meta_path: a module nothing else found is not in
# Pyodide's distribution, and the error says so.  Compiled under the name
# of importlib's own frames, which python leaves out of an ImportError's
# traceback, so that it shows the user's import only, as python's does.
_MISSING = """
class _Missing:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if "." in name:
            return None
        raise ModuleNotFoundError("No module named %r: the wasm backend has Pyodide's standard "
                                  "library only; run this code on the native backend for %s"
                                  % (name, name), name=name)
"""
_ns = {}
exec(compile(_MISSING, "<frozen importlib._bootstrap>", "exec"), _ns)
_Missing = _ns["_Missing"]


def _script(argv):
    """python PROG ARGS...: the program as __main__, sys.argv as given."""
    main = sys.modules["__main__"]
    path = argv[0]
    sys.argv[:] = list(argv)
    sys.path[0:0] = [os.path.dirname(path)]
    with open(path, "rb") as f:
        code = compile(f.read(), path, "exec")
    main.__dict__.update({"__name__": "__main__", "__file__": path, "__builtins__": __builtins__})
    exec(code, main.__dict__)


# The JavaScript objects Python may hold once prepare() is done, by where
# they are: the `js` module (the runner's empty object: the import hook's
# one registered module, and sys.modules' once imported) and the scheduler
# asyncio runs on (pyodide.webloop).  Every other one reachable from
# Python's heap (pyodide_js and its submodules, which held Pyodide's API:
# FS, the Emscripten Module, loadPackage; their loaders; the package
# loader's record) is dropped from what holds it, and the start fails if
# one is left.
def _js_registries():
    """The import hook's registries of JavaScript modules (JsFinder's)."""
    return [r for r in (getattr(f, "jsproxies", None) for f in sys.meta_path) if isinstance(r, dict)]


def _js_allowed():
    held = set()
    for registry in _js_registries():
        if "js" in registry:
            held.add(id(registry["js"]))
    for mod, attr in (("js", None), ("pyodide.webloop", "scheduleCallback")):
        m = sys.modules.get(mod)
        if m is not None:
            held.add(id(m if attr is None else getattr(m, attr, None)))
    return held


def _js_held():
    """(holder, key) for each place on Python's heap that holds a
    JavaScript object beyond the allowlist: a dict's key, a list's index or
    an object's attribute (key None: a holder of another kind).  One pass
    in C over every referent of every tracked object (JsProxy objects are
    not tracked themselves), then the holders of the few found."""
    import gc
    import itertools
    from pyodide.ffi import JsProxy
    allowed = _js_allowed()
    refs = gc.get_referents(*gc.get_objects())
    kinds = {t for t in set(map(type, refs)) if issubclass(t, JsProxy)}
    found = {id(r): r for r in itertools.compress(refs, map(kinds.__contains__, map(type, refs)))}
    for i in allowed:
        found.pop(i, None)
    del refs
    proxies = list(found.values())
    held = []
    for o in gc.get_referrers(*proxies):
        if o is proxies or o is found:
            continue
        if isinstance(o, dict):
            keys = [k for k, v in o.items() if id(v) in found]
        elif isinstance(o, list):
            keys = [i for i, v in enumerate(o) if id(v) in found]
        elif not isinstance(o, type) and isinstance(getattr(o, "__dict__", None), dict):
            keys = [k for k, v in vars(o).items() if id(v) in found]
        else:
            keys = []
        held += [(o, k) for k in keys] or [(o, None)]
    return held


def _seal():
    """Drop every JavaScript object beyond the allowlist from what holds
    it; one that something else holds (a tuple, a frame) fails the start."""
    for name in [n for n in sys.modules if n == "pyodide_js" or n.startswith("pyodide_js.")]:
        del sys.modules[name]
    for registry in _js_registries():
        for name in [n for n in registry if n != "js"]:
            del registry[name]
    left = []
    for o, k in _js_held():
        if k is None:
            left.append((o, k))
        elif isinstance(o, (dict, list)):
            o[k] = None
        else:
            setattr(o, k, None)
    if left:
        raise RuntimeError("pycell: the wasm runner could not take from Python the JavaScript objects "
                           "held by %s" % ", ".join(sorted({"%s" % type(o).__name__ for o, _ in left})))


def prepare(env):
    """Before the program (a ready jail does it ahead): os.environ env
    (node's, which the jail set), the refusals above, what a cell imports,
    and no JavaScript object left to Python but the allowlist's.
    Returns run."""
    from pycell import _cell  # noqa: F401 (imported ahead)
    os.environ.clear()
    os.environ.update(env)
    _confine()
    sys.meta_path.append(_Missing)
    _seal()
    return run


def run(mode, argv, files=None):
    """Run the program: a cell from /run/pycell's files, or from files
    (the bytes a ready or bare jail was given), or a script (argv: its
    name, then its arguments; files, when given, are written to
    /run/pycell first).  Python's exit status."""
    from pycell import _cell
    try:
        try:
            if mode == "cell-ready":
                f = _cell._unpack(files.to_bytes())
                _cell.main(f.get("main.py", b""), f.get("variables.json", b""), f.get("files.json", b""),
                           f.get("outputs", b""))
            elif mode == "cell":
                _cell.main()
            else:
                if files is not None:
                    # a bare jail's script: its files, in Pyodide's /run/pycell
                    for name, data in _cell._unpack(files.to_bytes()).items():
                        with open("/run/pycell/" + name, "wb") as f:
                            f.write(data)
                _script(["/run/pycell/" + argv[0]] + list(argv[1:]))
        except SystemExit as e:
            return _cell.exit_status(e)
        except BaseException as e:
            # as python prints it: without this frame
            import traceback
            tb = e.__traceback__
            while tb is not None and tb.tb_frame.f_code in (run.__code__, _script.__code__):
                tb = tb.tb_next
            traceback.print_exception(type(e), e, tb)
            return 1
        return 0
    finally:
        for f in (sys.stdout, sys.stderr):
            try:
                f.flush()
            except Exception:
                pass
