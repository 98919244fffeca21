"""Code mode (runtime/pycell/_codemode.py): each upstream server whose tools
a run may call is a module of functions, `from pycell.tools import memory`,
made from the tools/list the supervisor answers: keyword arguments from the
input schema, docstrings from the description and schemas, mistakes caught
in the jail before any call, async twins, names mapped predictably and
collisions refused, only the allowed tools there; and how a model finds
them (run_python's description, sandbox_info's servers,
pycell.tools.search).

Real parts: @modelcontextprotocol/server-memory and server-filesystem from
npm, and tests/tools/fake_mcp_server.py with FAKE_MCP_CODEMODE=1 (tools
whose names and schemas are the awkward ones)."""

import json
import textwrap

import pytest

from conftest import pycell_env
from test_tools import TOOLS_DIR, Tools, need_node_servers, out_lines
from test_warm import Mcp


@pytest.fixture
def tools(tmp_path):
    return Tools(tmp_path)


def codemode(tools, name="fake"):
    return tools.fake(name, env={"FAKE_MCP_CODEMODE": "1"})


def calls(tools):
    return [ln.split(" ", 1)[1] for ln in tools.lines("calls")]


def test_a_server_is_a_module_of_the_tools_the_policy_allows(tools):
    res = tools.run("""
        import pycell.tools as T
        from pycell.tools import fake
        print(T.servers(), "fake" in dir(T), "fake2" in dir(T))
        print(fake.__all__)
        print(fake.echo(text="hi"), fake.echo is T.fake.echo)
        for name in ("pid", "fake2"):
            try:
                getattr(fake if name == "pid" else T, name)
            except AttributeError as e:
                print("AttributeError:", e)
        try:
            from pycell.tools import fake2
        except ImportError as e:
            print("ImportError")
        import sys
        print(sys.modules["pycell.tools.fake"] is fake)
    """, allow=["fake.echo", "fake.big"], upstreams={"fake": tools.fake(), "fake2": tools.fake("fake2")})
    assert out_lines(res) == [
        "['fake'] True False",
        "['big', 'big_async', 'echo', 'echo_async']",
        "{'echo': 'hi'} True",
        "AttributeError: pycell.tools.fake has no tool 'pid' that this run may call (help(fake) lists them)",
        "AttributeError: pycell.tools has no server 'fake2' whose tools this run may call (servers: fake)",
        "ImportError",
        "True",
    ]
    # the allowlist still holds underneath: fake.pid is no function, and
    # calling it by name is denied by the supervisor
    assert calls(tools) == ['"echo"']


def test_names_map_predictably_and_collisions_are_refused(tools):
    res = tools.run("""
        import pycell
        from pycell.tools import fake
        print(fake.class_(from_="here", to_x=3))
        print(fake._2fa())
        for what in ("read_graph", "dup"):
            try:
                getattr(fake, what)() if what == "dup" else fake.read_graph
            except (AttributeError, TypeError) as e:
                print(type(e).__name__ + ":", e)
        print(pycell.call_tool("fake.read-graph"))
        print(fake.__doc__.splitlines()[-1])
    """, allow=["fake.*"], upstreams={"fake": codemode(tools)})
    assert out_lines(res) == [
        "{'tool': 'class', 'got': {'from': 'here', 'to-x': 3}}",
        "{'tool': '2fa', 'got': {}}",
        "AttributeError: pycell.tools.fake: tools 'read-graph' and 'read_graph' all map to 'read_graph': "
        "call them with pycell.call_tool(\"fake.TOOL\", {...})",
        "ToolArgumentError: fake.dup: the schema's properties 'a-b' and 'a_b' (both are a_b) map to one Python "
        "name; call it with pycell.call_tool('fake.dup', {...})",
        "{'tool': 'read-graph', 'got': {}}",
        "Not functions (their names map to one): read-graph and read_graph; use pycell.call_tool.",
    ]


TYPED_SIG = ("fake.typed(*, name: string, tags: array of string, count: integer = None, ratio: number = None, "
             "flag: boolean = None, opts: object = None, mode: one of 'fast', 'slow' = None, "
             "note: string | null = None)")


def test_mistakes_are_caught_in_the_jail_before_any_call(tools):
    res = tools.run("""
        import pycell
        from pycell.tools import fake
        bad = [((), dict(name=1, tags=[])), ((), dict(tags=[])), ((), dict(name="n", tags=[], bogus=1)),
               ((), dict(name="n", tags=[], mode="medium")), ((), dict(name="n", tags="a")),
               ((), dict(name="n", tags=[], count=True)), (("n",), dict(tags=[]))]
        for args, kw in bad:
            try:
                fake.typed(*args, **kw)
            except pycell.ToolArgumentError as e:
                print(isinstance(e, TypeError), isinstance(e, pycell.ToolError), e.tool, "|", e)
        print(fake.typed(name="n", tags=["a"], count=2.0, ratio=1, flag=False, mode="fast", note=None, opts={}))
        print(fake.open(known="k", other=1))
    """, allow=["fake.typed", "fake.open"], upstreams={"fake": codemode(tools)})
    lines = out_lines(res)
    head = "True True fake.typed | " + TYPED_SIG
    assert lines[:7] == [
        head + ": argument 'name' must be string, not int",
        head + " missing required argument: name",
        head + " got an unknown argument 'bogus'",
        head + ": argument 'mode' must be one of 'fast', 'slow', not 'medium'",
        head + ": argument 'tags' must be array of string, not str",
        head + ": argument 'count' must be integer, not bool",
        head + " takes keyword arguments only (1 positional given)",
    ]
    # an optional None is left out, unless the schema allows null
    assert lines[7:] == [
        "{'got': {'name': 'n', 'tags': ['a'], 'count': 2.0, 'ratio': 1, 'flag': False, 'mode': 'fast', "
        "'note': None, 'opts': {}}}",
        "{'tool': 'open', 'got': {'known': 'k', 'other': 1}}",
    ]
    # none of the seven reached the server
    assert calls(tools) == ['"typed"', '"open"']


