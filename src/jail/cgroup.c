/* pycell: one run's cgroups: made below ours in each hierarchy pycell
 * uses, with the policy's limits written relative to directory fds opened
 * once; entered by the jail child; read for the result; killed; removed,
 * on the event loop when the jail's last processes are still leaving
 * (cgroup_int.h says where the rest is). */
#include "config.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/timerfd.h>

#include "base/fault.h"
#include "base/log.h"
#include "jail/cgroup_bpf.h"
#include "jail/cgroup_int.h"
#include "jail/rlimits.h"

struct cgroup_run {
	struct cgroup_env *env;  /* NULL: rlimits only */
	char *name;
	char *v2;
	int v2_fd;               /* the v2 dir, opened once: every file of it is relative */
	char *v1[N_V1];          /* parallel to env->v1 */
	int v1_fd[N_V1];
	/* The v1 "tasks" files (and v2's when there are v1 ones), which the
	 * jail child writes "0" to.  These and v2_fd hold a flock from
	 * creation to removal: the mark of a live owner that the sweep of
	 * dead supervisors' leftovers looks for (cgroup_probe.c). */
	int tasks[CGROUP_MAX_TASKS];
	int n_tasks;
	unsigned first_v1;       /* v1 dirs (bits by index) the probe made */
	bool later;              /* the v1 part is cgroup_run_finish's */
	/* A session of a policy with sessions.shared_memory: its memory is
	 * the env's shared group's (its limit), not a cgroup of its own */
	uint64_t shared_bytes;
	bool shared;             /* it is in the shared group */
	uint64_t oom_mark;       /* the shared group's OOM kills at cgroup_run_mark */

	/* Removal on the loop, while the jail's last processes leave. */
	struct loop *loop;
	struct cgroup_run *next_leaving;
	int events_fd;           /* v2 cgroup.events: "populated 0" */
	int timer_fd;            /* retries: v1 has no events, and a belt for v2 */
	struct loop_watch w_events, w_timer;
	unsigned retries;
};

/* ------------------------------------------------------------------- runs */

static int open_dir(const char *path, struct pc_err *err)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return pc_syserr(err, "cgroup", "open %s", path);
	return fd;
}

/* One of a run's cgroup directories (a fault site for the tests). */
static int run_mkdir(const char *dir, struct pc_err *err)
{
	if (fault_at("cgroup"))
		return pc_fail(err, ENOSPC, "cgroup", "mkdir %s: %s (injected fault)", dir, strerror(ENOSPC));
	return cg_make_dir(dir, err);
}

/* The probe's dir for slot (0: v2, 1 + i: v1[i]) when it is this one:
 * its fd (locked), taken; else -1. */
static int take_first(struct cgroup_env *e, int slot, const char *dir)
{
	int fd = e->first.fd[slot];
	if (!e->first.dir[slot] || strcmp(e->first.dir[slot], dir) != 0)
		return -1;
	free(e->first.dir[slot]);
	e->first.dir[slot] = NULL;
	e->first.fd[slot] = -1;
	return fd;
}

/* ------------------------------------------- the sessions' memory cgroup */

/* Sessions of a policy with sessions.shared_memory share one memory cgroup
 * rather than having one each.  The kernel keeps, in every memory cgroup, a
 * slot for each shrinker that is aware of memory cgroups, and each file
 * system a jail mounts registers one: n jails with a memory cgroup each
 * cost about 5n^2/64 KiB (RESULTS-data.md), past this machine's memory long
 * before 10,000 idle sessions.  The group's limit bounds the sessions
 * together, the OOM killer taking the largest process in it; the
 * supervisor holds each session to limits.memory (cgroup_run_memory,
 * session.c).  Its dirs are named as a run's and locked as a run's are, so
 * the sweep of a dead supervisor's leftovers takes them too (cgroup_probe.c);
 * they go with the env (cgroup_env_free). */

static const char *shared_name(struct cgroup_env *e)
{
	if (!e->shared.name)
		e->shared.name = cg_next_run_name();
	return e->shared.name;
}

