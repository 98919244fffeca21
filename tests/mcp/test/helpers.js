// Shared helpers for the MCP tests: start `pycell mcp` under the official
// SDK client (or on raw pipes), and look at the processes below it.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

import Ajv from "ajv";
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { Client as Client2 } from "@modelcontextprotocol/client";
import { StdioClientTransport as StdioClientTransport2 } from "@modelcontextprotocol/client/stdio";

const here = path.dirname(fileURLToPath(import.meta.url));
const top = path.resolve(here, "../../..");

export const PYCELL = process.env.PYCELL || path.join(top, "pycell");
export const DATADIR = process.env.PYCELL_DATADIR || top;
// PYCELL_TEST_POLICY: run every server with this policy instead of the default.
const POLICY = process.env.PYCELL_TEST_POLICY ? ["--policy", process.env.PYCELL_TEST_POLICY] : [];

// PYCELL_MCP_FLAGS: more server options for every test, e.g. "--cold"
// (run-cold.sh reruns the suites with every jail started anew).
export const FLAGS = (process.env.PYCELL_MCP_FLAGS || "").split(/\s+/).filter(Boolean);

// The tools pycell(1) lists in pycell mcp's section (".TP", then ".B name"),
// in its order: what tools/list shows when the policy enables them all.
// The unit suite holds that list to the table of tools (src/mcp/tools.c),
// so no test here names the tools: adding one is a row, its handler and
// its entry in the man page.
export const TOOLS = (() => {
  const man = readFileSync(path.join(top, "man", "pycell.1"), "utf8");
  const section = man.slice(man.indexOf('.SS "pycell mcp'), man.indexOf('.SS "pycell serve'));
  return [...section.matchAll(/\n\.TP\n\.B ([a-z_]+)\n/g)].map((m) => m[1]);
})();

export function serverArgs(extra = []) {
  return ["mcp", ...POLICY, ...FLAGS, ...extra];
}

export function serverEnv() {
  return { ...process.env, PYCELL_DATADIR: DATADIR };
}

// `pycell mcp` on stdio under a client of an official SDK: the transport
// and client classes, the client's name and options.  `log` collects the
// server's stderr (capped) so a failing test can show it.
async function connectWith(Transport, ClientClass, name, options, extra) {
  const transport = new Transport({ command: PYCELL, args: serverArgs(extra), env: serverEnv(), stderr: "pipe" });
  const log = { text: "" };
  transport.stderr.on("data", (d) => {
    if (log.text.length < 65536) log.text += d.toString();
  });
  const client = new ClientClass({ name, version: "1.0.0" }, options);
  await client.connect(transport);
  // tools/list first: the SDK then checks every structuredContent
  // against the tool's outputSchema
  await client.listTools();
  return { client, transport, pid: transport.pid, log, close: () => client.close() };
}

// A connected v1 SDK client.
export async function connect(extra = [], { capabilities = {} } = {}) {
  return connectWith(StdioClientTransport, Client, "pycell-tests", { capabilities }, extra);
}

// The same with the v2 client (@modelcontextprotocol/client), negotiating
// `mode`: { pin: "2026-07-28" }, "auto" or "legacy".
export async function connectV2(extra = [], mode = { pin: "2026-07-28" }) {
  return connectWith(StdioClientTransport2, Client2, "pycell-tests-v2", { versionNegotiation: { mode } }, extra);
}

