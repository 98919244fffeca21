/* pycell benchmark: the kernel's floor under a run.
 *
 *     tests/bench/floor [-n ITERATIONS] [-c CGROUP_PARENT]
 *
 * What every jail needs, with nothing of pycell in it: a child made by
 * clone3 (into one namespace at a time, then all seven a run gets), a
 * tmpfs mounted in its mount namespace, one cgroup made for it
 * (CLONE_INTO_CGROUP) and removed after, an exec of /bin/true, and the
 * wait for its end (the namespaces' teardown).  Per step: the median wall
 * time and the CPU time (ours and the child's, user + system) per
 * iteration, and what the step adds to the plain fork + exec; and the
 * machine's CPU per iteration (every CPU's busy time in /proc/stat, over
 * the steps's iterations and 0.3 s after them): a net namespace, for one,
 * is torn down by a kernel worker after its last process has gone, which
 * no rusage of ours counts.  tests/bench/bench.py measures pycell's runs
 * the same way.  Run as
 * root (the namespaces other than user need it; the cgroup rows need a
 * writable cgroup2 directory, by default the cgroup2 parent of our own
 * cgroup as /proc/self/cgroup and /proc/self/mountinfo name it).
 *
 * The cgroup dir is made in CGROUP_PARENT: never anything else of the
 * host's is written. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ALL_NS (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | \
		CLONE_NEWCGROUP)

struct step {
	const char *name;
	uint64_t flags;   /* clone3 namespace flags */
	int tmpfs;        /* mount a tmpfs in the child's mount namespace */
	int cgroup;       /* a cgroup made for the child, removed after */
};

static const struct step steps[] = {
	{ "fork + exec /bin/true", 0, 0, 0 },
	{ "+ user namespace", CLONE_NEWUSER, 0, 0 },
	{ "+ mount namespace", CLONE_NEWNS, 0, 0 },
	{ "+ pid namespace", CLONE_NEWPID, 0, 0 },
	{ "+ net namespace", CLONE_NEWNET, 0, 0 },
	{ "+ ipc namespace", CLONE_NEWIPC, 0, 0 },
	{ "+ uts namespace", CLONE_NEWUTS, 0, 0 },
	{ "+ cgroup namespace", CLONE_NEWCGROUP, 0, 0 },
	{ "+ all seven namespaces", ALL_NS, 0, 0 },
	{ "+ all seven + tmpfs root", ALL_NS, 1, 0 },
	{ "+ one cgroup", 0, 0, 1 },
	{ "+ all seven + tmpfs + cgroup (a jail's floor)", ALL_NS, 1, 1 },
};

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Busy time of every CPU (user, nice, system, irq, softirq) in ns, from
 * /proc/stat; 0 when it cannot be read.  Not steal: in a VM that is the
 * host running something else. */
static uint64_t machine_busy_ns(void)
{
	unsigned long long v[8];
	long hz = sysconf(_SC_CLK_TCK);
	FILE *f = fopen("/proc/stat", "r");
	int n = f ? fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
			   &v[5], &v[6], &v[7])
		  : 0;
	if (f)
		fclose(f);
	if (n != 8 || hz <= 0)
		return 0;
	return (v[0] + v[1] + v[2] + v[5] + v[6]) * (1000000000u / (uint64_t)hz);
}

static uint64_t cpu_ns(void)
{
	struct rusage self, kids;
	getrusage(RUSAGE_SELF, &self);
	getrusage(RUSAGE_CHILDREN, &kids);
	return ((uint64_t)(self.ru_utime.tv_sec + self.ru_stime.tv_sec + kids.ru_utime.tv_sec +
			   kids.ru_stime.tv_sec)) * 1000000000u +
	       (uint64_t)(self.ru_utime.tv_usec + self.ru_stime.tv_usec + kids.ru_utime.tv_usec +
			  kids.ru_stime.tv_usec) * 1000u;
}

/* The cgroup2 dir of this process, from /proc/self/cgroup ("0::PATH") and
 * the first cgroup2 mount in /proc/self/mountinfo; NULL when there is none. */
