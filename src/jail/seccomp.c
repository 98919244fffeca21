/* pycell: the seccomp-bpf allowlist, compiled once per policy: what each
 * system call gets is decided here, the BPF is written by seccomp_bpf.c
 * (libseccomp only names the calls).  About the ~700 lines a file here
 * keeps to: most of it is the lists of system calls below, which read best
 * beside the rules that use them.
 *
 * Groups a policy selects by name ("seccomp": {"groups": [...]}); an empty
 * list means the default ones (*):
 *   base      always on, listed or not: what the jail's init and any
 *             dynamically linked program need (memory, fd I/O, reading
 *             files, poll/epoll/eventfd/signalfd/timerfd/inotify, signals,
 *             fork-style clone, execve, wait, ids, time, rlimits, send and
 *             receive on open sockets; ioctl, prctl, personality and
 *             seccomp with argument filters)
 *   threads*  clone with CLONE_THREAD (without it pthread_create fails EPERM)
 *   process*  the jailed program may start processes: fork, vfork and
 *             fork-style clone, execveat, pidfd_open, pidfd_send_signal.
 *             Without it a second filter, installed in the program before
 *             it is exec'd, answers EPERM to every way of forking (the
 *             jail's init forks after the first filter, so that one cannot)
 *   fs_write* create, remove, rename and link files and directories, change
 *             modes, owners, times and xattrs (what the mounts make
 *             writable; open(O_CREAT) and write are in base)
 *   sockets*  socket and socketpair (AF_UNIX, plus AF_INET and AF_INET6 when
 *             the policy's network is loopback, which implies this group;
 *             other families EAFNOSUPPORT), bind, listen, accept, connect,
 *             setsockopt, sendmmsg, recvmmsg
 *   ipc*      SysV shared memory, semaphores and messages, POSIX message
 *             queues (the jail has its own IPC namespace)
 *   sched*    set affinity, scheduler, nice and I/O priority
 *   memlock   mlock and friends (bounded by RLIMIT_MEMLOCK)
 *   numa      mbind, get_mempolicy, set_mempolicy
 *   aio       the legacy Linux AIO calls (io_setup, io_submit, ...)
 *
 * Whatever the groups: the known-hostile calls below answer EPERM; clone3
 * and every unlisted call answer ENOSYS; another architecture's calls, x32
 * numbers included, kill the process.  A policy's extra rules
 * ("rules": [{"syscall": NAME, "action": ...}]) replace pycell's handling of
 * that syscall entirely, argument filters included.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include "base/log.h"
#include "base/sha256.h"
#include "jail/seccomp.h"
#include "jail/seccomp_bpf.h"

struct seccomp_filter {
	struct sock_fprog jail;     /* the jail's init and everything below it */
	struct sock_fprog program;  /* added in the jailed program; len 0: none */
	struct sock_filter insns[];
};

#define CLONE_NS_FLAGS                                                                           \
	(CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER |           \
	 CLONE_NEWPID | CLONE_NEWNET)

