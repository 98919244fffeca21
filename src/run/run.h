/* pycell: one run, from program text to result, driven by the event loop.
 * The run object owns everything the run uses: the jail's processes, its
 * pipes, the tool socket, the cgroup, the timer. */
#ifndef PYCELL_RUN_H
#define PYCELL_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "base/loop.h"
#include "config/policy.h"
#include "config/result.h"
#include "run/program.h"

struct run;
struct seccomp_filter;
struct cgroup_env;
struct spawner;

enum run_stream { RUN_STDOUT = 1, RUN_STDERR = 2 };

struct run_request {
	const struct policy *policy;          /* borrowed, must outlive the run */
	const struct seccomp_filter *filter;  /* compiled for policy; NULL = none */
	struct cgroup_env *cgroups;           /* from cgroup_env_probe; NULL = rlimits only */
	enum run_mode mode;
	const char *code;                     /* program text */
	size_t code_len;
	const char *prog_name;                /* file name shown in tracebacks; "main.py" */
	char *const *args;                    /* sys.argv[1:], NULL-terminated or NULL */
	const char *variables_json;           /* RUN_MODE_CELL: JSON object of globals */
	const char *files_json;               /* RUN_MODE_CELL: JSON array of files for /workspace */
	/* RUN_MODE_CELL: the images the cell shows and the files it changes in
	 * /workspace come back (the result's images and files) */
	bool outputs;

	/* stdin of the program: a buffer, or an fd read until EOF (not closed) */
	const char *stdin_data;
	size_t stdin_len;
	int stdin_fd;                         /* -1 for none */

	const char *runtime_dir;              /* host dir with the pycell module */
	/* A set of packages (packages.h: packages_get's dir; the caller holds
	 * it until the run is freed), bound read-only at /run/pycell/packages;
	 * the run starts cold.  NULL: none. */
	const char *packages_dir;
	/* matplotlib's font list (fonts.h): the directory it is in when built,
	 * bound read-only if it has one; NULL: none. */
	const char *fonts_dir;

	/* Optional: called for every chunk of output read; the result keeps
	 * its first kept bytes as they are (the head of the stream; a
	 * session's keeps none: its cells do). */
	void (*on_output)(void *ctx, enum run_stream s, const char *buf, size_t len, size_t kept);
	/* Called once when the result is final. */
	void (*on_done)(struct run *r, void *ctx);
	void *ctx;
	/* Optional: a JSON-RPC message from the jail on fd 3 that the run does
	 * not handle itself (pycell/result is handled), with tool_ctx.  NULL:
	 * such messages are answered with a "no tools" error when they are
	 * requests. */
	void (*on_tool_message)(struct run *r, json_t *msg, void *tool_ctx);
	/* Optional: called once with tool_ctx for every started run: when the
	 * result is final, just before on_done (so it may add tool_calls), or
	 * from run_free for a run freed before it finished. */
	void (*on_tool_done)(struct run *r, void *tool_ctx);
	void *tool_ctx;                       /* for the two above (bridge.h) */
	/* How to start the jail (spawner.h): when it serves the policy; NULL
	 * or not serving = a cold start, and one that fails falls back to
	 * cold with a warning in the result. */
	struct spawner *spawner;
	/* Per-run overrides; 0 = the policy's. May only tighten. */
	uint64_t timeout_ms;
	uint64_t output_bytes;                /* kept per stream (head and tail) */
	/* Who asked for the run (an HTTP token's name), for the audit log;
	 * NULL: not said.  Read by bridge_attach, not kept. */
	const char *client;
	/* The result is final once the jail's init has reported how python
	 * ended and the output pipes are closed, before init itself has
	 * exited (the kernel's teardown of its namespaces): run_settle waits
	 * for that, and run_free leaves it to the loop.  For callers that
	 * answer before the teardown: the servers, and pycell run, which
	 * hands the teardown to a child. */
	bool finish_on_report;
	/* A session's jail (session.h): no wall-clock limit of its own (the
	 * session times its cells), and its output is not kept in the result:
	 * every byte goes to on_output. */
	bool session;
	/* The env whose cgroups are not probed yet (run_env.probe_later):
	 * this run probes them while its jail builds its root. */
	struct run_env *probe_env;
};

/* What every run of one policy shares, set up once: the policy, its
 * compiled seccomp filter, the probed cgroup support, the runtime dir. */
struct run_env {
	struct policy policy;
	struct seccomp_filter *filter;
	struct cgroup_env *cgroups;
	char *runtime_dir;
	char *fonts_dir;           /* fonts_dir_for(policy), by run_env_prepare */
	struct spawner *warm;      /* warm starts, after run_env_warm(); NULL: cold */
	/* A zygote per principal (run_env_warm_for): its runs share the
	 * zygote's string hash secret, so no two principals share one. */
	struct warm_units *units;
	/* Set before run_env_prepare: the cgroups are probed by the first run
	 * (run_request.probe_env), while its jail builds its root, instead of
	 * before it (pycell run, whose one run waits for both). */
	bool probe_later;
};
/* Load the policy (NULL = "default"), compile its filter, probe cgroups. */
int run_env_init(struct run_env *env, const char *policy_name, struct pc_err *err);
/* The two halves of run_env_init, for callers that change env->policy in
 * between (CLI overrides): load the policy; then compile and probe. */
