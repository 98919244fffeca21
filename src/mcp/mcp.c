/* pycell: the MCP server: lifecycle, tools, runs, cancellation, progress. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>

#include "base/jsonrpc.h"
#include "base/log.h"
#include "config/json_check.h"
#include "config/policy.h"
#include "config/result.h"
#include "jail/jail.h"
#include "mcp/mcp.h"

const char *const mcp_protocol_versions[] = { "2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", NULL };

enum proto {
	PROTO_NONE = -1,   /* not initialized */
	PROTO_2024_11_05 = 0,
	PROTO_2025_03_26,  /* + tool annotations, progress messages, batches */
	PROTO_2025_06_18,  /* + structured content, output schemas, titles; - batches */
	PROTO_2025_11_25,
};
#define PROTO_LATEST PROTO_2025_11_25

/* MCP (RFC 5424) log levels, least severe first. */
static const char *const mlog_names[] = { "debug", "info", "notice", "warning", "error", "critical", "alert",
					  "emergency", NULL };
enum mlog { MLOG_DEBUG, MLOG_INFO, MLOG_NOTICE, MLOG_WARNING, MLOG_ERROR, MLOG_OFF = 8 };

/* A queued run holds its code; a client that floods tools/call gets an
 * error instead of unbounded memory. */
#define MAX_QUEUED 256
#define DEFAULT_MAX_RUNS 4
#define PROGRESS_INTERVAL_MS 1000

enum call_kind { CALL_RUN_PYTHON, CALL_SANDBOX_INFO, CALL_PY_VERSION };
enum call_state { CALL_QUEUED, CALL_RUNNING, CALL_WAITING };

struct call_list {
	struct mcp_call *head, *tail;
	unsigned n;
};

/* The replies of one batch are sent together, as one array, when its last
 * request is answered. */
struct mcp_batch {
	struct mcp_session *session;  /* NULL once the client left */
	json_t *replies;
	unsigned pending;             /* requests still being worked on */
	bool dispatching;
};

/* A request answered later: a run, or sandbox_info waiting for the
 * interpreter's version.  Also the server's own version probe. */
struct mcp_call {
	struct mcp_call *prev, *next;
	struct call_list *list;
	struct mcp_call *ended_next;  /* on the server's list of ended runs */
	struct mcp_server *srv;
	struct mcp_session *session;  /* NULL: the server's own, or the client left */
	struct mcp_batch *batch;
	enum call_kind kind;
	enum call_state state;
	json_t *id;
	json_t *progress_token;
	uint64_t last_progress, progress_total;   /* ms */
	unsigned n_progress;
	uint64_t t_received, t_started;
	unsigned long long seq;
	bool cancelled, ended;

	char *code;
	size_t code_len;
	char *variables_json;
	char *stdin_data;
	size_t stdin_len;
	uint64_t timeout_ms;
	struct run *run;
};

struct mcp_server {
	struct loop *loop;
	const struct run_env *env;
	struct mcp_server_config cfg;
	struct call_list queue;       /* waiting for a run slot, in order */
	struct call_list active;      /* running, and sandbox_info waiting */
	struct mcp_call *ended;       /* runs whose on_done fired */
	unsigned n_running;
	unsigned long long next_seq;
	/* Runs end inside run.c's callbacks; their replies are sent and their
	 * slots reused from this eventfd's callback, never re-entrantly. */
	int defer_fd;
	struct loop_watch w_defer;
	int tick_fd;                  /* progress every second while runs carry a token */
	struct loop_watch w_tick;
	bool tick_armed;
	char *python_impl, *python_version;
	struct mcp_call *version_call;
	json_t *tools;
	/* warm starts: jails made ahead (run_park), each for one run_python */
	struct run **ready;
	unsigned n_ready;
	uint64_t ready_failed_ms;     /* when making one last failed */
};

struct mcp_session {
	struct mcp_server *srv;
	struct mcp_session_ops ops;
	void *ctx;
	enum proto proto;
	enum mlog log_min;
	char *client;
};

/* ------------------------------------------------------------ lists */

static void list_push(struct call_list *l, struct mcp_call *c)
{
	c->list = l;
	c->next = NULL;
	c->prev = l->tail;
	if (l->tail)
		l->tail->next = c;
	else
		l->head = c;
	l->tail = c;
	l->n++;
}

static void list_remove(struct mcp_call *c)
{
	struct call_list *l = c->list;
	if (!l)
		return;
	if (c->prev)
		c->prev->next = c->next;
	else
		l->head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	else
		l->tail = c->prev;
	l->n--;
	c->list = NULL;
	c->prev = c->next = NULL;
}

/* ------------------------------------------------------------ sending */

static void session_send(struct mcp_session *ss, json_t *msg, const json_t *related)
{
	if (ss)
		ss->ops.send(ss->ctx, msg, related);
	json_decref(msg);
}

static void batch_maybe_send(struct mcp_batch *b)
{
	if (b->dispatching || b->pending)
		return;
	if (b->session && json_array_size(b->replies) > 0) {
		session_send(b->session, b->replies, NULL);
		b->replies = NULL;
	}
	json_decref(b->replies);
	free(b);
}

/* Send a response (stolen), or add it to its batch. */
static void reply(struct mcp_session *ss, struct mcp_batch *b, json_t *msg)
{
	if (b) {
		json_array_append_new(b->replies, msg);
		return;
	}
	session_send(ss, msg, json_object_get(msg, "id"));
}

