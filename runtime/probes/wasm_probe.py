"""pycell policy-test's probes for the wasm backend (Pyodide in Node).

    wasm_probe.py CATEGORY CANARIES_JSON     (argv, as probe.py takes them)

The native probes (probe.py) make system calls through ctypes, which
Pyodide has not; these probe what a wasm run can reach instead: JavaScript
and Node from Python, the host's files and canaries through Pyodide's file
system, the network through its socket module, and the limits with bombs.
stdout: first {"plan": [NAME, ...]}, then {"name", "status", "reason"} for
each probe, status contained, escaped or error; a bomb (resources/NAME)
prints {"verdict", "reason"} when it ends by itself.
"""

import json
import os
import sys


class Escaped(Exception):
    pass


C = json.loads(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2] != "-" else {}


def report(name, status, reason):
    print(json.dumps({"name": name, "status": status, "reason": reason}), flush=True)


def refused(what, f):
    """f() must raise: returns why; Escaped with what it returned if not."""
    try:
        got = f()
    except BaseException as e:   # JsException, AttributeError, ImportError, ...
        return "%s refused: %s: %s" % (what, type(e).__name__, str(e)[:120])
    raise Escaped("%s returned %r" % (what, repr(got)[:120]))


# ------------------------------------------------------------ javascript

def _ctor():
    """Function, reached from any JavaScript object: a to_js list's
    constructor (Array) has it as its own constructor."""
    from pyodide.ffi import to_js
    return to_js([1]).constructor.constructor


def js_module():
    import js
    names = [n for n in ("process", "require", "globalThis", "global", "fetch", "WebSocket", "Function",
                         "eval", "module", "Buffer") if hasattr(js, n)]
    if names:
        raise Escaped("the js module has " + ", ".join(names))
    return "the js module is an empty object (no process, require, globalThis, fetch, eval, ...)"


def pyodide_js():
    return refused("import pyodide_js", lambda: __import__("pyodide_js").FS)


def run_js():
    def f():
        from pyodide.code import run_js as r
        return r("typeof process")
    return refused("pyodide.code.run_js", f)


def function_constructor():
    return refused("Function('return globalThis.process')", lambda: _ctor()("return globalThis.process")())


def dynamic_import():
    return refused("import('node:child_process') through Function",
                   lambda: _ctor()("return import('node:child_process')")())


def async_function_constructor():
    # AsyncFunction, from an async function's prototype chain
    def f():
        from pyodide.ffi import to_js
        obj = to_js({"a": 1})
        proto = obj.constructor.getPrototypeOf(obj.constructor)
        return proto.constructor("return process")()
    return refused("a constructor from the prototype chain", f)


def node_globals_deleted():
    """A Python object converted to JavaScript is in the runner's realm:
    its constructor's constructor must not reach the global object, and
    no property of the Pyodide objects Python holds may be `process`."""
    import js
    from pyodide.ffi import to_js
    arr = to_js([1])
    for path in ("constructor.process", "constructor.constructor.process", "__proto__.process"):
        o = arr
        try:
            for part in path.split("."):
                o = getattr(o, part)
        except AttributeError:
            continue
        raise Escaped("%s is reachable from a converted list" % path)
    return "no process on a converted object's constructor chain; js has %d names" % len(dir(js))


def pyodide_api_modules():
    """pyodide_js is unregistered, and none of its submodules (_api held
    Pyodide's API: FS, the Emscripten Module, loadPackage) is left."""
    left = sorted(n for n in sys.modules if n == "pyodide_js" or n.startswith("pyodide_js."))
    if left:
        raise Escaped("sys.modules still has " + ", ".join(left))
    return refused("import pyodide_js._api", lambda: __import__("pyodide_js._api").FS)


def heap_javascript():
    """Every JavaScript object reachable from Python's heap is on the
    runner's allowlist: the empty `js` module and asyncio's scheduler."""
    import gc
    from pyodide.ffi import JsProxy
    allowed = {id(sys.modules.get("js"))}
    for finder in sys.meta_path:
        reg = getattr(finder, "jsproxies", None)
        if isinstance(reg, dict):
            if set(reg) - {"js"}:
                raise Escaped("the import hook still registers " + ", ".join(sorted(set(reg) - {"js"})))
            allowed |= {id(v) for v in reg.values()}
    webloop = sys.modules.get("pyodide.webloop")
    allowed.add(id(getattr(webloop, "scheduleCallback", None)))
    found = set()
    for o in gc.get_objects():
        for r in gc.get_referents(o):
            if isinstance(r, JsProxy) and not isinstance(r, type) and id(r) not in allowed:
                found.add("a %s held by a %s" % (type(r).__name__, type(o).__name__))
        if not isinstance(o, type) and isinstance(getattr(o, "__dict__", None), dict):
            for k, v in vars(o).items():
                if isinstance(v, JsProxy) and not isinstance(v, type) and id(v) not in allowed:
                    found.add("%s.%s" % (type(o).__name__, k))
    if found:
        raise Escaped("JavaScript objects beyond the allowlist: " + "; ".join(sorted(found))[:300])
    return "no JavaScript object on Python's heap but js and the asyncio scheduler"


