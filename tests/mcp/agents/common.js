// What the agent-library tests share: the code each check runs, the jail
// processes a run leaves (or must not), and console.warn caught, since a
// library's complaint about a server (a schema it cannot use) goes there.
import assert from "node:assert/strict";

import { alive, assertTickProgress, descendants, tickCode, TOOLS, waitFor } from "../test/helpers.js";

export { PYCELL, serverArgs, serverEnv, startServe, TOOLS } from "../test/helpers.js";

export const CODE = {
  hello: "print('hello from an agent library')",
  double: "x * 2",
  error: "1/0",
  file: "open('out.txt', 'w').write('pycell-file')",
  figure: "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.plot([1, 2, 3])\nfig",
  sleep: "import time\nprint('sleeping', flush=True)\ntime.sleep(60)",
};

// console.warn and console.error as the library calls them, until restore().
export function catchWarnings() {
  const seen = [];
  const saved = { warn: console.warn, error: console.error };
  console.warn = (...a) => seen.push(a.map(String).join(" "));
  console.error = (...a) => seen.push(a.map(String).join(" "));
  return {
    seen,
    restore() {
      Object.assign(console, saved);
    },
  };
}

// The PNG of a figure: its base64 starts with the PNG signature's.
export function assertPng(base64, mime) {
  assert.equal(mime, "image/png");
  assert.ok(base64.startsWith("iVBORw0KGgo"), base64.slice(0, 40));
  assert.ok(Buffer.from(base64, "base64").length > 1000);
}

// A run started by start() and cancelled the way the library does
// (cancel()): its jail's processes (below root: this process for stdio,
// serve's pid for HTTP) appear, then all of them end.
export async function assertCancelEndsJail(root, start, cancel) {
  const before = new Set(descendants(root));
  start();
  const jail = await waitFor(() => {
    const d = descendants(root).filter((p) => !before.has(p));
    return d.length >= 2 ? d : null;
  }, 10000, "the jail's processes");
  await cancel();
  await waitFor(() => jail.every((p) => !alive(p)), 10000, `jail processes ${jail} to end`);
}

// A CallToolResult as the checks look at it.
export function fromCallToolResult(r) {
  return {
    text: r.content.filter((c) => c.type === "text").map((c) => c.text).join(""),
    isError: r.isError === true,
    structured: r.structuredContent,
    images: r.content.filter((c) => c.type === "image").map((c) => ({ data: c.data, mime: c.mimeType })),
    links: r.content.filter((c) => c.type === "resource_link").map((c) => c.uri),
  };
}

// The session_id in session_open's structured result.
export function sessionId(structured) {
  assert.match(structured.session_id, /^[0-9a-f]{32}/);
  return structured.session_id;
}

// The checks every library runs over each transport it offers, given a
// driver that speaks through it:
//   open() -> { names, warnings } after listing the tools
//   call(name, args, { signal, onProgress }) -> { text, isError, structured,
//        images: [{ data, mime }], links: [uri] }
//   read(uri) -> the resource's text; close()
// and what the library exposes: opts.progress (onProgress is called with
// each notification's { progress, message }), opts.cancel (signal aborts
// the call), opts.root() (the pid the jails run below).
export function libraryChecks(test, driver, opts) {
  test("tools listed with no warning from the library", async () => {
    const { names, warnings } = await driver.open();
    assert.deepEqual(names, TOOLS);
    assert.deepEqual(warnings, opts.expectWarnings ?? []);
  });
  test("a call: its output comes back", async () => {
    const r = await driver.call("run_python", { code: CODE.hello });
    assert.equal(r.isError, false);
    assert.match(r.text, /hello from an agent library/);
    assert.equal(r.structured?.stdout ?? "hello from an agent library\n", "hello from an agent library\n");
  });
  test("variables go in, the last expression's value comes out", async () => {
    const r = await driver.call("run_python", { code: CODE.double, variables: { x: 21 } });
    assert.equal(r.isError, false);
    assert.match(r.text, /--- return_value ---\n42\n/);
  });
  test("an exception is an error result, with its traceback", async () => {
    const r = await driver.call("run_python", { code: CODE.error });
    assert.equal(r.isError, true);
    assert.match(r.text, /status: error \(exit code 1/);
    assert.match(r.text, /ZeroDivisionError: division by zero/);
  });
  test("a session keeps its globals across calls", async () => {
    const open = await driver.call("session_open", {});
    const id = sessionId(open.structured ?? JSON.parse(open.text));
    try {
      const a = await driver.call("run_python", { code: "a = 6", session_id: id });
      assert.equal(a.isError, false);
      const b = await driver.call("run_python", { code: "a * 7", session_id: id });
      assert.match(b.text, /--- return_value ---\n42\n/);
    } finally {
      const c = await driver.call("session_close", { session_id: id });
      assert.equal(c.isError, false);
    }
  });
  test("a file the code wrote is read back through resources", async () => {
    const r = await driver.call("run_python", { code: CODE.file });
    assert.equal(r.isError, false);
    const uri = r.links.find((u) => u.endsWith("/files/out.txt"));
    assert.match(uri ?? "", /^pycell:\/\/runs\/[0-9a-f]+\/files\/out\.txt$/, JSON.stringify(r.links));
    assert.equal(await driver.read(uri), "pycell-file");
  });
  test("a figure comes back as an image", async () => {
    const r = await driver.call("run_python", { code: CODE.figure });
    assert.equal(r.isError, false, r.text);
    assert.equal(r.images.length, 1);
    assertPng(r.images[0].data, r.images[0].mime);
  });
  if (opts.progress) {
    test("progress: every notification, in order, before the result", async () => {
      const seen = [];
      const r = await driver.call("run_python", { code: tickCode },
        { onProgress: (p) => seen.push({ progress: p.progress, message: p.message }) });
      assert.equal(r.isError, false);
      assertTickProgress(seen);
    });
  }
  if (opts.cancel) {
    test("cancel: the jail is gone", async () => {
      const ac = new AbortController();
      let call;
      await assertCancelEndsJail(opts.root(), () => {
        call = driver.call("run_python", { code: CODE.sleep }, { signal: ac.signal });
        call.catch(() => {});
      }, async () => {
        ac.abort("the test cancels");
        await assert.rejects(call);
      });
    });
  }
  test("close", async () => {
    await driver.close();
  });
}
