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
 * dozen functions used are declared below with their documented
 * signatures (stable C API). */
#include "config.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <wchar.h>

#include <jansson.h>

#include "base/log.h"
#include "jail/rootfs.h"
#include "jail/seccomp.h"
#include "run/run.h"
#include "run/zygote.h"

#define ZYGOTE_FD 3
#define ZYGOTE_REPLY_MS 10000
#define WARM_FILE ".warm.json"
#define CONFIG_MAX (1 << 20)

enum { Z_SPAWN = 1 };

/* The fds of a request: stdin, stdout, stderr, tool socket, the memfd
 * with the files, then the run's cgroup2 dir when cgroup_into, then
 * n_cgroup_tasks cgroup v1 tasks files. */
enum { REQ_FD_MEMFD = 4, REQ_FIXED_FDS = 5, REQ_MAX_FDS = REQ_FIXED_FDS + 1 + CGROUP_MAX_TASKS };
_Static_assert(REQ_MAX_FDS <= FDS_MAX, "a request's fds fit one packet");

struct spawn_req {
	uint32_t type;
	uint64_t files_len;   /* bytes in the memfd */
	uint32_t cgroup_into;
	uint32_t n_cgroup_tasks;
	uint32_t park;        /* a ready jail for a cell: no files (an empty memfd) */
};

struct spawn_reply {
	int32_t ok;
	int32_t pid;
	struct pc_err err;
};

struct zygote {
	uint64_t started_ms;  /* to restart a dead zygote at most once a second */
	pid_t pid;
	int ctl;              /* supervisor end of the control socket */
	struct policy policy; /* the policy the zygote was started with */
	char *runtime_dir;
	bool dead;
};

static int wait_readable(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int n;
	do
		n = poll(&p, 1, ms);
	while (n < 0 && errno == EINTR);
	if (n == 0)
		errno = ETIMEDOUT;
	return n > 0 ? 0 : -1;
}

/* ------------------------------------------------------------ the policy */

/* Interpreter flags a zygote can honour: each has an environment
 * variable that Py_Initialize reads. */