def frozen_intrinsics():
    """The realm's prototypes cannot be changed from Python: a method or a
    getter put there would run inside Pyodide's own code and be handed
    what that code holds."""
    from pyodide.ffi import create_proxy, to_js
    arr = to_js([1])
    obj_proto = getattr(arr.constructor.prototype, "__proto__")
    Object = obj_proto.constructor
    targets = [("Array.prototype", arr.constructor.prototype), ("Object.prototype", obj_proto),
               ("Function.prototype", getattr(arr.constructor, "__proto__"))]
    why = []
    for what, o in targets:
        why.append(refused("a property on " + what, lambda: setattr(o, "pycell_probe", 1)))
    spy = create_proxy(lambda *a: None)
    desc = to_js({"get": spy}, dict_converter=Object.fromEntries)
    why.append(refused("a getter on Object.prototype", lambda: Object.defineProperty(obj_proto, "pycell_probe", desc)))
    if hasattr(obj_proto, "pycell_probe"):
        raise Escaped("Object.prototype took a property")
    return "; ".join(w.split(": ", 1)[0] for w in why) + ": all refused (frozen)"


def emscripten_system():
    """Emscripten's system() spawns a shell through Node's child_process:
    posix.system is an OSError, and libc's system() through ctypes runs
    nothing (the shell could not be run: 127) instead of a fatal error."""
    import posix
    why = [refused("posix.system", lambda: posix.system("touch /workspace/ran"))]
    try:
        import ctypes
    except ImportError:
        ctypes = None
    if ctypes is not None:
        status = ctypes.CDLL(None).system(b"touch /workspace/ran")
        if status >> 8 != 127:
            raise Escaped("libc system() through ctypes returned %d" % status)
        why.append("libc system() through ctypes: status %d (no shell)" % status)
    if os.path.exists("/workspace/ran"):
        raise Escaped("a command ran")
    return "; ".join(why)


# ------------------------------------------------------------ filesystem

def host_canary_file():
    path = C.get("file", "/nonexistent")
    return refused("reading the host canary " + path, lambda: open(path).read())


def run_dir_read_only():
    """Each way of writing must fail, and nothing may appear in the real
    directory (NODEFS lists it from the jail's file system).  A bare jail's
    /run/pycell (a host that refuses namespaces) is Pyodide's own, in its
    memory like /tmp (the same device): there only its lib, the host's
    runtime, is the host's."""
    why = []
    bare = os.stat("/run/pycell").st_dev == os.stat("/tmp").st_dev
    ways = [("write lib", lambda: open("/run/pycell/lib/pycell/__init__.py", "a").close()),
            ("mkdir in lib", lambda: os.mkdir("/run/pycell/lib/probe-dir"))]
    if not bare:
        ways[:0] = [("open(w)", lambda: open("/run/pycell/probe-written", "w").close()),
                    ("mkdir", lambda: os.mkdir("/run/pycell/probe-dir"))]
    for what, f in ways:
        why.append(refused(what, f))
    left = [] if bare else sorted({"probe-written", "probe-dir"} & set(os.listdir("/run/pycell")))
    left += ["lib/probe-dir"] if "probe-dir" in os.listdir("/run/pycell/lib") else []
    if left:
        raise Escaped("created in /run/pycell: " + ", ".join(left))
    return "; ".join(why) + ("; /run/pycell itself is Pyodide's own (no namespaces here)" if bare else "")


def host_root_invisible():
    seen = sorted(os.listdir("/"))
    host_only = [d for d in ("boot", "root", "var", "usr", "etc", "srv", "opt") if d in seen]
    if host_only:
        # /usr and /etc would be Pyodide's own if it had them; read one to tell
        raise Escaped("the root lists " + ", ".join(host_only))
    return "the root is Pyodide's own: " + " ".join(seen)


# ------------------------------------------------------------ leaks

def env_canary():
    token = C.get("token", "")
    for k, v in os.environ.items():
        if token and token in v or k == C.get("env_name"):
            raise Escaped("the environment has the supervisor's canary (%s)" % k)
    return "the canary is not in os.environ (%d variables)" % len(os.environ)


