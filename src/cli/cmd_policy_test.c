/* pycell: `pycell policy-test`, the admin-run escape suite.
 *
 * Plants canaries on the host (a file, an env var, an open fd, a loopback
 * TCP listener, an abstract unix socket, SysV IPC objects, a POSIX message
 * queue), then runs runtime/probes/probe.py as the jailed program through
 * the same run API a real run uses, once per category (the resource bombs
 * once each, under tightened limits), and reports every probe as contained,
 * escaped or error.  Exit 0 only when every probe is contained. */
#include "config.h"

#include <fcntl.h>
#include <mqueue.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/random.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "base/jsonrpc.h"
#include "base/log.h"
#include "bridge/bridge.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/setup.h"
#include "config/conf.h"
#include "config/policy_fields.h"
#include "jail/jail.h"
#include "run/egress.h"
#include "run/packages.h"
#include "run/run.h"

#define PROBE_SCRIPT "probes/probe.py"
#define WASM_PROBE_SCRIPT "probes/wasm_probe.py"
#define PROBE_MAX (1 << 20)
#define CANARY_ENV "PYCELL_POLICY_TEST_CANARY"
/* The bombs run under these (only ever tightening the policy). */
#define BOMB_MEMORY (64ULL << 20)
/* Node and Pyodide take about 150 MiB before a bomb starts */
#define WASM_BOMB_MEMORY (384ULL << 20)
#define BOMB_PIDS 32
#define BOMB_TMP (16ULL << 20)
#define BOMB_TIMEOUT_MS 2000
/* Node and Pyodide take about a second to start, several on a loaded
 * machine, before a bomb's first allocation: a memory bomb must meet its
 * memory limit, not the time limit */
#define WASM_BOMB_TIMEOUT_MS 6000
/* The least time a category's run gets: a slow or busy machine must not
 * turn a probe into an error (the time limit itself is a bomb's test). */
#define CATEGORY_TIMEOUT_MS 30000
/* A run may end this long after its time limit before it counts as unbounded. */
#define BOUND_SLACK_MS 5000

static const char usage[] =
	"Usage: pycell policy-test [OPTION]...\n"
	"Run the escape probes in jails built from a policy; report each as\n"
	"contained, escaped or error.  Exit 0 only when every probe is contained.\n"
	"\n"
	"  -p, --policy FILE|NAME   the policy to test (default: the config's)\n"
	"      --config FILE        configuration file (default /etc/pycell/pycell.conf)\n"
	"  -f, --format tap|json    output format (default tap)\n"
	"  -o, --only CATEGORY[,..] run only these categories\n"
	"      --backend NAME       test the policy on this backend (native or wasm)\n"
	"  -l, --list               list the categories and exit\n"
	"  -h, --help               show this help\n"
	"\n"
	"Categories: filesystem devices procfs network ipc identity kernel leaks\n"
	"bridge resources; on the wasm backend javascript filesystem leaks network\n"
	"resources.  See pycell-policy-test(8).\n";

static const char *const categories[] = {
	"filesystem", "devices", "procfs", "network", "ipc",
	"identity", "kernel", "leaks", "bridge", "resources",
};
static const char *const bombs[] = {
	"fork-bomb", "thread-bomb", "memory-bomb", "tmp-fill", "fd-exhaustion", "output-flood", "cpu-spin",
};
/* The wasm backend's (runtime/probes/wasm_probe.py): the ways out of
 * Pyodide into JavaScript and Node, and what of the host it could reach */
static const char *const wasm_categories[] = { "javascript", "filesystem", "leaks", "network", "resources" };
static const char *const wasm_bombs[] = {
	"fork-bomb", "thread-bomb", "memory-bomb", "tmp-fill", "output-flood", "cpu-spin",
};

/* What a backend is tested with */
struct probe_set {
	const char *script;
	const char *const *categories;
	size_t n_categories;
	const char *const *bombs;
	size_t n_bombs;
	uint64_t bomb_memory;
	uint64_t bomb_timeout_ms;
};