static const char *const base_calls[] = {
	/* memory */
	"brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "msync", "mincore", "membarrier",
	/* file descriptors */
	"read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev", "preadv2",
	"pwritev2", "lseek", "close", "close_range", "dup", "dup2", "dup3", "fcntl", "flock",
	"fsync", "fdatasync", "sync_file_range", "ftruncate", "fallocate", "pipe", "pipe2",
	"sendfile", "copy_file_range", "splice", "tee", "memfd_create", "ioctl",
	"poll", "ppoll", "select", "pselect6", "epoll_create", "epoll_create1", "epoll_ctl",
	"epoll_wait", "epoll_pwait", "epoll_pwait2", "eventfd", "eventfd2", "signalfd", "signalfd4",
	"timerfd_create", "timerfd_settime", "timerfd_gettime",
	"inotify_init", "inotify_init1", "inotify_add_watch", "inotify_rm_watch",
	/* reading the file system (the loader, imports) */
	"open", "openat", "openat2", "creat", "stat", "fstat", "lstat", "newfstatat", "statx",
	"access", "faccessat", "faccessat2", "readlink", "readlinkat", "getdents", "getdents64",
	"getcwd", "chdir", "fchdir", "statfs", "fstatfs", "fadvise64", "readahead", "umask",
	"getxattr", "lgetxattr", "fgetxattr", "listxattr", "llistxattr", "flistxattr",
	/* signals */
	"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigpending", "rt_sigtimedwait",
	"rt_sigsuspend", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "sigaltstack", "kill", "tkill",
	"tgkill", "pause", "restart_syscall",
	/* processes and threads */
	"clone", "execve", "wait4", "waitid", "exit", "exit_group", "set_tid_address",
	"set_robust_list", "get_robust_list", "rseq", "futex", "futex_waitv", "arch_prctl",
	"prctl", "personality", "seccomp", "sched_yield", "sched_getaffinity", "sched_getparam",
	"sched_getscheduler", "sched_get_priority_max", "sched_get_priority_min",
	"sched_rr_get_interval", "sched_getattr", "getcpu", "getpriority",
	"setsid", "setpgid", "getpgid", "getpgrp", "getsid",
	/* identity (switching ids needs a capability the jail does not have) */
	"getpid", "getppid", "gettid", "getuid", "geteuid", "getgid", "getegid", "getresuid",
	"getresgid", "getgroups", "setuid", "setgid", "setreuid", "setregid", "setresuid",
	"setresgid", "setfsuid", "setfsgid", "setgroups", "capget", "capset",
	/* time */
	"clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "time",
	"times", "alarm", "getitimer", "setitimer", "timer_create", "timer_settime",
	"timer_gettime", "timer_getoverrun", "timer_delete",
	/* limits and system information */
	"getrlimit", "setrlimit", "prlimit64", "getrusage", "sysinfo", "uname", "getrandom",
	/* sockets already open: the tool socket (fd 3), the init's sync socket */
	"sendto", "recvfrom", "sendmsg", "recvmsg", "shutdown", "getsockopt", "getsockname",
	"getpeername",
	NULL
};

static const char *const process_calls[] = {
	"fork", "vfork", "execveat", "pidfd_open", "pidfd_send_signal", NULL
};

static const char *const fs_write_calls[] = {
	"mkdir", "mkdirat", "rmdir", "unlink", "unlinkat", "rename", "renameat", "renameat2",
	"link", "linkat", "symlink", "symlinkat", "chmod", "fchmod", "fchmodat", "chown",
	"fchown", "lchown", "fchownat", "truncate", "utime", "utimes", "futimesat", "utimensat",
	"mknod", "mknodat", "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr",
	"fremovexattr", NULL
};

static const char *const socket_calls[] = {
	"socket", "socketpair", "bind", "listen", "accept", "accept4", "connect", "setsockopt",
	"sendmmsg", "recvmmsg", NULL
};

static const char *const ipc_calls[] = {
	"shmget", "shmat", "shmdt", "shmctl", "semget", "semop", "semtimedop", "semctl", "msgget",
	"msgsnd", "msgrcv", "msgctl", "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive",
	"mq_notify", "mq_getsetattr", NULL
};

static const char *const sched_calls[] = {
	"sched_setaffinity", "sched_setparam", "sched_setscheduler", "sched_setattr",
	"setpriority", "ioprio_get", "ioprio_set", NULL
};

static const char *const memlock_calls[] = {
	"mlock", "mlock2", "munlock", "mlockall", "munlockall", NULL
};

static const char *const numa_calls[] = {
	"mbind", "get_mempolicy", "set_mempolicy", "set_mempolicy_home_node", NULL
};

static const char *const aio_calls[] = {
	"io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents", "io_pgetevents", NULL
};

static const char *const no_calls[] = { NULL };

/* Known-hostile: EPERM, so a program sees "not permitted" rather than "not
 * implemented".  Namespaces and mounts, kernel keyrings, BPF, perf,
 * userfaultfd and io_uring (much of the kernel's recent exploit history),
 * other processes' memory, file handles (open_by_handle_at escapes a
 * chroot), modules and kexec, host clocks, logs and devices. */