static void shared_drop(char **dir, int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
	if (*dir)
		rmdir(*dir);
	free(steal_ptr(dir));
}

/* v2: the sessions' dirs go below this one, which has the memory
 * controller and gives its children only the others: they are no memory
 * cgroups, and what they use is charged here. */
static int shared_v2(struct cgroup_env *e, uint64_t bytes, struct pc_err *err)
{
	struct cg_shared *sh = &e->shared;
	char ctrls[32] = "";
	if (sh->v2_fd >= 0)
		return 0;
	sh->v2 = cg_path_join(e->v2_parent, shared_name(e));
	if (run_mkdir(sh->v2, err) < 0) {
		free(steal_ptr(&sh->v2));
		return -1;
	}
	if ((sh->v2_fd = open_dir(sh->v2, err)) < 0)
		goto fail;
	if (flock(sh->v2_fd, LOCK_EX) < 0) {
		pc_syserr(err, "cgroup", "lock %s", sh->v2);
		goto fail;
	}
	if (cg_set_u64_at(sh->v2_fd, sh->v2, "memory.max", bytes, err) < 0 ||
	    (e->v2_swap && cg_set_at(sh->v2_fd, sh->v2, "memory.swap.max", "0", err) < 0))
		goto fail;
	for (int c = 0; c < CG_NCTRL; c++)
		if (c != CG_MEMORY && (e->v2_ctrls & CTRL_BIT(c)))
			snprintf(ctrls + strlen(ctrls), sizeof(ctrls) - strlen(ctrls), "%s+%s", ctrls[0] ? " " : "",
				 ctrl_names[c]);
	if (ctrls[0] && cg_set_at(sh->v2_fd, sh->v2, "cgroup.subtree_control", ctrls, err) < 0)
		goto fail;
	log_debug("cgroup: sessions share %s (memory.max %llu)", sh->v2, (unsigned long long)bytes);
	return 0;
fail:
	shared_drop(&sh->v2, &sh->v2_fd);
	return -1;
}

/* v1: the memory hierarchy's dir that the sessions' jails enter (through
 * dups of its tasks file) instead of one of their own. */
static int shared_v1(struct cgroup_env *e, int i, uint64_t bytes, struct pc_err *err)
{
	struct cg_shared *sh = &e->shared;
	if (sh->v1_tasks >= 0)
		return 0;
	sh->v1 = cg_path_join(e->v1[i].dir, shared_name(e));
	if (run_mkdir(sh->v1, err) < 0) {
		free(steal_ptr(&sh->v1));
		return -1;
	}
	if ((sh->v1_fd = open_dir(sh->v1, err)) < 0)
		goto fail;
	if ((sh->v1_tasks = openat(sh->v1_fd, "tasks", O_WRONLY | O_CLOEXEC)) < 0) {
		pc_syserr(err, "cgroup", "open %s/tasks", sh->v1);
		goto fail;
	}
	if (flock(sh->v1_tasks, LOCK_EX) < 0) {
		pc_syserr(err, "cgroup", "lock %s/tasks", sh->v1);
		goto fail;
	}
	if (cg_set_u64_at(sh->v1_fd, sh->v1, "memory.limit_in_bytes", bytes, err) < 0 ||
	    (e->memsw && cg_set_u64_at(sh->v1_fd, sh->v1, "memory.memsw.limit_in_bytes", bytes, err) < 0))
		goto fail;
	log_debug("cgroup: sessions share %s (memory.limit_in_bytes %llu)", sh->v1, (unsigned long long)bytes);
	return 0;
fail:
	if (sh->v1_tasks >= 0)
		close(sh->v1_tasks);
	sh->v1_tasks = -1;
	shared_drop(&sh->v1, &sh->v1_fd);
	return -1;
}

/* With the env, after every run's dirs: the sessions' dirs are gone. */
static void shared_free(struct cgroup_env *e)
{
	struct cg_shared *sh = &e->shared;
	if (sh->v1_tasks >= 0)
		close(sh->v1_tasks);
	if (sh->v1_fd >= 0)
		close(sh->v1_fd);
	if (sh->v2_fd >= 0)
		close(sh->v2_fd);
	cg_remove_dir_wait(e, steal_ptr(&sh->v1), false);
	cg_remove_dir_wait(e, steal_ptr(&sh->v2), true);
	free(steal_ptr(&sh->name));
}