def test_help_shows_signatures_and_docstrings(tools):
    res = tools.run("""
        import inspect, pydoc
        from pycell.tools import fake
        print(inspect.signature(fake.typed))
        print(fake.typed.__doc__)
        print("----")
        text = pydoc.render_doc(fake, renderer=pydoc.plaintext)
        print("typed(*, name: str, tags: list" in text, "echo_async(*, text: str)" in text,
              "Echo the text back" in text)
    """, allow=["fake.typed", "fake.echo"], upstreams={"fake": codemode(tools)})
    text = res["stdout"]
    assert res["status"] == "ok", res["stderr"]
    assert text == textwrap.dedent("""\
        (*, name: str, tags: list, count: int = 3, ratio: float = None, flag: bool = None, opts: dict = None, mode: Literal['fast', 'slow'] = None, note: str | None = None)
        Every JSON type.
        Second line.

        Parameters:
          name (string, required): a name
          tags (array of string, required)
          count (integer, optional, default 3)
          ratio (number, optional)
          flag (boolean, optional)
          opts (object, optional)
          mode (one of 'fast', 'slow', optional)
          note (string | null, optional)

        Returns: a dict (the tool's structured result): got (object)
        Async twin: fake.typed_async; MCP tool fake.typed.
        ----
        True True True
        """)


def test_async_twins_run_concurrently(tools):
    res = tools.run("""
        import asyncio, time
        from pycell.tools import fake
        async def main():
            t0 = time.monotonic()
            from pycell.tools import fake2
            a, b = await asyncio.gather(fake.slow_async(seconds=0.6), fake2.slow_async(seconds=0.6))
            print(a, b, "concurrent" if time.monotonic() - t0 < 1.1 else "serial")
            try:
                await fake.slow_async(seconds="x")
            except TypeError as e:
                print("TypeError:", e)
        asyncio.run(main())
    """, allow=["fake.slow", "fake2.slow"], upstreams={"fake": tools.fake(), "fake2": tools.fake("fake2")})
    assert out_lines(res) == [
        "slept slept concurrent",
        "TypeError: fake.slow(*, seconds: number = None): argument 'seconds' must be number, not str",
    ]


def test_the_memory_server_as_a_module(tools):
    """A real server: structured results (it declares output schemas),
    help from its schemas, and a required argument checked in the jail."""
    need_node_servers()
    res = tools.run("""
        import pycell
        from pycell.tools import memory
        print(sorted(n for n in memory.__all__ if not n.endswith("_async")))
        made = memory.create_entities(entities=[{"name": "ada", "entityType": "person",
                                                 "observations": ["wrote the first program"]}])
        print(made)
        print(memory.read_graph())
        print(memory.search_nodes(query="ada")["entities"][0]["name"])
        try:
            memory.create_entities()
        except pycell.ToolArgumentError as e:
            print(e)
        print(memory.create_entities.__doc__.splitlines()[0])
    """, allow=["memory.*"], upstreams={"memory": tools.memory()})
    assert out_lines(res) == [
        "['add_observations', 'create_entities', 'create_relations', 'delete_entities', 'delete_observations', "
        "'delete_relations', 'open_nodes', 'read_graph', 'search_nodes']",
        "{'entities': [{'name': 'ada', 'entityType': 'person', 'observations': ['wrote the first program']}]}",
        "{'entities': [{'name': 'ada', 'entityType': 'person', 'observations': ['wrote the first program']}], "
        "'relations': []}",
        "ada",
        "memory.create_entities(*, entities: array of object) missing required argument: entities",
        "Create multiple new entities in the knowledge graph",
    ]


EVERYTHING_JS = TOOLS_DIR / "node_modules/@modelcontextprotocol/server-everything/dist/index.js"


