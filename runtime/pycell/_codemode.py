"""pycell.tools' modules (code mode): each upstream server whose tools
this run may call is a module of functions, made on first use from the
tools/list the supervisor answers (only the tools the policy allows)::

    from pycell.tools import memory
    help(memory)                      # its tools, their arguments
    memory.create_entities(entities=[...])
    await memory.read_graph_async()
    pycell.tools.search("entities")   # tools of every server

Names: a server or tool name becomes a Python identifier by turning every
character that cannot be in one into "_", putting "_" before a leading
digit and "_" after a keyword (read-graph -> read_graph, class -> class_,
2fa -> _2fa); two names that become one are both refused, named, and
reachable through pycell.call_tool.  Arguments are keyword-only, named
the same way from the input schema's properties; a missing required one,
an unknown one or a value of a JSON type the schema refuses raises
ToolArgumentError (a TypeError) before any call, with the signature.  An
optional argument given as None is left out of the call.  A call returns
what pycell.call_tool returns: the structuredContent when the tool sent
one, else its text content (parsed when it is JSON).
"""

import keyword
import sys
import types

from . import tools as _tools

ToolArgumentError = _tools.ToolArgumentError
_JSON_TYPES = {"string": str, "integer": int, "number": float, "boolean": bool, "array": list,
               "object": dict, "null": type(None)}


def py_name(name):
    """The Python identifier a server, tool or argument name is reached as."""
    s = "".join(c if (c.isascii() and (c.isalnum() or c == "_")) else "_" for c in name)
    if not s or s[0].isdigit():
        s = "_" + s
    if keyword.iskeyword(s):
        s += "_"
    return s


def _by_py_name(names):
    """{identifier: name} for the names that map alone, and {identifier:
    [names]} for those that share one."""
    seen = {}
    for n in names:
        seen.setdefault(py_name(n), []).append(n)
    alone = {k: v[0] for k, v in seen.items() if len(v) == 1}
    shared = {k: v for k, v in seen.items() if len(v) > 1}
    return alone, shared


class _Catalog:
    """The run's tools by server, listed once (the policy fixes them)."""

    def __init__(self):
        tools = _tools._list_tools(None)
        by_server = {}
        for t in tools:
            server, dot, tool = t["name"].partition(".")
            if dot and tool:
                by_server.setdefault(server, {})[tool] = t
        self.servers, self.shared = _by_py_name(by_server)
        # per server: {identifier: _Tool} of the tools that map alone, and
        # {identifier: [names]} of those that share one
        self.functions = {}
        for server, specs in by_server.items():
            alone, shared = _by_py_name(specs)
            self.functions[server] = ({a: _Tool(server + "." + n, specs[n], a) for a, n in alone.items()}, shared)
        self.modules = {}


_catalog = None


def catalog():
    global _catalog
    if _catalog is None:
        _catalog = _Catalog()
    return _catalog


def _types(schema):
    t = schema.get("type") if isinstance(schema, dict) else None
    if isinstance(t, str):
        t = [t]
    if not isinstance(t, list):
        return None
    return [x for x in t if x in _JSON_TYPES] or None


def _type_text(schema):
    """"string", "integer | null", "one of 'a', 'b'"."""
    if isinstance(schema, dict) and isinstance(schema.get("enum"), list):
        return "one of " + ", ".join(repr(v) for v in schema["enum"])
    ts = _types(schema)
    if not ts:
        return "any"
    if "array" in ts and isinstance(schema.get("items"), dict) and _types(schema["items"]):
        ts = ["array of " + " | ".join(_types(schema["items"])) if x == "array" else x for x in ts]
    return " | ".join(ts)


def _annotation(schema):
    import typing
    if isinstance(schema, dict) and isinstance(schema.get("enum"), list) and schema["enum"] and all(
            isinstance(v, (str, int, bool)) for v in schema["enum"]):
        return typing.Literal[tuple(schema["enum"])]
    ts = _types(schema)
    if not ts:
        return typing.Any
    py = []
    for x in ts:
        if _JSON_TYPES[x] not in py:
            py.append(_JSON_TYPES[x])
    ann = py[0]
    for p in py[1:]:
        ann = ann | p
    return ann


