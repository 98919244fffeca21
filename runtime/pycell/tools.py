"""pycell.tools: call the MCP tools the run's policy allows.

The jail reaches its supervisor through one socket, fd 3 (SOCK_SEQPACKET,
one JSON-RPC 2.0 message per packet).  The supervisor lists the tools the
policy allows, named SERVER.TOOL, checks every call (allowlist, budget,
size caps) and forwards it to the upstream MCP server; this module is the
client side.  Everything is also importable from ``pycell`` itself::

    import pycell
    pycell.list_tools("entities")
    pycell.call_tool("memory.create_entities", {"entities": [...]})
    await pycell.call_tool_async("memory.read_graph")

Each upstream server is also a module of functions (code mode,
pycell/_codemode.py)::

    from pycell.tools import memory
    help(memory)
    memory.create_entities(entities=[...])
    pycell.tools.search("entities")

A call returns the tool's structuredContent when it has one, else its text
content (parsed as JSON when it is JSON).  A failed call raises ToolError:
ToolDenied when the policy refused it, ToolTimeout when the server did not
answer in time, ToolChannelError when fd 3 is unusable.

Calls may come from several threads at once (the async functions run the
blocking ones in worker threads); one thread at a time reads the socket and
hands each reply to the thread waiting for it.
"""

import json
import socket
import sys
import threading

__all__ = [
    "call_tool", "list_tools", "get_tool_schema", "search_tools",
    "call_tool_async", "list_tools_async", "get_tool_schema_async", "search_tools_async",
    "call_mcp_tool", "discover_mcp_tools",
    "ToolError", "ToolDenied", "ToolTimeout", "ToolNotFound", "ToolChannelError", "ToolArgumentError",
    "search", "servers",
]

TOOL_FD = 3
# The supervisor reads at most this much in one packet (src/run/run.c); a
# larger request would be answered with an error it cannot match to us.
MAX_MESSAGE = 4 << 20
# JSON-RPC error codes of the supervisor (src/bridge/bridge.h)
ERR_DENIED = -32001
ERR_UPSTREAM = -32002


class ToolError(Exception):
    """A tool call failed.  Attributes: tool (the name called), code and
    reason (from the supervisor's error, when it sent one), result (the
    tool's own result object when the tool reported the error)."""

    def __init__(self, message, tool=None, code=None, reason=None, result=None):
        super().__init__(message)
        self.tool = tool
        self.code = code
        self.reason = reason
        self.result = result


class ToolDenied(ToolError):
    """The policy refused the call: not allowed, budget used up, arguments
    or result too large, too many calls in flight."""


class ToolTimeout(ToolError):
    """No answer in time (the upstream server's timeout, or the timeout
    given to call_tool)."""


class ToolNotFound(ToolError, LookupError):
    """get_tool_schema: no tool of that name is available to this run."""


class ToolArgumentError(ToolError, TypeError):
    """A server module's function was given arguments its tool's input
    schema refuses (missing, unknown, or of the wrong JSON type): raised
    before any call."""


class ToolChannelError(ToolError):
    """fd 3 cannot be used: it was closed, replaced, or the supervisor
    stopped answering on it."""


_PENDING = object()


