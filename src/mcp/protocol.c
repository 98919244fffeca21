/* pycell: MCP: sending, dispatch of requests and notifications, sessions,
 * and the server that holds them (internal.h says who does what). */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>

#include "base/jsonrpc.h"
#include "base/json_scan.h"
#include "base/log.h"
#include "mcp/internal.h"
#include "mcp/render.h"
#include "mcp/resources.h"
#include "mcp/sessions.h"
#include "mcp/subscriptions.h"
#include "mcp/tasks.h"
#include "mcp/tools.h"

const char *const mcp_protocol_versions[] = { "2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28",
					       NULL };

/* The _meta keys of a 2026-07-28 request and result. */
#define META_VERSION "io.modelcontextprotocol/protocolVersion"
#define META_CAPS "io.modelcontextprotocol/clientCapabilities"
#define META_CLIENT "io.modelcontextprotocol/clientInfo"
#define META_LOG_LEVEL "io.modelcontextprotocol/logLevel"
#define META_SERVER "io.modelcontextprotocol/serverInfo"
/* The 2026-07-28 error codes (basic/index, "Error Codes"). */
#define MCP_UNSUPPORTED_VERSION -32022
/* How long a client may cache tools/list and server/discover (ttlMs): the
 * tools and capabilities of a server never change while it runs, but a
 * restarted one may have a new policy. */
#define CACHE_TTL_MS 300000

static const char instructions[] =
	"pycell runs Python code in a fresh, isolated sandbox for every call. Use run_python to "
	"compute, parse or transform data; the value of the last expression comes back as "
	"return_value, figures as images, files written in /workspace as resources. Nothing "
	"persists between calls unless they pass a session_id from session_open. sandbox_info "
	"shows the Python version, the importable packages and the limits.";
const char *const mlog_names[] = { "debug", "info", "notice", "warning", "error", "critical", "alert",
				   "emergency", NULL };

/* ------------------------------------------------------------ lists */

void mcp_list_push(struct call_list *l, struct mcp_call *c)
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

void mcp_list_remove(struct mcp_call *c)
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

void mcp_send(struct mcp_conn *conn, json_t *msg, const json_t *related)
{
	if (conn)
		conn->ops.send(conn->ctx, msg, related);
	json_decref(msg);
}

void mcp_batch_maybe_send(struct mcp_batch *b)
{
	if (b->dispatching || b->pending)
		return;
	if (b->conn && json_array_size(b->replies) > 0) {
		mcp_send(b->conn, b->replies, NULL);
		b->replies = NULL;
	}
	json_decref(b->replies);
	free(b);
}

void mcp_reply(struct mcp_conn *conn, struct mcp_batch *b, json_t *msg)
{
	if (b) {
		json_array_append_new(b->replies, msg);
		return;
	}
	mcp_send(conn, msg, json_object_get(msg, "id"));
}

static json_t *server_info(enum proto v)
{
	json_t *info = json_pack("{s:s,s:s}", "name", "pycell", "version", PACKAGE_VERSION);
	if (v >= PROTO_2025_06_18)
		json_object_set_new(info, "title", json_string("pycell: Python in a Linux sandbox"));
	return info;
}

json_t *mcp_result_object(enum proto v, json_t *result)
{
	if (result && proto_is_modern(v)) {
		json_t *meta = json_object_get(result, "_meta");
		if (!meta)
			json_object_set_new(result, "_meta", meta = json_object());
		json_object_set_new(meta, META_SERVER, server_info(v));
		if (!json_object_get(result, "resultType"))
			json_object_set_new(result, "resultType", json_string("complete"));
	}
	return result;
}

json_t *mcp_result(enum proto v, json_t *id, json_t *result)
{
	return jsonrpc_result(id, mcp_result_object(v, result));
}

void mcp_answer(const struct mcp_req *r, json_t *result)
{
	mcp_reply(r->conn, r->b, mcp_result(r->v, r->id, result));
}