static const char *flag_env(const char *flag)
{
	static const char *const map[][2] = {
		{ "-B", "PYTHONDONTWRITEBYTECODE=1" }, { "-u", "PYTHONUNBUFFERED=1" },
		{ "-O", "PYTHONOPTIMIZE=1" }, { "-OO", "PYTHONOPTIMIZE=2" },
		{ "-s", "PYTHONNOUSERSITE=1" }, { "-q", "" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(map); i++)
		if (strcmp(flag, map[i][0]) == 0)
			return map[i][1];
	return NULL;
}

/* "libpython3.11.so.1.0" for an interpreter whose real name is python3.11 */
static int libpython_name(const char *python, char *out, size_t len, struct pc_err *err)
{
	char real[PATH_MAX];
	const char *base;
	unsigned minor;
	char tail;
	if (!realpath(python, real))
		return pc_syserr(err, "warm", "interpreter %s", python);
	base = strrchr(real, '/') + 1;
	if (sscanf(base, "python3.%u%c", &minor, &tail) != 1)
		return pc_fail(err, ENOTSUP, "warm", "interpreter %s (%s) is not named python3.N", python, real);
	snprintf(out, len, "libpython3.%u.so.1.0", minor);
	return 0;
}

/* ------------------------------------------------------------ supervisor side */

static int zygote_exec(struct zygote *z, struct pc_err *err);

int zygote_start(const struct policy *p, const char *runtime_dir, struct zygote **out,
		 struct pc_err *err)
{
	struct zygote *z = xcalloc(1, sizeof(*z));
	json_t *pj;
	char *ps;

	z->ctl = -1;
	z->runtime_dir = xstrdup(runtime_dir);
	/* our own copy, parsed the way the zygote parses it */
	pj = policy_to_json(p);
	ps = json_dumps(pj, JSON_COMPACT);
	json_decref(pj);
	if (!ps || policy_parse(ps, "zygote", &z->policy, err) < 0 || zygote_exec(z, err) < 0) {
		free(ps);
		zygote_free(z);
		return -1;
	}
	free(ps);
	*out = z;
	return 0;
}

static int zygote_restart(struct zygote *z, struct pc_err *err)
{
	if (now_ms() - z->started_ms < 1000)
		return pc_fail(err, EPIPE, "warm", "the zygote is gone (restarted less than a second ago)");
	log_warn("warm starts: the zygote (pid %d) stopped; starting a new one", (int)z->pid);
	if (z->ctl >= 0)
		close(z->ctl);
	kill(z->pid, SIGKILL);
	waitpid(z->pid, NULL, 0);
	z->ctl = -1;
	z->pid = 0;
	return zygote_exec(z, err);
}

/* Start the zygote process for z's policy and wait until it is ready. */
static int zygote_exec(struct zygote *z, struct pc_err *err)
{
	const struct policy *p = &z->policy;
	const char *runtime_dir = z->runtime_dir;
	static const char *const pass_env[] = { "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS" };
	char *envp[ARRAY_SIZE(pass_env) + 1] = { 0 };
	char *argv[] = { "pycell", "__zygote", NULL };
	char libname[64];
	struct spawn_reply reply;
	json_t *cfg;
	char *text;
	int sv[2], n_env = 0;
	pid_t pid, parent;

	z->started_ms = now_ms();
	z->dead = true; /* until it answers */

	for (size_t i = 0; i < p->n_python_flags; i++)
		if (!flag_env(p->python_flags[i]))
			return pc_fail(err, ENOTSUP, "warm", "interpreter flag %s has no warm-start equivalent",
				       p->python_flags[i]);
	if (libpython_name(p->python, libname, sizeof(libname), err) < 0)
		return -1;
	for (size_t i = 0; i < ARRAY_SIZE(pass_env); i++) {
		const char *v = getenv(pass_env[i]);
#ifdef __SANITIZE_ADDRESS__
		/* the leak check at exit needs ptrace, which warm jails deny */
		if (i == 0) {
			envp[n_env++] = xasprintf("%s=%s%sdetect_leaks=0", pass_env[i], v ? v : "", v ? ":" : "");
			continue;
		}
#endif
		if (v)
			envp[n_env++] = xasprintf("%s=%s", pass_env[i], v);
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return pc_syserr(err, "warm", "socketpair");
	parent = getpid();
	pid = fork();
	if (pid < 0) {
		pc_syserr(err, "warm", "fork the zygote");
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		/* dies with the supervisor, and takes its jails along (jail.c) */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent || null < 0 || dup2(null, 0) < 0 ||
		    dup2(null, 1) < 0 || dup2(sv[1], ZYGOTE_FD) < 0 ||
		    syscall(SYS_close_range, ZYGOTE_FD + 1, ~0U, 0) < 0)
			_exit(127);
		execve("/proc/self/exe", argv, envp);
		_exit(127);
	}
	for (int i = 0; i < n_env; i++)
		free(envp[i]);
	close(sv[1]);

	z->pid = pid;
	z->ctl = sv[0];
	cfg = json_pack("{s:o,s:s,s:s,s:I}", "policy", policy_to_json(p), "runtime_dir", runtime_dir,
			"libpython", libname, "host_id_base", (json_int_t)jail_host_id_base);
	text = json_dumps(cfg, JSON_COMPACT);
	json_decref(cfg);
	if (!text || send(z->ctl, text, strlen(text), MSG_NOSIGNAL) < 0) {
		pc_syserr(err, "warm", "configure the zygote");
		goto fail;
	}
	free(text);
	text = NULL;
	if (wait_readable(z->ctl, ZYGOTE_REPLY_MS) < 0 ||
	    recv(z->ctl, &reply, sizeof(reply), 0) != (ssize_t)sizeof(reply)) {
		pc_syserr(err, "warm", "the zygote did not start");
		goto fail;
	}
	if (!reply.ok) {
		*err = reply.err;
		goto fail;
	}
	z->dead = false;
	log_debug("zygote %d ready (%s)", (int)pid, libname);
	return 0;
fail:
	free(text);
	return -1;
}

bool zygote_serves(const struct zygote *z, const struct policy *p)
{
	return z && policy_equal(&z->policy, p);
}

pid_t zygote_pid(const struct zygote *z)
{
	return z ? z->pid : 0;
}

/* The program files in one memfd: for each file its name, a NUL, its
 * length (8 bytes, native order) and its bytes.  A script's also carry
 * .warm.json: its sys.argv, environment and sys.path[0], for the prelude
 * (a cell's are the same for every cell, set in the ready jail ahead). */
static int pack_files(const struct jail_spec *s, bool script, uint64_t *len, struct pc_err *err)
{
	const struct policy *p = s->policy;
	cleanup_free char *wtext = NULL;
	int fd, n_files = s->n_files + (script ? 1 : 0);
	uint64_t total = 0;

	if (script) {
		json_t *warm = json_object(), *argv = json_array(), *env = json_object();
		bool ok = true;
		/* sys.argv as python would set it from the cold argv; json_string
		 * refuses bytes that are not UTF-8 (python would decode them with
		 * surrogateescape: such runs stay cold) */
		for (size_t i = 1 + p->n_python_flags; s->argv[i]; i++)
			ok &= json_array_append_new(argv, json_string(s->argv[i])) == 0;
		for (size_t i = 0; s->envp[i]; i++) {
			const char *eq = strchr(s->envp[i], '=');
			char *k = xasprintf("%.*s", (int)(eq - s->envp[i]), s->envp[i]);
			ok &= json_object_set_new(env, k, json_string(eq + 1)) == 0;
			free(k);
		}
		json_object_set_new(warm, "argv", argv);
		json_object_set_new(warm, "env", env);
		json_object_set_new(warm, "path0", json_string(JAIL_RUN_DIR));
		wtext = ok ? json_dumps(warm, JSON_COMPACT) : NULL;
		json_decref(warm);
		if (!wtext)
			return pc_fail(err, EINVAL, "warm", "arguments or environment are not valid UTF-8");
	}

	fd = memfd_create("pycell-run", MFD_CLOEXEC);
	if (fd < 0)
		return pc_syserr(err, "warm", "memfd_create");
	for (int i = 0; i < n_files; i++) {
		const char *name = i < s->n_files ? s->files[i].name : WARM_FILE;
		const char *data = i < s->n_files ? s->files[i].data : wtext;
		uint64_t n = i < s->n_files ? s->files[i].len : strlen(wtext);
		if (write_all(fd, name, strlen(name) + 1) < 0 || write_all(fd, &n, sizeof(n)) < 0 ||
		    write_all(fd, data, n) < 0) {
			pc_syserr(err, "warm", "write the program for the zygote");
			close(fd);
			return -1;
		}
		total += strlen(name) + 1 + sizeof(n) + n;
	}
	*len = total;
	return fd;
}

int zygote_deliver(const struct jail_spec *s, const struct jail *j, struct pc_err *err)
{
	uint64_t len;
	cleanup_close int memfd = pack_files(s, false, &len, err);
	if (memfd < 0)
		return -1;
	if (len > JAIL_PARK_FILES_MAX)
		return pc_fail(err, EFBIG, "warm", "the program is too large for a ready jail");
	return jail_deliver(j, memfd, len, err);
}

int zygote_spawn(struct zygote *z, const struct jail_spec *s, struct jail *j, struct pc_err *err)
{
	struct spawn_req req = { .type = Z_SPAWN, .park = s->park };
	struct spawn_reply reply;
	int fds[2];
	cleanup_close int memfd = -1;

	if (z->dead && zygote_restart(z, err) < 0)
		return -1;
	if (s->park) {
		memfd = memfd_create("pycell-ready", MFD_CLOEXEC);
		if (memfd < 0)
			return pc_syserr(err, "warm", "memfd_create");
	} else {
		memfd = pack_files(s, true, &req.files_len, err);
	}
	if (memfd < 0)
		return -1;
	{
		int out[REQ_MAX_FDS] = { s->stdio[0], s->stdio[1], s->stdio[2], s->tool_fd, memfd };
		int n = REQ_FIXED_FDS;
		if (s->cgroup.into)
			out[n++] = s->cgroup.dir_fd;
		for (int i = 0; i < s->cgroup.n_tasks; i++)
			out[n++] = s->cgroup.tasks[i];
		req.cgroup_into = s->cgroup.into;
		req.n_cgroup_tasks = (uint32_t)s->cgroup.n_tasks;
		if (send_fds(z->ctl, &req, sizeof(req), out, n) < 0)
			goto dead;
	}
	if (wait_readable(z->ctl, ZYGOTE_REPLY_MS) < 0)
		goto dead;
	{
		/* a failure reply carries no fds */
		char ctl[CMSG_SPACE(sizeof(int) * 2)];
		struct iovec iov = { &reply, sizeof(reply) };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
				     .msg_controllen = sizeof(ctl) };
		struct cmsghdr *c;
		ssize_t n = recvmsg(z->ctl, &mh, MSG_CMSG_CLOEXEC);
		if (n != (ssize_t)sizeof(reply))
			goto dead;
		c = CMSG_FIRSTHDR(&mh);
		if (!reply.ok) {
			*err = reply.err;
			return -1;
		}
		if (!c || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(sizeof(fds)))
			goto dead;
		memcpy(fds, CMSG_DATA(c), sizeof(fds));
	}
	j->pid = reply.pid;
	j->pidfd = fds[0];
	j->sync_fd = fds[1];
	return 0;
dead:
	pc_syserr(err, "warm", "the zygote stopped answering");
	z->dead = true;
	return -1;
}

