/* pycell: a stdio MCP client for one upstream server from the config.
 *
 * The supervisor starts the server's command with pipes on its stdin and
 * stdout, says initialize, lists its tools, and then forwards tools/call
 * requests, each with a deadline.  Everything runs on the event loop: a
 * slow or hung server delays only its own calls.  When the server exits
 * (or stops answering a ping after a call timed out) its calls fail and it
 * is started again after a backoff; calls made meanwhile wait for it, up to
 * their deadline. */
#ifndef PYCELL_UPSTREAM_H
#define PYCELL_UPSTREAM_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/loop.h"
#include "base/util.h"
#include "config/conf.h"

struct upstream;

enum upstream_status {
	UPSTREAM_OK = 0,         /* the server's result object */
	UPSTREAM_RPC_ERROR,      /* the server answered with a JSON-RPC error */
	UPSTREAM_TIMEOUT,        /* no answer before the deadline */
	UPSTREAM_EXITED,         /* the server died with the call in flight */
	UPSTREAM_UNKNOWN_TOOL,   /* the server has no tool of that name */
	UPSTREAM_UNAVAILABLE,    /* could not be sent (stopped, pipe full) */
};

/* The outcome of one call: `result` (borrowed, valid during the callback)
 * for UPSTREAM_OK, else `message`, a sentence that names the server but
 * never its command, environment or files. */
typedef void (*upstream_reply_fn)(void *ctx, enum upstream_status st, json_t *result, const char *message);

/* `c` is borrowed and must outlive the upstream.  on_settled, if set, is
 * called each time the server has (re)listed its tools, and each time it
 * failed and waits for a restart: whenever it has had its chance. */
struct upstream *upstream_new(struct loop *l, const struct upstream_conf *c,
			      void (*on_settled)(void *ctx, struct upstream *u), void *ctx);
/* Spawn the server and start the handshake.  Fails only when the process
 * cannot be created; the handshake completes later on the loop (failures
 * there are logged and retried with backoff). */
int upstream_start(struct upstream *u, struct pc_err *err);
/* Close its stdin, give it a moment to exit, kill and reap it. */
void upstream_free(struct upstream *u);

const char *upstream_name(const struct upstream *u);
/* Ready: initialized and its tools listed. */
bool upstream_ready(const struct upstream *u);
/* Has the server ended its first start, successfully or not?  (For
 * waiting at startup.) */
bool upstream_settled(const struct upstream *u);
/* The tools of its last tools/list, an array of MCP Tool objects with the
 * server's own names (borrowed; NULL before the first listing). */
json_t *upstream_tools(const struct upstream *u);
/* The tool called `name` (exact bytes), or NULL. */
json_t *upstream_find_tool(const struct upstream *u, const char *name, size_t len);

/* tools/call `tool` with `arguments` (borrowed; NULL = {}).  Returns a
 * call id (> 0): `fn` is called exactly once later, unless the call is
 * cancelled first.  Returns 0 when the call cannot even be queued, with
 * the reason in err (and no callback). */
uint64_t upstream_call(struct upstream *u, const char *tool, json_t *arguments, upstream_reply_fn fn,
		       void *ctx, struct pc_err *err);
/* Forget a call: its callback will not run; the server is told
 * (notifications/cancelled) if the request was already sent. */
void upstream_cancel(struct upstream *u, uint64_t call_id);

#endif
