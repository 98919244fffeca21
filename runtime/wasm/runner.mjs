// pycell: the WASM backend's runner.  Node runs it as the jail's program
// (pid 2), in place of python, with Node's permission model on and code
// generation from strings off (src/run/program.c builds the command):
//
//   node ... runner.mjs RUN_DIR WORKSPACE cell | cell-ready
//   node ... runner.mjs RUN_DIR WORKSPACE script PROG [ARGS...]
//
// cell-ready: the cell's files come on fd 15 (a ready jail's, or a bare
// one's).  RUN_DIR and WORKSPACE "-": a bare jail, on a host that refuses
// namespaces, whose node may read the runtime only and write nowhere: the
// run's files come on fd 15 whatever the mode, /run/pycell and /workspace
// are Pyodide's own (in its memory, fresh), and /run/pycell/lib is the
// runtime this file is in.
//
// It loads Pyodide (from the memory snapshot made at build time when there
// is one), gives it stdin, stdout and stderr as raw bytes on fds 0-2, the
// run's files (RUN_DIR, read-only) and /workspace (the jail's, writable),
// and fd 3, the tool socket, as its own fd 3; then runs the program with
// the native path's contract (runtime/pycell/_cell.py for a cell) and exits
// with python's status.
//
// What Python can reach of JavaScript holds nothing of Node: `js` is an
// empty object, `pyodide_js` (the Pyodide API) is unregistered, and before
// any user code runs the Node globals are deleted from globalThis
// (process, require's kin, fetch, WebSocket, ...); the functions this file
// needs are held in its own bindings, which no object reachable from Python
// refers to.  Python's side (pycell._wasm.prepare) then lets Python hold
// no JavaScript object but an allowlist's, and the realm's intrinsics are
// frozen (lockdown, below).  Emscripten's libc reaches Node
// through require() (system() spawns a shell with child_process): once
// Pyodide has loaded, Node's loader hands out only the modules its file
// system and randomness use, and for child_process a stand-in that runs
// nothing.  Node's permission model stays a layer under that, not the
// boundary; the kernel jail around it is the same as a native run's.
//
//   node ... runner.mjs --make-snapshot OUT   (make: the snapshot)

import { closeSync, constants, readFileSync, readSync, writeFileSync, writeSync } from "node:fs";
import nodeModule from "node:module";
import { endianness } from "node:os";

const exitNow = process.reallyExit.bind(process);  // no exit handlers of anyone's
const uid = process.getuid();
const env = { ...process.env };  // the jail's environment, for os.environ
const argv = process.argv.slice(2);
const here = new URL(".", import.meta.url).pathname;
const indexURL = here + "pyodide/";
const SNAPSHOT = indexURL + "snapshot.bin";

// Pyodide's NODEFS reads the fs constants through process.binding, which
// the permission model refuses: hand it the same table from node:fs.
process.binding = (name) => {
	if (name === "constants")
		return { fs: constants };
	throw new Error("process.binding(" + name + ") is not available");
};

function fail(msg) {
	writeSync(2, "pycell wasm runner: " + msg + "\n");
	exitNow(70);
}

// A read that waits for data: an fd may be non-blocking (EAGAIN), and a
// synchronous read has nothing else to do; 0 at the end of the data.
const nap = new Int32Array(new SharedArrayBuffer(4));
function readWait(fd, buf, off, len) {
	for (;;) {
		try {
			return readSync(fd, buf, off, len);
		} catch (e) {
			if (e.code !== "EAGAIN")
				throw e;
			Atomics.wait(nap, 0, 0, 1);
		}
	}
}

// Bytes to fd, all of them (a pipe may take fewer at once).
function writeAll(fd, buf) {
	let off = 0;
	while (off < buf.length) {
		try {
			off += writeSync(fd, buf, off, buf.length - off);
		} catch (e) {
			if (e.code !== "EAGAIN")
				throw e;
			Atomics.wait(nap, 0, 0, 1);  // a full pipe: its reader will come
		}
	}
	return buf.length;
}

const { loadPyodide } = await import(indexURL + "pyodide.mjs");

