"""pycell: a session's state as a stream of bytes, made and read in its jail.

A session is its globals (in __main__) and its /workspace.  dump() writes
both to a file descriptor the supervisor gave (a pipe), and load() reads
such a stream back into a fresh session's interpreter.  The supervisor
never reads what is inside: it stores the bytes, capped in size, and
hands them back to a jail of the same owner.

The stream:

    MAGIC
    u64 length, then the pickle of {name: value} (dill, protocol 5)
    u32 count, then each out-of-band buffer as u64 length and its bytes
    /workspace entry by entry (u8 kind, u16 path length, u32 mode, i64
      mtime, the path; a file's u64 size and bytes, a link's target); a
      0 byte ends it
    u32 CRC-32 of every byte before it

Large arrays (numpy's, pandas' blocks) travel as out-of-band buffers,
written straight from their memory and read straight into new memory.
The CRC finds a stream damaged or cut short on disk before any of it is
used.  What cannot be kept (a socket, a thread, a generator, an open
file, a process, or anything dill cannot pickle) is left out and named,
never dropped in silence.
"""

import os
import struct
import sys
import zlib

MAGIC = b"PYCELL-SNAPSHOT 1\n"
WORKSPACE = "/workspace"
_FRAME = 1 << 20
_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")


class SnapshotError(Exception):
    pass


class _Crc:
    """The CRC-32 of what passes.  Large pieces are summed on a thread of
    its own (zlib lets go of the GIL), so that the sum overlaps the pipe's
    I/O and the page faults of new memory; once it runs, every piece goes
    to it, in order.  A piece must not change until value() returns."""

    BIG = 4 << 20

    def __init__(self):
        self._value, self._q, self._t = 0, None, None

    def add(self, view):
        if self._q is None and len(view) < self.BIG:
            self._value = zlib.crc32(view, self._value)
            return
        if self._q is None:
            import queue
            import threading
            self._q = queue.SimpleQueue()
            self._t = threading.Thread(target=self._run, name="pycell-crc", daemon=True)
            self._t.start()
        self._q.put(view)

    def _run(self):
        while True:
            view = self._q.get()
            if view is None:
                return
            self._value = zlib.crc32(view, self._value)

    def value(self):
        """The sum so far (the thread, if any, ends)."""
        if self._q is not None:
            self._q.put(None)
            self._t.join()
            self._q = self._t = None
        return self._value


class _Writer:
    """Writes to a file descriptor, counting and checksumming, and stops
    at the cap the supervisor set (it would cut the stream there anyway)."""

    def __init__(self, fd, cap):
        self.fd, self.cap, self.n, self.crc = fd, cap, 0, _Crc()

    def write(self, data):
        view = memoryview(data).cast("B")
        if self.cap and self.n + len(view) > self.cap:
            raise SnapshotError("the session's state is more than the %d bytes a snapshot may hold "
                                "(the policy's sessions.snapshot_max)" % self.cap)
        self.crc.add(view)
        while view:
            k = os.write(self.fd, view)
            view = view[k:]
            self.n += k
        return len(data)


class _Reader:
    def __init__(self, fd):
        self.fd, self.n, self.crc = fd, 0, _Crc()

    def read_into(self, buf):
        """Fill buf (which must not change until the CRC is taken), in
        pieces, each summed while the next is read."""
        view = memoryview(buf).cast("B")
        start = 0
        while start < len(view):
            end = min(len(view), start + _Crc.BIG)
            got = start
            while got < end:
                k = os.readv(self.fd, [view[got:end]])
                if k == 0:
                    raise SnapshotError("the snapshot ends early, after %d bytes: it was cut short"
                                        % (self.n + got))
                got += k
            self.crc.add(view[start:end])
            start = end
        self.n += len(view)
        return buf

    def read(self, n):
        return bytes(self.read_into(bytearray(n)))


