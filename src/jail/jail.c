/* pycell: the jail.  The supervisor clones a child into fresh namespaces,
 * writes its id maps, and lets it go; the child builds its root and becomes
 * the jail's init (pid 1), which forks python (pid 2) and reports how it
 * ended (the zygote's: executing pycell-init to do so, small_init.h).  Any
 * failure in the child travels back as a struct jail_msg. */
#include "config.h"

#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/pidfd.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/coverage.h"
#include "base/fault.h"
#include "base/log.h"
#include "jail/caps.h"
#include "jail/cgroup.h"
#include "jail/init_mem.h"
#include "jail/init_wait.h"
#include "jail/jail.h"
#include "jail/jail_program.h"
#include "jail/net.h"
#include "jail/rlimits.h"
#include "jail/rootfs.h"
#include "jail/seccomp.h"
#include "jail/small_init.h"

uid_t jail_host_id_base = 100000;
#define JAIL_ID_RANGE 65536

static void send_msg(int fd, const struct jail_msg *m)
{
	(void)!send(fd, m, sizeof(*m), MSG_NOSIGNAL);
}

static __attribute__((noreturn)) void child_fail(int sync_fd, const struct pc_err *e)
{
	struct jail_msg m = { .type = JAIL_MSG_ERROR, .err = *e };
	send_msg(sync_fd, &m);
	coverage_flush();
	_exit(127);
}

/* The supervisor's command line and environment, as the kernel shows them
 * in /proc/PID/{cmdline,environ}: a jail's init is a clone of the
 * supervisor, so it blanks them (paths of policies and programs, and
 * whatever is in pycell's environment, are none of the jail's business). */
static char *proc_area[2];
static size_t proc_area_len[2];

static void note_area(int i, char **v)
{
	size_t n = 0;
	if (!v || !v[0])
		return;
	while (v[n + 1])
		n++;
	proc_area[i] = v[0];
	proc_area_len[i] = (size_t)(v[n] + strlen(v[n]) + 1 - v[0]);
}

void jail_note_cmdline(char **argv)
{
	extern char **environ;
	note_area(0, argv);
	note_area(1, environ);
}

static void blank_cmdline(void)
{
	static const char name[] = "pycell-init";
	for (int i = 0; i < 2; i++)
		if (proc_area[i])
			memset(proc_area[i], 0, proc_area_len[i]);
	if (proc_area[0] && proc_area_len[0] >= sizeof(name))
		memcpy(proc_area[0], name, sizeof(name));
}

/* ------------------------------------------------------------ jail init */

static volatile pid_t python_pid;
static volatile sig_atomic_t shrink_due;

static void forward_signal(int sig)
{
	if (python_pid > 0)
		kill(python_pid, sig);
}

static void on_alarm(int sig)
{
	(void)sig;
	shrink_due = 1;
}

static void shrink_if_due(void)
{
	if (shrink_due) {
		shrink_due = 0;
		init_mem_shrink();
	}
}

/* How long python runs before init gives back what it inherited
 * (init_mem.h): longer than a warm cell, whose jail's teardown would free
 * it anyway, off the answer's way */
#define INIT_SHRINK_AFTER_S 1

/* what init passes on to python (and pycell-init, init_main.c, too) */
static const int fwd[] = { SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 };

/* pid 1: forward termination signals, reap everything, and report
 * python's wait status (init_wait.h). */
static __attribute__((noreturn)) void jail_init(int sync_fd)
{
	struct sigaction sa = { .sa_handler = forward_signal };
	struct jail_msg m;

	for (size_t i = 0; i < ARRAY_SIZE(fwd); i++)
		sigaction(fwd[i], &sa, NULL);
	/* init keeps none of the run's pipes: EOF on them means python and
	 * its descendants are done writing. */
	for (int fd = 0; fd <= 3; fd++)
		close(fd);
	/* a coverage build's counters are written at the end, from memory
	 * mapped after the start */
	if (init_mem_noted() && coverage_fd() < 0) {
		struct sigaction alarm_sa = { .sa_handler = on_alarm }; /* no SA_RESTART: waitpid returns */
		sigaction(SIGALRM, &alarm_sa, NULL);
		alarm(INIT_SHRINK_AFTER_S);
	}
	init_exit_msg(&m, init_reap(python_pid, shrink_if_due));
	send_msg(sync_fd, &m);
	coverage_flush();
	_exit(0);
}

/* ------------------------------------------------------------ the child */

