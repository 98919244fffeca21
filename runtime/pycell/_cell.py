"""pycell: run /run/pycell/main.py like a notebook cell.

The supervisor starts ``python -c "import pycell._cell as c; c.main()"``.
The variables in /run/pycell/variables.json become globals of __main__,
the code runs with the file name "<cell>", and when its last statement is
an expression, that value goes back to the supervisor over fd 3 as one
JSON-RPC notification packet, ``pycell/result``.  In a ready jail of a
warm server, python is forked ahead and calls warm_up(), then warm_main()
with the cell's files in a memfd instead.

Startup cost matters (every run pays it), so this module imports only
builtins up front: json loads only for variables, traceback only for an
exception, and return values are encoded without the json module.
"""

import sys

RUN_DIR = "/run/pycell"
CODE_FILE = RUN_DIR + "/main.py"
VARIABLES_FILE = RUN_DIR + "/variables.json"
FILES_FILE = RUN_DIR + "/files.json"
FILENAME = "<cell>"
TOOL_FD = 3
# The value is sent as one packet; larger ones come back as a shortened
# repr so that a huge result neither fails nor floods the agent.
MAX_VALUE_BYTES = 1 << 20

_source = None  # the cell's text, for tracebacks

_PyCF_ONLY_AST = 0x400
_PyCF_ALLOW_TOP_LEVEL_AWAIT = 0x2000
_CO_COROUTINE = 0x80


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return b""


def _load_variables(namespace, raw):
    raw = raw.strip()
    if not raw or raw == b"{}":
        return
    import json
    values = json.loads(raw)
    if not isinstance(values, dict):
        raise TypeError("variables must be a JSON object")
    namespace.update(values)


def _compile(source):
    """(body, last): code objects for the statements and for a final
    expression (None when the cell does not end with one)."""
    import _ast  # built in: no file to import, unlike the ast module
    flags = _PyCF_ALLOW_TOP_LEVEL_AWAIT
    tree = compile(source, FILENAME, "exec", _PyCF_ONLY_AST | flags, dont_inherit=True)
    last = None
    if tree.body and isinstance(tree.body[-1], _ast.Expr):
        expr = _ast.Expression(tree.body.pop().value)
        last = compile(expr, FILENAME, "eval", flags, dont_inherit=True)
    body = compile(tree, FILENAME, "exec", flags, dont_inherit=True)
    return body, last


class _Runner:
    """Evaluates code objects; the first one compiled as a coroutine
    (top-level await) starts one event loop that the rest share."""

    def __init__(self, namespace):
        self.namespace = namespace
        self.loop = None

    def run(self, code):
        value = eval(code, self.namespace)
        if code.co_flags & _CO_COROUTINE:
            if self.loop is None:
                import asyncio
                self.loop = asyncio.new_event_loop()
                asyncio.set_event_loop(self.loop)
            value = self.loop.run_until_complete(value)
        return value

    def close(self):
        if self.loop is not None:
            self.loop.close()


def _shorten(text, limit):
    if len(text) <= limit:
        return text
    return text[:limit] + "... [truncated, %d characters in all]" % len(text)


class _NotJSON(Exception):
    pass


def _quote(text):
    try:
        from _json import encode_basestring
    except ImportError:
        from json.encoder import py_encode_basestring as encode_basestring
    return encode_basestring(text)


_INT_MIN, _INT_MAX = -(1 << 63), (1 << 63) - 1