def _unkept_kind(value):
    """Why value cannot be kept, by its type, or None."""
    import types
    kinds = [(types.GeneratorType, "generator"), (types.CoroutineType, "coroutine"),
             (types.AsyncGeneratorType, "async generator"), (types.FrameType, "frame")]
    for mod, attr, kind in (("_socket", "socket", "socket"), ("threading", "Thread", "thread"),
                            ("subprocess", "Popen", "process"), ("io", "IOBase", "open file"),
                            ("mmap", "mmap", "mmap"), ("selectors", "BaseSelector", "selector"),
                            ("asyncio", "AbstractEventLoop", "event loop")):
        m = sys.modules.get(mod)
        if m is not None and hasattr(m, attr):
            kinds.append((getattr(m, attr), kind))
    for t, kind in kinds:
        if isinstance(value, t):
            return kind
    return None


def _names(namespace):
    """The globals a snapshot keeps: all but the interpreter's own (__x__)."""
    return [k for k in namespace if not (k.startswith("__") and k.endswith("__"))]


def _by_value(obj):
    """A function or class that plain pickle would save by its name, and
    that no module could give back: one defined in a cell (in __main__),
    a lambda, or one made inside a function."""
    import types
    if not isinstance(obj, (types.FunctionType, type)):
        return False
    qualname = getattr(obj, "__qualname__", "") or ""
    return getattr(obj, "__module__", None) == "__main__" or "<" in qualname


_EMPTY = "pycell._snapshot: an empty cell"


def _function_new(code, name, qualname, ncells):
    """A function a cell defined, made again in this interpreter's __main__
    (its globals) from its marshalled code; its closure, defaults and
    attributes come after (_function_fill), so that they may refer to it."""
    import marshal
    import types
    import __main__
    cells = tuple(types.CellType() for _ in range(ncells)) if ncells else None
    f = types.FunctionType(marshal.loads(code), __main__.__dict__, name, None, cells)
    f.__qualname__ = qualname
    return f


def _function_fill(f, state):
    closure, defaults, kwdefaults, attrs = state
    for cell, value in zip(f.__closure__ or (), closure or ()):
        if value is not _EMPTY:
            cell.cell_contents = value
    f.__defaults__ = defaults
    f.__kwdefaults__ = kwdefaults
    for k, v in attrs.items():
        setattr(f, k, v)


def _class_new(name, qualname, bases):
    """A plain class a cell defined, made again; its namespace comes after
    (_class_fill), so that its methods may refer to it (super() does)."""
    cls = type(name, bases, {"__module__": "__main__"})
    cls.__qualname__ = qualname
    return cls


def _class_fill(cls, namespace):
    for k, v in namespace.items():
        setattr(cls, k, v)


def _reduce_by_value(obj):
    """What rebuilds a cell's function or plain class without dill (whose
    import alone costs some 80 ms): its marshalled code, or its namespace,
    each set after the object is made (a reduce with a state setter), so
    that cycles through it (recursion, super()) close.  Raises for what
    this does not cover: a class of another metaclass, or with slots."""
    import marshal
    import types
    if isinstance(obj, types.FunctionType):
        closure = None
        if obj.__closure__:
            closure = []
            for c in obj.__closure__:
                try:
                    closure.append(c.cell_contents)
                except ValueError:
                    closure.append(_EMPTY)
        attrs = {"__doc__": obj.__doc__, "__module__": obj.__module__}
        if obj.__annotations__:
            attrs["__annotations__"] = obj.__annotations__
        attrs.update(obj.__dict__)
        return (_function_new, (marshal.dumps(obj.__code__), obj.__name__, obj.__qualname__,
                                len(obj.__closure__ or ())),
                (closure, obj.__defaults__, obj.__kwdefaults__, attrs), None, None, _function_fill)
    if type(obj) is type and "__slots__" not in obj.__dict__:
        namespace = {k: v for k, v in obj.__dict__.items() if k not in ("__dict__", "__weakref__")}
        return _class_new, (obj.__name__, obj.__qualname__, obj.__bases__), namespace, None, None, _class_fill
    raise TypeError("not a plain function or class")


