// subscriptions/listen (2026-07-28): how a client of that revision hears
// that its list of resources changed.  Over stdio and over HTTP (the
// stream is the POST's SSE response): the acknowledgement first, with
// only what the server agreed to; notifications/resources/list_changed
// when a run of the same client keeps a file, each carrying the listen
// request's id as io.modelcontextprotocol/subscriptionId; nothing for a
// filter that did not ask, or for another token's runs; the stream ends
// when the client cancels it, and with its result when `pycell serve`
// drains.  Every message is checked against 2026-07-28's schema.json.
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

import { sleep, startRaw, startServe, validator } from "./helpers.js";

const V = "2026-07-28";
const META = { "io.modelcontextprotocol/protocolVersion": V, "io.modelcontextprotocol/clientCapabilities": {} };
const SUB = "io.modelcontextprotocol/subscriptionId";
const schema = validator(V);
const writeFile = { name: "run_python", arguments: { code: "open('kept.txt', 'w').write('x')" }, _meta: META };
const ALL = { resourcesListChanged: true, toolsListChanged: true, promptsListChanged: true,
  resourceSubscriptions: ["pycell://runs/x/files/y"] };

function valid(msg, name) {
  assert.deepEqual(schema.check(msg, name), [], `${name}: ${JSON.stringify(msg)}`);
}

const of = (id) => (m) => m.params?._meta?.[SUB] === id;

describe("subscriptions/listen over stdio", () => {
  let r;
  before(() => {
    r = startRaw();
  });
  after(() => r.kill());

  test("server/discover says resources.listChanged", async () => {
    const d = await r.request(1, "server/discover", { _meta: META });
    assert.equal(d.result.capabilities.resources.listChanged, true);
  });

  test("acknowledged with only what it tells, then told of a kept file, each with the stream's id", async () => {
    r.send({ jsonrpc: "2.0", id: "L1", method: "subscriptions/listen", params: { _meta: META, notifications: ALL } });
    const ack = await r.next(of("L1"));
    valid(ack, "SubscriptionsAcknowledgedNotification");
    assert.equal(ack.method, "notifications/subscriptions/acknowledged");
    assert.deepEqual(ack.params.notifications, { resourcesListChanged: true });
    const call = await r.request(2, "tools/call", writeFile);
    assert.equal(call.result.isError, false);
    const changed = await r.next(of("L1"));
    valid(changed, "ResourceListChangedNotification");
    assert.equal(changed.method, "notifications/resources/list_changed");
  });

  test("a filter that does not ask hears nothing", async () => {
    r.send({ jsonrpc: "2.0", id: "L2", method: "subscriptions/listen", params: { _meta: META, notifications: {} } });
    const ack = await r.next(of("L2"));
    assert.deepEqual(ack.params.notifications, {});
    await r.request(3, "tools/call", writeFile);
    await r.next(of("L1"));   // the first stream hears of it ...
    await sleep(300);
    await assert.rejects(r.next(of("L2"), 200));   // ... this one does not
  });

  test("cancelled by the client: no response, nothing more, and its id is free again", async () => {
    r.send({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: "L1" } });
    r.send({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: "L2" } });
    await r.request(4, "tools/call", writeFile);
    await sleep(300);
    await assert.rejects(r.next((m) => m.id === "L1" || of("L1")(m), 200));
    r.send({ jsonrpc: "2.0", id: "L1", method: "subscriptions/listen",
      params: { _meta: META, notifications: { resourcesListChanged: true } } });
    valid(await r.next(of("L1")), "SubscriptionsAcknowledgedNotification");
  });

  test("a filter that is not an object, or a flag that is not a boolean, is invalid params", async () => {
    const a = await r.request(5, "subscriptions/listen", { _meta: META });
    assert.equal(a.error.code, -32602);
    assert.match(a.error.message, /"notifications"/);
    const b = await r.request(6, "subscriptions/listen", { _meta: META, notifications: { resourcesListChanged: "yes" } });
    assert.equal(b.error.code, -32602);
    assert.deepEqual(b.error.data, { key: "resourcesListChanged" });
  });

  test("a 2025 session has no subscriptions/listen", async () => {
    const s = startRaw();
    try {
      await s.initialize();
      const x = await s.request(1, "subscriptions/listen", { notifications: { resourcesListChanged: true } });
      assert.equal(x.error.code, -32601);
    } finally {
      s.kill();
    }
  });
});

