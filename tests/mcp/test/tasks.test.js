// The Tasks extension (io.modelcontextprotocol/tasks, 2026-07-28) driven by
// its official requester, @modelcontextprotocol/ext-tasks, over the v2
// client pinned to 2026-07-28 against `pycell serve`.  The v2 client's own
// codecs do not carry task-shaped results, so ext-tasks sends tools/call
// and tasks/* through a host-owned raw dispatch: here, one POST per
// request with the headers 2026-07-28 asks for, its answer read from JSON
// or from the SSE stream.
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";

import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { createTaskSessionFromClient, resultFromTaskOutcome } from "@modelcontextprotocol/ext-tasks/client";

import { descendants, startServe, waitFor } from "./helpers.js";

const VERSION = "2026-07-28";
const TASKS = "io.modelcontextprotocol/tasks";
const clientInfo = { name: "pycell-tasks-test", version: "1" };

// The answer to request `id` in a response body: JSON, or the SSE event
// that carries it (progress and log notifications come first).
function answerIn(contentType, body, id) {
  if (contentType.startsWith("application/json")) return JSON.parse(body);
  assert.ok(contentType.startsWith("text/event-stream"), `unexpected Content-Type ${contentType}`);
  for (const event of body.split(/\r?\n\r?\n/)) {
    const data = event.split(/\r?\n/).filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n");
    if (!data) continue;
    const msg = JSON.parse(data);
    if (msg.id === id && !("method" in msg)) return msg;
  }
  throw new Error(`no answer to request ${id} in the stream: ${body}`);
}

// ext-tasks' RawClientDispatch: a framed JSON-RPC request in, its
// JsonRpcResponse out.  `seen` records each method, the task ids sent, and
// the HTTP status.
function rawDispatch(url, seen) {
  let next = 1;
  return async (request, options = {}) => {
    const id = `raw-${next++}`;
    const body = { ...request, jsonrpc: "2.0", id };
    const p = body.params ?? {};
    const name = body.method === "tools/call" ? p.name : body.method.startsWith("tasks/") ? p.taskId : undefined;
    const headers = {
      "Content-Type": "application/json",
      Accept: "application/json, text/event-stream",
      "MCP-Protocol-Version": p._meta?.["io.modelcontextprotocol/protocolVersion"],
      "Mcp-Method": body.method,
      ...(name === undefined ? {} : { "Mcp-Name": name }),
      ...(options.context?.headers ?? {}),
    };
    const res = await fetch(url, { method: "POST", headers, body: JSON.stringify(body), signal: options.signal });
    const text = await res.text();
    seen.push({ method: body.method, taskId: p.taskId, status: res.status });
    const msg = answerIn(res.headers.get("content-type") ?? "", text, id);
    return "error" in msg ? { kind: "error", error: msg.error } : { kind: "result", result: msg.result };
  };
}

describe("Tasks through @modelcontextprotocol/ext-tasks on pycell serve", () => {
  let srv, client, session, seen;
  before(async () => {
    srv = await startServe();
    client = new Client(clientInfo, { versionNegotiation: { mode: { pin: VERSION } } });
    await client.connect(new StreamableHTTPClientTransport(srv.url));
    assert.equal(client.getProtocolEra(), "modern");
    assert.deepEqual(client.getServerCapabilities().extensions?.[TASKS], {});
    seen = [];
    session = createTaskSessionFromClient(client, {
      endpointId: "pycell-serve-test",
      rawDispatch: rawDispatch(srv.url, seen),
      v2RequestFraming: { protocolVersion: VERSION, clientInfo, clientCapabilities: {} },
    });
  });
  after(async () => {
    await session?.close();
    await client?.close();
    const { code } = await srv.stop();
    assert.equal(code, 0);
  });

  test("a quick call is answered at once, not as a task", async () => {
    seen.length = 0;
    const execution = await session.callTool("run_python", { code: "6*7" });
    assert.equal(execution.kind, "immediate");
    const { outcome } = await execution.settle();
    assert.equal(outcome.status, "completed");
    const result = resultFromTaskOutcome(outcome);
    assert.equal(result.isError, false);
    assert.equal(result.structuredContent.return_value, 42);
    assert.deepEqual(seen.map((s) => [s.method, s.status]), [["tools/call", 200]]);
  });

  test("a long call becomes a task; polled to its result", async () => {
    seen.length = 0;
    const execution = await session.callTool("run_python", { code: "import time\ntime.sleep(2.5)\nprint('done')\n7" });
    assert.equal(execution.kind, "task");
    const taskId = execution.handle.taskId;
    assert.match(taskId, /^[0-9a-f]{32}$/);
    const events = [];
    const { outcome, lastTask } = await execution.settle({ onEvent: (e) => events.push(e) });
    assert.equal(outcome.status, "completed");
    const result = resultFromTaskOutcome(outcome);
    assert.equal(result.isError, false);
    assert.equal(result.structuredContent.stdout, "done\n");
    assert.equal(result.structuredContent.return_value, 7);
    assert.equal(lastTask?.taskId, taskId);
    // the call, then tasks/get polls (each with the task id in Mcp-Name), all 200
    assert.equal(seen[0].method, "tools/call");
    assert.ok(seen.some((s) => s.method === "tasks/get" && s.taskId === taskId));
    for (const s of seen) assert.equal(s.status, 200, JSON.stringify(s));
    assert.ok(events.some((e) => e.type === "outcome"));
  });

  test("cancelling a task kills its jail", async () => {
    seen.length = 0;
    const execution = await session.callTool("run_python", { code: "import time\ntime.sleep(60)" });
    assert.equal(execution.kind, "task");
    assert.ok(descendants(srv.pid).length > 0, "a running jail below the server");
    await execution.cancel();
    const { outcome } = await execution.settle();
    assert.equal(outcome.status, "cancelled");
    assert.ok(seen.some((s) => s.method === "tasks/cancel" && s.status === 200));
    await waitFor(() => descendants(srv.pid).length === 0, 5000, "the cancelled jail gone");
  });
});
