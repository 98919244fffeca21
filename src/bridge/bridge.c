/* pycell: the tool bridge between jails and upstream MCP servers (see
 * bridge.h). */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "base/jsonrpc.h"
#include "base/log.h"
#include "base/sha256.h"
#include "bridge/audit.h"
#include "bridge/bridge.h"
#include "bridge/upstream.h"

/* What the jail may learn of a name it sent us, in records and errors. */
#define NAME_ECHO_MAX 128
#define JAIL_PROTOCOL "2025-06-18"

struct bridge_run;

struct bridge_call {
	struct bridge_call *next;
	struct bridge_run *br;
	struct upstream *up;
	uint64_t up_id;
	json_t *jail_id;
	char *name;                /* SERVER.TOOL */
	uint64_t t0;
};

struct bridge_run {
	struct bridge_run *next;
	struct bridge *b;          /* NULL once the bridge is gone */
	const struct policy *policy;
	struct run *run;
	char code_sha256[65];
	char id[40];
	char *client;              /* run_request.client, copied */
	uint32_t requests, denied, errors, in_flight;
	uint32_t denials_logged, denials_not_logged;
	struct bridge_call *pending;
	json_t *per_tool;          /* {name: {calls, errors, total_ms}} */
	json_t *denials;           /* the first few {tool, reason} */
	json_t *calls;             /* every forwarded call: {tool, status, ms} */
	json_t *lists_waiting;     /* ids of tools/list asked before the upstreams settled */
};

struct bridge {
	struct loop *loop;
	const struct pycell_conf *conf;
	struct upstream **ups;
	size_t n_ups;
	struct audit *audit;
	struct bridge_run *runs;
	uint64_t seq;
	void (*on_settled)(void *ctx);   /* bridge_on_settled */
	void *settled_ctx;
	struct bridge_stats stats;
};

const char *const bridge_denial_reasons[BRIDGE_DENIAL_REASONS] = {
	"not_allowed", "budget_exhausted", "arguments_too_large", "result_too_large", "too_many_in_flight",
};

void bridge_audit_sink(struct bridge *b, void (*fn)(const json_t *rec, const char *line))
{
	audit_set_sink(b->audit, fn);
}

void bridge_stats(const struct bridge *b, struct bridge_stats *st)
{
	*st = b->stats;
}

size_t bridge_n_upstreams(const struct bridge *b)
{
	return b->n_ups;
}

const char *bridge_upstream_name(const struct bridge *b, size_t i)
{
	return upstream_name(b->ups[i]);
}

bool bridge_upstream_ready(const struct bridge *b, size_t i)
{
	return upstream_ready(b->ups[i]);
}

/* ------------------------------------------------------------ names */

bool bridge_name_allowed(const struct policy *p, const char *name, size_t len)
{
	if (!name || memchr(name, '\0', len))
		return false;
	for (size_t i = 0; i < p->n_tools_allow; i++) {
		const char *a = p->tools_allow[i];
		size_t alen = strlen(a);
		if (alen >= 2 && a[alen - 2] == '.' && a[alen - 1] == '*') {
			/* "server.*": the prefix through the dot, then at least one byte */
			if (len > alen - 1 && memcmp(name, a, alen - 1) == 0)
				return true;
		} else if (alen == len && memcmp(name, a, len) == 0) {
			return true;
		}
	}
	return false;
}

static struct upstream *find_upstream(struct bridge *b, const char *server, size_t len)
{
	for (size_t i = 0; i < b->n_ups; i++) {
		const char *n = upstream_name(b->ups[i]);
		if (strlen(n) == len && memcmp(n, server, len) == 0)
			return b->ups[i];
	}
	return NULL;
}

/* The upstream and its tool name for a callable SERVER.TOOL, or NULL.  An
 * upstream that has never listed its tools checks the name itself when it
 * comes up (UPSTREAM_UNKNOWN_TOOL). */
static struct upstream *resolve(struct bridge *b, const struct policy *p, const char *name, size_t len,
				const char **tool)
{
	const char *dot;
	struct upstream *u;
	if (!bridge_name_allowed(p, name, len))
		return NULL;
	dot = memchr(name, '.', len);
	if (!dot || (size_t)(dot - name) + 1 >= len)
		return NULL;
	u = find_upstream(b, name, (size_t)(dot - name));
	if (!u)
		return NULL;
	if (upstream_tools(u) && !upstream_find_tool(u, dot + 1, len - (size_t)(dot + 1 - name)))
		return NULL;
	*tool = dot + 1;
	return u;
}

