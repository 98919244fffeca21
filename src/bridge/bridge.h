/* pycell: the tool bridge, what the jail's fd 3 reaches.
 *
 * The jailed code is an MCP client of its supervisor: over fd 3 (one
 * JSON-RPC message per SOCK_SEQPACKET packet) it may send initialize, ping,
 * tools/list and tools/call.  The bridge answers tools/list with the tools
 * the run's policy allows, named SERVER.TOOL, and checks every tools/call
 * against the allowlist, the per-run budget and the argument size cap
 * before forwarding it to the upstream server (upstream.h); the answer is
 * checked against the result size cap.  Denied calls get an error and are
 * counted.  Each run's summary lands in its result as `tool_calls`, and
 * the audit log gets one line per run and one per denied call.
 *
 * Usage (one bridge per process, on the loop the runs use):
 *
 *	struct bridge *b = bridge_new(loop, &conf, &err);    // conf outlives b
 *	bridge_start(b, &err);           // spawn the upstreams (non-blocking)
 *	bridge_wait_ready(b, 30000);     // optional: pump the loop until each
 *	                                 // upstream listed its tools or failed
 *	...
 *	run_request_from_env(&req, &env); req.code = ...; req.code_len = ...;
 *	bridge_attach(b, &req);          // last, right before run_start
 *	run_start(loop, &req, &run, &err);
 *	// in on_done, run_result(run)->tool_calls is filled and the audit
 *	// line is written (the bridge hooks on_tool_done, see run.h)
 *	...
 *	json_t *tools = bridge_tools_for_policy(b, policy);   // sandbox_info
 *	...
 *	// free every run first, then:
 *	bridge_free(b);
 *
 * Nothing the bridge sends into a jail names an upstream's command,
 * environment, files or how it is reached: only tool names, schemas,
 * results and error messages. */
#ifndef PYCELL_BRIDGE_H
#define PYCELL_BRIDGE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/loop.h"
#include "base/util.h"
#include "config/conf.h"
#include "config/policy.h"
#include "run/run.h"

/* JSON-RPC error codes on fd 3, besides the standard ones.  error.data is
 * {"reason": ..., "tool": NAME}. */
#define BRIDGE_ERR_DENIED -32001    /* reason: not_allowed, budget_exhausted,
				       arguments_too_large, result_too_large,
				       too_many_in_flight */
#define BRIDGE_ERR_UPSTREAM -32002  /* reason: timeout, upstream_exited,
				       upstream_unavailable, upstream_error */

/* Calls one run may have in flight at once. */
#define BRIDGE_MAX_IN_FLIGHT 32
/* Denied calls of one run written to the audit log one by one; the rest
 * are counted in the run's line ("denials_not_logged"). */
#define BRIDGE_AUDIT_DENIALS_MAX 100
/* Denials listed in a result's tool_calls.denials (all are counted). */
#define BRIDGE_RESULT_DENIALS_MAX 20

struct bridge;

/* Opens the audit log (conf->audit_log, else stderr); creates one client
 * per upstream in the config, not yet started.  `c` is borrowed. */
struct bridge *bridge_new(struct loop *l, const struct pycell_conf *c, struct pc_err *err);
/* Spawn every upstream.  An upstream that cannot be spawned is logged and
 * retried with backoff; -1 (with err for the first) is informational. */
int bridge_start(struct bridge *b, struct pc_err *err);
/* Run the loop until every upstream has listed its tools or failed its
 * first start, or timeout_ms passed.  Returns how many are ready. */
size_t bridge_wait_ready(struct bridge *b, uint64_t timeout_ms);
/* Give the run described by req (policy, code and code_len already set)
 * its tools: sets req->on_tool_message, on_tool_done and tool_ctx.  Call
 * right before run_start (the per-run state is released by on_tool_done,
 * which run.c calls for every started run). */
void bridge_attach(struct bridge *b, struct run_request *req);
/* The tools policy p lets code call, as MCP Tool objects named
 * SERVER.TOOL (new reference, an array). */
json_t *bridge_tools_for_policy(struct bridge *b, const struct policy *p);
/* Stops the upstreams.  Runs still attached are detached (their pending
 * calls dropped, no audit line). */
void bridge_free(struct bridge *b);
/* Has every upstream had its chance (listed its tools, or failed and waits
 * for a restart)?  Until then a tools/list from a jail waits for them. */
bool bridge_settled(const struct bridge *b);
/* fn(ctx) each time the upstreams have all settled (for sandbox_info). */
void bridge_on_settled(struct bridge *b, void (*fn)(void *ctx), void *ctx);

/* Audit records on stderr go to fn instead (audit_set_sink). */
void bridge_audit_sink(struct bridge *b, void (*fn)(const json_t *rec, const char *line));

/* Tool calls refused, by reason (the names of BRIDGE_ERR_DENIED's
 * error.data.reason), since the bridge started; and the upstreams. */
#define BRIDGE_DENIAL_REASONS 5
extern const char *const bridge_denial_reasons[BRIDGE_DENIAL_REASONS];
struct bridge_stats {
	uint64_t denied[BRIDGE_DENIAL_REASONS];
	uint64_t forwarded;        /* calls sent to an upstream */
};
void bridge_stats(const struct bridge *b, struct bridge_stats *st);
size_t bridge_n_upstreams(const struct bridge *b);
/* Upstream i: its name, and whether it is ready (listed its tools). */
const char *bridge_upstream_name(const struct bridge *b, size_t i);
bool bridge_upstream_ready(const struct bridge *b, size_t i);

/* The allowlist alone: `name` (len bytes, which must hold no NUL) equals
 * an entry of p->tools_allow byte for byte, or an entry "SERVER.*" is a
 * prefix of it with at least one byte after the dot.  Whether the tool
 * exists is checked separately, against the upstream's own list. */
bool bridge_name_allowed(const struct policy *p, const char *name, size_t len);

#endif
