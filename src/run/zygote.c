/* pycell: warm starts through a zygote (see zygote.h).
 *
 * Why a re-executed binary and not a fork of the supervisor: a jail cloned
 * from the zygote inherits its whole address space, and the code in it can
 * read all of that.  A fresh exec with an empty environment holds only the
 * policy, the seccomp program and the interpreter: no config, no tokens,
 * no upstream environment.
 *
 * libpython is loaded with dlopen, so the supervisor itself never maps it
 * (its RSS stays small) and no Python headers are needed to build: the
 * functions used are declared below with their documented signatures
 * (the stable C API, and pymalloc's statistics, which may be absent). */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <wchar.h>

#include <jansson.h>

#include "base/log.h"
#include "jail/rootfs.h"
#include "jail/seccomp.h"
#include "jail/small_init.h"
#include "run/hot_pages.h"
#include "run/huge_pages.h"
#include "run/program.h"
#include "run/zygote.h"



static struct {
	void (*SetProgramName)(const wchar_t *);
	wchar_t *(*DecodeLocale)(const char *, size_t *);
	void (*InitializeEx)(int);
	int (*RunSimpleStringFlags)(const char *, void *);
	int (*RunSimpleFileExFlags)(FILE *, const char *, int, void *);
	int (*FinalizeEx)(void);
	void (*AfterForkChild)(void);
	long (*LongAsLong)(void *);
	void *(*ImportModule)(const char *);
	void *(*GetAttrString)(void *, const char *);
	void *(*CallFunction)(void *, const char *, ...);
	void (*ErrPrint)(void);
	void (*DecRef)(void *);
	const char *(*UnicodeAsUTF8)(void *);
	unsigned (*TypeClearCache)(void);
	void *(*ObjectMalloc)(size_t);
	void *(*CFunctionNewEx)(void *, void *, void *);
	int (*SetAttrString)(void *, const char *, void *);
	void *(*LongFromSize_t)(size_t);
	void *(*ErrOccurred)(void);
	int (*DebugMallocStats)(FILE *); /* not the stable API: may be NULL */
} py;

/* The Python of warm starts is runtime/pycell/_warm.py (preload,
 * environment, script prelude, ready, finish), registered as pycell._warm
 * by the bootstrap below.  Each call binds no name in __main__.  The
 * functions a jail's python calls are looked up once by the zygote and
 * called without compiling anything (PyRun_SimpleString compiles its
 * text: some 170 copy-on-write faults of a jail's python, each a TLB
 * flush, for the call of ready alone) */
static void *ready_fn, *prelude_fn;    /* _warm.ready(WARM_UP), _warm.script_prelude(PATH) */
static void *warm_main_fn, *finish_fn; /* _cell.warm_main(FD, LEN), _warm.finish() */
static void *first_uses_fn, *first_use_fn; /* _warm.first_uses(), _warm.first_use(I) */

static bool linger;   /* jail_spec.linger, from the program message */

/* The zygote's pages a ready jail's python writes before its cell
 * (hot[0]), and those the first use of a preloaded module writes after
 * (hot[1 + i], pycell._warm's first use i: a figure, a frame), learned by
 * hot_probe at the first jail asked ahead (hot_pages.h).  In a jail,
 * hot_first_uses says whether it copies a first use's pages when its cell
 * names the module (a ready jail made ahead does, a session's does not:
 * it stays small), and hot_used which it copied already. */
static struct hot_pages hot[HOT_PHASES_MAX];
static bool hot_learned, hot_first_uses;
static unsigned hot_used;

/* The int a warm_main or finish call returned; `failed` when it raised
 * (printed, as PyRun_SimpleString does). */
static int call_status(void *res, int failed)
{
	long st;
	if (!res) {
		py.ErrPrint();
		return failed;
	}
	st = py.LongAsLong(res);
	py.DecRef(res);
	return (int)st;
}

/* A ready jail's pid 2 (prog_fd >= 0): get ready (warmed up too when
 * made ahead: jail_spec.warm_up), wait for the cell, run it; the status
 * comes back from pycell._cell.warm_main, not as SystemExit, which would
 * tear the interpreter down, and no name is bound in __main__.  Once the
 * cell is here, nothing is compiled but the cell. */