static void mlog(struct mcp_session *ss, enum mlog level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* notifications/message to the client, when it asked for this level. */
static void mlog(struct mcp_session *ss, enum mlog level, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	if (!ss || ss->proto == PROTO_NONE || level < ss->log_min)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	session_send(ss, jsonrpc_notification("notifications/message",
					      json_pack("{s:s,s:s,s:s}", "level", mlog_names[level],
							"logger", "pycell", "data", buf)), NULL);
}

/* ------------------------------------------------------------ tools */

static const char run_python_output_schema[] =
	"{\"type\":\"object\",\"properties\":{"
	"\"status\":{\"type\":\"string\",\"enum\":[\"ok\",\"error\",\"timeout\",\"memory_limit\",\"killed\","
	"\"setup_failed\"],\"description\":\"ok: exited 0; error: an exception or a non-zero exit; timeout, "
	"memory_limit: killed by that limit; killed: cancelled; setup_failed: the sandbox could not be built\"},"
	"\"exit_code\":{\"type\":[\"integer\",\"null\"]},"
	"\"signal\":{\"type\":[\"integer\",\"null\"]},"
	"\"stdout\":{\"type\":\"string\"},"
	"\"stderr\":{\"type\":\"string\"},"
	"\"truncated\":{\"type\":\"object\",\"properties\":{\"stdout\":{\"type\":\"boolean\"},"
	"\"stderr\":{\"type\":\"boolean\"}}},"
	"\"dropped_bytes\":{\"type\":\"object\",\"properties\":{\"stdout\":{\"type\":\"integer\"},"
	"\"stderr\":{\"type\":\"integer\"}}},"
	"\"return_value\":{\"description\":\"the value of the final expression: JSON when serialisable, "
	"else its repr as a string; null when there is none\"},"
	"\"duration_ms\":{\"type\":\"integer\"},"
	"\"cpu_ms\":{\"type\":\"integer\"},"
	"\"memory_peak_bytes\":{\"type\":\"integer\"},"
	"\"limits\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{"
	"\"name\":{\"type\":\"string\"},\"value\":{\"type\":\"integer\"},\"enforced_by\":{\"type\":\"string\"}}}},"
	"\"warnings\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
	"\"setup_error\":{\"type\":\"object\",\"properties\":{\"step\":{\"type\":\"string\"},"
	"\"errno\":{\"type\":\"integer\"},\"errno_name\":{\"type\":\"string\"},\"message\":{\"type\":\"string\"}}},"
	"\"tool_calls\":{\"type\":[\"object\",\"null\"]}},"
	"\"required\":[\"status\",\"exit_code\",\"signal\",\"stdout\",\"stderr\",\"truncated\",\"return_value\","
	"\"duration_ms\"]}";

static const char sandbox_info_output_schema[] =
	"{\"type\":\"object\",\"properties\":{"
	"\"python_version\":{\"type\":[\"string\",\"null\"]},"
	"\"python_implementation\":{\"type\":[\"string\",\"null\"]},"
	"\"backend\":{\"type\":\"string\"},"
	"\"policy\":{\"type\":\"string\"},"
	"\"limits\":{\"type\":\"object\"},"
	"\"network\":{\"type\":\"string\"},"
	"\"tools\":{\"type\":\"array\"},"
	"\"tool_budget\":{\"type\":\"integer\"},"
	"\"max_concurrent_runs\":{\"type\":\"integer\"},"
	"\"pycell_version\":{\"type\":\"string\"}},"
	"\"required\":[\"python_version\",\"backend\",\"policy\",\"limits\",\"network\",\"tools\"]}";

static bool policy_open_world(const struct policy *p)
{
	/* Loopback is the jail's own network namespace: nothing outside is
	 * reachable through it.  Allowed tool calls do reach outside. */
	return p->n_tools_allow > 0;
}

static json_t *run_python_tool(const struct policy *p)
{
	char mem[32], out[32], timeout[48] = "no time limit";
	json_t *props, *timeout_s, *tool;
	cleanup_free char *desc = NULL;

	jc_format_size(mem, sizeof(mem), p->limits.memory_bytes);
	jc_format_size(out, sizeof(out), p->limits.output_bytes);
	if (p->limits.timeout_ms)
		snprintf(timeout, sizeof(timeout), "%g s wall clock", (double)p->limits.timeout_ms / 1000);
	desc = xasprintf(
		"Run Python code in a fresh, isolated sandbox (CPython in a Linux jail) and get its output.\n\n"
		"Each call starts a new interpreter: nothing (variables, imports, files) persists between calls, "
		"so pass data in with `variables` and return what you need. The code runs like a notebook cell: "
		"statements run in order and the value of a final expression is returned as `return_value` (JSON "
		"when it can be serialised, else its repr); print() output is in stdout. An uncaught exception "
		"fails the call with the traceback in stderr.\n\n"
		"Limits: %s (`timeout_s` may lower it), %s of memory%s, %s of output per stream, %s. Writable: "
		"/tmp and the working directory /workspace, both empty at the start and discarded after. Only the "
		"Python standard library and packages installed on the server are available; pip install does not "
		"work.%s",
		timeout, p->limits.memory_bytes ? mem : "no limit", "", out,
		p->network == NET_NONE ? "no network access" : "network limited to the sandbox's own loopback",
		p->n_tools_allow ? "\n\nThe code may call the MCP tools this server allows: import pycell; "
				   "pycell.call_tool(\"server.tool\", {...}). sandbox_info lists them."
				 : "");

	timeout_s = json_pack("{s:s,s:i,s:s}", "type", "number", "exclusiveMinimum", 0, "description",
			      "Wall-clock limit in seconds for this run; at most the server's limit, which is "
			      "also the default.");
	if (p->limits.timeout_ms)
		json_object_set_new(timeout_s, "maximum", json_real((double)p->limits.timeout_ms / 1000));
	props = json_pack("{s:{s:s,s:s},s:{s:s,s:s},s:{s:s,s:s},s:o}",
		"code", "type", "string", "description",
			"Python source. Statements run in order; the value of a final expression is returned "
			"as return_value.",
		"variables", "type", "object", "description",
			"Global variables defined before the code runs: names (Python identifiers) mapped to "
			"JSON values.",
		"stdin", "type", "string", "description", "Text the program reads from standard input.",
		"timeout_s", timeout_s);
	tool = json_pack("{s:s,s:s,s:s,s:{s:s,s:o,s:[s],s:b},s:o,s:{s:s,s:b,s:b,s:b,s:b}}",
		"name", "run_python",
		"title", "Run Python",
		"description", desc,
		"inputSchema", "type", "object", "properties", props, "required", "code",
			"additionalProperties", 0,
		"outputSchema", json_loads(run_python_output_schema, 0, NULL),
		"annotations", "title", "Run Python", "readOnlyHint", 0, "destructiveHint", 0,
			"idempotentHint", 0, "openWorldHint", policy_open_world(p));
	return tool;
}

static json_t *sandbox_info_tool(void)
{
	return json_pack("{s:s,s:s,s:s,s:{s:s,s:{},s:b},s:o,s:{s:s,s:b,s:b,s:b,s:b}}",
		"name", "sandbox_info",
		"title", "Sandbox info",
		"description",
			"Describe the sandbox that run_python uses: the Python version, the backend, the policy "
			"name, the resource limits and the MCP tools the code may call.",
		"inputSchema", "type", "object", "properties", "additionalProperties", 0,
		"outputSchema", json_loads(sandbox_info_output_schema, 0, NULL),
		"annotations", "title", "Sandbox info", "readOnlyHint", 1, "destructiveHint", 0,
			"idempotentHint", 1, "openWorldHint", 0);
}

/* The tool as a client of this protocol version knows it. */
static json_t *tool_for(const json_t *tool, enum proto v)
{
	json_t *t = json_deep_copy(tool);
	if (v < PROTO_2025_06_18) {
		json_object_del(t, "title");
		json_object_del(t, "outputSchema");
	}
	if (v < PROTO_2025_03_26)
		json_object_del(t, "annotations");
	return t;
}

/* ------------------------------------------------------------ calls */

static void call_free(struct mcp_call *c)
{
	struct mcp_batch *b = c->batch;
	list_remove(c);
	if (c->srv->version_call == c)
		c->srv->version_call = NULL;
	run_free(c->run);
	json_decref(c->id);
	json_decref(c->progress_token);
	free(c->code);
	free(c->variables_json);
	free(c->stdin_data);
	free(c);
	if (b) {
		b->pending--;
		batch_maybe_send(b);
	}
}

/* The call answers inside batch b: b waits for it. */
static void call_join_batch(struct mcp_call *c, struct mcp_batch *b)
{
	c->batch = b;
	if (b)
		b->pending++;
}

static struct mcp_call *call_new(struct mcp_server *s, struct mcp_session *ss, struct mcp_batch *b,
				 enum call_kind kind, json_t *id)
{
	struct mcp_call *c = xcalloc(1, sizeof(*c));
	c->srv = s;
	c->session = ss;
	c->kind = kind;
	c->id = json_incref(id);
	c->t_received = now_ms();
	if (kind == CALL_RUN_PYTHON)
		c->seq = ++s->next_seq;
	call_join_batch(c, b);
	return c;
}

/* The run's wall-clock limit: its own, else the policy's (0: none). */
static uint64_t call_timeout_ms(const struct mcp_call *c)
{
	return c->timeout_ms ? c->timeout_ms : c->srv->env->policy.limits.timeout_ms;
}

/* The call's response (stolen); dropped when it was cancelled. */
static void call_reply(struct mcp_call *c, json_t *msg)
{
	if (c->cancelled || !c->session) {
		json_decref(msg);
		return;
	}
	reply(c->session, c->batch, msg);
}

/* notifications/progress, in milliseconds since the request arrived; the
 * value must grow with every notification, and the last one equals the
 * total when there is one. */
static void call_progress(struct mcp_call *c, const char *message, bool final)
{
	json_t *params;
	uint64_t p;
	if (!c->progress_token || !c->session || c->cancelled)
		return;
	p = now_ms() - c->t_received;
	if (c->progress_total) {
		if (final)
			p = c->progress_total;
		else if (p >= c->progress_total)
			p = c->progress_total - 1;
	}
	if (p <= c->last_progress) {
		if (!final && c->n_progress)
			return;
		p = c->last_progress + (c->n_progress ? 1 : 0);
	}
	c->last_progress = p;
	c->n_progress++;
	params = json_pack("{s:O,s:I}", "progressToken", c->progress_token, "progress", (json_int_t)p);
	if (c->progress_total)
		json_object_set_new(params, "total", json_integer((json_int_t)c->progress_total));
	if (c->session->proto >= PROTO_2025_03_26)
		json_object_set_new(params, "message", json_string(message));
	session_send(c->session, jsonrpc_notification("notifications/progress", params), c->id);
}

static void tick_update(struct mcp_server *s)
{
	bool want = false;
	struct itimerspec its = { { 0, 0 }, { 0, 0 } };
	for (struct mcp_call *c = s->active.head; c && !want; c = c->next)
		want = c->state == CALL_RUNNING && c->progress_token && c->session && !c->cancelled;
	if (want == s->tick_armed)
		return;
	if (want) {
		its.it_interval.tv_sec = PROGRESS_INTERVAL_MS / 1000;
		its.it_interval.tv_nsec = (PROGRESS_INTERVAL_MS % 1000) * 1000000L;
		its.it_value = its.it_interval;
	}
	timerfd_settime(s->tick_fd, 0, &its, NULL);
	s->tick_armed = want;
}

static void on_tick(struct loop_watch *w, uint32_t events, void *data)
{
	struct mcp_server *s = data;
	uint64_t n;
	(void)!read(s->tick_fd, &n, sizeof(n));
	for (struct mcp_call *c = s->active.head; c; c = c->next) {
		char msg[64];
		uint64_t ran = now_ms() - c->t_started;
		/* the tick is the server's, not the run's: a run that just
		 * started waits for the next one */
		if (c->state != CALL_RUNNING || c->ended || ran < PROGRESS_INTERVAL_MS / 2)
			continue;
		snprintf(msg, sizeof(msg), "running for %llu s", (unsigned long long)((ran + 500) / 1000));
		call_progress(c, msg, false);
	}
	tick_update(s);
	(void)w;
	(void)events;
}

static void kick(struct mcp_server *s)
{
	uint64_t one = 1;
	(void)!write(s->defer_fd, &one, sizeof(one));
}

static void call_on_done(struct run *r, void *ctx)
{
	struct mcp_call *c = ctx;
	c->ended = true;
	c->ended_next = c->srv->ended;
	c->srv->ended = c;
	kick(c->srv);
	(void)r;
}

/* ------------------------------------------------------------ results */

struct sbuf {
	char *s;
	size_t len, cap;
};

static void sb_add(struct sbuf *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->len + n + 1)
			cap *= 2;
		b->s = xrealloc(b->s, cap);
		b->cap = cap;
	}
	memcpy(b->s + b->len, s, n);
	b->len += n;
	b->s[b->len] = '\0';
}