void zygote_free(struct zygote *z)
{
	if (!z)
		return;
	if (z->ctl >= 0)
		close(z->ctl);
	if (z->pid > 0) {
		kill(z->pid, SIGKILL);
		waitpid(z->pid, NULL, 0);
	}
	policy_free(&z->policy);
	free(z->runtime_dir);
	free(z);
}

/* ------------------------------------------------------------ the zygote */

static struct {
	void (*SetProgramName)(const wchar_t *);
	wchar_t *(*DecodeLocale)(const char *, size_t *);
	void (*InitializeEx)(int);
	int (*RunSimpleStringFlags)(const char *, void *);
	int (*RunSimpleFileExFlags)(FILE *, const char *, int, void *);
	int (*FinalizeEx)(void);
	void (*AfterForkChild)(void);
	void *(*SysGetObject)(const char *);
	long (*LongAsLong)(void *);
} py;

/* Runs in __main__ before a script; leaves no names behind. */
static const char warm_prelude[] =
	"def _pycell_warm():\n"
	"    import os, sys, json\n"
	"    with open('" JAIL_RUN_DIR "/" WARM_FILE "', 'rb') as f:\n"
	"        cfg = json.load(f)\n"
	/* the zygote started with the policy's environment: mostly equal */
	"    if dict(os.environ) != cfg['env']:\n"
	"        os.environ.clear()\n"
	"        os.environ.update(cfg['env'])\n"
	"    sys.argv[:] = cfg['argv']\n"
	"    sys.path.insert(0, cfg['path0'])\n"
	/* the zygote looked for /run/pycell/lib before any jail had it; its
	 * other path entries are the same directories here (/usr is bound) */
	"    sys.path_importer_cache.pop('" JAIL_LIB_DIR "', None)\n"
	"_pycell_warm()\n"
	"del _pycell_warm\n";