/* A name the jail sent, cut to NAME_ECHO_MAX bytes on a UTF-8 boundary
 * (jansson strings are valid UTF-8; NUL bytes survive as \u0000). */
static json_t *echo_name(const char *name, size_t len)
{
	if (len > NAME_ECHO_MAX) {
		len = NAME_ECHO_MAX;
		while (len > 0 && ((unsigned char)name[len] & 0xC0) == 0x80)
			len--;
	}
	return json_stringn(name, len);
}

static json_t *tool_for_jail(const char *server, json_t *t)
{
	static const char *const keys[] = { "title", "description", "inputSchema", "outputSchema", "annotations" };
	const char *name = json_string_value(json_object_get(t, "name"));
	json_t *o = json_object();
	json_object_set_new(o, "name", json_sprintf("%s.%s", server, name));
	for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
		json_t *v = json_object_get(t, keys[i]);
		if (v)
			json_object_set(o, keys[i], v);
	}
	if (!json_object_get(o, "inputSchema"))
		json_object_set_new(o, "inputSchema", json_pack("{s:s}", "type", "object"));
	return o;
}

json_t *bridge_tools_for_policy(struct bridge *b, const struct policy *p)
{
	json_t *out = json_array();
	for (size_t i = 0; i < b->n_ups; i++) {
		const char *server = upstream_name(b->ups[i]);
		size_t j;
		json_t *t;
		json_array_foreach (upstream_tools(b->ups[i]), j, t) {
			const char *name = json_string_value(json_object_get(t, "name"));
			char *full = xasprintf("%s.%s", server, name);
			if (name && bridge_name_allowed(p, full, strlen(full)))
				json_array_append_new(out, tool_for_jail(server, t));
			free(full);
		}
	}
	return out;
}

/* ------------------------------------------------------------ replies to the jail */

static void send_to_jail(struct bridge_run *br, json_t *msg)
{
	if (br->run)
		run_tool_send(br->run, msg);
	json_decref(msg);
}

static json_t *error_msg(json_t *id, int code, const char *message, const char *reason, json_t *tool)
{
	json_t *data = json_pack("{s:s}", "reason", reason);
	if (tool)
		json_object_set_new(data, "tool", tool);
	return jsonrpc_error(id, code, message, data);
}

static void audit_base(struct bridge_run *br, json_t *rec)
{
	json_object_set_new(rec, "run", json_string(br->id));
	json_object_set_new(rec, "code_sha256", json_string(br->code_sha256));
	json_object_set_new(rec, "policy", json_string(br->policy->name ? br->policy->name : ""));
	if (br->client)
		json_object_set_new(rec, "client", json_string(br->client));
}

/* Refuse a call: the error to the jail, the count, the records. */
static void deny(struct bridge_run *br, json_t *id, const char *name, size_t len, const char *reason,
		 const char *message)
{
	br->denied++;
	for (size_t i = 0; br->b && i < BRIDGE_DENIAL_REASONS; i++)
		if (strcmp(reason, bridge_denial_reasons[i]) == 0)
			br->b->stats.denied[i]++;
	if (json_array_size(br->denials) < BRIDGE_RESULT_DENIALS_MAX)
		json_array_append_new(br->denials, json_pack("{s:o,s:s}", "tool", echo_name(name, len),
							     "reason", reason));
	if (br->b && br->denials_logged < BRIDGE_AUDIT_DENIALS_MAX) {
		json_t *rec = json_pack("{s:s}", "event", "tool_denied");
		br->denials_logged++;
		audit_base(br, rec);
		json_object_set_new(rec, "tool", echo_name(name, len));
		json_object_set_new(rec, "reason", json_string(reason));
		audit_write(br->b->audit, rec);
	} else {
		br->denials_not_logged++;
	}
	log_debug("run %s: tool call denied (%s): %s", br->id, reason, message);
	if (id)
		send_to_jail(br, error_msg(id, BRIDGE_ERR_DENIED, message, reason, echo_name(name, len)));
}