static int run_cell(const struct jail_spec *s, int prog_fd)
{
	uint64_t len;
	int fd;

	prctl(PR_SET_NAME, "pycell-ready");
	if (call_status(py.CallFunction(ready_fn, "i", (int)s->warm_up), 1) != 0)
		_exit(125);
	fd = jail_receive_program(prog_fd, &len, &linger);
	if (fd < 0)
		_exit(125);
	close(prog_fd);
	prctl(PR_SET_NAME, "python3"); /* exec would have named it after the binary */
	return call_status(py.CallFunction(warm_main_fn, "iK", fd, (unsigned long long)len), 1);
}

/* What a ready jail's python does before its cell comes, in a child of
 * the zygote (hot_pages_learn): the at-fork hooks and the warm-up, which
 * runs the runtime's own sample cell (/workspace, which the zygote's host
 * has not, is looked at and found empty). */
static void hot_probe_run(void)
{
	int uses;
	prctl(PR_SET_NAME, "pycell-probe");
	py.AfterForkChild();
	if (call_status(py.CallFunction(ready_fn, "i", 1), 1) != 0)
		_exit(1);
	/* then each first use the zygote did, a phase of its own */
	uses = call_status(py.CallFunction(first_uses_fn, NULL), 0);
	for (int i = 0; i + 1 < HOT_PHASES_MAX && i < uses; i++) {
		hot_pages_mark();
		call_status(py.CallFunction(first_use_fn, "i", i), 1);
	}
}

/* on the stack a jail's python runs on, a small init's (small_init.h):
 * its pages are among those a phase learns */
static void hot_probe(void)
{
	small_init_on_stack(hot_probe_run);
}

/* pycell._warm._hot_use(I), for a cell that names the module of first
 * use I (pycell._warm.cell_uses): its pages copied now, once, in a ready
 * jail made ahead; elsewhere nothing.  The pages copied.  What a cell
 * gains calling it itself: its own pages copied, as its writes would. */
static void *hot_use(void *self, void *arg)
{
	long i = py.LongAsLong(arg);
	size_t copied = 0;
	(void)self;
	if (i == -1 && py.ErrOccurred())
		return NULL; /* not an int: the TypeError raised */
	if (i >= 0 && i + 1 < HOT_PHASES_MAX && hot_first_uses && !(hot_used & (1u << i))) {
		hot_used |= 1u << i;
		copied = hot_pages_populate(&hot[i + 1]);
	}
	return py.LongFromSize_t(copied);
}

/* A PyMethodDef, as the stable API lays it out */
static struct {
	const char *name;
	void *(*fn)(void *, void *);
	int flags;
	const char *doc;
} hot_use_def = { "_hot_use", hot_use, 0x0008 /* METH_O */,
		  "Copy the zygote's pages first use I writes (pycell._warm.cell_uses)." };

static int run_script(const struct jail_spec *s)
{
	char path[PATH_MAX];
	FILE *f;

	prctl(PR_SET_NAME, "python3");
	if (call_status(py.CallFunction(prelude_fn, "s", JAIL_RUN_DIR "/" WARM_FILE), 1) != 0)
		_exit(125);
	snprintf(path, sizeof(path), JAIL_RUN_DIR "/%s", s->files[0].name);
	f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "%s: can't open file '%s': [Errno %d] %s\n", s->policy->python, path, errno,
			strerror(errno));
		exit(2);
	}
	return py.RunSimpleFileExFlags(f, path, 1, NULL) ? 1 : 0;
}

/* How the run ended, told to the supervisor on the tool socket (fd 3)
 * before the exit itself: the kernel's teardown of this copy of the
 * zygote's address space takes longer than many a cell, and the answer
 * need not wait for it (run.c takes this as init's report, which comes
 * after).  The standard streams are closed first, so that their end is
 * seen now too.  What python says of itself is its own result only:
 * the supervisor still kills the whole jail after answering. */