static const struct probe_set native_probes = {
	PROBE_SCRIPT, categories, ARRAY_SIZE(categories), bombs, ARRAY_SIZE(bombs), BOMB_MEMORY, BOMB_TIMEOUT_MS,
};
static const struct probe_set wasm_probes = {
	WASM_PROBE_SCRIPT, wasm_categories, ARRAY_SIZE(wasm_categories), wasm_bombs, ARRAY_SIZE(wasm_bombs),
	WASM_BOMB_MEMORY, WASM_BOMB_TIMEOUT_MS,
};

enum verdict { V_PENDING = 0, V_CONTAINED, V_ESCAPED, V_ERROR };

static const char *verdict_name(enum verdict v)
{
	switch (v) {
	case V_CONTAINED: return "contained";
	case V_ESCAPED: return "escaped";
	case V_ERROR: return "error";
	case V_PENDING:
	default: return "pending";
	}
}

struct probe_out {
	char *category, *name, *reason;
	enum verdict v;
};

struct suite {
	struct probe_out *p;
	size_t n, cap;
};

static struct probe_out *suite_add(struct suite *s, const char *cat, const char *name)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 64;
		s->p = xrealloc(s->p, s->cap * sizeof(*s->p));
	}
	s->p[s->n] = (struct probe_out){ xstrdup(cat), xstrdup(name), NULL, V_PENDING };
	return &s->p[s->n++];
}

static void probe_set(struct probe_out *p, enum verdict v, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void probe_set(struct probe_out *p, enum verdict v, const char *fmt, ...)
{
	va_list ap;
	free(p->reason);
	va_start(ap, fmt);
	if (vasprintf(&p->reason, fmt, ap) < 0)
		p->reason = NULL;
	va_end(ap);
	p->v = v;
}

static void suite_free(struct suite *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->p[i].category);
		free(s->p[i].name);
		free(s->p[i].reason);
	}
	free(s->p);
}

/* ------------------------------------------------------------ canaries */

struct canaries {
	char token[33];
	char dir[64], file[128], abstract[64], mq_name[64];
	int file_fd, tcp_fd, abs_fd;
	int tcp_port;
	/* an egress policy's: a listener on every address of the host, which
	 * the jail's gateway is one of */
	int any_fd, any_port;
	key_t shm_key, msg_key, sem_key;
	int shm_id, msg_id, sem_id;
	mqd_t mq;
};

static void canaries_init(struct canaries *c)
{
	memset(c, 0, sizeof(*c));
	c->file_fd = c->tcp_fd = c->abs_fd = c->any_fd = -1;
	c->shm_id = c->msg_id = c->sem_id = -1;
	c->mq = (mqd_t)-1;
}

