// pycell benchmark: tools/call round trips through the official v1 SDK
// client (@modelcontextprotocol/sdk, as tests/mcp installs it), for
// tests/bench/bench.py, which drives it a line at a time:
//
//   node tests/bench/sdk_client.mjs SDK_DIR PYCELL [PYCELL_ARGS...]
//
// It starts `PYCELL mcp PYCELL_ARGS` under the SDK's StdioClientTransport,
// lists the tools (from then on the SDK checks every structuredContent
// against run_python's outputSchema) and prints "ready".  Then each line
// on stdin is a JSON string, the code of one run_python call; the answer is
// one JSON line {"ms": round trip, "stdout": the run's stdout} or
// {"error": "..."}.  The round trip is what an agent waits for: from
// callTool to its result, the SDK's own parsing and schema check included.
// EOF on stdin closes the client, which ends the server.
import path from "node:path";
import readline from "node:readline";
import { pathToFileURL } from "node:url";

const [sdkDir, pycell, ...args] = process.argv.slice(2);
if (!sdkDir || !pycell) {
  process.stderr.write("usage: node sdk_client.mjs SDK_DIR PYCELL [PYCELL_ARGS...]\n");
  process.exit(2);
}
const load = (rel) => import(pathToFileURL(path.join(sdkDir, "dist/esm", rel)).href);
const { Client } = await load("client/index.js");
const { StdioClientTransport } = await load("client/stdio.js");

const transport = new StdioClientTransport({ command: pycell, args: ["mcp", ...args], env: process.env, stderr: "inherit" });
const client = new Client({ name: "pycell-bench", version: "1.0.0" });
await client.connect(transport);
await client.listTools();
process.stdout.write("ready\n");

const lines = readline.createInterface({ input: process.stdin });
for await (const line of lines) {
  let answer;
  try {
    const code = JSON.parse(line);
    const t0 = performance.now();
    const res = await client.callTool({ name: "run_python", arguments: { code } });
    const ms = performance.now() - t0;
    const sc = res.structuredContent;
    answer = res.isError || !sc || sc.status !== "ok"
      ? { error: JSON.stringify(res).slice(0, 1000) }
      : { ms, stdout: sc.stdout };
  } catch (e) {
    answer = { error: String(e) };
  }
  process.stdout.write(JSON.stringify(answer) + "\n");
}
await client.close();