static void record_call(struct bridge_run *br, const char *name, const char *status, uint64_t ms, bool failed)
{
	json_t *t = json_object_get(br->per_tool, name);
	if (!t) {
		t = json_pack("{s:i,s:i,s:i}", "calls", 0, "errors", 0, "total_ms", 0);
		json_object_set_new(br->per_tool, name, t);
	}
	json_object_set_new(t, "calls", json_integer(json_integer_value(json_object_get(t, "calls")) + 1));
	if (failed) {
		br->errors++;
		json_object_set_new(t, "errors", json_integer(json_integer_value(json_object_get(t, "errors")) + 1));
	}
	json_object_set_new(t, "total_ms",
			    json_integer(json_integer_value(json_object_get(t, "total_ms")) + (json_int_t)ms));
	json_array_append_new(br->calls, json_pack("{s:s,s:s,s:I}", "tool", name, "status", status, "ms",
						   (json_int_t)ms));
}

static void call_unlink(struct bridge_call *bc)
{
	struct bridge_run *br = bc->br;
	for (struct bridge_call **pp = &br->pending; *pp; pp = &(*pp)->next) {
		if (*pp == bc) {
			*pp = bc->next;
			br->in_flight--;
			return;
		}
	}
}

static void call_free(struct bridge_call *bc)
{
	json_decref(bc->jail_id);
	free(bc->name);
	free(bc);
}

/* The answer is a tool result: isError results are delivered like the
 * others (the runtime raises), but counted as errors. */
static void deliver_result(struct bridge_call *bc, json_t *result, uint64_t ms)
{
	struct bridge_run *br = bc->br;
	size_t size = json_dumpb(result, NULL, 0, JSON_COMPACT);
	bool is_error = json_is_true(json_object_get(result, "isError"));
	char msg[300];
	json_t *reply;

	if (size > br->policy->tools_result_bytes) {
		snprintf(msg, sizeof(msg), "%s: the result is %zu bytes, over the policy's max_result_bytes of %llu",
			 bc->name, size, (unsigned long long)br->policy->tools_result_bytes);
		record_call(br, bc->name, "result_too_large", ms, true);
		deny(br, bc->jail_id, bc->name, strlen(bc->name), "result_too_large", msg);
		return;
	}
	reply = jsonrpc_result(bc->jail_id, json_incref(result));
	errno = 0;
	if (br->run && run_tool_send(br->run, reply) < 0) {
		int e = errno;
		json_decref(reply);
		if (e != EMSGSIZE && e != ENOBUFS && e != ENOMEM) {
			/* the jail closed fd 3, or does not read it */
			record_call(br, bc->name, "undeliverable", ms, true);
			return;
		}
		/* too large for one packet (SO_SNDBUF), or no memory for it: say
		 * so rather than leave the call unanswered */
		snprintf(msg, sizeof(msg), "%s: the result (%zu bytes) could not be passed into the jail: %s",
			 bc->name, size, strerror(e));
		record_call(br, bc->name, "result_too_large", ms, true);
		deny(br, bc->jail_id, bc->name, strlen(bc->name), "result_too_large", msg);
		return;
	}
	json_decref(reply);
	record_call(br, bc->name, is_error ? "tool_error" : "ok", ms, is_error);
}

static void on_upstream_reply(void *ctx, enum upstream_status st, json_t *result, const char *message)
{
	struct bridge_call *bc = ctx;
	struct bridge_run *br = bc->br;
	uint64_t ms = now_ms() - bc->t0;
	const char *reason = "upstream_error", *status = "error";
	char msg[800];

	call_unlink(bc);
	switch (st) {
	case UPSTREAM_OK:
		deliver_result(bc, result, ms);
		call_free(bc);
		return;
	case UPSTREAM_UNKNOWN_TOOL:
		snprintf(msg, sizeof(msg), "tool \"%s\" is not available: unknown or not allowed by policy \"%s\"",
			 bc->name, br->policy->name);
		deny(br, bc->jail_id, bc->name, strlen(bc->name), "not_allowed", msg);
		call_free(bc);
		return;
	case UPSTREAM_TIMEOUT:
		reason = status = "timeout";
		break;
	case UPSTREAM_EXITED:
		reason = status = "upstream_exited";
		break;
	case UPSTREAM_UNAVAILABLE:
		reason = status = "upstream_unavailable";
		break;
	case UPSTREAM_RPC_ERROR:
	default:
		break;
	}
	snprintf(msg, sizeof(msg), "%s: %s", bc->name, message ? message : "failed");
	record_call(br, bc->name, status, ms, true);
	send_to_jail(br, error_msg(bc->jail_id, BRIDGE_ERR_UPSTREAM, msg, reason, json_string(bc->name)));
	call_free(bc);
}

