// The MCP lifecycle and the protocol surface of `pycell mcp`, through the
// official SDK client and, for what the SDK does not let a client choose,
// on raw pipes.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { LoggingMessageNotificationSchema, McpError } from "@modelcontextprotocol/sdk/types.js";

import { connect, startRaw, TOOLS } from "./helpers.js";

describe("initialize", () => {
  let s;
  before(async () => {
    s = await connect();
  });
  after(() => s.close());

  test("server info, capabilities and instructions", () => {
    const info = s.client.getServerVersion();
    assert.equal(info.name, "pycell");
    assert.match(info.version, /^\d+\.\d+\.\d+/);
    const caps = s.client.getServerCapabilities();
    assert.deepEqual(caps.tools, { listChanged: false });
    assert.deepEqual(caps.logging, {});
    assert.deepEqual(caps.resources, { listChanged: true });   // resources.test.js
    assert.equal(caps.prompts, undefined);
    assert.match(s.client.getInstructions(), /run_python/);
  });

  test("ping", async () => {
    assert.deepEqual(await s.client.ping(), {});
  });

  test("a call over the message cap fails at once with its id (it hung until the SDK's timeout)", async () => {
    const t0 = Date.now();
    await assert.rejects(
      s.client.callTool({ name: "run_python", arguments: { code: "#" + "x".repeat(5 << 20) } }, undefined,
        { timeout: 30000 }),
      (e) => e instanceof McpError && e.code === -32600 && /too large/.test(e.message));
    assert.ok(Date.now() - t0 < 10000, `took ${Date.now() - t0} ms`);
    assert.deepEqual(await s.client.ping(), {});
  });
});

describe("protocol version negotiation", () => {
  for (const v of ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]) {
    test(`a client asking for ${v} gets ${v}`, async () => {
      const r = startRaw();
      try {
        const res = await r.initialize(v);
        assert.equal(res.result.protocolVersion, v);
        assert.equal(res.result.serverInfo.name, "pycell");
        const list = await r.request(1, "tools/list");
        const tool = list.result.tools.find((t) => t.name === "run_python");
        // what each version knows about tools
        assert.equal("outputSchema" in tool, v >= "2025-06-18");
        assert.equal("title" in tool, v >= "2025-06-18");
        assert.equal("annotations" in tool, v >= "2025-03-26");
        assert.equal(res.result.serverInfo.title !== undefined, v >= "2025-06-18");
      } finally {
        r.kill();
      }
    });
  }

  test("an unknown version gets the latest supported one", async () => {
    const r = startRaw();
    try {
      const res = await r.initialize("1999-01-01");
      assert.equal(res.result.protocolVersion, "2025-11-25");
    } finally {
      r.kill();
    }
  });

  test("structuredContent only from 2025-06-18 on", async () => {
    for (const [v, want] of [["2025-03-26", false], ["2025-06-18", true]]) {
      const r = startRaw();
      try {
        await r.initialize(v);
        const res = await r.request(1, "tools/call", { name: "run_python", arguments: { code: "6 * 7" } }, 30000);
        assert.equal(res.result.isError, false, JSON.stringify(res));
        assert.equal("structuredContent" in res.result, want);
        assert.match(res.result.content[0].text, /return_value ---\n42\n/);
      } finally {
        r.kill();
      }
    }
  });

  test("requests other than ping before initialize are refused", async () => {
    const r = startRaw();
    try {
      const ping = await r.request(1, "ping");
      assert.deepEqual(ping.result, {});
      const list = await r.request(2, "tools/list");
      assert.equal(list.error.code, -32600);
      assert.match(list.error.message, /initialize/);
      await r.initialize();
      const again = await r.request(3, "initialize", {
        protocolVersion: "2025-11-25",
        capabilities: {},
        clientInfo: { name: "raw", version: "1" },
      });
      assert.equal(again.error.code, -32600);
      const ok = await r.request(4, "tools/list");
      assert.equal(ok.result.tools.length, TOOLS.length);
    } finally {
      r.kill();
    }
  });

  test("batches: answered as one array in 2025-03-26, refused from 2025-06-18 on", async () => {
    let r = startRaw();
    try {
      await r.initialize("2025-03-26");
      r.send([
        { jsonrpc: "2.0", id: "a", method: "ping" },
        { jsonrpc: "2.0", method: "notifications/initialized" },
        { jsonrpc: "2.0", id: "b", method: "tools/call", params: { name: "run_python", arguments: { code: "1 + 1" } } },
        { jsonrpc: "2.0", id: "c", method: "nope" },
      ]);
      const batch = await r.next((m) => Array.isArray(m), 30000);
      const byId = Object.fromEntries(batch.map((m) => [m.id, m]));
      assert.equal(batch.length, 3);
      assert.deepEqual(byId.a.result, {});
      assert.match(byId.b.result.content[0].text, /\n2\n/);
      assert.equal(byId.c.error.code, -32601);
    } finally {
      r.kill();
    }
    r = startRaw();
    try {
      await r.initialize("2025-06-18");
      r.send([{ jsonrpc: "2.0", id: "a", method: "ping" }]);
      const err = await r.next((m) => m.error);
      assert.equal(err.error.code, -32600);
      assert.equal("id" in err, false);
      assert.deepEqual((await r.request(5, "ping")).result, {});
    } finally {
      r.kill();
    }
  });
});