/* The shared group's OOM kills so far (0: none, or no group). */
static uint64_t shared_oom_kills(const struct cgroup_env *e)
{
	uint64_t v = 0;
	if (e->shared.v2_fd >= 0)
		cg_read_key_at(e->shared.v2_fd, "memory.events", "oom_kill", &v);
	else if (e->shared.v1_fd >= 0)
		cg_read_key_at(e->shared.v1_fd, "memory.oom_control", "oom_kill", &v);
	return v;
}

/* ------------------------------------------------------------ run dirs */

static int run_setup_v2(struct cgroup_run *c, const struct limits *lim, struct pc_err *err)
{
	struct cgroup_env *e = c->env;
	bool first;
	if (c->shared_bytes && (e->v2_ctrls & CTRL_BIT(CG_MEMORY))) {
		if (shared_v2(e, c->shared_bytes, err) < 0)
			return -1;
		c->shared = true;
	}
	c->v2 = cg_path_join(c->shared ? e->shared.v2 : e->v2_parent, c->name);
	/* the probe's: made, locked, its device filter attached */
	first = (c->v2_fd = take_first(e, 0, c->v2)) >= 0;
	if (!first && run_mkdir(c->v2, err) < 0) {
		free(c->v2);
		c->v2 = NULL;
		return -1;
	}
	if (!first && (c->v2_fd = open_dir(c->v2, err)) < 0)
		return -1;
	if (!first && flock(c->v2_fd, LOCK_EX) < 0)
		return pc_syserr(err, "cgroup", "lock %s", c->v2);
	/* memory.oom.group stays 0: the OOM killer takes the biggest task
	 * (python), and the jail's init lives on to report how it ended. */
	if ((e->v2_ctrls & CTRL_BIT(CG_MEMORY)) && !c->shared && lim->memory_bytes) {
		if (cg_set_u64_at(c->v2_fd, c->v2, "memory.max", lim->memory_bytes, err) < 0)
			return -1;
		if (e->v2_swap && cg_set_at(c->v2_fd, c->v2, "memory.swap.max", "0", err) < 0)
			return -1;
	}
	if ((e->v2_ctrls & CTRL_BIT(CG_PIDS)) && lim->pids &&
	    cg_set_u64_at(c->v2_fd, c->v2, "pids.max", lim->pids, err) < 0)
		return -1;
	if ((e->v2_ctrls & CTRL_BIT(CG_CPU)) && lim->cpu_millis) {
		char buf[48];
		unsigned long long q = lim->cpu_millis * CPU_PERIOD_US / 1000;
		snprintf(buf, sizeof(buf), "%llu %llu", q < CPU_MIN_QUOTA_US ? CPU_MIN_QUOTA_US : q, CPU_PERIOD_US);
		if (cg_set_at(c->v2_fd, c->v2, "cpu.max", buf, err) < 0)
			return -1;
	}
	if (!first && e->bpf_fd >= 0 && cgroup_bpf_device_attach(e->bpf_fd, c->v2_fd, err) < 0)
		return -1;
	return 0;
}