static const char *const hostile_calls[] = {
	"unshare", "setns", "mount", "umount2", "fsopen", "fsconfig", "fsmount", "fspick",
	"move_mount", "open_tree", "mount_setattr", "pivot_root", "chroot",
	"keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	"ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "kcmp",
	"pidfd_getfd", "migrate_pages", "move_pages", "open_by_handle_at", "name_to_handle_at",
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
	"reboot", "swapon", "swapoff", "iopl", "ioperm", "modify_ldt", "acct", "syslog",
	"quotactl", "quotactl_fd", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
	"vhangup", "sethostname", "setdomainname", "fanotify_init", "fanotify_mark",
	"lookup_dcookie", "nfsservctl", "uselib",
	NULL
};

struct group {
	const char *name;
	const char *const *calls;
};

/* in the order of seccomp_group_names (config/policy.c) */
static const struct group groups[] = {
	{ "base", base_calls },
	{ "threads", no_calls },  /* an argument filter on clone */
	{ "process", process_calls },
	{ "fs_write", fs_write_calls },
	{ "sockets", socket_calls },
	{ "ipc", ipc_calls },
	{ "sched", sched_calls },
	{ "memlock", memlock_calls },
	{ "numa", numa_calls },
	{ "aio", aio_calls },
};

/* prctl options a Python program (and its libraries) may use; the rest,
 * PR_SET_MM, PR_SET_SECUREBITS, PR_SET_PTRACER, PR_CAP_AMBIENT_RAISE among
 * them, answer EPERM. */
static const uint64_t prctl_allowed[] = {
	PR_SET_PDEATHSIG, PR_GET_PDEATHSIG, PR_GET_DUMPABLE, PR_SET_DUMPABLE, PR_GET_KEEPCAPS,
	PR_SET_NAME, PR_GET_NAME, PR_GET_SECCOMP, PR_CAPBSET_READ, PR_GET_SECUREBITS,
	PR_GET_TIMERSLACK, PR_SET_TIMERSLACK, PR_SET_CHILD_SUBREAPER, PR_GET_CHILD_SUBREAPER,
	PR_SET_NO_NEW_PRIVS, PR_GET_NO_NEW_PRIVS, PR_GET_TID_ADDRESS, PR_SET_THP_DISABLE,
	PR_GET_THP_DISABLE, PR_GET_SPECULATION_CTRL, PR_SET_VMA,
};

/* The default persona and the query (0xffffffff); not READ_IMPLIES_EXEC,
 * ADDR_NO_RANDOMIZE and the like. */
static const uint64_t personality_allowed[] = { PER_LINUX, 0xffffffffULL };

/* What to do with one syscall. */
struct decision {
	int nr;
	const char *name;
	uint32_t action;
	bool builtin;  /* pycell's own handling (argument filters apply) */
};

struct plan {
	struct decision *d;
	size_t n;
	bool threads, process, loopback, wasm;
};

static void plan_set(struct plan *pl, int nr, const char *name, uint32_t action, bool builtin)
{
	for (size_t i = 0; i < pl->n; i++) {
		if (pl->d[i].nr == nr) {
			pl->d[i] = (struct decision){ nr, name, action, builtin };
			return;
		}
	}
	pl->d = xrealloc(pl->d, (pl->n + 1) * sizeof(*pl->d));
	pl->d[pl->n++] = (struct decision){ nr, name, action, builtin };
}

static void plan_calls(struct plan *pl, const char *const *names, uint32_t action)
{
	for (size_t i = 0; names[i]; i++) {
		int nr = seccomp_syscall_resolve_name(names[i]);
		/* Names this architecture or this libseccomp does not know are
		 * left to the default action. */
		if (nr >= 0)
			plan_set(pl, nr, names[i], action, true);
	}
}

