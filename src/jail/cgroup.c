/* pycell: per-run resource limits: cgroup v2, cgroup v1, rlimits.
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
#include <stdio.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>

#include "base/log.h"
#include "jail/cgroup.h"
#include "jail/cgroup_bpf.h"
#include "jail/rlimits.h"

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

static const char *const ctrl_names[N_V1] = { "memory", "pids", "cpu", "cpuacct" };

/* The file that proves a controller is usable in a child cgroup. */
static const char *const v1_key_file[N_V1] = {
	"memory.limit_in_bytes", "pids.max", "cpu.cfs_quota_us", "cpuacct.usage" };
static const char *const v2_key_file[CG_NCTRL] = { "memory.max", "pids.max", "cpu.max" };

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

	unsigned long long seq;
	char **stale;        /* run dirs that could not be removed yet */
	size_t n_stale;
};

struct cgroup_run {
	struct cgroup_env *env;  /* NULL: rlimits only */
	char *name;
	char *v2;
	int v2_fd;
	char *v1[N_V1];          /* parallel to env->v1 */
	/* cgroup.procs of every dir clone3 does not enter (the v1 ones, and
	 * v2 when there are v1 ones): the jail child writes "0" to them.
	 * These and v2_fd hold a flock from creation to removal: the mark of
	 * a live owner that sweep_dead() looks for. */
	int tasks[CGROUP_MAX_TASKS];
	int n_tasks;
};

/* ------------------------------------------------------------ file helpers */

static char *path_join(const char *a, const char *b)
{
	size_t la = strlen(a);
	while (la > 1 && a[la - 1] == '/')
		la--;
	while (*b == '/')
		b++;
	if (!*b)
		return xasprintf("%.*s", (int)la, a);
	if (la == 1 && a[0] == '/')
		return xasprintf("/%s", b);
	return xasprintf("%.*s/%s", (int)la, a, b);
}

static bool cg_has(const char *dir, const char *file)
{
	cleanup_free char *p = path_join(dir, file);
	return access(p, F_OK) == 0;
}

static int cg_read(const char *dir, const char *file, char **out)
{
	cleanup_free char *p = path_join(dir, file);
	size_t len;
	return read_file(p, 1 << 20, out, &len);
}

static int cg_write(const char *dir, const char *file, const char *val)
{
	cleanup_free char *p = path_join(dir, file);
	return write_file(p, val);
}

static int cg_set(const char *dir, const char *file, const char *val, struct pc_err *err)
{
	if (cg_write(dir, file, val) < 0)
		return pc_syserr(err, "cgroup", "write \"%s\" to %s/%s", val, dir, file);
	return 0;
}

static int cg_set_u64(const char *dir, const char *file, uint64_t v, struct pc_err *err)
{
	char buf[24];
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
	return cg_set(dir, file, buf, err);
}

/* One number, or "max". */
static int cg_read_u64(const char *dir, const char *file, uint64_t *out)
{
	cleanup_free char *s = NULL;
	if (cg_read(dir, file, &s) < 0)
		return -1;
	*out = strncmp(s, "max", 3) == 0 ? UINT64_MAX : strtoull(s, NULL, 10);
	return 0;
}

/* "key value" lines: memory.events, cpu.stat, memory.oom_control. */
static int cg_read_key(const char *dir, const char *file, const char *key, uint64_t *out)
{
	cleanup_free char *s = NULL;
	size_t kl = strlen(key);
	if (cg_read(dir, file, &s) < 0)
		return -1;
	for (char *line = s; line && *line;) {
		char *nl = strchr(line, '\n');
		if (strncmp(line, key, kl) == 0 && line[kl] == ' ') {
			*out = strtoull(line + kl + 1, NULL, 10);
			return 0;
		}
		line = nl ? nl + 1 : NULL;
	}
	errno = ENOENT;
	return -1;
}

