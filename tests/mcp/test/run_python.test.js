// run_python and sandbox_info through the official SDK client.  The SDK
// checks every structuredContent against the tool's outputSchema.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";

import { McpError } from "@modelcontextprotocol/sdk/types.js";

import { connect, startRaw, text } from "./helpers.js";

describe("run_python", () => {
  let s;
  before(async () => {
    s = await connect();
  });
  after(() => s.close());

  const run = (args, opts) => s.client.callTool({ name: "run_python", arguments: args }, undefined, opts);

  test("happy path: stdout, the last expression, the text block", async () => {
    const r = await run({ code: 'print("hello")\nx = 6\nx * 7' });
    assert.equal(r.isError, false, text(r));
    const sc = r.structuredContent;
    assert.equal(sc.status, "ok");
    assert.equal(sc.exit_code, 0);
    assert.equal(sc.signal, null);
    assert.equal(sc.stdout, "hello\n");
    assert.equal(sc.return_value, 42);
    assert.deepEqual(sc.truncated, { stdout: false, stderr: false });
    assert.ok(sc.duration_ms > 0 && sc.duration_ms < 20000);
    const t = text(r);
    assert.match(t, /^status: ok/);
    assert.match(t, /--- stdout ---\nhello\n/);
    assert.match(t, /--- return_value ---\n42\n/);
  });

  test("an exception: isError, status error, the traceback without pycell's frames", async () => {
    const r = await run({ code: "def f(d):\n    return 1 / d\n\nf(0)" });
    assert.equal(r.isError, true);
    const sc = r.structuredContent;
    assert.equal(sc.status, "error");
    assert.equal(sc.exit_code, 1);
    assert.equal(sc.return_value, null);
    assert.match(sc.stderr, /^Traceback \(most recent call last\):\n {2}File "<cell>", line 4, in <module>\n/m);
    assert.match(sc.stderr, /File "<cell>", line 2, in f\n {4}return 1 \/ d\n/);
    assert.match(sc.stderr, /ZeroDivisionError: division by zero\n$/);
    assert.doesNotMatch(sc.stderr, /_cell\.py|pycell\/_cell/);
    assert.match(text(r), /--- stderr ---\n(.|\n)*ZeroDivisionError/);
  });

  test("a syntax error names the line of the cell", async () => {
    const r = await run({ code: "x = 1\ny = (\n" });
    assert.equal(r.isError, true);
    assert.equal(r.structuredContent.status, "error");
    assert.match(r.structuredContent.stderr, /File "<cell>", line 2/);
    assert.match(r.structuredContent.stderr, /SyntaxError/);
  });

  test("sys.exit keeps its status", async () => {
    const r = await run({ code: "import sys\nprint('bye')\nsys.exit(3)" });
    assert.equal(r.isError, true);
    assert.equal(r.structuredContent.status, "error");
    assert.equal(r.structuredContent.exit_code, 3);
    assert.equal(r.structuredContent.stdout, "bye\n");
    assert.equal(r.structuredContent.stderr, "");
  });

  test("timeout_s kills a run that does not end", async () => {
    const t0 = Date.now();
    const r = await run({ code: "while True:\n    pass", timeout_s: 1 });
    const ms = Date.now() - t0;
    assert.equal(r.isError, true);
    assert.equal(r.structuredContent.status, "timeout");
    assert.ok(r.structuredContent.duration_ms >= 1000, `duration ${r.structuredContent.duration_ms}`);
    assert.ok(ms < 5000, `took ${ms} ms`);
    assert.match(text(r), /^status: timeout: killed at the time limit of 1 s/);
  });

  test("variables become globals, with their JSON types", async () => {
    const r = await run({
      code: "[type(a).__name__, type(b).__name__, type(c).__name__, d is None, a + len(b), c['k']]",
      variables: { a: 2, b: [1, "x", true], c: { k: "v" }, d: null },
    });
    assert.equal(r.isError, false, text(r));
    assert.deepEqual(r.structuredContent.return_value, ["int", "list", "dict", true, 5, "v"]);
  });

  test("variables are the globals of __main__", async () => {
    const r = await run({ code: "import __main__\n__main__.n * 2, __name__", variables: { n: 21 } });
    assert.deepEqual(r.structuredContent.return_value, [42, "__main__"]);
  });

  test("return_value: JSON when it can be, a typed stand-in when JSON has no type for it, else the repr", async () => {
    const cases = [
      ["{'a': [1, 2.5, None, True]}", { a: [1, 2.5, null, true] }],
      ["'text'", "text"],
      ["{3, 1, 2}", { $type: "set", length: 3, items: [1, 2, 3] }],
      ["frozenset()", { $type: "frozenset", length: 0, items: [] }],
      ["float('nan')", { $type: "float", value: "nan" }],
      ["[1.5, float('-inf')]", [1.5, { $type: "float", value: "-inf" }]],
      ["b'ab'", { $type: "bytes", length: 2, base64: "YWI=" }],
      ["bytearray(b'\\x00')", { $type: "bytearray", length: 1, base64: "AA==" }],
      ["1 + 2j", { $type: "complex", real: 1, imag: 2 }],
      ["import datetime\ndatetime.date(2026, 7, 28)", { $type: "date", value: "2026-07-28" }],
      ["import datetime\ndatetime.timedelta(minutes=1.5)", { $type: "timedelta", seconds: 90 }],
      ["import decimal\ndecimal.Decimal('1.10')", { $type: "decimal", value: "1.10" }],
      ["x = 1", null],
      ["print('only output')", null],
      ["None", null],
      ["(1, (2, 3))", [1, [2, 3]]],
      ["{True: 1, None: 2, 1.5: 3, 4: 4}", { true: 1, null: 2, "1.5": 3, 4: 4 }],
      ["import collections\ncollections.OrderedDict(b=1, a=2)", { b: 1, a: 2 }],
      ["'caf\u00e9 \u2603'", "caf\u00e9 \u2603"],
      ["2**100", { $type: "int", value: "1267650600228229401496703205376" }],
      // what the supervisor's JSON parser cannot take comes back as the repr
      ["{1: 'a', '1': 'b'}", "{1: 'a', '1': 'b'}"],
      ["'a\\x00b'", "'a\\x00b'"],
      ["'\\udc80'", "'\\udc80'"],
      ["float('inf')", { $type: "float", value: "inf" }],
      ["x = []\nx.append(x)\nx", "[[...]]"],
      ["class C:\n    def __repr__(self):\n        raise ValueError\nC()", "<C object: repr() failed: ValueError>"],
    ];
    for (const [code, want] of cases) {
      const r = await run({ code });
      assert.equal(r.isError, false, `${code}: ${text(r)}`);
      assert.deepEqual(r.structuredContent.return_value, want, code);
    }
  });

  test("a huge return value comes back shortened", async () => {
    const r = await run({ code: "'x' * (4 << 20)" });
    assert.equal(r.isError, false, text(r));
    const v = r.structuredContent.return_value;
    assert.equal(typeof v, "string");
    assert.ok(v.length < (2 << 20), `length ${v.length}`);
    assert.match(v, /truncated, \d+ characters in all\]$/);
  });

  test("top-level await works like in a notebook", async () => {
    const r = await run({ code: "import asyncio\nasync def f():\n    await asyncio.sleep(0)\n    return 7\nawait f()" });
    assert.equal(r.isError, false, text(r));
    assert.equal(r.structuredContent.return_value, 7);
  });

  test("stdin is the program's standard input", async () => {
    const r = await run({ code: "import sys\nsys.stdin.read().splitlines()", stdin: "line one\nline two\n" });
    assert.equal(r.isError, false, text(r));
    assert.deepEqual(r.structuredContent.return_value, ["line one", "line two"]);
  });

  test("without stdin, input() sees EOF", async () => {
    const r = await run({ code: "input()" });
    assert.equal(r.isError, true);
    assert.match(r.structuredContent.stderr, /EOFError/);
  });

  test("non-UTF-8 output stays valid JSON", async () => {
    const r = await run({ code: "import sys\nsys.stdout.buffer.write(b'a\\xffb\\n')" });
    assert.equal(r.structuredContent.stdout, "a\ufffdb\n");
  });

  test("invalid arguments are tool errors with a message to act on", async () => {
    const cases = [
      [{}, /missing the required argument "code"/],
      [{ code: 5 }, /"code" must be a string/],
      [{ code: "1", variables: [1] }, /"variables" must be an object/],
      [{ code: "1", variables: { "1x": 1 } }, /"1x" is not a valid Python identifier/],
      [{ code: "1", stdin: 3 }, /"stdin" must be a string/],
      [{ code: "1", timeout_s: "soon" }, /"timeout_s" must be a number/],
      [{ code: "1", timeout_s: 0 }, /greater than 0/],
      [{ code: "1", timeout_s: 100000 }, /above this server's limit of \d+ s/],
      [{ code: "1", colour: "red" }, /unknown argument "colour"/],
    ];
    for (const [args, re] of cases) {
      const r = await run(args);
      assert.equal(r.isError, true, JSON.stringify(args));
      assert.equal(r.structuredContent, undefined);
      assert.match(text(r), re);
      assert.match(text(r), /^Invalid arguments for run_python: /);
    }
  });

  test("an unknown tool is a protocol error (-32602)", async () => {
    await assert.rejects(s.client.callTool({ name: "run_ruby", arguments: {} }),
      (e) => e instanceof McpError && e.code === -32602 && /Unknown tool/.test(e.message));
  });

  test("a refused name cut in the message keeps whole characters (it was an empty result)", async () => {
    const name = "1" + "a".repeat(62) + "é";
    const r = await run({ code: "1", variables: { [name]: 1 } });
    assert.equal(r.isError, true);
    assert.equal(text(r), `Invalid arguments for run_python: variables: "1${"a".repeat(62)}" is not a valid Python identifier`);
  });

  test("a NUL in stdout keeps the rest of the text block (it was cut there)", async () => {
    const r = await run({ code: 'import sys\nsys.stdout.write("a\\0b\\n")\nsys.stderr.write("err\\n")\n7' });
    assert.equal(r.isError, false, text(r));
    assert.equal(r.structuredContent.stdout, "a\u0000b\n");
    assert.match(text(r), /--- stdout ---\na\u0000b\n\n--- stderr ---\nerr\n\n--- return_value ---\n7\n$/);
  });

  test("a NUL in stdout in a 2025-03-26 session, where the text is all there is (it was lost)", async () => {
    const r = startRaw();
    try {
      await r.initialize("2025-03-26");
      r.send({ jsonrpc: "2.0", id: 1, method: "tools/call",
        params: { name: "run_python", arguments: { code: 'print("x\\0y")\nprint("after")' } } });
      const res = await r.response(1, 20000);
      assert.equal(res.result.structuredContent, undefined);
      assert.match(res.result.content[0].text, /--- stdout ---\nx\u0000y\nafter\n$/);
    } finally {
      r.kill();
    }
  });

  test("\\u0000 in code, stdin and variables is valid JSON and reaches Python (it was a parse error with id null)", async () => {
    const r = await run({ code: "import sys\nd = sys.stdin.read()\n[len(d), d.count(chr(0)), len(v), v.index(chr(0)), s == chr(0)]",
      stdin: "a\u0000b", variables: { v: "xy\u0000z", s: "\u0000" } }, { timeout: 20000 });
    assert.equal(r.isError, false, text(r));
    assert.deepEqual(r.structuredContent.return_value, [3, 1, 4, 2, true]);
  });

  test("a number beyond 64 bits in variables reaches Python as an int (it was a parse error with id null)", async () => {
    // JavaScript writes 2**64 as 18446744073709552000, an integer token past 64 bits
    const r = await run({ code: "type(x).__name__ + ' ' + str(x)", variables: { x: 2 ** 64 } });
    assert.equal(r.isError, false, text(r));
    assert.equal(r.structuredContent.return_value, "int 18446744073709552000");
  });
});

