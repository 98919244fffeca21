/* pycell: the MCP layer's core header, shared by its files and nothing
 * else (the rest of pycell sees mcp.h).  The core:
 *   protocol.c  sending, dispatch of requests and notifications (a row per
 *               method), connections
 *   calls.c     a request answered later: its life from queued to answered
 *               (its run, progress, cancellation, the run slots), and the
 *               hooks through which the features take part in it
 *   server.c    the server: made, reconfigured, counted, freed; the table of
 *               features
 * The features, each with its own header and state, reached by the core
 * through that table and a call's hooks, and never by one another
 * (tests/layers checks it):
 *   tasks.c     the Tasks extension: a long run_python call as a task
 *   sessions.c  sessions: a jail kept across run_python calls
 *   resources.c the files and output runs leave to be read
 * And the leaves: tools.c (tools.h: the table of tools, run_python's
 * arguments; schemas.c, generated, holds their schemas) and render.c
 * (render.h: what a result looks like to the client). */
#ifndef PYCELL_MCP_INTERNAL_H
#define PYCELL_MCP_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/loop.h"
#include "config/result.h"
#include "mcp/mcp.h"
#include "run/packages.h"
#include "run/pool.h"
#include "run/run.h"

enum proto {
	PROTO_NONE = -1,   /* not initialized */
	PROTO_2024_11_05 = 0,
	PROTO_2025_03_26,  /* + tool annotations, progress messages, batches */
	PROTO_2025_06_18,  /* + structured content, output schemas, titles; - batches */
	PROTO_2025_11_25,
	PROTO_2026_07_28,  /* modern: no initialize; version, capabilities and log level in
			    * every request's _meta; server/discover; resultType on results */
};
#define PROTO_LATEST_LEGACY PROTO_2025_11_25
#define PROTO_MODERN PROTO_2026_07_28
#define proto_is_modern(v) ((v) >= PROTO_MODERN)

/* How a connection speaks, decided by its first request that succeeds: an
 * initialize picks the handshake revisions (2025-11-25 and earlier), a
 * request whose _meta names 2026-07-28 the per-request one. */
enum era { ERA_OPEN, ERA_LEGACY, ERA_MODERN };

/* MCP (RFC 5424) log levels, least severe first. */
extern const char *const mlog_names[];   /* "debug" ... "emergency", NULL */
enum mlog { MLOG_DEBUG, MLOG_INFO, MLOG_NOTICE, MLOG_WARNING, MLOG_ERROR, MLOG_OFF = 8 };

/* One request being handled: where its answer goes, and the revision and
 * log level it is served at (the session's for a 2025 request, its own
 * _meta's for a 2026 one). */
struct mcp_req {
	struct mcp_conn *conn;
	struct mcp_batch *b;
	json_t *id;
	enum proto v;
	enum mlog log_min;
	bool tasks_ok;                /* its capabilities name the Tasks extension */
};

/* A queued run holds its code; a client that floods tools/call gets an
 * error instead of unbounded memory. */
#define MAX_QUEUED 256
#define DEFAULT_MAX_RUNS 4
#define PROGRESS_INTERVAL_MS 1000
/* A run's output goes to a client that asked for progress as it comes: at
 * most one notification this often, with this much of it (the rest is
 * counted, and the result has it all). */
#define PROGRESS_OUTPUT_MS 250
#define PROGRESS_OUTPUT_MAX 4096

/* CALL_LISTEN: a 2026-07-28 subscriptions/listen stream, answered only
 * when the server ends it (subscriptions.c) */
enum call_kind { CALL_RUN_PYTHON, CALL_SANDBOX_INFO, CALL_PY_VERSION, CALL_SESSION_OPEN, CALL_LISTEN };
enum call_state { CALL_QUEUED, CALL_RUNNING, CALL_WAITING };

struct call_list {
	struct mcp_call *head, *tail;
	unsigned n;
};

/* The replies of one batch are sent together, as one array, when its last
 * request is answered. */
struct mcp_batch {
	struct mcp_conn *conn;     /* NULL once the client left */
	json_t *replies;
	unsigned pending;             /* requests still being worked on */
	bool dispatching;
};

/* Where a call lives when not in a jail of its own: a session's cell
 * (sessions.c sets it when it takes the call), a subscriptions/listen
 * stream (subscriptions.c).  calls.c calls these at the call's moments
 * (NULL: nothing to do then); what they reach is the feature's. */
