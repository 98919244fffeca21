// The official MCP Inspector's CLI (@modelcontextprotocol/inspector) with
// --strict: it connects to `pycell mcp` as a client of its own and reports
// every tool schema that is less than portable (a type array, a schema that
// constrains nothing, ...) as a warning or an error.  pycell's have none.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import { PYCELL, serverArgs, serverEnv } from "./helpers.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const inspector = path.resolve(here, "../node_modules/.bin/mcp-inspector");

test("mcp-inspector --cli --strict: the tools/list schemas have no portability problem", () => {
  const r = spawnSync(inspector, ["--cli", "--strict", "--format", "json", "--method", "tools/list", PYCELL,
    ...serverArgs()], { env: serverEnv(), encoding: "utf8", timeout: 60000 });
  const problems = (r.stderr || "").split("\n").filter((l) => /^(Warning|Error)\b|\d+ (errors?|warnings?)/.test(l));
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(problems, [], r.stderr);
  const names = JSON.parse(r.stdout).result.tools.map((t) => t.name);
  assert.deepEqual(names, ["run_python", "sandbox_info"]);
});
