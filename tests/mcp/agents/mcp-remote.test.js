// mcp-remote in front of `pycell serve`, as a desktop client that speaks
// only stdio reaches a served pycell: the official v1 SDK client talks to
// mcp-remote's stdio, mcp-remote to pycell over Streamable HTTP with a
// bearer token (--header), as people deploy it.  Everything passes
// through the proxy: progress notifications as the run prints, and a
// cancellation (notifications/cancelled) that kills the jail.
import { describe, test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

import { catchWarnings, fromCallToolResult, libraryChecks, startServe } from "./common.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const proxy = path.join(here, "..", "node_modules", "mcp-remote", "dist", "proxy.js");
const TOKEN = "agent-token-0123456789";

function driver(url, configDir) {   // configDir(): mcp-remote's own (~/.mcp-auth otherwise)
  let client;
  return {
    async open() {
      const w = catchWarnings();
      try {
        client = new Client({ name: "pycell-via-mcp-remote", version: "1" });
        await client.connect(new StdioClientTransport({
          command: process.execPath,
          args: [proxy, url(), "--allow-http", "--transport", "http-only", "--silent",
            "--header", `Authorization:Bearer ${TOKEN}`],
          env: { ...process.env, MCP_REMOTE_CONFIG_DIR: configDir() },
          stderr: "ignore",
        }));
        const { tools } = await client.listTools();
        return { names: tools.map((t) => t.name), warnings: w.seen };
      } finally {
        w.restore();
      }
    },
    async call(name, args, { signal, onProgress } = {}) {
      const r = await client.callTool({ name, arguments: args }, undefined,
        { signal, onprogress: onProgress, timeout: 120000 });
      return fromCallToolResult(r);
    },
    async read(uri) {
      const r = await client.readResource({ uri });
      return r.contents[0].text;
    },
    async close() {
      await client.close();
    },
  };
}

describe("mcp-remote in front of pycell serve, with a token", () => {
  let srv, dir;
  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "pycell-mcp-remote-"));
    const tokens = path.join(dir, "tokens.json");
    writeFileSync(tokens, JSON.stringify({ tokens: [{ name: "agent",
      sha256: createHash("sha256").update(TOKEN).digest("hex") }] }), { mode: 0o600 });
    srv = await startServe(["--tokens", tokens]);
  });
  after(async () => {
    await srv.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  test("without the token the server refuses (the proxy is what carries it)", async () => {
    const r = await fetch(new URL("/mcp", srv.url), { method: "POST", headers: { "Content-Type": "application/json",
      Accept: "application/json, text/event-stream" }, body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }) });
    assert.equal(r.status, 401);
  });
  libraryChecks(test, driver(() => new URL("/mcp", srv.url).href, () => path.join(dir, "mcp-remote")),
    { progress: true, cancel: true, root: () => srv.pid });
});
