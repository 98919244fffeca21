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
OUTPUTS_FILE = RUN_DIR + "/outputs"
WORKSPACE = "/workspace"
FILENAME = "<cell>"
TOOL_FD = 3
_tool_fd = TOOL_FD   # where the value and blobs go; -1 in warm_up (nowhere)
# The value is sent as one packet; larger ones come back as a shortened
# repr so that a huge result neither fails nor floods the agent.
MAX_VALUE_BYTES = 1 << 20

_source = None  # the cell's text, for tracebacks
warmed = False  # whether this process ran warm_up (a ready jail made ahead of its cell)
first_uses = None  # the zygote's pycell._warm.cell_uses, when it did a preloaded module's first use

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
    64-bit integers, no NaN, no NUL in strings, no duplicate keys; what
    JSON has no type for becomes its _typed() stand-in.  Raises _NotJSON
    when that fails, or past limit characters.  Pure Python on purpose:
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
        elif isinstance(v, int) and _INT_MIN <= v <= _INT_MAX:
            put(int.__repr__(v))
        elif isinstance(v, float) and v - v == 0:   # not NaN nor infinite
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
            enc(_typed(v), depth + 1)

    enc(value, 0)
    return "".join(out)

# Bounds of a typed value's preview: rows of a frame or series, elements
# of an array or set, bytes of a bytes value.
_PREVIEW_ROWS = 20
_PREVIEW_ITEMS = 1000
_PREVIEW_BYTES = 64 << 10


def _items(kind, seq, n, **extra):
    d = {"$type": kind}
    d.update(extra)
    d["length"] = n
    d["items"] = seq
    if len(seq) < n:
        d["truncated"] = True
    return d


def _typed(v):
    """A JSON stand-in for a value JSON has no type for, its kind named by
    "$type" (man pycell(1), RESULT): numbers JSON cannot hold, sets, bytes,
    dates, numpy arrays and scalars, pandas frames and series, with bounded
    previews of big ones.  Raises _NotJSON for anything else.  Nothing is
    imported: a numpy value exists only when its module is loaded."""
    t = type(v)
    mod = getattr(t, "__module__", "") or ""
    if isinstance(v, float):
        return {"$type": "float", "value": "nan" if v != v else ("inf" if v > 0 else "-inf")}
    if isinstance(v, int):
        return {"$type": "int", "value": int.__repr__(v)}
    if isinstance(v, (set, frozenset)):
        items = list(v)
        try:
            items.sort()
        except Exception:
            pass
        n = len(items)
        return _items("frozenset" if isinstance(v, frozenset) else "set", items[:_PREVIEW_ITEMS], n)
    if isinstance(v, (bytes, bytearray)):
        import binascii
        d = {"$type": t.__name__ if t in (bytes, bytearray) else "bytes", "length": len(v),
             "base64": binascii.b2a_base64(bytes(v[:_PREVIEW_BYTES]), newline=False).decode("ascii")}
        if len(v) > _PREVIEW_BYTES:
            d["truncated"] = True
        return d
    if isinstance(v, complex):
        return {"$type": "complex", "real": v.real, "imag": v.imag}
    if mod == "datetime":
        if hasattr(v, "total_seconds"):
            return {"$type": "timedelta", "seconds": v.total_seconds()}
        if hasattr(v, "isoformat"):
            return {"$type": t.__name__, "value": v.isoformat()}
    if mod == "decimal":
        return {"$type": "decimal", "value": str(v)}
    if mod.startswith("numpy"):
        np = sys.modules.get("numpy")
        if np is not None and isinstance(v, np.ndarray):
            d = {"$type": "numpy.ndarray", "dtype": str(v.dtype), "shape": list(v.shape)}
            if v.size <= _PREVIEW_ITEMS:
                d["items"] = v.tolist()
            else:   # the first elements, in C order
                d["items"] = v.ravel()[:_PREVIEW_ITEMS].tolist()
                d["truncated"] = True
            return d
        if np is not None and isinstance(v, np.generic):
            x = v.item()
            if type(x) is not t:
                return x
    if mod.startswith("pandas"):
        pd = sys.modules.get("pandas")
        if pd is not None and isinstance(v, pd.DataFrame):
            head = v.head(_PREVIEW_ROWS)
            d = {"$type": "pandas.DataFrame", "shape": list(v.shape),
                 "columns": [str(c) for c in v.columns], "dtypes": [str(x) for x in v.dtypes],
                 "index": head.index.tolist(),
                 "rows": [list(r) for r in head.itertuples(index=False, name=None)]}
            if len(v) > _PREVIEW_ROWS:
                d["truncated"] = True
            return d
        if pd is not None and isinstance(v, pd.Series):
            head = v.head(_PREVIEW_ROWS)
            return _items("pandas.Series", head.tolist(), len(v),
                          name=None if v.name is None else str(v.name), dtype=str(v.dtype),
                          index=head.index.tolist())
        if pd is not None and isinstance(v, pd.Timestamp):
            return {"$type": "datetime", "value": v.isoformat()}
        if pd is not None and isinstance(v, pd.Timedelta):
            return {"$type": "timedelta", "seconds": v.total_seconds()}
    raise _NotJSON(t.__name__)


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
    import errno
    import os
    limit = MAX_VALUE_BYTES
    while True:
        text = _encode_value(value, limit)
        packet = ('{"jsonrpc":"2.0","method":"pycell/result","params":{"return_value":%s}}'
                  % text).encode("utf-8")
        try:
            os.write(_tool_fd, packet)
            return
        except OSError as e:
            # EMSGSIZE: the socket's buffer is smaller than the packet
            if e.errno == errno.EMSGSIZE and limit > 4096:
                limit //= 4
                continue
            if e.errno not in (errno.EBADF, errno.EPIPE):  # the code closed fd 3
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