/* Controller names in a list ("memory pids" or "rw,cpu,cpuacct") as bits. */
static unsigned parse_ctrls(const char *s, const char *seps)
{
	cleanup_free char *copy = xstrdup(s);
	char *save = NULL;
	unsigned bits = 0;
	for (char *t = strtok_r(copy, seps, &save); t; t = strtok_r(NULL, seps, &save))
		for (int c = 0; c < N_V1; c++)
			if (strcmp(t, ctrl_names[c]) == 0)
				bits |= 1u << c;
	return bits;
}

static unsigned cg_read_ctrls(const char *dir, const char *file)
{
	cleanup_free char *s = NULL;
	if (cg_read(dir, file, &s) < 0)
		return 0;
	return parse_ctrls(s, " \n") & ALL_CTRLS;
}

static char *ctrl_list(unsigned bits)
{
	char buf[64] = "";
	for (int c = 0; c < N_V1; c++)
		if (bits & (1u << c))
			snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "%s%s", buf[0] ? ", " : "",
				 ctrl_names[c]);
	return xstrdup(buf);
}

/* mkdir, replacing an empty leftover of the same name (a dead supervisor
 * that had our pid; our own names are never reused). */
static int make_dir(const char *path, struct pc_err *err)
{
	if (mkdir(path, 0755) == 0)
		return 0;
	if (errno == EEXIST && rmdir(path) == 0 && mkdir(path, 0755) == 0)
		return 0;
	return pc_syserr(err, "cgroup", "mkdir %s", path);
}

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

/* mountinfo escapes space, tab, newline and backslash as \ooo */
static char *unescape(const char *s)
{
	char *out = xmalloc(strlen(s) + 1), *o = out;
	while (*s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' && s[3] >= '0' &&
		    s[3] <= '7') {
			*o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 4;
		} else {
			*o++ = *s++;
		}
	}
	*o = '\0';
	return out;
}

static void parse_mountinfo_line(char *line, struct self_cgroups *s)
{
	char *f[12], *save = NULL, *t;
	int n = 0, dash = -1;
	for (t = strtok_r(line, " ", &save); t && n < 12; t = strtok_r(NULL, " ", &save)) {
		if (strcmp(t, "-") == 0 && dash < 0 && n >= 6)
			dash = n;
		f[n++] = t;
	}
	if (dash < 0 || dash + 3 >= n)
		return;
	/* f[3] root, f[4] mount point, f[dash+1] fstype, f[dash+3] super options */
	if (strcmp(f[dash + 1], "cgroup2") == 0) {
		if (!s->v2_point) {
			s->v2_point = unescape(f[4]);
			s->v2_root = unescape(f[3]);
		}
	} else if (strcmp(f[dash + 1], "cgroup") == 0) {
		unsigned bits = parse_ctrls(f[dash + 3], ",");
		for (int c = 0; c < N_V1; c++) {
			if (!(bits & (1u << c)) || s->v1_point[c])
				continue;
			s->v1_point[c] = unescape(f[4]);
			s->v1_root[c] = unescape(f[3]);
			s->v1_bits[c] = bits;
		}
	}
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
			unsigned bits = parse_ctrls(c1 + 1, ",");
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
		return path_join(point, path);
	if (strncmp(path, root, rl) == 0 && (path[rl] == '/' || path[rl] == '\0'))
		return path_join(point, path + rl);
	return NULL;
}

/* Make a throwaway child of dir to look into; the caller removes it
 * (rmdir) and frees the path.  NULL, with *why when asked, if it cannot. */