static const struct decision *plan_find(const struct plan *pl, const char *name)
{
	int nr = seccomp_syscall_resolve_name(name);
	for (size_t i = 0; i < pl->n; i++)
		if (pl->d[i].nr == nr)
			return &pl->d[i];
	return NULL;
}

static const struct group *group_find(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(groups); i++)
		if (strcmp(groups[i].name, name) == 0)
			return &groups[i];
	return NULL;
}

/* The argument checks, each added to the call's list in the order they
 * are tried (seccomp_bpf.h: the first that holds decides). */
static void check(struct bpf_call *c, unsigned arg, bool high, enum bpf_op op, uint32_t k,
		  uint32_t action)
{
	c->checks[c->n_checks++] = (struct bpf_check){ (uint8_t)arg, high, (uint8_t)op, k, action };
}

_Static_assert(ARRAY_SIZE(prctl_allowed) < BPF_MAX_CHECKS, "prctl's checks would not fit a bpf_call");

/* Argument `arg` equal to one of vals[] (all below 2^32): allowed; any
 * other value, upper half set included: `deny`. */
static void value_allowlist(struct bpf_call *c, unsigned arg, const uint64_t *vals, size_t n,
			    uint32_t deny)
{
	check(c, arg, true, BPF_ARG_NE, 0, deny);
	for (size_t i = 0; i < n; i++)
		check(c, arg, false, BPF_ARG_EQ, (uint32_t)vals[i], SCMP_ACT_ALLOW);
	c->action = deny;
}

/* clone: a namespace flag EPERM; CLONE_THREAD allowed with the "threads"
 * group, else EPERM; the rest, plain fork-style clones, allowed.  The
 * kernel reads only the low 32 bits of the flags. */
static void clone_checks(struct bpf_call *c, bool threads)
{
	check(c, 0, false, BPF_ARG_SET, CLONE_NS_FLAGS, SCMP_ACT_ERRNO(EPERM));
	if (!threads)
		check(c, 0, false, BPF_ARG_SET, CLONE_THREAD, SCMP_ACT_ERRNO(EPERM));
	c->action = SCMP_ACT_ALLOW;
}

/* ioctl: TIOCSTI (type into the terminal), TIOCLINUX and TIOCSETD EPERM,
 * everything else allowed.  TIOCSETD would attach another line discipline
 * (n_gsm, n_hdlc, ...: a long list of kernel bugs) to a pty of the jail's
 * devpts; its argument is a pointer, which a filter cannot read, so it is
 * refused whole: N_TTY, the only one a program needs, is there already.
 * The kernel truncates the request to 32 bits, so the compare is on the
 * low 32 bits only: 0x100005412 is TIOCSTI too (CVE-2019-10063). */
static void ioctl_checks(struct bpf_call *c)
{
	static const uint32_t denied[] = { TIOCSTI, TIOCLINUX, TIOCSETD };
	for (size_t i = 0; i < ARRAY_SIZE(denied); i++)
		check(c, 1, false, BPF_ARG_EQ, denied[i], SCMP_ACT_ERRNO(EPERM));
	c->action = SCMP_ACT_ALLOW;
}

/* arg (64 bits) == v: allowed; else `other` */
static void require_equal(struct bpf_call *c, unsigned arg, uint32_t v, uint32_t other)
{
	check(c, arg, true, BPF_ARG_NE, 0, other);
	check(c, arg, false, BPF_ARG_NE, v, other);
	c->action = SCMP_ACT_ALLOW;
}

