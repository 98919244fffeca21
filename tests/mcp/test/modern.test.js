// Protocol 2026-07-28 on stdio, driven by the official v2 client
// (@modelcontextprotocol/client) pinned to that revision and in auto mode,
// and on raw pipes for what a client does not show: the era of a
// connection, the errors of the revision, per-request log levels.
import { test, describe } from "node:test";
import assert from "node:assert/strict";

import { alive, connectV2, descendants, startRaw, waitFor, TOOLS } from "./helpers.js";

const V = "2026-07-28";
const META = { "io.modelcontextprotocol/protocolVersion": V, "io.modelcontextprotocol/clientCapabilities": {} };
const sleepCode = (s) => `import time\ntime.sleep(${s})`;

for (const mode of [{ pin: V }, "auto"]) {
  const name = typeof mode === "string" ? mode : `pinned to ${V}`;
  describe(`v2 client, ${name}`, () => {
    test("negotiates the modern era: list (cacheable, in order) and call", async () => {
      const s = await connectV2([], mode);
      try {
        assert.equal(s.client.getProtocolEra(), "modern");
        assert.equal(s.client.getServerVersion().name, "pycell");
        const list = await s.client.listTools();
        assert.deepEqual(list.tools.map((t) => t.name), TOOLS);
        assert.equal(list.ttlMs, 300000);
        assert.equal(list.cacheScope, "public");
        const r = await s.client.callTool({ name: "run_python", arguments: { code: "print('hi')\n6*7" } });
        assert.equal(r.isError, false);
        assert.equal(r.structuredContent.return_value, 42);
        assert.equal(r.structuredContent.stdout, "hi\n");
        const info = await s.client.callTool({ name: "sandbox_info", arguments: {} });
        assert.match(info.structuredContent.python_version, /^3\.\d+\.\d+$/);
      } finally {
        await s.close();
      }
    });

    test("50 calls with progress: no unknown token", async () => {
      const s = await connectV2([], mode);
      const errors = [];
      s.client.onerror = (e) => errors.push(String(e));
      try {
        for (let i = 0; i < 50; i += 8) {
          const batch = [];
          for (let j = i; j < Math.min(i + 8, 50); j++)
            batch.push(s.client.callTool({ name: "run_python", arguments: { code: String(j) } }, { onprogress: () => {} })
              .then((r) => assert.equal(r.structuredContent.return_value, j)));
          await Promise.all(batch);
        }
        await new Promise((res) => setTimeout(res, 200));
        assert.deepEqual(errors, []);
      } finally {
        await s.close();
      }
    });

    test("cancel: the jail is gone", async () => {
      const s = await connectV2([], mode);
      try {
        const ac = new AbortController();
        let started;
        const startedP = new Promise((resolve) => (started = resolve));
        const call = s.client.callTool({ name: "run_python", arguments: { code: sleepCode(60) } },
          { signal: ac.signal, onprogress: (p) => p.message === "started" && started() });
        await startedP;
        const jail = await waitFor(() => {
          const d = descendants(s.pid);
          return d.length >= 2 ? d : null;
        }, 5000, "the jail's processes");
        ac.abort("test cancels");
        await assert.rejects(call);
        await waitFor(() => jail.every((p) => !alive(p)), 10000, `jail processes ${jail} to end`);
        assert.deepEqual(descendants(s.pid), []);
      } finally {
        await s.close();
      }
    });
  });
}

