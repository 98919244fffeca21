// Sessions (issue 14) as an agent uses them, through the official clients:
// the v1 SDK (2025 revisions, initialize), the v2 client pinned to
// 2026-07-28 (no protocol session at all: the handle is the state) and the
// v2 client in the legacy era.  Each
// checks every structuredContent against the tool's outputSchema.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { Client as Client2, StreamableHTTPClientTransport as Transport2 } from "@modelcontextprotocol/client";

import { connect, connectV2, descendants, startServe } from "./helpers.js";

const CSV = "city,temp\nOslo,3\nRome,14\nCairo,24\n";

for (const [era, open] of [
  ["v1 SDK, 2025-11-25", () => connect()],
  ["v2 client pinned to 2026-07-28", () => connectV2()],
  ["v2 client, legacy era", () => connectV2([], "legacy")],
]) {
  describe(era, () => {
    test("open a session, load a CSV, compute from cell 1's frame in cell 2, plot, write and read a file, close", async () => {
      const s = await open();
      let last;
      const call = async (name, args) => {
        const r = await s.client.callTool({ name, arguments: args });
        assert.equal(r.isError, false, JSON.stringify(r));
        last = r;
        return r.structuredContent;
      };
      try {
        const opened = await call("session_open", {});
        const id = opened.session_id;
        assert.match(id, /^[0-9a-f]{32}$/);
        const c1 = await call("run_python", {
          session_id: id,
          code: "import pandas as pd\ndf = pd.read_csv('cities.csv')\nlen(df)",
          files: [{ path: "cities.csv", text: CSV }],
        });
        assert.equal(c1.status, "ok");
        assert.equal(c1.return_value, 3);
        assert.deepEqual(c1.session, { id, cell: 1, alive: true });
        const c2 = await call("run_python", {
          session_id: id,
          code: "mean = df['temp'].mean()\ndf[df.temp > mean].to_csv('warm.csv', index=False)\n" +
            "import matplotlib.pyplot as plt\nplt.bar(df.city, df.temp)\nprint(mean)\nfloat(mean)",
        });
        assert.equal(c2.stdout, "13.666666666666666\n");
        assert.equal(c2.return_value, 13.666666666666666);
        // the figure left open comes back as PNG image content
        const images = last.content.filter((c) => c.type === "image");
        assert.equal(images.length, 1, JSON.stringify(last.content.map((c) => c.type)));
        assert.equal(images[0].mimeType, "image/png");
        const png = Buffer.from(images[0].data, "base64");
        assert.deepEqual([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
        assert.deepEqual(c2.images, [{ mime_type: "image/png", source: "figure 1", bytes: png.length }]);
        // the file it wrote, as a resource_link, read back with resources/read
        const uri = `pycell://sessions/${id}/files/warm.csv`;
        assert.deepEqual(c2.files, [{ path: "warm.csv", size: 27, mime_type: "text/csv", uri }]);
        const links = last.content.filter((c) => c.type === "resource_link");
        assert.deepEqual(links.map((l) => [l.uri, l.name, l.mimeType, l.size]), [[uri, "warm.csv", "text/csv", 27]]);
        const read = await s.client.readResource({ uri });
        assert.deepEqual(read.contents, [{ uri, mimeType: "text/csv", text: "city,temp\nRome,14\nCairo,24\n" }]);
        const all = await s.client.listResources();
        assert.ok(all.resources.some((r) => r.uri === uri && r.size === 27), JSON.stringify(all));
        const c3 = await call("run_python", { session_id: id, code: "open('warm.csv').read()" });
        assert.equal(c3.return_value, "city,temp\nRome,14\nCairo,24\n");
        assert.deepEqual(c3.session, { id, cell: 3, alive: true });
        assert.equal(c3.files, undefined);
        assert.equal(c3.images, undefined);
        const listed = await call("session_list", {});
        assert.deepEqual(listed.sessions.map((x) => [x.session_id, x.cells, x.busy]), [[id, 3, false]]);
        // a cell's output as it is printed, in the client's progress callback
        const seen = [];
        const params = { name: "run_python", arguments: { session_id: id,
          code: "import time\nfor i in range(3):\n    print('step', i, flush=True)\n    time.sleep(0.4)" } };
        const opts = { onprogress: (p) => seen.push(p.message ?? "") };
        // the v1 SDK takes (params, resultSchema, options), the v2 client (params, options)
        const live = await (era.startsWith("v1") ? s.client.callTool(params, undefined, opts)
          : s.client.callTool(params, opts));
        assert.equal(live.structuredContent.stdout, "step 0\nstep 1\nstep 2\n");
        const told = seen.filter((m) => m.includes("output:")).map((m) => m.split("output:\n")[1]).join("");
        assert.ok(told.includes("step 0\n") && told.includes("step 1\n"), JSON.stringify(seen));
        assert.deepEqual(await call("session_close", { session_id: id }), { session_id: id, cells: 4 });
        // its files go with it
        await assert.rejects(s.client.readResource({ uri }), /Resource not found/);
        const gone = await s.client.callTool({ name: "run_python", arguments: { session_id: id, code: "df" } });
        assert.equal(gone.isError, true);
        assert.match(gone.content[0].text, /^run_python: no such session/);
        // the session's jail is gone with it (the warm pool's jails aside)
        const deadline = Date.now() + 5000;
        let left;
        while ((left = descendants(s.pid)).length && Date.now() < deadline)
          await new Promise((r) => setTimeout(r, 50));
        assert.deepEqual(left, []);
      } finally {
        await s.close();
      }
    });
  });
}

// sessions.shared_memory: the sessions share one memory cgroup and the
// server holds each to limits.memory.  Through every client, over stdio and
// Streamable HTTP: the result's limits say who holds what (the SDKs check
// them against run_python's outputSchema), a cell that holds more ends as
// memory_limit with its session, and the handle is gone after it.
const sharedPolicy = (() => {
  const dir = mkdtempSync(path.join(tmpdir(), "pycell-shared-"));
  const file = path.join(dir, "shared.json");
  writeFileSync(file, JSON.stringify({ extends: "default", limits: { memory: "64M" },
    sessions: { shared_memory: "1G" } }));
  return file;
})();
after(() => rmSync(path.dirname(sharedPolicy), { recursive: true, force: true }));

async function overTheLimit(callTool) {
  const call = async (args) => (await callTool({ name: "run_python", arguments: args }));
  const opened = await callTool({ name: "session_open", arguments: {} });
  assert.equal(opened.isError, false, JSON.stringify(opened));
  const id = opened.structuredContent.session_id;
  const first = (await call({ session_id: id, code: "x = 1" })).structuredContent;
  assert.equal(first.status, "ok");
  const limits = Object.fromEntries(first.limits.map((l) => [l.name, l]));
  assert.deepEqual(limits.memory_bytes, { name: "memory_bytes", value: 64 << 20, enforced_by: "supervisor" });
  assert.equal(limits.shared_memory_bytes.value, 1 << 30);
  assert.ok(["cgroup1", "cgroup2"].includes(limits.shared_memory_bytes.enforced_by), JSON.stringify(limits));
  const t0 = Date.now();
  const over = await call({ session_id: id, code: "b = bytearray(256 << 20)\nimport time\ntime.sleep(20)" });
  assert.ok(Date.now() - t0 < 5000, `took ${Date.now() - t0} ms`);
  assert.equal(over.structuredContent.status, "memory_limit", JSON.stringify(over.structuredContent));
  assert.deepEqual(over.structuredContent.session, { id, cell: 2, alive: false });
  assert.equal(over.structuredContent.warnings.filter((w) =>
    w.includes("more than its memory limit of 67108864 (held by the supervisor")).length, 1);
  const gone = await call({ session_id: id, code: "x" });
  assert.equal(gone.isError, true);
  assert.match(gone.content[0].text, /^run_python: no such session/);
}

describe("sessions that share a memory cgroup", () => {
  for (const [era, open] of [
    ["v1 SDK, 2025-11-25", () => connect(["--policy", sharedPolicy])],
    ["v2 client pinned to 2026-07-28", () => connectV2(["--policy", sharedPolicy])],
    ["v2 client, legacy era", () => connectV2(["--policy", sharedPolicy], "legacy")],
  ]) {
    test(`over stdio with the ${era}: a session past its limit ends as memory_limit`, async () => {
      const s = await open();
      try {
        await overTheLimit((p) => s.client.callTool(p));
      } finally {
        await s.close();
      }
    });
  }

  for (const [name, connectHttp] of [
    ["v1 SDK (2025-11-25, session)", async (url) => {
      const client = new Client({ name: "shared-v1", version: "1" });
      await client.connect(new StreamableHTTPClientTransport(url));
      return client;
    }],
    ["v2 client pinned to 2026-07-28", async (url) => {
      const client = new Client2({ name: "shared-v2", version: "1" },
        { versionNegotiation: { mode: { pin: "2026-07-28" } } });
      await client.connect(new Transport2(url));
      return client;
    }],
  ]) {
    test(`over Streamable HTTP with the ${name}: a session past its limit ends as memory_limit`, async () => {
      const srv = await startServe(["--policy", sharedPolicy]);
      try {
        const client = await connectHttp(srv.url);
        try {
          await client.listTools();
          await overTheLimit((p) => client.callTool(p));
        } finally {
          await client.close();
        }
      } finally {
        const { code } = await srv.stop();
        assert.equal(code, 0, srv.stderr());
      }
    });
  }
});