/* The same for a cell, in a ready jail before its cell arrives: what
 * `python -c "import pycell._cell ..."` would have for sys.argv,
 * sys.path[0] and os.environ (%s: the environment, a JSON object, which
 * Python reads as a dict), then _cell.warm_up. */
static const char ready_prelude_fmt[] =
	"def _pycell_ready(env):\n"
	"    import os, sys\n"
	"    if dict(os.environ) != env:\n"
	"        os.environ.clear()\n"
	"        os.environ.update(env)\n"
	"    sys.argv[:] = ['-c']\n"
	"    sys.path.insert(0, '')\n"
	"    sys.path_importer_cache.pop('" JAIL_LIB_DIR "', None)\n"
	"    sys.modules['pycell._cell'].warm_up()\n"
	"_pycell_ready(%s)\n"
	"del _pycell_ready\n";
static char *ready_prelude;

/* The end of a warm run: what Py_FinalizeEx does that a program can
 * see (non-daemon threads joined, atexit handlers, __main__'s objects
 * released so their __del__ and file flushes run, like the teardown of a
 * cold python, and the standard streams flushed; a failed flush makes
 * the status 120), without tearing down the interpreter inherited from
 * the zygote, which took 2 ms of copy-on-write faults per run and lost
 * output written at teardown (test_run_cli.py::test_exit_runs_what_teardown_runs). */
