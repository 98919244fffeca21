// LangChain's MCP adapters (@langchain/mcp-adapters), as a LangChain or
// LangGraph agent uses pycell: MultiServerMCPClient over stdio and over
// Streamable HTTP, the tools as LangChain tools (invoke; an error result
// is thrown as a ToolException, as the adapters do), the standard content
// blocks (an image, a file link), resources read through the client, and
// the client's onProgress hook.  The adapters expose no cancellation.
import { describe, test, before, after } from "node:test";

import { MultiServerMCPClient } from "@langchain/mcp-adapters";

import { catchWarnings, libraryChecks, PYCELL, serverArgs, serverEnv, startServe } from "./common.js";

function driver(server) {
  let client, tools;
  let onProgress = null;
  const blocks = (out) => (Array.isArray(out) ? out : [out]);
  return {
    async open() {
      const w = catchWarnings();
      try {
        client = new MultiServerMCPClient({
          mcpServers: { pycell: server() },
          useStandardContentBlocks: true,
          onProgress: (p, source) => source.type === "tool" && onProgress?.(p),
        });
        const list = await client.getTools();
        tools = Object.fromEntries(list.map((t) => [t.name, t]));
        return { names: list.map((t) => t.name), warnings: w.seen };
      } finally {
        w.restore();
      }
    },
    async call(name, args, { onProgress: hook } = {}) {
      onProgress = hook ?? null;
      let out;
      try {
        out = blocks(await tools[name].invoke(args));
      } catch (e) {
        if (e.name !== "ToolException") throw e;
        return { text: e.message, isError: true, structured: undefined, images: [], links: [] };
      } finally {
        onProgress = null;
      }
      const text = out.find((b) => b.type === "text");
      return {
        text: out.filter((b) => b.type === "text").map((b) => b.text).join(""),
        isError: false,
        structured: text?.structuredContent,
        images: out.filter((b) => b.type === "image").map((b) => ({ data: b.data, mime: b.mime_type })),
        links: out.filter((b) => b.type === "file" && b.source_type === "url").map((b) => b.url),
      };
    },
    async read(uri) {
      const contents = await client.readResource("pycell", uri);
      return contents[0].text;
    },
    async close() {
      await client.close();
    },
  };
}

describe("LangChain adapters over stdio", () => {
  libraryChecks(test, driver(() => ({ transport: "stdio", command: PYCELL, args: serverArgs(), env: serverEnv(),
    stderr: "ignore" })), { progress: true });
});

describe("LangChain adapters over Streamable HTTP", () => {
  let srv;
  before(async () => {
    srv = await startServe();
  });
  after(async () => {
    await srv.stop();
  });
  libraryChecks(test, driver(() => ({ transport: "http", url: srv.url.href })), { progress: true });
});
