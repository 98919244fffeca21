// Runs on one event loop: parallel runs, the run queue, cancellation,
// progress, and the end of input.
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { alive, connect, descendants, sleep, startRaw, text, waitFor } from "./helpers.js";

const sleepCode = (s) => `import time\ntime.sleep(${s})\n'slept'`;

describe("concurrency", () => {
  test("two runs in parallel finish in about the time of one", async () => {
    const s = await connect();
    try {
      const t1 = Date.now();
      const one = await s.client.callTool({ name: "run_python", arguments: { code: sleepCode(3) } });
      const single = Date.now() - t1;
      assert.equal(one.structuredContent.return_value, "slept");

      const t0 = Date.now();
      const both = await Promise.all([
        s.client.callTool({ name: "run_python", arguments: { code: sleepCode(3) } }),
        s.client.callTool({ name: "run_python", arguments: { code: sleepCode(3) } }),
      ]);
      const elapsed = Date.now() - t0;
      for (const r of both) assert.equal(r.structuredContent.return_value, "slept", text(r));
      // one after the other they could not take less than 2 x 3 s
      assert.ok(elapsed < 6000, `two parallel runs took ${elapsed} ms, one took ${single} ms`);
    } finally {
      await s.close();
    }
  });

  test("ping and tools/list are answered while a run is going", async () => {
    const s = await connect();
    try {
      let ended = false;
      const running = s.client
        .callTool({ name: "run_python", arguments: { code: sleepCode(8) } })
        .finally(() => { ended = true; });
      await sleep(300);
      const t0 = Date.now();
      await s.client.ping();
      await s.client.listTools();
      const ms = Date.now() - t0;
      // answered during the 8 s run, not after it (a server that blocked
      // on the run would answer only once it ended)
      assert.equal(ended, false, `ping + tools/list were answered only after the run ended (${ms} ms)`);
      assert.ok(ms < 4000, `ping + tools/list took ${ms} ms during a run`);
      assert.equal((await running).structuredContent.return_value, "slept");
    } finally {
      await s.close();
    }
  });

  test("--max-runs 1 queues the second run behind the first", async () => {
    const s = await connect(["--max-runs", "1"]);
    try {
      const t0 = Date.now();
      const [a, b] = await Promise.all([
        s.client.callTool({ name: "run_python", arguments: { code: sleepCode(2) } }),
        s.client.callTool({ name: "run_python", arguments: { code: sleepCode(2) } }),
      ]);
      const elapsed = Date.now() - t0;
      assert.equal(a.structuredContent.status, "ok");
      assert.equal(b.structuredContent.status, "ok");
      assert.ok(elapsed >= 4000, `two queued 2 s runs took only ${elapsed} ms`);
      // each run's own duration excludes its time in the queue (>= 2 s)
      const d = b.structuredContent.duration_ms;
      assert.ok(d >= 2000 && d < 3800, `duration ${d}`);
    } finally {
      await s.close();
    }
  });
});

describe("progress", () => {
  test("started, then every second while running, strictly increasing", async () => {
    const s = await connect();
    try {
      const seen = [];
      const r = await s.client.callTool({ name: "run_python", arguments: { code: sleepCode(2.5), timeout_s: 20 } },
        undefined, { onprogress: (p) => seen.push(p) });
      assert.equal(r.structuredContent.status, "ok");
      assert.equal(seen[0].message, "started", JSON.stringify(seen));
      const periodic = seen.filter((p) => /^running for \d+ s$/.test(p.message));
      assert.ok(periodic.length >= 2, JSON.stringify(seen));
      for (let i = 1; i < seen.length; i++) assert.ok(seen[i].progress > seen[i - 1].progress, JSON.stringify(seen));
      // progress counts milliseconds; the total is where the timeout would hit
      assert.ok(seen.every((p) => p.total >= 20000 && p.total < 21000), JSON.stringify(seen));
    } finally {
      await s.close();
    }
  });

  // The SDKs handle notifications a tick after responses: a progress
  // notification written right before the response reaches them after it,
  // for a token they have already forgotten.  None is sent at the end.
  test("no progress notification comes with or after the response (raw pipes)", async () => {
    const r = startRaw();
    try {
      await r.initialize();
      r.send({ jsonrpc: "2.0", id: 1, method: "tools/call",
        params: { name: "run_python", arguments: { code: sleepCode(1.2), timeout_s: 10 }, _meta: { progressToken: "t1" } } });
      const res = await r.response(1, 20000);
      assert.equal(res.result.structuredContent.status, "ok");
      const notes = [];
      for (;;) {
        try {
          notes.push((await r.next((m) => m.method === "notifications/progress", 1)).params);
        } catch {
          break;
        }
      }
      assert.deepEqual(notes.map((n) => n.message), ["started", "running for 1 s"]);
      assert.ok(notes.every((n) => n.progressToken === "t1" && n.progress < n.total), JSON.stringify(notes));
      // and none after it
      await assert.rejects(r.next((m) => m.method === "notifications/progress", 500));
    } finally {
      r.kill();
    }
  });

  test("50 calls with progress: the SDK never sees an unknown token (it did on 40-75% of them)", async () => {
    const s = await connect();
    const errors = [];
    s.client.onerror = (e) => errors.push(String(e));
    try {
      // eight at a time, so that the client is busy when answers come
      for (let i = 0; i < 50; i += 8) {
        const batch = [];
        for (let j = i; j < Math.min(i + 8, 50); j++)
          batch.push(s.client.callTool({ name: "run_python", arguments: { code: String(j) } }, undefined,
            { onprogress: () => {} }).then((r) => assert.equal(r.structuredContent.return_value, j)));
        await Promise.all(batch);
      }
      await new Promise((res) => setTimeout(res, 200));
      assert.deepEqual(errors, []);
    } finally {
      await s.close();
    }
  });

  test("a queued run says so before it starts", async () => {
    const s = await connect(["--max-runs", "1"]);
    try {
      const seen = [];
      const first = s.client.callTool({ name: "run_python", arguments: { code: sleepCode(1) } });
      const second = s.client.callTool({ name: "run_python", arguments: { code: "2" } }, undefined,
        { onprogress: (p) => seen.push(p.message) });
      await Promise.all([first, second]);
      assert.deepEqual(seen.slice(0, 2), ["queued: 1 runs ahead", "started"]);
    } finally {
      await s.close();
    }
  });
});

