"""pycell: a session's interpreter (src/run/session.c).

The session's jail runs one cell, ``pycell._session.serve()``, which
waits for the supervisor's cells on the tool socket (fd 3) and runs each
in __main__, so that globals, imports and /workspace persist from one to
the next.  Each cell ends with a ``pycell/cell_end`` notification, sent
after its output was flushed to the pipes: the supervisor then drains
them, and what the cell printed is its own.  A cell that runs past its
time gets SIGINT (KeyboardInterrupt); SystemExit ends the cell, not the
session.  serve() returns when the supervisor closes the socket.
"""

import os
import signal
import sys
import time

from . import _cell

TOOL_FD = 3
MAX_PACKET = (4 << 20) + 1


def _send(method, params=None):
    import json
    msg = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        msg["params"] = params
    os.write(TOOL_FD, json.dumps(msg).encode("utf-8"))


def _flush():
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except Exception:
            pass


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


def _next_cell():
    """The next pycell/cell message's params; None when the supervisor is
    gone.  Anything else on the socket (a late reply to a tool call that
    timed out) is not for us."""
    import json
    while True:
        try:
            packet = os.read(TOOL_FD, MAX_PACKET)
        except KeyboardInterrupt:
            continue   # a cell's interrupt that came after it ended
        except OSError:
            return None
        if not packet:
            return None
        try:
            msg = json.loads(packet)
        except ValueError:
            continue
        if isinstance(msg, dict) and msg.get("method") == "pycell/cell":
            return msg.get("params") or {}


def serve():
    import resource
    namespace = sys.modules["__main__"].__dict__
    # the cells' timeouts interrupt them: a KeyboardInterrupt, whatever
    # the interpreter was started with
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.argv[:] = [_cell.FILENAME]
    _send("pycell/session_ready")
    while True:
        params = _next_cell()
        if params is None:
            return
        cpu0 = time.process_time()
        try:
            status = _one(namespace, params)
        except KeyboardInterrupt:
            status = 1   # the interrupt came between the cell's own handlers
            try:
                sys.stderr.write("KeyboardInterrupt\n")
            except Exception:
                pass
        _flush()
        try:
            _send("pycell/cell_end", {
                "exit_code": status,
                "cpu_ms": int((time.process_time() - cpu0) * 1000),
                "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
            })
        except KeyboardInterrupt:
            _send("pycell/cell_end", {"exit_code": 1})
        except OSError:
            return