void mcp_fail(const struct mcp_req *r, int code, const char *msg, json_t *data)
{
	mcp_reply(r->conn, r->b, jsonrpc_error(r->id, code, msg, data));
}

static void send_log(struct mcp_conn *conn, enum mlog level, const json_t *related, const char *fmt, va_list ap)
{
	char buf[1024];
	vsnprintf(buf, sizeof(buf), fmt, ap);
	utf8_trim_tail(buf);
	mcp_send(conn, jsonrpc_notification("notifications/message",
					      json_pack("{s:s,s:s,s:s}", "level", mlog_names[level],
							"logger", "pycell", "data", buf)), related);
}

void mcp_log(struct mcp_conn *conn, enum mlog level, const char *fmt, ...)
{
	va_list ap;
	if (!conn || conn->era != ERA_LEGACY || level < conn->log_min)
		return;
	va_start(ap, fmt);
	send_log(conn, level, NULL, fmt, ap);
	va_end(ap);
}

void mcp_call_log(struct mcp_call *c, enum mlog level, const char *fmt, ...)
{
	va_list ap;
	if (!c->conn || c->cancelled)
		return;
	if (proto_is_modern(c->v) ? level < c->log_min : (c->conn->era != ERA_LEGACY || level < c->conn->log_min))
		return;
	va_start(ap, fmt);
	send_log(c->conn, level, c->id, fmt, ap);
	va_end(ap);
}

/* ------------------------------------------------------------ requests */

/* A request answered later: its id must not be taken by another. */
static struct mcp_call *find_call(struct mcp_conn *conn, const json_t *id)
{
	struct call_list *lists[] = { &conn->srv->queue, &conn->srv->active };
	for (size_t i = 0; i < ARRAY_SIZE(lists); i++)
		for (struct mcp_call *c = lists[i]->head; c; c = c->next)
			if (c->conn == conn && !c->cancelled && json_equal(c->id, id))
				return c;
	return NULL;
}

void mcp_tool_run_python(const struct mcp_req *r, const json_t *args, const json_t *token)
{
	struct mcp_server *s = r->conn->srv;
	struct mcp_call *c;
	struct pc_err err;

	if (s->queue.n >= MAX_QUEUED) {
		mcp_answer(r, mcp_tool_error(r->v, "The server is busy: %u runs are already waiting. "
			"Wait for some to finish, then try again.", s->queue.n));
		return;
	}
	c = mcp_call_new(s, r, CALL_RUN_PYTHON);
	c->task_ok = r->tasks_ok;
	if (mcp_run_python_args(s, args, c, &err) < 0) {
		pc_err_wrap(&err, "Invalid arguments for run_python");
		mcp_answer(r, mcp_tool_error(r->v, "%s", err.msg));
		mcp_call_free(c);
		return;
	}
	if (c->session_id && mcp_tsession_take(c, r) < 0) {
		mcp_call_free(c);
		return;
	}
	mcp_call_join_batch(c, r->b);
	if (token)
		c->progress_token = json_incref((json_t *)token);
	c->state = CALL_QUEUED;
	mcp_list_push(&s->queue, c);
	if (s->n_running >= s->cfg.max_runs) {
		char msg[96];
		snprintf(msg, sizeof(msg), "queued: %u runs ahead", s->queue.n - 1 + s->n_running);
		mcp_call_log(c, MLOG_DEBUG, "run %llu %s", c->seq, msg);
		mcp_call_progress(c, msg);
	}
	if (c->task_ok)
		mcp_tasks_arm(s);
	/* c may be answered and freed in here (a jail that cannot start) */
	mcp_schedule(s);
}

void mcp_answer_sandbox_info(struct mcp_call *c)
{
	mcp_call_reply(c, mcp_result(c->v, c->id, mcp_structured_result(c->v, mcp_sandbox_info(c->srv))));
}

