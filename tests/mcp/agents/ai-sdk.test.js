// The Vercel AI SDK's MCP client (@ai-sdk/mcp), as an app built on it
// uses pycell: createMCPClient over stdio (its StdioMCPTransport, which
// discovers 2026-07-28 with server/discover) and over Streamable HTTP,
// the tools as AI SDK tools (execute), resources read by URI, and a call
// cancelled with its abortSignal over HTTP, where the abort closes the
// request.  It exposes no progress, and sends no notifications/cancelled:
// over stdio an abort only stops the client waiting (the run goes on to
// its time limit), so cancellation is checked over HTTP only.
import { describe, test, before, after } from "node:test";
import assert from "node:assert/strict";

import { createMCPClient } from "@ai-sdk/mcp";
import { Experimental_StdioMCPTransport } from "@ai-sdk/mcp/mcp-stdio";

import { catchWarnings, fromCallToolResult, libraryChecks, PYCELL, serverArgs, serverEnv, startServe } from "./common.js";

function driver(transport) {
  let client, tools;
  return {
    async open() {
      const w = catchWarnings();
      try {
        client = await createMCPClient({ transport: transport() });
        tools = await client.tools();
        return { names: Object.keys(tools), warnings: w.seen };
      } finally {
        w.restore();
      }
    },
    async call(name, args, { signal } = {}) {
      const r = await tools[name].execute(args, { toolCallId: "t1", messages: [], abortSignal: signal });
      return fromCallToolResult(r);
    },
    async read(uri) {
      const r = await client.readResource({ uri });
      return r.contents[0].text;
    },
    protocol: () => client.initializeResult.protocolVersion,
    async close() {
      await client.close();
    },
  };
}

// libraryChecks, and after the listing: the client settled on 2026-07-28
// (server/discover), the revision without a handshake.
function checks(d, opts) {
  libraryChecks((name, fn) => {
    test(name, fn);
    if (name.startsWith("tools listed"))
      test("the client speaks 2026-07-28, found by server/discover", () => assert.equal(d.protocol(), "2026-07-28"));
  }, d, opts);
}

describe("AI SDK over stdio", () => {
  checks(driver(() => new Experimental_StdioMCPTransport({ command: PYCELL, args: serverArgs(),
    env: serverEnv(), stderr: "ignore" })), {});
});

describe("AI SDK over Streamable HTTP", () => {
  let srv;
  before(async () => {
    srv = await startServe();
  });
  after(async () => {
    await srv.stop();
  });
  checks(driver(() => ({ type: "http", url: srv.url.href })), { cancel: true, root: () => srv.pid });
});