static void sb_addf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_addf(struct sbuf *b, const char *fmt, ...)
{
	char *s;
	int n;
	va_list ap;
	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	sb_add(b, s, (size_t)n);
	free(s);
}

static void sb_section(struct sbuf *b, const json_t *res, const char *stream)
{
	const json_t *text = json_object_get(res, stream);
	json_int_t dropped = json_integer_value(json_object_get(json_object_get(res, "dropped_bytes"), stream));
	bool truncated = json_is_true(json_object_get(json_object_get(res, "truncated"), stream));
	size_t n = json_string_length(text);
	if (!n && !truncated)
		return;
	if (truncated)
		sb_addf(b, "\n--- %s (truncated: %zu bytes kept, %lld dropped) ---\n", stream, n, (long long)dropped);
	else
		sb_addf(b, "\n--- %s ---\n", stream);
	sb_add(b, json_string_value(text), n);
	if (n && json_string_value(text)[n - 1] != '\n')
		sb_add(b, "\n", 1);
}

/* The readable text block of a run_python result. */
static char *result_text(const json_t *res, const struct run_result *r, const struct policy *p,
			 uint64_t timeout_ms)
{
	struct sbuf b = { 0 };
	const json_t *rv = json_object_get(res, "return_value");
	double secs = (double)r->duration_ms / 1000;
	char mem[32];

	switch (r->status) {
	case RUN_OK:
		sb_addf(&b, "status: ok (exit code 0, %.3g s)\n", secs);
		break;
	case RUN_ERROR:
		if (r->signal)
			sb_addf(&b, "status: error: killed by signal %d (%s) after %.3g s\n", r->signal,
				sigabbrev_np(r->signal) ? sigabbrev_np(r->signal) : "?", secs);
		else
			sb_addf(&b, "status: error (exit code %d, %.3g s)\n", r->exit_code, secs);
		break;
	case RUN_TIMEOUT:
		sb_addf(&b, "status: timeout: killed at the time limit of %g s\n", (double)timeout_ms / 1000);
		break;
	case RUN_MEMORY_LIMIT:
		jc_format_size(mem, sizeof(mem), p->limits.memory_bytes);
		sb_addf(&b, "status: memory_limit: killed for using more than %s of memory\n", mem);
		break;
	case RUN_KILLED:
		sb_addf(&b, "status: killed: the run was stopped before it finished\n");
		break;
	case RUN_SETUP_FAILED:
		sb_addf(&b, "status: setup_failed: the sandbox could not be set up (%s: %s). This is a "
			"problem of the server, not of the code.\n", r->setup_error.step, r->setup_error.msg);
		break;
	default:
		sb_addf(&b, "status: %s\n", run_status_name(r->status));
		break;
	}
	sb_section(&b, res, "stdout");
	sb_section(&b, res, "stderr");
	if (rv && !json_is_null(rv)) {
		cleanup_free char *s = json_dumps(rv, JSON_ENCODE_ANY | JSON_COMPACT);
		sb_addf(&b, "\n--- return_value ---\n%s\n", s ? s : "?");
	}
	return b.s;
}