static int run_setup_v1(struct cgroup_run *c, int i, const struct limits *lim, struct pc_err *err)
{
	struct cgroup_env *e = c->env;
	const struct hier *h = &e->v1[i];
	char *d;
	int fd;
	/* a hierarchy of memory alone: one with others too would share them */
	if (c->shared_bytes && h->ctrls == CTRL_BIT(CG_MEMORY)) {
		if (shared_v1(e, i, c->shared_bytes, err) < 0)
			return -1;
		if ((fd = fcntl(e->shared.v1_tasks, F_DUPFD_CLOEXEC, 0)) < 0)
			return pc_syserr(err, "cgroup", "dup %s/tasks", e->shared.v1);
		c->tasks[c->n_tasks++] = fd;
		c->shared = true;
		return 0;
	}
	d = c->v1[i] = cg_path_join(h->dir, c->name);
	fd = take_first(e, 1 + i, d);
	if (fd >= 0) {
		/* the probe's, its tasks file locked */
		c->v1_fd[i] = fd;
		c->tasks[c->n_tasks++] = e->first.tasks[i];
		e->first.tasks[i] = -1;
		c->first_v1 |= 1u << i;
	} else if (run_mkdir(d, err) < 0) {
		free(d);
		c->v1[i] = NULL;
		return -1;
	}
	if (fd < 0 && (fd = c->v1_fd[i] = open_dir(d, err)) < 0)
		return -1;
	if ((h->ctrls & CTRL_BIT(CG_MEMORY)) && lim->memory_bytes) {
		/* limit_in_bytes first: memsw may never be below it */
		if (cg_set_u64_at(fd, d, "memory.limit_in_bytes", lim->memory_bytes, err) < 0)
			return -1;
		if (e->memsw && cg_set_u64_at(fd, d, "memory.memsw.limit_in_bytes", lim->memory_bytes, err) < 0)
			return -1;
	}
	if ((h->ctrls & CTRL_BIT(CG_PIDS)) && lim->pids && cg_set_u64_at(fd, d, "pids.max", lim->pids, err) < 0)
		return -1;
	if ((h->ctrls & CTRL_BIT(CG_CPU)) && lim->cpu_millis) {
		unsigned long long q = lim->cpu_millis * CPU_PERIOD_US / 1000;
		if (cg_set_u64_at(fd, d, "cpu.cfs_period_us", CPU_PERIOD_US, err) < 0 ||
		    cg_set_u64_at(fd, d, "cpu.cfs_quota_us", q < CPU_MIN_QUOTA_US ? CPU_MIN_QUOTA_US : q, err) < 0)
			return -1;
	}
	return 0;
}

static void report_limits(const struct cgroup_run *run, const struct limits *lim, bool own_userns,
			  struct run_result *r)
{
	const struct cgroup_env *e = run->env;
	static const char *const names[CG_NCTRL] = { "memory_bytes", "pids", "cpu_millis" };
	const uint64_t asked[CG_NCTRL] = { lim->memory_bytes, lim->pids, lim->cpu_millis };
	static const char *const units[CG_NCTRL] = { " bytes", " tasks", "/1000 of a core" };
	for (int c = 0; c < CG_NCTRL; c++) {
		const char *dir;
		enum limit_enforcer by;
		if (!asked[c])
			continue;
		by = cg_ctrl_enforcer(e, c, &dir);
		if (by == ENF_NONE && c == CG_PIDS && own_userns && rlimit_nproc_per_userns())
			by = ENF_RLIMIT;
		if (c == CG_MEMORY && run->shared) {
			/* the group's limit is the kernel's, the session's ours */
			result_add_limit(r, "shared_memory_bytes", run->shared_bytes, by);
			by = ENF_SUPERVISOR;
		}
		result_add_limit(r, names[c], asked[c], by);
		if (by == ENF_NONE)
			result_add_warning(r, "%s limit of %llu%s is not enforced: no usable %s cgroup controller "
					   "(run `pycell doctor`)", ctrl_names[c], (unsigned long long)asked[c], units[c],
					   ctrl_names[c]);
	}
	if (lim->file_bytes)
		result_add_limit(r, "file_bytes", lim->file_bytes, ENF_RLIMIT);
	if (lim->open_files)
		result_add_limit(r, "open_files", lim->open_files, ENF_RLIMIT);
}

/* The v1 "tasks" files, opened here by the supervisor: the kernel checks
 * the opener's credentials when the jail child, in its own user namespace
 * by then, writes "0" to them.  "tasks", not "cgroup.procs": a thread
 * moving itself skips the global threadgroup lock, whose every write waits
 * for an RCU grace period (milliseconds); the child has one thread, and it
 * owns its mm, which is what memory is charged by.  A v2 dir is entered by
 * clone3 (CLONE_INTO_CGROUP). */