/* ------------------------------------------------------------ requests from the jail */

static void handle_call(struct bridge_run *br, json_t *id, json_t *params)
{
	const struct policy *p = br->policy;
	json_t *name = json_object_get(params, "name"), *args = json_object_get(params, "arguments");
	const char *nm, *tool = NULL;
	struct pc_err err = { .msg = "unavailable" };
	struct upstream *u = NULL;
	struct bridge_call *bc;
	size_t len, args_size;
	char msg[400];

	if (!json_is_object(params) || !json_is_string(name)) {
		send_to_jail(br, jsonrpc_error(id, JSONRPC_INVALID_PARAMS,
					       "tools/call needs params {\"name\": string, \"arguments\": object}", NULL));
		return;
	}
	if (args && !json_is_object(args) && !json_is_null(args)) {
		send_to_jail(br, jsonrpc_error(id, JSONRPC_INVALID_PARAMS, "tools/call: \"arguments\" must be an object",
					       NULL));
		return;
	}
	if (json_is_null(args))
		args = NULL;
	nm = json_string_value(name);
	len = json_string_length(name);
	br->requests++;

	if (br->requests > p->tools_budget) {
		snprintf(msg, sizeof(msg), "the run's budget of %u tool calls (policy \"%s\") is used up",
			 p->tools_budget, p->name);
		deny(br, id, nm, len, "budget_exhausted", msg);
		return;
	}
	if (br->b)
		u = resolve(br->b, p, nm, len, &tool);
	if (!u) {
		snprintf(msg, sizeof(msg), "tool \"%.*s\" is not available: unknown or not allowed by policy \"%s\"",
			 (int)(len < NAME_ECHO_MAX ? len : NAME_ECHO_MAX), nm, p->name);
		deny(br, id, nm, len, "not_allowed", msg);
		return;
	}
	args_size = args ? json_dumpb(args, NULL, 0, JSON_COMPACT) : 2;
	if (args_size > p->tools_arg_bytes) {
		snprintf(msg, sizeof(msg), "%s: the arguments are %zu bytes, over the policy's max_argument_bytes of %llu",
			 nm, args_size, (unsigned long long)p->tools_arg_bytes);
		deny(br, id, nm, len, "arguments_too_large", msg);
		return;
	}
	if (br->in_flight >= BRIDGE_MAX_IN_FLIGHT) {
		snprintf(msg, sizeof(msg), "%s: %d tool calls of this run are already in flight", nm,
			 BRIDGE_MAX_IN_FLIGHT);
		deny(br, id, nm, len, "too_many_in_flight", msg);
		return;
	}

	bc = xcalloc(1, sizeof(*bc));
	bc->br = br;
	bc->up = u;
	bc->jail_id = json_incref(id);
	bc->name = xstrdup(nm);
	bc->t0 = now_ms();
	bc->up_id = upstream_call(u, tool, args, on_upstream_reply, bc, &err);
	if (!bc->up_id) {
		pc_err_wrap(&err, "%s: upstream server \"%s\" cannot take the call", nm, upstream_name(u));
		record_call(br, nm, "upstream_unavailable", 0, true);
		send_to_jail(br, error_msg(id, BRIDGE_ERR_UPSTREAM, err.msg, "upstream_unavailable", json_string(nm)));
		call_free(bc);
		return;
	}
	bc->next = br->pending;
	br->pending = bc;
	br->in_flight++;
	if (br->b)
		br->b->stats.forwarded++;
}

/* notifications/cancelled for one of the run's calls: drop it. */
static void handle_cancel(struct bridge_run *br, json_t *params)
{
	json_t *rid = json_object_get(params, "requestId");
	for (struct bridge_call *bc = br->pending; bc && rid; bc = bc->next) {
		if (json_equal(bc->jail_id, rid)) {
			call_unlink(bc);
			upstream_cancel(bc->up, bc->up_id);
			record_call(br, bc->name, "cancelled", now_ms() - bc->t0, true);
			call_free(bc);
			return;
		}
	}
}

