/* pycell: src/jail/cgroup.c against the real cgroups of this host: probe, make a
 * run's cgroup, put a forked child in it, check each limit bites, kill,
 * remove.  Needs root (exit 77 = skipped otherwise).  Each test checks
 * only what the probe says is enforced, and says so when it skips. */
#include "config.h"

#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "base/loop.h"
#include "base/util.h"
#include "config/result.h"
#include "jail/cgroup.h"
#include "jail/rlimits.h"
#include "unit.h"

static struct cgroup_env *env;
static struct cgroup_info info;

static void setup(void)
{
	struct pc_err err;
	ck_assert_int_eq(cgroup_env_probe(&env, &err), 0);
	cgroup_env_info(env, &info);
}

static void teardown(void)
{
	cgroup_env_free(env);
	env = NULL;
}

static bool need(enum cgroup_ctrl c)
{
	if (info.by[c] == ENF_CGROUP1 || info.by[c] == ENF_CGROUP2)
		return true;
	unit_skip("cgroup: no %s cgroup controller on this host", cgroup_ctrl_name(c));
	return false;
}

/* A child that waits for a byte on a pipe, then runs fn. */
struct child {
	pid_t pid;
	int go;      /* write end: release it */
	int out;     /* read end of its report pipe */
};

static struct child spawn(int (*fn)(int report_fd))
{
	int go[2], out[2];
	struct child c;
	char b;
	ck_assert_int_eq(pipe2(go, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(out, O_CLOEXEC), 0);
	c.pid = fork();
	ck_assert_int_ge(c.pid, 0);
	if (c.pid == 0) {
		close(go[1]);
		close(out[0]);
		if (read(go[0], &b, 1) != 1)
			_exit(120);
		_exit(fn(out[1]));
	}
	close(go[0]);
	close(out[1]);
	c.go = go[1];
	c.out = out[0];
	return c;
}

static int child_wait(struct child *c)
{
	int st;
	close(c->out);
	ck_assert_int_eq(waitpid(c->pid, &st, 0), c->pid);
	return st;
}

static void release(struct child *c)
{
	ck_assert_int_eq(write(c->go, "g", 1), 1);
	close(c->go);
}

static struct cgroup_run *make_run(const struct limits *lim, struct run_result *r)
{
	struct cgroup_run *run;
	struct pc_err err;
	result_init(r);
	if (cgroup_run_create(env, lim, 0, true, &run, r, &err) < 0)
		ck_abort_msg("cgroup_run_create: %s", err.msg);
	return run;
}

/* What clone3 (into the v2 dir) and the jail child (cgroup_enter() on the
 * v1 tasks fds) do, done for pid from here. */
static void attach(struct cgroup_run *run, pid_t pid)
{
	int fds[CGROUP_MAX_TASKS], n = cgroup_run_tasks_fds(run, fds), dir = cgroup_run_clone_fd(run);
	char buf[24];
	int len = snprintf(buf, sizeof(buf), "%d", (int)pid);
	if (dir >= 0) {
		int fd = openat(dir, "cgroup.procs", O_WRONLY | O_CLOEXEC);
		ck_assert_msg(fd >= 0 && write(fd, buf, (size_t)len) == len, "v2 cgroup.procs: %s", strerror(errno));
		close(fd);
	}
	for (int i = 0; i < n; i++)
		ck_assert_msg(pwrite(fds[i], buf, (size_t)len, 0) == len, "tasks fd %d: %s", i, strerror(errno));
}

/* The dir of pid's cgroup below `parent` (the name is its last component). */
static char *run_dir_of(pid_t pid, const char *parent, bool v2)
{
	char path[64], line[512];
	FILE *f;
	char *dir = NULL;
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	f = fopen(path, "re");
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f)) {
		char *slash = strrchr(line, '/');
		bool is_v2 = strncmp(line, "0::", 3) == 0;
		line[strcspn(line, "\n")] = '\0';
		if (!slash || is_v2 != v2 || strncmp(slash + 1, "pycell-", 7) != 0)
			continue;
		if (!dir)
			dir = xasprintf("%s/%s", parent, slash + 1);
		if (access(dir, F_OK) != 0) {
			free(dir);
			dir = NULL;
		}
	}
	fclose(f);
	return dir;
}