// `pycell serve` on an ephemeral loopback port (or `listen`): { proc, url, pid, stderr(), stop() }.
export async function startServe(extra = [], { listen = "127.0.0.1:0" } = {}) {
  const proc = spawn(PYCELL, ["serve", "--listen", listen, ...POLICY, ...FLAGS, ...extra],
    { env: serverEnv(), stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  proc.stderr.on("data", (d) => {
    if (stderr.length < 1 << 20) stderr += d.toString();
  });
  const exited = new Promise((resolve) => proc.on("exit", (code, signal) => resolve({ code, signal })));
  const deadline = Date.now() + 20000;
  let url;
  while (!(url = /listening on (\S+)/.exec(stderr)?.[1])) {
    if (Date.now() > deadline || proc.exitCode !== null) throw new Error(`serve did not start: ${stderr}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    proc,
    url: new URL(url),
    pid: proc.pid,
    stderr: () => stderr,
    async stop() {
      proc.kill("SIGTERM");
      return exited;
    },
  };
}

// `pycell mcp` on plain pipes: send objects or raw text lines, read
// parsed responses.
export function startRaw(extra = []) {
  const proc = spawn(PYCELL, serverArgs(extra), { env: serverEnv(), stdio: ["pipe", "pipe", "pipe"] });
  let buf = "";
  const messages = [];
  const waiters = [];
  let stderr = "";
  proc.stderr.on("data", (d) => {
    if (stderr.length < 65536) stderr += d.toString();
  });
  proc.stdout.on("data", (d) => {
    buf += d.toString();
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      messages.push(JSON.parse(line));
      for (const w of waiters.splice(0)) w();
    }
  });
  const exited = new Promise((resolve) => proc.on("exit", (code, signal) => resolve({ code, signal })));
  return {
    proc,
    exited,
    get stderr() {
      return stderr;
    },
    sendLine(text) {
      proc.stdin.write(text + "\n");
    },
    send(obj) {
      proc.stdin.write(JSON.stringify(obj) + "\n");
    },
    // The next message that matches pred (default: any), within ms.
    async next(pred = () => true, ms = 10000) {
      const deadline = Date.now() + ms;
      for (;;) {
        const i = messages.findIndex(pred);
        if (i >= 0) return messages.splice(i, 1)[0];
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`no matching message within ${ms} ms; stderr: ${stderr}`);
        await new Promise((resolve) => {
          const t = setTimeout(resolve, left);
          waiters.push(() => {
            clearTimeout(t);
            resolve();
          });
        });
      }
    },
    response(id, ms) {
      return this.next((m) => m.id === id && !("method" in m), ms);
    },
    async request(id, method, params, ms) {
      this.send({ jsonrpc: "2.0", id, method, ...(params === undefined ? {} : { params }) });
      return this.response(id, ms);
    },
    async initialize(protocolVersion = "2025-11-25") {
      const r = await this.request(0, "initialize", {
        protocolVersion,
        capabilities: {},
        clientInfo: { name: "raw", version: "1" },
      });
      this.send({ jsonrpc: "2.0", method: "notifications/initialized" });
      return r;
    },
    kill() {
      proc.kill("SIGKILL");
    },
  };
}

// ------------------------------------------------------------ processes

function stat(pid) {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = s.slice(s.lastIndexOf(")") + 2).split(" ");
    return { state: f[0], ppid: Number(f[1]) };
  } catch {
    return null;
  }
}

// The warm-start zygote (`pycell mcp --warm`) lives as long as the server
// and never runs code: it is not part of any run.  Its jails are.
function isZygote(pid) {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "latin1") === "pycell\0__zygote\0";
  } catch {
    return false;
  }
}

// A ready jail's init is pycell-ready by its command line from its exec on,
// by its name a moment later (src/jail/init_main.c); in its exec, it is
// named by the path it execs (/proc/self/fd/N: "N") and has no command line
// yet.
function isReadyJail(pid) {
  try {
    const comm = readFileSync(`/proc/${pid}/comm`, "latin1");
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, "latin1");
    return comm === "pycell-ready\n" || cmdline.startsWith("pycell-ready\0") ||
      (/^\d+\n$/.test(comm) && cmdline === "");
  } catch {
    return false;
  }
}

// Live processes below pid (any depth), the zygote and the jails it made
// ahead (named pycell-ready until they get a program) left out.
export function descendants(pid) {
  return below(pid).filter((p) => !isZygote(p) && !isReadyJail(p));
}

// Every live process below pid (any depth).
function below(pid) {
  const parent = new Map();
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    const st = stat(d);
    if (st && st.state !== "Z") parent.set(Number(d), st.ppid);
  }
  const out = [];
  const frontier = [pid];
  while (frontier.length) {
    const cur = frontier.pop();
    for (const [p, pp] of parent) {
      if (pp === cur) {
        out.push(p);
        frontier.push(p);
      }
    }
  }
  return out;
}

// The ready jails below pid (made ahead, waiting for a run).
export function readyJails(pid) {
  return below(pid).filter(isReadyJail);
}

export function alive(pid) {
  const st = stat(pid);
  return st !== null && st.state !== "Z";
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Poll until fn() (or the promise it returns) is truthy; returns its value
// or throws after ms.
export async function waitFor(fn, ms = 5000, what = "condition") {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

export function text(result) {
  return result.content.filter((c) => c.type === "text").map((c) => c.text).join("");
}

// three lines of output 0.7 s apart: each its own progress notification
export const tickCode = "import time\nfor i in range(3):\n    print('tick', i, flush=True)\n    time.sleep(0.7)\n";

// The progress of tickCode's call: "started", then its output as it came,
// in order, with progress strictly increasing.  Output within
// PROGRESS_OUTPUT_MS of the last notification waits for the next: lines
// may share one, never come out of order.
export function assertTickProgress(progress) {
  const msgs = progress.map((p) => p.message);
  assert.equal(msgs[0], "started", JSON.stringify(msgs));
  assert.ok(msgs.slice(1).every((m) => /^running for \d+ s(; output:\n|$)/.test(m)), JSON.stringify(msgs));
  for (let i = 1; i < progress.length; i++) assert.ok(progress[i].progress > progress[i - 1].progress, JSON.stringify(progress));
  const output = msgs.filter((m) => m.includes("; output:\n")).map((m) => m.replace(/^[^\n]*\n/, ""));
  assert.equal(output.join(""), "tick 0\ntick 1\ntick 2\n", JSON.stringify(msgs));
  assert.ok(output.length >= 2, JSON.stringify(msgs));
}

// A validator for one revision: check(msg, def) returns the errors (empty
// when msg is a valid `def`).
export function validator(version) {
  const schema = JSON.parse(readFileSync(path.join(here, "..", "schema", version, "schema.json"), "utf8"));
  const modern2020 = String(schema.$schema).includes("2020-12");
  const ajv = new (modern2020 ? Ajv2020 : Ajv)({ strict: false, allErrors: true });
  addFormats(ajv);
  const id = `mcp-${version}.json`;
  ajv.addSchema({ ...schema, $id: id });
  const defs = modern2020 ? "$defs" : "definitions";
  const has = (name) => name in schema[defs];
  const cache = new Map();
  return {
    has,
    check(msg, name) {
      assert.ok(has(name), `${version} has no ${name}`);
      if (!cache.has(name)) cache.set(name, ajv.compile({ $ref: `${id}#/${defs}/${name}` }));
      const v = cache.get(name);
      return v(msg) ? [] : v.errors.map((e) => `${e.instancePath} ${e.message}`);
    },
  };
}