static void answer_list(struct bridge_run *br, json_t *id)
{
	json_t *tools = br->b ? bridge_tools_for_policy(br->b, br->policy) : json_array();
	send_to_jail(br, jsonrpc_result(id, json_pack("{s:o}", "tools", tools)));
}

static void handle_request(struct bridge_run *br, struct jsonrpc_msg *m)
{
	if (strcmp(m->method, "tools/call") == 0) {
		handle_call(br, m->id, m->params);
	} else if (strcmp(m->method, "tools/list") == 0) {
		/* a server still starting would be missing from the list while
		 * a call to it already succeeds: the answer waits for them */
		if (br->b && !bridge_settled(br->b))
			json_array_append(br->lists_waiting, m->id);
		else
			answer_list(br, m->id);
	} else if (strcmp(m->method, "ping") == 0) {
		send_to_jail(br, jsonrpc_result(m->id, json_object()));
	} else if (strcmp(m->method, "initialize") == 0) {
		send_to_jail(br, jsonrpc_result(m->id, json_pack("{s:s,s:{s:{}},s:{s:s,s:s}}", "protocolVersion",
								 JAIL_PROTOCOL, "capabilities", "tools",
								 "serverInfo", "name", "pycell", "version",
								 PACKAGE_VERSION)));
	} else {
		send_to_jail(br, jsonrpc_errorf(m->id, JSONRPC_METHOD_NOT_FOUND,
						"Method not found: the tool socket serves tools/list and tools/call"));
	}
}

static void on_tool_message(struct run *r, json_t *msg, void *ctx)
{
	struct bridge_run *br = ctx;
	struct jsonrpc_msg m;
	br->run = r;
	jsonrpc_classify(msg, &m);   /* a method with a NUL in it is invalid there */
	switch (m.kind) {
	case JSONRPC_REQUEST:
		handle_request(br, &m);
		break;
	case JSONRPC_NOTIFICATION:
		if (strcmp(m.method, "notifications/cancelled") == 0)
			handle_cancel(br, m.params);
		break;
	case JSONRPC_INVALID:
		send_to_jail(br, jsonrpc_error(m.id, JSONRPC_INVALID_REQUEST, m.why, NULL));
		break;
	case JSONRPC_RESPONSE:
	default:
		break;   /* we never ask the jail anything */
	}
}

/* ------------------------------------------------------------ end of a run */

static json_t *summary(struct bridge_run *br)
{
	return json_pack("{s:i,s:i,s:i,s:O,s:O}", "count", (json_int_t)br->requests, "denied",
			 (json_int_t)br->denied, "errors", (json_int_t)br->errors, "tools", br->per_tool,
			 "denials", br->denials);
}

static void write_run_record(struct bridge_run *br, struct run *r)
{
	const struct run_result *res = run_result(r);
	json_t *rec = json_pack("{s:s}", "event", "run");
	audit_base(br, rec);
	json_object_set_new(rec, "status", json_string(run_done(r) ? run_status_name(res->status) : "killed"));
	json_object_set_new(rec, "duration_ms", json_integer((json_int_t)res->duration_ms));
	json_object_set_new(rec, "tool_calls", json_pack("{s:i,s:i,s:i}", "count", (json_int_t)br->requests,
							 "denied", (json_int_t)br->denied, "errors",
							 (json_int_t)br->errors));
	json_object_set(rec, "tools", br->calls);
	if (res->network)
		json_object_set(rec, "network", res->network);
	if (br->denials_not_logged)
		json_object_set_new(rec, "denials_not_logged", json_integer(br->denials_not_logged));
	audit_write(br->b->audit, rec);
}

static void run_free_state(struct bridge_run *br)
{
	json_decref(br->lists_waiting);
	json_decref(br->per_tool);
	json_decref(br->denials);
	json_decref(br->calls);
	free(br->client);
	free(br);
}

static void drop_pending(struct bridge_run *br, bool record)
{
	while (br->pending) {
		struct bridge_call *bc = br->pending;
		br->pending = bc->next;
		br->in_flight--;
		upstream_cancel(bc->up, bc->up_id);
		if (record)
			record_call(br, bc->name, "abandoned", now_ms() - bc->t0, true);
		call_free(bc);
	}
}

