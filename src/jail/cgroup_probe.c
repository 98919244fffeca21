/* pycell: what this host offers for per-run resource limits: cgroup v2,
 * cgroup v1, and the leftovers of dead supervisors (cgroup_int.h).
 *
 * Every run gets its own cgroup, pycell-<supervisor pid>-<n>, as a child of
 * this process's cgroup in each hierarchy pycell uses, and it is removed
 * when the run ends.  The host's cgroups are never written: only children
 * are made and removed (the one exception, our own delegated cgroup, is
 * explained at delegate_to_children).
 *
 * Per controller (memory, pids, cpu): cgroup v2 when it is enabled for the
 * children of our cgroup, else the v1 hierarchy that has it, else nothing
 * (a warning in the result).  rlimits are always set in the jail as well.
 *
 * A cgroup2 directory is made for every run even when v2 offers no
 * controllers (a hybrid host's "unified" mount): it holds the BPF device
 * filter, and gives cgroup.kill and cpu.stat, for the price of a mkdir. */
#include "config.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>

#include "base/fault.h"
#include "base/log.h"
#include "jail/cgroup_bpf.h"
#include "jail/cgroup_int.h"
#include "jail/rlimits.h"

/* --------------------------------------------------- where our cgroups are */

struct self_cgroups {
	char *v2_path;              /* "0::" line */
	char *v1_path[N_V1];
	char *v2_point, *v2_root;   /* the cgroup2 mount */
	char *v1_point[N_V1], *v1_root[N_V1];
	unsigned v1_bits[N_V1];     /* all controllers of that hierarchy */
};

static void self_cgroups_free(struct self_cgroups *s)
{
	free(s->v2_path);
	free(s->v2_point);
	free(s->v2_root);
	for (int i = 0; i < N_V1; i++) {
		free(s->v1_path[i]);
		free(s->v1_point[i]);
		free(s->v1_root[i]);
	}
}

static void parse_mountinfo_line(char *line, struct self_cgroups *s)
{
	struct mountinfo m;
	if (mountinfo_parse_line(line, &m) < 0)
		return;
	if (strcmp(m.fstype, "cgroup2") == 0) {
		if (!s->v2_point) {
			s->v2_point = steal_ptr(&m.point);
			s->v2_root = steal_ptr(&m.root);
		}
	} else if (strcmp(m.fstype, "cgroup") == 0) {
		unsigned bits = cg_parse_ctrls(m.super_opts, ",");
		for (int c = 0; c < N_V1; c++) {
			if (!(bits & (1u << c)) || s->v1_point[c])
				continue;
			s->v1_point[c] = xstrdup(m.point);
			s->v1_root[c] = xstrdup(m.root);
			s->v1_bits[c] = bits;
		}
	}
	free(m.point);
	free(m.root);
}