static void report_end(int status)
{
	struct rusage ru = { 0 };
	char msg[256];
	int n;
	getrusage(RUSAGE_SELF, &ru);
	close(1);
	close(2);
	n = snprintf(msg, sizeof(msg),
		     "{\"jsonrpc\":\"2.0\",\"method\":\"pycell/exit\",\"params\":{\"status\":%d,\"cpu_us\":%lld,"
		     "\"maxrss_kb\":%ld}}",
		     status & 0xff,
		     (long long)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 + ru.ru_utime.tv_usec +
			     ru.ru_stime.tv_usec,
		     ru.ru_maxrss);
	send(3, msg, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* pid 2 of a warm jail: confined already; run the program in the
 * interpreter inherited from the zygote. */
static __attribute__((noreturn)) void zygote_run_inline(const struct jail_spec *s, int prog_fd)
{
	int status;
	/* What exec would have done: a cold run's python is dumpable, so its
	 * /proc/self belongs to it (comm, setproctitle).  Its memory is a copy
	 * of the zygote's, which holds no secrets; init stays non-dumpable. */
	if (prctl(PR_SET_DUMPABLE, 1) < 0)
		_exit(125);
	/* a jail made ahead copies the pages its warm-up will write now, in
	 * a few calls, instead of a fault each (hot_pages.h) */
	if (s->warm_up)
		hot_pages_populate(&hot[0]);
	hot_first_uses = s->warm_up;
	/* also runs the interpreter's at-fork hooks: random reseeds there, so
	 * runs from one zygote do not share its state (test_warm.py) */
	py.AfterForkChild();
	status = prog_fd >= 0 ? run_cell(s, prog_fd) : run_script(s);
	/* 120 when a standard stream could not be flushed, as python's exit */
	if (call_status(py.CallFunction(finish_fn, NULL), 120) != 0)
		status = 120;
	/* Python has run its atexit handlers and flushed its streams; skip
	 * the C library's (a leak checker's among them: the interpreter
	 * never frees everything) */
	fflush(NULL);
	if (prog_fd >= 0)
		report_end(status);
	if (linger) {
		/* the supervisor kills the jail once it has answered; a second
		 * bounds the wait should that not come */
		struct timespec t = { 1, 0 };
		nanosleep(&t, NULL);
	}
	_exit(status);
}

/* Loads runtime/pycell/_warm.py from the host's runtime dir (%s: a JSON
 * string literal, which Python reads the same), compiled under its jail
 * path and registered as pycell._warm, then runs its preload. */
static const char bootstrap[] =
	"def _pycell_boot(host):\n"
	"    import sys, importlib.util, importlib.machinery\n"
	"    name, path = 'pycell._warm', '" JAIL_LIB_DIR "/pycell/_warm.py'\n"
	"    spec = importlib.util.spec_from_file_location(\n"
	"        name, path, loader=importlib.machinery.SourceFileLoader(name, path))\n"
	"    m = importlib.util.module_from_spec(spec)\n"
	"    with open(host + '/pycell/_warm.py', 'rb') as f:\n"
	"        code = compile(f.read(), path, 'exec', dont_inherit=True)\n"
	"    sys.modules[name] = m\n"
	"    exec(code, m.__dict__)\n"
	"    m.preload(host)\n"
	"_pycell_boot(%s)\n"
	"del _pycell_boot\n";

/* module.name, a new reference kept for the zygote's life; NULL (printed)
 * when missing */
static void *python_function(const char *module, const char *name)
{
	void *mod = py.ImportModule(module);
	void *fn = mod ? py.GetAttrString(mod, name) : NULL;
	if (mod)
		py.DecRef(mod);
	if (!fn)
		py.ErrPrint();
	return fn;
}

/* The policy's python.preload, imported by pycell._warm.preload_modules
 * (the names and its report are JSON text) with what they write at import
 * kept in scratch, the supervisor's directory: the report, for the
 * supervisor, in *report (parsed); -1 with err when it refused a module. */
static int preload(const struct policy *p, const char *scratch, json_t **report, struct pc_err *err)
{
	json_t *names = json_array(), *r;
	cleanup_free char *arg = NULL;
	void *fn, *res = NULL;
	const char *text = NULL, *refused;
	int rc = 0;

	for (size_t i = 0; i < p->n_python_preload; i++)
		json_array_append_new(names, json_string(p->python_preload[i]));
	arg = json_dumps(names, JSON_COMPACT);
	json_decref(names);
	fn = python_function("pycell._warm", "preload_modules");
	if (fn && arg)
		res = py.CallFunction(fn, "ss", arg, scratch ? scratch : "");
	if (fn)
		py.DecRef(fn);
	if (res)
		text = py.UnicodeAsUTF8(res);
	if (!text) {
		py.ErrPrint();
		if (res)
			py.DecRef(res);
		return pc_fail(err, EINVAL, "warm", "python.preload: the runtime's preload_modules failed (its "
			       "traceback is on standard error)");
	}
	r = json_loads(text, 0, NULL);
	py.DecRef(res);
	if ((refused = json_string_value(json_object_get(r, "refused"))))
		rc = pc_fail(err, EPERM, "warm", "%s", refused);
	else if (!r)
		rc = pc_fail(err, EINVAL, "warm", "python.preload: the runtime's report is not JSON");
	if (rc < 0) {
		json_decref(r);
		return rc;
	}
	*report = r;
	return 0;
}

/* os.environ of the zygote made what a cold run's python has (without the
 * flags' equivalents), by _warm.set_environment: every clone inherits it
 * and need not set it (60 copy-on-write faults a run when it did). */
static int set_cell_environment(const struct policy *p, struct pc_err *err)
{
	json_t *env = json_object();
	cleanup_free char *text = NULL;
	char **envp = program_envp(p, false);
	void *fn, *res = NULL;
	bool ok = true;

	for (char **e = envp; *e; e++) {
		char *eq = strchr(*e, '=');
		*eq = '\0';
		ok &= json_object_set_new(env, *e, json_string(eq + 1)) == 0;
		free(*e);
	}
	free(envp);
	text = ok ? json_dumps(env, JSON_COMPACT) : NULL;
	json_decref(env);
	if (!text)
		return pc_fail(err, EINVAL, "warm", "the policy's environment is not valid UTF-8");
	fn = python_function("pycell._warm", "set_environment");
	if (fn)
		res = py.CallFunction(fn, "s", text);
	if (fn)
		py.DecRef(fn);
	if (call_status(res, 1) != 0)
		return pc_fail(err, EINVAL, "warm", "setting the runs' environment failed (its traceback is on "
			       "standard error)");
	return 0;
}

/* What every jail's python runs first, PyOS_AfterFork_Child (the
 * interpreter's locks made anew, then the modules' at-fork hooks:
 * threading's, logging's, random's, pycell's reseeding), run once here
 * too, before gc.freeze: the first run of those functions in a process
 * writes what later runs do not (their code's specialization, what they
 * make at first use), and written here it is the zygote's, shared, not
 * every jail's own.  Measured (tests/bench/RESULTS-data.md): an idle
 * session's python with the data stack 3,132 -> 3,036 KiB of its own, a
 * warm run's CPU 3 ms less.  Safe outside a fork: the zygote is one
 * thread (python.preload refuses a module that leaves another), holds the
 * interpreter's lock and is inside no import.  Not in sanitizer builds:
 * the interpreter leaks the locks it replaces (on purpose: after a fork,
 * one may be held by a thread that was not copied), which LeakSanitizer
 * would report at the zygote's end. */
static void prime_after_fork(void)
{
#ifndef __SANITIZE_ADDRESS__
	py.AfterForkChild();
#endif
}

/* The free blocks of pymalloc's pools that hold objects, allocated and
 * never freed.  A jail's python puts its new objects in those blocks
 * first: one allocation in each of a hundred pools spread over the
 * zygote's heap, each a page copied on write.  Filled, they make a jail's
 * objects start pools of their own, a few pages.  The counts are from
 * pymalloc's statistics table (class, size, pools, blocks used, blocks
 * free), which an interpreter built without pymalloc does not print:
 * then nothing is done.  At most FILL_MAX bytes, against a heap of mostly
 * empty pools.  The bytes allocated. */
#define FILL_MAX (16u << 20)
static size_t fill_pools(void)
{
	char *buf = NULL, *line, *save = NULL;
	size_t len = 0, bytes = 0;
	bool table = false;
	FILE *f;

	if (!py.DebugMallocStats || !(f = open_memstream(&buf, &len)))
		return 0;
	if (py.DebugMallocStats(f) == 0) {
		fclose(f);
		free(buf);
		return 0;
	}
	fclose(f);
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned cls, size;
		unsigned long pools, used, avail;
		if (!table) {
			table = strncmp(line, "-----", 5) == 0;
			continue;
		}
		if (sscanf(line, "%u %u %lu %lu %lu", &cls, &size, &pools, &used, &avail) != 5 || !size)
			break;
		for (; avail && bytes + size <= FILL_MAX; avail--, bytes += size)
			py.ObjectMalloc(size);
	}
	free(buf);
	return bytes;
}

/* The last of the zygote's start, once every module is in: what a jail's
 * python would otherwise write to the zygote's pages in its first moments
 * (each write a page copied into that jail, its own as long as it lives)
 * is written here instead, once.
 * - The interpreter's type-attribute cache (4,096 entries, each holding a
 *   reference to an attribute name) is full of the names the preload
 *   looked up; a jail's lookups evict them, each eviction a write to the
 *   evicted name's reference count, on a page of its own.  Emptied, and
 *   filled again by a sample cell (pycell._cell.prime, which also makes
 *   what a cell's first run makes and keeps) and the at-fork hooks with
 *   the names a jail looks up.
 * - A collection, which also empties the interpreter's free lists
 *   (tuples, floats, frames...) that a jail's first collection would
 *   otherwise empty, writing to every page they lie on; the pools filled
 *   (fill_pools); then gc.freeze(): what the zygote allocated is never
 *   collected, so a collection in a run does not walk it and copy every
 *   page of it.
 * Measured (tests/bench/RESULTS-data.md): an idle session's python with
 * the data stack copied 680 pages of the zygote before, 430 after. */
static int settle(const char *runtime_dir, struct pc_err *err)
{
	void *prime = python_function("pycell._cell", "prime"), *res;
	size_t filled;
	if (!prime)
		return pc_fail(err, EINVAL, "warm", "the pycell runtime in %s lacks pycell._cell.prime", runtime_dir);
	py.TypeClearCache();
	res = py.CallFunction(prime, NULL);
	py.DecRef(prime);
	if (!res) {
		py.ErrPrint();
		return pc_fail(err, EINVAL, "warm", "the sample cell failed (its traceback is on standard error)");
	}
	py.DecRef(res);
	prime_after_fork();
	if (py.RunSimpleStringFlags("__import__('gc').collect()\n", NULL) != 0)
		return pc_fail(err, EINVAL, "warm", "gc.collect failed");
	filled = fill_pools();
	log_debug("zygote: %zu bytes of pymalloc's free blocks filled", filled);
	if (py.RunSimpleStringFlags("__import__('gc').freeze()\n", NULL) != 0)
		return pc_fail(err, EINVAL, "warm", "gc.freeze failed");
	return 0;
}

/* pycell._warm._hot_use, the C function above */
static int give_hot_use(struct pc_err *err)
{
	void *mod = py.ImportModule("pycell._warm"), *fn = NULL;
	int rc = -1;
	if (mod && (fn = py.CFunctionNewEx(&hot_use_def, NULL, NULL)))
		rc = py.SetAttrString(mod, "_hot_use", fn);
	if (fn)
		py.DecRef(fn);
	if (mod)
		py.DecRef(mod);
	if (rc < 0) {
		py.ErrPrint();
		return pc_fail(err, EINVAL, "warm", "giving pycell._warm its _hot_use failed");
	}
	return 0;
}

static int load_python(const char *libname, const struct policy *p, const char *runtime_dir, const char *scratch,
		       json_t **report, struct pc_err *err)
{
	void *h = dlopen(libname, RTLD_NOW | RTLD_GLOBAL);
	char **envp;
	wchar_t *prog;
	if (!h)
		return pc_fail(err, ENOENT, "warm", "load %s: %s (install libpython3-dev or disable warm starts)",
			       libname, dlerror());
#define SYM(field, name)                                                                   \
	if (!(*(void **)&py.field = dlsym(h, name)))                                           \
		return pc_fail(err, ENOENT, "warm", "%s has no %s", libname, name);
	SYM(SetProgramName, "Py_SetProgramName");
	SYM(DecodeLocale, "Py_DecodeLocale");
	SYM(InitializeEx, "Py_InitializeEx");
	SYM(RunSimpleStringFlags, "PyRun_SimpleStringFlags");
	SYM(RunSimpleFileExFlags, "PyRun_SimpleFileExFlags");
	SYM(FinalizeEx, "Py_FinalizeEx");
	SYM(AfterForkChild, "PyOS_AfterFork_Child");
	SYM(LongAsLong, "PyLong_AsLong");
	SYM(ImportModule, "PyImport_ImportModule");
	SYM(GetAttrString, "PyObject_GetAttrString");
	SYM(CallFunction, "PyObject_CallFunction");
	SYM(ErrPrint, "PyErr_Print");
	SYM(DecRef, "Py_DecRef");
	SYM(UnicodeAsUTF8, "PyUnicode_AsUTF8");
	SYM(TypeClearCache, "PyType_ClearCache");
	SYM(ObjectMalloc, "PyObject_Malloc");
	SYM(CFunctionNewEx, "PyCFunction_NewEx");
	SYM(SetAttrString, "PyObject_SetAttrString");
	SYM(LongFromSize_t, "PyLong_FromSize_t");
	SYM(ErrOccurred, "PyErr_Occurred");
#undef SYM
	*(void **)&py.DebugMallocStats = dlsym(h, "_PyObject_DebugMallocStats");
	/* the interpreter starts with the environment a cold run's python
	 * sees, plus the flags' equivalents */
	clearenv();
	envp = program_envp(p, false);
	for (char **e = envp; *e; e++) {
		putenv(*e); /* owned by environ from here on */
	}
	free(envp);
	for (size_t i = 0; i < p->n_python_flags; i++) {
		const char *e = zygote_flag_env(p->python_flags[i]);
		if (e && *e)
			putenv((char *)e);
	}
	prog = py.DecodeLocale(p->python, NULL);
	if (!prog)
		return pc_fail(err, EINVAL, "warm", "interpreter path %s", p->python);
	py.SetProgramName(prog);
	py.InitializeEx(1);
	/* Modules every program pays for anyway, and those cells use: loaded
	 * once here, without binding names in __main__. */
	/* then gc.freeze(): what the zygote allocated is never collected, so
	 * a collection in a run does not walk it and copy every page of it */
	if (py.RunSimpleStringFlags("__import__('json')\n__import__('encodings.idna')\n__import__('random')\n",
				    NULL) != 0)
		return pc_fail(err, EINVAL, "warm", "preloading modules failed");
	{
		json_t *lit = json_string(runtime_dir);
		cleanup_free char *q = lit ? json_dumps(lit, JSON_ENCODE_ANY) : NULL;
		cleanup_free char *code = q ? xasprintf(bootstrap, q) : NULL;
		json_decref(lit);
		if (!code || py.RunSimpleStringFlags(code, NULL) != 0)
			return pc_fail(err, EINVAL, "warm", "preloading the pycell runtime from %s failed",
				       runtime_dir);
	}
	/* the policy's modules, after the runtime (whose own imports they
	 * may share) and before gc.freeze (which keeps them out of every
	 * run's collections) */
	if (preload(p, scratch, report, err) < 0)
		return -1;
	if (!(warm_main_fn = python_function("pycell._cell", "warm_main")) ||
	    !(finish_fn = python_function("pycell._warm", "finish")) ||
	    !(ready_fn = python_function("pycell._warm", "ready")) ||
	    !(first_uses_fn = python_function("pycell._warm", "first_uses")) ||
	    !(first_use_fn = python_function("pycell._warm", "first_use")) ||
	    !(prelude_fn = python_function("pycell._warm", "script_prelude")))
		return pc_fail(err, EINVAL, "warm", "the pycell runtime in %s lacks a function warm starts call",
			       runtime_dir);
	/* the environment every run's python has, set once here (after the
	 * imports, which ran with the flags' equivalents too) */
	if (set_cell_environment(p, err) < 0)
		return -1;
	if (give_hot_use(err) < 0)
		return -1;
	return settle(runtime_dir, err);
}

/* The jails this zygote made that may still live, as pidfds: when the
 * supervisor goes, they are killed and waited for before the zygote exits,
 * so that its wait for the zygote is a wait for all of them (a jail left
 * to its parent-death signal would be reaped by whoever inherits it,
 * after the supervisor has returned). */
static struct {
	int *fd;
	size_t n, cap;
} jails;

static void jails_add(int pidfd)
{
	struct pollfd p = { .events = POLLIN };
	size_t k = 0;
	/* forget the ones that have ended (their pidfd is readable) */
	for (size_t i = 0; i < jails.n; i++) {
		p.fd = jails.fd[i];
		if (poll(&p, 1, 0) == 1)
			close(jails.fd[i]);
		else
			jails.fd[k++] = jails.fd[i];
	}
	jails.n = k;
	if (jails.n == jails.cap)
		jails.fd = xrealloc(jails.fd, (jails.cap = jails.cap ? 2 * jails.cap : 16) * sizeof(int));
	jails.fd[jails.n++] = pidfd;
}

static void jails_end(void)
{
	for (size_t i = 0; i < jails.n; i++) {
		pidfd_send_signal(jails.fd[i], SIGKILL, NULL, 0);
		close(jails.fd[i]);
	}
	free(jails.fd);
	/* SIGCHLD is ignored: wait() returns ECHILD once every child has
	 * ended, and a jail's init ends after the rest of its pid namespace */
	while (wait(NULL) >= 0 || errno == EINTR)
		;
}

/* pycell-init, which makes this zygote's jails' inits small (jail.h,
 * small_init), above the descriptors a jail places at 0..3; without it
 * they are copies of the zygote, as a cold run's are of the supervisor, and
 * the log says why (pycell doctor does too). */
static void open_small_init(const char *path, struct jail_spec *tmpl)
{
	int fd = path ? open(path, O_PATH | O_CLOEXEC) : -1;
	struct pc_err err = { 0 };
	struct stat st;

	if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & S_IXOTH) &&
	    small_init_prepare(&err) == 0 && (tmpl->init_fd = fcntl(fd, F_DUPFD_CLOEXEC, 10)) >= 0) {
		tmpl->small_init = true;
	} else if (err.msg[0]) {
		log_warn("zygote: %s; a jail's init is a copy of the zygote", err.msg);
	} else {
		log_warn("zygote: %s: %s; a jail's init is a copy of the zygote", path ? path : "pycell-init",
			 fd < 0 ? strerror(errno) : "not a file anyone may execute");
	}
	if (fd >= 0)
		close(fd);
}