// An SSE response read as it comes: its events' JSON, in order.
function sseReader(body) {
  const events = [];
  const waiters = [];
  let buf = "";
  let ended = false;
  (async () => {
    const dec = new TextDecoder();
    for await (const chunk of body) {
      buf += dec.decode(chunk, { stream: true });
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const block = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trim()).join("\n");
        if (data) events.push(JSON.parse(data));
        for (const w of waiters.splice(0)) w();
      }
    }
    ended = true;
    for (const w of waiters.splice(0)) w();
  })().catch(() => {
    ended = true;
  });
  return {
    events,
    get ended() {
      return ended;
    },
    async next(pred, ms = 10000) {
      const deadline = Date.now() + ms;
      for (;;) {
        const i = events.findIndex(pred);
        if (i >= 0) return events.splice(i, 1)[0];
        if (ended || Date.now() > deadline) throw new Error(`no matching event (ended: ${ended})`);
        await new Promise((resolve) => {
          const t = setTimeout(resolve, Math.max(1, deadline - Date.now()));
          waiters.push(() => {
            clearTimeout(t);
            resolve();
          });
        });
      }
    },
  };
}

describe("subscriptions/listen over Streamable HTTP, with tokens", () => {
  let srv, dir;
  const sha = (t) => createHash("sha256").update(t).digest("hex");
  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "pycell-listen-"));
    const tokens = path.join(dir, "tokens.json");
    writeFileSync(tokens, JSON.stringify({ tokens: [{ name: "alice", sha256: sha("token-alice") },
      { name: "bob", sha256: sha("token-bob") }] }), { mode: 0o600 });
    srv = await startServe(["--tokens", tokens]);
  });
  after(async () => {
    await srv.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  const post = (token, body) => fetch(new URL("/mcp", srv.url), {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream",
      Authorization: `Bearer ${token}`, "Mcp-Protocol-Version": V, "Mcp-Method": body.method,
      ...(body.params?.name ? { "Mcp-Name": body.params.name } : {}) },
    body: JSON.stringify(body),
  });

  test("a token's stream hears of its own runs, not another token's; a drain ends it with its result", async () => {
    const listen = (token, id) => post(token, { jsonrpc: "2.0", id, method: "subscriptions/listen",
      params: { _meta: META, notifications: { resourcesListChanged: true } } });
    const ra = await listen("token-alice", 7);
    const rb = await listen("token-bob", 8);
    assert.equal(ra.status, 200);
    assert.match(ra.headers.get("content-type"), /^text\/event-stream/);
    const a = sseReader(ra.body);
    const b = sseReader(rb.body);
    valid(await a.next(of(7)), "SubscriptionsAcknowledgedNotification");
    valid(await b.next(of(8)), "SubscriptionsAcknowledgedNotification");

    const call = await post("token-alice", { jsonrpc: "2.0", id: 1, method: "tools/call", params: writeFile });
    assert.equal(call.status, 200);
    await call.text();
    valid(await a.next(of(7)), "ResourceListChangedNotification");
    await sleep(300);
    await assert.rejects(b.next(of(8), 200));   // bob's list did not change

    srv.proc.kill("SIGTERM");   // the drain ends both streams with their result
    for (const [s, id] of [[a, 7], [b, 8]]) {
      const end = await s.next((m) => m.id === id);
      valid(end, "SubscriptionsListenResultResponse");
      assert.equal(end.result._meta[SUB], id);
    }
    const { code } = await srv.stop();
    assert.equal(code, 0);
  });
});
