// The OpenAI Agents SDK (@openai/agents), as an agent built on it uses
// pycell: MCPServerStdio and MCPServerStreamableHttp, the tools as the
// agent's function tools (getAllMcpTools), calls with callToolResult,
// resources through readResource, and a call cancelled with its signal.
// It exposes no progress.
import { describe, test, before, after } from "node:test";
import assert from "node:assert/strict";

import { getAllMcpTools, MCPServerStdio, MCPServerStreamableHttp } from "@openai/agents";

import { catchWarnings, fromCallToolResult, libraryChecks, PYCELL, serverArgs, serverEnv, startServe, TOOLS } from "./common.js";

function driver(make) {
  let server;
  return {
    async open() {
      const w = catchWarnings();
      try {
        server = make();
        await server.connect();
        const tools = await getAllMcpTools({ mcpServers: [server] });
        return { names: tools.map((t) => t.name), warnings: w.seen };
      } finally {
        w.restore();
      }
    },
    async call(name, args, { signal } = {}) {
      const r = await server.callToolResult(name, args, null, { signal });
      return fromCallToolResult(r);
    },
    async read(uri) {
      const r = await server.readResource(uri);
      return r.contents[0].text;
    },
    server: () => server,
    async close() {
      await server.close();
    },
  };
}

// Strict mode (convertSchemasToStrict) turns every tool strict but
// run_python, whose "variables" is an open object (any names, any JSON
// values): strict function schemas cannot say that, so the SDK keeps that
// one tool non-strict and warns once, naming why.
async function strictCheck(d) {
  const w = catchWarnings();
  let tools;
  try {
    tools = await getAllMcpTools({ mcpServers: [d.server()], convertSchemasToStrict: true });
  } finally {
    w.restore();
  }
  assert.deepEqual(tools.map((t) => t.name), TOOLS);
  assert.deepEqual(tools.filter((t) => !t.strict).map((t) => t.name), ["run_python"]);
  assert.equal(w.seen.length, 1, JSON.stringify(w.seen));
  assert.match(w.seen[0], /^Error converting MCP schema to strict mode/);
}

describe("OpenAI Agents over stdio", () => {
  const d = driver(() => new MCPServerStdio({ command: PYCELL, args: serverArgs(), env: serverEnv() }));
  libraryChecks((name, fn) => {
    test(name, fn);
    if (name.startsWith("tools listed")) test("strict mode: every tool strict but run_python", () => strictCheck(d));
  }, d, { cancel: true, root: () => process.pid });
});

describe("OpenAI Agents over Streamable HTTP", () => {
  let srv;
  before(async () => {
    srv = await startServe();
  });
  after(async () => {
    await srv.stop();
  });
  const d = driver(() => new MCPServerStreamableHttp({ url: srv.url.href }));
  libraryChecks((name, fn) => {
    test(name, fn);
    if (name.startsWith("tools listed")) test("strict mode: every tool strict but run_python", () => strictCheck(d));
  }, d, { cancel: true, root: () => srv.pid });
});