describe("sandbox_info", () => {
  let s;
  before(async () => {
    s = await connect();
  });
  after(() => s.close());

  test("python version, backend, policy, limits, tools", async () => {
    const r = await s.client.callTool({ name: "sandbox_info", arguments: {} });
    assert.equal(r.isError, false, text(r));
    const sc = r.structuredContent;
    assert.match(sc.python_version, /^3\.\d+\.\d+$/);
    assert.equal(sc.python_implementation, "cpython");
    assert.equal(sc.backend, "native");
    assert.equal(typeof sc.policy, "string");
    assert.ok(sc.limits.timeout && sc.limits.memory, JSON.stringify(sc.limits));
    assert.equal(sc.network, "loopback"); // the default policy: the jail's own loopback
    assert.deepEqual(sc.tools, []);
    assert.deepEqual(JSON.parse(text(r)), sc);
    // the version is asked once, then cached
    const again = await s.client.callTool({ name: "sandbox_info", arguments: {} });
    assert.equal(again.structuredContent.python_version, sc.python_version);
  });

  test("the version matches what code in the sandbox sees", async () => {
    const info = (await s.client.callTool({ name: "sandbox_info", arguments: {} })).structuredContent;
    const r = await s.client.callTool({ name: "run_python", arguments: { code: "import platform\nplatform.python_version()" } });
    assert.equal(r.structuredContent.return_value, info.python_version);
  });

  test("arguments are refused", async () => {
    const r = await s.client.callTool({ name: "sandbox_info", arguments: { verbose: true } });
    assert.equal(r.isError, true);
    assert.match(text(r), /takes no arguments/);
  });

});