void mcp_tool_sandbox_info(const struct mcp_req *r, const json_t *args, const json_t *progress_token)
{
	struct mcp_server *s = r->conn->srv;
	struct mcp_call *c;
	if (args && !json_is_null(args) && (!json_is_object(args) || json_object_size(args) > 0)) {
		mcp_answer(r, mcp_tool_error(r->v, "Invalid arguments for sandbox_info: it takes no "
			"arguments; call it with {}"));
		return;
	}
	c = mcp_call_new(s, r, CALL_SANDBOX_INFO);
	mcp_call_join_batch(c, r->b);
	if (s->python_version && mcp_info_ready(s)) {
		mcp_answer_sandbox_info(c);
		mcp_call_free(c);
		return;
	}
	/* waits for the interpreter's version and for the tools to settle */
	c->state = CALL_WAITING;
	mcp_list_push(&s->active, c);
	if (!s->python_version)
		mcp_version_probe(s);
}

static void handle_tools_call(const struct mcp_req *r, const char *method, json_t *params)
{
	json_t *name = json_object_get(params, "name");
	json_t *args = json_object_get(params, "arguments");
	json_t *token = json_object_get(json_object_get(params, "_meta"), "progressToken");
	const struct policy *p = &r->conn->srv->env->policy;
	const struct mcp_tool_row *tool;
	if (!json_is_string(name)) {
		mcp_fail(r, JSONRPC_INVALID_PARAMS, "Invalid params: tools/call needs \"name\", the tool's name as "
			 "a string", NULL);
		return;
	}
	if (token && !json_is_string(token) && !json_is_integer(token))
		token = NULL;
	tool = mcp_tool_row(name);
	if (tool && mcp_tool_enabled(tool, p)) {
		tool->call(r, args, token);
	} else {
		cleanup_free char *names = tool ? NULL : mcp_tool_names(p);
		cleanup_free char *msg = tool ? xasprintf("Unknown tool: %s", tool->off)
					      : xasprintf("Unknown tool: this server has %s", names);
		mcp_fail(r, JSONRPC_INVALID_PARAMS, msg, json_pack("{s:O}", "name", name));
	}
}

/* Our cursors are "tools:N", N the index of the page's first tool. */
static bool parse_cursor(const json_t *cursor, size_t n, size_t *start)
{
	const char *cs = json_string_value(cursor);
	char *end = NULL;
	unsigned long v;
	if (!cs || strlen(cs) != json_string_length(cursor) || strncmp(cs, "tools:", 6) != 0 || cs[6] < '0' ||
	    cs[6] > '9')
		return false;
	errno = 0;
	v = strtoul(cs + 6, &end, 10);
	if (errno || *end || v == 0 || v >= n)
		return false;
	*start = v;
	return true;
}

/* ttlMs and cacheScope, which 2026-07-28 requires of tools/list and
 * server/discover. */
static json_t *cacheable(const struct mcp_req *r, json_t *result)
{
	if (proto_is_modern(r->v)) {
		json_object_set_new(result, "ttlMs", json_integer(CACHE_TTL_MS));
		json_object_set_new(result, "cacheScope",
				    json_string(r->conn->srv->cfg.cache_private ? "private" : "public"));
	}
	return result;
}

static void handle_tools_list(const struct mcp_req *r, const char *method, json_t *params)
{
	struct mcp_server *s = r->conn->srv;
	json_t *cursor = json_object_get(params, "cursor");
	size_t start = 0, n = json_array_size(s->tools), page = s->cfg.page_size ? s->cfg.page_size : n;
	json_t *tools, *result;

	if (cursor && !json_is_null(cursor) && !parse_cursor(cursor, n, &start)) {
		mcp_fail(r, JSONRPC_INVALID_PARAMS, "Invalid params: unknown cursor; pass the nextCursor of a "
			 "previous tools/list", NULL);
		return;
	}
	/* s->tools is in a fixed order (run_python, sandbox_info): every
	 * listing is the same, as 2026-07-28 asks for caching's sake */
	tools = json_array();
	for (size_t i = start; i < n && i < start + page; i++)
		json_array_append_new(tools, mcp_tool_for(json_array_get(s->tools, i), r->v));
	result = json_pack("{s:o}", "tools", tools);
	if (start + page < n)
		json_object_set_new(result, "nextCursor", json_sprintf("tools:%zu", start + page));
	mcp_answer(r, cacheable(r, result));
}

