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
    /workspace as a tar, in frames of u32 length and bytes; a 0 ends it
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


class _Writer:
    """Writes to a file descriptor, counting and checksumming, and stops
    at the cap the supervisor set (it would cut the stream there anyway)."""

    def __init__(self, fd, cap):
        self.fd, self.cap, self.n, self.crc = fd, cap, 0, 0

    def write(self, data):
        view = memoryview(data).cast("B")
        if self.cap and self.n + len(view) > self.cap:
            raise SnapshotError("the session's state is more than the %d bytes a snapshot may hold "
                                "(the policy's sessions.snapshot_max)" % self.cap)
        self.crc = zlib.crc32(view, self.crc)
        while view:
            k = os.write(self.fd, view)
            view = view[k:]
            self.n += k
        return len(data)


class _Reader:
    def __init__(self, fd):
        self.fd, self.n, self.crc = fd, 0, 0

    def read_into(self, buf):
        view = memoryview(buf).cast("B")
        got = 0
        while got < len(view):
            k = os.readv(self.fd, [view[got:]])
            if k == 0:
                raise SnapshotError("the snapshot ends early, after %d bytes: it was cut short"
                                    % (self.n + got))
            got += k
        self.crc = zlib.crc32(view, self.crc)
        self.n += got
        return buf

    def read(self, n):
        return bytes(self.read_into(bytearray(n)))


def _unkept_kind(value):
    """Why value cannot be kept, by its type, or None."""
    import types
    kinds = [(types.GeneratorType, "generator"), (types.CoroutineType, "coroutine"),
             (types.AsyncGeneratorType, "async generator"), (types.FrameType, "frame")]
    for mod, attr, kind in (("socket", "socket", "socket"), ("threading", "Thread", "thread"),
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


def _pickle(values, buffers):
    """values pickled by the C pickler, protocol 5, with large buffers out
    of band; only functions and classes a cell defined go through dill."""
    import io
    import pickle

    class Pickler(pickle.Pickler):
        def reducer_override(self, obj):
            if _by_value(obj):
                import dill
                return dill.loads, (dill.dumps(obj, protocol=5),)
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
        # one of them cannot be pickled so: find which
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


def _workspace_tar(w):
    """/workspace as a tar in frames (w: a _Writer)."""
    import tarfile

    class Framed:
        def write(self, data):
            data = memoryview(data).cast("B")
            for i in range(0, len(data), _FRAME):
                part = data[i:i + _FRAME]
                w.write(_U32.pack(len(part)))
                w.write(part)
            return len(data)

    if os.path.isdir(WORKSPACE):
        with tarfile.open(fileobj=Framed(), mode="w|", format=tarfile.PAX_FORMAT) as tar:
            for entry in sorted(os.listdir(WORKSPACE)):
                tar.add(os.path.join(WORKSPACE, entry), arcname=entry)
    w.write(_U32.pack(0))


def dump(namespace, fd, cap):
    """Write the session's state to fd; a report {names, not_kept, bytes}."""
    data, buffers, names, not_kept = _prepare(namespace)
    w = _Writer(fd, cap)
    w.write(MAGIC)
    w.write(_U64.pack(len(data)))
    w.write(data)
    w.write(_U32.pack(len(buffers)))
    for b in buffers:
        raw = b.raw()
        w.write(_U64.pack(raw.nbytes))
        w.write(raw)
    _workspace_tar(w)
    w.write(_U32.pack(w.crc))
    return {"names": names, "not_kept": not_kept, "bytes": w.n}


def _read_workspace(r):
    """The framed tar, whole (it is checked before it is unpacked)."""
    parts = []
    while True:
        n = _U32.unpack(r.read(4))[0]
        if n == 0:
            return b"".join(parts)
        if n > _FRAME:
            raise SnapshotError("the snapshot is damaged: a workspace frame of %d bytes" % n)
        parts.append(r.read(n))


def load(namespace, fd):
    """Read a state written by dump() from fd into namespace and
    /workspace; a report {names, bytes}.  Nothing is used before the
    whole stream is read and its CRC checked."""
    r = _Reader(fd)
    if r.read(len(MAGIC)) != MAGIC:
        raise SnapshotError("this is not a pycell session snapshot (or one of another version)")
    size = _U64.unpack(r.read(8))[0]
    data = r.read_into(bytearray(size))
    count = _U32.unpack(r.read(4))[0]
    buffers = []
    for _ in range(count):
        buffers.append(r.read_into(bytearray(_U64.unpack(r.read(8))[0])))
    tar = _read_workspace(r)
    crc = r.crc
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
    if tar:
        import io
        import tarfile
        with tarfile.open(fileobj=io.BytesIO(tar), mode="r:") as t:
            if hasattr(tarfile, "data_filter"):
                t.extractall(WORKSPACE, filter="data")
            else:
                t.extractall(WORKSPACE)
    namespace.update(values)
    return {"names": sorted(values), "not_kept": not_kept, "bytes": r.n + 4}