def _pickle(values, buffers, use_dill=False):
    """values pickled by the C pickler, protocol 5, with large buffers out
    of band; functions and classes a cell defined by value, and what that
    does not cover (use_dill) through dill."""
    import io
    import pickle

    class Pickler(pickle.Pickler):
        def reducer_override(self, obj):
            if _by_value(obj):
                if use_dill:
                    import dill
                    return dill.loads, (dill.dumps(obj, protocol=5),)
                return _reduce_by_value(obj)
            # what a class's namespace holds besides functions
            if type(obj) in (staticmethod, classmethod):
                return type(obj), (obj.__func__,)
            if type(obj) is property:
                return property, (obj.fget, obj.fset, obj.fdel, obj.__doc__)
            return NotImplemented

    out = io.BytesIO()
    Pickler(out, protocol=5, buffer_callback=buffers.append).dump(values)
    return out.getbuffer()


def _why(e):
    text = str(e).splitlines()[0] if str(e) else ""
    return "%s: %s" % (type(e).__name__, text[:200]) if text else type(e).__name__


def _prepare(namespace):
    """(pickle bytes, buffers, kept names, not kept [{name, why}]).

    The state is {"values": {name: value}, "dill": {name: dill's bytes},
    "modules": {name: module name}}: values pickled together, so that
    names sharing an object still share it; what plain pickle cannot take
    even so is tried alone with dill; modules are imported again."""
    import types
    values, by_dill, modules, not_kept = {}, {}, {}, []
    for name in _names(namespace):
        value = namespace[name]
        kind = _unkept_kind(value)
        if kind:
            not_kept.append({"name": name, "why": "%s (%s)" % (kind, type(value).__name__)})
        elif isinstance(value, types.ModuleType):
            modules[name] = value.__name__
        else:
            values[name] = value
    try:
        buffers = []
        data = _pickle({"values": values, "dill": by_dill, "modules": modules}, buffers)
    except Exception:
        # one of them cannot be pickled so: find which, and try those
        # with dill's help (the functions and classes in them too)
        for name in list(values):
            try:
                _pickle({name: values[name]}, [])
                continue
            except Exception:
                pass
            try:
                import dill
                by_dill[name] = dill.dumps(values.pop(name), protocol=5)
            except Exception as e:
                not_kept.append({"name": name, "why": _why(e)})
        buffers = []
        data = _pickle({"values": values, "dill": by_dill, "modules": modules}, buffers)
    return data, buffers, sorted(list(values) + list(by_dill) + list(modules)), not_kept


_DIR, _FILE, _LINK = 1, 2, 3
_ENTRY = struct.Struct("<BHIq")   # kind, the path's length, mode, mtime in ns
_U16 = struct.Struct("<H")