static int zygote_serve_one(int ctl, struct jail_spec *tmpl)
{
	struct spawn_req req;
	struct spawn_reply reply = { 0 };
	struct jail_spec s = *tmpl;
	struct jail j = { 0 };
	int fds[REQ_MAX_FDS], nfds;
	char *buf = MAP_FAILED;
	ssize_t n = recv_fds(ctl, &req, sizeof(req), fds, REQ_MAX_FDS, &nfds);

	if (n < 0 && errno == EINTR)
		return 0;
	if (n == 0 || (n < 0 && errno != EPROTO))
		return -1; /* the supervisor is gone */
	if (warm_request_check(&req, n, nfds, &reply.err) < 0)
		goto close_fds;
	if (req.files_len)
		buf = mmap(NULL, req.files_len, PROT_READ, MAP_PRIVATE, fds[REQ_FD_MEMFD], 0);
	else
		buf = NULL;
	if (buf == MAP_FAILED) {
		pc_syserr(&reply.err, "warm", "map the program");
		goto close_fds;
	}
	if (warm_request_unpack(&req, fds, buf, &s, &reply.err) < 0) {
		if (buf)
			munmap(buf, req.files_len);
		goto close_fds;
	}
	/* a jail asked ahead (spawn_ahead) warms up; one whose cell comes
	 * at once does not */
	s.warm_up = s.park && ctl == ZYGOTE_AHEAD_FD;
	if (jail_clone(&s, &j, &reply.err) == 0) {
		int out[3] = { j.pidfd, j.sync_fd, j.prog_fd };
		reply.ok = 1;
		reply.small_init = j.small;
		reply.pid = j.pid;
		reply.n_fds = j.prog_fd >= 0 ? 3 : 2;
		/* A small init goes on once released, which the supervisor
		 * does as it reads this; until then it waits on its sync
		 * socket.  So the supervisor's ends are the message's alone
		 * before we wait for that init: unsent, or dropped by a
		 * supervisor that had no room for them (EMFILE: the kernel
		 * drops what does not fit), they close, and the init ends at
		 * the EOF.  Held here, it and we would wait for each other */
		(void)send_fds(ctl, &reply, sizeof(reply), out, reply.n_fds);
		close(j.sync_fd);
		if (j.prog_fd >= 0)
			close(j.prog_fd);
		jail_small_wait();
		jails_add(j.pidfd);
		if (buf)
			munmap(buf, req.files_len);
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		return 0;
	}
	if (buf)
		munmap(buf, req.files_len);
close_fds:
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	send(ctl, &reply, sizeof(reply), MSG_NOSIGNAL);
	return 0;
}