static char *own_cgroup2(void)
{
	char line[4096], path[4096] = "", point[4096] = "";
	FILE *f = fopen("/proc/self/cgroup", "r");
	char *out;
	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, "0::", 3) == 0) {
			line[strcspn(line, "\n")] = '\0';
			snprintf(path, sizeof(path), "%s", line + 3);
		}
	if (f)
		fclose(f);
	f = fopen("/proc/self/mountinfo", "r");
	while (f && fgets(line, sizeof(line), f) && !point[0]) {
		char *sep = strstr(line, " - cgroup2 ");
		char mnt[4096];
		if (sep && sscanf(line, "%*s %*s %*s %*s %4095s", mnt) == 1)
			snprintf(point, sizeof(point), "%s", mnt);
	}
	if (f)
		fclose(f);
	if (!path[0] || !point[0])
		return NULL;
	if (asprintf(&out, "%s%s", point, strcmp(path, "/") == 0 ? "" : path) < 0)
		return NULL;
	return out;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* One iteration of a step; -1 with errno on failure. */
static int once(const struct step *s, const char *cg_parent, unsigned i)
{
	char dir[4200];
	struct clone_args a = { .flags = s->flags, .exit_signal = SIGCHLD };
	int cg_fd = -1, status;
	pid_t pid;

	if (s->cgroup) {
		snprintf(dir, sizeof(dir), "%s/floor-%d-%u", cg_parent, (int)getpid(), i);
		if (mkdir(dir, 0755) < 0 || (cg_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
			return -1;
		a.flags |= CLONE_INTO_CGROUP;
		a.cgroup = (uint64_t)cg_fd;
	}
	pid = (pid_t)syscall(SYS_clone3, &a, sizeof(a));
	if (pid == 0) {
		if (s->tmpfs && (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
				 mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=1m") < 0))
			_exit(120);
		execl("/bin/true", "true", (char *)NULL);
		_exit(127);
	}
	if (cg_fd >= 0)
		close(cg_fd);
	if (pid < 0 || waitpid(pid, &status, 0) != pid) {
		if (s->cgroup)
			rmdir(dir);
		return -1;
	}
	if (s->cgroup && rmdir(dir) < 0)
		return -1;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		errno = WIFEXITED(status) && WEXITSTATUS(status) == 120 ? EPERM : ECHILD;
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	unsigned n = 200;
	char *cg_parent = NULL, *own = NULL;
	uint64_t base_wall = 0, base_cpu = 0;
	uint64_t *wall;
	int opt;

	while ((opt = getopt(argc, argv, "n:c:h")) != -1) {
		if (opt == 'n' && atoi(optarg) > 0)
			n = (unsigned)atoi(optarg);
		else if (opt == 'c')
			cg_parent = optarg;
		else {
			fprintf(stderr, "usage: %s [-n ITERATIONS] [-c CGROUP2_PARENT]\n", argv[0]);
			return opt == 'h' ? 0 : 2;
		}
	}
	if (!cg_parent)
		cg_parent = own = own_cgroup2();
	wall = calloc(n, sizeof(*wall));
	if (!wall) {
		free(own);
		return 1;
	}
	printf("| step | n | wall median ms | CPU per run ms | wall added ms | CPU added ms | machine CPU per run ms |\n");
	printf("|---|---:|---:|---:|---:|---:|---:|\n");
	for (size_t k = 0; k < sizeof(steps) / sizeof(steps[0]); k++) {
		const struct step *s = &steps[k];
		uint64_t c0, cpu, m0, machine;
		unsigned done = 0;
		if (s->cgroup && !cg_parent) {
			printf("| %s | 0 | skipped: no cgroup2 directory of ours | | | | |\n", s->name);
			continue;
		}
		for (unsigned w = 0; w < 5; w++)   /* warm-up */
			if (once(s, cg_parent, w) < 0)
				break;
		m0 = machine_busy_ns();
		c0 = cpu_ns();
		for (unsigned i = 0; i < n; i++) {
			uint64_t t0 = now_ns();
			if (once(s, cg_parent, i) < 0)
				break;
			wall[done++] = now_ns() - t0;
		}
		cpu = cpu_ns() - c0;
		if (done < n) {
			printf("| %s | %u | failed: %s | | | | |\n", s->name, done, strerror(errno));
			continue;
		}
		usleep(300000);   /* the workers' part of the teardown */
		machine = machine_busy_ns() - m0;
		qsort(wall, n, sizeof(*wall), cmp_u64);
		if (k == 0) {
			base_wall = wall[n / 2];
			base_cpu = cpu / n;
		}
		printf("| %s | %u | %.3f | %.3f | %+.3f | %+.3f | %.3f |\n", s->name, n, wall[n / 2] / 1e6,
		       cpu / n / 1e6, ((double)wall[n / 2] - (double)base_wall) / 1e6,
		       ((double)(cpu / n) - (double)base_cpu) / 1e6, machine / n / 1e6);
		fflush(stdout);
	}
	free(wall);
	free(own);
	return 0;
}