/* The versions this server speaks, newest first (server/discover, and the
 * error for a version it does not). */
static json_t *supported_versions(void)
{
	json_t *a = json_array();
	for (int i = PROTO_MODERN; i >= 0; i--)
		json_array_append_new(a, json_string(mcp_protocol_versions[i]));
	return a;
}

static json_t *capabilities(enum proto v)
{
	/* resources/list_changed: sent to a 2025 client (on stdio, and over
	 * HTTP on the stream of the call that changed the list), to a
	 * 2026-07-28 one on its subscriptions/listen streams */
	json_t *caps = json_pack("{s:{s:b},s:{},s:{s:b}}", "tools", "listChanged", 0, "logging", "resources",
				 "listChanged", 1);
	if (proto_is_modern(v))
		json_object_set_new(caps, "extensions", json_pack("{s:{}}", EXT_TASKS));
	return caps;
}

static void handle_discover(const struct mcp_req *r, const char *method, json_t *params)
{
	mcp_answer(r, cacheable(r, json_pack("{s:o,s:o,s:s}", "supportedVersions", supported_versions(),
						  "capabilities", capabilities(r->v), "instructions", instructions)));
}

static void set_client(struct mcp_conn *conn, const json_t *client)
{
	const char *name = json_string_value(json_object_get(client, "name"));
	const char *version = json_string_value(json_object_get(client, "version"));
	if (conn->client && !name)
		return;
	free(conn->client);
	conn->client = xasprintf("%s %s", name ?: "unknown-client", version ?: "");
}

static void handle_initialize(struct mcp_conn *conn, const struct mcp_req *r, json_t *params)
{
	json_t *version = json_object_get(params, "protocolVersion");
	enum proto v = PROTO_LATEST_LEGACY;

	if (conn->era == ERA_MODERN) {
		mcp_fail(r, JSONRPC_INVALID_REQUEST, "Invalid Request: this connection speaks " MCP_MODERN_PROTOCOL
			 ", where every request carries its version in _meta; initialize belongs to the 2025 "
			 "revisions", json_pack("{s:o}", "supported", supported_versions()));
		return;
	}
	if (conn->proto != PROTO_NONE) {
		mcp_fail(r, JSONRPC_INVALID_REQUEST, "Invalid Request: the session is already initialized", NULL);
		return;
	}
	if (r->b) {
		mcp_fail(r, JSONRPC_INVALID_REQUEST, "Invalid Request: initialize must not be part of a batch", NULL);
		return;
	}
	if (!json_is_string(version)) {
		mcp_fail(r, JSONRPC_INVALID_PARAMS, "Invalid params: initialize needs \"protocolVersion\", a string "
			 "such as \"" MCP_LATEST_LEGACY_PROTOCOL "\"", NULL);
		return;
	}
	/* A version we do not speak by handshake (2026-07-28 has none) gets
	 * the newest we do; the client decides whether it can go on. */
	for (int i = 0; i <= PROTO_LATEST_LEGACY; i++)
		if (json_str_eq(version, mcp_protocol_versions[i]))
			v = (enum proto)i;
	conn->era = ERA_LEGACY;
	conn->proto = v;
	set_client(conn, json_object_get(params, "clientInfo"));
	log_info("mcp: %s initialized with protocol %s (asked for %s)", conn->client, mcp_protocol_versions[v],
		 json_string_value(version));
	mcp_answer(r, json_pack("{s:s,s:o,s:o,s:s}", "protocolVersion", mcp_protocol_versions[v],
				"capabilities", capabilities(v), "serverInfo", server_info(v),
				"instructions", instructions));
}