def _json_type_ok(value, schema):
    ts = _types(schema)
    if isinstance(schema, dict) and isinstance(schema.get("enum"), list) and value not in schema["enum"]:
        return False
    if not ts:
        return True
    for t in ts:
        if t == "boolean" and isinstance(value, bool):
            return True
        if isinstance(value, bool):
            continue
        if t == "integer" and (isinstance(value, int) or (isinstance(value, float) and value.is_integer())):
            return True
        if t == "number" and isinstance(value, (int, float)):
            return True
        if t == "string" and isinstance(value, str):
            return True
        if t == "array" and isinstance(value, (list, tuple)):
            return True
        if t == "object" and isinstance(value, dict):
            return True
        if t == "null" and value is None:
            return True
    return False


class _Tool:
    """One tool as a function: its parameters, signature and docstring."""

    def __init__(self, full, spec, attr):
        self.full, self.spec, self.attr = full, spec, attr
        schema = spec.get("inputSchema") if isinstance(spec.get("inputSchema"), dict) else {}
        props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        req = schema.get("required") if isinstance(schema.get("required"), list) else []
        # a required name the properties do not describe is still an argument
        props = dict(props, **{r: {} for r in req if isinstance(r, str) and r not in props})
        self.open = schema.get("additionalProperties") not in (None, False)
        alone, shared = _by_py_name(props)
        self.refused = ["%s (both are %s)" % (" and ".join(repr(n) for n in v), k) for k, v in shared.items()]
        self.params = []   # (identifier, key, schema, required), required first
        for k, key in alone.items():
            self.params.append((k, key, props[key] if isinstance(props[key], dict) else {}, key in req))
        self.params.sort(key=lambda p: not p[3])

    def signature_text(self):
        parts = []
        for k, key, sch, required in self.params:
            parts.append("%s: %s%s" % (k, _type_text(sch), "" if required else " = None"))
        return "%s(%s)" % (self.attr, ", ".join(["*"] + parts) if parts else "")

    def signature(self):
        import inspect
        params = []
        for k, key, sch, required in self.params:
            default = inspect.Parameter.empty if required else sch.get("default", None)
            params.append(inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, default=default,
                                            annotation=_annotation(sch)))
        return inspect.Signature(params)

    def summary(self):
        """'name(*, arg: type) - the description's first line'"""
        first = (str(self.spec.get("description") or "").strip().splitlines() or [""])[0]
        return "%s - %s" % (self.signature_text(), first[:100])

    def doc(self, server_attr):
        lines = [str(self.spec.get("description") or self.spec.get("title") or "").strip()
                 or "(no description)", ""]
        if self.params:
            lines.append("Parameters:")
            for k, key, sch, required in self.params:
                bits = [_type_text(sch), "required" if required else "optional"]
                if "default" in sch:
                    bits.append("default %r" % (sch["default"],))
                text = "  %s (%s)" % (k, ", ".join(bits))
                if key != k:
                    text += " [%r in the schema]" % key
                if sch.get("description"):
                    text += ": " + str(sch["description"]).strip()
                lines.append(text)
            lines.append("")
        out = self.spec.get("outputSchema")
        if isinstance(out, dict):
            props = out.get("properties") if isinstance(out.get("properties"), dict) else {}
            lines.append("Returns: a dict (the tool's structured result)%s" % (
                ": " + ", ".join("%s (%s)" % (k, _type_text(v)) for k, v in props.items()) if props else ""))
        else:
            lines.append("Returns: the tool's text result, parsed when it is JSON.")
        lines.append("Async twin: %s.%s_async; MCP tool %s." % (server_attr, self.attr, self.full))
        return "\n".join(lines)

    def arguments(self, server_attr, args, kwargs):
        """The call's arguments object, or ToolArgumentError."""
        sig = "%s.%s" % (server_attr, self.signature_text())
        if args:
            raise ToolArgumentError("%s takes keyword arguments only (%d positional given)"
                                    % (sig, len(args)), tool=self.full, reason="arguments")
        if self.refused:
            raise ToolArgumentError("%s: the schema's properties %s map to one Python name; call it with "
                                    "pycell.call_tool(%r, {...})" % (self.full, "; ".join(self.refused),
                                                                    self.full),
                                    tool=self.full, reason="arguments")
        known = {k: (key, sch, required) for k, key, sch, required in self.params}
        out = {}
        for k, v in kwargs.items():
            if k not in known:
                if self.open:
                    out[k] = v
                    continue
                raise ToolArgumentError("%s got an unknown argument %r" % (sig, k), tool=self.full,
                                        reason="arguments")
            key, sch, required = known[k]
            if v is None and not required and "null" not in (_types(sch) or []):
                continue
            if not _json_type_ok(v, sch):
                enum = isinstance(sch.get("enum"), list)
                raise ToolArgumentError("%s: argument %r must be %s, not %s" % (
                    sig, k, _type_text(sch), repr(v)[:80] if enum else type(v).__name__), tool=self.full,
                    reason="arguments")
            out[key] = v
        missing = [k for k, (key, sch, required) in known.items() if required and key not in out]
        if missing:
            raise ToolArgumentError("%s missing required argument%s: %s" % (
                sig, "s" if len(missing) > 1 else "", ", ".join(missing)), tool=self.full, reason="arguments")
        return out