static int open_tasks(struct cgroup_run *c, struct pc_err *err)
{
	for (int i = 0; i < c->env->n_v1; i++) {
		int fd;
		if (!c->v1[i] || (c->first_v1 & (1u << i)))   /* the probe's: open and locked */
			continue;
		if ((fd = openat(c->v1_fd[i], "tasks", O_WRONLY | O_CLOEXEC)) < 0)
			return pc_syserr(err, "cgroup", "open %s/tasks", c->v1[i]);
		c->tasks[c->n_tasks++] = fd;
		if (flock(fd, LOCK_EX) < 0)
			return pc_syserr(err, "cgroup", "lock %s/tasks", c->v1[i]);
	}
	return 0;
}

static struct cgroup_run *run_new(struct cgroup_env *e)
{
	struct cgroup_run *c = xcalloc(1, sizeof(*c));
	c->env = e;
	c->v2_fd = c->events_fd = c->timer_fd = -1;
	for (int i = 0; i < N_V1; i++)
		c->v1_fd[i] = -1;
	return c;
}

static int setup_v1(struct cgroup_run *c, const struct limits *lim, struct pc_err *err)
{
	for (int i = 0; i < c->env->n_v1; i++)
		if (run_setup_v1(c, i, lim, err) < 0)
			return -1;
	return open_tasks(c, err);
}

int cgroup_run_create(struct cgroup_env *e, const struct limits *lim, uint64_t shared_memory, bool own_userns,
		      struct cgroup_run **out, struct run_result *r, struct pc_err *err)
{
	struct cgroup_run *c = run_new(e);
	*out = NULL;
	c->shared_bytes = shared_memory;
	if (e) {
		cg_retry_stale(e);
		/* the probe's first dirs are this run's: their name; a probe
		 * still to finish makes its v1 ones with it */
		c->name = !e->first.name ? cg_next_run_name() : e->first.rest ? xstrdup(e->first.name)
										: steal_ptr(&e->first.name);
		if (e->v2_parent && run_setup_v2(c, lim, err) < 0)
			goto fail;
		/* the probe's v1 part is still to come: cgroup_run_finish */
		c->later = e->first.rest != NULL;
		if (!c->later && setup_v1(c, lim, err) < 0)
			goto fail;
		cgroup_run_mark(c);
	}
	if (!c->later)
		report_limits(c, lim, own_userns, r);
	*out = c;
	return 0;
fail:
	cgroup_run_destroy(c, NULL);
	return -1;
}

bool cgroup_run_later(const struct cgroup_run *c)
{
	return c && c->later;
}

int cgroup_run_finish(struct cgroup_run *c, const struct limits *lim, bool own_userns, struct run_result *r,
		      struct pc_err *err)
{
	if (!c || !c->later)
		return 0;
	c->later = false;
	cg_first_finish(c->env, c->v2_fd);
	if (setup_v1(c, lim, err) < 0)
		return -1;
	cgroup_run_mark(c);
	report_limits(c, lim, own_userns, r);
	return 0;
}

int cgroup_run_clone_fd(const struct cgroup_run *c)
{
	return c && c->env ? c->v2_fd : -1;
}

int cgroup_run_tasks_fds(const struct cgroup_run *c, int fds[CGROUP_MAX_TASKS])
{
	for (int i = 0; c && i < c->n_tasks; i++)
		fds[i] = c->tasks[i];
	return c ? c->n_tasks : 0;
}

int cgroup_enter(const int *fds, int n, struct pc_err *err)
{
	for (int i = 0; i < n; i++)
		if (pwrite(fds[i], "0", 1, 0) != 1)
			return pc_syserr(err, "cgroup", "enter the run's cgroup (write 0 to its tasks file)");
	return 0;
}