/* The argument checks of pycell's own handling of a call (d->builtin). */
static void builtin_checks(struct bpf_call *c, const struct plan *pl, const struct decision *d)
{
	if (strcmp(d->name, "clone") == 0) {
		clone_checks(c, pl->threads);
	} else if (strcmp(d->name, "ioctl") == 0) {
		ioctl_checks(c);
	} else if (strcmp(d->name, "socket") == 0 || strcmp(d->name, "socketpair") == 0) {
		static const uint64_t fam[] = { AF_UNIX, AF_INET, AF_INET6 };
		size_t n = pl->loopback && strcmp(d->name, "socket") == 0 ? 3 : 1;
		value_allowlist(c, 0, fam, n, SCMP_ACT_ERRNO(EAFNOSUPPORT));
	} else if (strcmp(d->name, "prctl") == 0) {
		value_allowlist(c, 0, prctl_allowed, ARRAY_SIZE(prctl_allowed), SCMP_ACT_ERRNO(EPERM));
	} else if (strcmp(d->name, "personality") == 0) {
		value_allowlist(c, 0, personality_allowed, ARRAY_SIZE(personality_allowed),
				SCMP_ACT_ERRNO(EPERM));
	} else if (strcmp(d->name, "seccomp") == 0) {
		/* a program may add filters of its own (they can only take
		 * away), but not with flags: no TSYNC, no user-notification
		 * listener.  Anything else gets the default ENOSYS, "no seccomp
		 * here". */
		require_equal(c, 0, SECCOMP_SET_MODE_FILTER, SCMP_ACT_ERRNO(ENOSYS));
		require_equal(c, 1, 0, SCMP_ACT_ERRNO(ENOSYS));
	}
}

static int by_nr(const void *a, const void *b)
{
	const struct bpf_call *x = a, *y = b;
	return x->nr < y->nr ? -1 : x->nr > y->nr;
}

/* The program for calls[] (any order), default action def: into a new
 * buffer, its length in *len. */
static int write_filter(struct bpf_call *calls, size_t n, uint32_t def, const char *what,
			struct sock_filter **out, size_t *len, struct pc_err *err)
{
	struct sock_filter *f = xmalloc(BPF_MAXINSNS * sizeof(*f));
	int rc;
	qsort(calls, n, sizeof(*calls), by_nr);
	rc = bpf_filter_build(calls, n, def, SCMP_ACT_KILL_PROCESS, seccomp_arch_native(), f);
	if (rc < 0) {
		free(f);
		return pc_fail(err, E2BIG, "seccomp", "the %s filter would be longer than %d instructions",
			       what, BPF_MAXINSNS);
	}
	*out = f;
	*len = (size_t)rc;
	return 0;
}

static int compile_jail(const struct policy *p, struct plan *pl, struct sock_filter **out,
			size_t *n, struct pc_err *err)
{
	cleanup_free struct bpf_call *calls = NULL;
	size_t nc = 0;

	/* clone3 stays at the default ENOSYS: its flags live in a struct in
	 * memory, which BPF cannot read, so namespace flags could not be
	 * refused; and glibc (2.34+) falls back to clone only on ENOSYS, so
	 * EPERM would break pthread_create, fork and posix_spawn. */
	plan_calls(pl, hostile_calls, SCMP_ACT_ERRNO(EPERM));
	for (size_t i = 0; i < p->n_seccomp_rules; i++) {
		const struct seccomp_rule *r = &p->seccomp_rules[i];
		int nr = seccomp_syscall_resolve_name(r->syscall);
		uint32_t action = r->kill ? SCMP_ACT_KILL_PROCESS :
				  r->action_errno > 0 ? SCMP_ACT_ERRNO((uint32_t)r->action_errno) :
				  SCMP_ACT_ALLOW;
		if (nr == __NR_SCMP_ERROR)
			return pc_fail(err, EINVAL, "seccomp",
				       "unknown system call \"%s\" in the policy's seccomp rules",
				       r->syscall);
		if (nr < 0)
			return pc_fail(err, EINVAL, "seccomp",
				       "system call \"%s\" (seccomp rules) does not exist on this architecture",
				       r->syscall);
		if (r->action_errno < 0 || r->action_errno > 4095)
			return pc_fail(err, EINVAL, "seccomp", "errno %d for %s is out of range (1-4095)",
				       r->action_errno, r->syscall);
		plan_set(pl, nr, r->syscall, action, false);
	}

	calls = xcalloc(pl->n, sizeof(*calls));
	for (size_t i = 0; i < pl->n; i++) {
		const struct decision *d = &pl->d[i];
		struct bpf_call *c = &calls[nc];
		if (d->action == SCMP_ACT_ERRNO(ENOSYS))
			continue;  /* the default */
		c->nr = (uint32_t)d->nr;
		c->action = d->action;
		if (d->builtin && d->action == SCMP_ACT_ALLOW)
			builtin_checks(c, pl, d);
		nc++;
	}
	return write_filter(calls, nc, SCMP_ACT_ERRNO(ENOSYS), "jail", out, n, err);
}