def argv_canary():
    for w in C.get("supervisor_argv", []):
        if any(w in a for a in sys.argv[:1]):
            raise Escaped("sys.argv shows the supervisor's " + w)
    return "sys.argv is the program's"


# ------------------------------------------------------------ network

def raw_socket_module():
    def f():
        import _socket
        s = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
        s.settimeout(2)
        s.connect(("127.0.0.1", int(C.get("tcp_port", 1))))
        return s
    return refused("a TCP connection through _socket", f)


def socket_module():
    def f():
        import socket
        return socket.create_connection(("127.0.0.1", int(C.get("tcp_port", 1))), timeout=2)
    return refused("socket.create_connection", f)


PROBES = {
    "javascript": [("js-module-empty", js_module), ("pyodide-js", pyodide_js), ("run-js", run_js),
                   ("function-constructor", function_constructor), ("dynamic-import", dynamic_import),
                   ("prototype-constructor", async_function_constructor),
                   ("converted-objects", node_globals_deleted), ("pyodide-api-modules", pyodide_api_modules),
                   ("heap-javascript", heap_javascript), ("frozen-intrinsics", frozen_intrinsics),
                   ("emscripten-system", emscripten_system)],
    "filesystem": [("host-canary-file", host_canary_file), ("run-dir-read-only", run_dir_read_only),
                   ("host-root-invisible", host_root_invisible)],
    "leaks": [("env-canary", env_canary), ("argv-canary", argv_canary)],
    "network": [("raw-socket", raw_socket_module), ("socket", socket_module)],
}


# ------------------------------------------------------------ bombs

def verdict(status, reason):
    print(json.dumps({"verdict": status, "reason": reason}), flush=True)


def thread_bomb(lim):
    import threading
    n = 0
    try:
        for _ in range(10000):
            threading.Thread(target=lambda: None).start()
            n += 1
    except Exception as e:
        return verdict("contained", "%d threads, then %s: %s" % (n, type(e).__name__, str(e)[:100]))
    verdict("escaped", "%d threads started" % n)


def fork_bomb(lim):
    n = 0
    try:
        for _ in range(10000):
            os.fork()
            n += 1
    except Exception as e:
        return verdict("contained", "%d forks, then %s: %s" % (n, type(e).__name__, str(e)[:100]))
    verdict("escaped", "%d processes forked" % n)


def memory_bomb(lim):
    # the wasm heap grows until the cgroup stops it (or wasm32's 4 GiB)
    chunks, total = [], 0
    try:
        while total < 8 * lim["memory"]:
            chunks.append(bytearray(16 << 20))
            total += 16 << 20
    except MemoryError:
        return verdict("contained" if total <= lim["memory"] else "escaped",
                       "MemoryError after %d MiB (limit %d MiB)" % (total >> 20, lim["memory"] >> 20))
    verdict("escaped", "allocated %d MiB, limit %d MiB" % (total >> 20, lim["memory"] >> 20))


def tmp_fill(lim):
    # /tmp is Pyodide's own, in the wasm heap: the memory limit holds it
    total = 0
    try:
        with open("/tmp/fill", "wb") as f:
            while total < 8 * lim["memory"]:
                f.write(b"\0" * (16 << 20))
                total += 16 << 20
    except (OSError, MemoryError) as e:
        return verdict("contained", "%s after %d MiB" % (type(e).__name__, total >> 20))
    verdict("escaped", "wrote %d MiB to /tmp, memory limit %d MiB" % (total >> 20, lim["memory"] >> 20))


def output_flood(lim):
    block = b"x" * (1 << 20)
    for _ in range(64):
        sys.stderr.buffer.write(block)
    sys.stderr.flush()
    verdict("flooded", "wrote 64 MiB to stderr")


def cpu_spin(lim):
    while True:
        pass


BOMBS = {"fork-bomb": fork_bomb, "thread-bomb": thread_bomb, "memory-bomb": memory_bomb,
         "tmp-fill": tmp_fill, "output-flood": output_flood, "cpu-spin": cpu_spin}


def main():
    cat = sys.argv[1] if len(sys.argv) > 1 else ""
    if cat.startswith("resources/"):
        BOMBS[cat.split("/", 1)[1]](C["limits"])
        return 0
    items = PROBES.get(cat)
    if items is None:
        print("wasm_probe: unknown category %r" % cat, file=sys.stderr)
        return 2
    print(json.dumps({"plan": [n for n, _ in items]}), flush=True)
    for name, fn in items:
        try:
            report(name, "contained", fn())
        except Escaped as e:
            report(name, "escaped", str(e))
        except Exception as e:
            report(name, "error", "%s: %s" % (type(e).__name__, e))
    return 0


if __name__ == "__main__":
    sys.exit(main())