describe("cancellation", () => {
  test("notifications/cancelled kills the jail and sends no response", async () => {
    const s = await connect();
    try {
      const ac = new AbortController();
      let started;
      const startedP = new Promise((resolve) => (started = resolve));
      const call = s.client.callTool({ name: "run_python", arguments: { code: sleepCode(60) } }, undefined,
        { signal: ac.signal, onprogress: (p) => p.message === "started" && started() });
      await startedP;
      // the jail: its init and python, below the server
      const jail = await waitFor(() => {
        const d = descendants(s.pid);
        return d.length >= 2 ? d : null;
      }, 5000, "the jail's processes");
      const t0 = Date.now();
      ac.abort("test cancels");
      await assert.rejects(call);
      // the runs sleep 60 s: the bounds leave room for a slow machine
      await waitFor(() => jail.every((p) => !alive(p)), 10000, `jail processes ${jail} to end`);
      assert.ok(Date.now() - t0 < 10000);
      assert.deepEqual(descendants(s.pid), []);
      // the server goes on
      const r = await s.client.callTool({ name: "run_python", arguments: { code: "'still here'" } });
      assert.equal(r.structuredContent.return_value, "still here");
    } finally {
      await s.close();
    }
  });

  test("on raw pipes: no response ever arrives for the cancelled request", async () => {
    const r = startRaw();
    try {
      await r.initialize();
      r.send({ jsonrpc: "2.0", id: 7, method: "tools/call", params: { name: "run_python", arguments: { code: sleepCode(60) } } });
      await waitFor(() => descendants(r.proc.pid).length >= 2, 10000, "the jail");
      r.send({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: 7, reason: "test" } });
      await waitFor(() => descendants(r.proc.pid).length === 0, 10000, "the jail to end");
      // a later request is answered, and nothing for id 7 came before it
      const pong = await r.request(8, "ping");
      assert.deepEqual(pong.result, {});
      await assert.rejects(r.response(7, 500));
    } finally {
      r.kill();
    }
  });

  test("cancelling a queued run removes it from the queue", async () => {
    const r = startRaw(["--max-runs", "1"]);
    try {
      await r.initialize();
      const call = (id, code) => r.send({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "run_python", arguments: { code } } });
      call(1, sleepCode(1));
      call(2, "'never'");
      call(3, "'third'");
      r.send({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: 2 } });
      const third = await r.response(3, 20000);
      assert.equal(third.result.structuredContent.return_value, "third");
      assert.equal((await r.response(1, 1)).result.structuredContent.return_value, "slept");
      await assert.rejects(r.response(2, 300));
    } finally {
      r.kill();
    }
  });
});

describe("end of input", () => {
  test("EOF on stdin kills every run and exits 0", async () => {
    const r = startRaw();
    await r.initialize();
    for (const id of [1, 2])
      r.send({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "run_python", arguments: { code: sleepCode(60) } } });
    const jail = await waitFor(() => {
      const d = descendants(r.proc.pid);
      return d.length >= 4 ? d : null;
    }, 5000, "two jails");
    const t0 = Date.now();
    r.proc.stdin.end();
    const { code, signal } = await r.exited;
    assert.equal(signal, null);
    assert.equal(code, 0, r.stderr);
    assert.ok(Date.now() - t0 < 10000, `exit took ${Date.now() - t0} ms (the runs sleep 60 s)`);
    await waitFor(() => jail.every((p) => !alive(p)), 10000, "the jails to be gone");
  });

  test("SIGTERM ends the server cleanly too", async () => {
    const r = startRaw();
    await r.initialize();
    r.send({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "run_python", arguments: { code: sleepCode(60) } } });
    const jail = await waitFor(() => {
      const d = descendants(r.proc.pid);
      return d.length >= 2 ? d : null;
    }, 5000, "the jail");
    r.proc.kill("SIGTERM");
    const { code } = await r.exited;
    assert.equal(code, 0, r.stderr);
    await waitFor(() => jail.every((p) => !alive(p)), 10000, "the jail to be gone");
  });
});