struct call_host {
	int (*start)(struct mcp_call *c, struct pc_err *err);   /* start the run there */
	void (*cancel)(struct mcp_call *c);                     /* kill it (its on_done follows) */
	/* the "session" member of its result ({id, cell, alive}), which the
	 * features after it read (resources.c keeps a cell's output by it) */
	json_t *(*describe)(const struct mcp_call *c);
	void (*release)(struct mcp_call *c);                    /* the call is freed */
};

/* Where a call's answer goes when not to its request: a task (tasks.c
 * sets it when the call becomes one). */
struct call_sink {
	void (*started)(struct mcp_call *c);                    /* its run started */
	/* it ended with this CallToolResult (stolen) */
	void (*finish)(struct mcp_call *c, json_t *result, const char *summary);
	void (*lost)(struct mcp_call *c);                       /* freed without a result */
	const char *(*owner)(const struct mcp_call *c);         /* whose it is */
};

/* A request answered later: a run, or sandbox_info waiting for the
 * interpreter's version.  Also the server's own version probe. */
struct mcp_call {
	struct mcp_call *prev, *next;
	struct call_list *list;
	struct mcp_call *ended_next;  /* on the server's list of ended runs */
	struct mcp_server *srv;
	struct mcp_conn *conn;     /* NULL: the server's own, or the client left */
	struct mcp_batch *batch;
	enum call_kind kind;
	enum call_state state;
	json_t *id;
	enum proto v;                 /* the revision it is answered in */
	enum mlog log_min;            /* a 2026 request's own log level */
	bool task_ok;                 /* may become a task (tasks.c) */
	const struct call_sink *sink; /* it did: its answer goes there (NULL: to its request) */
	struct mcp_task *task;        /* tasks.c's */
	json_t *progress_token;
	uint64_t last_progress, progress_total;   /* ms */
	unsigned n_progress;
	uint64_t t_progress;          /* when the last progress notification was sent */
	char *news;                   /* output not yet sent in one, up to PROGRESS_OUTPUT_MAX */
	size_t news_len;
	uint64_t news_dropped;
	enum run_stream news_stream;  /* of its last bytes */
	uint64_t t_received, t_started;
	unsigned long long seq;
	bool cancelled, ended;

	char *code;
	size_t code_len;
	char *variables_json;
	char *stdin_data;
	size_t stdin_len;
	char *files_json;             /* run_python's files, checked */
	char **packages;              /* run_python's packages, checked against the policy */
	size_t n_packages;
	struct pkg_op *pkg_op;        /* their install (or cache lookup) in progress */
	char *pkg_dir;                /* the set, once there (held: packages_put) */
	char *session_id;             /* run_python's session_id, as given */
	uint64_t timeout_ms;
	struct run *run;
	const struct call_host *host; /* where it runs when not in its own jail (NULL: its own) */
	struct tool_session *ts;      /* sessions.c's: the session it runs a cell of, or opens */
	struct listener *listener;    /* subscriptions.c's: the stream it is */
	struct run_result *cell_res;  /* a cell's result, once it ended */
	uint64_t output_bytes;        /* run_python's max_output_bytes; 0: the policy's */
	/* a cell's whole output, when output_bytes cut its result's */
	struct output_buf whole_out, whole_err;
	bool has_whole;
	const struct run_env *env;    /* the policy it runs under, from its start (a reload changes s->env) */
};