static const char warm_exit[] =
	"def _pycell_exit():\n"
	"    import sys, gc\n"
	"    t = sys.modules.get('threading')\n"
	"    if t is not None:\n"
	"        try:\n"
	"            t._shutdown()\n"
	"        except Exception:\n"
	"            sys.excepthook(*sys.exc_info())\n"
	"    import atexit\n"
	"    atexit._run_exitfuncs()\n"
	"    g = sys.modules['__main__'].__dict__\n"
	/* in the order a cold python's teardown releases them: insertion */
	"    for k in list(g):\n"
	"        if k != '__builtins__':\n"
	"            g[k] = None\n"
	"    gc.collect()\n"
	"    ok = True\n"
	/* sys.stdout and sys.stderr as the interpreter flushes them (a
	 * failure is status 120), then the original objects, which a cold
	 * python flushes when it frees them */
	"    for name in ('stdout', 'stderr', '__stdout__', '__stderr__'):\n"
	"        f = getattr(sys, name, None)\n"
	"        if f is None or getattr(f, 'closed', False):\n"
	"            continue\n"
	"        try:\n"
	"            f.flush()\n"
	"        except Exception as e:\n"
	"            if name.startswith('__'):\n"
	"                continue\n"
	"            ok = False\n"
	"            try:\n"
	"                sys.__stderr__.write('Exception ignored on flushing sys.%s: %r\\n' % (name, e))\n"
	"            except Exception:\n"
	"                pass\n"
	"    if not ok:\n"
	"        raise SystemExit(120)\n"
	"_pycell_exit()\n";

/* A ready jail's pid 2 (prog_fd >= 0): get ready, wait for the cell,
 * run it; the status comes back in sys, not as SystemExit, which would
 * tear the interpreter down, and no name is bound in __main__. */
static int run_cell(int prog_fd)
{
	char code[256];
	uint64_t len;
	void *st;
	int fd;

	prctl(PR_SET_NAME, "pycell-ready");
	if (py.RunSimpleStringFlags(ready_prelude, NULL) != 0)
		_exit(125);
	fd = jail_receive_program(prog_fd, &len);
	if (fd < 0)
		_exit(125);
	close(prog_fd);
	prctl(PR_SET_NAME, "python3"); /* exec would have named it after the binary */
	snprintf(code, sizeof(code),
		 "__import__('sys')._pycell_status = __import__('pycell._cell', fromlist=['_']).warm_main(%d, %llu)\n",
		 fd, (unsigned long long)len);
	if (py.RunSimpleStringFlags(code, NULL) != 0)
		return 1;
	st = py.SysGetObject("_pycell_status");
	return st ? (int)py.LongAsLong(st) : 1;
}

