/* pycell: a session: one jail whose python stays alive and runs cells
 * one at a time, each with its own result and time limit.  Globals,
 * imports and /workspace persist from one cell to the next; the jail's
 * limits (memory, pids, CPU) hold for the whole session.
 *
 * The jail is a run (run.h) whose cell is the session loop of the runtime
 * (runtime/pycell/_session.py), started cold or by the zygote like any
 * run (not from the pool of ready jails: session_open).  Cells travel to
 * it over the tool socket (pycell/cell) and each ends with
 * pycell/cell_end after python has flushed its output, which is then
 * drained from the pipes: what a cell printed is its own.  A cell's
 * timeout sends SIGINT (KeyboardInterrupt in the cell); a cell that is
 * still running SESSION_GRACE_MS later has the session killed. */
#ifndef PYCELL_SESSION_H
#define PYCELL_SESSION_H

#include <stdbool.h>
#include <stdint.h>

#include "run/run.h"

#define SESSION_GRACE_MS 2000
/* How often a running cell's memory is read when the supervisor holds a
 * session to limits.memory (a policy's sessions.shared_memory) */
#define SESSION_MEMORY_TICK_MS 100
/* one cell's message to the jail, code and files as JSON (the tool
 * socket's packets are at most 4 MiB, and the runtime reads that much) */
#define SESSION_CELL_MAX (4 << 20)

struct session;

/* The callbacks come from the loop, inside the run's: none may free the
 * session (free it later, from the loop).
 * ready: the jail came and its python waits for cells (err NULL), or it
 * could not be made (err: why). */
typedef void (*session_ready_fn)(struct session *s, const struct pc_err *err, void *ctx);
/* The jail ended (python exited, was killed, hit a limit) with no cell of
 * its own running; the session can run no more cells. */
typedef void (*session_gone_fn)(struct session *s, void *ctx);
/* A cell ended: its result, which the callee owns (result_free). */
typedef void (*session_cell_fn)(struct session *s, struct run_result *res, void *ctx);

struct session_cell {
	const char *code;
	size_t code_len;
	const char *variables_json;   /* JSON object; NULL: none */
	const char *files_json;       /* JSON array of {path, text|base64}; NULL: none */
	uint64_t timeout_ms;          /* 0: none */
	uint64_t output_bytes;        /* kept per stream in its result; 0: the policy's */
	/* optional: the cell's output as it comes */
	void (*on_output)(void *ctx, enum run_stream st, const char *buf, size_t len);
	session_cell_fn done;
	void *ctx;
};

/* Start a session's jail as req (its policy, filter, cgroups, tool bridge;
 * its code, mode, output and timeout are the session's): a jail of its
 * own, not a ready one of the pool (session.c says why).  NULL (err set)
 * when nothing could be started. */
struct session *session_open(struct loop *l, const struct run_request *req,
			     session_ready_fn ready, session_gone_fn gone, void *ctx, struct pc_err *err);
/* From a cell's done callback: its whole output (to the policy's cap),
 * when the cell's own cap was smaller; false when there is none. */
bool session_take_whole_output(struct session *s, struct output_buf *out, struct output_buf *err);
/* Run one cell; -1 (err) when the session is not ready, busy or gone. */
int session_run_cell(struct session *s, const struct session_cell *cell, struct pc_err *err);
/* A session's state (its globals and /workspace) as bytes its python
 * makes or reads (runtime/pycell/_snapshot.py) while no cell runs, carried
 * through a pipe between the jail and a file of the caller's.  done is
 * called once, from the loop: err NULL and the runtime's report (borrowed:
 * {names, not_kept, bytes}), or err (why; the report when python sent
 * one).  A transfer that takes longer than ms is interrupted, and the
 * session killed SESSION_GRACE_MS later if python does not stop. */
typedef void (*session_state_fn)(struct session *s, const struct pc_err *err, const json_t *report, void *ctx);
/* Write the state to fd (a file, from its start), at most max_bytes;
 * -1 (err) when the session is not ready, busy or gone. */
int session_snapshot(struct session *s, int fd, uint64_t max_bytes, uint64_t ms, session_state_fn done, void *ctx,
		     struct pc_err *err);
/* Read the state in file fd (from its start to its end) into the
 * session's python, which takes it as its own. */
int session_restore(struct session *s, int fd, uint64_t ms, session_state_fn done, void *ctx, struct pc_err *err);
/* A cell or a state transfer is running. */
bool session_busy(const struct session *s);
/* The jail is gone, or going: no more cells. */
bool session_ended(const struct session *s);
/* It held more than its memory limit (a policy's sessions.shared_memory)
 * and is being killed; its gone callback is still to come. */
bool session_over_memory(const struct session *s);
/* Interrupt the running cell as its timeout would (status killed), and
 * kill the session if it does not stop within SESSION_GRACE_MS. */
void session_cancel_cell(struct session *s);
/* Kill the jail.  A running cell still ends through its callback (killed),
 * and gone is called, both from the loop. */
void session_kill(struct session *s);
/* The jail's run (its result holds the limits that enforce the session). */
struct run *session_run(struct session *s);
/* Kill and free; no callback is called any more. */
void session_free(struct session *s);

#endif