uint64_t cgroup_run_cpu_us(const struct cgroup_run *c)
{
	const struct cgroup_env *e = c ? c->env : NULL;
	uint64_t v;
	if (!e)
		return 0;
	if (c->v2_fd >= 0 && cg_read_key_at(c->v2_fd, "cpu.stat", "usage_usec", &v) == 0)
		return v;
	for (int i = 0; i < e->n_v1; i++)
		if (c->v1_fd[i] >= 0 && (e->v1[i].ctrls & CPUACCT_BIT) &&
		    cg_read_u64_at(c->v1_fd[i], "cpuacct.usage", &v) == 0)
			return v / 1000;
	return 0;
}

bool cgroup_run_shared(const struct cgroup_run *c)
{
	return c && c->shared;
}

void cgroup_run_mark(struct cgroup_run *c)
{
	if (c && c->shared)
		c->oom_mark = shared_oom_kills(c->env);
}

/* Of one process, in KiB, the sum of the values of the lines of
 * /proc/PID/<file> that begin with one of keys ("Pss:", ...). */
static int proc_kib(long pid, const char *file, const char *const keys[2], uint64_t *out)
{
	char path[64], buf[4096];
	ssize_t n;
	int fd;
	*out = 0;
	snprintf(path, sizeof(path), "/proc/%ld/%s", pid, file);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	for (char *p = buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		for (int k = 0; k < 2; k++)
			if (strncmp(p, keys[k], strlen(keys[k])) == 0)
				*out += strtoull(p + strlen(keys[k]), NULL, 10);
	return 0;
}

static const char *const rss_keys[2] = { "VmRSS:", "VmSwap:" }, *const pss_keys[2] = { "Pss:", "SwapPss:" };

/* The sum over the processes listed in the run's own cgroup, of their
 * resident and swapped pages (pss false) or shares of them (true).  A
 * process whose shares the kernel does not show us counts its pages
 * whole: the jail's init, a fork of the zygote or of ours that stays not
 * dumpable and whose memory belongs to the host's user namespace, which
 * the supervisor has no CAP_SYS_PTRACE in; python, executed in the jail's,
 * is ours to read. */
static int sum_procs(const struct cgroup_run *c, bool pss, uint64_t *bytes, struct pc_err *err)
{
	cleanup_free char *procs = NULL;
	int dirfd = c ? c->v2_fd : -1;
	*bytes = 0;
	for (int i = 0; c && dirfd < 0 && i < N_V1; i++)
		dirfd = c->v1_fd[i];
	if (dirfd < 0)
		return pc_fail(err, ENOENT, "cgroup", "the session has no cgroup that lists its processes");
	if (cg_read_at(dirfd, "cgroup.procs", &procs) < 0)
		return pc_syserr(err, "cgroup", "read the session's cgroup.procs");
	for (char *p = procs, *end;; p = end) {
		long pid = strtol(p, &end, 10);
		uint64_t kib;
		int rc;
		if (end == p)
			break;
		rc = proc_kib(pid, pss ? "smaps_rollup" : "status", pss ? pss_keys : rss_keys, &kib);
		if (rc < 0 && pss && errno == EACCES)
			rc = proc_kib(pid, "status", rss_keys, &kib);
		/* one that has just gone counts nothing */
		if (rc < 0 && errno != ENOENT && errno != ESRCH)
			return pc_syserr(err, "cgroup", "read /proc/%ld/%s", pid, pss ? "smaps_rollup" : "status");
		*bytes += kib * 1024;
	}
	return 0;
}

int cgroup_run_memory(const struct cgroup_run *c, uint64_t limit, uint64_t *bytes, struct pc_err *err)
{
	/* each page mapped counts whole first, which is cheap (a counter of
	 * the mm's) and enough when that is under the limit; the shares,
	 * which walk every page table (1.4 ms for a python with the data
	 * stack), only past it */
	if (sum_procs(c, false, bytes, err) < 0)
		return -1;
	if (*bytes <= limit)
		return 0;
	return sum_procs(c, true, bytes, err);
}

int cgroup_run_stats(struct cgroup_run *c, struct cgroup_stats *out)
{
	const struct cgroup_env *e = c ? c->env : NULL;
	uint64_t v;

	memset(out, 0, sizeof(*out));
	if (!e)
		return 0;
	/* a session of the shared group: no peak of its own, and the group's
	 * OOM killer acted since its cell began (cgroup_run_mark) */
	if (c->shared && shared_oom_kills(e) > c->oom_mark)
		out->oom_killed = true;
	if (c->v2_fd >= 0 && !c->shared && (e->v2_ctrls & CTRL_BIT(CG_MEMORY))) {
		if (cg_read_key_at(c->v2_fd, "memory.events", "oom_kill", &v) == 0 && v > 0)
			out->oom_killed = true;
		if (e->v2_peak)
			cg_read_u64_at(c->v2_fd, "memory.peak", &out->memory_peak_bytes);
	}
	out->cpu_us = cgroup_run_cpu_us(c);
	for (int i = 0; i < e->n_v1; i++) {
		int fd = c->v1_fd[i];
		if (fd < 0)
			continue;
		if (e->v1[i].ctrls & CTRL_BIT(CG_MEMORY)) {
			/* Before 4.13 there is no oom_kill counter: a hit limit
			 * (failcnt) is the best sign left. */
			if (e->oom_kill_count ? cg_read_key_at(fd, "memory.oom_control", "oom_kill", &v) == 0 && v > 0
					      : cg_read_u64_at(fd, "memory.failcnt", &v) == 0 && v > 0)
				out->oom_killed = true;
			cg_read_u64_at(fd, "memory.max_usage_in_bytes", &out->memory_peak_bytes);
		}
	}
	return 0;
}

void cgroup_run_kill(struct cgroup_run *c)
{
	if (!c || !c->env)
		return;
	/* every process of the run is in each of its cgroups: one is enough */
	if (c->v2) {
		cg_kill_dir(c->env, c->v2, true);
		return;
	}
	for (int i = 0; i < c->env->n_v1; i++) {
		if (c->v1[i]) {
			cg_kill_dir(c->env, c->v1[i], false);
			return;
		}
	}
}

/* ------------------------------------------------------------ removal */

/* The run's dir paths (v2, then each v1), as places to free and clear. */
static void run_dirs(struct cgroup_run *c, char **dirs[1 + N_V1])
{
	dirs[0] = &c->v2;
	for (int i = 0; i < N_V1; i++)
		dirs[1 + i] = &c->v1[i];
}

/* rmdir what is left; true when nothing is. */
static bool remove_now(struct cgroup_run *c)
{
	bool done = true;
	char **dirs[1 + N_V1];
	run_dirs(c, dirs);
	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
		if (!*dirs[i])
			continue;
		if (rmdir(*dirs[i]) == 0 || errno == ENOENT) {
			free(*dirs[i]);
			*dirs[i] = NULL;
		} else {
			done = false;
		}
	}
	return done;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static void free_run(struct cgroup_run *c)
{
	if (c->loop) {
		loop_del(c->loop, &c->w_events);
		loop_del(c->loop, &c->w_timer);
	}
	close_fd(&c->events_fd);
	close_fd(&c->timer_fd);
	close_fd(&c->v2_fd);
	for (int i = 0; i < N_V1; i++) {
		close_fd(&c->v1_fd[i]);
		free(c->v1[i]);
	}
	for (int i = 0; i < c->n_tasks; i++)
		close(c->tasks[i]);
	free(c->v2);
	free(c->name);
	free(c);
}

/* What remove_now could not do, the blocking way, then free c: at exit,
 * without a loop, and for a run the loop gave up on. */
static void remove_wait(struct cgroup_run *c)
{
	cg_remove_dir_wait(c->env, steal_ptr(&c->v2), true);
	for (int i = 0; i < N_V1; i++)
		cg_remove_dir_wait(c->env, steal_ptr(&c->v1[i]), false);
	free_run(c);
}

static void unlink_leaving(struct cgroup_run *c)
{
	for (struct cgroup_run **p = &c->env->leaving; *p; p = &(*p)->next_leaving)
		if (*p == c) {
			*p = c->next_leaving;
			return;
		}
}

/* Retries after 2, 4, 8 ... ms, up to a second apart; after about 30 s the
 * dirs go on the env's stale list (retried at the next run and at exit). */
#define RETRY_MAX 36

static void arm_retry(struct cgroup_run *c)
{
	uint64_t ms = c->retries < 9 ? 2ull << c->retries : 1000;
	struct itimerspec t = { .it_value = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000 } };
	timerfd_settime(c->timer_fd, 0, &t, NULL);
}