struct mcp_server {
	struct loop *loop;
	const struct run_env *env;
	struct mcp_server_config cfg;
	struct call_list queue;       /* waiting for a run slot, in order */
	struct call_list active;      /* running, and sandbox_info waiting */
	struct mcp_call *ended;       /* runs whose on_done fired */
	struct mcp_call *held;        /* ended runs whose answer waits out PROGRESS_GAP_MS */
	int hold_fd;                  /* timer: when the first held answer may go */
	struct loop_watch w_hold;
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
	json_t *packages;             /* [{name, version}] importable in the jail */
	struct mcp_call *version_call;
	json_t *tools;
	struct run_pool *pool;
	struct fonts_build *fonts;   /* matplotlib's font list being built for env (fonts.h) */        /* warm starts: jails made ahead (run/pool.h), of no principal's */
	/* a named principal's, made by its own zygote (run_env_warm_for) */
	struct principal_pool { struct spawner *sp; struct run_pool *pool; } *pools;
	size_t n_pools;
	/* Answered runs whose jails are torn down, and the pool refilled,
	 * AFTER_ANSWER_MS after the first of them was answered (mcp_on_after):
	 * the client reads its answer before that work takes the CPUs. */
	struct spent_run { struct run *run; const struct run_env *env; } *spent;
	size_t n_spent;
	int after_fd;
	struct loop_watch w_after;
	void (*on_answered)(void *ctx);   /* mcp_server_on_answered */
	void *answered_ctx;
	struct mcp_stats stats;       /* the counters of it (mcp_server_stats fills the rest) */
	struct mcp_conn *conns;       /* every connection of the server */
	/* the features' own state, each defined in its file (mcp_features) */
	struct mcp_tasks *tasks;
	struct mcp_sessions *sessions;
	struct mcp_resources *resources;
	struct mcp_subscriptions *subscriptions;
};

/* A feature of the server (tasks, sessions, resources): its state is its
 * own, made and freed through its row; it hears of the server's moments
 * through these hooks (NULL: not interested) and of a call's through the
 * call's host or sink.  The rows are server.c's mcp_features. */
struct mcp_feature {
	const char *name;
	int (*init)(struct mcp_server *s, struct pc_err *err);
	void (*free)(struct mcp_server *s);
	/* from mcp_on_defer, once the ended calls are answered */
	void (*settle)(struct mcp_server *s);
	/* a run's result res is being made: keep what the run r left; the
	 * content blocks to add to the result (a new array), or NULL */
	json_t *(*keep)(struct mcp_call *c, const struct run_result *r, json_t *res);
	/* a session closed: what it left goes with it (mcp_scope_closed) */
	void (*scope_closed)(struct mcp_server *s, const char *session_id);
	/* owner's list of resources changed (mcp_resources_changed) */
	void (*resources_changed)(struct mcp_server *s, const char *owner);
	/* the server stops taking requests (mcp_server_quiesce): what waits
	 * for no run ends now */
	void (*quiesce)(struct mcp_server *s);
	/* it still holds something of env (a reload frees env when none does) */
	bool (*uses_env)(const struct mcp_server *s, const struct run_env *env);
	void (*stats)(const struct mcp_server *s, struct mcp_stats *st);
};
extern const struct mcp_feature *const mcp_features[];
extern const size_t mcp_n_features;

struct mcp_conn {
	struct mcp_server *srv;
	struct mcp_conn_ops ops;
	void *ctx;
	enum era era;
	enum proto proto;             /* negotiated by initialize (ERA_LEGACY) */
	enum mlog log_min;            /* set by logging/setLevel (ERA_LEGACY) */
	char *client;
	char *principal;              /* mcp_conn_set_principal */
	struct mcp_conn *prev, *next;   /* the server's connections (resources.c tells them) */
	bool resources_changed;       /* its principal's resource list changed: tell it */
};

/* ---- protocol.c */
void mcp_send(struct mcp_conn *conn, json_t *msg, const json_t *related);
/* Send a response (stolen), or add it to its batch. */
void mcp_reply(struct mcp_conn *conn, struct mcp_batch *b, json_t *msg);
void mcp_batch_maybe_send(struct mcp_batch *b);
/* A result (stolen) as revision v wants it: with resultType and the
 * server's identity in _meta from 2026-07-28 on.  A new response. */
json_t *mcp_result(enum proto v, json_t *id, json_t *result);
/* The result object itself as revision v wants it (the same fields). */
json_t *mcp_result_object(enum proto v, json_t *result);
/* Answer request r with a result (stolen) or an error. */
void mcp_answer(const struct mcp_req *r, json_t *result);
void mcp_fail(const struct mcp_req *r, int code, const char *msg, json_t *data);
/* notifications/message to the client, when it asked for this level: for
 * the session (2025 revisions only: a 2026 client hears only of its own
 * requests), or for a call. */
