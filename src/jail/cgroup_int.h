/* pycell: cgroups, the parts shared by the files of jail/ that handle
 * them (nothing outside jail/cgroup*.c includes this):
 *   cgroup_fs.c     reading and writing cgroup files, killing what is in a
 *                   cgroup and removing it
 *   cgroup_probe.c  what this host offers: where our cgroups are (mountinfo),
 *                   v2, v1, the device filter, the sweep of dead supervisors'
 *   cgroup.c        one run's cgroups: made, entered, read, removed */
#ifndef PYCELL_CGROUP_INT_H
#define PYCELL_CGROUP_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "jail/cgroup.h"

#define RUN_PREFIX "pycell-"
#define PROBE_PREFIX "pycell-probe-"
#define SUPERVISOR_CG "pycell-supervisor"
#define CPU_PERIOD_US 100000ULL
#define CPU_MIN_QUOTA_US 1000ULL
#define CTRL_BIT(c) (1u << (c))
#define CPUACCT_BIT (1u << CG_NCTRL)      /* v1 only, for cpu time */
#define ALL_CTRLS (CTRL_BIT(CG_MEMORY) | CTRL_BIT(CG_PIDS) | CTRL_BIT(CG_CPU))
#define N_V1 (CG_NCTRL + 1)
_Static_assert(CGROUP_MAX_TASKS >= N_V1, "a tasks fd per v1 hierarchy");
#define STALE_AGE_S 60

extern const char *const ctrl_names[N_V1];   /* "memory", "pids", "cpu", "cpuacct" */
/* The file that proves a controller is usable in a child cgroup. */
extern const char *const v1_key_file[N_V1];
extern const char *const v2_key_file[CG_NCTRL];

struct self_cgroups;     /* cgroup_probe.c */

/* The probe's part in the first run, one object: the first run's dirs,
 * made by the probe, which looks into them instead of into throwaway
 * children; and, when the probe was left to finish there
 * (cgroup_env_probe_v2, so that a server's start does not wait for it),
 * what it left: the v1 part and the sweep of dead supervisors' dirs, and
 * the device filter.  The first cgroup_run_create takes the dirs; its
 * cgroup_run_finish calls cg_first_finish; cg_probe_free removes what no
 * run came to take. */
struct cg_first {
	char *name;               /* the first run's cgroup name */
	/* per dir (v2, then v1 in v1[] order): the path, the dir's fd and,
	 * for v1, its tasks file, locked from the start as every run dir is
	 * (NULL, -1: none) */
	char *dir[1 + N_V1];
	int fd[1 + N_V1];
	int tasks[N_V1];
	struct self_cgroups *rest;   /* where our cgroups are: the v1 part and sweep to do (NULL: done) */
	bool bpf;                    /* the device filter is to load, on the first run's v2 dir */
};

struct hier {            /* one v1 hierarchy in use */
	char *dir;           /* our cgroup in it: run cgroups go below */
	unsigned ctrls;      /* CTRL_BIT()s and CPUACCT_BIT used from it */
};

struct cgroup_env {
	char *v2_mount;
	char *v2_parent;     /* run cgroup2 dirs go here; NULL: none */
	unsigned v2_ctrls;   /* controllers enforced through v2 */
	enum cgroup_v2_state v2_state;
	char *v2_detail;
	bool v2_swap, v2_peak, v2_kill;

	struct hier v1[N_V1];
	int n_v1;
	bool memsw;          /* v1 memory.memsw.limit_in_bytes exists */
	bool oom_kill_count; /* v1 memory.oom_control has "oom_kill" (4.13+) */
	char *v1_detail;     /* the first v1 hierarchy that could not be used, and why */

	int bpf_fd;          /* device filter program, -1: none */
	char *bpf_detail;

	struct cg_first first;

	/* The memory cgroup that sessions share (a policy's
	 * sessions.shared_memory; cgroup.c), made at the first such session
	 * and removed with the env: its name, its v2 dir (the sessions' v2
	 * dirs go below it, its subtree_control without memory) and v1
	 * memory dir, each open and locked as a run's are, and the v1 dir's
	 * tasks file, which the sessions' jails enter (dups of it). */
	struct cg_shared {
		char *name;
		char *v2, *v1;
		int v2_fd, v1_fd, v1_tasks;
	} shared;

	char **stale;        /* run dirs that could not be removed yet */
	size_t n_stale;
	struct cgroup_run *leaving;  /* runs whose dirs are removed on the loop */
};

/* ---- cgroup_probe.c (a leaf: it calls only cgroup_fs.c and cgroup_bpf.c) */
/* Finish what the probe left to the first run: load the device filter and
 * attach it to v2_fd, that run's v2 dir (-1: none; its jail may be in it
 * already; a failure leaves the filter off, bpf_detail), then the v1 part
 * and the sweep; first.name goes (the run has its own copy).  Called by
 * that run's cgroup_run_finish; again (another run's), it finds nothing
 * left to do. */
void cg_first_finish(struct cgroup_env *e, int v2_fd);
/* Free what the probe made: the first run's dirs no run took, the stale
 * dirs (retried a while), the device filter, the paths; and e. */
void cg_probe_free(struct cgroup_env *e);
enum limit_enforcer cg_ctrl_enforcer(const struct cgroup_env *e, int c, const char **dir);

/* ---- cgroup_fs.c */
/* The name of the next run's cgroups, pycell-<pid>-<n>: numbered per
 * process (the envs of a server's policies share the parent cgroup). */
char *cg_next_run_name(void);
/* Path forms for the probe, which looks at many dirs once */
char *cg_path_join(const char *a, const char *b);
bool cg_has(const char *dir, const char *file);
int cg_read(const char *dir, const char *file, char **out);
int cg_write(const char *dir, const char *file, const char *val);
int cg_read_key(const char *dir, const char *file, const char *key, uint64_t *out);
unsigned cg_parse_ctrls(const char *s, const char *seps);
unsigned cg_read_ctrls(const char *dir, const char *file);
char *cg_ctrl_list(unsigned bits);
int cg_make_dir(const char *path, struct pc_err *err);
/* The same relative to a directory fd opened once (a run's dirs). */
int cg_read_at(int dirfd, const char *file, char **out);
int cg_set_at(int dirfd, const char *dir, const char *file, const char *val, struct pc_err *err);
int cg_set_u64_at(int dirfd, const char *dir, const char *file, uint64_t v, struct pc_err *err);
int cg_read_u64_at(int dirfd, const char *file, uint64_t *out);
int cg_read_key_at(int dirfd, const char *file, const char *key, uint64_t *out);
/* SIGKILL every process listed in dir/cgroup.procs, once: pids pinned with
 * pidfds and checked again, so a reused pid is never signalled. */
void cg_kill_listed(const char *dir);
/* cgroup.kill where v2 has it, else cg_kill_listed. */
void cg_kill_dir(const struct cgroup_env *e, const char *dir, bool v2);
/* rmdir, waiting up to ~200 ms for the last processes to leave (kill
 * them after ~10 ms); what is still there then goes on e's stale list
 * (retried at the next run and at exit).  Frees path.  Never on the
 * event loop: at start (the sweep) and at exit. */
void cg_remove_dir_wait(struct cgroup_env *e, char *path, bool v2);
void cg_retry_stale(struct cgroup_env *e);


#endif