/* The second filter, for the jailed program only, when the policy does not
 * have "process": every way of forking answers EPERM.  Threads (clone with
 * CLONE_THREAD) are left to the first filter.  A policy rule for one of
 * these calls takes it out of here too.
 *
 * The wasm backend's program (node) also loses exec once started: execve
 * EPERM, execveat only from WASM_EXEC_FD with AT_EMPTY_PATH (the start
 * itself, jail.c).  And it signals no process, itself included: node
 * needs no signal sent, and a bare jail (jail.c) has no pid namespace
 * around the processes of its uid. */
static int compile_program(const struct plan *pl, struct sock_filter **out, size_t *n,
			   struct pc_err *err)
{
	static const char *const forks[] = { "clone", "fork", "vfork" };
	static const int signals[] = { SCMP_SYS(kill), SCMP_SYS(tkill), SCMP_SYS(tgkill),
				       SCMP_SYS(rt_sigqueueinfo), SCMP_SYS(rt_tgsigqueueinfo) };
	struct bpf_call calls[ARRAY_SIZE(forks) + ARRAY_SIZE(signals) + 2];
	size_t nc = 0;

	memset(calls, 0, sizeof(calls));
	if (pl->wasm) {
		calls[nc++] = (struct bpf_call){ .nr = SCMP_SYS(execve), .action = SCMP_ACT_ERRNO(EPERM) };
		for (size_t i = 0; i < ARRAY_SIZE(signals); i++)
			calls[nc++] = (struct bpf_call){ .nr = (uint32_t)signals[i],
							 .action = SCMP_ACT_ERRNO(EPERM) };
		calls[nc].nr = SCMP_SYS(execveat);
		require_equal(&calls[nc], 0, WASM_EXEC_FD, SCMP_ACT_ERRNO(EPERM));
		require_equal(&calls[nc], 4, AT_EMPTY_PATH, SCMP_ACT_ERRNO(EPERM));
		nc++;
	}
	for (size_t i = 0; i < ARRAY_SIZE(forks); i++) {
		const struct decision *d = plan_find(pl, forks[i]);
		int nr = seccomp_syscall_resolve_name(forks[i]);
		if (nr < 0 || (d && !d->builtin))
			continue;
		calls[nc].nr = (uint32_t)nr;
		calls[nc].action = SCMP_ACT_ERRNO(EPERM);
		/* clone: only without CLONE_THREAD, a new process */
		if (strcmp(forks[i], "clone") == 0) {
			check(&calls[nc], 0, false, BPF_ARG_SET, CLONE_THREAD, SCMP_ACT_ALLOW);
		}
		nc++;
	}
	return write_filter(calls, nc, SCMP_ACT_ALLOW, "program", out, n, err);
}

/* Reads only the policy's rows marked PF_FILTER in config/policy_fields.c
 * (network, seccomp.groups, seccomp.rules): cache_key() hashes exactly
 * those, so a field read here must be marked there too, or a cached
 * program would serve a policy it was not built for. */
