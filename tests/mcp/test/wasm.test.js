// The wasm backend (Pyodide in Node, in the same jail) through the official
// clients: the v1 SDK and the v2 client pinned to 2026-07-28 each run cells
// on a server whose policy says "backend": "wasm", and validate every
// structuredContent against run_python's outputSchema.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";

import { connect, connectV2, DATADIR, PYCELL, text } from "./helpers.js";

// Built in and usable here?  Else every test says why it is skipped.
const probe = spawnSync(PYCELL, ["run", "--backend", "wasm", "-c", "pass"],
  { env: { ...process.env, PYCELL_DATADIR: DATADIR }, encoding: "utf8" });
const skip = probe.status === 0 ? false : `the wasm backend is not usable here: ${probe.stderr.trim()}`;

const dir = mkdtempSync(path.join(tmpdir(), "pycell-wasm-"));
const policy = path.join(dir, "wasm.json");
writeFileSync(policy, JSON.stringify({ extends: "default", backend: "wasm" }));
after(() => rmSync(dir, { recursive: true, force: true }));
// what confines a wasm run in the jail (no host here refuses namespaces)
const LAYERS = ["namespaces", "private root", "no capabilities", "no_new_privs", "seccomp", "rlimits",
  "node permissions", "webassembly"];

for (const [name, open] of [["v1 SDK", () => connect(["--policy", policy])],
  ["v2 client, 2026-07-28", () => connectV2(["--policy", policy])]]) {
  describe(`wasm cells through the ${name}`, { skip }, () => {
    let s;
    before(async () => {
      s = await open();
    });
    after(() => s && s.close());

    const run = (args) => s.client.callTool({ name: "run_python", arguments: args });

    test("variables in, output and the last expression's value out, backend wasm", async () => {
      const r = await run({ code: 'import sys\nprint("on", sys.platform)\n{"y": x * 2, "l": [1, 2.5]}',
        variables: { x: 21 } });
      assert.equal(r.isError, false, text(r));
      const sc = r.structuredContent;
      assert.equal(sc.status, "ok");
      assert.equal(sc.backend, "wasm");
      assert.deepEqual(sc.layers, LAYERS);
      assert.equal(sc.stdout, "on emscripten\n");
      assert.deepEqual(sc.return_value, { y: 42, l: [1, 2.5] });
    });

    test("an exception is an error result with Python's traceback", async () => {
      const r = await run({ code: "def f():\n    raise KeyError('k')\nf()" });
      assert.equal(r.isError, true);
      assert.equal(r.structuredContent.status, "error");
      assert.equal(r.structuredContent.exit_code, 1);
      assert.match(r.structuredContent.stderr, /KeyError: 'k'\n$/);
    });

    test("what Pyodide cannot do names the native backend", async () => {
      const r = await run({ code: "import subprocess\nsubprocess.run(['ls'])" });
      assert.equal(r.structuredContent.status, "error");
      assert.match(r.structuredContent.stderr,
        /WasmUnsupported: processes are not available on pycell's wasm backend \(Pyodide\): run this code on the native backend\n$/);
    });

    test("sandbox_info says wasm and Pyodide's Python; sessions are refused", async () => {
      const info = (await s.client.callTool({ name: "sandbox_info", arguments: {} })).structuredContent;
      assert.equal(info.backend, "wasm");
      assert.deepEqual(info.layers, LAYERS);
      assert.match(info.python_version, /^3\.14\./);
      const r = await s.client.callTool({ name: "session_open", arguments: {} });
      assert.equal(r.isError, true);
      assert.match(text(r), /Sessions need the native backend/);
    });
  });
}