static json_t *tool_result(struct mcp_session *ss, const char *text, json_t *structured, bool is_error)
{
	json_t *r = json_pack("{s:[{s:s,s:s}],s:b}", "content", "type", "text", "text", text, "isError", is_error);
	if (structured && ss->proto >= PROTO_2025_06_18)
		json_object_set(r, "structuredContent", structured);
	json_decref(structured);
	return r;
}

static json_t *tool_error(struct mcp_session *ss, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static json_t *tool_error(struct mcp_session *ss, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return tool_result(ss, buf, NULL, true);
}

static void finish_run_python(struct mcp_call *c)
{
	struct mcp_server *s = c->srv;
	const struct run_result *r = run_result(c->run);
	json_t *res;
	cleanup_free char *text = NULL;

	s->n_running--;
	log_debug("mcp: run %llu: %s in %llu ms%s", c->seq, run_status_name(r->status),
		  (unsigned long long)r->duration_ms, c->cancelled ? " (cancelled)" : "");
	if (r->status == RUN_SETUP_FAILED)
		log_error("mcp: run %llu: sandbox setup failed: %s: %s", c->seq, r->setup_error.step,
			  r->setup_error.msg);
	if (c->cancelled || !c->session)
		return;
	mlog(c->session, r->status == RUN_SETUP_FAILED ? MLOG_ERROR : MLOG_INFO, "run %llu: %s in %llu ms",
	     c->seq, run_status_name(r->status), (unsigned long long)r->duration_ms);
	res = result_to_json(r);
	text = result_text(res, r, &s->env->policy, call_timeout_ms(c));
	call_progress(c, run_status_name(r->status), true);
	call_reply(c, jsonrpc_result(c->id, tool_result(c->session, text, res, r->status != RUN_OK)));
}

/* ------------------------------------------------------------ sandbox_info */

static json_t *sandbox_info(struct mcp_server *s)
{
	const struct policy *p = &s->env->policy;
	json_t *pj = policy_to_json(p);
	json_t *tools;
	json_t *info;
	if (s->cfg.jail_tools) {
		tools = s->cfg.jail_tools(s->cfg.tool_ctx, p);
	} else {
		tools = json_array();
		for (size_t i = 0; i < p->n_tools_allow; i++)
			json_array_append_new(tools, json_pack("{s:s}", "pattern", p->tools_allow[i]));
	}
	info = json_pack("{s:s?,s:s?,s:s,s:s,s:O,s:O,s:o,s:I,s:I,s:s}",
		"python_version", s->python_version,
		"python_implementation", s->python_impl,
		"backend", p->backend ? p->backend : "native",
		"policy", p->name ? p->name : "default",
		"limits", json_object_get(pj, "limits"),
		"network", json_object_get(pj, "network"),
		"tools", tools ? tools : json_array(),
		"tool_budget", (json_int_t)p->tools_budget,
		"max_concurrent_runs", (json_int_t)s->cfg.max_runs,
		"pycell_version", PACKAGE_VERSION);
	json_decref(pj);
	return info;
}

static void answer_sandbox_info(struct mcp_call *c)
{
	json_t *info = sandbox_info(c->srv);
	cleanup_free char *text = json_dumps(info, JSON_INDENT(2));
	call_reply(c, jsonrpc_result(c->id, tool_result(c->session, text ? text : "{}", info, false)));
}

static void finish_version(struct mcp_call *c)
{
	struct mcp_server *s = c->srv;
	const struct run_result *r = c->run ? run_result(c->run) : NULL;
	char impl[32], ver[32];

	if (!r) {
		/* could not start: ensure_version_probe logged why */
	} else if (r->status == RUN_OK && r->out.data && sscanf(r->out.data, "%31s %31s", impl, ver) == 2) {
		s->python_impl = xstrdup(impl);
		s->python_version = xstrdup(ver);
	} else {
		log_warn("mcp: could not ask the interpreter for its version: %s%s%s",
			 run_status_name(r->status), r->status == RUN_SETUP_FAILED ? ": " : "",
			 r->status == RUN_SETUP_FAILED ? r->setup_error.msg : "");
	}
	for (struct mcp_call *w = s->active.head, *next; w; w = next) {
		next = w->next;
		if (w->kind == CALL_SANDBOX_INFO) {
			answer_sandbox_info(w);
			call_free(w);
		}
	}
}

/* ------------------------------------------------------------ scheduling */

/* Take ready jail i off the list (the rest keep their order). */
static struct run *ready_take(struct mcp_server *s, unsigned i)
{
	struct run *r = s->ready[i];
	memmove(s->ready + i, s->ready + i + 1, (--s->n_ready - i) * sizeof(*s->ready));
	return r;
}

/* Keep cfg.ready jails made ahead while there is a zygote (a dead one is
 * replaced).  Making one costs the loop a zygote round trip and the id
 * maps (about 1 ms); a failure is retried a second later at the earliest. */
static void ready_fill(struct mcp_server *s)
{
	for (unsigned i = 0; i < s->n_ready;) {
		if (run_parked_alive(s->ready[i])) {
			i++;
			continue;
		}
		log_warn("mcp: a ready jail died while waiting; making another");
		run_free(ready_take(s, i));
	}
	while (s->env->warm && s->n_ready < s->cfg.ready && now_ms() - s->ready_failed_ms >= 1000) {
		struct run_request req = { .stdin_fd = -1 };
		struct pc_err err = { 0 };
		struct run *r;
		run_request_from_env(&req, s->env);
		req.mode = RUN_MODE_CELL;
		if (!(r = run_park(s->loop, &req, &err))) {
			log_warn("mcp: could not make a ready jail: %s: %s", err.step, err.msg);
			s->ready_failed_ms = now_ms();
			return;
		}
		s->ready[s->n_ready++] = r;
	}
}

/* A run_python on a ready jail, the oldest (the most likely to be done
 * getting ready); false when there is none or none works (those that
 * failed are freed, and the call starts the usual way). */
static bool start_ready(struct mcp_server *s, struct mcp_call *c, const struct run_request *req)
{
	/* a program a ready jail cannot take (its files, with 64 KiB for
	 * their names) leaves the jails for the next call */
	if (c->code_len + (c->variables_json ? strlen(c->variables_json) : 0) + (64u << 10) > JAIL_PARK_FILES_MAX)
		return false;
	while (s->n_ready) {
		struct pc_err err = { 0 };
		struct run *r = ready_take(s, 0);
		if (run_start_parked(r, req, &err) == 0) {
			c->run = r;
			return true;
		}
		log_warn("mcp: run %llu: a ready jail failed (%s: %s); trying another", c->seq, err.step, err.msg);
		run_free(r);
	}
	return false;
}

static int call_start(struct mcp_call *c, struct pc_err *err)
{
	struct mcp_server *s = c->srv;
	struct run_request req = { .stdin_fd = -1 };

	run_request_from_env(&req, s->env);
	req.mode = c->kind == CALL_PY_VERSION ? RUN_MODE_SCRIPT : RUN_MODE_CELL;
	req.code = c->code;
	req.code_len = c->code_len;
	req.prog_name = "main.py";
	req.variables_json = c->variables_json;
	req.stdin_data = c->stdin_data;
	req.stdin_len = c->stdin_len;
	req.timeout_ms = c->timeout_ms;
	req.on_done = call_on_done;
	req.ctx = c;
	if (s->cfg.attach_tools && c->kind == CALL_RUN_PYTHON)
		s->cfg.attach_tools(s->cfg.tool_ctx, &req);
	c->state = CALL_RUNNING;
	c->t_started = now_ms();
	/* the next ready jail is made once this run has been answered
	 * (on_defer): made now, it would compete with this run for the CPU
	 * and hold the loop for the zygote's round trip */
	if (c->kind == CALL_RUN_PYTHON && start_ready(s, c, &req))
		return 0;
	return run_start(s->loop, &req, &c->run, err);
}

static void schedule(struct mcp_server *s)
{
	struct mcp_call *c;
	while (s->n_running < s->cfg.max_runs && (c = s->queue.head)) {
		struct pc_err err = { 0 };
		list_remove(c);
		list_push(&s->active, c);
		if (call_start(c, &err) < 0) {
			log_error("mcp: run %llu: could not start: %s", c->seq, err.msg);
			mlog(c->session, MLOG_ERROR, "run %llu: could not start: %s", c->seq, err.msg);
			call_reply(c, jsonrpc_result(c->id, tool_error(c->session,
				"The sandbox could not be started (%s). This is a problem of the server, not of "
				"the code; try again later.", err.msg)));
			call_free(c);
			continue;
		}
		s->n_running++;
		if (call_timeout_ms(c))
			c->progress_total = c->t_started - c->t_received + call_timeout_ms(c);
		log_debug("mcp: run %llu started (%u running, %u queued)", c->seq, s->n_running, s->queue.n);
		mlog(c->session, MLOG_INFO, "run %llu started", c->seq);
		call_progress(c, "started", false);
	}
	tick_update(s);
}

static void on_defer(struct loop_watch *w, uint32_t events, void *data)
{
	struct mcp_server *s = data;
	uint64_t n;
	(void)!read(s->defer_fd, &n, sizeof(n));
	while (s->ended) {
		struct mcp_call *c = s->ended;
		s->ended = c->ended_next;
		if (c->kind == CALL_PY_VERSION)
			finish_version(c);
		else
			finish_run_python(c);
		call_free(c);
	}
	schedule(s);
	ready_fill(s);
	(void)w;
	(void)events;
}

static void ensure_version_probe(struct mcp_server *s)
{
	static const char code[] =
		"import sys\nprint(sys.implementation.name, '%d.%d.%d' % sys.version_info[:3])\n";
	struct pc_err err = { 0 };
	struct mcp_call *c;
	if (s->version_call)
		return;
	c = call_new(s, NULL, NULL, CALL_PY_VERSION, NULL);
	c->code = xstrdup(code);
	c->code_len = strlen(code);
	list_push(&s->active, c);
	s->version_call = c;
	/* Not counted against max_runs: it is ours, short, and asked once. */
	if (call_start(c, &err) < 0) {
		log_warn("mcp: could not start the version probe: %s", err.msg);
		/* answer the waiting sandbox_info calls without a version */
		c->ended = true;
		c->ended_next = s->ended;
		s->ended = c;
		c->run = NULL;
		kick(s);
	}
}

/* ------------------------------------------------------------ requests */

static bool is_identifier(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	if (!*p || (*p >= '0' && *p <= '9'))
		return false;
	for (; *p; p++) {
		/* bytes >= 0x80: non-ASCII identifiers; Python checks the rest */
		if (!(*p == '_' || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p >= 0x80))
			return false;
	}
	return true;
}

static const char *json_type_name(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT: return "an object";
	case JSON_ARRAY: return "an array";
	case JSON_STRING: return "a string";
	case JSON_INTEGER: return "an integer";
	case JSON_REAL: return "a number";
	case JSON_TRUE:
	case JSON_FALSE: return "a boolean";
	case JSON_NULL: return "null";
	default: return "something else";
	}
}

