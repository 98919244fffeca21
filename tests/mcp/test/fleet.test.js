// A fleet: three `pycell serve` replicas behind haproxy (contrib/haproxy/
// haproxy.cfg, its ports rewritten), on loopback.  The v2 client pinned to
// 2026-07-28 makes 1000 calls through the balancer while one replica is
// stopped (SIGTERM: it drains) and started again: no call fails, none
// hangs, and every replica served some.  A task made through the
// balancer is polled through it: its id names its replica, and the
// balancer's rules send tasks/get there.  Sessions of the v1 SDK
// (2025-11-25) are opened through it: each session's id names its
// replica, and every request of the session is served there.
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { readFileSync, writeFileSync, mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { Client as ClientV1 } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport as TransportV1 } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

import { FLAGS, descendants, startServe, sleep, waitFor } from "./helpers.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const CFG = path.resolve(here, "../../../contrib/haproxy/haproxy.cfg");
const CALLS = Number(process.env.PYCELL_FLEET_CALLS || 1000);
const CONCURRENCY = 6;

function haproxyPath() {
  for (const p of ["/usr/sbin/haproxy", "/usr/bin/haproxy"]) {
    try {
      execFileSync(p, ["-v"], { stdio: "ignore" });
      return p;
    } catch {}
  }
  return null;
}
const HAPROXY = haproxyPath();

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// haproxy's lines but for requests that ended normally (httplog: status
// 200, termination state ----): warnings, retries, errors
function unusual(log) {
  return log.split("\n").filter((l) => l && !/ 200 \d+ - - ---- /.test(l)).join("\n").slice(-4000);
}

function runsIn(stderr) {
  return stderr.split("\n").filter((l) => l.startsWith("{") && JSON.parse(l).event === "run").length;
}

// What the fleet tests is haproxy's routing of sessions and the replicas'
// shared state, which a cold or a warm start does not change: run-cold.sh's
// pass (--cold) skips it, run.sh's runs it.
const SKIP = !HAPROXY ? "haproxy is not installed (Debian: haproxy)" :
  FLAGS.includes("--cold") ? "run-cold.sh: the fleet's routing does not depend on cold or warm starts, so run.sh's pass is the one" : false;

