/* pycell: warm starts.  A zygote is the pycell binary re-executed as a
 * helper that loads libpython, initialises one interpreter, and never runs
 * user code itself.  For each run it clones a jail with jail_clone() — the
 * same namespaces, root filesystem, limits and seccomp filter as a cold
 * run — and pid 2 of that jail runs the program in the interpreter it
 * inherited, instead of exec'ing a fresh one.  The run's pidfd and sync
 * socket travel back to the supervisor, which releases the jail and drives
 * it exactly like a cold one.  With pycell-init (jail.h, small_init) the
 * zygote waits, after each answer, until that jail's init no longer shares
 * its memory, and so for its release: the supervisor releases such a jail
 * as it reads the answer, whichever socket it reads, even while it waits
 * for another answer (spawn_warm.c, wait_reply).
 *
 * Two halves: the supervisor's is the warm spawner (spawn_warm.c, behind
 * spawner.h); the zygote's is zygote.c, with the Python it runs in
 * runtime/pycell/_warm.py.  This header is what they share: the protocol
 * of the control socket. */
#ifndef PYCELL_ZYGOTE_H
#define PYCELL_ZYGOTE_H

#include <stdint.h>
#include <sys/types.h>

#include "base/util.h"
#include "jail/cgroup.h"
#include "jail/jail.h"
#include "run/spawner.h"

/* Two control sockets, each strictly one request, one reply: ZYGOTE_FD
 * for jails a run waits for (its configuration first, answered by the
 * ready reply and the preload report), ZYGOTE_AHEAD_FD
 * for those the pool asks ahead, whose replies the supervisor reads from
 * its loop; the zygote serves ZYGOTE_FD first. */
#define ZYGOTE_FD 3
#define ZYGOTE_AHEAD_FD 4
#define WARM_FILE ".warm.json"
#define ZYGOTE_CONFIG_MAX (1 << 20)  /* its configuration, one packet */
/* After its ready reply, the zygote sends one more packet: the report of
 * python.preload, JSON {"loaded": [...], "failed": {name: error}, "ms": N} */
#define ZYGOTE_REPORT_MAX (64 << 10)

enum { Z_SPAWN = 1 };

/* The fds of a request: stdin, stdout, stderr, tool socket, the memfd
 * with the files, then the run's cgroup2 dir when cgroup_into, then
 * n_cgroup_tasks cgroup v1 tasks files. */
enum { REQ_FD_MEMFD = 4, REQ_FIXED_FDS = 5, REQ_MAX_FDS = REQ_FIXED_FDS + 1 + CGROUP_MAX_TASKS };
_Static_assert(REQ_MAX_FDS <= FDS_MAX, "a request's fds fit one packet");

struct spawn_req {
	uint32_t type;
	uint64_t files_len;   /* bytes in the memfd */
	uint32_t cgroup_into;
	uint32_t n_cgroup_tasks;
	uint32_t park;        /* a ready jail for a cell: no files (an empty memfd) */
};

struct spawn_reply {
	int32_t ok;
	int32_t pid;
	int32_t n_fds;   /* ok: the pidfd, the sync socket, and a ready jail's program socket */
	int32_t small_init; /* ok: a small init's (jail.h), which the supervisor releases as it reads this */
	struct pc_err err;
};

/* How a jail the zygote makes gets each member of struct jail_spec
 * (warm_req.c).  A member added to jail_spec without a row here fails
 * tests/unit/test_warm.c, and so does a row the request leaves out: a
 * field added for cold runs cannot silently miss warm ones. */
enum warm_carry {
	WARM_REQUEST,  /* in struct spawn_req and its fds */
	WARM_PROGRAM,  /* in the program memfd (.warm.json for a script), or with the cell (jail_deliver) */
	WARM_ZYGOTE,   /* the zygote's own, equal by construction (it serves only its own policy) */
	WARM_NEVER,    /* a run that sets it is cold: warm_request_pack refuses it */
};
struct warm_member {
	const char *name;
	size_t off, size, align;
	enum warm_carry carry;
};
extern const struct warm_member warm_members[];
extern const size_t warm_n_members;
/* Does s hold anything but zero bytes in member m? */
bool warm_member_set(const struct jail_spec *s, const struct warm_member *m);

/* The supervisor's half: the request for spec s and its *nfds fds
 * (fds[REQ_FD_MEMFD] is a new memfd, the caller's to close).  -1 with err,
 * also when s sets a WARM_NEVER member. */
int warm_request_pack(const struct jail_spec *s, struct spawn_req *req, int fds[REQ_MAX_FDS], int *nfds,
		      struct pc_err *err);
/* The zygote's half: a request of n bytes with nfds fds is well formed
 * (0), or -1 with err. */
int warm_request_check(const struct spawn_req *req, ssize_t n, int nfds, struct pc_err *err);
/* Fill s (a copy of the zygote's template) from a checked request, its
 * fds and files, the program memfd's bytes (NULL: none).  -1 with err. */
int warm_request_unpack(const struct spawn_req *req, const int *fds, const char *files, struct jail_spec *s,
			struct pc_err *err);
/* The program files of s in a new memfd of *len bytes (the format of
 * jail_unpack_files); a script's carry .warm.json too: its sys.argv,
 * environment and sys.path[0] (a cell's are set in the ready jail). */
int warm_pack_files(const struct jail_spec *s, bool script, uint64_t *len, struct pc_err *err);

/* Interpreter flags a zygote can honour: each has an environment variable
 * that Py_Initialize reads ("" for one that needs none); NULL for others. */
const char *zygote_flag_env(const char *flag);
/* The zygote's pid, for logs; 0 when sp is not a warm spawner. */
pid_t zygote_pid(const struct spawner *sp);

/* The hidden subcommand the zygote runs as (`pycell __zygote`). */
int cmd_zygote(int argc, char **argv);

#endif
