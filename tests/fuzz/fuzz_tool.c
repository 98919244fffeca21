/* pycell fuzz target: what the jail writes on its tool socket (fd 3), the
 * most exposed parser of all: code under attack controls every byte.
 * The packets go through the real path: run.c's socket reader (on_tool:
 * size cap, JSON, the result notification) and the bridge behind it
 * (bridge.c: JSON-RPC checks, tools/list, search, schema, the budget, the
 * allowlist, denials, the audit record), over a real SEQPACKET socketpair.
 * Each line of the input is one packet.  Checks: every request (and every
 * invalid message) with a valid id is answered, exactly once per time it
 * was sent, with its id;
 * every reply is one JSON-RPC 2.0 object; the run ends cleanly (ASan).
 *
 * run.c is compiled into this file to reach its socket reader; run.sh
 * leaves its own object out. */
/* fuzz: includes src/run/run.c */
#include "../../src/run/run.c"

#include <assert.h>
#include <stdint.h>

#include "base/jsonrpc.h"
#include "bridge/bridge.h"
#include "config/conf.h"

static struct loop *l;
static struct pycell_conf conf;
static struct bridge *bridge;
static struct policy policy;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct pc_err err = { 0 };
	(void)argc;
	(void)argv;
	l = loop_new();
	conf_init_default(&conf);
	conf.audit_log = xstrdup("/dev/null");
	bridge = l ? bridge_new(l, &conf, &err) : NULL;
	if (!bridge || policy_parse("{\"tools\": {\"allow\": [\"fake.*\", \"x.y\"], \"budget\": 20}}", "fuzz.json",
				    &policy, &err) < 0) {
		fprintf(stderr, "fuzz_tool: %s\n", err.msg);
		abort();
	}
	return 0;
}

static void take_replies(int fd, json_t *replies)
{
	static char buf[TOOL_MSG_MAX + 1];
	ssize_t n;
	while ((n = recv(fd, buf, TOOL_MSG_MAX + 1, MSG_DONTWAIT)) > 0) {
		json_t *m = json_loadb(buf, (size_t)n, JSON_ALLOW_NUL, NULL);
		const char *v = json_string_value(json_object_get(m, "jsonrpc"));
		if (!json_is_object(m) || !v || strcmp(v, "2.0") != 0) {
			fprintf(stderr, "fuzz_tool: a reply that is not JSON-RPC 2.0: %.*s\n", (int)n, buf);
			abort();
		}
		json_array_append_new(replies, m);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* half the inputs as a server's runs are: finished by python's own
	 * pycell/exit, after which nothing more is read from the jail */
	struct run_request req = { .policy = &policy, .code = "x", .code_len = 1, .finish_on_report = size & 1 };
	struct pc_err err = { 0 };
	json_t *asked = json_array(), *replies = json_array(), *id;
	const char *p = (const char *)data, *end = p + size;
	struct run *r;
	int sv[2];
	size_t i;

	bridge_attach(bridge, &req);
	r = run_new(l, &req, &err);
	assert(r);
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		abort();
	r->tool_fd = sv[0];
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
		json_t *msg = json_loadb(p, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, NULL);
		struct jsonrpc_msg m;
		if (json_is_object(msg)) {
			jsonrpc_classify(msg, &m);
			/* an invalid message is answered too, with its id when
			 * that is a valid one */
			if (m.kind == JSONRPC_REQUEST || (m.kind == JSONRPC_INVALID && m.id && jsonrpc_id_valid(m.id)))
				json_array_append(asked, m.id);
		}
		json_decref(msg);
		if (send(sv[1], p, len, MSG_DONTWAIT) == (ssize_t)len)
			on_tool(&r->w_tool, EPOLLIN, r);
		take_replies(sv[1], replies);
		p += len + 1;
		if (run_done(r)) {
			/* the run is over: the tool socket is closed, and what
			 * the jail sends now is never read (nor answered) */
			assert(req.finish_on_report && r->tool_fd < 0);
			break;
		}
	}
	json_array_foreach (asked, i, id) {
		size_t want = 0, got = 0, j;
		json_t *o;
		json_array_foreach (asked, j, o)
			want += json_equal(o, id);
		json_array_foreach (replies, j, o)
			got += json_equal(json_object_get(o, "id"), id);
		if (got != want) {
			char *s = json_dumps(id, JSON_ENCODE_ANY);
			fprintf(stderr, "fuzz_tool: request id %s asked %zu times, answered %zu\n", s, want, got);
			abort();
		}
	}
	close(sv[1]);
	run_free(r);
	json_decref(asked);
	json_decref(replies);
	return 0;
}