def _to_json(value, limit):
    """The JSON text of value, as the supervisor's parser (jansson) takes it:
    64-bit integers, no NaN, no NUL in strings, no duplicate keys.  Raises
    _NotJSON otherwise, or past limit characters.  Pure Python on purpose:
    the json module imports re, which costs more than most cells."""
    out = []
    size = [0]

    def put(text):
        out.append(text)
        size[0] += len(text)
        if size[0] > limit:
            raise _NotJSON("too large")

    def key_text(k):
        if isinstance(k, str):
            return k
        if k is True or k is False or k is None:
            return {True: "true", False: "false", None: "null"}[k]
        if isinstance(k, int):
            return int.__repr__(k)
        if isinstance(k, float):
            return float.__repr__(k)
        raise _NotJSON("key")

    def enc(v, depth):
        if depth > 200:
            raise _NotJSON("too deep")
        if v is None:
            put("null")
        elif v is True:
            put("true")
        elif v is False:
            put("false")
        elif isinstance(v, str):
            if "\0" in v:
                raise _NotJSON("NUL")
            put(_quote(v))
        elif isinstance(v, int):
            if not _INT_MIN <= v <= _INT_MAX:
                raise _NotJSON("big int")
            put(int.__repr__(v))
        elif isinstance(v, float):
            if v != v or v in (float("inf"), float("-inf")):
                raise _NotJSON("not finite")
            put(float.__repr__(v))
        elif isinstance(v, (list, tuple)):
            put("[")
            for i, x in enumerate(v):
                if i:
                    put(",")
                enc(x, depth + 1)
            put("]")
        elif isinstance(v, dict):
            put("{")
            seen = set()
            for i, (k, x) in enumerate(v.items()):
                k = key_text(k)
                if "\0" in k or k in seen:
                    raise _NotJSON("key")
                seen.add(k)
                if i:
                    put(",")
                put(_quote(k))
                put(":")
                enc(x, depth + 1)
            put("}")
        else:
            raise _NotJSON(type(v).__name__)

    enc(value, 0)
    return "".join(out)