static void try_leave(struct cgroup_run *c)
{
	if (remove_now(c)) {
		unlink_leaving(c);
		free_run(c);
		return;
	}
	if (++c->retries == 6)
		cgroup_run_kill(c);   /* something is slow to go: make sure */
	if (c->retries > RETRY_MAX) {
		struct cgroup_env *e = c->env;
		char **dirs[1 + N_V1];
		run_dirs(c, dirs);
		for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
			if (!*dirs[i])
				continue;
			log_warn("cgroup: cannot remove %s yet: %s", *dirs[i], strerror(EBUSY));
			e->stale = xrealloc(e->stale, (e->n_stale + 1) * sizeof(*e->stale));
			e->stale[e->n_stale++] = steal_ptr(dirs[i]);
		}
		unlink_leaving(c);
		free_run(c);
		return;
	}
	arm_retry(c);
}

static void on_events(struct loop_watch *w, uint32_t events, void *data)
{
	struct cgroup_run *c = data;
	char buf[256];
	/* reading rearms the notification; "populated 0" is the moment */
	if (pread(c->events_fd, buf, sizeof(buf) - 1, 0) < 0) {
		loop_del(c->loop, &c->w_events);
		close_fd(&c->events_fd);
	}
	try_leave(c);
}

static void on_retry(struct loop_watch *w, uint32_t events, void *data)
{
	struct cgroup_run *c = data;
	uint64_t n;
	(void)!read(c->timer_fd, &n, sizeof(n));
	try_leave(c);
}