class _Channel:
    def __init__(self):
        self._cond = threading.Condition(threading.Lock())
        self._sock = None
        self._next_id = 0
        self._replies = {}      # request id -> reply message, or _PENDING
        self._reading = False   # a thread is blocked in recv
        self._broken = None     # why the channel is unusable
        self._peek = bytearray(1)

    def _socket(self):
        if self._broken:
            raise ToolChannelError(self._broken)
        if self._sock is None and sys.platform == "emscripten":
            from pycell import _wasm   # the wasm backend: the runner's fd 3
            self._sock = _wasm.channel()
        if self._sock is None:
            try:
                sock = socket.socket(fileno=TOOL_FD)
            except OSError as e:
                raise ToolChannelError("the tool channel (fd %d) is not available: %s"
                                       % (TOOL_FD, e.strerror or e)) from None
            if sock.family != socket.AF_UNIX or sock.type != socket.SOCK_SEQPACKET:
                sock.detach()
                raise ToolChannelError("fd %d is not the tool channel" % TOOL_FD)
            sock.setblocking(True)
            self._sock = sock   # kept for the life of the process: never closed
        return self._sock

    def _fail(self, why):
        self._broken = why
        self._cond.notify_all()
        return ToolChannelError(why)

    def _recv(self, sock, timeout):
        """One packet, or None when the timeout passed first."""
        if sys.platform == "emscripten":
            return sock.recv_packet()   # no select: the supervisor's timeout holds
        if timeout is not None:
            import select
            if not select.select([sock], [], [], max(timeout, 0))[0]:
                return None
        # the packet's real size first: replies can be large
        size = sock.recv_into(self._peek, 1, socket.MSG_PEEK | socket.MSG_TRUNC)
        if size == 0:
            sock.recv(1)
            return b""
        return sock.recv(size)

    def _dispatch(self, packet):
        try:
            msg = json.loads(packet)
        except ValueError:
            return          # not JSON: nothing anyone waits for
        if not isinstance(msg, dict):
            return
        rid = msg.get("id")
        if (type(rid) is int and self._replies.get(rid) is _PENDING
                and ("result" in msg or "error" in msg)):
            self._replies[rid] = msg

    def request(self, method, params=None, timeout=None):
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        with self._cond:
            sock = self._socket()
            self._next_id += 1
            rid = msg["id"] = self._next_id
            # ASCII only: a lone surrogate in a str cannot break the encoding
            data = json.dumps(msg, allow_nan=False, separators=(",", ":")).encode("ascii")
            self._replies[rid] = _PENDING
        try:
            return self._exchange(sock, rid, data, timeout)
        finally:
            with self._cond:
                self._replies.pop(rid, None)

    @staticmethod
    def _cancel(sock, rid):
        """Tell the supervisor we stopped waiting, so it drops the call."""
        note = {"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": rid, "reason": "timeout"}}
        try:
            sock.send(json.dumps(note, separators=(",", ":")).encode("ascii"))
        except OSError:
            pass

    def _exchange(self, sock, rid, data, timeout):
        import time
        if len(data) > MAX_MESSAGE:
            raise ToolError("the request is %d bytes, more than the tool channel carries in one "
                            "message (%d)" % (len(data), MAX_MESSAGE), reason="too_large")
        try:
            sock.send(data)
        except OSError as e:
            if e.errno in (90, 105):  # EMSGSIZE, ENOBUFS: this packet, not the channel
                raise ToolError("the request (%d bytes) could not be sent: %s"
                                % (len(data), e.strerror), reason="too_large") from None
            with self._cond:
                raise self._fail("the tool channel (fd %d) failed: %s"
                                 % (TOOL_FD, e.strerror or e)) from None
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._replies.get(rid) is _PENDING:
                if self._broken:
                    raise ToolChannelError(self._broken)
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    self._cancel(sock, rid)
                    raise ToolTimeout("no answer within %g s" % timeout, reason="timeout")
                if self._reading:
                    self._cond.wait(left)
                    continue
                self._reading = True
                self._cond.release()
                try:
                    packet = self._recv(sock, left)
                    error = None
                except OSError as e:
                    packet, error = None, e
                finally:
                    self._cond.acquire()
                    self._reading = False
                    self._cond.notify_all()
                if error is not None:
                    raise self._fail("the tool channel (fd %d) failed: %s"
                                     % (TOOL_FD, error.strerror or error)) from None
                if packet == b"":
                    raise self._fail("the supervisor closed the tool channel")
                if packet is not None:
                    self._dispatch(packet)
            return self._replies[rid]


_channel = _Channel()


def _request(method, params=None, timeout=None):
    return _channel.request(method, params, timeout)


def _short(e):
    """The error without this module's frames: the traceback a user sees
    ends at their call."""
    return e.with_traceback(None)


def _raise_error(name, error):
    if not isinstance(error, dict):
        raise ToolError("%s: malformed error reply" % name, tool=name)
    message = error.get("message")
    message = message if isinstance(message, str) else "%s failed" % name
    code = error.get("code")
    data = error.get("data")
    reason = data.get("reason") if isinstance(data, dict) else None
    cls = ToolError
    if code == ERR_DENIED:
        cls = ToolDenied
    elif reason == "timeout":
        cls = ToolTimeout
    raise cls(message, tool=name, code=code, reason=reason)


def _text_blocks(content):
    if not isinstance(content, list):
        return []
    return [b.get("text") for b in content
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)]


def _parse_text(text):
    try:
        return json.loads(text)
    except ValueError:
        return text


def _content_value(content):
    if not isinstance(content, list) or not content:
        return None
    values = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
            values.append(_parse_text(block["text"]))
        else:
            values.append(block)   # images, resources: as the server sent them
    return values[0] if len(values) == 1 else values


def _result_value(name, reply):
    if "error" in reply:
        _raise_error(name, reply["error"])
    result = reply.get("result")
    if not isinstance(result, dict):
        raise ToolError("%s: malformed result" % name, tool=name)
    if result.get("isError"):
        text = "\n".join(_text_blocks(result.get("content"))) or "%s reported an error" % name
        raise ToolError(text, tool=name, reason="tool_error", result=result)
    if "structuredContent" in result:
        return result["structuredContent"]
    return _content_value(result.get("content"))