static int canaries_plant(struct canaries *c, const struct policy *p, struct pc_err *err)
{
	unsigned char rnd[16];
	struct sockaddr_in in = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	socklen_t len = sizeof(in);
	uint32_t key;

	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
		return pc_syserr(err, "canary", "getrandom");
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(c->token + 2 * i, 3, "%02x", rnd[i]);
	memcpy(&key, rnd, sizeof(key));

	snprintf(c->dir, sizeof(c->dir), "/tmp/pycell-canary-XXXXXX");
	if (!mkdtemp(c->dir))
		return pc_syserr(err, "canary", "mkdtemp %s", c->dir);
	/* readable by any id, so only the jail's walls can keep it out */
	chmod(c->dir, 0755);
	snprintf(c->file, sizeof(c->file), "%s/secret", c->dir);
	c->file_fd = open(c->file, O_RDWR | O_CREAT | O_EXCL, 0644);  /* no O_CLOEXEC: the fd canary */
	if (c->file_fd < 0 || write_all(c->file_fd, c->token, strlen(c->token)) < 0)
		return pc_syserr(err, "canary", "%s", c->file);
	if (setenv(CANARY_ENV, c->token, 1) < 0)
		return pc_syserr(err, "canary", "setenv");

	c->tcp_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (c->tcp_fd < 0 || bind(c->tcp_fd, (struct sockaddr *)&in, sizeof(in)) < 0 ||
	    listen(c->tcp_fd, 8) < 0 || getsockname(c->tcp_fd, (struct sockaddr *)&in, &len) < 0)
		return pc_syserr(err, "canary", "loopback TCP listener");
	c->tcp_port = ntohs(in.sin_port);
	if (p->network.mode == NET_EGRESS) {
		struct sockaddr_in any = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY) };
		len = sizeof(any);
		c->any_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (c->any_fd < 0 || bind(c->any_fd, (struct sockaddr *)&any, sizeof(any)) < 0 ||
		    listen(c->any_fd, 8) < 0 || getsockname(c->any_fd, (struct sockaddr *)&any, &len) < 0)
			return pc_syserr(err, "canary", "TCP listener on every address");
		c->any_port = ntohs(any.sin_port);
	}

	snprintf(c->abstract, sizeof(c->abstract), "pycell-canary-%s", c->token);
	memcpy(un.sun_path + 1, c->abstract, strlen(c->abstract));
	c->abs_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (c->abs_fd < 0 ||
	    bind(c->abs_fd, (struct sockaddr *)&un,
		 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(c->abstract))) < 0 ||
	    listen(c->abs_fd, 8) < 0)
		return pc_syserr(err, "canary", "abstract unix socket @%s", c->abstract);

	c->shm_key = (key_t)(key & 0x7fffffff) | 1;
	c->msg_key = c->shm_key ^ 0x10;
	c->sem_key = c->shm_key ^ 0x20;
	c->shm_id = shmget(c->shm_key, 4096, IPC_CREAT | IPC_EXCL | 0666);
	if (c->shm_id < 0)
		return pc_syserr(err, "canary", "shmget");
	c->msg_id = msgget(c->msg_key, IPC_CREAT | IPC_EXCL | 0666);
	if (c->msg_id < 0)
		return pc_syserr(err, "canary", "msgget");
	c->sem_id = semget(c->sem_key, 1, IPC_CREAT | IPC_EXCL | 0666);
	if (c->sem_id < 0)
		return pc_syserr(err, "canary", "semget");
	snprintf(c->mq_name, sizeof(c->mq_name), "pycell-canary-%.16s", c->token);
	{
		char path[80];
		snprintf(path, sizeof(path), "/%s", c->mq_name);
		c->mq = mq_open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666, NULL);
		if (c->mq == (mqd_t)-1)
			return pc_syserr(err, "canary", "mq_open %s", path);
	}
	return 0;
}

static void canaries_remove(struct canaries *c)
{
	if (c->file_fd >= 0)
		close(c->file_fd);
	if (c->file[0])
		unlink(c->file);
	if (c->dir[0])
		rmdir(c->dir);
	if (c->tcp_fd >= 0)
		close(c->tcp_fd);
	if (c->abs_fd >= 0)
		close(c->abs_fd);
	if (c->any_fd >= 0)
		close(c->any_fd);
	if (c->shm_id >= 0)
		shmctl(c->shm_id, IPC_RMID, NULL);
	if (c->msg_id >= 0)
		msgctl(c->msg_id, IPC_RMID, NULL);
	if (c->sem_id >= 0)
		semctl(c->sem_id, 0, IPC_RMID);
	if (c->mq != (mqd_t)-1) {
		char path[80];
		mq_close(c->mq);
		snprintf(path, sizeof(path), "/%s", c->mq_name);
		mq_unlink(path);
	}
	unsetenv(CANARY_ENV);
}

/* A connection to a host listener is an escape even if the probe missed it. */
static bool canaries_touched(const struct canaries *c)
{
	int fd = accept4(c->tcp_fd, NULL, NULL, SOCK_CLOEXEC);
	if (fd >= 0) {
		close(fd);
		return true;
	}
	fd = accept4(c->abs_fd, NULL, NULL, SOCK_CLOEXEC);
	if (fd >= 0) {
		close(fd);
		return true;
	}
	fd = c->any_fd >= 0 ? accept4(c->any_fd, NULL, NULL, SOCK_CLOEXEC) : -1;
	if (fd >= 0) {
		close(fd);
		return true;
	}
	return false;
}