/* Check run_python's arguments into c; NULL or why they are wrong. */
static const char *run_python_args(struct mcp_server *s, const json_t *args, struct mcp_call *c,
				   char *why, size_t whylen)
{
	uint64_t max_ms = s->env->policy.limits.timeout_ms;
	const char *key;
	json_t *v;

	if (!json_is_object(args)) {
		snprintf(why, whylen, "arguments must be an object such as {\"code\": \"print(1)\"}, got %s",
			 args ? json_type_name(args) : "nothing");
		return why;
	}
	json_object_foreach((json_t *)args, key, v) {
		if (strcmp(key, "code") != 0 && strcmp(key, "variables") != 0 && strcmp(key, "stdin") != 0 &&
		    strcmp(key, "timeout_s") != 0) {
			snprintf(why, whylen, "unknown argument \"%.64s\"; run_python takes code, variables, "
				 "stdin and timeout_s", key);
			return why;
		}
	}
	v = json_object_get(args, "code");
	if (!v) {
		snprintf(why, whylen, "missing the required argument \"code\" (the Python source to run)");
		return why;
	}
	if (!json_is_string(v)) {
		snprintf(why, whylen, "\"code\" must be a string of Python source, got %s", json_type_name(v));
		return why;
	}
	c->code_len = json_string_length(v);
	c->code = xmalloc(c->code_len + 1);
	memcpy(c->code, json_string_value(v), c->code_len + 1);

	v = json_object_get(args, "variables");
	if (v && !json_is_null(v)) {
		json_t *val;
		if (!json_is_object(v)) {
			snprintf(why, whylen, "\"variables\" must be an object mapping names to JSON values, "
				 "got %s", json_type_name(v));
			return why;
		}
		json_object_foreach(v, key, val) {
			if (!is_identifier(key)) {
				snprintf(why, whylen, "variables: \"%.64s\" is not a valid Python identifier", key);
				return why;
			}
		}
		c->variables_json = json_dumps(v, JSON_COMPACT);
	}
	v = json_object_get(args, "stdin");
	if (v && !json_is_null(v)) {
		if (!json_is_string(v)) {
			snprintf(why, whylen, "\"stdin\" must be a string, got %s", json_type_name(v));
			return why;
		}
		c->stdin_len = json_string_length(v);
		c->stdin_data = xmalloc(c->stdin_len + 1);
		memcpy(c->stdin_data, json_string_value(v), c->stdin_len + 1);
	}
	v = json_object_get(args, "timeout_s");
	if (v && !json_is_null(v)) {
		double t;
		if (!json_is_number(v)) {
			snprintf(why, whylen, "\"timeout_s\" must be a number of seconds, got %s", json_type_name(v));
			return why;
		}
		t = json_number_value(v);
		if (!(t > 0) || !isfinite(t)) {
			snprintf(why, whylen, "\"timeout_s\" must be greater than 0, got %g", t);
			return why;
		}
		if (max_ms && t * 1000 > (double)max_ms) {
			snprintf(why, whylen, "\"timeout_s\" %g is above this server's limit of %g s: use at most %g "
				 "or leave it out", t, (double)max_ms / 1000, (double)max_ms / 1000);
			return why;
		}
		t = ceil(t * 1000);
		c->timeout_ms = t < 1 ? 1 : (uint64_t)t;
	}
	return NULL;
}