static void handle_set_level(const struct mcp_req *r, const char *method, json_t *params)
{
	json_t *level = json_object_get(params, "level");
	for (int i = 0; json_is_string(level) && mlog_names[i]; i++) {
		if (json_str_eq(level, mlog_names[i])) {
			r->conn->log_min = (enum mlog)i;
			mcp_answer(r, json_object());
			return;
		}
	}
	mcp_fail(r, JSONRPC_INVALID_PARAMS, "Invalid params: \"level\" must be one of debug, info, notice, "
		 "warning, error, critical, alert, emergency", NULL);
}

/* A 2026-07-28 request's _meta: its version, capabilities, identity and
 * log level.  0, with r's version and level set; -1 when it was answered
 * with an error. */
static int read_modern_meta(struct mcp_req *r, const json_t *meta)
{
	json_t *version = json_object_get(meta, META_VERSION);
	json_t *caps = json_object_get(meta, META_CAPS);
	json_t *level = json_object_get(meta, META_LOG_LEVEL);

	if (!json_is_string(version)) {
		mcp_fail(r, JSONRPC_INVALID_PARAMS, "Invalid params: without an initialize, a request carries its "
			 "protocol version in \"_meta\": {\"" META_VERSION "\": \"" MCP_MODERN_PROTOCOL "\", \""
			 META_CAPS "\": {}}", NULL);
		return -1;
	}
	if (!json_str_eq(version, MCP_MODERN_PROTOCOL)) {
		mcp_fail(r, MCP_UNSUPPORTED_VERSION, "Unsupported protocol version: requests without an "
			 "initialize speak " MCP_MODERN_PROTOCOL "; the 2025 revisions begin with initialize",
			 json_pack("{s:o,s:O}", "supported", supported_versions(), "requested", version));
		return -1;
	}
	if (!json_is_object(caps)) {
		mcp_fail(r, JSONRPC_INVALID_PARAMS, "Invalid params: \"_meta\" needs \"" META_CAPS "\", the "
			 "client's capabilities as an object ({} for none)", NULL);
		return -1;
	}
	r->log_min = MLOG_OFF;   /* no notifications/message unless asked for */
	r->tasks_ok = json_object_get(json_object_get(caps, "extensions"), EXT_TASKS) != NULL;
	if (level) {
		int i;
		for (i = 0; mlog_names[i] && !json_str_eq(level, mlog_names[i]); i++)
			;
		if (!mlog_names[i]) {
			mcp_fail(r, JSONRPC_INVALID_PARAMS, "Invalid params: \"" META_LOG_LEVEL "\" must be one of "
				 "debug, info, notice, warning, error, critical, alert, emergency", NULL);
			return -1;
		}
		r->log_min = (enum mlog)i;
	}
	r->v = PROTO_MODERN;
	if (r->conn->era == ERA_OPEN) {
		r->conn->era = ERA_MODERN;
		set_client(r->conn, json_object_get(meta, META_CLIENT));
		log_info("mcp: %s speaks %s", r->conn->client, MCP_MODERN_PROTOCOL);
	}
	return 0;
}

static bool in_progress(const struct mcp_req *r)
{
	if (!find_call(r->conn, r->id))
		return false;
	mcp_fail(r, JSONRPC_INVALID_REQUEST, "Invalid Request: this id belongs to a request still in progress", NULL);
	return true;
}

/* The requests served once a request's era is known: one row each, the
 * eras that have it and its handler.  ping and initialize, which come
 * before the era is known, are handle_request's own. */
enum { IN_2025 = 1, IN_2026 = 2 };
static const struct {
	const char *name;
	unsigned eras;
	void (*handle)(const struct mcp_req *r, const char *method, json_t *params);
} methods[] = {
	{ "server/discover", IN_2026, handle_discover },
	{ "tools/list", IN_2025 | IN_2026, handle_tools_list },
	{ "tools/call", IN_2025 | IN_2026, handle_tools_call },
	{ "resources/list", IN_2025 | IN_2026, mcp_resources_list },
	{ "resources/read", IN_2025 | IN_2026, mcp_resources_read },
	{ "resources/templates/list", IN_2025 | IN_2026, mcp_resources_templates },
	{ "logging/setLevel", IN_2025, handle_set_level },   /* gone from 2026-07-28 */
	{ "tasks/get", IN_2026, mcp_tasks_get },
	{ "tasks/update", IN_2026, mcp_tasks_update },
	{ "tasks/cancel", IN_2026, mcp_tasks_cancel },
	{ "subscriptions/listen", IN_2026, mcp_subscriptions_listen },
};