static char *probe_mkdir(const char *dir, char **why)
{
	cleanup_free char *name = xasprintf(PROBE_PREFIX "%d", (int)getpid());
	char *p = path_join(dir, name);
	struct pc_err err;
	if (make_dir(p, &err) < 0) {
		if (why)
			*why = xstrdup(err.msg);
		free(p);
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
 * is not ours to do), nor is the root cgroup, which is the host's. */
static unsigned delegate_to_children(struct cgroup_env *e, const char *own, unsigned want)
{
	cleanup_free char *sup = path_join(own, SUPERVISOR_CG);
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

static void probe_v2(struct cgroup_env *e, const struct self_cgroups *s)
{
	cleanup_free char *own = NULL, *parent = NULL, *why = NULL, *probe = NULL;
	unsigned root_avail, avail, enabled, have;

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
	avail = cg_read_ctrls(own, "cgroup.controllers");
	enabled = cg_read_ctrls(own, "cgroup.subtree_control");
	parent = xstrdup(own);

	if (avail & ~enabled) {
		const char *base = strrchr(own, '/');
		cleanup_free char *up = base ? xasprintf("%.*s", (int)(base - own), own) : NULL;
		if (strcmp(s->v2_path, "/") == 0) {
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
	if (!(probe = probe_mkdir(parent, &why))) {
		v2_state(e, CG2_NOT_WRITABLE, "%s", why);
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
	probe_bpf(e, probe);
	rmdir(probe);
	e->v2_parent = steal_ptr(&parent);
	e->v2_ctrls = enabled & have & ALL_CTRLS;

	if (e->v2_ctrls == ALL_CTRLS) {
		e->v2_state = CG2_OK;
		return;
	}
	{
		cleanup_free char *missing = ctrl_list(ALL_CTRLS & ~e->v2_ctrls);
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
	if (!e->v2_parent)
		want |= CPUACCT_BIT;   /* cpu time comes from the run's cgroup2 cpu.stat otherwise */
	for (int c = 0; c < N_V1; c++) {
		cleanup_free char *dir = NULL, *probe = NULL;
		struct hier *h = NULL;
		unsigned have;
		bool memsw;
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
		if (!(probe = probe_mkdir(dir, e->v1_detail ? NULL : &e->v1_detail)))
			continue;
		have = have_files(probe, v1_key_file, N_V1) & s->v1_bits[c] & (want | CPUACCT_BIT);
		memsw = cg_has(probe, "memory.memsw.limit_in_bytes");
		rmdir(probe);
		if (!(have & want))
			continue;
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
 * the owner dies; a dir this process can lock has no live owner.  An
 * empty one is removed when its owner's pid is gone from ours (or it is
 * old): a supervisor of another pid namespace between its mkdir and its
 * flock (microseconds) would see its run fail to set up, never a run of
 * its killed.  Probe dirs hold no lock and never hold a process: one is
 * removed when its owner is gone and it is old. */
static void kill_dir(const struct cgroup_env *e, const char *dir, bool v2);
static void remove_dir(struct cgroup_env *e, char *path, bool v2);

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
		bool run = sscanf(de->d_name, RUN_PREFIX "%d-%llu", &pid, &seq) == 2;
		if (!run && sscanf(de->d_name, PROBE_PREFIX "%d", &pid) != 1)
			continue;
		if (pid == (int)getpid() || fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		path = path_join(dir, de->d_name);
		if (run) {
			cleanup_free char *lock = v2 ? NULL : path_join(path, "tasks");
			fd = open(lock ? lock : path, O_RDONLY | O_CLOEXEC);
			if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) < 0)
				continue; /* gone meanwhile, or its owner lives */
			if (cg_read(path, "cgroup.procs", &procs) == 0 && procs[0]) {
				log_warn("cgroup: killing what is left in %s: supervisor %d is gone", path, pid);
				kill_dir(e, path, v2);
				remove_dir(e, steal_ptr(&path), v2);
				continue;
			}
		}
		bool gone = kill(pid, 0) < 0 && errno == ESRCH, old = now - st.st_mtime >= STALE_AGE_S;
		if (run ? !gone && !old : !(gone && old))
			continue;
		if (rmdir(path) == 0)
			log_debug("cgroup: removed %s of dead supervisor %d", path, pid);
	}
	closedir(d);
}

int cgroup_env_probe(struct cgroup_env **out, struct pc_err *err)
{
	struct cgroup_env *e = xcalloc(1, sizeof(*e));
	struct self_cgroups s;

	e->bpf_fd = -1;
	self_cgroups_read(&s);
	probe_v2(e, &s);   /* the device filter too, in the same probe child */
	probe_v1(e, &s);
	self_cgroups_free(&s);
	if (!e->v2_parent && !e->bpf_detail)
		e->bpf_detail = xstrdup("no cgroup2 directory to attach it to");

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
	log_debug("cgroup: device filter %s%s", e->bpf_fd >= 0 ? "on" : "off: ",
		  e->bpf_fd >= 0 ? "" : e->bpf_detail);
	*out = e;
	return 0;
}

static void retry_stale(struct cgroup_env *e)
{
	size_t keep = 0;
	for (size_t i = 0; i < e->n_stale; i++) {
		if (rmdir(e->stale[i]) == 0 || errno == ENOENT)
			free(e->stale[i]);
		else
			e->stale[keep++] = e->stale[i];
	}
	e->n_stale = keep;
}

void cgroup_env_free(struct cgroup_env *e)
{
	if (!e)
		return;
	for (int i = 0; i < 50 && e->n_stale; i++) {
		retry_stale(e);
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

static enum limit_enforcer ctrl_enforcer(const struct cgroup_env *e, int c, const char **dir)
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
		enum limit_enforcer by = ctrl_enforcer(e, c, &dir);
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
		out->by[c] = ctrl_enforcer(e, c, &out->dir[c]);
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

/* ------------------------------------------------------------------- runs */

static int run_setup_v2(struct cgroup_run *c, const struct limits *lim, struct pc_err *err)
{
	const struct cgroup_env *e = c->env;
	c->v2 = path_join(e->v2_parent, c->name);
	if (make_dir(c->v2, err) < 0) {
		free(c->v2);
		c->v2 = NULL;
		return -1;
	}
	c->v2_fd = open(c->v2, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (c->v2_fd < 0)
		return pc_syserr(err, "cgroup", "open %s", c->v2);
	if (flock(c->v2_fd, LOCK_EX) < 0)
		return pc_syserr(err, "cgroup", "lock %s", c->v2);
	/* memory.oom.group stays 0: the OOM killer takes the biggest task
	 * (python), and the jail's init lives on to report how it ended. */
	if ((e->v2_ctrls & CTRL_BIT(CG_MEMORY)) && lim->memory_bytes) {
		if (cg_set_u64(c->v2, "memory.max", lim->memory_bytes, err) < 0)
			return -1;
		if (e->v2_swap && cg_set(c->v2, "memory.swap.max", "0", err) < 0)
			return -1;
	}
	if ((e->v2_ctrls & CTRL_BIT(CG_PIDS)) && lim->pids && cg_set_u64(c->v2, "pids.max", lim->pids, err) < 0)
		return -1;
	if ((e->v2_ctrls & CTRL_BIT(CG_CPU)) && lim->cpu_millis) {
		char buf[48];
		unsigned long long q = lim->cpu_millis * CPU_PERIOD_US / 1000;
		snprintf(buf, sizeof(buf), "%llu %llu", q < CPU_MIN_QUOTA_US ? CPU_MIN_QUOTA_US : q, CPU_PERIOD_US);
		if (cg_set(c->v2, "cpu.max", buf, err) < 0)
			return -1;
	}
	if (e->bpf_fd >= 0 && cgroup_bpf_device_attach(e->bpf_fd, c->v2_fd, err) < 0)
		return -1;
	return 0;
}

static int run_setup_v1(struct cgroup_run *c, int i, const struct limits *lim, struct pc_err *err)
{
	const struct cgroup_env *e = c->env;
	const struct hier *h = &e->v1[i];
	char *d = c->v1[i] = path_join(h->dir, c->name);
	if (make_dir(d, err) < 0) {
		free(d);
		c->v1[i] = NULL;
		return -1;
	}
	if ((h->ctrls & CTRL_BIT(CG_MEMORY)) && lim->memory_bytes) {
		/* limit_in_bytes first: memsw may never be below it */
		if (cg_set_u64(d, "memory.limit_in_bytes", lim->memory_bytes, err) < 0)
			return -1;
		if (e->memsw && cg_set_u64(d, "memory.memsw.limit_in_bytes", lim->memory_bytes, err) < 0)
			return -1;
	}
	if ((h->ctrls & CTRL_BIT(CG_PIDS)) && lim->pids && cg_set_u64(d, "pids.max", lim->pids, err) < 0)
		return -1;
	if ((h->ctrls & CTRL_BIT(CG_CPU)) && lim->cpu_millis) {
		unsigned long long q = lim->cpu_millis * CPU_PERIOD_US / 1000;
		if (cg_set_u64(d, "cpu.cfs_period_us", CPU_PERIOD_US, err) < 0 ||
		    cg_set_u64(d, "cpu.cfs_quota_us", q < CPU_MIN_QUOTA_US ? CPU_MIN_QUOTA_US : q, err) < 0)
			return -1;
	}
	return 0;
}

static void report_limits(const struct cgroup_env *e, const struct limits *lim, struct run_result *r)
{
	static const char *const names[CG_NCTRL] = { "memory_bytes", "pids", "cpu_millis" };
	const uint64_t asked[CG_NCTRL] = { lim->memory_bytes, lim->pids, lim->cpu_millis };
	static const char *const units[CG_NCTRL] = { " bytes", " tasks", "/1000 of a core" };
	for (int c = 0; c < CG_NCTRL; c++) {
		const char *dir;
		enum limit_enforcer by;
		if (!asked[c])
			continue;
		by = ctrl_enforcer(e, c, &dir);
		if (by == ENF_NONE && c == CG_PIDS && rlimit_nproc_per_userns())
			by = ENF_RLIMIT;
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
		cleanup_free char *p = NULL;
		int fd;
		if (!c->v1[i])
			continue;
		p = path_join(c->v1[i], "tasks");
		if ((fd = open(p, O_WRONLY | O_CLOEXEC)) < 0)
			return pc_syserr(err, "cgroup", "open %s", p);
		c->tasks[c->n_tasks++] = fd;
		if (flock(fd, LOCK_EX) < 0)
			return pc_syserr(err, "cgroup", "lock %s", p);
	}
	return 0;
}

int cgroup_run_create(struct cgroup_env *e, const struct limits *lim, struct cgroup_run **out,
		      struct run_result *r, struct pc_err *err)
{
	struct cgroup_run *c = xcalloc(1, sizeof(*c));
	c->env = e;
	c->v2_fd = -1;
	*out = NULL;
	if (e) {
		retry_stale(e);
		c->name = xasprintf(RUN_PREFIX "%d-%llu", (int)getpid(), ++e->seq);
		if (e->v2_parent && run_setup_v2(c, lim, err) < 0)
			goto fail;
		for (int i = 0; i < e->n_v1; i++)
			if (run_setup_v1(c, i, lim, err) < 0)
				goto fail;
		if (open_tasks(c, err) < 0)
			goto fail;
	}
	report_limits(e, lim, r);
	*out = c;
	return 0;
fail:
	cgroup_run_destroy(c);
	return -1;
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
	if (c->v2 && cg_read_key(c->v2, "cpu.stat", "usage_usec", &v) == 0)
		return v;
	for (int i = 0; i < e->n_v1; i++)
		if (c->v1[i] && (e->v1[i].ctrls & CPUACCT_BIT) && cg_read_u64(c->v1[i], "cpuacct.usage", &v) == 0)
			return v / 1000;
	return 0;
}

int cgroup_run_stats(struct cgroup_run *c, struct cgroup_stats *out)
{
	const struct cgroup_env *e = c ? c->env : NULL;
	uint64_t v;

	memset(out, 0, sizeof(*out));
	if (!e)
		return 0;
	if (c->v2 && (e->v2_ctrls & CTRL_BIT(CG_MEMORY))) {
		if (cg_read_key(c->v2, "memory.events", "oom_kill", &v) == 0 && v > 0)
			out->oom_killed = true;
		if (e->v2_peak)
			cg_read_u64(c->v2, "memory.peak", &out->memory_peak_bytes);
	}
	out->cpu_us = cgroup_run_cpu_us(c);
	for (int i = 0; i < e->n_v1; i++) {
		const char *d = c->v1[i];
		if (!d)
			continue;
		if (e->v1[i].ctrls & CTRL_BIT(CG_MEMORY)) {
			/* Before 4.13 there is no oom_kill counter: a hit limit
			 * (failcnt) is the best sign left. */
			if (e->oom_kill_count ? cg_read_key(d, "memory.oom_control", "oom_kill", &v) == 0 && v > 0
					      : cg_read_u64(d, "memory.failcnt", &v) == 0 && v > 0)
				out->oom_killed = true;
			cg_read_u64(d, "memory.max_usage_in_bytes", &out->memory_peak_bytes);
		}
	}
	return 0;
}

static bool pid_listed(const char *procs, int pid)
{
	for (const char *l = procs; l && *l;) {
		if (atoi(l) == pid)
			return true;
		l = strchr(l, '\n');
		l = l ? l + 1 : NULL;
	}
	return false;
}

/* SIGKILL every process listed in dir/cgroup.procs until it is empty.  A
 * pid is pinned with a pidfd and then checked to still be in the cgroup,
 * so a pid reused by an unrelated process is never signalled. */
static void kill_listed(const char *dir)
{
	for (int round = 0; round < 50; round++) {
		cleanup_free char *procs = NULL, *again = NULL;
		int fds[256], pids[256], n = 0;
		char *save = NULL;
		if (cg_read(dir, "cgroup.procs", &procs) < 0 || !procs[0])
			return;
		for (char *t = strtok_r(procs, "\n", &save); t && n < 256; t = strtok_r(NULL, "\n", &save)) {
			int fd = pidfd_open(atoi(t), 0);
			if (fd >= 0) {
				fds[n] = fd;
				pids[n++] = atoi(t);
			}
		}
		if (cg_read(dir, "cgroup.procs", &again) == 0)
			for (int i = 0; i < n; i++)
				if (pid_listed(again, pids[i]))
					pidfd_send_signal(fds[i], SIGKILL, NULL, 0);
		for (int i = 0; i < n; i++)
			close(fds[i]);
		usleep(1000);
	}
}

static void kill_dir(const struct cgroup_env *e, const char *dir, bool v2)
{
	if (v2 && e && e->v2_kill && cg_write(dir, "cgroup.kill", "1") == 0)
		return;
	kill_listed(dir);
}

void cgroup_run_kill(struct cgroup_run *c)
{
	if (!c || !c->env)
		return;
	/* every process of the run is in each of its cgroups: one is enough */
	if (c->v2) {
		kill_dir(c->env, c->v2, true);
		return;
	}
	for (int i = 0; i < c->env->n_v1; i++) {
		if (c->v1[i]) {
			kill_dir(c->env, c->v1[i], false);
			return;
		}
	}
}

/* rmdir fails with EBUSY until the last task has left; that takes a moment
 * after the jail's init is reaped.  Past ~200 ms the dir is kept on the
 * env's list and retried at the next run and at exit. */
static void remove_dir(struct cgroup_env *e, char *path, bool v2)
{
	if (!path)
		return;
	for (int i = 0; i < 100; i++) {
		if (rmdir(path) == 0 || errno == ENOENT) {
			free(path);
			return;
		}
		if (errno != EBUSY)
			break;
		if (i == 5)
			kill_dir(e, path, v2);
		usleep(2000);
	}
	log_warn("cgroup: cannot remove %s yet: %s", path, strerror(errno));
	if (e) {
		e->stale = xrealloc(e->stale, (e->n_stale + 1) * sizeof(*e->stale));
		e->stale[e->n_stale++] = path;
	} else {
		free(path);
	}
}

void cgroup_run_destroy(struct cgroup_run *c)
{
	if (!c)
		return;
	if (c->v2_fd >= 0)
		close(c->v2_fd);
	for (int i = 0; i < c->n_tasks; i++)
		close(c->tasks[i]);
	remove_dir(c->env, c->v2, true);
	for (int i = 0; i < N_V1; i++)
		remove_dir(c->env, c->v1[i], false);
	free(c->name);
	free(c);
}