def call_tool(name, arguments=None, *, timeout=None):
    """Call tool `name` (SERVER.TOOL, as list_tools shows it) with the
    `arguments` dict; returns its structuredContent, else its text content
    (parsed when it is JSON).  `timeout` (seconds) stops waiting earlier
    than the supervisor would.  Raises ToolError on failure."""
    if not isinstance(name, str):
        raise TypeError("tool name must be a str, not %s" % type(name).__name__)
    if arguments is None:
        arguments = {}
    elif not isinstance(arguments, dict):
        raise TypeError("arguments must be a dict, not %s" % type(arguments).__name__)
    try:
        return _result_value(name, _request("tools/call", {"name": name, "arguments": arguments}, timeout))
    except ToolError as e:
        raise _short(e) from None


def list_tools(query=None):
    """The tools this run may call: a list of dicts with name, description,
    inputSchema (and outputSchema, annotations when the server gives them).
    With `query`, only tools whose name, title or description contains
    every word of it (case-insensitive)."""
    try:
        return _list_tools(query)
    except ToolError as e:
        raise _short(e) from None


def _list_tools(query):
    reply = _request("tools/list")
    if "error" in reply:
        _raise_error("tools/list", reply["error"])
    result = reply.get("result")
    tools = result.get("tools") if isinstance(result, dict) else None
    if not isinstance(tools, list):
        raise ToolError("tools/list: malformed result")
    tools = [t for t in tools if isinstance(t, dict) and isinstance(t.get("name"), str)]
    if query:
        words = str(query).lower().split()

        def matches(t):
            text = " ".join(str(t.get(k) or "") for k in ("name", "title", "description")).lower()
            return all(w in text for w in words)
        tools = [t for t in tools if matches(t)]
    return tools


def search_tools(query, limit=None):
    """list_tools(query), at most `limit` of them."""
    try:
        tools = _list_tools(query)
    except ToolError as e:
        raise _short(e) from None
    return tools if limit is None else tools[:max(int(limit), 0)]


def get_tool_schema(name):
    """The description of tool `name` (name, description, inputSchema,
    ...); raises ToolNotFound when this run cannot call it."""
    try:
        tools = _list_tools(None)
    except ToolError as e:
        raise _short(e) from None
    for t in tools:
        if t["name"] == name:
            return t
    raise ToolNotFound("no tool named %r is available to this run" % (name,), tool=name)


def _resolve(fut, value, error):
    if not fut.done():   # the awaiting task may have been cancelled
        if error is not None:
            fut.set_exception(error)
        else:
            fut.set_result(value)


async def _in_thread(fn, *args, **kwargs):
    """fn(*args) in a daemon thread: unlike asyncio.to_thread's executor, a
    call still waiting when the program ends does not hold up its exit."""
    import asyncio
    loop = asyncio.get_running_loop()
    fut = loop.create_future()

    def work():
        value = error = None
        try:
            value = fn(*args, **kwargs)
        except BaseException as e:
            error = e
        try:
            loop.call_soon_threadsafe(_resolve, fut, value, error)
        except RuntimeError:
            pass   # the event loop is closed: nobody waits any more
    threading.Thread(target=work, name="pycell-tool-call", daemon=True).start()
    return await fut


async def call_tool_async(name, arguments=None, *, timeout=None):
    """call_tool in a worker thread: calls may run concurrently."""
    return await _in_thread(call_tool, name, arguments, timeout=timeout)


async def list_tools_async(query=None):
    return await _in_thread(list_tools, query)


async def search_tools_async(query, limit=None):
    return await _in_thread(search_tools, query, limit)


async def get_tool_schema_async(name):
    return await _in_thread(get_tool_schema, name)


# The names code-executor-MCP users know.
call_mcp_tool = call_tool
discover_mcp_tools = list_tools


# ------------------------------------------------------------ code mode

def search(query, limit=None):
    """Tools of every server whose names or description have every word of
    `query` (case-insensitive), as lines to read, each a function of a
    server's module: 'memory.create_entities(*, entities: array of object)
    - Create multiple new entities ...'.  At most `limit` of them."""
    from . import _codemode
    try:
        return _codemode.search(query, limit)
    except ToolError as e:
        raise _short(e) from None


def servers():
    """The servers whose tools this run may call, as module names:
    `from pycell.tools import NAME`."""
    from . import _codemode
    try:
        return _codemode.servers()
    except ToolError as e:
        raise _short(e) from None


def __getattr__(name):
    """pycell.tools.SERVER: the module of that server's tools (made on first
    use from the tools this run may call)."""
    if name.startswith("__"):
        raise AttributeError("module 'pycell.tools' has no attribute %r" % (name,))
    from . import _codemode
    try:
        return _codemode.module(name)
    except ToolError as e:
        # an attribute lookup fails with AttributeError (hasattr, getattr
        # with a default), whatever kept the tools from being listed
        raise AttributeError("pycell.tools.%s: the tools could not be listed: %s" % (name, e)) from None


def __dir__():
    names = set(globals())
    try:
        names.update(servers())
    except ToolError:
        pass
    return sorted(names)