/* The row of method in era (IN_2025 or IN_2026); -1 when it has none. */
static int method_row(const char *method, unsigned era)
{
	for (size_t i = 0; i < ARRAY_SIZE(methods); i++)
		if ((methods[i].eras & era) && strcmp(method, methods[i].name) == 0)
			return (int)i;
	return -1;
}

/* A request of the 2026-07-28 revision: everything it needs is in it. */
static void handle_modern(struct mcp_req *r, const char *method, json_t *params)
{
	int row = method_row(method, IN_2026);
	if (row < 0) {
		/* ping and logging/setLevel are gone from 2026-07-28 */
		mcp_fail(r, JSONRPC_METHOD_NOT_FOUND, "Method not found", json_pack("{s:s}", "method", method));
		return;
	}
	if (read_modern_meta(r, json_object_get(params, "_meta")) < 0 || in_progress(r))
		return;
	methods[row].handle(r, method, params);
}

static void handle_request(struct mcp_conn *conn, struct mcp_batch *b, const struct jsonrpc_msg *m)
{
	struct mcp_req r = { .conn = conn, .b = b, .id = m->id, .v = conn->proto, .log_min = MLOG_OFF };
	const char *method = m->method;
	json_t *params = m->params;
	int row;

	if (params && !json_is_object(params)) {
		mcp_fail(&r, JSONRPC_INVALID_PARAMS, "Invalid params: \"params\" must be an object", NULL);
		return;
	}
	if (strcmp(method, "initialize") == 0) {
		handle_initialize(conn, &r, params);
		return;
	}
	/* The era: a connection that began with initialize stays in the 2025
	 * revisions (a 2026 key in its _meta changes nothing); any other
	 * request naming a version in _meta, and server/discover, which only
	 * 2026-07-28 has, are served as 2026-07-28 requests. */
	if (strcmp(method, "server/discover") == 0 || conn->era == ERA_MODERN ||
	    (conn->era == ERA_OPEN && json_object_get(json_object_get(params, "_meta"), META_VERSION))) {
		handle_modern(&r, method, params);
		return;
	}
	if (strcmp(method, "ping") == 0) {
		mcp_answer(&r, json_object());
		return;
	}
	row = method_row(method, IN_2025);
	if (row < 0) {
		mcp_fail(&r, JSONRPC_METHOD_NOT_FOUND, "Method not found", json_pack("{s:s}", "method", method));
		return;
	}
	if (conn->proto == PROTO_NONE) {
		mcp_fail(&r, JSONRPC_INVALID_REQUEST, "Invalid Request: the session is not initialized; send "
			 "initialize first (2025 revisions), or name the version in each request's _meta (\""
			 META_VERSION "\": \"" MCP_MODERN_PROTOCOL "\")", NULL);
		return;
	}
	if (in_progress(&r))
		return;
	methods[row].handle(&r, method, params);
}

static void cancel_call(struct mcp_call *c, const char *reason)
{
	log_debug("mcp: request %llu cancelled by the client%s%s", c->seq, reason ? ": " : "", reason ? reason : "");
	mcp_call_log(c, MLOG_INFO, "run %llu cancelled%s%s", c->seq, reason ? ": " : "", reason ? reason : "");
	mcp_call_cancel(c);   /* a run's on_done follows; no response, as the spec says */
}

static void handle_notification(struct mcp_conn *conn, const char *method, json_t *params)
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
	c = jsonrpc_id_valid(id) ? find_call(conn, id) : NULL;
	if (c)
		cancel_call(c, json_string_value(json_object_get(params, "reason")));
}