static void self_cgroups_read(struct self_cgroups *s)
{
	cleanup_free char *cg = NULL, *mi = NULL;
	size_t len;
	char *save = NULL;

	memset(s, 0, sizeof(*s));
	if (read_file("/proc/self/cgroup", 1 << 20, &cg, &len) == 0) {
		for (char *line = strtok_r(cg, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
			char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
			if (!c2)
				continue;
			*c2 = '\0';
			if (c2 == c1 + 1) {
				if (strncmp(line, "0:", 2) == 0 && !s->v2_path)
					s->v2_path = xstrdup(c2 + 1);
				continue;
			}
			unsigned bits = cg_parse_ctrls(c1 + 1, ",");
			for (int c = 0; c < N_V1; c++)
				if ((bits & (1u << c)) && !s->v1_path[c])
					s->v1_path[c] = xstrdup(c2 + 1);
		}
	}
	save = NULL;
	if (read_file("/proc/self/mountinfo", 4 << 20, &mi, &len) == 0)
		for (char *line = strtok_r(mi, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
			parse_mountinfo_line(line, s);
}

/* The directory of cgroup `path` in a mount of `root` at `point`, or NULL
 * when the mount does not show it (a container's partial bind mount). */
static char *cgroup_dir(const char *point, const char *root, const char *path)
{
	size_t rl;
	if (!point || !root || !path)
		return NULL;
	rl = strlen(root);
	if (strcmp(root, "/") == 0)
		return cg_path_join(point, path);
	if (strncmp(path, root, rl) == 0 && (path[rl] == '/' || path[rl] == '\0'))
		return cg_path_join(point, path + rl);
	return NULL;
}

/* A probe dir not kept for the first run: closed, removed, freed. */
static void probe_drop(char *path, int *fd, int *tasks)
{
	if (tasks && *tasks >= 0)
		close(*tasks);
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
	if (tasks)
		*tasks = -1;
	rmdir(path);
	free(path);
}

/* Make the first run's dir below dir, to look into (a child is where
 * controllers show), and lock it as every run dir is locked from its
 * start: the dir itself (v2), or its tasks file (v1, *tasks).  The first
 * cgroup_run_create takes it; the caller frees the path.  NULL, with err,
 * if it cannot. */
static char *probe_mkdir(struct cgroup_env *e, const char *dir, int *fd, int *tasks, struct pc_err *err)
{
	char *p = cg_path_join(dir, e->first.name);
	*fd = -1;
	if (tasks)
		*tasks = -1;
	/* the fault site of a run's cgroup dirs (cgroup.c): these are the
	 * first run's */
	if (fault_at("cgroup")) {
		pc_fail(err, ENOSPC, "cgroup", "mkdir %s: %s (injected fault)", p, strerror(ENOSPC));
		free(p);
		return NULL;
	}
	if (cg_make_dir(p, err) < 0) {
		free(p);
		return NULL;
	}
	*fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (tasks && *fd >= 0)
		*tasks = openat(*fd, "tasks", O_WRONLY | O_CLOEXEC);
	if (*fd < 0 || (tasks && *tasks < 0) || flock(tasks ? *tasks : *fd, LOCK_EX) < 0) {
		pc_syserr(err, "cgroup", "open and lock %s", p);
		probe_drop(p, fd, tasks);
		return NULL;
	}
	return p;
}

/* Which of the files (NULL entries skipped) exist in dir, as bits. */
static unsigned have_files(const char *dir, const char *const *files, int n)
{
	unsigned have = 0;
	for (int i = 0; i < n; i++)
		if (files[i] && cg_has(dir, files[i]))
			have |= 1u << i;
	return have;
}

static void probe_bpf(struct cgroup_env *e, const char *dir);

/* ------------------------------------------------------------------ probe */

static void v2_state(struct cgroup_env *e, enum cgroup_v2_state st, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void v2_state(struct cgroup_env *e, enum cgroup_v2_state st, const char *fmt, ...)
{
	va_list ap;
	if (e->v2_detail)   /* the first reason found is the real one */
		return;
	e->v2_state = st;
	va_start(ap, fmt);
	if (vasprintf(&e->v2_detail, fmt, ap) < 0)
		e->v2_detail = NULL;
	va_end(ap);
}

static bool only_us_in(const char *dir)
{
	cleanup_free char *procs = NULL;
	char *save = NULL;
	bool seen = false;
	if (cg_read(dir, "cgroup.procs", &procs) < 0)
		return false;
	for (char *t = strtok_r(procs, "\n", &save); t; t = strtok_r(NULL, "\n", &save)) {
		if (atoi(t) != (int)getpid())
			return false;
		seen = true;
	}
	return seen;
}

/* The "no internal processes" rule of cgroup v2: a cgroup other than the
 * root either holds processes or gives controllers to its children, never
 * both.  Runs need memory/pids/cpu in children of our cgroup, and we are a
 * process in it.  When the cgroup is ours alone (a systemd unit with
 * Delegate=yes, `systemd-run --scope -p Delegate=yes`), the supervisor moves
 * itself into a leaf, <own>/pycell-supervisor, and enables the controllers
 * in <own> for the run leaves beside it: what systemd's DelegateSubgroup=
 * does.  A cgroup shared with other processes is not touched (moving them
 * is not ours to do), nor is the host's root cgroup.  The root of a cgroup
 * namespace is another matter: it is "/" to us but a cgroup like any other
 * (a container's, under a runtime that delegates it), and is taken as one. */
static unsigned delegate_to_children(struct cgroup_env *e, const char *own, unsigned want)
{
	cleanup_free char *sup = cg_path_join(own, SUPERVISOR_CG);
	char pid[24];

	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	if ((mkdir(sup, 0755) < 0 && errno != EEXIST) || cg_write(sup, "cgroup.procs", pid) < 0) {
		v2_state(e, CG2_NOT_WRITABLE, "cannot move pycell into %s: %s", sup, strerror(errno));
		return 0;
	}
	for (int c = 0; c < CG_NCTRL; c++) {
		char op[16];
		if (!(want & CTRL_BIT(c)))
			continue;
		snprintf(op, sizeof(op), "+%s", ctrl_names[c]);
		if (cg_write(own, "cgroup.subtree_control", op) < 0)
			log_debug("cgroup: enable %s in %s/cgroup.subtree_control: %s", ctrl_names[c], own,
				  strerror(errno));
	}
	log_debug("cgroup: moved the supervisor into %s, controllers enabled in %s", sup, own);
	return cg_read_ctrls(own, "cgroup.subtree_control");
}

static void probe_v2(struct cgroup_env *e, const struct self_cgroups *s, bool bpf_now)
{
	cleanup_free char *own = NULL, *parent = NULL;
	char *probe;
	unsigned root_avail, avail, enabled, have;
	struct pc_err err;
	int fd;

	if (!s->v2_point || !s->v2_path) {
		v2_state(e, CG2_NOT_MOUNTED, "no cgroup2 file system is mounted");
		return;
	}
	e->v2_mount = xstrdup(s->v2_point);
	own = cgroup_dir(s->v2_point, s->v2_root, s->v2_path);
	if (!own) {
		v2_state(e, CG2_NOT_WRITABLE, "our cgroup2 %s is not visible under %s", s->v2_path, s->v2_point);
		return;
	}
	root_avail = cg_read_ctrls(s->v2_point, "cgroup.controllers");
	/* in the mount's root cgroup (a host's supervisor): the same file */
	avail = strcmp(own, s->v2_point) == 0 ? root_avail : cg_read_ctrls(own, "cgroup.controllers");
	enabled = cg_read_ctrls(own, "cgroup.subtree_control");
	parent = xstrdup(own);

	if (avail & ~enabled) {
		const char *base = strrchr(own, '/');
		cleanup_free char *up = base ? xasprintf("%.*s", (int)(base - own), own) : NULL;
		/* the host's root cgroup alone has no cgroup.type */
		if (strcmp(s->v2_path, "/") == 0 && !cg_has(own, "cgroup.type")) {
			v2_state(e, CG2_ROOT_NOT_ENABLED, "pycell runs in the root cgroup and %s/cgroup.subtree_control "
				  "does not enable them", own);
		} else if (base && strcmp(base + 1, SUPERVISOR_CG) == 0) {
			/* an earlier pycell (or DelegateSubgroup=) made the split:
			 * the runs go beside us */
			free(parent);
			parent = steal_ptr(&up);
			enabled = cg_read_ctrls(parent, "cgroup.subtree_control");
		} else if (only_us_in(own)) {
			enabled = delegate_to_children(e, own, avail & ~enabled);
		} else {
			v2_state(e, CG2_BUSY, "%s holds other processes too, so its controllers cannot be "
				  "given to child cgroups (cgroup v2 \"no internal processes\" rule)", own);
		}
	}
	/* one child to look into for everything: each mkdir costs */
	if (!(probe = probe_mkdir(e, parent, &fd, NULL, &err))) {
		v2_state(e, CG2_NOT_WRITABLE, "%s", err.msg);
		return;
	}
	{
		static const char *const extra[] = { "memory.swap.max", "memory.peak", "cgroup.kill" };
		unsigned x = have_files(probe, extra, 3);
		have = have_files(probe, v2_key_file, CG_NCTRL);
		e->v2_swap = x & 1;
		e->v2_peak = x & 2;
		e->v2_kill = x & 4;
	}
	if (bpf_now)
		probe_bpf(e, probe);
	else
		e->first.bpf = true;   /* cg_probe_bpf_later, on the first run's dir */
	e->first.dir[0] = probe;   /* the first run's, device filter attached */
	e->first.fd[0] = fd;
	e->v2_parent = steal_ptr(&parent);
	e->v2_ctrls = enabled & have & ALL_CTRLS;

	if (e->v2_ctrls == ALL_CTRLS) {
		e->v2_state = CG2_OK;
		return;
	}
	{
		cleanup_free char *missing = cg_ctrl_list(ALL_CTRLS & ~e->v2_ctrls);
		unsigned m = ALL_CTRLS & ~e->v2_ctrls;
		bool in_v1 = true;
		for (int c = 0; c < CG_NCTRL; c++)
			if ((m & ~root_avail & CTRL_BIT(c)) && !s->v1_point[c])
				in_v1 = false;
		if (m & ~root_avail)
			v2_state(e, CG2_BOUND_TO_V1, "%s not in cgroup v2: %s", missing,
				  in_v1 ? "they are mounted as cgroup v1 hierarchies (a hybrid host)"
					: "and no cgroup v1 hierarchy with them is mounted either");
		else if (m & ~avail)
			v2_state(e, CG2_NOT_DELEGATED, "%s not delegated to our cgroup %s", missing, own);
		else
			v2_state(e, CG2_PARTIAL, "%s not enabled in %s/cgroup.subtree_control", missing, own);
		if (e->v2_ctrls && e->v2_state != CG2_PARTIAL)
			e->v2_state = CG2_PARTIAL;
	}
}

static void probe_v1(struct cgroup_env *e, const struct self_cgroups *s)
{
	unsigned want = ALL_CTRLS & ~e->v2_ctrls;
	struct pc_err err;
	if (!e->v2_parent)
		want |= CPUACCT_BIT;   /* cpu time comes from the run's cgroup2 cpu.stat otherwise */
	for (int c = 0; c < N_V1; c++) {
		cleanup_free char *dir = NULL;
		char *probe;
		struct hier *h = NULL;
		unsigned have;
		bool memsw;
		int fd, tasks;
		if (!(want & (1u << c)))
			continue;
		dir = cgroup_dir(s->v1_point[c], s->v1_root[c], s->v1_path[c]);
		if (!dir)
			continue;
		for (int i = 0; i < e->n_v1; i++)
			if (strcmp(e->v1[i].dir, dir) == 0)
				h = &e->v1[i];
		if (h)
			continue;   /* co-mounted with one seen already */
		if (!(probe = probe_mkdir(e, dir, &fd, &tasks, &err))) {
			if (!e->v1_detail) /* the first that could not be used */
				e->v1_detail = xstrdup(err.msg);
			continue;
		}
		have = have_files(probe, v1_key_file, N_V1) & s->v1_bits[c] & (want | CPUACCT_BIT);
		memsw = cg_has(probe, "memory.memsw.limit_in_bytes");
		if (!(have & want)) {
			probe_drop(probe, &fd, &tasks);
			continue;
		}
		e->first.dir[1 + e->n_v1] = probe;   /* the first run's */
		e->first.fd[1 + e->n_v1] = fd;
		e->first.tasks[e->n_v1] = tasks;
		h = &e->v1[e->n_v1++];
		h->dir = steal_ptr(&dir);
		h->ctrls = have;
		if (have & CTRL_BIT(CG_MEMORY)) {
			uint64_t v;
			e->memsw = memsw;
			e->oom_kill_count = cg_read_key(h->dir, "memory.oom_control", "oom_kill", &v) == 0;
		}
		want &= ~have;
	}
}

/* The device filter: load it and attach it to dir, a probe child of
 * where the run cgroup2 dirs go. */
static void probe_bpf(struct cgroup_env *e, const char *dir)
{
	cleanup_close int fd = -1, dirfd = -1;
	struct pc_err err;

	fd = cgroup_bpf_device_load(&err);
	if (fd < 0) {
		e->bpf_detail = xstrdup(err.msg);
		return;
	}
	dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		pc_syserr(&err, "cgroup", "open %s", dir);
	if (dirfd < 0 || cgroup_bpf_device_attach(fd, dirfd, &err) < 0)
		e->bpf_detail = xstrdup(err.msg);
	else
		e->bpf_fd = steal_fd(&fd);
}

/* Run cgroups left by supervisors that died (SIGKILL, a crash, a power
 * cut of the service's cgroup): kill what is still in them, then remove
 * them, before this supervisor serves.  A live owner holds a flock on each
 * of its run dirs (v2: the dir, v1: its tasks file) from creation to
 * removal, whatever pid namespace it runs in, and the kernel drops it when
 * the owner dies; a populated dir this process can lock, of a pid that is
 * gone, has no live owner (a pycell from before the lock holds none, so
 * the pid counts too); a v2 one may hold others (the sessions' shared
 * memory cgroup), swept first.  An empty one is removed when its owner's pid is
 * gone from ours (or it is old): a supervisor of another pid namespace between its mkdir and its
 * flock (microseconds) would see its run fail to set up, never a run of
 * its killed.  Probe dirs hold no lock and never hold a process: one is
 * removed when its owner is gone and it is old. */

static void sweep_dead(struct cgroup_env *e, const char *dir, bool v2)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	time_t now = time(NULL);
	if (!d)
		return;
	while ((de = readdir(d))) {
		cleanup_free char *path = NULL, *procs = NULL;
		cleanup_close int fd = -1;
		int pid;
		unsigned long long seq;
		struct stat st;
		bool run = sscanf(de->d_name, RUN_PREFIX "%d-%llu", &pid, &seq) == 2, gone, old;
		if (!run && sscanf(de->d_name, PROBE_PREFIX "%d", &pid) != 1)
			continue;
		if (pid == (int)getpid() || fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		gone = kill(pid, 0) < 0 && errno == ESRCH;
		old = now - st.st_mtime >= STALE_AGE_S;
		path = cg_path_join(dir, de->d_name);
		if (run) {
			cleanup_free char *lock = v2 ? NULL : cg_path_join(path, "tasks");
			fd = open(lock ? lock : path, O_RDONLY | O_CLOEXEC);
			if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) < 0)
				continue; /* gone meanwhile, or its owner lives */
			/* the sessions' shared memory cgroup has their v2 dirs
			 * in it (cgroup.c) */
			if (v2 && (gone || old))
				sweep_dead(e, path, true);
			if (cg_read(path, "cgroup.procs", &procs) == 0 && procs[0]) {
				/* the pid as well as the lock: a pycell from before
				 * the lock, still running, holds none */
				if (!gone)
					continue;
				log_warn("cgroup: killing what is left in %s: supervisor %d is gone", path, pid);
				cg_kill_dir(e, path, v2);
				cg_remove_dir_wait(e, steal_ptr(&path), v2);
				continue;
			}
		}
		if (run ? !gone && !old : !(gone && old))
			continue;
		if (rmdir(path) == 0)
			log_debug("cgroup: removed %s of dead supervisor %d", path, pid);
	}
	closedir(d);
}

/* The probe's second part: v1, then the sweep of dead supervisors'
 * leftovers where our runs' dirs go. */
static void probe_rest(struct cgroup_env *e)
{
	struct self_cgroups *s = steal_ptr(&e->first.rest);
	if (!s)
		return;
	probe_v1(e, s);
	self_cgroups_free(s);
	free(s);
	if (e->v2_parent)
		sweep_dead(e, e->v2_parent, true);
	for (int i = 0; i < e->n_v1; i++)
		sweep_dead(e, e->v1[i].dir, false);
	if (log_level >= LOG_DEBUG) {
		struct cgroup_info info;
		cgroup_env_info(e, &info);
		for (int c = 0; c < CG_NCTRL; c++)
			log_debug("cgroup: %s by %s%s%s", ctrl_names[c], limit_enforcer_name(info.by[c]),
				  info.dir[c] ? " in " : "", info.dir[c] ? info.dir[c] : "");
	}
}

static void log_bpf(const struct cgroup_env *e)
{
	log_debug("cgroup: device filter %s%s", e->bpf_fd >= 0 ? "on" : "off: ", e->bpf_fd >= 0 ? "" : e->bpf_detail);
}

void cg_first_finish(struct cgroup_env *e, int v2_fd)
{
	if (e->first.bpf && v2_fd >= 0) {
		cleanup_close int fd = -1;
		struct pc_err err;
		fd = cgroup_bpf_device_load(&err);
		if (fd < 0 || cgroup_bpf_device_attach(fd, v2_fd, &err) < 0)
			e->bpf_detail = xstrdup(err.msg);
		else
			e->bpf_fd = steal_fd(&fd);
		log_bpf(e);
	} else if (e->first.bpf) {
		e->bpf_detail = xstrdup("the first run had no cgroup2 directory to attach it to");
		log_bpf(e);
	}
	e->first.bpf = false;
	probe_rest(e);   /* its v1 dirs are made under first.name */
	free(steal_ptr(&e->first.name));   /* the first run has its own copy (cgroup_run_create) */
}

/* later: the v1 part, the sweep and the device filter are left to the
 * first run (cg_first_finish) */
static struct cgroup_env *probe_v2_part(bool later)
{
	struct cgroup_env *e = xcalloc(1, sizeof(*e));

	e->bpf_fd = -1;
	e->shared.v2_fd = e->shared.v1_fd = e->shared.v1_tasks = -1;
	e->first.name = cg_next_run_name();
	for (int i = 0; i < 1 + N_V1; i++)
		e->first.fd[i] = -1;
	for (int i = 0; i < N_V1; i++)
		e->first.tasks[i] = -1;
	e->first.rest = xcalloc(1, sizeof(*e->first.rest));
	self_cgroups_read(e->first.rest);
	probe_v2(e, e->first.rest, !later);
	if (!e->v2_parent && !e->bpf_detail)
		e->bpf_detail = xstrdup("no cgroup2 directory to attach it to");
	if (!e->first.bpf)
		log_bpf(e);
	return e;
}

int cgroup_env_probe(struct cgroup_env **out, struct pc_err *err)
{
	(void)err;
	*out = probe_v2_part(false);
	probe_rest(*out);
	return 0;
}

int cgroup_env_probe_v2(struct cgroup_env **out, struct pc_err *err)
{
	(void)err;
	*out = probe_v2_part(true);
	return 0;
}

void cg_probe_free(struct cgroup_env *e)
{
	if (e->first.rest) {
		self_cgroups_free(e->first.rest);
		free(e->first.rest);
	}
	for (int i = 0; i < 1 + N_V1; i++)   /* no run came to take them */
		if (e->first.dir[i])
			probe_drop(steal_ptr(&e->first.dir[i]), &e->first.fd[i], i ? &e->first.tasks[i - 1] : NULL);
	free(e->first.name);
	for (int i = 0; i < 50 && e->n_stale; i++) {
		cg_retry_stale(e);
		if (e->n_stale)
			usleep(10000);
	}
	for (size_t i = 0; i < e->n_stale; i++) {
		log_warn("cgroup: leaving %s behind: %s", e->stale[i], strerror(EBUSY));
		free(e->stale[i]);
	}
	free(e->stale);
	if (e->bpf_fd >= 0)
		close(e->bpf_fd);
	for (int i = 0; i < e->n_v1; i++)
		free(e->v1[i].dir);
	free(e->v2_mount);
	free(e->v2_parent);
	free(e->v2_detail);
	free(e->v1_detail);
	free(e->bpf_detail);
	free(e);
}

enum limit_enforcer cg_ctrl_enforcer(const struct cgroup_env *e, int c, const char **dir)
{
	*dir = NULL;
	if (!e)
		return ENF_NONE;
	if (e->v2_ctrls & CTRL_BIT(c)) {
		*dir = e->v2_parent;
		return ENF_CGROUP2;
	}
	for (int i = 0; i < e->n_v1; i++) {
		if (e->v1[i].ctrls & CTRL_BIT(c)) {
			*dir = e->v1[i].dir;
			return ENF_CGROUP1;
		}
	}
	return ENF_NONE;
}

const char *cgroup_env_mode(const struct cgroup_env *e)
{
	bool v1 = false, v2 = false;
	const char *dir;
	for (int c = 0; c < CG_NCTRL; c++) {
		enum limit_enforcer by = cg_ctrl_enforcer(e, c, &dir);
		v1 |= by == ENF_CGROUP1;
		v2 |= by == ENF_CGROUP2;
	}
	return v1 ? "cgroup1" : v2 ? "cgroup2" : "none";
}

const char *cgroup_ctrl_name(enum cgroup_ctrl c)
{
	return (unsigned)c < CG_NCTRL ? ctrl_names[c] : "?";
}

void cgroup_env_info(const struct cgroup_env *e, struct cgroup_info *out)
{
	memset(out, 0, sizeof(*out));
	out->mode = cgroup_env_mode(e);
	for (int c = 0; c < CG_NCTRL; c++)
		out->by[c] = cg_ctrl_enforcer(e, c, &out->dir[c]);
	if (out->by[CG_PIDS] == ENF_NONE && rlimit_nproc_per_userns())
		out->by[CG_PIDS] = ENF_RLIMIT;
	if (!e) {
		out->v2_state = CG2_NOT_MOUNTED;
		return;
	}
	out->v2_mount = e->v2_mount;
	out->v2_parent = e->v2_parent;
	out->v2_state = e->v2_state;
	out->v2_detail = e->v2_detail;
	out->v1_detail = e->v1_detail;
	out->memsw = e->memsw;
	out->bpf_device = e->bpf_fd >= 0;
	out->bpf_detail = e->bpf_detail;
}