static json_t *canaries_json(const struct canaries *c, const struct policy *p)
{
	static const char *const host_paths[] = { "/", "/etc", "/root", "/home", "/var", "/run", "/tmp", "/boot",
						   "/dev/pts" };
	json_t *inodes = json_array(), *argv_words, *doc;
	char host[256] = "";
	struct stat st;

	for (size_t i = 0; i < ARRAY_SIZE(host_paths); i++)
		if (stat(host_paths[i], &st) == 0)
			json_array_append_new(inodes, json_pack("[sIi]", host_paths[i], (json_int_t)st.st_dev,
								 (json_int_t)st.st_ino));
	if (stat(c->dir, &st) == 0)
		json_array_append_new(inodes, json_pack("[sIi]", c->dir, (json_int_t)st.st_dev, (json_int_t)st.st_ino));
	if (stat(c->file, &st) == 0)
		json_array_append_new(inodes, json_pack("[sIi]", c->file, (json_int_t)st.st_dev, (json_int_t)st.st_ino));
	gethostname(host, sizeof(host) - 1);
	/* words of our own command line the jail's init must not show */
	argv_words = json_pack("[ss]", "policy-test", CANARY_ENV);
	doc = json_pack("{s:s, s:s, s:s, s:o, s:i, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:s, s:s, s:i, s:i, s:i}",
			 "token", c->token, "file", c->file, "env_name", CANARY_ENV, "host_inodes", inodes,
			 "tcp_port", c->tcp_port, "abstract", c->abstract,
			 "shm_key", (json_int_t)c->shm_key, "shm_id", (json_int_t)c->shm_id,
			 "msg_key", (json_int_t)c->msg_key, "msg_id", (json_int_t)c->msg_id,
			 "sem_key", (json_int_t)c->sem_key, "sem_id", (json_int_t)c->sem_id,
			 "mq_name", c->mq_name, "host_hostname", host, "supervisor_pid", (int)getpid(),
			 "jail_uid", (int)p->jail_uid, "jail_gid", (int)p->jail_gid);
	json_object_set_new(doc, "supervisor_argv", argv_words);
	if (p->network.mode == NET_EGRESS)
		json_object_set_new(doc, "egress", json_pack("{s:o, s:i}", "allow",
			pv_strv_json(p->network.egress, p->network.n_egress), "gateway_port", c->any_port));
	return doc;
}

/* ------------------------------------------------------------ runs */

struct pt {
	const struct probe_set *set;
	struct loop *loop;
	struct run_env env;
	struct bridge *bridge;
	const char *code;
	size_t code_len;
	struct suite suite;
};

static void on_done(struct run *r, void *ctx)
{
	*(bool *)ctx = true;
	(void)r;
}

/* One jailed run of probe.py ARG CANARIES; returns the finished run, or
 * NULL with err when nothing could be started. */
static struct run *pt_run(struct pt *t, const char *arg, const char *canaries, uint64_t timeout_ms,
			  bool with_bridge, struct pc_err *err)
{
	char *args[] = { (char *)arg, (char *)canaries, NULL };
	struct run_request req = { .stdin_fd = -1 };
	struct run *r = NULL;
	bool done = false;

	run_request_from_env(&req, &t->env);
	req.mode = RUN_MODE_SCRIPT;
	req.code = t->code;
	req.code_len = t->code_len;
	req.prog_name = "probe.py";
	req.args = args;
	req.on_done = on_done;
	req.ctx = &done;
	req.timeout_ms = timeout_ms;
	if (with_bridge && t->bridge)
		bridge_attach(t->bridge, &req);
	if (run_start(t->loop, &req, &r, err) < 0)
		return NULL;
	while (!done)
		if (loop_run_once(t->loop, -1) < 0 && errno != EINTR) {
			pc_syserr(err, "loop", "event loop");
			run_free(r);
			return NULL;
		}
	return r;
}

/* The last n bytes or so of a stream, from a UTF-8 character boundary. */
static const char *tail(const struct output_buf *b, size_t n)
{
	const char *t;
	if (!b->data)
		return "";
	t = b->len > n ? b->data + b->len - n : b->data;
	while ((*t & 0xc0) == 0x80)
		t++;
	return t;
}

