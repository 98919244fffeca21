"""pycell: a session's interpreter (src/run/session.c).

The session's jail runs one cell, ``pycell._session.serve()``, which
waits for the supervisor's cells on the tool socket and runs each in
__main__, so that globals, imports and /workspace persist from one to
the next.

Each cell comes with a number and two pipes of its own, which become
fds 1 and 2 while it runs: what it prints reaches the supervisor on
them, and once the supervisor has the cell's ``pycell/cell_end`` (sent
after the output was flushed, naming the cell's number) it reads them
to their end and closes them.  A cell's code that sends an end of its
own only cuts its own result short: what it writes after goes into
pipes nobody reads, never into another cell's.  Between cells fds 1 and
2 are the jail's own pipes, whose bytes the supervisor drops.

The loop keeps a copy of the socket of its own: code that closes or
replaces fd 3 loses its own tool calls, not the session; code that
replaces the loop's copy ends the session at once (the supervisor sees
python exit) instead of leaving the next cell to wait for an end that
cannot come.  A cell that runs past its time gets SIGINT
(KeyboardInterrupt); SystemExit ends the cell, not the session.  serve()
returns when the supervisor closes the socket.
"""

import os
import sys
import time

# _signal and _socket, not signal and socket: those wrap the same calls in
# enum classes (and socket brings selectors, select, array and
# collections.abc), which every idle session paid for in memory of its own,
# about 0.3 MiB, for two calls.  A cell that imports them still gets them.
import _signal
import _socket
import resource

from . import _cell

TOOL_FD = 3
MAX_PACKET = (4 << 20) + 1
STDOUT, STDERR = 1, 2

_sock = None        # the loop's own copy of the tool socket
_sock_id = None     # (st_dev, st_ino) of it, to notice it replaced
_jail_out = None    # copies of the jail's own fds 1 and 2, for between cells


def _check_channel():
    """The loop's copy of the socket is still the socket: else the session
    cannot hear cells or say they ended, and ends now."""
    try:
        st = os.fstat(_sock.fileno())
        same = (st.st_dev, st.st_ino) == _sock_id
    except OSError:
        same = False
    if not same:
        try:
            os.write(STDERR, b"pycell: the session's channel to the supervisor was closed or replaced: "
                             b"the session ends\n")
        except OSError:
            pass
        os._exit(70)


def _send(method, params=None):
    import json
    msg = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        msg["params"] = params
    _check_channel()
    _sock.send(json.dumps(msg).encode("utf-8"))


_broken = []        # streams whose pipe closed under them (kept: see _flush)


def _flush():
    """Flush the standard streams.  One that cannot be flushed (the cell's
    pipe was closed under it: the cell sent its own end) still holds what
    the cell wrote last: it is replaced by a new stream on the same fd, so
    that those bytes go nowhere instead of into the next cell's pipe, and
    kept, so that no finalizer flushes them later."""
    import io
    for name in ("stdout", "stderr"):
        f = getattr(sys, name)
        try:
            f.flush()
        except Exception:
            try:
                fresh = io.open(f.fileno(), "w", encoding=f.encoding, errors=f.errors,
                                line_buffering=f.line_buffering, closefd=False)
            except Exception:
                continue
            _broken.append(f)
            if getattr(sys, "__%s__" % name) is f:
                setattr(sys, "__%s__" % name, fresh)
            setattr(sys, name, fresh)


def _one(namespace, params):
    """Run one cell: its exit code (0 ok, 1 an exception, SystemExit's)."""
    code = params.get("code", "").encode("utf-8", "surrogatepass")
    variables = params.get("variables")
    if isinstance(variables, dict):   # parsed with the message already
        namespace.update(variables)
    try:
        return _cell.run_cell(namespace, code, b"", params.get("files"), bool(params.get("outputs")))
    except SystemExit as e:
        return _cell.exit_status(e)


def _recv_fds(size, most):
    """One packet of at most size bytes from the loop's socket and the
    descriptors that came with it, at most most of them (the kernel closes
    any more): socket.recv_fds without the socket module."""
    packet, anc, _, _ = _sock.recvmsg(size, _socket.CMSG_LEN(most * 4))
    fds = []
    for level, kind, data in anc:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            fds += [int.from_bytes(data[i:i + 4], sys.byteorder, signed=True)
                    for i in range(0, len(data) - len(data) % 4, 4)]
    return packet, fds