describe("tool calls from the jail (upstream servers in the config)", () => {
  let s;
  let dir;
  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "pycell-mcp-"));
    const fake = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../tools/fake_mcp_server.py");
    writeFileSync(path.join(dir, "pycell.conf"), JSON.stringify({
      upstreams: { fake: { command: ["/usr/bin/python3", fake], env: { FAKE_MCP_STATE: dir, FAKE_MCP_NAME: "fake" } } },
      audit_log: path.join(dir, "audit.log"),
    }));
    writeFileSync(path.join(dir, "policy.json"), JSON.stringify({ extends: "default", tools: { allow: ["fake.echo"] } }));
    s = await connect(["--config", path.join(dir, "pycell.conf"), "--policy", path.join(dir, "policy.json")]);
  });
  after(async () => {
    await s.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test("the policy's tools: open world, listed by sandbox_info, callable from code", async () => {
    const { tools } = await s.client.listTools();
    const rp = tools.find((t) => t.name === "run_python");
    assert.equal(rp.annotations.openWorldHint, true);
    assert.match(rp.description, /in a module per server \(fake\): `from pycell\.tools import SERVER`/);
    // the upstream lists its tools a moment after the server starts
    let info;
    for (let i = 0; i < 50; i++) {
      info = (await s.client.callTool({ name: "sandbox_info", arguments: {} })).structuredContent;
      if (info.tools.length) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.deepEqual(info.tools.map((t) => t.name), ["fake.echo"]);
    assert.deepEqual(info.servers, [{ name: "fake", module: "fake", tools: 1 }]);
    const r = await s.client.callTool({ name: "run_python", arguments: {
      code: "import pycell\nfrom pycell.tools import fake\n[pycell.call_tool('fake.echo', {'text': 'hi'}), fake.echo(text='ho')]" } });
    assert.equal(r.isError, false, text(r));
    assert.deepEqual(r.structuredContent.return_value, [{ echo: "hi" }, { echo: "ho" }]);
    assert.equal(r.structuredContent.tool_calls.count, 2);
  });
});

// An upstream MCP server that takes a while to start (as the npm ones do,
// about half a second): sandbox_info and pycell.list_tools() answer once
// it has listed its tools, never with fewer tools than a call can reach
// (they listed none for that half second while calls already succeeded).
describe("upstream tools while their server starts", () => {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const fake = path.resolve(here, "../../tools/fake_mcp_server.py");
  let dir;
  let args;
  before(() => {
    dir = mkdtempSync(path.join(tmpdir(), "pycell-mcp-slow-"));
    writeFileSync(path.join(dir, "pycell.conf"), JSON.stringify({
      upstreams: { fake: { command: ["/usr/bin/python3", fake], env: { FAKE_MCP_START_DELAY: "1.5" } } },
      audit_log: path.join(dir, "audit.log"),
    }));
    writeFileSync(path.join(dir, "slow.json"), JSON.stringify({ extends: "default", tools: { allow: ["fake.*"] } }));
    args = ["--config", path.join(dir, "pycell.conf"), "--policy", path.join(dir, "slow.json")];
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  test("sandbox_info right after the start lists them", async () => {
    const s = await connect(args);
    try {
      const r = await s.client.callTool({ name: "sandbox_info", arguments: {} });
      const names = r.structuredContent.tools.map((t) => t.name);
      assert.ok(names.includes("fake.echo"), JSON.stringify(names));
    } finally {
      await s.close();
    }
  });

  test("pycell.list_tools() in the first run lists them", async () => {
    const s = await connect(args);
    try {
      const r = await s.client.callTool({ name: "run_python", arguments: {
        code: "import pycell\nsorted(t['name'] for t in pycell.list_tools())" } });
      assert.equal(r.isError, false, text(r));
      assert.ok(r.structuredContent.return_value.includes("fake.echo"), JSON.stringify(r.structuredContent));
    } finally {
      await s.close();
    }
  });
});