/* A request answered later: its id must not be taken by another. */
static struct mcp_call *find_call(struct mcp_session *ss, const json_t *id)
{
	struct call_list *lists[] = { &ss->srv->queue, &ss->srv->active };
	for (size_t i = 0; i < ARRAY_SIZE(lists); i++)
		for (struct mcp_call *c = lists[i]->head; c; c = c->next)
			if (c->session == ss && !c->cancelled && json_equal(c->id, id))
				return c;
	return NULL;
}

static void tools_call_run_python(struct mcp_session *ss, struct mcp_batch *b, json_t *id,
				  const json_t *args, const json_t *token)
{
	struct mcp_server *s = ss->srv;
	struct mcp_call *c;
	char why[512];

	if (s->queue.n >= MAX_QUEUED) {
		reply(ss, b, jsonrpc_result(id, tool_error(ss, "The server is busy: %u runs are already waiting. "
			"Wait for some to finish, then try again.", s->queue.n)));
		return;
	}
	c = call_new(s, ss, NULL, CALL_RUN_PYTHON, id);
	if (run_python_args(s, args, c, why, sizeof(why))) {
		reply(ss, b, jsonrpc_result(id, tool_error(ss, "Invalid arguments for run_python: %s", why)));
		call_free(c);
		return;
	}
	call_join_batch(c, b);
	if (token)
		c->progress_token = json_incref((json_t *)token);
	c->state = CALL_QUEUED;
	list_push(&s->queue, c);
	if (s->n_running >= s->cfg.max_runs) {
		char msg[96];
		snprintf(msg, sizeof(msg), "queued: %u runs ahead", s->queue.n - 1 + s->n_running);
		mlog(ss, MLOG_DEBUG, "run %llu %s", c->seq, msg);
		call_progress(c, msg, false);
	}
	schedule(s);
}

static void tools_call_sandbox_info(struct mcp_session *ss, struct mcp_batch *b, json_t *id, const json_t *args)
{
	struct mcp_server *s = ss->srv;
	struct mcp_call *c;
	if (args && !json_is_null(args) && (!json_is_object(args) || json_object_size(args) > 0)) {
		reply(ss, b, jsonrpc_result(id, tool_error(ss, "Invalid arguments for sandbox_info: it takes no "
			"arguments; call it with {}")));
		return;
	}
	c = call_new(s, ss, b, CALL_SANDBOX_INFO, id);
	if (s->python_version) {
		answer_sandbox_info(c);
		call_free(c);
		return;
	}
	c->state = CALL_WAITING;
	list_push(&s->active, c);
	ensure_version_probe(s);
}

static void handle_tools_call(struct mcp_session *ss, struct mcp_batch *b, json_t *id, json_t *params)
{
	json_t *name = json_object_get(params, "name");
	json_t *args = json_object_get(params, "arguments");
	json_t *token = json_object_get(json_object_get(params, "_meta"), "progressToken");
	if (!json_is_string(name)) {
		reply(ss, b, jsonrpc_error(id, JSONRPC_INVALID_PARAMS,
			"Invalid params: tools/call needs \"name\", the tool's name as a string", NULL));
		return;
	}
	if (token && !json_is_string(token) && !json_is_integer(token))
		token = NULL;
	if (strcmp(json_string_value(name), "run_python") == 0)
		tools_call_run_python(ss, b, id, args, token);
	else if (strcmp(json_string_value(name), "sandbox_info") == 0)
		tools_call_sandbox_info(ss, b, id, args);
	else
		reply(ss, b, jsonrpc_error(id, JSONRPC_INVALID_PARAMS, "Unknown tool: this server has run_python "
			"and sandbox_info", json_pack("{s:O}", "name", name)));
}

/* Our cursors are "tools:N", N the index of the page's first tool. */
static bool parse_cursor(const json_t *cursor, size_t n, size_t *start)
{
	const char *cs = json_string_value(cursor);
	char *end = NULL;
	unsigned long v;
	if (!cs || strncmp(cs, "tools:", 6) != 0 || cs[6] < '0' || cs[6] > '9')
		return false;
	errno = 0;
	v = strtoul(cs + 6, &end, 10);
	if (errno || *end || v == 0 || v >= n)
		return false;
	*start = v;
	return true;
}