// (a skipped describe is not counted as a skip by node:test, a skipped test is)
(SKIP ? test : describe)("a fleet of three pycell serve behind haproxy", { skip: SKIP }, () => {
  let ports, front, replicas, proxy, dir, proxyLog = "";

  before(async () => {
    front = await freePort();
    ports = [await freePort(), await freePort(), await freePort()];
    replicas = [];
    for (const [i, p] of ports.entries())
      replicas.push(await startServe(["--replica", `r${i + 1}`], { listen: `127.0.0.1:${p}` }));
    let cfg = readFileSync(CFG, "utf8");
    assert.match(cfg, /bind 127\.0\.0\.1:8080\n/);
    cfg = cfg.replace("bind 127.0.0.1:8080", `bind 127.0.0.1:${front}`);
    ports.forEach((p, i) => {
      cfg = cfg.replace(`server r${i + 1} 127.0.0.1:${8081 + i}`, `server r${i + 1} 127.0.0.1:${p}`);
    });
    for (const p of ports) assert.ok(cfg.includes(`127.0.0.1:${p}\n`));
    // every request logged to stderr, with how it ended (in a failure's message)
    cfg = cfg.replace("global\n", "global\n    log stderr format raw local0 info\n")
      .replace("defaults\n", "defaults\n    log global\n    option httplog\n");
    dir = mkdtempSync(path.join(os.tmpdir(), "pycell-fleet-"));
    writeFileSync(path.join(dir, "haproxy.cfg"), cfg);
    proxy = spawn(HAPROXY, ["-db", "-f", path.join(dir, "haproxy.cfg")], { stdio: ["ignore", "pipe", "pipe"] });
    proxy.stdout.on("data", (d) => (proxyLog += d));
    proxy.stderr.on("data", (d) => (proxyLog += d));
    // the balancer answers once every replica is up
    const deadline = Date.now() + 15000;
    for (;;) {
      const ok = await fetch(`http://127.0.0.1:${front}/healthz`).then((r) => r.status === 200, () => false);
      if (ok) break;
      if (Date.now() > deadline) throw new Error(`haproxy did not come up: ${proxyLog}`);
      await sleep(100);
    }
  });

  after(async () => {
    proxy?.kill("SIGTERM");
    for (const r of replicas ?? []) if (r.proc.exitCode === null) await r.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test(`${CALLS} calls while a replica is stopped and started again: none fails`, async () => {
    const client = new Client({ name: "fleet-test", version: "1" }, { versionNegotiation: { mode: { pin: "2026-07-28" } } });
    await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${front}/mcp`)));
    assert.equal(client.getProtocolEra(), "modern");
    const stopAt = Math.floor(CALLS * 0.3), startAt = Math.floor(CALLS * 0.6);
    let next = 0, done = 0, stopped, restarted, servedBeforeStop;
    const failures = [];
    const events = [];

    async function worker() {
      while (next < CALLS) {
        const i = next++;
        if (i === stopAt) {
          servedBeforeStop = runsIn(replicas[0].stderr());
          stopped = replicas[0].stop().then((e) => events.push(["stopped", e]));
        }
        if (i === startAt) {
          restarted = (async () => {
            await stopped;
            replicas[0] = await startServe(["--replica", "r1"], { listen: `127.0.0.1:${ports[0]}` });
            events.push(["started"]);
          })();
        }
        try {
          const r = await client.callTool({ name: "run_python", arguments: { code: `print(${i})\n${i}` } },
            { timeout: 60000 });
          if (r.isError || r.structuredContent.return_value !== i || r.structuredContent.stdout !== `${i}\n`)
            failures.push([i, JSON.stringify(r).slice(0, 300)]);
        } catch (e) {
          failures.push([i, String(e)]);
        }
        done++;
      }
    }
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    await restarted;
    assert.deepEqual(failures, [], `${failures.length} of ${CALLS} calls failed; haproxy: ${unusual(proxyLog)}`);
    assert.equal(done, CALLS);
    // the stopped replica drained and exited 0; every replica served calls
    assert.deepEqual(events.find((e) => e[0] === "stopped")[1], { code: 0, signal: null });
    assert.ok(servedBeforeStop > 0, "replica 1 served before it was stopped");
    for (const r of replicas.slice(1)) assert.ok(runsIn(r.stderr()) > 0);
    // the restarted one is taken back once its health check passes (rise 2,
    // 1 s apart): more calls until it serves one, each of them right too
    const deadline = Date.now() + 20000;
    let extra = 0;
    while (runsIn(replicas[0].stderr()) === 0) {
      assert.ok(Date.now() < deadline, `the restarted replica served none of ${extra} more calls`);
      const r = await client.callTool({ name: "run_python", arguments: { code: "7" } });
      assert.equal(r.structuredContent.return_value, 7);
      extra++;
      await sleep(50);
    }
    await client.close();
  });

  // one 2026-07-28 request through the balancer, with its Mcp-Name: the
  // response's JSON
  let postId = 0;
  async function post(method, params, name, caps = {}) {
    const body = { jsonrpc: "2.0", id: ++postId, method, params: { ...params, _meta: {
      "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": caps } } };
    const r = await fetch(`http://127.0.0.1:${front}/mcp`, { method: "POST", body: JSON.stringify(body), headers: {
      "Content-Type": "application/json", Accept: "application/json, text/event-stream",
      "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method, ...(name ? { "Mcp-Name": name } : {}) } });
    assert.equal(r.status, 200);
    return await r.json();
  }

  test("a task's id names its replica; tasks/get through the balancer finds it", async () => {
    const tasks = { extensions: { "io.modelcontextprotocol/tasks": {} } };
    const postTask = async (method, params, name) => (await post(method, params, name, tasks)).result;
    const handles = [];
    // three tasks: with leastconn they land on more than one replica
    for (let k = 0; k < 3; k++)
      handles.push(postTask("tools/call", { name: "run_python", arguments: { code: `import time\ntime.sleep(1.5)\n${k}` } },
        "run_python"));
    const made = await Promise.all(handles);
    const owners = new Set();
    for (const h of made) {
      assert.equal(h.resultType, "task");
      assert.match(h.taskId, /^r[123]\.[0-9a-f]{32}$/);
      owners.add(h.taskId.split(".")[0]);
    }
    for (const [k, h] of made.entries()) {
      let t;
      for (const deadline = Date.now() + 20000; ; await sleep(200)) {
        t = await postTask("tasks/get", { taskId: h.taskId }, h.taskId);
        assert.equal(t.taskId, h.taskId);
        if (t.status !== "working") break;
        assert.ok(Date.now() < deadline, "the task did not end");
      }
      assert.equal(t.status, "completed");
      assert.equal(t.result.structuredContent.return_value, k);
    }
    assert.ok(owners.size >= 2, `the tasks all landed on ${[...owners]}`);
  });

  test("sessions through the balancer (v2 client, 2026-07-28): Mcp-Param-Session routes each cell to its replica", async () => {
    const client = new Client({ name: "fleet-test", version: "1" }, { versionNegotiation: { mode: { pin: "2026-07-28" } } });
    await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${front}/mcp`)));
    // the client mirrors session_id into Mcp-Param-Session as the tool's
    // inputSchema says (x-mcp-header): it learns that from tools/list
    const tools = await client.listTools();
    const run = tools.tools.find((t) => t.name === "run_python");
    assert.equal(run.inputSchema.properties.session_id["x-mcp-header"], "Session");
    const call = async (name, args) => {
      const r = await client.callTool({ name, arguments: args });
      assert.equal(r.isError, false, JSON.stringify(r));
      return r.structuredContent;
    };
    // opened at once: with leastconn they land on more than one replica
    const ids = (await Promise.all([0, 1, 2, 3, 4, 5].map(() => call("session_open", {})))).map((o) => o.session_id);
    const owners = new Set(ids.map((id) => id.split(".")[0]));
    assert.ok(owners.size >= 2, `the sessions all landed on ${[...owners]}`);
    for (const [k, id] of ids.entries()) {
      assert.match(id, /^r[123]\.[0-9a-f]{32}$/);
      assert.equal((await call("run_python", { session_id: id, code: `x = ${k}` })).status, "ok");
      const c2 = await call("run_python", { session_id: id, code: "x * 10" });
      assert.deepEqual([c2.return_value, c2.session.cell], [k * 10, 2]);
      assert.deepEqual(await call("session_close", { session_id: id }), { session_id: id, cells: 2 });
    }
    await client.close();
  });

  test("a file a run wrote on one replica: resources/read through the balancer finds it", async () => {
    // six calls at once: with leastconn they land on more than one replica
    const made = await Promise.all([0, 1, 2, 3, 4, 5].map((k) => post("tools/call", { name: "run_python",
      arguments: { code: `import time\ntime.sleep(0.3)\nopen('out.txt', 'w').write('run ${k}')` } }, "run_python")));
    const owners = new Set();
    for (const [k, m] of made.entries()) {
      const uri = m.result.structuredContent.files[0].uri;
      assert.match(uri, /^pycell:\/\/runs\/r[123]\.[0-9a-f]{32}\/files\/out\.txt$/);
      owners.add(uri.split("/")[3].split(".")[0]);
      const read = await post("resources/read", { uri }, uri);
      assert.deepEqual(read.result.contents, [{ uri, mimeType: "text/plain", text: `run ${k}` }], JSON.stringify(read));
    }
    assert.ok(owners.size >= 2, `the runs all landed on ${[...owners]}`);
  });

  test("v1 SDK sessions (2025-11-25) through the balancer: each stays on the replica its id names", async () => {
    const before = replicas.map((r) => runsIn(r.stderr()));
    const sessions = [];
    for (let k = 0; k < 6; k++) {
      const client = new ClientV1({ name: "fleet-test-v1", version: "1" });
      const transport = new TransportV1(new URL(`http://127.0.0.1:${front}/mcp`));
      await client.connect(transport);
      assert.match(transport.sessionId, /^r[123]\.[0-9a-f]{32}$/);
      sessions.push({ client, transport, replica: Number(transport.sessionId[1]) - 1 });
    }
    // five calls per session, the sessions side by side: a request sent
    // to another replica would get 404 (no such session) and fail
    await Promise.all(sessions.map(async ({ client }, k) => {
      for (let j = 0; j < 5; j++) {
        const r = await client.callTool({ name: "run_python", arguments: { code: `${k} * 10 + ${j}` } });
        assert.equal(r.structuredContent.return_value, k * 10 + j);
      }
    }));
    const owners = new Set(sessions.map((s) => s.replica));
    assert.ok(owners.size >= 2, `the sessions all landed on r${[...owners][0] + 1}`);
    // each replica ran exactly the calls of the sessions it owns
    await sleep(200);
    replicas.forEach((r, i) => {
      const want = 5 * sessions.filter((s) => s.replica === i).length;
      assert.equal(runsIn(r.stderr()) - before[i], want, `runs on r${i + 1}`);
    });
    for (const { client } of sessions) await client.close();
  });

  test("a replica killed mid-run: its call ends with a clear error at once, not run again, none hangs", async () => {
    const client = new Client({ name: "fleet-test", version: "1" }, { versionNegotiation: { mode: { pin: "2026-07-28" } } });
    await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${front}/mcp`)));
    const started = Date.now();
    const call = client.callTool({ name: "run_python", arguments: { code: "import time\ntime.sleep(30)" } },
      { timeout: 60000 }).then((r) => ({ r }), (e) => ({ e }));
    const victim = await waitFor(() => replicas.find((r) => descendants(r.pid).length > 0), 20000, "the running jail");
    victim.proc.kill("SIGKILL");
    const { r, e } = await call;
    assert.ok(e, `the call was answered: ${JSON.stringify(r)}`);
    // haproxy's 502, or the connection closed under the response (the
    // transport's own error): either way at once, and said
    assert.match(`${e} ${e.cause ?? ""}`, /502|other side closed/);
    assert.ok(Date.now() - started < 15000, "the error came at once");
    // it was not sent again to another replica (no jail there), and the
    // others serve on
    await sleep(1000);
    for (const rep of replicas) if (rep !== victim) assert.equal(descendants(rep.pid).length, 0, `a jail below ${rep.pid}`);
    const ok = await client.callTool({ name: "run_python", arguments: { code: "5" } });
    assert.equal(ok.structuredContent.return_value, 5);
    await client.close();
    const i = replicas.indexOf(victim);
    replicas[i] = await startServe(["--replica", `r${i + 1}`], { listen: `127.0.0.1:${ports[i]}` });
  });
});