static void dispatch(struct mcp_conn *conn, json_t *msg, struct mcp_batch *b)
{
	struct jsonrpc_msg m;
	jsonrpc_classify(msg, &m);
	switch (m.kind) {
	case JSONRPC_INVALID:
		log_debug("mcp: invalid request: %s", m.why);
		mcp_log(conn, MLOG_WARNING, "invalid request: %s", m.why);
		mcp_reply(conn, b, jsonrpc_errorf(m.id, JSONRPC_INVALID_REQUEST, "Invalid Request: %s", m.why));
		break;
	case JSONRPC_RESPONSE:
		/* we send no requests, so there is nothing to match it with */
		log_debug("mcp: ignoring a response from the client");
		break;
	case JSONRPC_NOTIFICATION:
		handle_notification(conn, m.method, m.params);
		break;
	case JSONRPC_REQUEST:
		handle_request(conn, b, &m);
		break;
	default:
		break;
	}
}

static bool batches_allowed(const struct mcp_conn *conn)
{
	/* JSON-RPC batches were part of MCP from 2025-03-26 until 2025-06-18
	 * removed them; 2024-11-05 inherits them from JSON-RPC itself. */
	return conn->proto == PROTO_2024_11_05 || conn->proto == PROTO_2025_03_26;
}

void mcp_conn_handle_message(struct mcp_conn *conn, json_t *msg)
{
	struct mcp_batch *b;
	size_t i;
	json_t *el;

	if (!json_is_array(msg)) {
		dispatch(conn, msg, NULL);
		return;
	}
	if (!batches_allowed(conn) || json_array_size(msg) == 0) {
		const char *why = json_array_size(msg) == 0 ? "Invalid Request: an empty batch"
			: conn->era == ERA_OPEN ? "Invalid Request: a batch before initialize"
			: "Invalid Request: JSON-RPC batches are not supported in this protocol version";
		mcp_send(conn, jsonrpc_error(NULL, JSONRPC_INVALID_REQUEST, why, NULL), NULL);
		return;
	}
	b = xcalloc(1, sizeof(*b));
	b->conn = conn;
	b->replies = json_array();
	b->dispatching = true;
	json_array_foreach(msg, i, el)
		dispatch(conn, el, b);
	b->dispatching = false;
	mcp_batch_maybe_send(b);
}

/* A message that is valid JSON but holds numbers jansson cannot (an
 * integer beyond 64 bits, a real past a double): read again with each
 * such number as 0, so that the request has its id.  Inside run_python's
 * variables they are kept as written (the program's Python reads them
 * whole: ints of any size, inf); anywhere else the request is refused,
 * naming the number.  NULL when that does not make a message of it. */
static json_t *parse_wide(struct mcp_conn *conn, const char *text, size_t len)
{
	struct json_scan sc;
	cleanup_free char *copy = NULL;
	json_t *msg, *id, *args, *unused = NULL;

	if (json_scan(text, len, &sc) < 0 || sc.n_wide == 0 || sc.n_wide > JSON_SCAN_MAX_WIDE)
		return NULL;
	copy = json_scan_narrowed(text, len, &sc);
	msg = jsonrpc_parse(copy, len, &unused);
	json_decref(unused);
	if (!msg)
		return NULL;
	id = json_object_get(msg, "id");
	for (size_t i = 0; i < sc.n_wide; i++)
		if (sc.id.len && sc.wide[i].off >= sc.id.off && sc.wide[i].off < sc.id.off + sc.id.len)
			id = NULL;   /* the id itself is the number: it has none we can give back */
	args = json_object_get(json_object_get(msg, "params"), "arguments");
	if (sc.n_wide_outside || !json_is_object(args)) {
		const struct json_span *w = &sc.wide[0];
		for (size_t i = 0; i < sc.n_wide; i++)
			if (sc.vars.len == 0 || sc.wide[i].off < sc.vars.off ||
			    sc.wide[i].off >= sc.vars.off + sc.vars.len) {
				w = &sc.wide[i];
				break;
			}
		mcp_send(conn, jsonrpc_errorf(jsonrpc_id_valid(id) ? id : NULL, JSONRPC_INVALID_PARAMS,
					    "Invalid params: the number %.*s is out of range: numbers here must "
					    "fit a 64-bit integer or a double", w->len > 64 ? 64 : (int)w->len,
					    text + w->off), NULL);
		json_decref(msg);
		return json_null();   /* answered */
	}
	json_object_set_new_nocheck(args, RAW_VARIABLES_KEY, json_stringn(text + sc.vars.off, sc.vars.len));
	return msg;
}