def run_cell(namespace, code, variables=b"", files=None, outputs=False):
    """Run one cell (code, variables: bytes) in namespace, after writing
    files (a list of {path, text or base64}) below /workspace: 0, or 1
    after printing an uncaught exception.  SystemExit is raised.  With
    outputs (the client takes them: MCP), the images the cell shows and
    the files it leaves changed in /workspace go back (_Outputs.send)."""
    global _source
    runner = _Runner(namespace)
    value = None
    try:
        if files:
            write_files(files)
        if outputs:
            _outputs.start(files)
        _source = code.decode("utf-8", "surrogateescape")
        _load_variables(namespace, variables)
        body, last = _compile(_source)
        if first_uses is not None:
            first_uses(body, last)
        runner.run(body)
        if last is not None:
            value = runner.run(last)
            if value is not None:
                _send_value(value)
    except SystemExit:
        if outputs:
            _outputs.send(None)
        raise
    except BaseException as e:
        _print_exception(e)
        if outputs:
            _outputs.send(None)
        return 1
    finally:
        runner.close()
    if outputs:
        _outputs.send(value)
    return 0


# What goes back besides the value (the supervisor holds the same caps and
# is the one that enforces them; these spare the work of sending more).
IMAGES_MAX = 8
IMAGE_BYTES_MAX = 4 << 20
FILES_OUT_MAX = 64
FILES_OUT_BYTES = 16 << 20
_WALK_MAX = 10000          # entries of /workspace looked at
_CHUNK = 3 * (256 << 10)   # raw bytes a packet carries: whole base64 quanta

_MIME = {
    "txt": "text/plain", "log": "text/plain", "csv": "text/csv", "tsv": "text/tab-separated-values",
    "json": "application/json", "jsonl": "application/jsonl", "md": "text/markdown",
    "html": "text/html", "htm": "text/html", "xml": "application/xml", "py": "text/x-python",
    "yaml": "application/yaml", "yml": "application/yaml", "svg": "image/svg+xml",
    "png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif",
    "webp": "image/webp", "pdf": "application/pdf", "zip": "application/zip",
    "gz": "application/gzip", "parquet": "application/vnd.apache.parquet",
    "npy": "application/octet-stream", "bin": "application/octet-stream", "xlsx":
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
}