static uint64_t read_u64(const char *dir, const char *file)
{
	char *p = xasprintf("%s/%s", dir, file), *s = NULL;
	size_t len;
	uint64_t v;
	ck_assert_msg(read_file(p, 4096, &s, &len) == 0, "read %s", p);
	v = strncmp(s, "max", 3) == 0 ? UINT64_MAX : strtoull(s, NULL, 10);
	free(p);
	free(s);
	return v;
}

static int limit_by(const struct run_result *r, const char *name)
{
	for (int i = 0; i < r->n_limits; i++)
		if (strcmp(r->limits[i].name, name) == 0)
			return (int)r->limits[i].by;
	return -1;
}

static int idle(int fd)
{
	pause();
	return 0;
}

START_TEST(test_limits_written)
{
	struct limits lim = { .memory_bytes = 48 << 20, .pids = 17, .cpu_millis = 250, .file_bytes = 1 << 20,
			      .open_files = 64 };
	struct run_result r;
	struct cgroup_run *run = make_run(&lim, &r);
	struct child c = spawn(idle);
	attach(run, c.pid);

	ck_assert_int_eq(limit_by(&r, "file_bytes"), ENF_RLIMIT);
	ck_assert_int_eq(limit_by(&r, "open_files"), ENF_RLIMIT);
	for (int k = 0; k < CG_NCTRL; k++) {
		static const char *const names[CG_NCTRL] = { "memory_bytes", "pids", "cpu_millis" };
		bool v2 = info.by[k] == ENF_CGROUP2;
		char *d;
		ck_assert_int_eq(limit_by(&r, names[k]), info.by[k]);
		if (info.by[k] != ENF_CGROUP1 && !v2)
			continue;
		d = run_dir_of(c.pid, info.dir[k], v2);
		ck_assert_msg(d != NULL, "child not in a run cgroup below %s", info.dir[k]);
		switch (k) {
		case CG_MEMORY:
			ck_assert_uint_eq(read_u64(d, v2 ? "memory.max" : "memory.limit_in_bytes"), 48 << 20);
			if (!v2 && info.memsw)
				ck_assert_uint_eq(read_u64(d, "memory.memsw.limit_in_bytes"), 48 << 20);
			break;
		case CG_PIDS:
			ck_assert_uint_eq(read_u64(d, "pids.max"), 17);
			break;
		case CG_CPU:
			ck_assert_uint_eq(read_u64(d, v2 ? "cpu.max" : "cpu.cfs_quota_us"), 25000);
			break;
		default:
			break;
		}
		free(d);
	}
	if (info.v2_parent) {
		char *d = run_dir_of(c.pid, info.v2_parent, true);
		ck_assert_msg(d != NULL, "child not in the run's cgroup2 dir");
		free(d);
	}
	cgroup_run_kill(run);
	ck_assert(WIFSIGNALED(child_wait(&c)));
	close(c.go);
	cgroup_run_destroy(run, NULL);
	result_free(&r);
}
END_TEST

static int memory_bomb(int fd)
{
	for (int i = 0; i < 64; i++) {
		char *p = mmap(NULL, 16 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return 3;
		memset(p, i + 1, 16 << 20);
	}
	return 0;
}

START_TEST(test_memory_bomb_oom)
{
	struct limits lim = { .memory_bytes = 32 << 20 };
	struct run_result r;
	struct cgroup_stats st;
	struct cgroup_run *run;
	struct child c;
	int status;
	if (!need(CG_MEMORY))
		return;
	run = make_run(&lim, &r);
	c = spawn(memory_bomb);
	attach(run, c.pid);
	release(&c);
	status = child_wait(&c);
	ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "status %#x", status);
	ck_assert_int_eq(cgroup_run_stats(run, &st), 0);
	ck_assert(st.oom_killed);
	ck_assert_uint_le(st.memory_peak_bytes, 32 << 20);
	ck_assert_uint_ge(st.memory_peak_bytes, 24 << 20);
	cgroup_run_destroy(run, NULL);
	result_free(&r);
}
END_TEST