def _workspace_dump(w):
    """/workspace, entry by entry: directories, regular files (their bytes
    as they are when read) and symbolic links; a 0 ends it."""
    def walk(rel):
        try:
            entries = sorted(os.scandir(os.path.join(WORKSPACE, rel)), key=lambda e: e.name)
        except OSError:
            return
        for e in entries:
            path = os.path.join(rel, e.name) if rel else e.name
            raw = path.encode("utf-8", "surrogateescape")
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            mode = st.st_mode & 0o7777
            if e.is_symlink():
                target = os.readlink(e.path).encode("utf-8", "surrogateescape")
                w.write(_ENTRY.pack(_LINK, len(raw), mode, st.st_mtime_ns) + raw + _U16.pack(len(target)) + target)
            elif e.is_dir(follow_symlinks=False):
                w.write(_ENTRY.pack(_DIR, len(raw), mode, st.st_mtime_ns) + raw)
                walk(path)
            elif e.is_file(follow_symlinks=False):
                try:
                    fd = os.open(e.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
                except OSError:
                    continue
                try:
                    size = os.fstat(fd).st_size
                    w.write(_ENTRY.pack(_FILE, len(raw), mode, st.st_mtime_ns) + raw + _U64.pack(size))
                    left = size
                    while left:
                        chunk = os.read(fd, min(left, _FRAME)) or bytes(min(left, _FRAME))   # cut short meanwhile
                        w.write(chunk)
                        left -= len(chunk)
                finally:
                    os.close(fd)

    if os.path.isdir(WORKSPACE):
        walk("")
    w.write(b"\0")


def _workspace_load(r):
    """Make /workspace's entries again (in a fresh jail: it is empty)."""
    dirs = []
    while True:
        kind = r.read(1)[0]
        if kind == 0:
            break
        _, length, mode, mtime = _ENTRY.unpack(bytes([kind]) + r.read(_ENTRY.size - 1))
        path = r.read(length).decode("utf-8", "surrogateescape")
        parts = path.split("/")
        if kind not in (_DIR, _FILE, _LINK) or not path or path.startswith("/") or "" in parts \
                or ".." in parts or "." in parts:
            raise SnapshotError("the snapshot is damaged: a workspace entry %r" % path[:100])
        full = os.path.join(WORKSPACE, path)
        if kind == _DIR:
            os.makedirs(full, exist_ok=True)
            dirs.append((full, mode, mtime))
        elif kind == _LINK:
            target = r.read(_U16.unpack(r.read(2))[0]).decode("utf-8", "surrogateescape")
            os.symlink(target, full)
        else:
            left = _U64.unpack(r.read(8))[0]
            fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                while left:
                    # a piece of its own each: the CRC may still be reading the last
                    piece = r.read_into(bytearray(min(left, _FRAME)))
                    os.write(fd, piece)
                    left -= len(piece)
                os.fchmod(fd, mode)
            finally:
                os.close(fd)
            os.utime(full, ns=(mtime, mtime), follow_symlinks=False)
    for full, mode, mtime in reversed(dirs):
        os.chmod(full, mode)
        os.utime(full, ns=(mtime, mtime))


def dump(namespace, fd, cap):
    """Write the session's state to fd; a report {names, not_kept, bytes}."""
    data, buffers, names, not_kept = _prepare(namespace)
    w = _Writer(fd, cap)
    try:
        w.write(MAGIC)
        w.write(_U64.pack(len(data)))
        w.write(data)
        w.write(_U32.pack(len(buffers)))
        for b in buffers:
            raw = b.raw()
            w.write(_U64.pack(raw.nbytes))
            w.write(raw)
        _workspace_dump(w)
    finally:
        crc = w.crc.value()   # its thread ends, whatever happened
    w.write(_U32.pack(crc))
    return {"names": names, "not_kept": not_kept, "bytes": w.n}


def load(namespace, fd, total=0):
    """Read a state written by dump() from fd into namespace and
    /workspace; a report {names, not_kept, bytes}.  total: the stream's
    size, which no length in it may pass (0: unknown).  Nothing is used
    before the whole stream is read and its CRC checked."""
    r = _Reader(fd)

    def length(raw):
        n = _U64.unpack(raw)[0]
        if total and n > total - r.n:
            raise SnapshotError("the snapshot is damaged: a length of %d bytes where %d are left"
                                % (n, total - r.n))
        return n

    try:
        if r.read(len(MAGIC)) != MAGIC:
            raise SnapshotError("this is not a pycell session snapshot (or one of another version)")
        data = r.read_into(bytearray(length(r.read(8))))
        count = _U32.unpack(r.read(4))[0]
        buffers = []
        for _ in range(count):
            buffers.append(r.read_into(bytearray(length(r.read(8)))))
        # the files are written as they come (a restore that fails ends
        # its jail, and them with it); the globals only once the CRC is right
        _workspace_load(r)
    finally:
        crc = r.crc.value()   # its thread ends, whatever happened
    if _U32.unpack(r.read(4))[0] != crc:
        raise SnapshotError("the snapshot is damaged: its checksum does not match")
    if os.read(fd, 1):
        raise SnapshotError("the snapshot is damaged: bytes follow its end")
    import pickle
    state = pickle.loads(data, buffers=buffers)
    if not isinstance(state, dict) or not all(isinstance(state.get(k), dict) for k in ("values", "dill", "modules")):
        raise SnapshotError("the snapshot is damaged: its state is not a namespace")
    values, not_kept = state["values"], []
    if state["dill"]:
        import dill
        for name, raw in state["dill"].items():
            values[name] = dill.loads(raw)
    for name, module in state["modules"].items():
        try:
            import importlib
            values[name] = importlib.import_module(module)
        except Exception as e:
            not_kept.append({"name": name, "why": "module %s: %s" % (module, _why(e))})
    namespace.update(values)
    return {"names": sorted(values), "not_kept": not_kept, "bytes": r.n}
