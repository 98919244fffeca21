/* pycell: the MCP protocol, independent of the transport.
 *
 * A server holds what every client shares: the policy's run environment,
 * the tools, the cap on concurrent runs and the queue behind it.  A
 * connection (struct mcp_conn) is one client's: stdio has one, HTTP one
 * per 2025 session or per 2026 request.  It holds its era (the 2025
 * handshake, or 2026-07-28 where every request carries its version), the
 * negotiated version and log level of the handshake, its requests in
 * flight.  Everything runs on one event loop; tools/call
 * answers later, when its run ends, while other requests are answered at
 * once. */
#ifndef PYCELL_MCP_H
#define PYCELL_MCP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/loop.h"
#include "base/util.h"
#include "run/run.h"

struct mcp_server;
struct mcp_conn;
struct state_dir;

/* What --help says of the tools, from their table: every tool, then
 * those a policy may turn off and when (lines of at most 88 columns,
 * each ending in a newline; malloc'd). */
char *mcp_tools_help(void);

/* Protocol versions, oldest first: the handshake revisions (initialize
 * offers the newest of them by default), then 2026-07-28, spoken without
 * a handshake. */
extern const char *const mcp_protocol_versions[];
#define MCP_LATEST_LEGACY_PROTOCOL "2025-11-25"
#define MCP_MODERN_PROTOCOL "2026-07-28"

struct mcp_server_config {
	unsigned max_runs;       /* runs at once; the rest wait in a queue (0 = 4) */
	unsigned page_size;      /* tools per tools/list page (0 = all) */
	unsigned ready;          /* with warm starts: jails made ahead (0 = none) */
	/* Tool calls from inside the jail (fd 3, bridge.h): called for every
	 * run_python run right before run_start, to set the request's tool
	 * hooks.  NULL: runs have no tools. */
	void (*attach_tools)(void *tool_ctx, struct run_request *req);
	/* The tools jailed code may call under policy p, for sandbox_info: a
	 * new reference to a JSON array.  NULL: the policy's allow patterns. */
	json_t *(*jail_tools)(void *tool_ctx, const struct policy *p);
	/* Have the tools behind jail_tools settled (their servers listed them
	 * or failed)?  sandbox_info waits until they have, so that it never
	 * lists fewer tools than a call can reach.  NULL: always. */
	bool (*tools_settled)(void *tool_ctx);
	void *tool_ctx;
	/* tools/list and server/discover differ between clients (HTTP with a
	 * policy per token): their cacheScope is "private", else "public". */
	bool cache_private;
	/* This replica's name (a fleet behind a balancer): task ids begin
	 * with "NAME.", so that the balancer can route the tasks methods by
	 * Mcp-Name.
	 * NULL: no prefix. */
	const char *replica;
	/* Where idle sessions pause to (run/state.h; borrowed: it outlives
	 * the server), and whose paused sessions this server may resume: those
	 * of state_scope.  state_ephemeral: they are this process's alone,
	 * removed when the server is freed (a stdio server's, whose client is
	 * its connection).  state NULL: an idle session ends. */
	struct state_dir *state;
	const char *state_scope;
	bool state_ephemeral;
};

/* What a server has done, for /metrics.  Durations are of ended runs,
 * counted in the bucket of the first bound they do not exceed (the last
 * bucket: beyond every bound). */
#define MCP_DURATION_BUCKETS 12
extern const double mcp_duration_bounds_s[MCP_DURATION_BUCKETS - 1];
struct mcp_stats {
	uint64_t runs[RUN_STATUS_N];       /* ended runs, by status */
	uint64_t start_failures;           /* runs that could not start at all */
	uint64_t duration[MCP_DURATION_BUCKETS];
	uint64_t duration_ms_sum;
	unsigned running, queued;          /* now */
	unsigned ready, ready_target;      /* ready jails now, and the pool's size */
	bool pool_up;                      /* run_pool_up */
	unsigned tasks;                    /* tasks kept (running or ended) */
};

/* The server stops taking requests (`pycell serve` draining): what
 * waits for no run ends now (2026-07-28's subscriptions/listen streams,
 * each with its result). */
