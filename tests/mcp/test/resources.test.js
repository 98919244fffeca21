// notifications/resources/list_changed: a client that refreshes its list
// of resources only when told (Gemini CLI offers read_mcp_resource for the
// URIs in its cached list) can read the files runs leave.  The v1 SDK on
// stdio and over Streamable HTTP (a 2025 session: the notification comes
// on the stream of the call that changed the list, before its result);
// the v2 client pinned to 2026-07-28, which hears it only on a
// subscriptions/listen stream, is not offered it.
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ResourceListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

import { connect, connectV2, startServe } from "./helpers.js";

const WRITE = "open('out.txt', 'w').write('hello')\n";

// Calls run_python with args, noting in `events` the notifications and
// the result in the order the client saw them.
async function watched(client, events, args) {
  const r = await client.callTool({ name: "run_python", arguments: args });
  events.push("result");
  return r;
}

async function settle() {
  await new Promise((res) => setTimeout(res, 250));
}

async function checkListChanged(client) {
  assert.deepEqual(client.getServerCapabilities().resources, { listChanged: true });
  const events = [];
  client.setNotificationHandler(ResourceListChangedNotificationSchema, () => events.push("list_changed"));
  // a run that leaves no file changes nothing
  await watched(client, events, { code: "print(1)" });
  await settle();
  assert.deepEqual(events, ["result"]);
  // one that writes a file adds a resource: told before its result
  events.length = 0;
  const r = await watched(client, events, { code: WRITE });
  await settle();
  assert.deepEqual(events, ["list_changed", "result"]);
  const link = r.content.find((c) => c.type === "resource_link");
  assert.ok(link, JSON.stringify(r.content));
  const listed = await client.listResources();
  assert.ok(listed.resources.some((x) => x.uri === link.uri), JSON.stringify(listed));
  assert.equal((await client.readResource({ uri: link.uri })).contents[0].text, "hello");
  // a session: a cell that writes, one that deletes (a change), then its close
  events.length = 0;
  const open = await client.callTool({ name: "session_open", arguments: {} });
  const sid = open.structuredContent.session_id;
  await watched(client, events, { session_id: sid, code: WRITE });
  await watched(client, events, { session_id: sid, code: "x = 1" });
  await watched(client, events, { session_id: sid, code: "import os\nos.remove('out.txt')" });
  await settle();
  assert.deepEqual(events, ["list_changed", "result", "result", "list_changed", "result"]);
  return { sid, events };
}

describe("resources/list_changed", () => {
  test("v1 SDK on stdio: told when a call adds or drops resources, and when a session closes", async () => {
    const s = await connect();
    try {
      const { sid, events } = await checkListChanged(s.client);
      // a session that holds no resource closes with no change; one that does, with one
      await s.client.callTool({ name: "session_close", arguments: { session_id: sid } });
      events.push("closed");
      const again = (await s.client.callTool({ name: "session_open", arguments: {} })).structuredContent.session_id;
      await watched(s.client, events, { session_id: again, code: WRITE });
      await s.client.callTool({ name: "session_close", arguments: { session_id: again } });
      events.push("closed");
      await settle();
      // on stdio the connection is told as the session's resources go
      assert.deepEqual(events.slice(5), ["closed", "list_changed", "result", "list_changed", "closed"]);
    } finally {
      await s.close();
    }
  });

  describe("v1 SDK over Streamable HTTP (2025-11-25)", () => {
    let srv;
    before(async () => {
      srv = await startServe();
    });
    after(async () => {
      assert.equal((await srv.stop()).code, 0);
    });

    test("told on the stream of the call that changed the list, before its result", async () => {
      const client = new Client({ name: "resources-test", version: "1" });
      await client.connect(new StreamableHTTPClientTransport(srv.url));
      try {
        await checkListChanged(client);
      } finally {
        await client.close();
      }
    });
  });

  test("v2 client pinned to 2026-07-28: offered, and sent only on a subscriptions/listen stream, never on a call's", async () => {
    const s = await connectV2();
    try {
      assert.deepEqual(s.client.getServerCapabilities().resources, { listChanged: true });
      const events = [];
      s.client.setNotificationHandler("notifications/resources/list_changed", () => events.push("list_changed"));
      await watched(s.client, events, { code: WRITE });
      await settle();
      assert.deepEqual(events, ["result"]);   // subscriptions.test.js: the stream that does carry it
    } finally {
      await s.close();
    }
  });
});