static void handle_tools_list(struct mcp_session *ss, struct mcp_batch *b, json_t *id, json_t *params)
{
	struct mcp_server *s = ss->srv;
	json_t *cursor = json_object_get(params, "cursor");
	size_t start = 0, n = json_array_size(s->tools), page = s->cfg.page_size ? s->cfg.page_size : n;
	json_t *tools, *result;

	if (cursor && !json_is_null(cursor) && !parse_cursor(cursor, n, &start)) {
		reply(ss, b, jsonrpc_error(id, JSONRPC_INVALID_PARAMS,
			"Invalid params: unknown cursor; pass the nextCursor of a previous tools/list", NULL));
		return;
	}
	tools = json_array();
	for (size_t i = start; i < n && i < start + page; i++)
		json_array_append_new(tools, tool_for(json_array_get(s->tools, i), ss->proto));
	result = json_pack("{s:o}", "tools", tools);
	if (start + page < n)
		json_object_set_new(result, "nextCursor", json_sprintf("tools:%zu", start + page));
	reply(ss, b, jsonrpc_result(id, result));
}

static void handle_initialize(struct mcp_session *ss, struct mcp_batch *b, json_t *id, json_t *params)
{
	json_t *version = json_object_get(params, "protocolVersion");
	json_t *client = json_object_get(params, "clientInfo");
	enum proto v = PROTO_LATEST;
	json_t *server_info, *result;

	if (ss->proto != PROTO_NONE) {
		reply(ss, b, jsonrpc_error(id, JSONRPC_INVALID_REQUEST,
			"Invalid Request: the session is already initialized", NULL));
		return;
	}
	if (b) {
		reply(ss, b, jsonrpc_error(id, JSONRPC_INVALID_REQUEST,
			"Invalid Request: initialize must not be part of a batch", NULL));
		return;
	}
	if (!json_is_string(version)) {
		reply(ss, b, jsonrpc_error(id, JSONRPC_INVALID_PARAMS,
			"Invalid params: initialize needs \"protocolVersion\", a string such as \""
			MCP_LATEST_PROTOCOL "\"", NULL));
		return;
	}
	/* A version we do not speak gets the newest we do; the client decides
	 * whether it can go on. */
	for (int i = 0; mcp_protocol_versions[i]; i++)
		if (strcmp(json_string_value(version), mcp_protocol_versions[i]) == 0)
			v = (enum proto)i;
	ss->proto = v;
	free(ss->client);
	ss->client = xasprintf("%s %s", json_string_value(json_object_get(client, "name")) ?: "unknown-client",
			       json_string_value(json_object_get(client, "version")) ?: "");
	log_info("mcp: %s initialized with protocol %s (asked for %s)", ss->client, mcp_protocol_versions[v],
		 json_string_value(version));

	server_info = json_pack("{s:s,s:s}", "name", "pycell", "version", PACKAGE_VERSION);
	if (v >= PROTO_2025_06_18)
		json_object_set_new(server_info, "title", json_string("pycell: Python in a Linux sandbox"));
	result = json_pack("{s:s,s:{s:{s:b},s:{}},s:o,s:s}",
		"protocolVersion", mcp_protocol_versions[v],
		"capabilities", "tools", "listChanged", 0, "logging",
		"serverInfo", server_info,
		"instructions",
			"pycell runs Python code in a fresh, isolated sandbox for every call. Use run_python to "
			"compute, parse or transform data; the value of the last expression comes back as "
			"return_value. Nothing persists between calls. sandbox_info shows the Python version "
			"and the limits.");
	reply(ss, b, jsonrpc_result(id, result));
}

static void handle_set_level(struct mcp_session *ss, struct mcp_batch *b, json_t *id, json_t *params)
{
	json_t *level = json_object_get(params, "level");
	for (int i = 0; json_is_string(level) && mlog_names[i]; i++) {
		if (strcmp(json_string_value(level), mlog_names[i]) == 0) {
			ss->log_min = (enum mlog)i;
			reply(ss, b, jsonrpc_result(id, json_object()));
			return;
		}
	}
	reply(ss, b, jsonrpc_error(id, JSONRPC_INVALID_PARAMS, "Invalid params: \"level\" must be one of debug, "
		"info, notice, warning, error, critical, alert, emergency", NULL));
}

static void handle_request(struct mcp_session *ss, struct mcp_batch *b, const struct jsonrpc_msg *m)
{
	static const char *const methods[] = { "tools/list", "tools/call", "logging/setLevel", NULL };
	const char *method = m->method;
	json_t *params = m->params;
	bool known = false;

	if (strcmp(method, "ping") == 0) {
		reply(ss, b, jsonrpc_result(m->id, json_object()));
		return;
	}
	if (params && !json_is_object(params)) {
		reply(ss, b, jsonrpc_error(m->id, JSONRPC_INVALID_PARAMS, "Invalid params: \"params\" must be an "
			"object", NULL));
		return;
	}
	if (strcmp(method, "initialize") == 0) {
		handle_initialize(ss, b, m->id, params);
		return;
	}
	for (int i = 0; methods[i]; i++)
		known |= strcmp(method, methods[i]) == 0;
	if (!known) {
		reply(ss, b, jsonrpc_error(m->id, JSONRPC_METHOD_NOT_FOUND, "Method not found",
			json_pack("{s:s}", "method", method)));
		return;
	}
	if (ss->proto == PROTO_NONE) {
		reply(ss, b, jsonrpc_error(m->id, JSONRPC_INVALID_REQUEST,
			"Invalid Request: the session is not initialized; send initialize first", NULL));
		return;
	}
	if (find_call(ss, m->id)) {
		reply(ss, b, jsonrpc_error(m->id, JSONRPC_INVALID_REQUEST,
			"Invalid Request: this id belongs to a request still in progress", NULL));
		return;
	}
	if (strcmp(method, "tools/list") == 0)
		handle_tools_list(ss, b, m->id, params);
	else if (strcmp(method, "tools/call") == 0)
		handle_tools_call(ss, b, m->id, params);
	else
		handle_set_level(ss, b, m->id, params);
}

static void cancel_call(struct mcp_call *c, const char *reason)
{
	log_debug("mcp: request %llu cancelled by the client%s%s", c->seq, reason ? ": " : "", reason ? reason : "");
	mlog(c->session, MLOG_INFO, "run %llu cancelled%s%s", c->seq, reason ? ": " : "", reason ? reason : "");
	c->cancelled = true;
	if (c->state == CALL_RUNNING && c->kind == CALL_RUN_PYTHON) {
		run_cancel(c->run);   /* on_done follows; no response, as the spec says */
		return;
	}
	call_free(c);
}

static void handle_notification(struct mcp_session *ss, const char *method, json_t *params)
{
	json_t *id;
	struct mcp_call *c;
	/* notifications/initialized needs nothing: this server sends no
	 * requests that would have to wait for it.  Others are ignored. */
	if (strcmp(method, "notifications/cancelled") != 0) {
		log_debug("mcp: notification %s", method);
		return;
	}
	id = json_object_get(params, "requestId");
	c = jsonrpc_id_valid(id) ? find_call(ss, id) : NULL;
	if (c)
		cancel_call(c, json_string_value(json_object_get(params, "reason")));
}