START_TEST(test_no_oom_when_small)
{
	struct limits lim = { .memory_bytes = 64 << 20 };
	struct run_result r;
	struct cgroup_stats st;
	struct cgroup_run *run;
	struct child c;
	if (!need(CG_MEMORY))
		return;
	run = make_run(&lim, &r);
	c = spawn(idle);
	attach(run, c.pid);
	kill(c.pid, SIGKILL);
	child_wait(&c);
	close(c.go);
	ck_assert_int_eq(cgroup_run_stats(run, &st), 0);
	ck_assert(!st.oom_killed);
	cgroup_run_destroy(run, NULL);
	result_free(&r);
}
END_TEST

static int fork_bomb(int fd)
{
	int n = 0;
	for (;;) {
		pid_t p = fork();
		if (p < 0) {
			int e = errno;
			ck_assert_int_eq(write(fd, &n, sizeof(n)), sizeof(n));
			ck_assert_int_eq(write(fd, &e, sizeof(e)), sizeof(e));
			return 0;
		}
		if (p == 0) {
			pause();
			_exit(0);
		}
		if (++n > 1000)
			return 2;
	}
}

START_TEST(test_fork_bomb_capped)
{
	struct limits lim = { .pids = 10 };
	struct run_result r;
	struct cgroup_run *run;
	struct child c;
	int n = -1, e = 0;
	if (!need(CG_PIDS))
		return;
	run = make_run(&lim, &r);
	c = spawn(fork_bomb);
	attach(run, c.pid);
	release(&c);
	ck_assert_int_eq(read(c.out, &n, sizeof(n)), sizeof(n));
	ck_assert_int_eq(read(c.out, &e, sizeof(e)), sizeof(e));
	ck_assert_int_eq(n, 9);   /* 10 tasks: the bomb and 9 children */
	ck_assert_int_eq(e, EAGAIN);
	ck_assert_int_eq(child_wait(&c), 0);
	/* the 9 orphans are still in the cgroup: kill must get them all */
	cgroup_run_kill(run);
	cgroup_run_destroy(run, NULL);
	result_free(&r);
}
END_TEST

static int spin(int fd)
{
	uint64_t t0 = now_ms();
	volatile uint64_t x = 0;
	while (now_ms() - t0 < 1500)
		x++;
	return 0;
}

START_TEST(test_cpu_half_core)
{
	struct limits lim = { .cpu_millis = 500 };
	struct run_result r;
	struct cgroup_stats st;
	struct cgroup_run *run;
	struct child c;
	if (!need(CG_CPU))
		return;
	run = make_run(&lim, &r);
	c = spawn(spin);
	attach(run, c.pid);
	release(&c);
	ck_assert_int_eq(child_wait(&c), 0);
	ck_assert_int_eq(cgroup_run_stats(run, &st), 0);
	/* 1.5 s of wall time at half a core: 750 ms, give or take a period */
	ck_assert_msg(st.cpu_us >= 600000 && st.cpu_us <= 900000, "cpu_us %llu", (unsigned long long)st.cpu_us);
	cgroup_run_destroy(run, NULL);
	result_free(&r);
}
END_TEST

static int open_devices(int fd)
{
	int res[2];
	int a = open("/dev/null", O_RDWR | O_CLOEXEC);
	int b = open("/dev/kmsg", O_RDONLY | O_CLOEXEC);
	res[0] = a >= 0 ? 0 : errno;
	res[1] = b >= 0 ? 0 : errno;
	ck_assert_int_eq(write(fd, res, sizeof(res)), sizeof(res));
	return 0;
}