def _next_cell():
    """The next pycell/cell message's params and its two pipes; None when
    the supervisor is gone.  Anything else on the socket (a late reply to
    a tool call that timed out) is not for us."""
    import json
    while True:
        _check_channel()
        try:
            packet, fds = _recv_fds(MAX_PACKET, 2)
        except KeyboardInterrupt:
            continue   # a cell's interrupt that came after it ended
        except OSError:
            return None
        if not packet and not fds:
            return None
        try:
            msg = json.loads(packet)
        except ValueError:
            msg = None
        if (isinstance(msg, dict) and msg.get("method") == "pycell/cell" and len(fds) == 2
                and isinstance(msg.get("params"), dict)):
            return msg["params"], fds
        if (isinstance(msg, dict) and msg.get("method") in ("pycell/snapshot", "pycell/restore")
                and len(fds) == 1 and isinstance(msg.get("params"), dict)):
            _state(msg["method"], msg["params"], fds[0])
            continue
        for fd in fds:
            os.close(fd)


def _state(method, params, fd):
    """Write the session's state to fd (pycell/snapshot), or read it from
    fd (pycell/restore), and say how it went: pycell/snapshot_end or
    pycell/restore_end, {ok, ...the report} or {ok: false, error}."""
    from . import _snapshot
    namespace = sys.modules["__main__"].__dict__
    try:
        if method == "pycell/snapshot":
            report = _snapshot.dump(namespace, fd, int(params.get("max_bytes") or 0))
        else:
            report = _snapshot.load(namespace, fd, int(params.get("max_bytes") or 0))
            # the restored /workspace is where the next cell starts, not
            # what it wrote
            _cell._outputs.before = _cell._outputs._walk()
        report["ok"] = True
    except KeyboardInterrupt:
        report = {"ok": False, "error": "interrupted"}
    except _snapshot.SnapshotError as e:
        report = {"ok": False, "error": str(e), "damaged": method == "pycell/restore"}
    except BaseException as e:   # whatever the state's own code raised
        report = {"ok": False, "error": "%s: %s" % (type(e).__name__, str(e)[:500])}
    finally:
        os.close(fd)
    _send(method + "_end", report)


def _use_fds(out, err):
    """Make out and err fds 1 and 2 (the buffered streams flushed first)."""
    _flush()
    os.dup2(out, STDOUT)
    os.dup2(err, STDERR)


def serve():
    global _sock, _sock_id, _jail_out
    _sock = _socket.socket(fileno=os.dup(TOOL_FD))
    st = os.fstat(_sock.fileno())
    _sock_id = (st.st_dev, st.st_ino)
    # the value, images and files of a cell go on the loop's copy too
    _cell._tool_fd = _sock.fileno()
    _jail_out = (os.dup(STDOUT), os.dup(STDERR))
    for fd in _jail_out:
        os.set_inheritable(fd, False)
    namespace = sys.modules["__main__"].__dict__
    # the cells' timeouts interrupt them: a KeyboardInterrupt, whatever
    # the interpreter was started with
    _signal.signal(_signal.SIGINT, _signal.default_int_handler)
    sys.argv[:] = [_cell.FILENAME]
    _send("pycell/session_ready")
    while True:
        got = _next_cell()
        if got is None:
            return
        params, pipes = got
        number = params.get("cell")
        _use_fds(*pipes)
        for fd in pipes:
            os.close(fd)
        cpu0 = time.process_time()
        try:
            status = _one(namespace, params)
        except KeyboardInterrupt:
            status = 1   # the interrupt came between the cell's own handlers
            try:
                sys.stderr.write("KeyboardInterrupt\n")
            except Exception:
                pass
        except Exception:
            status = 1   # its traceback could not be written: its stderr is gone
        end = {"cell": number, "exit_code": status}
        try:
            _flush()
            end["cpu_ms"] = int((time.process_time() - cpu0) * 1000)
            end["maxrss_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        except KeyboardInterrupt:
            pass
        try:
            _check_channel()   # while the cell's stderr is fd 2: it says why
            # the cell's pipes leave fds 1 and 2 before its end is told:
            # then nothing of the loop's holds them
            _use_fds(*_jail_out)
            _send("pycell/cell_end", end)
        except KeyboardInterrupt:
            # the interrupt came late, maybe between the two dup2s
            _use_fds(*_jail_out)
            _send("pycell/cell_end", {"cell": number, "exit_code": 1})
        except OSError:
            return