static void run_category(struct pt *t, const char *cat, const char *canaries)
{
	uint64_t *timeout = &t->env.policy.limits.timeout_ms, saved = *timeout;
	struct pc_err err = { 0 };
	struct run *r;
	const struct run_result *res;
	size_t first = t->suite.n;
	char *line, *save = NULL;
	cleanup_free char *out = NULL;

	if (*timeout < CATEGORY_TIMEOUT_MS)
		*timeout = CATEGORY_TIMEOUT_MS;
	r = pt_run(t, cat, canaries, 0, strcmp(cat, "bridge") == 0, &err);
	*timeout = saved;
	if (!r) {
		probe_set(suite_add(&t->suite, cat, "run"), V_ERROR, "could not start: %s", err.msg);
		return;
	}
	res = run_result(r);
	out = xstrdup(res->out.data ? res->out.data : "");
	for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		json_t *j = json_loads(line, 0, NULL), *plan;
		const char *name, *status, *reason;
		if (!j)
			continue;
		if ((plan = json_object_get(j, "plan"))) {
			size_t i;
			json_t *v;
			json_array_foreach(plan, i, v)
				if (json_is_string(v))
					suite_add(&t->suite, cat, json_string_value(v));
		} else if (json_unpack(j, "{s:s, s:s, s:s}", "name", &name, "status", &status,
				       "reason", &reason) == 0) {
			for (size_t i = first; i < t->suite.n; i++) {
				struct probe_out *p = &t->suite.p[i];
				if (strcmp(p->name, name) != 0)
					continue;
				probe_set(p, strcmp(status, "contained") == 0 ? V_CONTAINED :
					     strcmp(status, "escaped") == 0 ? V_ESCAPED : V_ERROR, "%s", reason);
			}
		}
		json_decref(j);
	}
	if (res->status == RUN_SETUP_FAILED)
		probe_set(suite_add(&t->suite, cat, "run"), V_ERROR, "jail setup failed: %s: %s",
			  res->setup_error.step, res->setup_error.msg);
	else if (first == t->suite.n)
		probe_set(suite_add(&t->suite, cat, "run"), V_ERROR, "no probe reported (%s, exit %d): %s",
			  run_status_name(res->status), res->exit_code, tail(&res->err, 300));
	for (size_t i = first; i < t->suite.n; i++)
		if (t->suite.p[i].v == V_PENDING)
			probe_set(&t->suite.p[i], V_ERROR, "no result: the run ended %s (exit %d, signal %d): %s",
				  run_status_name(res->status), res->exit_code, res->signal, tail(&res->err, 200));
	run_free(r);
}

static void judge_bomb(struct probe_out *p, const char *bomb, const struct run_result *res,
		       const struct limits *lim, uint64_t timeout_ms)
{
	json_t *v = NULL;
	const char *verdict = NULL, *reason = "";
	const char *nl = res->out.data ? strrchr(res->out.data, '{') : NULL;

	if (nl && (v = json_loads(nl, JSON_DISABLE_EOF_CHECK, NULL)))
		json_unpack(v, "{s:s, s:s}", "verdict", &verdict, "reason", &reason);
	if (res->status == RUN_SETUP_FAILED)
		probe_set(p, V_ERROR, "jail setup failed: %s: %s", res->setup_error.step, res->setup_error.msg);
	else if (res->duration_ms > timeout_ms + BOUND_SLACK_MS)
		probe_set(p, V_ESCAPED, "ran %llu ms under a %llu ms limit",
			  (unsigned long long)res->duration_ms, (unsigned long long)timeout_ms);
	else if (strcmp(bomb, "output-flood") == 0)
		probe_set(p, res->err.truncated && res->err.len <= lim->output_bytes ? V_CONTAINED : V_ESCAPED,
			  "64 MiB to stderr: %zu bytes kept (cap %llu), %llu dropped, run %s",
			  res->err.len, (unsigned long long)lim->output_bytes,
			  (unsigned long long)res->err.dropped, run_status_name(res->status));
	else if (verdict && strcmp(verdict, "contained") == 0)
		probe_set(p, V_CONTAINED, "%s", reason);
	else if (verdict && strcmp(verdict, "escaped") == 0)
		probe_set(p, V_ESCAPED, "%s", reason);
	else if (res->status == RUN_TIMEOUT || res->status == RUN_MEMORY_LIMIT)
		probe_set(p, V_CONTAINED, "stopped: %s after %llu ms", run_status_name(res->status),
			  (unsigned long long)res->duration_ms);
	else
		probe_set(p, V_ERROR, "ended %s (exit %d, signal %d) without a verdict: %s",
			  run_status_name(res->status), res->exit_code, res->signal, tail(&res->err, 200));
	json_decref(v);
}