int cmd_zygote(int argc, char **argv)
{
	struct spawn_reply reply = { 0 };
	struct policy pol;
	struct seccomp_filter *filter = NULL;
	struct jail_spec tmpl = { 0 };
	char *python_argv[2];
	char *cfg_text = xmalloc(ZYGOTE_CONFIG_MAX + 1);
	json_t *cfg, *pj;
	char *ptext = NULL, *text;
	json_t *report = NULL;
	const char *runtime_dir, *libname;
	ssize_t n;

	(void)argc;
	(void)argv;
	/* children are reaped by the kernel; their status reaches the
	 * supervisor through the jail's own report */
	signal(SIGCHLD, SIG_IGN);
	n = recv(ZYGOTE_FD, cfg_text, ZYGOTE_CONFIG_MAX, 0);
	if (n <= 0)
		return 1;
	cfg_text[n] = '\0';
	cfg = json_loads(cfg_text, 0, NULL);
	free(cfg_text);
	pj = json_object_get(cfg, "policy");
	runtime_dir = json_string_value(json_object_get(cfg, "runtime_dir"));
	libname = json_string_value(json_object_get(cfg, "libpython"));
	if (!pj || !runtime_dir || !libname) {
		pc_fail(&reply.err, EPROTO, "warm", "bad zygote configuration");
		goto answer;
	}
	jail_host_id_base = (uid_t)json_integer_value(json_object_get(cfg, "host_id_base"));
	/* info at most: a warm jail's debug steps would be timed from the
	 * zygote's start, not the run's */
	if (json_integer_value(json_object_get(cfg, "log_level")) >= LOG_INFO)
		log_level = LOG_INFO;
	ptext = json_dumps(pj, JSON_COMPACT);
	if (!ptext || policy_parse(ptext, "zygote", &pol, &reply.err) < 0)
		goto answer;
	if (seccomp_filter_compile(&pol, &filter, &reply.err) < 0)
		goto answer;
	if (load_python(libname, &pol, runtime_dir, json_string_value(json_object_get(cfg, "scratch")), &report,
			&reply.err) < 0)
		goto answer;
	{
		/* said in the report, which the supervisor logs */
		int refused;
		uint64_t t0 = now_ms();
		size_t moved = huge_pages_collapse(&refused);
		json_object_set_new(report, "huge_pages_mib", json_integer((json_int_t)(moved >> 20)));
		json_object_set_new(report, "huge_pages_ms", json_integer((json_int_t)(now_ms() - t0)));
		if (refused)
			json_object_set_new(report, "huge_pages_refused", json_string(strerror(refused)));
	}
	reply.ok = 1;
answer:
	free(ptext);
	send(ZYGOTE_FD, &reply, sizeof(reply), MSG_NOSIGNAL);
	if (!reply.ok) {
		json_decref(report);
		return 1;
	}
	/* then what python.preload loaded */
	text = json_dumps(report, JSON_COMPACT);
	json_decref(report);
	if (!text)
		text = xstrdup("{\"error\":\"its report could not be written (out of memory)\"}");
	else if (strlen(text) > ZYGOTE_REPORT_MAX) {
		free(text);
		text = xstrdup("{\"error\":\"its report is larger than 64 KiB\"}");
	}
	send(ZYGOTE_FD, text, strlen(text), MSG_NOSIGNAL);
	free(text);
	python_argv[0] = pol.python;
	python_argv[1] = NULL;
	tmpl.policy = &pol;
	tmpl.filter = filter;
	tmpl.argv = python_argv;
	tmpl.runtime_dir = runtime_dir;
	tmpl.fonts_dir = json_string_value(json_object_get(cfg, "fonts_dir"));
	tmpl.run_inline = zygote_run_inline;
	open_small_init(json_string_value(json_object_get(cfg, "init")), &tmpl);
	for (;;) {
		struct pollfd pf[2] = { { .fd = ZYGOTE_FD, .events = POLLIN },
					{ .fd = ZYGOTE_AHEAD_FD, .events = POLLIN } };
		int ctl;
		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		/* a run waiting for its jail before the pool's next one */
		ctl = pf[0].revents ? ZYGOTE_FD : ZYGOTE_AHEAD_FD;
		/* the hot pages, at the first jail asked ahead (the only ones
		 * that copy them): a zygote of `pycell run --warm`, or of
		 * sessions alone, forks no probe; and before that request's
		 * descriptors are received, so the probe holds none of them.
		 * The zygote serves nothing meanwhile, once: 15 ms with the
		 * default policy on the project's test machine, 0.35 s with
		 * the data stack, whose probe draws a figure and a frame */
		if (ctl == ZYGOTE_AHEAD_FD && !hot_learned) {
			hot_learned = true;
			if (hot_pages_learn(hot, HOT_PHASES_MAX, hot_probe) == 0) {
				log_debug("zygote: a ready jail copies %zu pages ahead, in %zu ranges", hot[0].pages,
					  hot[0].n);
				for (size_t i = 1; i < HOT_PHASES_MAX; i++)
					if (hot[i].n)
						log_debug("zygote: and %zu pages, in %zu ranges, when its cell names the "
							  "module of first use %zu", hot[i].pages, hot[i].n, i - 1);
			}
		}
		if (zygote_serve_one(ctl, &tmpl) < 0)
			break;
	}
	jails_end();
	hot_pages_free(hot, HOT_PHASES_MAX);
	return 0;
}