void mcp_server_quiesce(struct mcp_server *s);
/* The env must outlive the server. */
struct mcp_server *mcp_server_new(struct loop *l, const struct run_env *env,
				  const struct mcp_server_config *cfg, struct pc_err *err);
void mcp_server_stats(const struct mcp_server *s, struct mcp_stats *st);
/* A reload: runs from now on are env's (its policy, tools and ready
 * jails; the old ready jails are killed), with cfg's max_runs, ready and
 * cache_private.  The runs in flight keep the env they started with:
 * free an old env once mcp_server_uses_env says no more, and not from
 * the on_answered hook (the jails of the runs just answered are freed
 * after it, and read their env).  On failure nothing changed. */
int mcp_server_reconfigure(struct mcp_server *s, const struct run_env *env,
			   const struct mcp_server_config *cfg, struct pc_err *err);
/* The runs of principal's calls not yet ended: run_python runs and cells
 * (queued, installing packages or running) and session jails being
 * opened, whether their request is still open or they became tasks. */
unsigned mcp_server_runs_of(const struct mcp_server *s, const char *principal);
/* Is env this server's, or that of a run still in flight? */
bool mcp_server_uses_env(const struct mcp_server *s, const struct run_env *env);
/* Kills and frees every run, queued or running; sends nothing. */
void mcp_server_free(struct mcp_server *s);
/* fn(ctx) is called once the answers of ended runs have been handed to
 * the sessions, before the server goes on to other work (tearing down
 * those runs' jails, starting queued runs, making ready jails): a
 * transport that sends from its own loop round (HTTP) sends them there. */
void mcp_server_on_answered(struct mcp_server *s, void (*fn)(void *ctx), void *ctx);
/* The tools of tools_settled have settled: the sandbox_info calls that
 * waited for them are answered (from the loop, not from this call). */
void mcp_server_tools_settled(struct mcp_server *s);

/* How a connection's messages leave: the transport's part.  `related` is the
 * id of the request a message belongs to (its response, or a progress
 * notification of it), NULL for others, so that Streamable HTTP can put
 * it on that request's stream.  The callee does not keep `msg`. */
struct mcp_conn_ops {
	void (*send)(void *ctx, json_t *msg, const json_t *related);
	/* Optional: how many bytes of what was sent the client has not read
	 * yet, so that an answer can wait until the progress notifications
	 * before it have been read (calls.c); NULL: not known. */
	size_t (*unread)(void *ctx);
};

struct mcp_conn *mcp_conn_new(struct mcp_server *s, const struct mcp_conn_ops *ops, void *ctx);
/* One message text (a stdio line, an HTTP body): parse, check, dispatch.
 * Every malformed input gets its JSON-RPC error; nothing is fatal. */
void mcp_conn_handle_text(struct mcp_conn *conn, const char *text, size_t len);
/* A parsed message (object or batch array); borrowed. */
void mcp_conn_handle_message(struct mcp_conn *conn, json_t *msg);
/* The transport dropped a message over its size cap; id_text is the JSON
 * text of its top-level "id" when the transport saw one (else NULL): the
 * error answers it, so a client waiting for that id hears back. */
void mcp_conn_oversized(struct mcp_conn *conn, size_t max, const char *id_text);
/* Who the connection's client is, for the audit log of its runs (a token's
 * name on HTTP); NULL: not said.  Copied. */
void mcp_conn_set_principal(struct mcp_conn *conn, const char *name);
/* The client is gone: kill its runs, answer nothing more, free. */
void mcp_conn_free(struct mcp_conn *conn);

/* 2026-07-28 over HTTP: the arguments of a tools/call (params) that the
 * tool's inputSchema mirrors into Mcp-Param-{Name} headers (x-mcp-header)
 * must be the headers' values; header(ctx, name) gives one decoded
 * (malloc'd, *len set) or NULL.  0, or -1 with why (HeaderMismatch). */
int mcp_check_param_headers(const struct mcp_server *s, const json_t *params,
			    char *(*header)(void *ctx, const char *name, size_t *len), void *ctx,
			    char *why, size_t why_size);

#endif