static uint64_t tighten(uint64_t cur, uint64_t max)
{
	return cur && cur < max ? cur : max;
}

static void run_resources(struct pt *t, json_t *canaries)
{
	struct limits saved = t->env.policy.limits, *lim = &t->env.policy.limits;
	uint64_t timeout_ms = tighten(saved.timeout_ms, t->set->bomb_timeout_ms);
	struct pc_err err = { 0 };
	struct run *r;

	lim->memory_bytes = tighten(lim->memory_bytes, t->set->bomb_memory);
	lim->pids = (uint32_t)tighten(lim->pids, BOMB_PIDS);
	lim->tmp_bytes = tighten(lim->tmp_bytes, BOMB_TMP);
	lim->workspace_bytes = tighten(lim->workspace_bytes, BOMB_TMP);
	json_object_set_new(canaries, "limits",
			    json_pack("{s:I, s:i, s:I, s:I, s:i, s:I}", "memory", (json_int_t)lim->memory_bytes,
				      "pids", (int)lim->pids, "tmp", (json_int_t)lim->tmp_bytes,
				      "workspace", (json_int_t)lim->workspace_bytes,
				      "open_files", (int)lim->open_files, "output", (json_int_t)lim->output_bytes));
	{
		cleanup_free char *cj = json_dumps(canaries, JSON_COMPACT);
		for (size_t i = 0; i < t->set->n_bombs; i++) {
			const char *bomb = t->set->bombs[i];
			cleanup_free char *arg = xasprintf("resources/%s", bomb);
			struct probe_out *p = suite_add(&t->suite, "resources", bomb);
			r = pt_run(t, arg, cj, timeout_ms, false, &err);
			if (!r) {
				probe_set(p, V_ERROR, "could not start: %s", err.msg);
				continue;
			}
			judge_bomb(p, bomb, run_result(r), lim, timeout_ms);
			run_free(r);
		}
	}
	t->env.policy.limits = saved;

	/* The supervisor (this process) outlived the bombs; a normal run still works. */
	{
		struct probe_out *p = suite_add(&t->suite, "resources", "supervisor-alive");
		const char *save_code = t->code;
		size_t save_len = t->code_len;
		t->code = "print('alive')\n";
		t->code_len = strlen(t->code);
		r = pt_run(t, "-", "{}", 0, false, &err);
		t->code = save_code;
		t->code_len = save_len;
		if (!r)
			probe_set(p, V_ERROR, "could not start: %s", err.msg);
		else if (run_result(r)->status == RUN_OK && run_result(r)->out.data &&
			 strcmp(run_result(r)->out.data, "alive\n") == 0)
			probe_set(p, V_CONTAINED, "a normal run after the bombs works (%llu ms)",
				  (unsigned long long)run_result(r)->duration_ms);
		else
			probe_set(p, V_ERROR, "a normal run after the bombs ended %s",
				  run_status_name(run_result(r)->status));
		run_free(r);
	}
}

/* ------------------------------------------------------------ output */

