/* pycell fuzz target: MCP dispatch (src/mcp/), what a client sends.  Each
 * input is a session: lines, each one message, handled in order, then the
 * event loop run until the session is quiet.  Checks beyond "no crash":
 * every request with a valid id gets an answer with that id (as many
 * answers as requests: a duplicate is refused, not dropped), unless the
 * client cancelled it (notifications/cancelled: then none is due), every message
 * sent is JSON-RPC 2.0, and nothing is sent for a notification alone.
 *
 * Runs cannot start here: the fault site "clone" (src/base/fault.h, built
 * in for this target) fails every jail before it exists, so a run_python
 * call is answered setup_failed, through the same code as any result. */
#include "config.h"

#include <assert.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fault.h"
#include "base/jsonrpc.h"
#include "base/loop.h"
#include "jail/seccomp.h"
#include "mcp/mcp.h"
#include "run/run.h"

static struct loop *l;
static struct run_env env;
static struct mcp_server *server;

struct sent {
	json_t *msgs;   /* every message the session sent */
};

static void sent_one(struct sent *s, json_t *msg)
{
	const char *v = json_string_value(json_object_get(msg, "jsonrpc"));
	assert(json_is_object(msg));
	assert(v && strcmp(v, "2.0") == 0);
	json_array_append(s->msgs, msg);
}

/* One message, or (2025-03-26) a batch's replies: a non-empty array of them. */
static void on_send(void *ctx, json_t *msg, const json_t *related)
{
	struct sent *s = ctx;
	size_t i;
	json_t *one;
	(void)related;
	if (!json_is_array(msg)) {
		sent_one(s, msg);
		return;
	}
	assert(json_array_size(msg) > 0);
	json_array_foreach (msg, i, one)
		sent_one(s, one);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct pc_err err = { 0 };
	struct mcp_server_config cfg = { .max_runs = 2 };
	(void)argc;
	(void)argv;
	setenv("PYCELL_FAULT", "clone", 1);
	fault_init();
	if (!fault_at("clone")) {
		fprintf(stderr, "fuzz_mcp: built without the fault sites: it would start real jails\n");
		abort();
	}
	l = loop_new();
	if (!l || run_env_load(&env, "default", &err) < 0 ||
	    seccomp_filter_compile(&env.policy, &env.filter, &err) < 0) {
		fprintf(stderr, "fuzz_mcp: %s\n", err.msg);
		abort();
	}
	env.runtime_dir = xasprintf("%s/runtime", getenv("PYCELL_DATADIR") ? getenv("PYCELL_DATADIR") : ".");
	server = mcp_server_new(l, &env, &cfg, &err);
	if (!server) {
		fprintf(stderr, "fuzz_mcp: %s\n", err.msg);
		abort();
	}
	return 0;
}

static size_t answers_for(const json_t *msgs, const json_t *id)
{
	size_t i, n = 0;
	json_t *m;
	json_array_foreach (msgs, i, m)
		if (json_object_get(m, "method") == NULL && json_equal(json_object_get(m, "id"), id))
			n++;
	return n;
}

static bool was_cancelled(const json_t *cancelled, const json_t *id)
{
	size_t j;
	json_t *other;
	json_array_foreach (cancelled, j, other)
		if (json_equal(other, id))
			return true;
	return false;
}

/* Has some request not cancelled fewer answers than askings? */
static bool unanswered(const json_t *requests, const json_t *cancelled, const json_t *msgs)
{
	size_t i, j;
	json_t *id, *other;
	json_array_foreach (requests, i, id) {
		size_t asked = 0;
		if (was_cancelled(cancelled, id))
			continue;
		json_array_foreach (requests, j, other)
			asked += json_equal(other, id);
		if (answers_for(msgs, id) < asked)
			return true;
	}
	return false;
}

/* What a message the client sends makes due: a request, an answer; a
 * cancellation, none. */
static void note_message(json_t *msg, json_t *requests, json_t *cancelled)
{
	struct jsonrpc_msg m;
	if (!json_is_object(msg))
		return;
	jsonrpc_classify(msg, &m);
	if (m.kind == JSONRPC_REQUEST && requests)
		json_array_append(requests, m.id);
	if (m.kind == JSONRPC_NOTIFICATION && strcmp(m.method, "notifications/cancelled") == 0 &&
	    json_object_get(m.params, "requestId"))
		json_array_append(cancelled, json_object_get(m.params, "requestId"));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct mcp_conn_ops ops = { on_send };
	struct sent s = { json_array() };
	json_t *requests = json_array(), *cancelled = json_array();
	struct mcp_conn *conn = mcp_conn_new(server, &ops, &s);
	const char *p = (const char *)data, *end = p + size;
	size_t i;
	json_t *id;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
		json_t *unused = NULL, *msg = jsonrpc_parse(p, len, &unused);
		if (json_is_array(msg)) {
			size_t k;
			json_t *one;
			/* a batch's requests are due only where batches are
			 * taken (2025-03-26); its cancellations may count */
			json_array_foreach (msg, k, one)
				note_message(one, NULL, cancelled);
		} else {
			note_message(msg, requests, cancelled);
		}
		json_decref(msg);
		json_decref(unused);
		mcp_conn_handle_text(conn, p, len);
		p += len + 1;
	}
	/* the runs' answers come from the loop; one that followed a progress
	 * notification waits out PROGRESS_GAP_MS (30 ms) on a timer */
	for (int k = 0; k < 200 && loop_run_once(l, 1) > 0; k++)
		;
	/* by wall time, not by rounds: a busy machine is slow, not wrong */
	for (uint64_t until = now_ms() + 2000; unanswered(requests, cancelled, s.msgs) && now_ms() < until;)
		loop_run_once(l, 20);
	json_array_foreach (requests, i, id) {
		size_t asked = 0, j;
		json_t *other;
		if (was_cancelled(cancelled, id))
			continue;
		json_array_foreach (requests, j, other)
			asked += json_equal(other, id);
		if (answers_for(s.msgs, id) < asked) {
			char *ids = json_dumps(id, JSON_ENCODE_ANY);
			fprintf(stderr, "request id %s asked %zu times, answered %zu\n", ids, asked,
				answers_for(s.msgs, id));
			abort();
		}
	}
	mcp_conn_free(conn);
	for (int k = 0; k < 50 && loop_run_once(l, 1) > 0; k++)
		;
	json_decref(requests);
	json_decref(cancelled);
	json_decref(s.msgs);
	return 0;
}
