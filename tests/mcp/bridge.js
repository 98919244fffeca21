#!/usr/bin/env node
// A stdio-to-Streamable-HTTP bridge, for tests only: the MCP conformance
// suite speaks HTTP, `pycell mcp` speaks stdio.  Every HTTP session gets its
// own `pycell mcp` process; messages pass through unchanged.
//
//   node bridge.js [--port N] -- /path/to/pycell mcp [OPTIONS]
//
// Prints "listening http://127.0.0.1:PORT/mcp" when ready.  Binds to
// 127.0.0.1 only.
import { randomUUID } from "node:crypto";
import http from "node:http";

import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";

const argv = process.argv.slice(2);
const dash = argv.indexOf("--");
if (dash < 0 || dash === argv.length - 1) {
  console.error("usage: node bridge.js [--port N] -- COMMAND [ARG...]");
  process.exit(2);
}
const opts = argv.slice(0, dash);
const [command, ...args] = argv.slice(dash + 1);
const port = opts[0] === "--port" ? Number(opts[1]) : 0;

const sessions = new Map();

async function newSession() {
  const stdio = new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });
  // progress notifications go on the stream of the request that asked
  const tokens = new Map();
  const httpT = new StreamableHTTPServerTransport({
    sessionIdGenerator: () => randomUUID(),
    onsessioninitialized: (id) => sessions.set(id, httpT),
  });
  httpT.onmessage = (msg) => {
    const token = msg.params?._meta?.progressToken;
    if (token !== undefined && msg.id !== undefined) tokens.set(token, msg.id);
    stdio.send(msg).catch((e) => console.error("bridge: to server:", e.message));
  };
  stdio.onmessage = (msg) => {
    let related;
    if (msg.method === "notifications/progress") related = tokens.get(msg.params?.progressToken);
    if (msg.id !== undefined && !msg.method) {
      for (const [t, id] of tokens) if (id === msg.id) tokens.delete(t);
    }
    httpT.send(msg, related === undefined ? undefined : { relatedRequestId: related })
      .catch((e) => console.error("bridge: to client:", e.message));
  };
  httpT.onclose = () => {
    if (httpT.sessionId) sessions.delete(httpT.sessionId);
    stdio.close();
  };
  stdio.onclose = () => httpT.close();
  await httpT.start();
  await stdio.start();
  return httpT;
}

async function readBody(req) {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  const text = Buffer.concat(chunks).toString("utf8");
  return text ? JSON.parse(text) : undefined;
}

const server = http.createServer(async (req, res) => {
  try {
    if (new URL(req.url, "http://x").pathname !== "/mcp") {
      res.writeHead(404).end();
      return;
    }
    const sid = req.headers["mcp-session-id"];
    let body;
    if (req.method === "POST") {
      try {
        body = await readBody(req);
      } catch {
        res.writeHead(400, { "content-type": "application/json" });
        res.end(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32700, message: "Parse error" } }));
        return;
      }
    }
    let t = sid ? sessions.get(sid) : undefined;
    if (!t && !sid && req.method === "POST" && isInitializeRequest(body)) t = await newSession();
    if (!t) {
      res.writeHead(sid ? 404 : 400, { "content-type": "application/json" });
      res.end(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32000, message: "unknown or missing session" } }));
      return;
    }
    await t.handleRequest(req, res, body);
  } catch (e) {
    console.error("bridge:", e);
    if (!res.headersSent) res.writeHead(500).end();
  }
});

server.listen(port, "127.0.0.1", () => {
  console.log(`listening http://127.0.0.1:${server.address().port}/mcp`);
});

function shutdown() {
  for (const t of sessions.values()) t.close();
  server.close();
  setTimeout(() => process.exit(0), 500).unref();
}
process.on("SIGTERM", shutdown);
process.on("SIGINT", shutdown);