START_TEST(test_device_filter)
{
	struct limits lim = { 0 };
	struct run_result r;
	struct cgroup_run *run;
	struct child c;
	int res[2];
	if (!info.bpf_device) {
		unit_skip("cgroup: test_device_filter: no device filter: %s", info.bpf_detail);
		return;
	}
	run = make_run(&lim, &r);
	c = spawn(open_devices);
	attach(run, c.pid);
	release(&c);
	ck_assert_int_eq(read(c.out, res, sizeof(res)), sizeof(res));
	ck_assert_int_eq(res[0], 0);       /* /dev/null (1:3) allowed */
	ck_assert_int_eq(res[1], EPERM);   /* /dev/kmsg (1:11) denied */
	child_wait(&c);
	cgroup_run_destroy(run, NULL);
	result_free(&r);
}
END_TEST

static int run_dirs_left(void)
{
	char prefix[32];
	int n = 0;
	const char *dirs[CG_NCTRL + 1];
	snprintf(prefix, sizeof(prefix), "pycell-%d-", (int)getpid());
	for (int k = 0; k < CG_NCTRL; k++)
		dirs[k] = info.dir[k];
	dirs[CG_NCTRL] = info.v2_parent;
	for (int k = 0; k <= CG_NCTRL; k++) {
		DIR *d = dirs[k] ? opendir(dirs[k]) : NULL;
		struct dirent *de;
		if (!d)
			continue;
		while ((de = readdir(d)))
			if (strncmp(de->d_name, prefix, strlen(prefix)) == 0)
				n++;
		closedir(d);
	}
	return n;
}

START_TEST(test_200_runs_leave_nothing)
{
	struct limits lim = { .memory_bytes = 64 << 20, .pids = 8, .cpu_millis = 1000 };
	for (int i = 0; i < 200; i++) {
		struct run_result r;
		struct cgroup_run *run = make_run(&lim, &r);
		struct child c = spawn(fork_bomb);
		attach(run, c.pid);
		release(&c);
		child_wait(&c);
		cgroup_run_kill(run);
		cgroup_run_destroy(run, NULL);
		result_free(&r);
	}
	ck_assert_int_eq(run_dirs_left(), 0);
}
END_TEST

static int wait_for_go_then_sleep(int report_fd)
{
	(void)report_fd;
	pause();
	return 0;
}

/* A run whose jail still has a process when it is destroyed: destroy
 * returns at once, leaving the dirs (and the process) as they are, and the
 * event loop removes the dirs once the last process has gone; no sleeping
 * on the loop. */
START_TEST(test_removal_waits_on_the_loop)
{
	struct limits lim = { .pids = 8 };
	struct run_result r;
	struct cgroup_run *run = make_run(&lim, &r);
	struct child c = spawn(wait_for_go_then_sleep);
	struct loop *l = loop_new();
	int st;
	attach(run, c.pid);
	release(&c);
	ck_assert_int_gt(run_dirs_left(), 0);
	cgroup_run_destroy(run, l);
	/* nothing was killed or waited for: the process is there, so are the dirs */
	ck_assert_int_eq(kill(c.pid, 0), 0);
	ck_assert_int_gt(run_dirs_left(), 0);
	kill(c.pid, SIGKILL);
	st = child_wait(&c);
	ck_assert(WIFSIGNALED(st));
	for (int i = 0; i < 200 && run_dirs_left() > 0; i++)
		loop_run_once(l, 50);
	ck_assert_int_eq(run_dirs_left(), 0);
	loop_free(l);
	result_free(&r);
}
END_TEST

