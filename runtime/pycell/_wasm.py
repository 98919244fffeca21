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


def _confine():
    import _thread
    import threading
    _thread.start_new_thread = _refuse("threads are")
    threading.Thread.start = _refuse("threads are")
    os.system = _refuse("processes are")
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


def prepare(env):
    """Before the program (a ready jail does it ahead): os.environ env
    (node's, which the jail set), the refusals above, what a cell imports.
    Returns run."""
    from pycell import _cell  # noqa: F401 (imported ahead)
    sys.modules.pop("pyodide_js", None)   # unregistered by the runner
    os.environ.clear()
    os.environ.update(env)
    _confine()
    sys.meta_path.append(_Missing)
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