def _encode_value(value, limit):
    """The JSON text of value when it has one (and fits), else of its repr."""
    try:
        text = _to_json(value, limit)
        text.encode("utf-8")  # lone surrogates cannot travel
        return text
    except (_NotJSON, UnicodeEncodeError, RecursionError):
        pass
    try:
        r = repr(value)
    except Exception as e:  # a broken __repr__ must not lose the run
        r = "<%s object: repr() failed: %s>" % (type(value).__name__, type(e).__name__)
    r = r.encode("utf-8", "backslashreplace").decode("utf-8").replace("\0", "\\x00")
    return _quote(_shorten(r, limit // 2))


def _send_value(value):
    import os
    limit = MAX_VALUE_BYTES
    while True:
        text = _encode_value(value, limit)
        packet = ('{"jsonrpc":"2.0","method":"pycell/result","params":{"return_value":%s}}'
                  % text).encode("utf-8")
        try:
            os.write(TOOL_FD, packet)
            return
        except OSError as e:
            # EMSGSIZE: the socket's buffer is smaller than the packet
            if e.errno == 90 and limit > 4096:
                limit //= 4
                continue
            if e.errno not in (9, 32):  # EBADF, EPIPE: the code closed fd 3
                sys.stderr.write("pycell: could not return the value: %s\n" % e)
            return


def _print_exception(exc):
    import linecache
    import traceback
    if _source is not None:
        # lets the traceback show the cell's lines (mtime None: never stale)
        linecache.cache[FILENAME] = (len(_source), None, _source.splitlines(True), FILENAME)
    # the user sees their cell's frames, not ours (nor asyncio's for a
    # top-level await): start at the first frame of the cell, if any
    tb = exc.__traceback__
    first = tb
    while first is not None and first.tb_frame.f_code.co_filename != FILENAME:
        first = first.tb_next
    if first is None:
        while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
            tb = tb.tb_next
        first = tb
    traceback.print_exception(type(exc), exc, first)


def run_cell(namespace, code, variables=b"", files=None):
    """Run one cell (code, variables: bytes) in namespace, after writing
    files (a list of {path, text or base64}) into the working directory:
    0, or 1 after printing an uncaught exception.  SystemExit is raised."""
    global _source
    runner = _Runner(namespace)
    try:
        if files:
            write_files(files)
        _source = code.decode("utf-8", "surrogateescape")
        _load_variables(namespace, variables)
        body, last = _compile(_source)
        runner.run(body)
        if last is not None:
            value = runner.run(last)
            if value is not None:
                _send_value(value)
    except SystemExit:
        raise
    except BaseException as e:
        _print_exception(e)
        return 1
    finally:
        runner.close()
    return 0


def write_files(files):
    """Write the call's files (checked by the supervisor: relative paths
    without "..", text or base64) below the working directory, making the
    directories they need."""
    import os
    for f in files:
        path = f["path"]
        if "text" in f:
            data = f["text"].encode("utf-8", "surrogatepass")
        else:
            import binascii
            data = binascii.a2b_base64(f["base64"])
        d = os.path.dirname(path)
        if d:
            os.makedirs(d, exist_ok=True)
        with open(path, "wb") as out:
            out.write(data)


def _load_files(raw):
    raw = raw.strip()
    if not raw:
        return None
    import json
    return json.loads(raw)


def main(code=None, variables=None, files=None):
    """Run the cell: code, variables and files (bytes) as given, else from
    /run/pycell/main.py, variables.json and files.json."""
    namespace = sys.modules["__main__"].__dict__
    # the bootstrap "import pycell._cell as c" bound c: not the user's
    namespace.pop("c", None)
    sys.argv[:] = [FILENAME]
    if code is None:
        code, variables, files = _read(CODE_FILE), _read(VARIABLES_FILE), _read(FILES_FILE)
    try:
        listed = _load_files(files or b"")
    except BaseException as e:
        _print_exception(e)
        sys.exit(1)
    if run_cell(namespace, code, variables or b"", listed):
        sys.exit(1)


def _unpack(data):
    """The files of a warm run's memfd: for each, its name, a NUL, its
    length (8 bytes, native order) and its bytes."""
    files, off = {}, 0
    while off < len(data):
        end = data.index(b"\0", off)
        name = data[off:end].decode()
        n = int.from_bytes(data[end + 1:end + 9], sys.byteorder)
        off = end + 9 + n
        files[name] = data[end + 9:off]
    return files


def warm_up():
    """In a ready jail, before its cell arrives: go once through what a
    cell goes through (compile, run, return a value, exit) in a scratch
    namespace, so that the pages of the interpreter this touches are this
    process's own copies before the cell's time starts: the first write
    to each one is a copy-on-write fault.  Leaves nothing behind."""
    import gc
    import io
    body, last = _compile("x = [1, 'a']\nfor i in range(3):\n    x.append(i * 2.5)\nx\n")
    scratch = {"__builtins__": __builtins__}
    eval(body, scratch)
    _encode_value(eval(last, scratch), MAX_VALUE_BYTES)
    print("", end="", file=io.StringIO())
    sys.stdout.flush()
    sys.stderr.flush()
    scratch.clear()
    gc.collect()


def warm_main(fd, length):
    """main() for a ready jail, whose pid 2 calls it in the interpreter
    inherited from the zygote, with the cell's files in memfd fd: the exit
    status is returned, as python would compute it from SystemExit,
    instead of raised (raising it would tear the whole interpreter down)."""
    import os
    parts, got = [], 0
    try:
        while got < length:  # from offset 0: the writer's offset is shared
            part = os.pread(fd, length - got, got)
            if not part:
                break
            parts.append(part)
            got += len(part)
    finally:
        os.close(fd)
    files = _unpack(b"".join(parts))
    try:
        main(files.get("main.py", b""), files.get("variables.json", b""), files.get("files.json", b""))
    except SystemExit as e:
        return exit_status(e)
    return 0


def exit_status(e):
    """The exit status python computes from SystemExit e (a non-integer
    code is printed to stderr and is status 1)."""
    code = e.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    try:
        sys.stderr.write("%s\n" % (code,))
    except Exception:
        pass
    return 1