async function load() {
	let snapshot;
	try {
		snapshot = readFileSync(SNAPSHOT);
	} catch {
		snapshot = undefined;  // no snapshot: a full start (about 2 s more)
	}
	return loadPyodide({ indexURL, jsglobals: Object.create(null), env: { HOME: "/workspace" },
			     _loadSnapshot: snapshot });
}

if (argv[0] === "--make-snapshot") {
	const py = await loadPyodide({ indexURL, jsglobals: Object.create(null), _makeSnapshot: true });
	// what every cell imports, loaded once into the image
	py.runPython("import json, ast, traceback, linecache, codecs, binascii, io");
	writeFileSync(argv[1], py.makeMemorySnapshot());
	exitNow(0);
}

const PROG_FD = 15;  // WASM_PROG_FD (src/config/policy.h)
const modes = ["cell", "cell-ready", "script"];
if (argv.length < 3 || !modes.includes(argv[2]) || (argv[2] === "script" && argv.length < 4))
	fail("usage: runner.mjs RUN_DIR WORKSPACE cell | cell-ready | script PROG [ARGS...]");
const [runDir, workspace, mode, ...progArgs] = argv;

let py;
try {
	py = await load();
} catch (e) {
	fail("could not load Pyodide: " + (e && e.message ? e.message : e));
}
const FS = py.FS;
// A refusal of Node's permission model (ERR_ACCESS_DENIED) has no errno:
// NODEFS would throw an error without one, which Python's open() took for
// success.  It is EACCES.
const NODEFS = FS.filesystems.NODEFS;
const nodeCode = NODEFS.convertNodeCode;
NODEFS.convertNodeCode = (e) => nodeCode(e) ?? (e.code === "ERR_ACCESS_DENIED" ? py.ERRNO_CODES.EACCES : py.ERRNO_CODES.EIO);

// fds 0-2: raw bytes, as a native python's are
py.setStdin({ read: (buf) => readWait(0, buf, 0, buf.length), isatty: false });
py.setStdout({ write: (buf) => writeAll(1, buf), isatty: false });
py.setStderr({ write: (buf) => writeAll(2, buf), isatty: false });

// The run's files and the workspace, where the native path has them
// (RUN_DIR and WORKSPACE are those paths in a jail; a test may give others).
FS.mkdirTree("/run/pycell");
if (runDir === "-") {
	FS.mkdirTree("/run/pycell/lib");
	FS.mount(FS.filesystems.NODEFS, { root: new URL("..", import.meta.url).pathname }, "/run/pycell/lib");
} else {
	FS.mount(FS.filesystems.NODEFS, { root: runDir }, "/run/pycell");
}
FS.mkdirTree("/workspace");
if (workspace !== "-")
	FS.mount(FS.filesystems.NODEFS, { root: workspace }, "/workspace");
FS.chdir("/workspace");

// fd 3: the tool socket.  One read is one packet, one write one packet
// (SOCK_SEQPACKET), as on the native path.
const toolDev = FS.makedev(64, 3);
FS.registerDevice(toolDev, {
	read(stream, buf, off, len) {
		try {
			return readWait(3, buf, off, len);
		} catch (e) {
			throw new FS.ErrnoError(py.ERRNO_CODES[e.code] || py.ERRNO_CODES.EIO);
		}
	},
	write(stream, buf, off, len) {
		try {
			return writeSync(3, buf, off, len);
		} catch (e) {
			throw new FS.ErrnoError(py.ERRNO_CODES[e.code] || py.ERRNO_CODES.EIO);
		}
	},
});
FS.mkdev("/dev/pycell-tools", toolDev);
const toolStream = FS.open("/dev/pycell-tools", "r+");
if (toolStream.fd !== 3) {
	// keep the numbering of the native path: fd 3 is the tool socket
	FS.dupStream(toolStream, 3);
	FS.closeStream(toolStream.fd);
}

// What Emscripten's code may still require() at run time: the modules of
// its file system (NODEFS) and randomness, and nothing else.  A program
// (system(), from posix.system or ctypes alike) gets child_process's
// stand-in: it runs nothing and says the shell could not be run (127).
const LOADABLE = new Set(["fs", "path", "url", "crypto"]);
const noProcesses = Object.freeze({
	spawnSync: () => Object.freeze({ pid: 0, status: 127, signal: null, output: null, stdout: null, stderr: null }),
});
const realLoad = nodeModule._load;
nodeModule._load = function (request, ...rest) {
	const name = String(request).replace(/^node:/, "");
	if (LOADABLE.has(name))
		return realLoad.call(this, request, ...rest);
	if (name === "child_process")
		return noProcesses;
	const e = new Error(`require("${request}"): not in pycell's wasm runner`);
	e.code = "ERR_ACCESS_DENIED";
	throw e;
};