def _mime(path, data):
    """The MIME type of a file: by its extension, else text/plain when its
    first bytes (data: all of them, or a sample) are UTF-8."""
    ext = path.rpartition(".")[2].lower() if "." in path.rpartition("/")[2] else ""
    m = _MIME.get(ext)
    if m:
        return m
    import codecs
    try:
        codecs.getincrementaldecoder("utf-8")().decode(data[:4096], final=len(data) <= 4096)
        return "text/plain" if data else "application/octet-stream"
    except UnicodeDecodeError:
        return "application/octet-stream"


def _send_blob(params, data):
    """Send data (bytes) with params (a dict) in pycell/blob packets: the
    first carries params, each a part of data as base64, the last one
    "more": false.  False when the socket would not take it."""
    import binascii
    import errno
    import json
    import os
    global _CHUNK
    off, first = 0, True
    while True:
        part = data[off:off + _CHUNK]
        p = dict(params) if first else {}
        p["data"] = binascii.b2a_base64(part, newline=False).decode("ascii")
        p["more"] = off + len(part) < len(data)
        try:
            os.write(_tool_fd, json.dumps({"jsonrpc": "2.0", "method": "pycell/blob",
                                         "params": p}).encode("utf-8"))
        except OSError as e:
            if e.errno == errno.EMSGSIZE and _CHUNK > 3 * 4096:   # a smaller socket buffer
                _CHUNK = _CHUNK // 12 * 3
                continue
            return False
        off += len(part)
        first = False
        if not p["more"]:
            return True


