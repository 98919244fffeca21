/* pycell: per-run resource limits: cgroup v2, cgroup v1, rlimits. */
#ifndef PYCELL_CGROUP_H
#define PYCELL_CGROUP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/loop.h"
#include "base/util.h"
#include "config/policy.h"
#include "config/result.h"

struct cgroup_env;   /* what this host offers, probed once */
struct cgroup_run;   /* one run's cgroup(s) */

struct cgroup_stats {
	bool oom_killed;
	uint64_t memory_peak_bytes;
	uint64_t cpu_us;
};

/* Probe once at start: own cgroup, v2 controllers, v1 hierarchies. Never
 * fails hard: an env with nothing usable means rlimits only. */
int cgroup_env_probe(struct cgroup_env **out, struct pc_err *err);
/* Its first part only: where our cgroups are, and cgroup v2.  The
 * device filter, the v1 hierarchies and the sweep of dead supervisors'
 * dirs come with the first run's cgroup_run_finish, while its jail,
 * cloned into its cgroup2 dir, builds its root (pycell run, which has one
 * run). */
int cgroup_env_probe_v2(struct cgroup_env **out, struct pc_err *err);
void cgroup_env_free(struct cgroup_env *e);
/* Take the removals still waiting on the loop off it (its watches), so
 * that freeing e inside a loop callback leaves no event of them pending:
 * cgroup_env_free then finishes them the blocking way. */
void cgroup_env_unwatch(struct cgroup_env *e);
const char *cgroup_env_mode(const struct cgroup_env *e);  /* "cgroup2" "cgroup1" "none" */

/* Create the run's cgroup(s) with the limits.  What enforces each limit,
 * and warnings for those nothing enforces, are added to r; own_userns: the
 * jail has a user namespace to count RLIMIT_NPROC in (rlimits_apply).
 * shared_memory (a session's, of a policy with sessions.shared_memory):
 * the run is no memory cgroup of its own but is in one the env's sessions
 * share, limited to shared_memory (made by the first of them, removed
 * with the env); limits.memory is then the caller's to hold
 * (cgroup_run_memory), and r says so.  0: a memory cgroup of its own.
 * Where the host's memory controller is one v1 hierarchy with others, the
 * run has its own as with 0.
 * With the env's probe half done (cgroup_env_probe_v2), only the cgroup2
 * dir is made, and cgroup_run_later says so: cgroup_run_finish does the
 * rest, and cgroup_run_move puts the jail into it. */
int cgroup_run_create(struct cgroup_env *e, const struct limits *lim, uint64_t shared_memory, bool own_userns,
		      struct cgroup_run **out, struct run_result *r, struct pc_err *err);
bool cgroup_run_later(const struct cgroup_run *c);
int cgroup_run_finish(struct cgroup_run *c, const struct limits *lim, bool own_userns, struct run_result *r,
		      struct pc_err *err);
/* The run's cgroup v2 directory, for clone3 CLONE_INTO_CGROUP, or -1. */
int cgroup_run_clone_fd(const struct cgroup_run *c);
/* Copy to fds the run's v1 "tasks" files (open for writing, owned by c);
 * returns how many.  The jail child moves itself into them with
 * cgroup_enter() before it runs anything, so the supervisor never waits
 * for a migration. */
#define CGROUP_MAX_TASKS 4
int cgroup_run_tasks_fds(const struct cgroup_run *c, int fds[CGROUP_MAX_TASKS]);
int cgroup_enter(const int *fds, int n, struct pc_err *err);

/* oom_killed, for a run in the shared group: its OOM killer acted since
 * the run's cgroup_run_mark (or creation). */
int cgroup_run_stats(struct cgroup_run *c, struct cgroup_stats *out);
/* The run is in the sessions' shared memory cgroup. */
bool cgroup_run_shared(const struct cgroup_run *c);
/* From now on, the shared group's OOM kills are the run's (a session's
 * cell begins). */
void cgroup_run_mark(struct cgroup_run *c);
/* The memory the run's processes hold, against limit: the sum of their
 * resident and swapped pages when that is at most limit, else of their
 * proportional set sizes and swapped shares (each page divided among the
 * processes mapping it, so the zygote's pages they share count a part).
 * Not the kernel's memory for them, nor tmpfs files no process maps
 * (limits.tmp and limits.workspace bound those).  The processes are those
 * listed in the run's own cgroup (one that is no memory cgroup will do). */
int cgroup_run_memory(const struct cgroup_run *c, uint64_t limit, uint64_t *bytes, struct pc_err *err);
/* The CPU time used in the run's cgroup so far (microseconds); 0 when no
 * cgroup counts it. */
uint64_t cgroup_run_cpu_us(const struct cgroup_run *c);
/* Kill everything in the run's cgroup(s). */
void cgroup_run_kill(struct cgroup_run *c);
/* Remove the cgroup(s) and free c.  When the jail's last processes are
 * still leaving, the dirs are removed on loop l once they have (v2: its
 * cgroup.events says "populated 0"; else retried by a timer), never by
 * sleeping on the loop; without a loop (l NULL), by waiting a moment. */
void cgroup_run_destroy(struct cgroup_run *c, struct loop *l);

/* For `pycell doctor`: what the probe found.  Strings belong to the env. */
enum cgroup_ctrl { CG_MEMORY = 0, CG_PIDS, CG_CPU, CG_NCTRL };
enum cgroup_v2_state {
	CG2_OK = 0,           /* memory, pids and cpu all come from cgroup v2 */
	CG2_PARTIAL,          /* some of them do */
	CG2_NOT_MOUNTED,
	CG2_NOT_WRITABLE,     /* no child cgroup can be made below ours */
	CG2_BOUND_TO_V1,      /* the controllers are v1 hierarchies (hybrid host) */
	CG2_NOT_DELEGATED,    /* our cgroup's cgroup.controllers lacks them */
	CG2_ROOT_NOT_ENABLED, /* we are in the root cgroup and it does not enable them */
	CG2_BUSY,             /* our cgroup is shared with other processes */
};
struct cgroup_info {
	const char *mode;                  /* cgroup_env_mode() */
	const char *v2_mount;              /* NULL: no cgroup2 mount */
	const char *v2_parent;             /* runs' cgroup2 dirs go here; NULL: none */
	enum cgroup_v2_state v2_state;
	const char *v2_detail;             /* why, when not CG2_OK */
	enum limit_enforcer by[CG_NCTRL];  /* CGROUP2, CGROUP1, RLIMIT (pids) or NONE */
	const char *dir[CG_NCTRL];         /* parent dir of the runs' cgroups, per controller */
	const char *v1_detail;             /* a v1 hierarchy that is mounted but unusable */
	bool memsw;                        /* v1 memory limit includes swap */
	bool bpf_device;                   /* device filter attached to every run */
	const char *bpf_detail;            /* why not */
};
void cgroup_env_info(const struct cgroup_env *e, struct cgroup_info *out);
const char *cgroup_ctrl_name(enum cgroup_ctrl c);

#endif