def _make_functions(server_attr, module_name, t):
    def call(*args, **kwargs):
        try:
            arguments = t.arguments(server_attr, args, kwargs)
        except ToolArgumentError as e:
            raise e.with_traceback(None) from None
        return _tools.call_tool(t.full, arguments)

    async def call_async(*args, **kwargs):
        try:
            arguments = t.arguments(server_attr, args, kwargs)
        except ToolArgumentError as e:
            raise e.with_traceback(None) from None
        return await _tools.call_tool_async(t.full, arguments)

    sig = t.signature()
    doc = t.doc(server_attr)
    for fn, name in ((call, t.attr), (call_async, t.attr + "_async")):
        fn.__name__ = fn.__qualname__ = name
        fn.__module__ = module_name
        fn.__signature__ = sig
        fn.__doc__ = doc
    return call, call_async


class _ServerModule(types.ModuleType):
    """A server's module: its tools' functions; a name two tools share
    says so."""

    def __getattr__(self, name):
        shared = self.__dict__.get("_shared", {})
        if name in shared:
            raise AttributeError("%s: tools %s all map to %r: call them with pycell.call_tool(\"%s.TOOL\", "
                                 "{...})" % (self.__name__, " and ".join(repr(n) for n in shared[name]), name,
                                             self.__dict__["_server"]))
        raise AttributeError("%s has no tool %r that this run may call (help(%s) lists them)"
                             % (self.__name__, name, self.__name__.rsplit(".", 1)[1]))


def module(attr):
    """pycell.tools.<attr>: the module of the server it names."""
    cat = catalog()
    if attr in cat.modules:
        return cat.modules[attr]
    if attr in cat.shared:
        raise AttributeError("servers %s all map to pycell.tools.%s: call their tools with pycell.call_tool"
                             % (" and ".join(repr(s) for s in cat.shared[attr]), attr))
    server = cat.servers.get(attr)
    if server is None:
        raise AttributeError("pycell.tools has no server %r whose tools this run may call (servers: %s)"
                             % (attr, ", ".join(sorted(cat.servers)) or "none"))
    name = "pycell.tools." + attr
    m = _ServerModule(name)
    tools, shared = cat.functions[server]
    # an async twin's name that another tool has already is not made
    taken = set(tools) | set(shared)
    public = []
    summary = []
    for a in sorted(tools):
        t = tools[a]
        fn, afn = _make_functions(attr, name, t)
        setattr(m, a, fn)
        public.append(a)
        if a + "_async" not in taken:
            setattr(m, a + "_async", afn)
            public.append(a + "_async")
        summary.append("  " + t.summary())
    m._server = server
    m._shared = shared
    m.__all__ = public
    m.__doc__ = ("The tools of MCP server %r that this run may call, as functions (keyword arguments; "
                 "each has an async twin NAME_async):\n\n%s%s" % (
                     server, "\n".join(summary),
                     "\n\nNot functions (their names map to one): %s; use pycell.call_tool." % "; ".join(
                         " and ".join(v) for v in shared.values()) if shared else ""))
    cat.modules[attr] = m
    sys.modules[name] = m
    return m


def servers():
    return sorted(catalog().servers)


def search(query, limit=None):
    """Tools of every server whose name or description has every word of
    query (case-insensitive), as lines to read: 'memory.create_entities(*,
    entities: array) - Create multiple new entities ...'."""
    words = str(query).lower().split()
    cat = catalog()
    found = []
    for attr in sorted(cat.servers):
        tools, _ = cat.functions[cat.servers[attr]]
        for a in sorted(tools):
            t = tools[a]
            text = " ".join([t.full, a, str(t.spec.get("title") or ""),
                             str(t.spec.get("description") or "")]).lower()
            if all(w in text for w in words):
                found.append("%s.%s" % (attr, t.summary()))
    return found if limit is None else found[:max(int(limit), 0)]