/* Close every fd from 4 up but the n in keep (-1: none). */
static int close_all_but(const int *keep, int n)
{
	unsigned lo = 4;
	for (;;) {
		/* the lowest kept fd at or above lo */
		int next = -1;
		for (int i = 0; i < n; i++)
			if (keep[i] >= (int)lo && (next < 0 || keep[i] < next))
				next = keep[i];
		if (next < 0)
			return (int)syscall(SYS_close_range, lo, ~0U, 0);
		if ((unsigned)next > lo && syscall(SYS_close_range, lo, (unsigned)next - 1, 0) < 0)
			return -1;
		lo = (unsigned)next + 1;
	}
}

/* Place stdin, stdout, stderr and the tool socket at 0..3 and close
 * everything else but copies above 3 of the sync socket (returned) and
 * of the program socket (*prog_fd, when there is one), and a small init's
 * pycell-init.  Copies come first: a source may sit at 0..3, where
 * another one goes. */
static int place_fds(const struct jail_spec *s, bool small, int sync_fd, int *prog_fd, struct pc_err *err)
{
	const int src[4] = { s->stdio[0], s->stdio[1], s->stdio[2], s->tool_fd };
	int tmp[4], sfd = fcntl(sync_fd, F_DUPFD_CLOEXEC, 4);
	int keep[4] = { sfd, coverage_fd(), -1, small ? s->init_fd : -1 };
	if (sfd < 0)
		return pc_syserr(err, "fds", "copy the sync fd");
	if (*prog_fd >= 0 && (keep[2] = *prog_fd = fcntl(*prog_fd, F_DUPFD_CLOEXEC, 4)) < 0)
		return pc_syserr(err, "fds", "copy the program socket");
	for (int i = 0; i < 4; i++)
		if ((tmp[i] = fcntl(src[i], F_DUPFD_CLOEXEC, 4)) < 0)
			return pc_syserr(err, "fds", "copy fd %d", i);
	for (int i = 0; i < 4; i++)
		if (dup2(tmp[i], i) < 0)
			return pc_syserr(err, "fds", "place fd %d", i);
	if (close_all_but(keep, 4) < 0)
		return pc_syserr(err, "fds", "close_range");
	return sfd;
}

/* ------------------------------------------------------------ the sequence */

/* Can we give the jail a range of host ids?  Only as root of the initial
 * user namespace: root inside another one (unshare -r, a rootless
 * container) owns just the ids mapped to it, so it maps its own id only,
 * like any other user. */
static bool maps_id_range(void)
{
	return geteuid() == 0 && in_initial_userns();
}

/* What the steps share: the spec, the sync socket to the supervisor (it
 * moves above fd 3 in the "fds" step), and whether we map a range. */
struct child {
	const struct jail_spec *s;
	int sync_fd;
	bool as_root;
	bool bare;                   /* no namespaces (jail_spec.bare) */
	bool join_cgroup2;           /* cloned without CLONE_INTO_CGROUP: join it here */
	int prog_fd;                 /* python's end of the program socket, or -1 */
	bool small;                  /* a small init (small_init.h): sharing the caller's memory */
	uint32_t net_addr, net_gw;   /* an egress run's, from the release */
};

/* The release, parent to child: go, with an egress run's addresses. */
struct jail_go {
	char go;
	uint32_t net_addr, net_gw;   /* network byte order; 0: none */
};

/* Before step 1: nothing can be reported yet (the parent reads errors only
 * once it has released us), so a failure here is a plain exit. */
static void child_start(struct child *c)
{
	sigset_t none;
	struct jail_go go = { 0 };

	/* A clean signal state: the supervisor may block signals it reads
	 * with a signalfd, and the zygote ignores SIGCHLD; init needs both. */
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGCHLD, SIG_DFL);
	/* sharing the zygote's memory, its command line is ours: python
	 * blanks its copy (start_python) */
	if (!c->small)
		blank_cmdline();
	/* ps tells a ready jail (made ahead, no program yet) from a running
	 * one; a small init's is named so once released (start_python) */
	prctl(PR_SET_NAME, c->s->park && !c->small ? "pycell-ready" : "pycell-init");
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		_exit(127);
	/* The supervisor is not dumpable and we inherited that, which makes
	 * our /proc files root's: an unprivileged parent could not write our
	 * maps.  Become dumpable and say so (exec resets it anyway). */
	if (!c->as_root && !c->bare && (prctl(PR_SET_DUMPABLE, 1) < 0 || write(c->sync_fd, "r", 1) != 1))
		_exit(127);
	/* wait until the parent has written our id maps (and made our
	 * network, for an egress run) */
	if (read(c->sync_fd, &go, sizeof(go)) != (ssize_t)sizeof(go) || go.go != 'g')
		_exit(127);
	c->net_addr = go.net_addr;
	c->net_gw = go.net_gw;
	/* maps written: not dumpable again, so python (same uid) cannot read
	 * init's memory, a copy of the supervisor's, through /proc/1/mem */
	if (prctl(PR_SET_DUMPABLE, 0) < 0)
		_exit(127);
}