def test_the_everything_server_dashed_names_enums_and_both_kinds_of_result(tools):
    """@modelcontextprotocol/server-everything: tool names with dashes, an
    enum argument, a tool with an output schema (a dict back) and one
    without (its text back); the tools the policy leaves out are not there."""
    need_node_servers()
    if not EVERYTHING_JS.exists():
        pytest.skip("@modelcontextprotocol/server-everything is not installed (npm ci --prefix tests/tools)")
    res = tools.run("""
        import pycell
        from pycell.tools import everything
        print(sorted(n for n in everything.__all__ if not n.endswith("_async")))
        print(everything.get_sum(a=2, b=3.5))
        w = everything.get_structured_content(location="Chicago")
        print(sorted(w), type(w["temperature"]).__name__ in ("int", "float"))
        try:
            everything.get_structured_content(location="Paris")
        except pycell.ToolArgumentError as e:
            print(e)
        print(everything.get_structured_content.__doc__.splitlines()[-2])
        print(hasattr(everything, "get_env"), hasattr(everything, "trigger_sampling_request"))
    """, allow=["everything.get-sum", "everything.get-structured-content", "everything.echo"],
        upstreams={"everything": {"command": ["node", str(EVERYTHING_JS)]}})
    assert out_lines(res) == [
        "['echo', 'get_structured_content', 'get_sum']",
        "The sum of 2 and 3.5 is 5.5.",
        "['conditions', 'humidity', 'temperature'] True",
        "everything.get_structured_content(*, location: one of 'New York', 'Chicago', 'Los Angeles'): argument "
        "'location' must be one of 'New York', 'Chicago', 'Los Angeles', not 'Paris'",
        "Returns: a dict (the tool's structured result): temperature (number), conditions (string), "
        "humidity (number)",
        "False False",
    ]


def test_search_finds_tools_across_servers(tools):
    need_node_servers()
    res = tools.run("""
        import json, pycell
        print(json.dumps(pycell.tools.search("entities knowledge")))
        print(json.dumps(pycell.tools.search("echo")))
        print(pycell.tools.search("nothing like this"), len(pycell.tools.search("", limit=3)))
    """, allow=["memory.create_entities", "memory.delete_entities", "fake.echo"],
        upstreams={"memory": tools.memory(), "fake": tools.fake()})
    assert out_lines(res) == [
        json.dumps(["memory.create_entities(*, entities: array of object) - Create multiple new entities in the "
                    "knowledge graph",
                    "memory.delete_entities(*, entityNames: array of string) - Delete multiple entities and "
                    "their associated relations from the knowledge graph"]),
        json.dumps(["fake.echo(*, text: string) - Echo the text back"]),
        "[] 3",
    ]


def test_an_agent_that_reads_only_help_calls_a_server_it_has_not_seen(tools):
    """As a model would: knowing only that a server `filesystem` exists, it
    reads help(filesystem), finds two tools by their one-line summaries,
    and calls them with the arguments their signatures name."""
    need_node_servers()
    (tools.fsroot / "notes.txt").write_text("first line\nsecond line\n")
    res = tools.run("""
        import io, re, contextlib
        from pycell.tools import filesystem
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            help(filesystem)
        text = buf.getvalue()
        lines = [l.strip() for l in text.splitlines() if re.match(r"\\s+\\w+\\(", l)]
        def find(*words):
            return next(l for l in lines if all(w in l.lower() for w in words) and "deprecated" not in l.lower())
        listing = find("list", "allowed")
        reading = find("read", "text", "file")
        print(listing.split("(")[0], "|", reading.split(" - ")[0])
        root = filesystem.list_allowed_directories()
        root = root if isinstance(root, str) else root["content"]
        top = root.splitlines()[-1].strip()
        got = filesystem.read_text_file(path=top + "/notes.txt", head=1)
        print(got if isinstance(got, str) else got["content"])
    """, allow=["filesystem.*"], upstreams={"filesystem": tools.filesystem()})
    assert out_lines(res) == ["list_allowed_directories | read_text_file(*, path: string, tail: number = None, "
                              "head: number = None)", "first line"], res


def test_the_model_is_told_where_the_tools_are(tools):
    """run_python's description names the servers' modules and how to look
    inside them; sandbox_info lists each server with its module and how
    many of its tools the code may call."""
    cfg = tools.config({"fake": codemode(tools), "my-srv": tools.fake("my-srv")})
    pol = tools.policy(["fake.echo", "fake.typed", "my-srv.*", "fake.big"])
    s = Mcp(["--config", cfg, "--policy", pol], pycell_env())
    try:
        listed = s.call("tools/list", {})["tools"]
        desc = next(t for t in listed if t["name"] == "run_python")["description"]
        assert desc.endswith(
            "\n\nThe code may call the MCP tools this server allows, as Python functions in a module per "
            "server (fake, my_srv): `from pycell.tools import SERVER`, then `SERVER.TOOL(arg=...)`, which "
            "returns the tool's result as Python values. help(SERVER) lists its tools and their arguments; "
            "pycell.tools.search(\"words\") finds tools by name and description; sandbox_info lists the "
            "servers."), desc
        info = s.call("tools/call", {"name": "sandbox_info", "arguments": {}})["structuredContent"]
        assert info["servers"] == [{"name": "fake", "module": "fake", "tools": 3},
                                   {"name": "my-srv", "module": "my_srv", "tools": 10}], info["servers"]
        r = s.run("from pycell.tools import my_srv\nmy_srv.echo(text='via module')")
        assert r["return_value"] == {"echo": "via module"}
    finally:
        s.close()