void mcp_log(struct mcp_conn *conn, enum mlog level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void mcp_call_log(struct mcp_call *c, enum mlog level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void mcp_list_push(struct call_list *l, struct mcp_call *c);
void mcp_list_remove(struct mcp_call *c);

/* ---- calls.c */
/* r: the request it answers (NULL: the server's own); it joins r's batch
 * with mcp_call_join_batch once it will answer later. */
struct mcp_call *mcp_call_new(struct mcp_server *s, const struct mcp_req *r, enum call_kind kind);
void mcp_call_free(struct mcp_call *c);
/* Have mcp_on_defer run from the loop: answer ended runs, start queued
 * ones, fill the pool. */
void mcp_kick(struct mcp_server *s);
/* The call answers inside batch b: b waits for it. */
void mcp_call_join_batch(struct mcp_call *c, struct mcp_batch *b);
/* The call's response (stolen); dropped when it was cancelled. */
void mcp_call_reply(struct mcp_call *c, json_t *msg);
/* A progress notification, when the client asked for them: progress in ms
 * since the call arrived, strictly increasing, below the total (none is
 * sent at the end: the response is the end). */
void mcp_call_progress(struct mcp_call *c, const char *message);
/* The run's or cell's output as it comes (run_request.on_output). */
void mcp_call_output(void *ctx, enum run_stream st, const char *buf, size_t len);
/* Whose the call is: its task's owner, else its client's principal
 * (NULL: the anonymous client, or none left). */
const char *mcp_call_owner(const struct mcp_call *c);
/* The run's wall-clock limit: its own, else the policy's (0: none). */
uint64_t mcp_call_timeout_ms(const struct mcp_call *c);
/* c's run (or cell) ended: answered from mcp_on_defer. */
void mcp_call_ended(struct mcp_call *c);
/* Kill what c is running (its packages' install, its run, or its host's
 * cell); its on_done follows. */
void mcp_call_cancel_run(struct mcp_call *c);
/* c is cancelled: a running one is killed (and answered by its end, to
 * none), any other freed. */
void mcp_call_cancel(struct mcp_call *c);
/* The call is cancelled while its packages were being had. */
void mcp_call_cancel_packages(struct mcp_call *c);
/* A session closed: every feature drops what it left. */
void mcp_scope_closed(struct mcp_server *s, const char *session_id);
/* owner's list of resources changed: every feature that tells clients hears. */
void mcp_resources_changed(struct mcp_server *s, const char *owner);
/* A run request of s's: its env's policy and jail, for client (the audit
 * log's), answered on its init's report, with the tool bridge when tools;
 * the program is the caller's to fill in. */
void mcp_run_request(struct mcp_server *s, struct run_request *req, const char *client, bool tools);
/* Start queued runs while there are slots. */
void mcp_schedule(struct mcp_server *s);
/* The ready jails of principal's runs: the server's own pool for none, a
 * pool of the principal's own (its zygote's jails) for a named one, made
 * at its first run; NULL when its runs start cold. */
struct run_pool *mcp_pool_for(struct mcp_server *s, const char *principal);
/* Fill every pool (only_empty: those with no ready jail left). */
void mcp_pools_fill(struct mcp_server *s, bool only_empty);
/* Free the named principals' pools (a reload, the server's end). */
void mcp_pools_free(struct mcp_server *s);
/* Ask the interpreter its version once (sandbox_info waits for it). */
void mcp_version_probe(struct mcp_server *s);
/* sandbox_info can be answered: the interpreter was asked (or could not
 * be) and the tools have settled. */
bool mcp_info_ready(struct mcp_server *s);
/* Answer the sandbox_info calls that waited, if they can be now. */
void mcp_answer_waiting_info(struct mcp_server *s);
/* protocol.c: answer sandbox_info call c (render.c only formats). */
void mcp_answer_sandbox_info(struct mcp_call *c);
/* The server's eventfd (runs that ended) and progress timer. */
void mcp_on_defer(struct loop_watch *w, uint32_t events, void *data);
void mcp_on_tick(struct loop_watch *w, uint32_t events, void *data);
void mcp_on_hold(struct loop_watch *w, uint32_t events, void *data);
void mcp_on_after(struct loop_watch *w, uint32_t events, void *data);
/* Tear down the answered runs' jails now (mcp_on_after's work). */
void mcp_free_spent(struct mcp_server *s);

/* ---- protocol.c: the handlers of run_python and sandbox_info */
void mcp_tool_run_python(const struct mcp_req *r, const json_t *args, const json_t *progress_token);
void mcp_tool_sandbox_info(const struct mcp_req *r, const json_t *args, const json_t *progress_token);

#endif