void cgroup_run_destroy(struct cgroup_run *c, struct loop *l)
{
	if (!c)
		return;
	/* the run's fds go at once: the jail is done with them; the flock
	 * with them, so a leftover of ours looks like what it is */
	for (int i = 0; i < c->n_tasks; i++)
		close(c->tasks[i]);
	c->n_tasks = 0;
	if (!c->env || remove_now(c)) {
		free_run(c);
		return;
	}
	if (!l) {
		remove_wait(c);
		return;
	}
	/* The jail's last processes are still leaving: let the loop remove
	 * the dirs when they have, instead of sleeping on it. */
	c->loop = l;
	c->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (c->timer_fd < 0 || loop_add(l, &c->w_timer, c->timer_fd, EPOLLIN, on_retry, c) < 0) {
		c->loop = NULL;
		remove_wait(c);
		return;
	}
	if (c->v2_fd >= 0 && (c->events_fd = openat(c->v2_fd, "cgroup.events", O_RDONLY | O_CLOEXEC)) >= 0 &&
	    loop_add(l, &c->w_events, c->events_fd, EPOLLPRI, on_events, c) < 0)
		close_fd(&c->events_fd);
	c->next_leaving = c->env->leaving;
	c->env->leaving = c;
	arm_retry(c);
}

void cgroup_env_unwatch(struct cgroup_env *e)
{
	for (struct cgroup_run *c = e ? e->leaving : NULL; c; c = c->next_leaving) {
		if (c->loop) {
			loop_del(c->loop, &c->w_events);
			loop_del(c->loop, &c->w_timer);
		}
		c->loop = NULL;
	}
}

/* Finish removing the dirs of runs that were left to the loop (at exit). */
static void leaving_finish(struct cgroup_env *e)
{
	while (e->leaving) {
		struct cgroup_run *c = e->leaving;
		e->leaving = c->next_leaving;
		/* at exit the loop may be gone already: its watches go with
		 * the fds that free_run closes */
		c->loop = NULL;
		remove_wait(c);
	}
}

void cgroup_env_free(struct cgroup_env *e)
{
	if (!e)
		return;
	leaving_finish(e);
	shared_free(e);
	cg_probe_free(e);
}