static int filter_build(const struct policy *p, struct seccomp_filter **out, struct pc_err *err)
{
	/* Node, for the wasm backend: threads (V8's and libuv's), the
	 * workspace's files, and nothing else of the groups, whatever the
	 * policy lists for CPython: no sockets (fd 3 is open already), no
	 * processes, no exec after its own (compile_program). */
	static const char *const wasm_groups[] = { "base", "threads", "fs_write", NULL };
	static const char *const wasm_calls[] = { "execveat", NULL };
	bool wasm = policy_is_wasm(p);
	struct plan pl = { .loopback = p->network.mode != NET_NONE && !wasm, .wasm = wasm };
	cleanup_free struct sock_filter *jail = NULL;
	cleanup_free struct sock_filter *prog = NULL;
	size_t njail = 0, nprog = 0, ngroups = 0;
	const char *const *names = seccomp_default_groups;
	struct seccomp_filter *f;
	bool sockets = false;
	int rc = -1;

	if (wasm) {
		names = wasm_groups;
		ngroups = ARRAY_SIZE(wasm_groups) - 1;
	} else if (p->n_seccomp_groups > 0) {
		names = (const char *const *)p->seccomp_groups;
		ngroups = p->n_seccomp_groups;
	} else {
		while (names[ngroups])
			ngroups++;
	}
	plan_calls(&pl, base_calls, SCMP_ACT_ALLOW);
	for (size_t i = 0; i < ngroups; i++) {
		const struct group *g = group_find(names[i]);
		if (!g) {
			pc_fail(err, EINVAL, "seccomp", "unknown seccomp group \"%s\"", names[i]);
			goto out;
		}
		plan_calls(&pl, g->calls, SCMP_ACT_ALLOW);
		pl.threads |= strcmp(g->name, "threads") == 0;
		pl.process |= strcmp(g->name, "process") == 0;
		sockets |= strcmp(g->name, "sockets") == 0;
	}
	/* a loopback network is of no use without sockets */
	if (pl.loopback && !sockets)
		plan_calls(&pl, socket_calls, SCMP_ACT_ALLOW);
	if (wasm)
		plan_calls(&pl, wasm_calls, SCMP_ACT_ALLOW);

	if (compile_jail(p, &pl, &jail, &njail, err) < 0)
		goto out;
	if (!pl.process && compile_program(&pl, &prog, &nprog, err) < 0)
		goto out;

	f = xmalloc(sizeof(*f) + (njail + nprog) * sizeof(struct sock_filter));
	memcpy(f->insns, jail, njail * sizeof(struct sock_filter));
	if (nprog)
		memcpy(f->insns + njail, prog, nprog * sizeof(struct sock_filter));
	f->jail = (struct sock_fprog){ .len = (unsigned short)njail, .filter = f->insns };
	f->program = (struct sock_fprog){ .len = (unsigned short)nprog,
					  .filter = nprog ? f->insns + njail : NULL };
	*out = f;
	rc = 0;
out:
	free(pl.d);
	return rc;
}

static int load(const struct sock_fprog *prog, const char *what, struct pc_err *err)
{
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, prog) < 0)
		return pc_syserr(err, "seccomp", "load the %s filter (%u instructions)", what,
				 (unsigned)prog->len);
	return 0;
}

int seccomp_filter_install(const struct seccomp_filter *f, struct pc_err *err)
{
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return pc_syserr(err, "seccomp", "prctl(PR_SET_NO_NEW_PRIVS)");
	return load(&f->jail, "jail", err);
}

int seccomp_filter_install_program(const struct seccomp_filter *f, struct pc_err *err)
{
	if (f->program.len == 0)
		return 0;
	return load(&f->program, "program", err);
}

size_t seccomp_filter_length(const struct seccomp_filter *f)
{
	return f->jail.len;
}

void seccomp_filter_free(struct seccomp_filter *f)
{
	free(f);
}

bool seccomp_filter_equal(const struct seccomp_filter *a, const struct seccomp_filter *b)
{
	return a->jail.len == b->jail.len && a->program.len == b->program.len &&
	       memcmp(a->insns, b->insns,
		      ((size_t)a->jail.len + a->program.len) * sizeof(struct sock_filter)) == 0;
}