def _figure_png(fig):
    """fig as PNG, cropped as savefig(bbox_inches="tight") crops, from one
    draw: savefig draws the figure twice for that (once to measure what
    its artists cover, once to save) and measures every artist between,
    twice the time of the figure's own drawing.  Drawn once on its Agg
    canvas instead, the image is cropped to the pixels that differ from
    the figure's background, with savefig.pad_inches around them, and
    written as RGB when it is opaque (as most are).  None, for savefig to
    do it, where the two could differ: a canvas not Agg's, savefig
    settings of the user's own (dpi, colours, transparency), subfigures,
    a background not one colour at the corners, a drawing that reaches an
    edge, or an artist placed freely (a legend, a text, one added to the
    figure or an axes) reaching past one (cut off by the canvas, where
    savefig's crop would take it in)."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    rc = matplotlib.rcParams
    pad = rc["savefig.pad_inches"]
    canvas = fig.canvas
    if (type(canvas) is not FigureCanvasAgg or rc["savefig.dpi"] not in ("figure", fig.dpi)
            or rc["savefig.facecolor"] != "auto" or rc["savefig.edgecolor"] != "auto"
            or rc["savefig.transparent"] or type(pad) not in (int, float) or pad < 0
            or getattr(fig, "subfigs", None)):
        return None
    try:
        import numpy
    except ImportError:
        return None
    canvas.draw()
    renderer = canvas.get_renderer()
    h, w = int(renderer.height), int(renderer.width)
    free = list(fig.legends) + list(fig.texts) + list(fig.artists) + list(fig.images)
    for ax in fig.axes:
        free += [a for a in (ax.get_legend(),) if a is not None] + list(ax.texts) + list(ax.artists)
    for a in free:
        if a.get_visible():
            e = a.get_window_extent(renderer)
            if e.x0 < 0 or e.y0 < 0 or e.x1 > w or e.y1 > h:
                return None
    px = numpy.asarray(renderer.buffer_rgba())
    flat = px.view(numpy.uint32).reshape(h, w)
    bg = flat[0, 0]
    if not (flat[0, -1] == bg and flat[-1, 0] == bg and flat[-1, -1] == bg):
        return None
    drawn = flat != bg
    rows, cols = numpy.flatnonzero(drawn.any(axis=1)), numpy.flatnonzero(drawn.any(axis=0))
    if not rows.size or rows[0] == 0 or cols[0] == 0 or rows[-1] == h - 1 or cols[-1] == w - 1:
        return None
    p = int(round(pad * fig.dpi))
    top, bottom, left, right = rows[0] - p, rows[-1] + 1 + p, cols[0] - p, cols[-1] + 1 + p
    img = px[max(top, 0):min(bottom, h), max(left, 0):min(right, w)]
    if top < 0 or left < 0 or bottom > h or right > w:
        # the pad reaches past an edge the drawing does not touch: the
        # background there, as savefig's crop has it
        whole = numpy.empty((bottom - top, right - left, 4), numpy.uint8)
        whole.view(numpy.uint32)[...] = bg
        whole[max(-top, 0):max(-top, 0) + img.shape[0], max(-left, 0):max(-left, 0) + img.shape[1]] = img
        img = whole
    if (img[..., 3] == 255).all():
        # opaque: an RGB PNG, the same picture, smaller and (a quarter less
        # to compress) 20-60% sooner
        img = numpy.ascontiguousarray(img[..., :3])
    return _png_of_pixels(numpy, img, fig.dpi)


def _png_of_pixels(numpy, img, dpi):
    """img (rows of RGB or RGBA bytes, h x w x 3 or 4) as PNG, with its dpi:
    each row unfiltered, deflated at zlib's default level.  A drawing is
    mostly runs of a few colours, which deflate finds without a filter: 2
    to 3 times sooner than PIL's writer (which tries five filters on every
    row) and, for most figures, fewer bytes (tests/bench/RESULTS-data.md)."""
    import struct
    import zlib

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(data, zlib.crc32(kind)))
    h, w, depth = img.shape
    rows = numpy.empty((h, w * depth + 1), numpy.uint8)
    rows[:, 0] = 0   # filter: none
    rows[:, 1:] = img.reshape(h, w * depth)
    ppm = int(dpi / 0.0254 + 0.5)   # pixels per metre, as PIL writes a dpi
    return (b"\x89PNG\r\n\x1a\n"
            + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2 if depth == 3 else 6, 0, 0, 0))
            + chunk(b"pHYs", struct.pack(">IIB", ppm, ppm, 1))
            + chunk(b"IDAT", zlib.compress(rows, 6)) + chunk(b"IEND", b""))


def _png(obj):
    """PNG bytes of obj: a matplotlib figure, or anything with _repr_png_
    (PIL images and the like); None otherwise."""
    if hasattr(obj, "savefig") and hasattr(obj, "canvas"):
        data = _figure_png(obj)
        if data is None:
            import io
            buf = io.BytesIO()
            obj.savefig(buf, format="png", bbox_inches="tight")
            data = buf.getvalue()
        return data
    f = getattr(obj, "_repr_png_", None)
    if f is None or isinstance(obj, type):
        return None
    data = f()
    if isinstance(data, tuple):   # (data, metadata), as IPython allows
        data = data[0]
    return data if isinstance(data, (bytes, bytearray)) else None


class _Outputs:
    """The images and the workspace's changes of the running cell."""

    def __init__(self):
        self.before = None   # {path: (size, mtime_ns, inode)} as last sent
        self.shown = []

    @staticmethod
    def _walk():
        import os
        seen, stack, n = {}, [""], 0
        while stack and n < _WALK_MAX:
            d = stack.pop()
            try:
                it = os.scandir(WORKSPACE + "/" + d)
            except OSError:
                continue
            with it:
                for e in it:
                    n += 1
                    if n > _WALK_MAX:
                        break
                    path = d + e.name
                    try:
                        if e.is_dir(follow_symlinks=False):
                            stack.append(path + "/")
                        elif e.is_file(follow_symlinks=False):
                            st = e.stat(follow_symlinks=False)
                            seen[path] = (st.st_size, st.st_mtime_ns, st.st_ino)
                    except OSError:
                        pass
        return seen

    def start(self, files):
        """Before the cell: what /workspace holds now is not its output
        (in a session, only the call's own files changed since)."""
        import os
        self.shown = []
        if self.before is None:
            self.before = self._walk()
            return
        for f in files or ():
            try:
                st = os.stat(WORKSPACE + "/" + f["path"], follow_symlinks=False)
                self.before[f["path"]] = (st.st_size, st.st_mtime_ns, st.st_ino)
            except (OSError, KeyError, TypeError):
                pass

    def send(self, value):
        try:
            self._images(value)
            self._files()
        except KeyboardInterrupt:
            raise
        except BaseException as e:   # the cell's result must not be lost
            try:
                sys.stderr.write("pycell: could not send the cell's outputs: %s: %s\n"
                                 % (type(e).__name__, e))
            except Exception:
                pass

    def _images(self, value):
        pngs, sources = [], []
        for obj in self.shown:
            pngs.append(obj)
            sources.append("display")
        figs = {id(obj) for obj in self.shown}   # shown once, displayed or not
        self.shown = []
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is not None:
            for num in plt.get_fignums():
                fig = plt.figure(num)
                if id(fig) in figs:
                    continue
                figs.add(id(fig))
                pngs.append(fig)
                sources.append("figure %s" % num)
        if value is not None and id(value) not in figs and (
                hasattr(value, "_repr_png_") or (hasattr(value, "savefig") and hasattr(value, "canvas"))):
            pngs.append(value)
            sources.append("value")
        sent = 0
        for obj, source in zip(pngs, sources):
            if sent == IMAGES_MAX:
                sys.stderr.write("pycell: %d more images not sent (at most %d a cell)\n"
                                 % (len(pngs) - sent, IMAGES_MAX))
                break
            data = obj if isinstance(obj, (bytes, bytearray)) else _png(obj)
            if data is None:
                continue
            if len(data) > IMAGE_BYTES_MAX:
                sys.stderr.write("pycell: an image of %d bytes not sent (at most %d)\n"
                                 % (len(data), IMAGE_BYTES_MAX))
                continue
            if _send_blob({"kind": "image", "mime": "image/png", "source": source}, bytes(data)):
                sent += 1
        if plt is not None:
            plt.close("all")

    def _files(self):
        after = self._walk()
        before = self.before or {}
        changed = sorted(p for p, st in after.items() if before.get(p) != st)
        gone = sorted(p for p in before if p not in after)
        self.before = after
        if len(changed) + len(gone) > FILES_OUT_MAX:
            sys.stderr.write("pycell: %d files changed in /workspace; the first %d are listed\n"
                             % (len(changed) + len(gone), FILES_OUT_MAX))
            changed = changed[:FILES_OUT_MAX]
            gone = gone[:FILES_OUT_MAX - len(changed)]
        total = 0
        for path in changed:
            size = after[path][0]
            meta = {"kind": "file", "path": path, "size": size}
            data = sample = b""
            if total + size > FILES_OUT_BYTES:
                meta["omitted"] = "size"
                try:
                    with open(WORKSPACE + "/" + path, "rb") as f:
                        sample = f.read(4096)
                except OSError:
                    pass
            else:
                try:
                    with open(WORKSPACE + "/" + path, "rb") as f:
                        data = f.read(FILES_OUT_BYTES - total + 1)
                except OSError:
                    continue
                if total + len(data) > FILES_OUT_BYTES:
                    meta["omitted"] = "size"
                    sample, data = data[:4096], b""
                else:
                    meta["size"] = len(data)
                    total += len(data)
                    sample = data
            meta["mime"] = _mime(path, sample)
            if not _send_blob(meta, data):
                break
        for path in gone:
            _send_blob({"kind": "file", "path": path, "deleted": True}, b"")


