// Sessions that pause, resume and fork (issue 37), through the official
// clients: the v2 client pinned to 2026-07-28 over HTTP (`pycell serve`)
// and the v1 SDK over stdio (2025-11-25), each with a state directory and a
// policy whose sessions pause after 1 s idle.  The SDKs check every
// structuredContent against the tool's outputSchema (tools/list first), so
// a resumed cell's `session.resumed`, `paused_s` and `not_kept`, session_fork's
// result and sandbox_info's `servers` and `preload` are held to the schemas
// the server lists; the resumed cell's progress is checked whole, in order.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { mkdtempSync, rmSync, writeFileSync, chmodSync, readdirSync } from "node:fs";
import os from "node:os";
import path from "node:path";

import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

import { assertTickProgress, connect, startServe, tickCode, waitFor } from "./helpers.js";

// a frame, a function and a class of the cell's own, a module; and a socket,
// which cannot be kept and is named
const STATE = "import json\nimport socket\nrows = [{'a': i, 'b': i * i} for i in range(5)]\n" +
  "def f(x):\n    return x + 1\nclass P:\n    def __init__(self, v):\n        self.v = v\n" +
  "p = P(40)\nconn = socket.socket()\nx = f(p.v)";
const CHECK = "[x, f(1), p.v, sum(r['b'] for r in rows), json.dumps([1]), 'conn' in globals()]";
const EXPECT = [41, 2, 40, 30, "[1]", false];

function setup() {
  const dir = mkdtempSync(path.join(os.tmpdir(), "pycell-persist-"));
  chmodSync(dir, 0o755);
  const conf = path.join(dir, "pycell.conf");
  writeFileSync(conf, JSON.stringify({ state_dir: path.join(dir, "state") }));
  const pol = path.join(dir, "persist.json");
  writeFileSync(pol, JSON.stringify({ extends: "default", sessions: { idle_timeout: "1s" } }));
  chmodSync(pol, 0o644);
  return { dir, args: ["--config", conf, "--policy", pol] };
}

const snapshots = (dir) => {
  try {
    return readdirSync(path.join(dir, "state", "sessions")).sort();
  } catch {
    return [];
  }
};

// callTool(client, params, onprogress): the v1 SDK takes (params,
// resultSchema, options), the v2 client (params, options)
const callV1 = (client, params, onprogress) => client.callTool(params, undefined, { onprogress });
const callV2 = (client, params, onprogress) => client.callTool(params, { onprogress });

async function checkPauseResumeFork(client, dir, callTool) {
  const call = async (name, args) => {
    const r = await client.callTool({ name, arguments: args });
    assert.equal(r.isError, false, JSON.stringify(r));
    return r.structuredContent;
  };
  const id = (await call("session_open", {})).session_id;
  assert.equal((await call("run_python", { session_id: id, code: STATE })).status, "ok");

  // a fork of the live session: a session of its own with the same state,
  // which diverges while the original stays as it was
  const forked = await call("session_fork", { session_id: id });
  assert.notEqual(forked.session_id, id);
  assert.equal(forked.forked_from, id);
  assert.deepEqual(forked.not_kept, [{ name: "conn", why: "socket (socket)" }]);
  const fid = forked.session_id;
  const inFork = await call("run_python", { session_id: fid, code: `x = 0\n${CHECK}` });
  assert.deepEqual(inFork.return_value, [0, 2, 40, 30, "[1]", false]);
  assert.equal(inFork.session.id, fid);

  // idle for its timeout: paused to the state directory, its jail gone
  await waitFor(async () => {
    const listed = await call("session_list", {});
    const s = listed.sessions.find((x) => x.session_id === id);
    return s && s.paused && !s.busy;
  }, 20000, "the session to pause");
  assert.ok(snapshots(dir).includes(`${id}.json`) && snapshots(dir).includes(`${id}.snap`), snapshots(dir));

  // its next cell resumes it: the state as it was, what was not kept named,
  // and every progress notification of the resumed cell, in order
  const seen = [];
  const r = await callTool(client, { name: "run_python", arguments: { session_id: id, code: tickCode + CHECK } },
    (p) => seen.push(p));
  assertTickProgress(seen);
  const st = r.structuredContent;
  assert.equal(st.status, "ok", JSON.stringify(st));
  assert.equal(st.stdout, "tick 0\ntick 1\ntick 2\n");
  assert.deepEqual(st.return_value, EXPECT);
  assert.equal(st.session.resumed, true);
  assert.equal(st.session.id, id);
  assert.equal(st.session.cell, 2);
  assert.ok(st.session.paused_s >= 0);
  assert.deepEqual(st.session.not_kept, [{ name: "conn", why: "socket (socket)" }]);
  assert.ok(st.warnings.some((w) => w.startsWith("the session was paused ") && w.includes("not kept: conn")),
    JSON.stringify(st.warnings));
  // the snapshot goes once the resumed cell was answered; the next cell is a plain one
  await waitFor(() => !snapshots(dir).includes(`${id}.snap`), 5000, "the snapshot to go");
  const plain = await call("run_python", { session_id: id, code: "x + 1" });
  assert.equal(plain.return_value, 42);
  assert.equal(plain.session.resumed, undefined);
  for (const s of [id, fid]) await call("session_close", { session_id: s });
  assert.deepEqual(snapshots(dir), []);
}

describe("v2 client pinned to 2026-07-28, over HTTP", () => {
  let srv, dir, client;
  before(async () => {
    const s = setup();
    dir = s.dir;
    srv = await startServe(s.args);
    client = new Client({ name: "persist-v2", version: "1" }, { versionNegotiation: { mode: { pin: "2026-07-28" } } });
    await client.connect(new StreamableHTTPClientTransport(new URL("/mcp", srv.url)));
    assert.equal(client.getProtocolEra(), "modern");
    await client.listTools();
  });
  after(async () => {
    await client?.close();
    await srv?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test("sandbox_info's servers and preload, as the schema says", async () => {
    const info = (await client.callTool({ name: "sandbox_info", arguments: {} })).structuredContent;
    assert.deepEqual(info.servers, []);
    assert.deepEqual(info.preload, { loaded: [], failed: {} });
  });

  test("a session forks, pauses when idle and resumes at its next cell", async () => {
    await checkPauseResumeFork(client, dir, callV2);
  });
});

describe("v1 SDK, 2025-11-25, over stdio", () => {
  let s, dir;
  before(async () => {
    const st = setup();
    dir = st.dir;
    s = await connect(st.args);
  });
  after(async () => {
    await s?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test("a session forks, pauses when idle and resumes at its next cell", async () => {
    await checkPauseResumeFork(s.client, dir, callV1);
  });
});