START_TEST(test_create_reports_missing)
{
	struct limits lim = { .memory_bytes = 1 << 30, .pids = 5, .cpu_millis = 100 };
	struct run_result r;
	struct cgroup_run *run;
	struct pc_err err;
	result_init(&r);
	/* no env: nothing but rlimits, and a warning for each limit nothing enforces */
	ck_assert_int_eq(cgroup_run_create(NULL, &lim, 0, true, &run, &r, &err), 0);
	ck_assert_int_eq(cgroup_run_clone_fd(run), -1);
	ck_assert_int_eq(limit_by(&r, "memory_bytes"), ENF_NONE);
	ck_assert_int_eq(limit_by(&r, "cpu_millis"), ENF_NONE);
	ck_assert_int_eq(limit_by(&r, "pids"), rlimit_nproc_per_userns() ? ENF_RLIMIT : ENF_NONE);
	ck_assert_int_eq(r.n_warnings, rlimit_nproc_per_userns() ? 2 : 3);
	ck_assert_ptr_nonnull(strstr(r.warnings[0], "memory limit of 1073741824 bytes is not enforced"));
	cgroup_run_destroy(run, NULL);
	result_free(&r);
	/* a jail without a user namespace of its own (a bare wasm jail): no
	 * RLIMIT_NPROC claimed, which would count every task of its uid */
	result_init(&r);
	ck_assert_int_eq(cgroup_run_create(NULL, &lim, 0, false, &run, &r, &err), 0);
	ck_assert_int_eq(limit_by(&r, "pids"), ENF_NONE);
	ck_assert_int_eq(r.n_warnings, 3);
	ck_assert_ptr_nonnull(strstr(r.warnings[1], "pids limit of 5 tasks is not enforced"));
	cgroup_run_destroy(run, NULL);
	result_free(&r);
}
END_TEST

static int check_rlimits(int fd)
{
	struct limits lim = { .file_bytes = 4096, .open_files = 16, .pids = 8 };
	struct pc_err err;
	struct rlimit rl;
	int res[4], f;
	char buf[8192] = { 0 };
	signal(SIGXFSZ, SIG_IGN);
	if (rlimits_apply(&lim, true, &err) < 0)
		return 9;
	getrlimit(RLIMIT_CORE, &rl);
	res[0] = (int)rl.rlim_max;
	getrlimit(RLIMIT_NOFILE, &rl);
	res[1] = (int)rl.rlim_max;
	getrlimit(RLIMIT_NPROC, &rl);
	res[2] = rl.rlim_max == RLIM_INFINITY ? -1 : (int)rl.rlim_max;
	f = open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	res[3] = f >= 0 && write(f, buf, sizeof(buf)) == 4096 && write(f, buf, 1) < 0 ? errno : 0;
	ck_assert_int_eq(write(fd, res, sizeof(res)), sizeof(res));
	return 0;
}

START_TEST(test_rlimits_apply)
{
	struct child c = spawn(check_rlimits);
	int res[4];
	release(&c);
	ck_assert_int_eq(read(c.out, res, sizeof(res)), sizeof(res));
	ck_assert_int_eq(child_wait(&c), 0);
	ck_assert_int_eq(res[0], 0);
	ck_assert_int_eq(res[1], 16);
	ck_assert_int_eq(res[2], rlimit_nproc_per_userns() ? 8 : -1);
	ck_assert_int_eq(res[3], EFBIG);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cgroup");
	TCase *t = tcase_create("host");
	SRunner *sr;
	int failed;

	if (geteuid() != 0) {
		fprintf(stderr, "SKIP: test_cgroup needs root to make cgroups\n");
		return 77;
	}
	unit_skip_init();
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 120);
	tcase_add_test(t, test_limits_written);
	tcase_add_test(t, test_memory_bomb_oom);
	tcase_add_test(t, test_no_oom_when_small);
	tcase_add_test(t, test_fork_bomb_capped);
	tcase_add_test(t, test_cpu_half_core);
	tcase_add_test(t, test_device_filter);
	tcase_add_test(t, test_200_runs_leave_nothing);
	tcase_add_test(t, test_removal_waits_on_the_loop);
	tcase_add_test(t, test_create_reports_missing);
	tcase_add_test(t, test_rlimits_apply);
	suite_add_tcase(s, t);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = unit_report("cgroup", sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