_outputs = _Outputs()


def display(*objs):
    """Show objects as images in the cell's result: matplotlib figures,
    anything with _repr_png_, or PNG bytes (pycell.display)."""
    for obj in objs:
        if not (isinstance(obj, (bytes, bytearray)) or hasattr(obj, "_repr_png_")
                or (hasattr(obj, "savefig") and hasattr(obj, "canvas"))):
            raise TypeError("pycell.display() shows images: a matplotlib figure, an object with "
                            "_repr_png_ (a PIL image...), or PNG bytes, not %s" % type(obj).__name__)
        if isinstance(obj, (bytes, bytearray)) and not bytes(obj[:8]) == b"\x89PNG\r\n\x1a\n":
            raise ValueError("pycell.display(): these bytes are not a PNG image")
        _outputs.shown.append(obj)


def write_files(files):
    """Write the call's files (checked by the supervisor: relative paths
    without "..", text or base64) below /workspace, making the directories
    they need."""
    import os
    for f in files:
        path = f["path"]
        if "text" in f:
            data = f["text"].encode("utf-8", "surrogatepass")
        else:
            import binascii
            data = binascii.a2b_base64(f["base64"])
        path = WORKSPACE + "/" + path
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as out:
            out.write(data)


def _load_files(raw):
    raw = raw.strip()
    if not raw:
        return None
    import json
    return json.loads(raw)