describe("2026-07-28 on raw pipes", () => {
  test("server/discover names the versions, capabilities and server", async () => {
    const r = startRaw();
    try {
      const res = (await r.request(1, "server/discover", { _meta: META })).result;
      assert.deepEqual(res.supportedVersions, [V, "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]);
      assert.deepEqual(res.capabilities, { tools: { listChanged: false }, logging: {}, resources: { listChanged: true },
        extensions: { "io.modelcontextprotocol/tasks": {} } });
      assert.equal(res.resultType, "complete");
      assert.equal(res._meta["io.modelcontextprotocol/serverInfo"].name, "pycell");
      assert.equal(res.ttlMs, 300000);
      assert.equal(res.cacheScope, "public");
    } finally {
      r.kill();
    }
  });

  test("an unsupported version gets -32022 with the supported ones, and the connection stays open to 2026", async () => {
    const r = startRaw();
    try {
      const bad = { ...META, "io.modelcontextprotocol/protocolVersion": "2099-01-01" };
      const e = await r.request(1, "tools/list", { _meta: bad });
      assert.equal(e.error.code, -32022);
      assert.equal(e.error.data.requested, "2099-01-01");
      assert.ok(e.error.data.supported.includes(V));
      // a 2025 version named in _meta is not served without initialize
      const e2 = await r.request(2, "tools/list", { _meta: { ...META, "io.modelcontextprotocol/protocolVersion": "2025-11-25" } });
      assert.equal(e2.error.code, -32022);
      // neither failure picked an era: initialize still works
      const init = await r.initialize();
      assert.equal(init.result.protocolVersion, "2025-11-25");
    } finally {
      r.kill();
    }
  });

  test("what the revision requires or removed, with exact codes", async () => {
    const r = startRaw();
    try {
      assert.equal((await r.request(1, "tools/list", { _meta: META })).result.resultType, "complete");
      const noCaps = await r.request(2, "tools/list", { _meta: { "io.modelcontextprotocol/protocolVersion": V } });
      assert.equal(noCaps.error.code, -32602);
      assert.match(noCaps.error.message, /clientCapabilities/);
      const noMeta = await r.request(3, "tools/list", {});
      assert.equal(noMeta.error.code, -32602);
      assert.match(noMeta.error.message, /protocolVersion/);
      const badLevel = await r.request(4, "tools/list", { _meta: { ...META, "io.modelcontextprotocol/logLevel": "loud" } });
      assert.equal(badLevel.error.code, -32602);
      assert.equal((await r.request(5, "ping", { _meta: META })).error.code, -32601);
      assert.equal((await r.request(6, "logging/setLevel", { level: "debug", _meta: META })).error.code, -32601);
      const init = await r.request(7, "initialize", { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "x", version: "1" } });
      assert.equal(init.error.code, -32600);
      assert.match(init.error.message, /2026-07-28/);
      r.send([{ jsonrpc: "2.0", id: 8, method: "tools/list", params: { _meta: META } }]);
      const batch = await r.next((m) => m.error && !("id" in m));
      assert.equal(batch.error.code, -32600);
      assert.equal((await r.request(9, "tools/list", { _meta: META })).result.tools.length, TOOLS.length);
    } finally {
      r.kill();
    }
  });

  test("notifications/message only for a request that names a log level, on that request", async () => {
    const r = startRaw();
    try {
      const call = (id, meta) => r.request(id, "tools/call", { name: "run_python", arguments: { code: "1" }, _meta: meta }, 20000);
      await call(1, META);
      await assert.rejects(r.next((m) => m.method === "notifications/message", 300));
      await call(2, { ...META, "io.modelcontextprotocol/logLevel": "info" });
      const logs = [];
      for (;;) {
        try {
          logs.push((await r.next((m) => m.method === "notifications/message", 300)).params);
        } catch {
          break;
        }
      }
      assert.deepEqual(logs.map((l) => l.level), ["info", "info"]);
      assert.match(logs[0].data, /^run 2 started$/);
      assert.match(logs[1].data, /^run 2: ok in \d+ ms$/);
      await call(3, { ...META, "io.modelcontextprotocol/logLevel": "error" });
      await assert.rejects(r.next((m) => m.method === "notifications/message", 300));
    } finally {
      r.kill();
    }
  });

  test("a 2025 session ignores 2026 keys in _meta and keeps ping", async () => {
    const r = startRaw();
    try {
      await r.initialize("2025-06-18");
      const list = (await r.request(1, "tools/list", { _meta: META })).result;
      assert.equal("resultType" in list, false);
      assert.deepEqual((await r.request(2, "ping")).result, {});
    } finally {
      r.kill();
    }
  });
});