/* 1. The jail's root id when we have a range: host root itself is not
 * mapped, so until now we are "nobody". */
static int step_identity(struct child *c, struct pc_err *err)
{
	if (c->as_root && (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0))
		return pc_syserr(err, "identity", "become root of the jail's user namespace");
	return 0;
}

/* A cgroup namespace rooted in the run's cgroup: the jail sees "/" as
 * its cgroup. */
static int own_cgroupns(struct child *c, struct pc_err *err)
{
	if (!c->bare && unshare(CLONE_NEWCGROUP) < 0)
		return pc_syserr(err, "unshare", "cgroup namespace");
	return 0;
}

/* Into the run's cgroups before anything else, then its namespace; a
 * jail whose cgroups come later goes in after its root (step_cgroups_later). */
static int step_cgroups(struct child *c, struct pc_err *err)
{
	const struct jail_spec *s = c->s;
	if (s->cgroup.later)
		return 0;
	if (c->join_cgroup2) {
		cleanup_close int fd = openat(s->cgroup.dir_fd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
		if (fd < 0 || write(fd, "0", 1) != 1)
			return pc_syserr(err, "cgroup", "join the run's cgroup");
	}
	if (cgroup_enter(s->cgroup.tasks, s->cgroup.n_tasks, err) < 0)
		return -1;
	for (int i = 0; i < s->cgroup.n_tasks; i++)
		close(s->cgroup.tasks[i]);
	return own_cgroupns(c, err);
}

/* The supervisor made the run's v1 cgroups while we built the root (in
 * v1 memory, what that took stays charged to its cgroup: the root's
 * files, not the program's work): wait for their tasks files, before
 * anything of the program can run, and enter them as step_cgroups does.
 * Its end closing means it is gone. */
static int step_cgroups_later(struct child *c, struct pc_err *err)
{
	int tasks[CGROUP_MAX_TASKS], got = 0, rc;
	char word;
	ssize_t n;
	if (!c->s->cgroup.later)
		return 0;
	do
		n = recv_fds(c->sync_fd, &word, 1, tasks, CGROUP_MAX_TASKS, &got);
	while (n < 0 && errno == EINTR);
	if (n == 0)
		_exit(127); /* nobody is left to tell */
	if (n != 1 || word != 'c') {
		for (int i = 0; i < got; i++)
			close(tasks[i]);
		return pc_fail(err, EPROTO, "cgroup", "no word from the supervisor that the jail's cgroups are made");
	}
	rc = cgroup_enter(tasks, got, err);
	for (int i = 0; i < got; i++)
		close(tasks[i]);
	return rc < 0 ? -1 : own_cgroupns(c, err);
}

/* 2. The root filesystem (rootfs.c). */
static int step_rootfs(struct child *c, struct pc_err *err)
{
	/* bare: the host's root, where node reads only what its permission
	 * model lets it (program.c) */
	if (c->bare)
		return chdir("/") < 0 ? pc_syserr(err, "rootfs", "chdir /") : 0;
	return rootfs_build(c->s, c->net_gw, err);
}

/* 3. Network, hostname, session, fds, limits, privileges, seccomp. */
static int step_network(struct child *c, struct pc_err *err)
{
	/* network "none": no socket of an address family could use lo
	 * (seccomp), so it stays down, as a new netns makes it (0.3 ms) */
	if (c->s->policy->network.mode == NET_NONE || c->bare)
		return 0;
	if (c->s->policy->network.mode == NET_EGRESS) {
		if (!c->net_addr)
			return pc_fail(err, EINVAL, "net", "an egress run without its veth pair (a bug in pycell)");
		return net_link_up_inside(c->net_addr, c->net_gw, err);
	}
	return net_loopback_up(err);
}

static int step_hostname(struct child *c, struct pc_err *err)
{
	const char *h = c->s->policy->hostname;
	if (c->bare)
		return 0;   /* the host's own */
	if (sethostname(h, strlen(h)) < 0)
		return pc_syserr(err, "hostname", "sethostname %s", h);
	return 0;
}

static int step_session(struct child *c, struct pc_err *err)
{
	(void)c;
	if (setsid() < 0)
		return pc_syserr(err, "setsid", "setsid");
	return 0;
}

/* The wasm backend's program, node, is executed from WASM_EXEC_FD
 * (config/policy.h says why), opened here in the new root, before the
 * rlimits put that number out of the program's reach. */
static int open_exec_fd(const struct jail_spec *s, struct pc_err *err)
{
	int fd = open(s->argv[0], O_PATH | O_CLOEXEC);
	if (fd < 0)
		return pc_syserr(err, "exec", "open %s", s->argv[0]);
	if (dup3(fd, WASM_EXEC_FD, O_CLOEXEC) < 0) {
		pc_syserr(err, "exec", "give %s descriptor %d", s->argv[0], WASM_EXEC_FD);
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

static int step_fds(struct child *c, struct pc_err *err)
{
	int fd = place_fds(c->s, c->small, c->sync_fd, &c->prog_fd, err);
	if (fd < 0)
		return -1;
	c->sync_fd = fd;
	return policy_is_wasm(c->s->policy) ? open_exec_fd(c->s, err) : 0;
}

static int step_rlimits(struct child *c, struct pc_err *err)
{
	return rlimits_apply(&c->s->policy->limits, !c->bare, err);
}

static int step_capabilities(struct child *c, struct pc_err *err)
{
	const struct policy *p = c->s->policy;
	/* bare: no namespace to map ids in.  As root, the unused host ids a
	 * namespaced jail's map to; otherwise our own, the only ones we have. */
	if (c->bare && maps_id_range())
		return caps_drop_bare(jail_host_id_base + p->jail_uid, jail_host_id_base + p->jail_gid, true, err);
	if (c->bare)
		return caps_drop_bare(geteuid(), getegid(), false, err);
	return caps_drop_jail(p->jail_uid, p->jail_gid, err);
}

/* The kernel clears the parent-death signal at every change of
 * credentials (prctl(2)): the setresuid of step 1 as root, and the one in
 * caps_drop_jail always.  Arm it again once the last one is done, then
 * make sure the parent did not die before that: the supervisor (or the
 * zygote, which dies with it) holds the other end of the sync socket
 * alone, so a hang-up there means it is gone, and no signal would come. */
static int step_parent_death(struct child *c, struct pc_err *err)
{
	struct pollfd pf = { .fd = c->sync_fd, .events = 0 };
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		return pc_syserr(err, "pdeathsig", "prctl(PR_SET_PDEATHSIG) after the credential change");
	if (poll(&pf, 1, 0) < 0)
		return pc_syserr(err, "pdeathsig", "poll the sync socket");
	if (pf.revents & (POLLHUP | POLLERR))
		_exit(127); /* nobody is left to tell */
	return 0;
}

static int step_seccomp(struct child *c, struct pc_err *err)
{
	return c->s->filter ? seccomp_filter_install(c->s->filter, err) : 0;
}

/* The child setup sequence, top to bottom (README, Layout; SECURITY.md
 * says what each step stops).  Each step fails with a pc_err that reaches
 * the supervisor as a setup_failed result naming the step. */
static const struct {
	int (*run)(struct child *c, struct pc_err *err);
	/* for --debug timings; NULL once fd 2 is the program's stderr */
	const char *done;
} steps[] = {
	{ step_identity, "root of its user namespace" },
	{ step_cgroups, "in its cgroups" },
	{ step_rootfs, "root filesystem built" },
	{ step_network, "network up" },
	{ step_hostname, "hostname set" },
	{ step_cgroups_later, "in its cgroups, made meanwhile" },
	{ step_session, "own session" },
	{ step_fds, NULL },
	{ step_rlimits, NULL },
	{ step_capabilities, NULL },
	{ step_parent_death, NULL },
	{ step_seccomp, NULL },
};

/* 4. Python as pid 2: exec'd, or run in the interpreter a zygote holds.
 * A ready jail makes python ahead too: it waits on prog[1] for the
 * program, which init passes on when the supervisor sends it. */
static __attribute__((noreturn)) void start_python(struct child *c)
{
	const struct jail_spec *s = c->s;
	struct pc_err err = { 0 };
	int prog[2] = { -1, -1 }, ready[2] = { -1, -1 };
	pid_t pid;

	/* prog[0] init's end, prog[1] the program's; node (wasm) reads a
	 * pipe, python a socket that carries the memfd.  A bare jail's node
	 * reads its files from the pipe even when they are at hand. */
	bool bytes = (s->park || c->bare) && policy_is_wasm(s->policy);
	if (bytes && pipe2(prog, O_CLOEXEC) == 0) {
		int t = prog[0];
		prog[0] = prog[1];
		prog[1] = t;
	} else if (bytes) {
		pc_syserr(&err, "pipe", "the program pipe");
		child_fail(c->sync_fd, &err);
	} else if (s->park) {
		prog[1] = c->prog_fd; /* the supervisor holds the other end */
	}
	if (c->small && pipe2(ready, O_CLOEXEC) < 0) {
		pc_syserr(&err, "pipe", "the pipe python waits on for pycell-init");
		child_fail(c->sync_fd, &err);
	}
	/* a small init's ready jail, released and built: named as ready
	 * before python, which takes the name, is forked (and pycell-init
	 * names itself so too) */
	if (c->small && s->park)
		prctl(PR_SET_NAME, "pycell-ready");
	pid = fork();
	if (pid < 0) {
		pc_syserr(&err, "fork", "fork python");
		child_fail(c->sync_fd, &err);
	}
	if (pid == 0) {
		if (c->small) {
			/* its own copy of the command line blanked: init's was
			 * the zygote's */
			blank_cmdline();
			small_init_await(ready, s->init_fd);
		}
		if (coverage_fd() >= 0)
			close(coverage_fd());
		/* no pid namespace takes a bare jail's program with its init:
		 * the kernel does, when init dies */
		if (c->bare && prctl(PR_SET_PDEATHSIG, SIGKILL) < 0) {
			pc_syserr(&err, "pdeathsig", "prctl(PR_SET_PDEATHSIG) for the program");
			child_fail(c->sync_fd, &err);
		}
		if (s->filter && seccomp_filter_install_program(s->filter, &err) < 0)
			child_fail(c->sync_fd, &err);
		if (s->run_inline) {
			/* no exec will close it: the program must not be able to
			 * write messages to the supervisor */
			close(c->sync_fd);
			s->run_inline(s, s->park ? prog[1] : -1);
		}
		if (bytes) {
			/* at the number the runner reads (argv says "cell-ready"),
			 * open across the exec */
			if (c->sync_fd == WASM_PROG_FD ||
			    (prog[1] == WASM_PROG_FD ? fcntl(prog[1], F_SETFD, 0) : dup2(prog[1], WASM_PROG_FD)) < 0) {
				pc_fail(&err, EBUSY, "exec", "give node the program pipe as fd %d", WASM_PROG_FD);
				child_fail(c->sync_fd, &err);
			}
			close(prog[0]);
		}
		/* through syscall(2): a coverage build's gcov wraps execve() to
		 * write its counters first, which here would land in the jail's
		 * /tmp, in the program's view (coverage.h) */
		if (policy_is_wasm(s->policy))
			syscall(SYS_execveat, WASM_EXEC_FD, "", s->argv, s->envp, AT_EMPTY_PATH);
		else
			syscall(SYS_execve, s->argv[0], s->argv, s->envp);
		pc_syserr(&err, "exec", "execute %s", s->argv[0]);
		child_fail(c->sync_fd, &err);
	}
	python_pid = pid;
	/* a program that ends before it has read its files must not take
	 * init with it: EPIPE, not the signal */
	signal(SIGPIPE, SIG_IGN);
	if (c->small) {
		close(ready[0]);
		if (s->park)
			close(prog[1]);
		small_init_exec(s->init_fd, c->sync_fd, pid, ready[1], s->park, fwd, ARRAY_SIZE(fwd), &err);
		kill(pid, SIGKILL);
		child_fail(c->sync_fd, &err);
	}
	if (s->park) {
		close(prog[1]);
		/* the run's pipes are python's alone from here (jail_init): their
		 * end must not wait for init to hear that the cell came */
		for (int fd = 0; fd <= 3; fd++)
			close(fd);
		if ((bytes ? program_forward_bytes(c->sync_fd, prog[0], &err)
			   : program_await_start(c->sync_fd, pid, &err)) < 0)
			child_fail(c->sync_fd, &err);
		if (bytes)
			close(prog[0]);
		prctl(PR_SET_NAME, "pycell-init");
	} else if (bytes) {
		close(prog[1]);
		/* EPIPE: node ended first, and its status says how */
		if (program_write_bytes(s, prog[0], &err) < 0 && err.errnum != EPIPE)
			child_fail(c->sync_fd, &err);
		close(prog[0]);
	}
	jail_init(c->sync_fd);
}

static __attribute__((noreturn)) void jail_child(const struct jail_spec *s, int sync_fd, int prog_fd,
						 bool as_root, bool join_cgroup2, bool small)
{
	struct child c = { .s = s, .sync_fd = sync_fd, .as_root = as_root, .bare = s->bare,
			   .join_cgroup2 = join_cgroup2, .prog_fd = prog_fd, .small = small };
	struct pc_err err = { 0 };

	coverage_keep_host();
	child_start(&c);
	log_debug("%6llu us: jail: released by the parent", (unsigned long long)log_elapsed_us());
	for (size_t i = 0; i < ARRAY_SIZE(steps); i++) {
		if (steps[i].run(&c, &err) < 0)
			child_fail(c.sync_fd, &err);
		if (steps[i].done)
			log_debug("%6llu us: jail: %s", (unsigned long long)log_elapsed_us(), steps[i].done);
	}
	start_python(&c);
}

/* ------------------------------------------------------------ the parent */

static int write_id_maps(pid_t pid, const struct policy *p, struct pc_err *err)
{
	const struct { const char *file; unsigned inside, own; } maps[] = {
		{ "uid_map", (unsigned)p->jail_uid, (unsigned)geteuid() },
		{ "gid_map", (unsigned)p->jail_gid, (unsigned)getegid() },
	};
	bool range = maps_id_range();
	char path[64], map[96];

	snprintf(path, sizeof(path), "/proc/%d/setgroups", (int)pid);
	if (write_file(path, "deny") < 0 && errno != ENOENT)
		return pc_syserr(err, "idmap", "write %s", path);
	for (size_t i = 0; i < ARRAY_SIZE(maps); i++) {
		/* As root, the jail gets a range of otherwise unused host ids so
		 * code that switches to another id inside still works; its root is
		 * jail_host_id_base, never host root.  Otherwise only our own id. */
		if (range)
			snprintf(map, sizeof(map), "0 %u %u\n", (unsigned)jail_host_id_base, JAIL_ID_RANGE);
		else
			snprintf(map, sizeof(map), "%u %u 1\n", maps[i].inside, maps[i].own);
		snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, maps[i].file);
		if (write_file(path, map) < 0)
			return pc_syserr(err, "idmap", "write %s (\"%.*s\")", path, (int)strlen(map) - 1, map);
	}
	return 0;
}

/* Its sync socket closed first, then the child ended: killed at once, or
 * given wait_ms to end itself (its pidfd is readable when it has). */
static void end_jail(struct jail *j, int wait_ms)
{
	struct pollfd p = { .fd = j->pidfd, .events = POLLIN };
	close(j->sync_fd);
	if (j->prog_fd >= 0)
		close(j->prog_fd);
	if (!wait_ms || poll(&p, 1, wait_ms) != 1)
		pidfd_send_signal(j->pidfd, SIGKILL, NULL, 0);
	waitpid(j->pid, NULL, __WALL); /* ECHILD when the zygote cloned it */
	close(j->pidfd);
	j->pidfd = j->sync_fd = j->prog_fd = -1;
}

void jail_abort(struct jail *j)
{
	end_jail(j, 0);
}

/* A child not yet released ends itself at its read of the sync socket
 * (child_start), once no end of ours is open (the zygote closes its copy
 * as its reply goes: zygote.c), and is killed only if it has not within a
 * second.  A small init shares the zygote's memory, and one killed in its
 * first steps could leave a sanitizer's state there half switched
 * (small_init_started), which the zygote's next switch aborts on. */
static void end_unreleased(struct jail *j)
{
	end_jail(j, 1000);
}

#define JAIL_NS_FLAGS (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS)

/* Refusals of the host (a sysctl, AppArmor, a container's seccomp), not
 * limits reached: see jail.h. */
static bool refused_for_good(int e)
{
	cleanup_free char *max = NULL;
	size_t len;
	if (e == EPERM || e == ENOSYS || e == EUSERS)
		return true;
	return e == ENOSPC && read_file("/proc/sys/user/max_user_namespaces", 32, &max, &len) == 0 &&
	       strtoul(max, NULL, 10) == 0;
}

bool jail_namespaces_refused(struct pc_err *why)
{
	static int refused = -1;
	static struct pc_err how;

	if (refused < 0) {
		struct clone_args args = { .flags = JAIL_NS_FLAGS, .exit_signal = SIGCHLD };
		long pid = syscall(SYS_clone3, &args, sizeof(args));
		if (pid == 0)
			_exit(0);
		if (pid > 0) {
			while (waitpid((pid_t)pid, NULL, 0) < 0 && errno == EINTR)
				;
			refused = 0;
		} else if (refused_for_good(errno)) {
			pc_syserr(&how, "clone3", "clone3 into new namespaces");
			refused = 1;
		} else {
			return false;   /* not known: asked again next time */
		}
	}
	if (refused && why)
		*why = how;
	return refused == 1;
}

const char *const *jail_layers(bool wasm, bool bare)
{
	static const char *const native[] = { "namespaces", "private root", "no capabilities",
					      "no_new_privs", "seccomp", "rlimits", NULL };
	static const char *const in_jail[] = { "namespaces", "private root", "no capabilities",
					       "no_new_privs", "seccomp", "rlimits", "node permissions",
					       "webassembly", NULL };
	static const char *const alone[] = { "no capabilities", "no_new_privs", "seccomp", "rlimits",
					     "node permissions", "webassembly", NULL };
	return !wasm ? native : bare ? alone : in_jail;
}

/* A small init's start (small_init.h): ours, not the stack's of
 * jail_clone, which returns before init has read it. */
static struct small_start {
	const struct jail_spec *s;
	int sync_fd, prog_fd, close_a, close_b;
	bool as_root;
} small_arg;

static int small_child(void *arg)
{
	const struct small_start *a = arg;
	/* first, before anything that could wait: a small init whose zygote
	 * is gone holds all the zygote's memory (child_start arms it too) */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		_exit(127);
	small_init_started();
	close(a->close_a);
	if (a->close_b >= 0)
		close(a->close_b);
	/* made in the run's cgroup2 directory, or moved there by jail_clone
	 * (small_init_cgroup) */
	jail_child(a->s, a->sync_fd, a->prog_fd, a->as_root, false, true);
}

/* A host that refuses clone with namespaces but not clone3 (a container
 * runtime's seccomp profile, made before pycell-init existed): once
 * refused, jails are cloned as other jails are, their inits copies. */
static bool small_refused;

int jail_clone(const struct jail_spec *s, struct jail *j, struct pc_err *err)
{
	struct clone_args args = {
		.flags = (s->bare ? 0 : JAIL_NS_FLAGS) | CLONE_PIDFD,
		.exit_signal = SIGCHLD,
	};
	bool as_root = maps_id_range() && !s->bare, join_cgroup2 = false;
	cleanup_pair int sv[2] = { -1, -1 };
	cleanup_pair int pv[2] = { -1, -1 };
	int pidfd = -1;
	long pid;
	char ready;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return pc_syserr(err, "spawn", "socketpair");
	/* a native ready jail's python waits for its program on pv[1] */
	if (s->park && !policy_is_wasm(s->policy) && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pv) < 0)
		return pc_syserr(err, "spawn", "the program socketpair");
	args.pidfd = (uint64_t)(uintptr_t)&pidfd;
	if (s->cgroup.into) {
		args.flags |= CLONE_INTO_CGROUP;
		args.cgroup = (uint64_t)s->cgroup.dir_fd;
	}
	if (fault_at("clone"))
		return pc_fail(err, EAGAIN, "clone3", "clone3 into new namespaces: %s (injected fault)",
			       strerror(EAGAIN));
	if (s->small_init && !s->bare && !s->net_setup && !small_refused) {
		bool joined;
		int rc;
		small_arg = (struct small_start){ .s = s, .sync_fd = sv[1], .prog_fd = pv[1], .close_a = sv[0],
						  .close_b = pv[0], .as_root = as_root };
		pid = small_init_clone(small_child, &small_arg, JAIL_NS_FLAGS, s->cgroup.into ? s->cgroup.dir_fd : -1,
				       &pidfd, &joined, err);
		if (pid < 0 && (err->errnum == EPERM || err->errnum == ENOSYS)) {
			small_refused = true;
			log_warn("jail: %s; a warm jail's init is a copy of the zygote from now on", err->msg);
			goto clone3;
		}
		if (pid < 0)
			return -1;
		*j = (struct jail){ .pid = (pid_t)pid, .pidfd = pidfd, .sync_fd = steal_fd(&sv[0]),
				    .prog_fd = steal_fd(&pv[0]), .small = true };
		rc = s->cgroup.into && !joined ? small_init_cgroup(s->cgroup.dir_fd, j->pid, err) : 0;
		if (rc == 0 && !as_root && read(j->sync_fd, &ready, 1) != 1)
			rc = pc_syserr(err, "spawn", "wait for the jail child");
		if (rc < 0) {
			end_unreleased(j);
			jail_small_wait();
			return -1;
		}
		return 0;
	}
clone3:
	pid = syscall(SYS_clone3, &args, sizeof(args));
	if (pid < 0 && errno == ENOSYS && s->bare) {
		/* clone3 refused, as container profiles do (glibc falls back
		 * the same way): clone, whose pidfd comes back where parent_tid
		 * points (the third argument on x86_64 and arm64 alike); the
		 * child joins a cgroup2 directory itself */
		pid = syscall(SYS_clone, (unsigned long)(CLONE_PIDFD | SIGCHLD), NULL, &pidfd, NULL, 0UL);
		join_cgroup2 = s->cgroup.into;
	}
	if (pid < 0 && s->bare)
		return pc_syserr(err, "clone3", "clone3 (no namespaces: this host refuses them)");
	if (pid < 0 && (errno == ENOSYS || errno == ENOSPC || errno == EUSERS || errno == EPERM))
		/* the namespace limits (user.max_*_namespaces) or a policy of
		 * the host (AppArmor, a container's seccomp, a sysctl) */
		return pc_syserr(err, "clone3", "clone3 into new namespaces: this host does not let pycell make "
				 "them (`pycell doctor` says what to change)");
	if (pid < 0)
		return pc_syserr(err, "clone3", "clone3 into new namespaces");
	if (pid == 0) {
		close(sv[0]);
		if (pv[0] >= 0)
			close(pv[0]);
		jail_child(s, sv[1], pv[1], as_root, join_cgroup2, false); /* does not return */
	}
	j->pid = (pid_t)pid;
	j->pidfd = pidfd;
	j->sync_fd = steal_fd(&sv[0]); /* the child's ends close as this returns */
	j->prog_fd = steal_fd(&pv[0]);
	j->bare = s->bare;
	if (!as_root && !s->bare && read(j->sync_fd, &ready, 1) != 1) {
		pc_syserr(err, "spawn", "wait for the jail child");
		end_unreleased(j);
		return -1;
	}
	return 0;
}

int jail_cgroups_done(const struct jail *j, const int *tasks, int n, struct pc_err *err)
{
	if (send_fds(j->sync_fd, "c", 1, tasks, n) < 0 && errno != EPIPE && errno != ECONNRESET)
		return pc_syserr(err, "cgroup", "give jail %d its cgroups", (int)j->pid);
	return 0;
}

int jail_release(const struct jail_spec *s, struct jail *j, struct pc_err *err)
{
	struct jail_go go = { .go = 'g' };

	if (j->released)
		return 0;   /* as the zygote's reply came (spawn_warm.c) */
	log_debug("%6llu us: jail %d: cloned", (unsigned long long)log_elapsed_us(), (int)j->pid);
	/* a bare jail has no user namespace to map */
	if (!j->bare && (fault_at("idmap") ? pc_fail(err, EPERM, "idmap", "write the id maps of jail %d: %s "
						     "(injected fault)", (int)j->pid, strerror(EPERM))
					   : write_id_maps(j->pid, s->policy, err)) < 0) {
		end_unreleased(j);
		return -1;
	}
	log_debug("%6llu us: jail %d: id maps written", (unsigned long long)log_elapsed_us(), (int)j->pid);
	if (s->net_setup && s->net_setup(s->net_ctx, j->pid, &go.net_addr, &go.net_gw, err) < 0) {
		end_unreleased(j);
		return -1;
	}
	/* From here the child goes on alone: into its cgroups, root, limits,
	 * privileges, exec; a step that fails comes back on the sync socket. */
	if (write(j->sync_fd, &go, sizeof(go)) != (ssize_t)sizeof(go)) {
		pc_syserr(err, "spawn", "release the jail child");
		end_unreleased(j);
		return -1;
	}
	return 0;
}