static void print_tap(const struct suite *s, const char *policy)
{
	size_t pass = 0;
	printf("TAP version 13\n# pycell policy-test, policy %s\n1..%zu\n", policy, s->n);
	for (size_t i = 0; i < s->n; i++) {
		const struct probe_out *p = &s->p[i];
		bool ok = p->v == V_CONTAINED;
		pass += ok;
		printf("%s %zu - %s/%s: %s # %s\n", ok ? "ok" : "not ok", i + 1, p->category, p->name,
		       verdict_name(p->v), p->reason ? p->reason : "");
	}
	printf("# %zu passed, %zu failed\n", pass, s->n - pass);
}

/* Every string here may hold bytes that are not UTF-8 (a reason may
 * quote the jail's stderr; a policy is named by its file): json_text. */
static int print_json(const struct suite *s, const char *policy)
{
	json_t *arr = json_array(), *doc;
	size_t pass = 0;
	char *txt;
	for (size_t i = 0; i < s->n; i++) {
		const struct probe_out *p = &s->p[i];
		const char *why = p->reason ? p->reason : "";
		pass += p->v == V_CONTAINED;
		if (json_array_append_new(arr, json_pack("{s:s, s:s, s:s, s:o}", "category", p->category,
							 "name", p->name, "status", verdict_name(p->v),
							 "reason", json_text(why, strlen(why)))) < 0)
			break;
	}
	doc = json_pack("{s:o, s:o, s:I, s:I}", "policy", json_text(policy, strlen(policy)), "probes", arr,
			"passed", (json_int_t)pass, "failed", (json_int_t)(s->n - pass));
	txt = doc && json_array_size(arr) == s->n ? json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
	json_decref(doc);
	if (!txt) {
		fprintf(stderr, "pycell policy-test: cannot encode the results as JSON\n");
		return -1;
	}
	puts(txt);
	free(txt);
	return 0;
}

/* ------------------------------------------------------------ command */

