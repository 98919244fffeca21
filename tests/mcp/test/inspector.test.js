// The official MCP Inspector's CLI (@modelcontextprotocol/inspector) with
// --strict: it connects to `pycell mcp` as a client of its own and reports
// every tool schema that is less than portable (a type array, a schema that
// constrains nothing, ...) as a warning or an error.  pycell's have none.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import { DATADIR, PYCELL, serverArgs, serverEnv, TOOLS } from "./helpers.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const inspector = path.resolve(here, "../node_modules/.bin/mcp-inspector");

test("mcp-inspector --cli --strict: the tools/list schemas have no portability problem", () => {
  const r = spawnSync(inspector, ["--cli", "--strict", "--format", "json", "--method", "tools/list", PYCELL,
    ...serverArgs()], { env: serverEnv(), encoding: "utf8", timeout: 60000 });
  const problems = (r.stderr || "").split("\n").filter((l) => /^(Warning|Error)\b|\d+ (errors?|warnings?)/.test(l));
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(problems, [], r.stderr);
  const names = JSON.parse(r.stdout).result.tools.map((t) => t.name);
  assert.deepEqual(names, TOOLS);
});

// It failed here before pycell spoke 2026-07-28: "the server did not offer
// pinned protocol version 2026-07-28 via server/discover".
test("mcp-inspector --cli --strict --protocol-era modern: list and call in 2026-07-28", () => {
  // --strict goes with tools/list only; --tool-arg takes every word up to
  // "--"; the Inspector gives the server only the environment it is told
  const run = (method, ...rest) => spawnSync(inspector, ["--cli", ...(method === "tools/list" ? ["--strict"] : []),
    "-e", `PYCELL_DATADIR=${DATADIR}`, "--protocol-era", "modern", "--format", "json", "--method", method, ...rest, "--", PYCELL, ...serverArgs()],
    { env: serverEnv(), encoding: "utf8", timeout: 60000 });
  const list = run("tools/list");
  assert.equal(list.status, 0, list.stderr + list.stdout);
  assert.deepEqual(JSON.parse(list.stdout).result.tools.map((t) => t.name), TOOLS);
  const call = run("tools/call", "--tool-name", "run_python", "--tool-arg", "code=6*7");
  assert.equal(call.status, 0, call.stderr + call.stdout);
  const res = JSON.parse(call.stdout).result;
  assert.equal(res.structuredContent.return_value, 42, call.stdout);
});