static void dispatch(struct mcp_session *ss, json_t *msg, struct mcp_batch *b)
{
	struct jsonrpc_msg m;
	jsonrpc_classify(msg, &m);
	switch (m.kind) {
	case JSONRPC_INVALID:
		log_debug("mcp: invalid request: %s", m.why);
		mlog(ss, MLOG_WARNING, "invalid request: %s", m.why);
		reply(ss, b, jsonrpc_errorf(m.id, JSONRPC_INVALID_REQUEST, "Invalid Request: %s", m.why));
		break;
	case JSONRPC_RESPONSE:
		/* we send no requests, so there is nothing to match it with */
		log_debug("mcp: ignoring a response from the client");
		break;
	case JSONRPC_NOTIFICATION:
		handle_notification(ss, m.method, m.params);
		break;
	case JSONRPC_REQUEST:
		handle_request(ss, b, &m);
		break;
	default:
		break;
	}
}

static bool batches_allowed(const struct mcp_session *ss)
{
	/* JSON-RPC batches were part of MCP from 2025-03-26 until 2025-06-18
	 * removed them; 2024-11-05 inherits them from JSON-RPC itself. */
	return ss->proto == PROTO_2024_11_05 || ss->proto == PROTO_2025_03_26;
}

void mcp_session_handle_message(struct mcp_session *ss, json_t *msg)
{
	struct mcp_batch *b;
	size_t i;
	json_t *el;

	if (!json_is_array(msg)) {
		dispatch(ss, msg, NULL);
		return;
	}
	if (!batches_allowed(ss) || json_array_size(msg) == 0) {
		const char *why = json_array_size(msg) == 0 ? "Invalid Request: an empty batch"
			: ss->proto == PROTO_NONE ? "Invalid Request: a batch before initialize"
			: "Invalid Request: JSON-RPC batches are not supported in this protocol version";
		session_send(ss, jsonrpc_error(NULL, JSONRPC_INVALID_REQUEST, why, NULL), NULL);
		return;
	}
	b = xcalloc(1, sizeof(*b));
	b->session = ss;
	b->replies = json_array();
	b->dispatching = true;
	json_array_foreach(msg, i, el)
		dispatch(ss, el, b);
	b->dispatching = false;
	batch_maybe_send(b);
}

void mcp_session_handle_text(struct mcp_session *ss, const char *text, size_t len)
{
	json_t *err = NULL;
	json_t *msg;
	size_t i = 0;
	while (i < len && (text[i] == ' ' || text[i] == '\t' || text[i] == '\r'))
		i++;
	if (i == len)
		return;   /* blank lines between messages are harmless */
	msg = jsonrpc_parse(text, len, &err);
	if (!msg) {
		log_debug("mcp: parse error in a %zu-byte message", len);
		mlog(ss, MLOG_WARNING, "parse error in a %zu-byte message", len);
		session_send(ss, err, NULL);
		return;
	}
	mcp_session_handle_message(ss, msg);
	json_decref(msg);
}

void mcp_session_oversized(struct mcp_session *ss, size_t max)
{
	log_warn("mcp: dropped a message over the %zu-byte limit", max);
	mlog(ss, MLOG_WARNING, "dropped a message over the %zu-byte limit", max);
	session_send(ss, jsonrpc_error(NULL, JSONRPC_INVALID_REQUEST, "Invalid Request: the message is too large",
				       json_pack("{s:I}", "max_bytes", (json_int_t)max)), NULL);
}

struct mcp_session *mcp_session_new(struct mcp_server *s, const struct mcp_session_ops *ops, void *ctx)
{
	struct mcp_session *ss = xcalloc(1, sizeof(*ss));
	ss->srv = s;
	ss->ops = *ops;
	ss->ctx = ctx;
	ss->proto = PROTO_NONE;
	/* quiet until the client picks a level with logging/setLevel */
	ss->log_min = MLOG_OFF;
	return ss;
}

void mcp_session_free(struct mcp_session *ss)
{
	struct mcp_server *s;
	struct call_list *lists[2];
	if (!ss)
		return;
	s = ss->srv;
	lists[0] = &s->queue;
	lists[1] = &s->active;
	for (size_t i = 0; i < ARRAY_SIZE(lists); i++) {
		for (struct mcp_call *c = lists[i]->head, *next; c; c = next) {
			next = c->next;
			if (c->session != ss)
				continue;
			if (c->batch)
				c->batch->session = NULL;
			c->session = NULL;
			c->cancelled = true;
			if (c->state == CALL_RUNNING)
				run_cancel(c->run);
			else
				call_free(c);
		}
	}
	free(ss->client);
	free(ss);
}

/* ------------------------------------------------------------ server */

struct mcp_server *mcp_server_new(struct loop *l, const struct run_env *env,
				  const struct mcp_server_config *cfg, struct pc_err *err)
{
	struct mcp_server *s = xcalloc(1, sizeof(*s));
	s->loop = l;
	s->env = env;
	s->cfg = *cfg;
	if (!s->cfg.max_runs)
		s->cfg.max_runs = DEFAULT_MAX_RUNS;
	s->tick_fd = -1;
	s->defer_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (s->defer_fd < 0 || loop_add(l, &s->w_defer, s->defer_fd, EPOLLIN, on_defer, s) < 0) {
		pc_syserr(err, "mcp", "eventfd");
		goto fail;
	}
	s->tick_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (s->tick_fd < 0 || loop_add(l, &s->w_tick, s->tick_fd, EPOLLIN, on_tick, s) < 0) {
		pc_syserr(err, "mcp", "timerfd");
		goto fail;
	}
	s->tools = json_pack("[o,o]", run_python_tool(&env->policy), sandbox_info_tool());
	if (!s->tools) {
		pc_fail(err, 0, "mcp", "could not build the tool definitions");
		goto fail;
	}
	s->ready = xcalloc(s->cfg.ready ? s->cfg.ready : 1, sizeof(*s->ready));
	ready_fill(s);
	return s;
fail:
	mcp_server_free(s);
	return NULL;
}

void mcp_server_free(struct mcp_server *s)
{
	if (!s)
		return;
	/* run_free kills and reaps each jail; nothing is sent */
	while (s->queue.head)
		call_free(s->queue.head);
	while (s->active.head) {
		s->active.head->cancelled = true;
		call_free(s->active.head);
	}
	for (unsigned i = 0; i < s->n_ready; i++)
		run_free(s->ready[i]);
	free(s->ready);
	loop_del(s->loop, &s->w_defer);
	loop_del(s->loop, &s->w_tick);
	if (s->defer_fd >= 0)
		close(s->defer_fd);
	if (s->tick_fd >= 0)
		close(s->tick_fd);
	json_decref(s->tools);
	free(s->python_impl);
	free(s->python_version);
	free(s);
}