// Nothing of Node for Python: `pyodide_js` goes; the Node globals go.
py.unregisterJsModule("pyodide_js");
for (const name of ["process", "require", "module", "exports", "fetch", "WebSocket", "Worker",
		    "Request", "Response", "Headers", "FormData", "EventSource", "BroadcastChannel",
		    "MessageChannel", "MessagePort", "navigator", "global"])
	delete globalThis[name];
// ... but for the one call Pyodide makes through it at run time, unguarded:
// os.getuid() is process.getuid() in Node (Pyodide's getuid syscall), and
// without it a fatal error of Pyodide's.  The id the kernel gave node.
globalThis.process = Object.freeze({ getuid: () => uid });

// Everything a cell needs before its program: a ready jail (cell-ready)
// has done it when the cell comes.
let run;
try {
	run = py.runPython(`
import sys
sys.path.insert(0, "/run/pycell/lib")
import pycell._wasm
pycell._wasm.prepare
`)(py.toPy(env));
} catch (e) {
	fail("the runtime could not start: " + (e && e.message ? e.message : e));
}

// The realm's intrinsics are frozen before any user code: Python holds
// JavaScript objects it makes (to_js, create_proxy), and through them the
// realm's prototypes; one it changed (a getter on Object.prototype, a
// method of Array.prototype) would run when Pyodide's own code uses it,
// and hand Python what that code holds.  Frozen only now: Pyodide adds
// properties to some of them while it loads.
function lockdown() {
	const seen = new Set();
	const freeze = (o) => {
		if (o === null || (typeof o !== "object" && typeof o !== "function") || seen.has(o))
			return;
		seen.add(o);
		Object.freeze(o);
		freeze(Object.getPrototypeOf(o));
	};
	for (const name of Object.getOwnPropertyNames(globalThis)) {
		const d = Object.getOwnPropertyDescriptor(globalThis, name);
		if (!d || !("value" in d) || d.value === globalThis)
			continue;
		if (typeof d.value === "function") {
			freeze(d.value);
			freeze(d.value.prototype);
		} else if (typeof d.value === "object" && /^[A-Z]/.test(name)) {
			freeze(d.value);   // Math, JSON, Reflect, Atomics, Intl, WebAssembly
		}
	}
	for (const f of [function () {}, async function () {}, function* () {}, async function* () {}])
		freeze(Object.getPrototypeOf(f));
	freeze(Object.getPrototypeOf([][Symbol.iterator]()));
	freeze(Object.getPrototypeOf(new Map()[Symbol.iterator]()));
	freeze(Object.getPrototypeOf(new Set()[Symbol.iterator]()));
	freeze(Object.getPrototypeOf(""[Symbol.iterator]()));
	freeze(Object.getPrototypeOf(/x/[Symbol.matchAll]("")));
}
lockdown();

// The cell of a ready jail: its length (8 bytes, the host's byte order:
// jail.c writes a uint64_t), then its files.
function readProgram() {
	const head = new Uint8Array(8);
	let got = 0;
	while (got < 8) {
		const n = readWait(PROG_FD, head, got, 8 - got);
		if (n === 0)
			exitNow(0);  // the ready jail went unused
		got += n;
	}
	const len = Number(new DataView(head.buffer).getBigUint64(0, endianness() === "LE"));
	const data = new Uint8Array(len);
	for (got = 0; got < len;) {
		const n = readWait(PROG_FD, data, got, len - got);
		if (n === 0)
			fail("the program ended after " + got + " of " + len + " bytes");
		got += n;
	}
	closeSync(PROG_FD);
	return data;
}

let status;
try {
	const files = mode === "cell-ready" || runDir === "-" ? readProgram() : undefined;  // None
	status = run(mode, py.toPy(progArgs), files);
} catch (e) {
	fail("the program could not run: " + (e && e.message ? e.message : e));
}
exitNow(typeof status === "number" ? status : 1);
