"""pycell: the in-jail runtime.

Importable in every run (PYTHONPATH points at the read-only runtime
directory).  Kept import-light: submodules load only what they use.
"""

# Tool calls (pycell.tools) load on first use, so that a run that calls no
# tool does not pay for json, socket and threading.
_TOOL_NAMES = frozenset({
    "call_tool", "list_tools", "get_tool_schema", "search_tools",
    "call_tool_async", "list_tools_async", "get_tool_schema_async", "search_tools_async",
    "call_mcp_tool", "discover_mcp_tools",
    "ToolError", "ToolDenied", "ToolTimeout", "ToolNotFound", "ToolChannelError", "ToolArgumentError",
})


def display(*objs):
    """Show images in the result of this run or cell: matplotlib figures,
    objects with _repr_png_ (PIL images...), or PNG bytes.  Figures that a
    cell leaves open are shown without it."""
    from . import _cell
    _cell.display(*objs)


def __getattr__(name):
    if name == "tools":   # pycell.tools.search(...), pycell.tools.SERVER
        import importlib  # not `from . import tools`: that asks this function again
        return importlib.import_module(__name__ + ".tools")
    if name in _TOOL_NAMES:
        from . import tools
        return getattr(tools, name)
    raise AttributeError("module 'pycell' has no attribute %r" % (name,))


def __dir__():
    return sorted(set(globals()) | _TOOL_NAMES | {"tools"})