static void on_tool_done(struct run *r, void *ctx)
{
	struct bridge_run *br = ctx;
	struct run_result *res = run_result_mut(r);
	br->run = NULL;   /* nothing more goes into the jail */
	if (br->b)
		drop_pending(br, true);
	json_decref(res->tool_calls);
	res->tool_calls = summary(br);
	if (br->b) {
		write_run_record(br, r);
		for (struct bridge_run **pp = &br->b->runs; *pp; pp = &(*pp)->next) {
			if (*pp == br) {
				*pp = br->next;
				break;
			}
		}
	}
	run_free_state(br);
}

void bridge_attach(struct bridge *b, struct run_request *req)
{
	struct bridge_run *br = xcalloc(1, sizeof(*br));
	br->b = b;
	br->policy = req->policy;
	br->client = req->client ? xstrdup(req->client) : NULL;
	sha256_hex(req->code ? req->code : "", req->code ? req->code_len : 0, br->code_sha256);
	snprintf(br->id, sizeof(br->id), "%d-%llu", (int)getpid(), (unsigned long long)++b->seq);
	br->per_tool = json_object();
	br->denials = json_array();
	br->calls = json_array();
	br->lists_waiting = json_array();
	br->next = b->runs;
	b->runs = br;
	req->on_tool_message = on_tool_message;
	req->on_tool_done = on_tool_done;
	req->tool_ctx = br;
}

/* ------------------------------------------------------------ the bridge */

bool bridge_settled(const struct bridge *b)
{
	for (size_t i = 0; b && i < b->n_ups; i++)
		if (!upstream_settled(b->ups[i]))
			return false;
	return true;
}

void bridge_on_settled(struct bridge *b, void (*fn)(void *ctx), void *ctx)
{
	b->on_settled = fn;
	b->settled_ctx = ctx;
}

static void on_upstream_settled(void *ctx, struct upstream *u)
{
	struct bridge *b = ctx;
	(void)u;
	if (!bridge_settled(b))
		return;
	for (struct bridge_run *br = b->runs; br; br = br->next) {
		size_t i;
		json_t *id;
		json_array_foreach (br->lists_waiting, i, id)
			answer_list(br, id);
		json_array_clear(br->lists_waiting);
	}
	if (b->on_settled)
		b->on_settled(b->settled_ctx);
}

struct bridge *bridge_new(struct loop *l, const struct pycell_conf *c, struct pc_err *err)
{
	struct bridge *b = xcalloc(1, sizeof(*b));
	b->loop = l;
	b->conf = c;
	b->audit = audit_open(c->audit_log, err);
	if (!b->audit) {
		free(b);
		return NULL;
	}
	b->ups = xcalloc(c->n_upstreams, sizeof(*b->ups));
	for (size_t i = 0; i < c->n_upstreams; i++) {
		b->ups[i] = upstream_new(l, &c->upstreams[i], on_upstream_settled, b);
		if (!b->ups[i]) {
			pc_syserr(err, "upstream", "upstream %s: timerfd", c->upstreams[i].name);
			bridge_free(b);
			return NULL;
		}
		b->n_ups++;
	}
	return b;
}

int bridge_start(struct bridge *b, struct pc_err *err)
{
	int ret = 0;
	for (size_t i = 0; i < b->n_ups; i++) {
		struct pc_err e;
		if (upstream_start(b->ups[i], &e) < 0) {
			log_warn("%s (retrying)", e.msg);
			if (ret == 0 && err)
				*err = e;
			ret = -1;
		}
	}
	return ret;
}

size_t bridge_wait_ready(struct bridge *b, uint64_t timeout_ms)
{
	uint64_t end = now_ms() + timeout_ms;
	size_t ready;
	for (;;) {
		bool settled = true;
		uint64_t now = now_ms();
		ready = 0;
		for (size_t i = 0; i < b->n_ups; i++) {
			settled = settled && upstream_settled(b->ups[i]);
			ready += upstream_ready(b->ups[i]);
		}
		if (settled || now >= end)
			break;
		if (loop_run_once(b->loop, (int)(end - now < 100 ? end - now : 100)) < 0)
			break;
	}
	return ready;
}

void bridge_free(struct bridge *b)
{
	if (!b)
		return;
	for (struct bridge_run *br = b->runs; br; br = br->next) {
		drop_pending(br, false);
		br->b = NULL;
	}
	for (size_t i = 0; i < b->n_ups; i++)
		upstream_free(b->ups[i]);
	free(b->ups);
	audit_close(b->audit);
	free(b);
}