static int run_script(const struct jail_spec *s)
{
	char path[PATH_MAX];
	FILE *f;

	prctl(PR_SET_NAME, "python3");
	if (py.RunSimpleStringFlags(warm_prelude, NULL) != 0)
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
	/* also runs the interpreter's at-fork hooks: random reseeds there, so
	 * runs from one zygote do not share its state (test_warm.py) */
	py.AfterForkChild();
	status = prog_fd >= 0 ? run_cell(prog_fd) : run_script(s);
	if (py.RunSimpleStringFlags(warm_exit, NULL) != 0)
		status = 120;
	/* Python has run its atexit handlers and flushed its streams; skip
	 * the C library's (a leak checker's among them: the interpreter
	 * never frees everything) */
	fflush(NULL);
	_exit(status);
}

/* The runtime modules every cell imports (pycell, pycell._cell), loaded
 * from the host's runtime dir (a JSON string literal, which Python reads
 * the same) but compiled and registered under the paths they have in a
 * jail: tracebacks and __file__ name /run/pycell/lib, never a host path,
 * and pycell's submodules are found there. */
static const char preload_runtime[] =
	"def _pycell_preload(host, jail):\n"
	"    import sys, importlib.util, importlib.machinery\n"
	"    for name, rel in (('pycell', '/pycell/__init__.py'), ('pycell._cell', '/pycell/_cell.py')):\n"
	"        path = jail + rel\n"
	"        spec = importlib.util.spec_from_file_location(\n"
	"            name, path, loader=importlib.machinery.SourceFileLoader(name, path),\n"
	"            submodule_search_locations=[jail + '/pycell'] if name == 'pycell' else None)\n"
	"        m = importlib.util.module_from_spec(spec)\n"
	"        with open(host + rel, 'rb') as f:\n"
	"            code = compile(f.read(), path, 'exec', dont_inherit=True)\n"
	"        sys.modules[name] = m\n"
	"        exec(code, m.__dict__)\n"
	"    sys.modules['pycell']._cell = sys.modules['pycell._cell']\n"
	"_pycell_preload(%s, '" JAIL_LIB_DIR "')\n"
	"del _pycell_preload\n";

static int load_python(const char *libname, const struct policy *p, const char *runtime_dir,
		       struct pc_err *err)
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
	SYM(SysGetObject, "PySys_GetObject");
	SYM(LongAsLong, "PyLong_AsLong");
#undef SYM
	/* the interpreter starts with the environment a cold run's python
	 * sees, plus the flags' equivalents */
	clearenv();
	envp = run_jail_envp(p);
	for (char **e = envp; *e; e++) {
		putenv(*e); /* owned by environ from here on */
	}
	free(envp);
	for (size_t i = 0; i < p->n_python_flags; i++) {
		const char *e = flag_env(p->python_flags[i]);
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
		cleanup_free char *code = q ? xasprintf(preload_runtime, q) : NULL;
		json_decref(lit);
		if (!code || py.RunSimpleStringFlags(code, NULL) != 0)
			return pc_fail(err, EINVAL, "warm", "preloading the pycell runtime from %s failed",
				       runtime_dir);
	}
	{
		/* the environment a cell's python gets: without the flags' */
		json_t *env = json_object();
		cleanup_free char *text = NULL;
		bool ok = true;
		envp = run_jail_envp(p);
		for (char **e = envp; *e; e++) {
			char *eq = strchr(*e, '=');
			*eq = '\0';
			ok &= json_object_set_new(env, *e, json_string(eq + 1)) == 0;
			free(*e);
		}
		free(envp);
		/* a JSON object of strings reads as a Python dict */
		text = ok ? json_dumps(env, JSON_COMPACT) : NULL;
		json_decref(env);
		if (!text)
			return pc_fail(err, EINVAL, "warm", "the policy's environment is not valid UTF-8");
		ready_prelude = xasprintf(ready_prelude_fmt, text);
	}
	if (py.RunSimpleStringFlags("__import__('gc').freeze()\n", NULL) != 0)
		return pc_fail(err, EINVAL, "warm", "gc.freeze failed");
	return 0;
}