/* ------------------------------------------------------------ the cache
 *
 * Building the program takes about 0.23 ms (most of it libseccomp's
 * lookups of some 300 system call names), 0.05 ms to read back, paid by
 * every `pycell run`.  The compiled program is kept per policy in a directory only
 * this user can write (root: /var/cache/pycell, others: ~/.cache/pycell,
 * PYCELL_CACHE_DIR to choose, "none" to turn off).  A file is used only if
 * it is a regular file owned by us, not group- or other-writable, in such a
 * directory, with the right header and size; anything else is recompiled.
 * The key covers what the program is built from: this build of pycell, the
 * libseccomp version, the syscall groups, the extra rules and the network. */

#define CACHE_MAGIC "PYCSEC02"   /* 02: the programs seccomp_bpf.c writes */

struct cache_header {
	char magic[8];
	uint32_t njail, nprog;
};

static void cache_key(const struct policy *p, char out[65])
{
	const struct scmp_version *v = seccomp_version();
	/* the policy's part is every field the filter is built from: the
	 * rows marked PF_FILTER in config/policy_fields.c */
	json_t *k = json_pack("{s:s,s:s,s:[i,i,i],s:o}", "pycell", PACKAGE_VERSION,
			      "build", __DATE__ " " __TIME__, "libseccomp", v ? (int)v->major : 0,
			      v ? (int)v->minor : 0, v ? (int)v->micro : 0, "policy", policy_filter_json(p));
	char *text = json_dumps(k, JSON_COMPACT | JSON_SORT_KEYS);
	sha256_hex(text, strlen(text), out);
	free(text);
	json_decref(k);
}

static struct seccomp_filter *cache_read(const char *path)
{
	struct cache_header h;
	struct seccomp_filter *f;
	struct stat st;
	size_t n;
	cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & (S_IWGRP | S_IWOTH)) || read(fd, &h, sizeof(h)) != (ssize_t)sizeof(h) ||
	    memcmp(h.magic, CACHE_MAGIC, sizeof(h.magic)) != 0 || h.njail == 0 || h.njail > BPF_MAXINSNS ||
	    h.nprog > BPF_MAXINSNS)
		return NULL;
	n = (size_t)h.njail + h.nprog;
	if ((uint64_t)st.st_size != sizeof(h) + n * sizeof(struct sock_filter))
		return NULL;
	f = xmalloc(sizeof(*f) + n * sizeof(struct sock_filter));
	if (read(fd, f->insns, n * sizeof(struct sock_filter)) != (ssize_t)(n * sizeof(struct sock_filter))) {
		free(f);
		return NULL;
	}
	f->jail = (struct sock_fprog){ .len = (unsigned short)h.njail, .filter = f->insns };
	f->program = (struct sock_fprog){ .len = (unsigned short)h.nprog,
					  .filter = h.nprog ? f->insns + h.njail : NULL };
	return f;
}

static void cache_write(const char *dir, const char *path, const struct seccomp_filter *f)
{
	struct cache_header h = { .njail = f->jail.len, .nprog = f->program.len };
	char *tmp = xasprintf("%s/.tmp.%d", dir, (int)getpid());
	size_t n = (size_t)h.njail + h.nprog;
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	memcpy(h.magic, CACHE_MAGIC, sizeof(h.magic));
	if (fd >= 0) {
		bool ok = write_all(fd, &h, sizeof(h)) == 0 &&
			  write_all(fd, f->insns, n * sizeof(struct sock_filter)) == 0;
		close(fd);
		/* rename is atomic: a reader sees the old file or the whole new one */
		if (!ok || rename(tmp, path) < 0)
			unlink(tmp);
	}
	free(tmp);
}

int seccomp_filter_compile(const struct policy *p, struct seccomp_filter **out, struct pc_err *err)
{
	char key[65], *path = NULL;
	cleanup_free char *dir = cache_subdir("seccomp", 0700);
	if (dir) {
		cache_key(p, key);
		path = xasprintf("%s/%s", dir, key);
		*out = cache_read(path);
		if (*out) {
			log_debug("seccomp: program from the cache %s", path);
			free(path);
			return 0;
		}
	}
	if (filter_build(p, out, err) < 0) {
		free(path);
		return -1;
	}
	if (path)
		cache_write(dir, path, *out);
	free(path);
	return 0;
}