void mcp_conn_handle_text(struct mcp_conn *conn, const char *text, size_t len)
{
	json_t *err = NULL;
	json_t *msg;
	size_t i = 0;
	while (i < len && (text[i] == ' ' || text[i] == '\t' || text[i] == '\r'))
		i++;
	if (i == len)
		return;   /* blank lines between messages are harmless */
	msg = jsonrpc_parse(text, len, &err);
	if (!msg && (msg = parse_wide(conn, text, len))) {
		json_decref(err);
		if (json_is_null(msg))
			return;
		mcp_conn_handle_message(conn, msg);
		json_decref(msg);
		return;
	}
	if (!msg) {
		log_debug("mcp: parse error in a %zu-byte message", len);
		mcp_log(conn, MLOG_WARNING, "parse error in a %zu-byte message", len);
		mcp_send(conn, err, NULL);
		return;
	}
	mcp_conn_handle_message(conn, msg);
	json_decref(msg);
}

void mcp_conn_oversized(struct mcp_conn *conn, size_t max, const char *id_text)
{
	json_t *id = id_text ? json_loads(id_text, JSON_DECODE_ANY, NULL) : NULL;
	if (!jsonrpc_id_valid(id)) {
		json_decref(id);
		id = NULL;   /* none that can be answered: null, as for a parse error */
	}
	log_warn("mcp: dropped a message over the %zu-byte limit", max);
	mcp_log(conn, MLOG_WARNING, "dropped a message over the %zu-byte limit", max);
	mcp_send(conn, jsonrpc_error(id, JSONRPC_INVALID_REQUEST, "Invalid Request: the message is too large",
				       json_pack("{s:I}", "max_bytes", (json_int_t)max)), id);
	json_decref(id);
}

struct mcp_conn *mcp_conn_new(struct mcp_server *s, const struct mcp_conn_ops *ops, void *ctx)
{
	struct mcp_conn *conn = xcalloc(1, sizeof(*conn));
	conn->srv = s;
	conn->ops = *ops;
	conn->ctx = ctx;
	conn->era = ERA_OPEN;
	conn->proto = PROTO_NONE;
	/* quiet until the client picks a level with logging/setLevel */
	conn->log_min = MLOG_OFF;
	conn->next = s->conns;
	if (conn->next)
		conn->next->prev = conn;
	s->conns = conn;
	return conn;
}

void mcp_conn_free(struct mcp_conn *conn)
{
	struct mcp_server *s;
	struct call_list *lists[2];
	if (!conn)
		return;
	s = conn->srv;
	lists[0] = &s->queue;
	lists[1] = &s->active;
	for (size_t i = 0; i < ARRAY_SIZE(lists); i++) {
		for (struct mcp_call *c = lists[i]->head, *next; c; c = next) {
			next = c->next;
			if (c->conn != conn)
				continue;
			if (c->batch)
				c->batch->conn = NULL;
			c->conn = NULL;
			mcp_call_cancel(c);
		}
	}
	if (conn->prev)
		conn->prev->next = conn->next;
	else
		s->conns = conn->next;
	if (conn->next)
		conn->next->prev = conn->prev;
	free(conn->client);
	free(conn->principal);
	free(conn);
}

void mcp_conn_set_principal(struct mcp_conn *conn, const char *name)
{
	free(conn->principal);
	conn->principal = name ? xstrdup(name) : NULL;
}