static bool category_selected(const char *only, const char *cat)
{
	const char *p = only;
	size_t n = strlen(cat);
	if (!only)
		return true;
	while ((p = strstr(p, cat))) {
		if ((p == only || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
			return true;
		p += n;
	}
	return false;
}

static int check_only(const char *only, const struct probe_set *set, struct pc_err *err)
{
	cleanup_free char *copy = xstrdup(only);
	char *save = NULL;
	for (char *w = strtok_r(copy, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
		bool known = false;
		for (size_t i = 0; i < set->n_categories; i++)
			known |= strcmp(w, set->categories[i]) == 0;
		if (!known)
			return pc_fail(err, EINVAL, "usage", "--only: unknown category '%s' for the %s backend "
				       "(pycell policy-test --list%s)", w, set == &wasm_probes ? "wasm" : "native",
				       set == &wasm_probes ? " --backend wasm" : "");
	}
	return 0;
}

struct pt_opts {
	bool help, list;
	const char *policy, *config, *format, *only, *backend;
};

#define PT(field) offsetof(struct pt_opts, field)

static const char *const formats[] = { "tap", "json", NULL };
static const char *const backends[] = { "native", "wasm", NULL };

static const struct opt pt_options[] = {
	{ OPT_ROW("help", 'h', OPT_HELP, PT(help)) },
	{ OPT_ROW("list", 'l', OPT_FLAG, PT(list)) },
	{ OPT_ROW("policy", 'p', OPT_STRING, PT(policy)) },
	{ OPT_ROW("config", 0, OPT_STRING, PT(config)) },
	{ OPT_ROW("format", 'f', OPT_CHOICE, PT(format)), .choices = formats },
	{ OPT_ROW("only", 'o', OPT_STRING, PT(only)) },
	{ OPT_ROW("backend", 0, OPT_CHOICE, PT(backend)), .choices = backends },
};

const struct opt_cmd cli_policy_test_cmd = { "policy-test", usage, pt_options, ARRAY_SIZE(pt_options), false };

int cmd_policy_test(int argc, char **argv)
{
	struct pt_opts o = { .format = "tap" };
	struct pycell_conf conf;
	struct canaries can;
	struct pt t = { 0 };
	struct pc_err err = { 0 };
	cleanup_free char *script = NULL;
	cleanup_free char *script_path = NULL;
	const char *format;
	cleanup_json json_t *cj = NULL;
	size_t failed = 0;
	int arg;

	arg = opts_parse(&cli_policy_test_cmd, argc, argv, &o, &err);
	if (arg < 0)
		return cli_usage_error("policy-test", &err);
	if (o.help) {
		fputs(usage, stdout);
		return 0;
	}
	if (o.list) {
		const struct probe_set *set = o.backend && strcmp(o.backend, "wasm") == 0 ? &wasm_probes : &native_probes;
		for (size_t k = 0; k < set->n_categories; k++)
			puts(set->categories[k]);
		return 0;
	}
	format = o.format;

	if (cli_conf_setup(o.config, &conf, &err) < 0)
		return cli_input_error("policy-test", &err);
	if (run_env_load(&t.env, o.policy ? o.policy : conf.policy, &err) < 0) {
		conf_free(&conf);
		return cli_input_error("policy-test", &err);
	}
	if ((o.backend && policy_set_backend(&t.env.policy, o.backend, &err) < 0) ||
	    (t.set = policy_is_wasm(&t.env.policy) ? &wasm_probes : &native_probes,
	     o.only && check_only(o.only, t.set, &err) < 0)) {
		run_env_free(&t.env);
		conf_free(&conf);
		return cli_usage_error("policy-test", &err);
	}
	if (run_env_prepare(&t.env, &err) < 0) {
		run_env_free(&t.env);
		conf_free(&conf);
		return cli_setup_error("policy-test", &err);
	}
	script_path = xasprintf("%s/%s", t.env.runtime_dir, t.set->script);
	if (read_file(script_path, PROBE_MAX, &script, &t.code_len) < 0) {
		pc_syserr(&err, "probes", "cannot read the probes %s", script_path);
		run_env_free(&t.env);
		conf_free(&conf);
		return cli_setup_error("policy-test", &err);
	}
	t.code = script;

	canaries_init(&can);
	if (canaries_plant(&can, &t.env.policy, &err) < 0) {
		canaries_remove(&can);
		run_env_free(&t.env);
		conf_free(&conf);
		return cli_setup_error("policy-test", &err);
	}
	/* Denied calls of the bridge probes go to the admin's audit log if
	 * there is one, not to our output. */
	if (!conf.audit_log)
		conf.audit_log = xstrdup("/dev/null");
	t.loop = loop_new();
	t.bridge = t.loop ? bridge_new(t.loop, &conf, &err) : NULL;
	if (!t.loop)
		fprintf(stderr, "pycell policy-test: cannot create the event loop\n");
	if (t.loop && !t.bridge)
		fprintf(stderr, "pycell policy-test: warning: no tool bridge (%s); bridge probes see none\n", err.msg);

	cj = canaries_json(&can, &t.env.policy);
	{
		cleanup_free char *cjs = json_dumps(cj, JSON_COMPACT);
		for (size_t i = 0; t.loop && i < t.set->n_categories; i++) {
			const char *cat = t.set->categories[i];
			if (!category_selected(o.only, cat))
				continue;
			if (strcmp(cat, "resources") == 0)
				run_resources(&t, cj);
			else
				run_category(&t, cat, cjs);
		}
	}
	if (t.loop && canaries_touched(&can))
		probe_set(suite_add(&t.suite, "network", "host-listener-untouched"), V_ESCAPED,
			  "a host canary listener received a connection from a jail");
	else if (t.loop && category_selected(o.only, "network"))
		probe_set(suite_add(&t.suite, "network", "host-listener-untouched"), V_CONTAINED,
			  "no connection reached the host canary listeners");

	if (strcmp(format, "json") == 0)
		failed += print_json(&t.suite, t.env.policy.name) < 0;
	else
		print_tap(&t.suite, t.env.policy.name);
	fflush(stdout);
	for (size_t i = 0; i < t.suite.n; i++)
		failed += t.suite.p[i].v != V_CONTAINED;
	if (!t.suite.n)
		failed = 1;

	suite_free(&t.suite);
	bridge_free(t.bridge);
	loop_free(t.loop);
	canaries_remove(&can);
	run_env_free(&t.env);
	conf_free(&conf);
	return failed ? 1 : 0;
}