describe("tools/list", () => {
  let s;
  let tools;
  before(async () => {
    s = await connect();
    tools = (await s.client.listTools()).tools;
  });
  after(() => s.close());

  test("run_python: schemas and annotations", () => {
    const t = tools.find((x) => x.name === "run_python");
    assert.ok(t, "run_python is listed");
    assert.match(t.description, /notebook cell/);
    assert.equal(t.inputSchema.type, "object");
    assert.deepEqual(t.inputSchema.required, ["code"]);
    assert.deepEqual(Object.keys(t.inputSchema.properties).sort(), ["code", "files", "max_output_bytes", "session_id", "stdin", "timeout_s", "variables"]);
    assert.equal(t.inputSchema.properties.code.type, "string");
    assert.equal(t.inputSchema.properties.variables.type, "object");
    assert.equal(t.inputSchema.properties.timeout_s.type, "number");
    // the portable subset (no additionalProperties): the server refuses unknown arguments itself
    assert.equal(t.inputSchema.additionalProperties, undefined);
    assert.equal(t.outputSchema.type, "object");
    for (const k of ["status", "stdout", "stderr", "return_value", "exit_code", "duration_ms"])
      assert.ok(t.outputSchema.required.includes(k), `outputSchema requires ${k}`);
    assert.equal(t.annotations.readOnlyHint, false);
    assert.equal(t.annotations.idempotentHint, false);
    assert.equal(t.annotations.destructiveHint, false);
    // the default policy allows neither tool calls nor a network
    assert.equal(t.annotations.openWorldHint, false);
  });

  test("sandbox_info: read-only, no arguments", () => {
    const t = tools.find((x) => x.name === "sandbox_info");
    assert.ok(t);
    assert.deepEqual(t.inputSchema.properties, {});
    // closed, so that strict-mode converters (OpenAI Agents') take it as it is
    assert.equal(t.inputSchema.additionalProperties, false);
    assert.equal(t.annotations.readOnlyHint, true);
    assert.equal(t.annotations.openWorldHint, false);
    assert.ok(t.outputSchema.required.includes("python_version"));
  });

  test("the session tools: session_list takes no arguments, and says so", () => {
    const t = tools.find((x) => x.name === "session_list");
    assert.ok(t);
    assert.deepEqual(t.inputSchema, { type: "object", properties: {}, additionalProperties: false });
    assert.equal(t.annotations.readOnlyHint, true);
  });

  test("a cursor that this server did not hand out is an invalid param", async () => {
    await assert.rejects(s.client.listTools({ cursor: "bogus" }), (e) => e instanceof McpError && e.code === -32602);
  });
});

test("tools/list pages follow nextCursor", async () => {
  // --tools-page-size exists to test clients' paging: one tool per page
  const r = startRaw(["--tools-page-size", "1"]);
  try {
    await r.initialize();
    const names = [];
    let cursor;
    for (let i = 1; i <= TOOLS.length; i++) {
      const p = await r.request(i, "tools/list", cursor ? { cursor } : undefined);
      assert.equal(p.result.tools.length, 1);
      names.push(p.result.tools[0].name);
      cursor = p.result.nextCursor;
      assert.equal(typeof cursor, i < TOOLS.length ? "string" : "undefined");
    }
    assert.deepEqual(names, TOOLS);
  } finally {
    r.kill();
  }
});

describe("logging", () => {
  test("logging/setLevel: {} and then messages at that level", async () => {
    const s = await connect();
    try {
      const got = [];
      s.client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => got.push(n.params));
      assert.deepEqual(await s.client.setLoggingLevel("info"), {});
      await s.client.callTool({ name: "run_python", arguments: { code: "pass" } });
      assert.ok(got.some((m) => m.level === "info" && m.logger === "pycell" && /run \d+: ok/.test(m.data)),
        JSON.stringify(got));
      assert.ok(got.every((m) => m.level !== "debug"));
    } finally {
      await s.close();
    }
  });

  test("an unknown level is an invalid param", async () => {
    const s = await connect();
    try {
      await assert.rejects(s.client.setLoggingLevel("loud"), (e) => e.code === -32602);
    } finally {
      await s.close();
    }
  });
});