int run_env_load(struct run_env *env, const char *policy_name, struct pc_err *err);
int run_env_prepare(struct run_env *env, struct pc_err *err);
void run_env_free(struct run_env *env);
/* Before run_env_free from a callback of the loop the env's runs used
 * (the loop lives on): nothing of the env stays watched by it. */
void run_env_unwatch(struct run_env *env);
/* What the env's zygote imported of python.preload: {"loaded": [names],
 * "failed": {name: error}}, both empty with no zygote (cold starts, the
 * wasm backend), a new reference. */
json_t *run_env_preload(const struct run_env *env);
/* Turn on warm starts for this env's policy (a warm spawner: zygote.h).
 * On failure the env stays on cold starts and err says why. */
int run_env_warm(struct run_env *env, struct pc_err *err);
/* Fill the policy/filter/cgroups/runtime fields of req from env. */
void run_request_from_env(struct run_request *req, const struct run_env *env);
/* The spawner of principal's runs: env->warm for no principal (NULL: the
 * anonymous client, stdio's connection) and for a backend with no zygote
 * (wasm: its ready jails share nothing); a zygote of the principal's own
 * for a named one, started at its first run (about 0.1 s) and kept with
 * the env, at most RUN_ENV_WARM_PRINCIPALS of them.  NULL (cold, each run
 * a fresh interpreter) without warm starts, past that bound, or when the
 * zygote could not be started (logged). */
#define RUN_ENV_WARM_PRINCIPALS 8
struct spawner *run_env_warm_for(const struct run_env *env, const char *principal);

/* Start a run.  Returns -1 only when nothing was started (out of memory or
 * fds); a jail that fails to build ends as a RUN_SETUP_FAILED result
 * delivered through on_done, like any other end. */
int run_start(struct loop *l, const struct run_request *req, struct run **out, struct pc_err *err);
/* Warm pools: a run whose jail is made ahead of its request, from the
 * zygote of req (which must serve req's policy), in RUN_MODE_CELL.  The
 * jail is asked for and the call returns; parked(r, err, ctx) is called
 * once from the loop when it has come and been released (err NULL: its
 * python then waits for a cell), or could not be made (free r).  Nothing
 * else of it is watched until run_start_parked.  NULL (err set) when it
 * could not be asked for.  Each parked run serves exactly one request;
 * one freed before parked was called is cancelled. */
typedef void (*run_parked_fn)(struct run *r, const struct pc_err *err, void *ctx);
struct run *run_park(struct loop *l, const struct run_request *req, run_parked_fn parked, void *ctx,
		     struct pc_err *err);
/* Is the parked run's jail still there (its init alive)? */
bool run_parked_alive(const struct run *r);
/* Start req (same policy pointer as the park request's, RUN_MODE_CELL) on
 * a parked run.  On -1 nothing ran: free the run and start req otherwise. */
int run_start_parked(struct run *r, const struct run_request *req, struct pc_err *err);
/* Kill the run's jail; the result's status becomes RUN_KILLED (unless it had
 * already ended).  on_done still fires. */
void run_cancel(struct run *r);
bool run_done(const struct run *r);
const struct run_result *run_result(const struct run *r);
/* Send one JSON-RPC message to the jail over fd 3 (one packet). */
int run_tool_send(struct run *r, json_t *msg);
/* The same, with up to FDS_MAX fds (SCM_RIGHTS, send_fds): the jail gets
 * copies; the caller keeps its own. */
int run_tool_send_fds(struct run *r, json_t *msg, const int *fds, int n_fds);
/* What the run does with a message from the jail that no one handles
 * (no on_tool_message): a request is answered "no tools". */
void run_tool_unhandled(struct run *r, const json_t *msg);
/* Send sig to the jail's init, which forwards SIGINT, SIGTERM and a few
 * more to python.  -1 when the jail is gone. */
int run_signal(struct run *r, int sig);
/* The result being built, for the tool bridge to add tool_calls. */
struct run_result *run_result_mut(struct run *r);
/* An egress run's counts so far (egress.h); false for other runs. */
bool run_egress_counts(const struct run *r, uint64_t *connections, uint64_t *dns_queries);
/* A session's jail in the sessions' shared memory cgroup (cgroup.h):
 * the memory its processes hold (cgroup_run_memory), which the session
 * holds to limits.memory, and the mark from which the group's OOM kills
 * are its own.  run_memory_shared false: the kernel holds it. */
bool run_memory_shared(const struct run *r);
int run_memory(const struct run *r, uint64_t limit, uint64_t *bytes, struct pc_err *err);
void run_memory_mark(struct run *r);
/* Wait up to timeout_ms for a finished run's jail to exit on its own
 * (finish_on_report), in this process or in a child forked after the
 * run finished: the jail is then gone whoever reaps it. */
void run_settle(struct run *r, int timeout_ms);
/* Free the run; kills and reaps anything still alive.  A run that
 * finished on its init's report (finish_on_report) is not waited for:
 * its jail is killed and reaped from the loop. */
void run_free(struct run *r);
/* Wait for the jails run_free left to the loop (before the loop goes). */
void run_reap_pending(void);

#endif
