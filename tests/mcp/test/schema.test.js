// Every message `pycell mcp` sends, checked against the schema.json of the
// protocol revision in use (tests/mcp/schema/, the specification's own
// files).  One scripted conversation per revision touches every kind of
// message pycell sends: the handshake or server/discover, empty results,
// tool lists, tool results (ok, error, timeout, bad arguments,
// sandbox_info), progress and log notifications, and the JSON-RPC errors.
import { test, describe } from "node:test";
import assert from "node:assert/strict";

import { startRaw, validator } from "./helpers.js";

const LEGACY = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
const MODERN = "2026-07-28";

// What each response must be, by the method of the request it answers.
const RESULT_OF = {
  initialize: "InitializeResult",
  ping: "EmptyResult",
  "logging/setLevel": "EmptyResult",
  "tools/list": "ListToolsResult",
  "tools/call": "CallToolResult",
  "server/discover": "DiscoverResult",
};
const NOTIFICATION_OF = {
  "notifications/progress": "ProgressNotification",
  "notifications/message": "LoggingMessageNotification",
};

// Checks every message against the revision's schema; returns the kinds seen.
function checkAll(version, messages, methods) {
  const v = validator(version);
  const older = validator("2025-11-25");
  const errName = v.has("JSONRPCErrorResponse") ? "JSONRPCErrorResponse" : "JSONRPCError";
  const resName = v.has("JSONRPCResultResponse") ? "JSONRPCResultResponse" : "JSONRPCResponse";
  const seen = new Set();
  for (const m of messages) {
    const where = `${version}: ${JSON.stringify(m).slice(0, 300)}`;
    if ("method" in m) {
      const name = NOTIFICATION_OF[m.method];
      assert.ok(name, `${where}: pycell sent an unexpected method`);
      assert.deepEqual(v.check(m, "ServerNotification"), [], where);
      assert.deepEqual(v.check(m, name), [], where);
      seen.add(name);
    } else if ("error" in m) {
      if (!("id" in m) && errName === "JSONRPCError") {
        // Before 2025-11-25 the schema makes "id" a required string or
        // number: it has no form for the answer to a message whose id
        // could not be read.  pycell leaves the id out, as 2025-11-25
        // and later (and both SDKs) have it; checked against that.
        assert.deepEqual(older.check(m, "JSONRPCErrorResponse"), [], where);
        seen.add("error without id");
        continue;
      }
      assert.deepEqual(v.check(m, "JSONRPCMessage"), [], where);
      assert.deepEqual(v.check(m, errName), [], where);
      if (m.error.code === -32022) {
        assert.deepEqual(v.check(m, "UnsupportedProtocolVersionError"), [], where);
        seen.add("UnsupportedProtocolVersionError");
      }
      seen.add("id" in m ? "error" : "error without id");
    } else {
      assert.deepEqual(v.check(m, "JSONRPCMessage"), [], where);
      assert.deepEqual(v.check(m, resName), [], where);
      const method = methods.get(JSON.stringify(m.id));
      assert.ok(method, `${where}: a response to no request`);
      assert.deepEqual(v.check(m.result, RESULT_OF[method]), [], where);
      seen.add(RESULT_OF[method]);
    }
  }
  return seen;
}

// The calls both eras make, and what pycell answers with.
const CALLS = [
  ["ok", { name: "run_python", arguments: { code: "import time\ntime.sleep(1.3)\nprint('out')\n6*7" } }, true],
  ["raise", { name: "run_python", arguments: { code: "raise ValueError('no')" } }],
  ["timeout", { name: "run_python", arguments: { code: "import time\ntime.sleep(9)", timeout_s: 0.5 } }],
  ["badargs", { name: "run_python", arguments: { code: 1 } }],
  ["info", { name: "sandbox_info", arguments: {} }],
  ["nosuchtool", { name: "nope", arguments: {} }],
];

async function converse(r, version, meta) {
  const methods = new Map();
  const ask = async (id, method, params = {}) => {
    methods.set(JSON.stringify(id), method);
    const p = meta ? { ...params, _meta: { ...meta, ...(params._meta || {}) } } : params;
    return r.request(id, method, p, 20000);
  };
  r.sendLine("{ not json");
  await r.next((m) => m.error && m.error.code === -32700);
  if (meta) {
    await ask("discover", "server/discover");
  } else {
    methods.set("0", "initialize");
    await r.initialize(version);
    await ask("ping", "ping");
    await ask("level", "logging/setLevel", { level: "debug" });
  }
  await ask("list", "tools/list");
  for (const [id, params, progress] of CALLS) {
    const p = progress ? { ...params, _meta: { progressToken: `tok-${id}` } } : params;
    await ask(id, "tools/call", p);
  }
  await ask("nomethod", "no/such/method");
  r.send({ jsonrpc: "2.0", id: { bad: 1 }, method: "tools/list" });
  await r.next((m) => m.error && m.error.code === -32600);
  return methods;
}

// Every message pycell wrote, in order (the helper hands them out once).
async function drain(r) {
  const all = [];
  for (;;) {
    try {
      all.push(await r.next(() => true, 300));
    } catch {
      return all;
    }
  }
}

// startRaw keeps messages until asked for; collect them as they come.
function recording(r) {
  const log = [];
  const next = r.next.bind(r);
  r.next = async (pred, ms) => {
    const m = await next(pred, ms);
    log.push(m);
    return m;
  };
  return log;
}