static int zygote_serve_one(int ctl, struct jail_spec *tmpl)
{
	struct spawn_req req;
	struct spawn_reply reply = { 0 };
	struct jail_spec s = *tmpl;
	struct jail j = { 0 };
	int fds[REQ_MAX_FDS], nfds, cg;
	char *buf = MAP_FAILED;
	ssize_t n = recv_fds(ctl, &req, sizeof(req), fds, REQ_MAX_FDS, &nfds);

	if (n == 0)
		return -1; /* the supervisor is gone */
	if (n != (ssize_t)sizeof(req) || req.type != Z_SPAWN || req.cgroup_into > 1 || req.park > 1 ||
	    (req.park && req.files_len) ||
	    req.n_cgroup_tasks > CGROUP_MAX_TASKS ||
	    nfds != REQ_FIXED_FDS + (int)req.cgroup_into + (int)req.n_cgroup_tasks) {
		pc_fail(&reply.err, EPROTO, "warm", "bad request to the zygote");
		goto close_fds;
	}
	if (req.files_len)
		buf = mmap(NULL, req.files_len, PROT_READ, MAP_PRIVATE, fds[REQ_FD_MEMFD], 0);
	else if (req.park)
		buf = NULL;
	if (buf == MAP_FAILED) {
		pc_syserr(&reply.err, "warm", "map the program");
		goto close_fds;
	}
	if (jail_unpack_files(&s, buf ? buf : "", req.files_len) < 0) {
		pc_fail(&reply.err, EPROTO, "warm", "malformed program files");
		if (buf)
			munmap(buf, req.files_len);
		goto close_fds;
	}
	s.stdio[0] = fds[0];
	s.stdio[1] = fds[1];
	s.stdio[2] = fds[2];
	s.tool_fd = fds[3];
	cg = REQ_FIXED_FDS;
	s.cgroup.into = req.cgroup_into;
	s.cgroup.dir_fd = req.cgroup_into ? fds[cg++] : -1;
	s.cgroup.n_tasks = (int)req.n_cgroup_tasks;
	for (int i = 0; i < s.cgroup.n_tasks; i++)
		s.cgroup.tasks[i] = fds[cg++];
	s.park = req.park;
	if (jail_clone(&s, &j, &reply.err) == 0) {
		int out[2] = { j.pidfd, j.sync_fd };
		reply.ok = 1;
		reply.pid = j.pid;
		send_fds(ctl, &reply, sizeof(reply), out, 2);
		close(j.pidfd);
		close(j.sync_fd);
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
	char *cfg_text = xmalloc(CONFIG_MAX + 1);
	json_t *cfg, *pj;
	char *ptext = NULL;
	const char *runtime_dir, *libname;
	ssize_t n;

	(void)argc;
	(void)argv;
	/* children are reaped by the kernel; their status reaches the
	 * supervisor through the jail's own report */
	signal(SIGCHLD, SIG_IGN);
	n = recv(ZYGOTE_FD, cfg_text, CONFIG_MAX, 0);
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
	ptext = json_dumps(pj, JSON_COMPACT);
	if (!ptext || policy_parse(ptext, "zygote", &pol, &reply.err) < 0)
		goto answer;
	if (seccomp_filter_compile(&pol, &filter, &reply.err) < 0)
		goto answer;
	if (load_python(libname, &pol, runtime_dir, &reply.err) < 0)
		goto answer;
	reply.ok = 1;
answer:
	free(ptext);
	send(ZYGOTE_FD, &reply, sizeof(reply), MSG_NOSIGNAL);
	if (!reply.ok)
		return 1;
	python_argv[0] = pol.python;
	python_argv[1] = NULL;
	tmpl.policy = &pol;
	tmpl.filter = filter;
	tmpl.argv = python_argv;
	tmpl.runtime_dir = runtime_dir;
	tmpl.run_inline = zygote_run_inline;
	while (zygote_serve_one(ZYGOTE_FD, &tmpl) == 0)
		;
	return 0;
}