def main(code=None, variables=None, files=None, outputs=None):
    """Run the cell: code, variables, files and the outputs flag (bytes) as
    given, else from /run/pycell/main.py, variables.json, files.json and
    outputs."""
    namespace = sys.modules["__main__"].__dict__
    # the bootstrap "import pycell._cell as c" bound c: not the user's
    namespace.pop("c", None)
    sys.argv[:] = [FILENAME]
    if code is None:
        code, variables, files = _read(CODE_FILE), _read(VARIABLES_FILE), _read(FILES_FILE)
        outputs = _read(OUTPUTS_FILE)
    try:
        listed = _load_files(files or b"")
    except BaseException as e:
        _print_exception(e)
        sys.exit(1)
    if run_cell(namespace, code, variables or b"", listed, bool(outputs)):
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


# The cell both warm-ups run: an assignment, a loop, a call, a float and a
# value to encode
_SAMPLE = b"x = [1, 'a']\nfor i in range(3):\n    x.append(i * 2.5)\nx\n"


def _sample_cell(outputs):
    """Go once through what a cell goes through, in a scratch namespace,
    sending nothing (the value's packet goes to fd -1)."""
    global _tool_fd, _source
    import io
    _unpack(b"main.py\0" + (1).to_bytes(8, sys.byteorder) + b"x")
    scratch = {"__builtins__": __builtins__}
    _tool_fd = -1
    try:
        failed = run_cell(scratch, _SAMPLE, b"{}", None, outputs)
    finally:
        _tool_fd, _source = TOOL_FD, None
    if failed:   # the jail (or the zygote) is of no use
        raise RuntimeError("pycell: the warm-up cell failed")
    print("", end="", file=io.StringIO())
    scratch.clear()


def prime():
    """In the zygote, once, before any jail: what a cell's first run makes
    and keeps (the modules its end imports, atexit, errno and _ast among
    them, and what compile() and the value's encoding set up at their first
    use) is made here, where every clone shares it, instead of in every
    ready jail: 0.4 MiB of each idle session's own memory and some ms of
    CPU per warm run (tests/bench/data.py).  /workspace is not looked at:
    the zygote has none."""
    import atexit  # noqa: F401
    import errno  # noqa: F401
    _sample_cell(False)


def warm_up():
    """In a ready jail, before its cell arrives: go once through what a
    cell goes through (its files unpacked, a cell run in a scratch
    namespace with the outputs looked for, its value encoded, the streams
    flushed, the modules the end uses touched), sending nothing, so that
    the pages of the interpreter this touches are this process's own
    copies before the cell's time starts: the first write to each one is a
    copy-on-write fault, some microseconds each (a print("hello") cell
    took 46 of them after a warm-up of compile and eval alone, 8 after
    this one).  What it leaves is the workspace as the outputs saw it,
    which is the cell's starting point too: /workspace is this jail's own
    tmpfs, empty until the cell's files come."""
    # atexit and os: what finish and warm_main import; the first import of
    # a module in a process writes to its objects
    global warmed
    import atexit  # noqa: F401
    import gc
    import os  # noqa: F401
    _sample_cell(True)
    warmed = True
    sys.stdout.flush()
    sys.stderr.flush()
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
        main(files.get("main.py", b""), files.get("variables.json", b""), files.get("files.json", b""),
             files.get("outputs", b""))
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