describe("every message validates against the schema of its revision", () => {
  for (const version of LEGACY) {
    test(`${version} (initialize)`, async () => {
      const r = startRaw();
      try {
        const log = recording(r);
        const methods = await converse(r, version, null);
        log.push(...(await drain(r)));
        const seen = checkAll(version, log, methods);
        for (const kind of ["InitializeResult", "EmptyResult", "ListToolsResult", "CallToolResult",
                            "ProgressNotification", "LoggingMessageNotification", "error", "error without id"])
          assert.ok(seen.has(kind), `${version}: no ${kind} was checked`);
      } finally {
        r.kill();
      }
    });
  }

  test(`${MODERN} (per-request _meta)`, async () => {
    const r = startRaw();
    try {
      const log = recording(r);
      const meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": { name: "schema-test", version: "1" },
        "io.modelcontextprotocol/logLevel": "debug",
      };
      const methods = await converse(r, MODERN, meta);
      const bad = { ...meta, "io.modelcontextprotocol/protocolVersion": "2099-01-01" };
      methods.set('"old"', "tools/list");
      await r.request("old", "tools/list", { _meta: bad });
      await r.request("ping", "ping", { _meta: meta });
      log.push(...(await drain(r)));
      const seen = checkAll(MODERN, log, methods);
      for (const kind of ["DiscoverResult", "ListToolsResult", "CallToolResult", "ProgressNotification",
                          "LoggingMessageNotification", "UnsupportedProtocolVersionError", "error",
                          "error without id"])
        assert.ok(seen.has(kind), `${MODERN}: no ${kind} was checked`);
    } finally {
      r.kill();
    }
  });

  test("the check is not vacuous: results without what 2026-07-28 requires are refused", async () => {
    const v = validator(MODERN);
    const r = startRaw();
    try {
      const meta = { "io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {} };
      const list = (await r.request(1, "tools/list", { _meta: meta })).result;
      assert.deepEqual(v.check(list, "ListToolsResult"), []);
      for (const key of ["resultType", "ttlMs", "cacheScope"]) {
        const { [key]: _, ...without } = list;
        assert.notDeepEqual(v.check(without, "ListToolsResult"), [], `${key} is required`);
      }
      const call = (await r.request(2, "tools/call", { name: "run_python", arguments: { code: "1" }, _meta: meta })).result;
      assert.deepEqual(v.check(call, "CallToolResult"), []);
      const { resultType: _, ...bare } = call;
      assert.notDeepEqual(v.check(bare, "CallToolResult"), []);
      // and an older revision's schema refuses a tool without inputSchema
      const old = validator("2024-11-05");
      const { inputSchema: __, ...tool } = list.tools[0];
      assert.notDeepEqual(old.check({ tools: [tool] }, "ListToolsResult"), []);
    } finally {
      r.kill();
    }
  });
});

test("the Tasks extension's messages validate against its schema (and 2026-07-28's)", async () => {
  const core = validator(MODERN);
  const ext = validator("ext-tasks");
  const r = startRaw();
  try {
    const meta = {
      "io.modelcontextprotocol/protocolVersion": MODERN,
      "io.modelcontextprotocol/clientCapabilities": { extensions: { "io.modelcontextprotocol/tasks": {} } },
    };
    const disc = (await r.request(1, "server/discover", { _meta: meta })).result;
    assert.deepEqual(core.check(disc, "DiscoverResult"), []);
    assert.deepEqual(disc.capabilities.extensions, { "io.modelcontextprotocol/tasks": {} });
    const created = await r.request(2, "tools/call",
      { name: "run_python", arguments: { code: "import time\ntime.sleep(1.6)\n6*7" }, _meta: meta });
    assert.deepEqual(core.check(created, "JSONRPCResultResponse"), []);
    assert.deepEqual(ext.check(created.result, "CreateTaskResult"), []);
    assert.equal(created.result.resultType, "task");
    const id = created.result.taskId;
    const working = (await r.request(3, "tasks/get", { taskId: id, _meta: meta })).result;
    assert.deepEqual(ext.check(working, "GetTaskResult"), []);
    assert.equal(working.status, "working");
    let done;
    for (let i = 0; i < 100 && (done = (await r.request(10 + i, "tasks/get", { taskId: id, _meta: meta })).result)
      .status === "working"; i++)
      await new Promise((res) => setTimeout(res, 100));
    assert.equal(done.status, "completed");
    assert.deepEqual(ext.check(done, "GetTaskResult"), []);
    assert.deepEqual(core.check(done.result, "CallToolResult"), []);
    assert.equal(done.result.structuredContent.return_value, 42);
    const upd = (await r.request(200, "tasks/update", { taskId: id, inputResponses: {}, _meta: meta })).result;
    assert.deepEqual(ext.check(upd, "UpdateTaskResult"), []);
    const cancel = (await r.request(201, "tasks/cancel", { taskId: id, _meta: meta })).result;
    assert.deepEqual(ext.check(cancel, "CancelTaskResult"), []);
    // and the check is not vacuous
    const { taskId: _, ...noId } = done;
    assert.notDeepEqual(ext.check(noId, "GetTaskResult"), []);
  } finally {
    r.kill();
  }
});
