/* pycell: one run, the struct its two files share: run.c drives it on the
 * event loop (its callbacks and its end), run_jail.c makes its jail. */
#ifndef PYCELL_RUN_INT_H
#define PYCELL_RUN_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "base/loop.h"
#include "jail/jail.h"
#include "run/outputs.h"
#include "run/program.h"
#include "run/run.h"

#define READ_CHUNK (64 << 10)
#define TOOL_MSG_MAX (4 << 20)
#define TOOL_SOCKET_BUFFER ((1 << 20) + (128 << 10))

struct out_stream {
	struct loop_watch w;
	int fd;
	enum run_stream id;
	struct output_buf *buf;
};


struct run {
	struct loop *loop;
	struct run_request req;
	struct run_result result;
	struct jail jail;
	struct spawner *spawner;  /* what made the jail (deliver: a ready jail's cell) */
	/* a parked run's jail, asked of req.spawner and not come yet */
	struct spawn_ahead *ahead;
	run_parked_fn parked;
	void *parked_ctx;
	struct cgroup_run *cgroup;
	struct egress *egress;    /* an egress run's network; NULL for others */
	uint64_t cpu_base_us;  /* the cgroup's CPU time before the run (ready jails) */
	uint64_t t0;
	uint64_t timeout_ms;

	struct out_stream out, err;
	struct loop_watch w_sync, w_pidfd, w_timer, w_stdin, w_stdin_src, w_tool;
	int stdin_fd;          /* write end of the program's stdin pipe */
	const char *stdin_pos; /* buffer input still to write */
	size_t stdin_left;
	char *src_buf;         /* streaming input read from req.stdin_fd */
	size_t src_len, src_off;
	bool src_eof, src_polled;
	int timer_fd;
	int tool_fd;

	char **argv, **envp;
	bool spawned, reaped, got_exit, got_error, timed_out, cancelled, done;
	bool tool_done;        /* on_tool_done has been called */
	bool bare;             /* a wasm jail without namespaces (jail_spec.bare) */
	struct blob_rx blob;
	struct jail_msg exit_msg;
};

/* run_jail.c: everything up to a jail that builds itself; -1 with
 * setup_err when it could not be made. */
int run_spawn(struct run *r, bool park, struct pc_err *setup_err);
/* The program a request describes. */
struct program program_of(const struct run_request *q);

#endif
