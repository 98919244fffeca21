/* pycell: cgroup files: reading and writing them by path (the probe) or
 * relative to a directory fd opened once (a run's dirs, as crun does);
 * killing what is in a cgroup and removing it (cgroup_int.h). */
#include "config.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/stat.h>

#include "base/log.h"
#include "jail/cgroup_int.h"

/* Run cgroups are numbered per process, not per env: the envs of a
 * server's policies share the parent cgroup, and their runs (ready jails
 * of two pools, a reload's old and new policy) live side by side. */
static unsigned long long run_seq;

char *cg_next_run_name(void)
{
	return xasprintf(RUN_PREFIX "%d-%llu", (int)getpid(), ++run_seq);
}

const char *const ctrl_names[N_V1] = { "memory", "pids", "cpu", "cpuacct" };
const char *const v1_key_file[N_V1] = { "memory.limit_in_bytes", "pids.max", "cpu.cfs_quota_us",
					"cpuacct.usage" };
const char *const v2_key_file[CG_NCTRL] = { "memory.max", "pids.max", "cpu.max" };

char *cg_path_join(const char *a, const char *b)
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

bool cg_has(const char *dir, const char *file)
{
	cleanup_free char *p = cg_path_join(dir, file);
	return access(p, F_OK) == 0;
}

int cg_read(const char *dir, const char *file, char **out)
{
	cleanup_free char *p = cg_path_join(dir, file);
	size_t len;
	return read_file(p, 1 << 20, out, &len);
}

int cg_write(const char *dir, const char *file, const char *val)
{
	cleanup_free char *p = cg_path_join(dir, file);
	return write_file(p, val);
}

/* The number after "key " in "key value" lines: memory.events, cpu.stat,
 * memory.oom_control; -1 (ENOENT) when no line has it. */
static int find_key(const char *s, const char *key, uint64_t *out)
{
	size_t kl = strlen(key);
	for (const char *line = s; line && *line;) {
		const char *nl = strchr(line, '\n');
		if (strncmp(line, key, kl) == 0 && line[kl] == ' ') {
			*out = strtoull(line + kl + 1, NULL, 10);
			return 0;
		}
		line = nl ? nl + 1 : NULL;
	}
	errno = ENOENT;
	return -1;
}

int cg_read_key(const char *dir, const char *file, const char *key, uint64_t *out)
{
	cleanup_free char *s = NULL;
	return cg_read(dir, file, &s) < 0 ? -1 : find_key(s, key, out);
}

/* Controller names in a list ("memory pids" or "rw,cpu,cpuacct") as bits. */
unsigned cg_parse_ctrls(const char *s, const char *seps)
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

unsigned cg_read_ctrls(const char *dir, const char *file)
{
	cleanup_free char *s = NULL;
	if (cg_read(dir, file, &s) < 0)
		return 0;
	return cg_parse_ctrls(s, " \n") & ALL_CTRLS;
}

char *cg_ctrl_list(unsigned bits)
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
int cg_make_dir(const char *path, struct pc_err *err)
{
	if (mkdir(path, 0755) == 0)
		return 0;
	if (errno == EEXIST && rmdir(path) == 0 && mkdir(path, 0755) == 0)
		return 0;
	return pc_syserr(err, "cgroup", "mkdir %s", path);
}

/* ------------------------------------------------------------ relative to a dir fd */

int cg_read_at(int dirfd, const char *file, char **out)
{
	cleanup_close int fd = openat(dirfd, file, O_RDONLY | O_CLOEXEC);
	size_t len;
	if (fd < 0)
		return -1;
	return read_fd_all(fd, 1 << 20, out, &len);
}

int cg_set_at(int dirfd, const char *dir, const char *file, const char *val, struct pc_err *err)
{
	cleanup_close int fd = openat(dirfd, file, O_WRONLY | O_CLOEXEC);
	size_t n = strlen(val);
	if (fd < 0 || write(fd, val, n) != (ssize_t)n)
		return pc_syserr(err, "cgroup", "write \"%s\" to %s/%s", val, dir, file);
	return 0;
}

int cg_set_u64_at(int dirfd, const char *dir, const char *file, uint64_t v, struct pc_err *err)
{
	char buf[24];
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
	return cg_set_at(dirfd, dir, file, buf, err);
}

int cg_read_u64_at(int dirfd, const char *file, uint64_t *out)
{
	cleanup_free char *s = NULL;
	if (cg_read_at(dirfd, file, &s) < 0)
		return -1;
	*out = strncmp(s, "max", 3) == 0 ? UINT64_MAX : strtoull(s, NULL, 10);
	return 0;
}

int cg_read_key_at(int dirfd, const char *file, const char *key, uint64_t *out)
{
	cleanup_free char *s = NULL;
	return cg_read_at(dirfd, file, &s) < 0 ? -1 : find_key(s, key, out);
}

/* ------------------------------------------------------------ kill, remove */

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

/* One pass: by the time a run's cgroup is killed its init has been sent
 * SIGKILL, and the kernel kills the rest of its pid namespace with it, so
 * nothing listed can fork a survivor (the sweep kills the inits it finds
 * the same way). */
void cg_kill_listed(const char *dir)
{
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
}

void cg_kill_dir(const struct cgroup_env *e, const char *dir, bool v2)
{
	if (v2 && e && e->v2_kill && cg_write(dir, "cgroup.kill", "1") == 0)
		return;
	cg_kill_listed(dir);
}

/* rmdir fails with EBUSY until the last task has left; that takes a moment
 * after the jail's init is reaped.  Past ~200 ms the dir is kept on the
 * env's list and retried at the next run and at exit. */
void cg_remove_dir_wait(struct cgroup_env *e, char *path, bool v2)
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
			cg_kill_dir(e, path, v2);
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

void cg_retry_stale(struct cgroup_env *e)
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

