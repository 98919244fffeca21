/* pycell: unit tests for the seccomp filter (src/jail/seccomp.c) and the
 * capability drops (src/jail/caps.c).
 *
 * Each call runs in a forked child that installs the filter, makes one
 * system call with arguments the kernel rejects cheaply (bad pointers,
 * invalid flags) and reports the errno, or dies by a signal.  As root, the
 * same calls run without a filter too: the kernel's own answer must differ
 * from the filter's, or the probe would prove nothing. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config/policy.h"
#include "jail/caps.h"
#include "jail/seccomp.h"
#include "unit.h"
#include "base/util.h"

#define BAD 1UL              /* a pointer that faults */
#define KILLED(sig) (-1000 - (sig))
#define PIPE_FD (-2L)        /* replaced by the read end of a fresh pipe */
#define BUF (-3L)            /* replaced by a valid scratch buffer */
#define HIBIT (1UL << 32)
#define HIGH32 0xffffffff00000000UL
#define I386_GETPID (-4L)    /* special: getpid through int $0x80 */

struct call {
	const char *name;
	long nr;
	long a[6];
	int want;  /* errno under the default filter, 0 for success */
};

/* The known-hostile calls: EPERM from the filter. */
static const struct call hostile[] = {
	{ "unshare", SYS_unshare, { 0x1 }, EPERM },
	{ "setns", SYS_setns, { -1, 0 }, EPERM },
	{ "mount", SYS_mount, { BAD, BAD, BAD, 0, BAD }, EPERM },
	{ "umount2", SYS_umount2, { BAD, 0 }, EPERM },
	{ "fsopen", SYS_fsopen, { BAD, 0 }, EPERM },
	{ "fsconfig", SYS_fsconfig, { -1, 0xdead, 0, 0, 0 }, EPERM },
	{ "fsmount", SYS_fsmount, { -1, 0, 0 }, EPERM },
	{ "fspick", SYS_fspick, { -1, BAD, 0 }, EPERM },
	{ "move_mount", SYS_move_mount, { -1, BAD, -1, BAD, 0 }, EPERM },
	{ "open_tree", SYS_open_tree, { -1, BAD, 0 }, EPERM },
	{ "mount_setattr", SYS_mount_setattr, { -1, BAD, 0, BAD, 0 }, EPERM },
	{ "pivot_root", SYS_pivot_root, { BAD, BAD }, EPERM },
	{ "chroot", SYS_chroot, { BAD }, EPERM },
	{ "keyctl", SYS_keyctl, { 0xdead }, EPERM },
	{ "add_key", SYS_add_key, { BAD, BAD, 0, 0, 0 }, EPERM },
	{ "request_key", SYS_request_key, { BAD, BAD, 0, 0 }, EPERM },
	{ "bpf", SYS_bpf, { 0xdead, 0, 0 }, EPERM },
	{ "perf_event_open", SYS_perf_event_open, { BAD, 0, -1, -1, 0 }, EPERM },
	{ "userfaultfd", SYS_userfaultfd, { 0xdead0000 }, EPERM },
	{ "io_uring_setup", SYS_io_uring_setup, { 0, BAD }, EPERM },
	{ "io_uring_enter", SYS_io_uring_enter, { -1, 0, 0, 0, 0, 0 }, EPERM },
	{ "io_uring_register", SYS_io_uring_register, { -1, 0, 0, 0 }, EPERM },
	{ "ptrace", SYS_ptrace, { 0xdead, 0, 0, 0 }, EPERM },
	{ "process_vm_readv", SYS_process_vm_readv, { 0, 0, 0, 0, 0, 1 }, EPERM },
	{ "process_vm_writev", SYS_process_vm_writev, { 0, 0, 0, 0, 0, 1 }, EPERM },
	{ "process_madvise", SYS_process_madvise, { -1, 0, 0, 0, 0 }, EPERM },
	{ "kcmp", SYS_kcmp, { 0, 0, 0xdead, 0, 0 }, EPERM },
	{ "pidfd_getfd", SYS_pidfd_getfd, { -1, 0, 0 }, EPERM },
	{ "open_by_handle_at", SYS_open_by_handle_at, { -1, BAD, 0 }, EPERM },
	{ "name_to_handle_at", SYS_name_to_handle_at, { -1, BAD, BAD, BAD, 0 }, EPERM },
	{ "kexec_load", SYS_kexec_load, { 0, 0, 0, 0xdead0000 }, EPERM },
	{ "kexec_file_load", SYS_kexec_file_load, { -1, -1, 0, 0, 0xdead0000 }, EPERM },
	{ "init_module", SYS_init_module, { BAD, 0, BAD }, EPERM },
	{ "finit_module", SYS_finit_module, { -1, BAD, 0 }, EPERM },
	{ "delete_module", SYS_delete_module, { BAD, 0 }, EPERM },
	{ "reboot", SYS_reboot, { 0, 0, 0, 0 }, EPERM },
	{ "swapon", SYS_swapon, { BAD, 0 }, EPERM },
	{ "swapoff", SYS_swapoff, { BAD }, EPERM },
	{ "iopl", SYS_iopl, { 4 }, EPERM },
	{ "ioperm", SYS_ioperm, { 0x10000, 8, 0 }, EPERM },
	{ "modify_ldt", SYS_modify_ldt, { 0xdead, 0, 0 }, EPERM },
	{ "acct", SYS_acct, { BAD }, EPERM },
	{ "syslog", SYS_syslog, { 0xdead, 0, 0 }, EPERM },
	{ "quotactl", SYS_quotactl, { 0xdead0000, BAD, 0, 0 }, EPERM },
	{ "settimeofday", SYS_settimeofday, { BAD, BAD }, EPERM },
	{ "clock_settime", SYS_clock_settime, { 0x7fff, BAD }, EPERM },
	{ "clock_adjtime", SYS_clock_adjtime, { 0x7fff, BAD }, EPERM },
	{ "adjtimex", SYS_adjtimex, { BAD }, EPERM },
	{ "sethostname", SYS_sethostname, { BAD, 100000 }, EPERM },
	{ "setdomainname", SYS_setdomainname, { BAD, 100000 }, EPERM },
	{ "fanotify_init", SYS_fanotify_init, { 0xdead0000, 0 }, EPERM },
};

/* Argument filters, clone3, unlisted calls, and calls that must work. */
static const struct call special[] = {
	/* glibc falls back to clone only on ENOSYS */
	{ "clone3", SYS_clone3, { BAD, 0 }, ENOSYS },
	/* CLONE_THREAD without CLONE_SIGHAND: EINVAL once past the filter */
	{ "clone CLONE_NEWUSER", SYS_clone, { CLONE_NEWUSER | CLONE_THREAD }, EPERM },
	{ "clone CLONE_NEWNS", SYS_clone, { CLONE_NEWNS | CLONE_THREAD }, EPERM },
	{ "clone CLONE_NEWPID", SYS_clone, { CLONE_NEWPID | CLONE_THREAD }, EPERM },
	{ "clone CLONE_NEWNET", SYS_clone, { CLONE_NEWNET | CLONE_THREAD }, EPERM },
	{ "clone CLONE_NEWIPC", SYS_clone, { CLONE_NEWIPC | CLONE_THREAD }, EPERM },
	{ "clone CLONE_NEWUTS", SYS_clone, { CLONE_NEWUTS | CLONE_THREAD }, EPERM },
	{ "clone CLONE_NEWCGROUP", SYS_clone, { CLONE_NEWCGROUP | CLONE_THREAD }, EPERM },
	{ "clone CLONE_NEWNS|high bits", SYS_clone, { HIBIT | CLONE_NEWNS | CLONE_THREAD }, EPERM },
	{ "clone CLONE_THREAD", SYS_clone, { CLONE_THREAD }, EINVAL },
	{ "fork", SYS_fork, { 0 }, 0 },
	{ "clone fork", SYS_clone, { SIGCHLD, 0, 0, 0, 0 }, 0 },
	{ "ioctl TIOCSTI", SYS_ioctl, { PIPE_FD, TIOCSTI, BAD }, EPERM },
	{ "ioctl TIOCSTI|high bits", SYS_ioctl, { PIPE_FD, HIBIT | TIOCSTI, BAD }, EPERM },
	{ "ioctl TIOCSTI|all high bits", SYS_ioctl, { PIPE_FD, (long)(HIGH32 | TIOCSTI), BAD },
	  EPERM },
	{ "ioctl TIOCLINUX", SYS_ioctl, { PIPE_FD, TIOCLINUX, BAD }, EPERM },
	{ "ioctl TIOCLINUX|high bits", SYS_ioctl, { PIPE_FD, HIBIT | TIOCLINUX, BAD }, EPERM },
	{ "ioctl TCGETS", SYS_ioctl, { PIPE_FD, TCGETS, BUF }, ENOTTY },
	{ "ioctl TCGETS|high bits", SYS_ioctl, { PIPE_FD, HIBIT | TCGETS, BUF }, ENOTTY },
	{ "ioctl TIOCSTI+1", SYS_ioctl, { PIPE_FD, TIOCSTI + 1, BUF }, ENOTTY },
	{ "ioctl FIONREAD", SYS_ioctl, { PIPE_FD, FIONREAD, BUF }, 0 },
	{ "socket AF_UNIX", SYS_socket, { AF_UNIX, SOCK_STREAM, 0 }, 0 },
	{ "socket AF_INET", SYS_socket, { AF_INET, SOCK_STREAM, 0 }, EAFNOSUPPORT },
	{ "socket AF_INET6", SYS_socket, { AF_INET6, SOCK_STREAM, 0 }, EAFNOSUPPORT },
	{ "socket AF_NETLINK", SYS_socket, { AF_NETLINK, SOCK_RAW, 0 }, EAFNOSUPPORT },
	{ "socket AF_PACKET", SYS_socket, { AF_PACKET, SOCK_RAW, 0 }, EAFNOSUPPORT },
	{ "socket AF_UNIX|high bits", SYS_socket, { HIBIT | AF_UNIX, SOCK_STREAM, 0 }, EAFNOSUPPORT },
	{ "socket -1", SYS_socket, { -1, SOCK_STREAM, 0 }, EAFNOSUPPORT },
	{ "socketpair AF_UNIX", SYS_socketpair, { AF_UNIX, SOCK_STREAM, 0, BUF }, 0 },
	{ "socketpair AF_INET", SYS_socketpair, { AF_INET, SOCK_STREAM, 0, BUF }, EAFNOSUPPORT },
	{ "personality query", SYS_personality, { 0xffffffff }, 0 },
	{ "personality PER_LINUX", SYS_personality, { 0 }, 0 },
	{ "personality READ_IMPLIES_EXEC", SYS_personality, { 0x0400000 }, EPERM },
	{ "personality ADDR_NO_RANDOMIZE", SYS_personality, { 0x0040000 }, EPERM },
	{ "personality high bits", SYS_personality, { HIBIT }, EPERM },
	{ "prctl PR_GET_DUMPABLE", SYS_prctl, { PR_GET_DUMPABLE }, 0 },
	{ "prctl PR_SET_NAME", SYS_prctl, { PR_SET_NAME, BUF }, 0 },
	{ "prctl PR_SET_MM", SYS_prctl, { PR_SET_MM, PR_SET_MM_MAP_SIZE, BAD }, EPERM },
	{ "prctl PR_GET_DUMPABLE|high bits", SYS_prctl, { HIBIT | PR_GET_DUMPABLE }, EPERM },
	{ "seccomp SET_MODE_FILTER", SYS_seccomp, { SECCOMP_SET_MODE_FILTER, 0, BAD }, EFAULT },
	{ "seccomp NEW_LISTENER", SYS_seccomp,
	  { SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, BAD }, ENOSYS },
	{ "syncfs (unlisted)", SYS_syncfs, { -1 }, ENOSYS },
	{ "vmsplice (unlisted)", SYS_vmsplice, { -1, 0, 0, 0 }, ENOSYS },
	{ "x32 getpid", 0x40000000L | SYS_getpid, { 0 }, KILLED(SIGSYS) },
	{ "i386 getpid", I386_GETPID, { 0 }, KILLED(SIGSYS) },
	{ "getpid", SYS_getpid, { 0 }, 0 },
	{ "read -1", SYS_read, { -1, BAD, 1 }, EBADF },
	{ "openat bad path", SYS_openat, { AT_FDCWD, BAD, O_RDONLY }, EFAULT },
	{ "mkdir bad path", SYS_mkdir, { BAD, 0700 }, EFAULT },
	{ "shmget size 0", SYS_shmget, { 0, 0, 0 }, EINVAL },
	{ "sched_setaffinity bad mask", SYS_sched_setaffinity, { 0, 8, BAD }, EFAULT },
	{ "mlock (memlock, off)", SYS_mlock, { 0, 0 }, ENOSYS },
};

static long i386_getpid(void)
{
	long r = 20;  /* __NR_getpid in the i386 table */
	__asm__ volatile("int $0x80" : "+a"(r) : : "memory");
	return r;
}

static long fix_arg(long a, int pipe_rd, char *buf)
{
	if (a == PIPE_FD)
		return pipe_rd;
	if (a == BUF)
		return (long)(uintptr_t)buf;
	return a;
}

/* In a fresh child: install f (and the program filter when asked), make the
 * call.  Returns the errno, 0 on success, or KILLED(signal). */
static int probe(const struct seccomp_filter *f, bool program, const struct call *c)
{
	int res = -1, status, pfd[2];
	pid_t pid;

	ck_assert_int_eq(pipe2(pfd, O_CLOEXEC), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		static char buf[256] = "pycell";
		struct pc_err err;
		int p2[2];
		pid_t self = getpid();
		long r, a[6];

		if (pipe(p2) < 0)
			_exit(101);
		for (int i = 0; i < 6; i++)
			a[i] = fix_arg(c->a[i], p2[0], buf);
		/* A kernel without i386 system calls answers int $0x80 with
		 * SIGSEGV: the default action, not a sanitizer's handler that
		 * would end the child with its report and status 1 (set before
		 * the filters, which need not allow rt_sigaction). */
		if (c->nr == I386_GETPID && signal(SIGSEGV, SIG_DFL) == SIG_ERR)
			_exit(101);
		if (f && seccomp_filter_install(f, &err) < 0)
			_exit(100);
		if (f && program && seccomp_filter_install_program(f, &err) < 0)
			_exit(100);
		errno = 0;
		if (c->nr == I386_GETPID)
			r = i386_getpid() < 0 ? -1 : 0;
		else
			r = syscall(c->nr, a[0], a[1], a[2], a[3], a[4], a[5]);
		if (getpid() != self)
			_exit(0);  /* a fork that got through: the new child leaves */
		res = r < 0 ? errno : 0;
		if (write(pfd[1], &res, sizeof(res)) != sizeof(res))
			_exit(102);
		_exit(0);
	}
	close(pfd[1]);
	if (read(pfd[0], &res, sizeof(res)) != sizeof(res))
		res = -1;
	close(pfd[0]);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	if (WIFSIGNALED(status))
		return KILLED(WTERMSIG(status));
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "%s: probe child failed (status %#x)", c->name, status);
	return res;
}

static struct seccomp_filter *compile(struct policy *p)
{
	struct seccomp_filter *f = NULL;
	struct pc_err err = { 0 };
	int rc = seccomp_filter_compile(p, &f, &err);
	ck_assert_msg(rc == 0, "compile: %s: %s", err.step, err.msg);
	return f;
}

static struct seccomp_filter *compile_default(enum net_mode net)
{
	struct policy p;
	memset(&p, 0, sizeof(p));
	p.network.mode = net;
	return compile(&p);
}

static const char *res_name(int r, char *buf, size_t n)
{
	if (r <= KILLED(0))
		snprintf(buf, n, "killed by signal %d", KILLED(0) - r);
	else if (r == 0)
		snprintf(buf, n, "success");
	else
		snprintf(buf, n, "%s (%d)", strerror(r), r);
	return buf;
}

static void expect(const struct seccomp_filter *f, bool program, const struct call *c, int want)
{
	char a[64], b[64];
	int got = probe(f, program, c);
	ck_assert_msg(got == want, "%s: got %s, expected %s", c->name, res_name(got, a, sizeof(a)),
		      res_name(want, b, sizeof(b)));
}

static bool have_all_caps(void)
{
	return geteuid() == 0 && prctl(PR_CAPBSET_READ, CAP_SYS_ADMIN) == 1;
}

START_TEST(test_hostile_eperm)
{
	struct seccomp_filter *f = compile_default(NET_NONE);
	for (size_t i = 0; i < ARRAY_SIZE(hostile); i++)
		expect(f, true, &hostile[i], hostile[i].want);
	seccomp_filter_free(f);
}
END_TEST

START_TEST(test_special_calls)
{
	struct seccomp_filter *f = compile_default(NET_NONE);
	for (size_t i = 0; i < ARRAY_SIZE(special); i++) {
		if (special[i].nr == I386_GETPID && probe(NULL, false, &special[i]) != 0) {
			printf("seccomp: i386 system calls are not available on this kernel; "
			       "\"i386 getpid\" not checked\n");
			continue;
		}
		expect(f, true, &special[i], special[i].want);
	}
	seccomp_filter_free(f);
}
END_TEST

/* Without the filter the kernel answers every probe differently: the
 * argument choices reach its argument checks, not a permission check. */
START_TEST(test_control_unfiltered)
{
	size_t inconclusive = 0;
	if (!have_all_caps()) {
		unit_skip("seccomp: test_control_unfiltered: needs root with a full capability set");
		return;
	}
	for (size_t i = 0; i < ARRAY_SIZE(hostile); i++) {
		char a[64];
		int got = probe(NULL, false, &hostile[i]);
		if (got == EPERM) {
			printf("seccomp: %s answers EPERM without a filter here (%s)\n", hostile[i].name,
			       res_name(got, a, sizeof(a)));
			inconclusive++;
		}
	}
	/* kexec or module loading may be locked down on a host; more than a
	 * couple means the probe arguments are wrong */
	ck_assert_msg(inconclusive <= 3, "%zu hostile probes answer EPERM without a filter",
		      inconclusive);
	for (size_t i = 0; i < ARRAY_SIZE(special); i++) {
		char a[64];
		int got;
		if (special[i].want == 0 || special[i].want == ENOTTY || special[i].want == EBADF ||
		    special[i].want == EFAULT || special[i].want == EINVAL ||
		    special[i].nr == SYS_seccomp || special[i].nr == I386_GETPID ||
		    special[i].nr == SYS_mlock || special[i].nr == (0x40000000L | SYS_getpid) ||
		    strcmp(special[i].name, "socket -1") == 0)
			continue;
		got = probe(NULL, false, &special[i]);
		ck_assert_msg(got != special[i].want, "%s: the kernel itself answers %s", special[i].name,
			      res_name(got, a, sizeof(a)));
	}
}
END_TEST

START_TEST(test_x32_killed_without_filter_enosys)
{
	const struct call c = { "x32 getpid", 0x40000000L | SYS_getpid, { 0 }, 0 };
	char a[64];
	int got = probe(NULL, false, &c);
	/* the kernel alone: ENOSYS without x32 support, a pid with it */
	ck_assert_msg(got == ENOSYS || got == 0, "unfiltered x32 call: %s", res_name(got, a, sizeof(a)));
}
END_TEST

START_TEST(test_loopback_inet)
{
	struct seccomp_filter *f = compile_default(NET_LOOPBACK);
	const struct call inet = { "socket AF_INET", SYS_socket, { AF_INET, SOCK_STREAM, 0 }, 0 };
	const struct call inet6 = { "socket AF_INET6", SYS_socket, { AF_INET6, SOCK_DGRAM, 0 }, 0 };
	const struct call inet_hi = { "socket AF_INET|high bits", SYS_socket,
				      { HIBIT | AF_INET, SOCK_STREAM, 0 }, 0 };
	const struct call netlink = { "socket AF_NETLINK", SYS_socket, { AF_NETLINK, SOCK_RAW, 0 }, 0 };
	const struct call pair = { "socketpair AF_INET", SYS_socketpair,
				   { AF_INET, SOCK_STREAM, 0, BUF }, 0 };
	expect(f, true, &inet, 0);
	expect(f, true, &inet6, 0);
	expect(f, true, &inet_hi, EAFNOSUPPORT);
	expect(f, true, &netlink, EAFNOSUPPORT);
	expect(f, true, &pair, EAFNOSUPPORT);
	seccomp_filter_free(f);
}
END_TEST

START_TEST(test_vsock_refused)
{
	/* only socket(): never connect anywhere over AF_VSOCK */
	const struct call vsock = { "socket AF_VSOCK", SYS_socket, { AF_VSOCK, SOCK_STREAM, 0 }, 0 };
	const struct call vsock_hi = { "socket AF_VSOCK|high bits", SYS_socket,
				       { HIBIT | AF_VSOCK, SOCK_STREAM, 0 }, 0 };
	struct seccomp_filter *f = compile_default(NET_NONE);
	struct seccomp_filter *lo = compile_default(NET_LOOPBACK);
	expect(f, true, &vsock, EAFNOSUPPORT);
	expect(f, true, &vsock_hi, EAFNOSUPPORT);
	expect(lo, true, &vsock, EAFNOSUPPORT);
	seccomp_filter_free(f);
	seccomp_filter_free(lo);
}
END_TEST

static struct seccomp_filter *compile_groups(char **groups, size_t n)
{
	struct policy p;
	memset(&p, 0, sizeof(p));
	p.seccomp_groups = groups;
	p.n_seccomp_groups = n;
	return compile(&p);
}

START_TEST(test_groups_minimal)
{
	char *groups[] = { "base" };
	struct seccomp_filter *f = compile_groups(groups, ARRAY_SIZE(groups));
	const struct call calls[] = {
		{ "mkdir", SYS_mkdir, { BAD, 0700 }, ENOSYS },
		{ "unlink", SYS_unlink, { BAD }, ENOSYS },
		{ "socket AF_UNIX", SYS_socket, { AF_UNIX, SOCK_STREAM, 0 }, ENOSYS },
		{ "shmget", SYS_shmget, { 0, 0, 0 }, ENOSYS },
		{ "sched_setaffinity", SYS_sched_setaffinity, { 0, 8, BAD }, ENOSYS },
		{ "clone CLONE_THREAD", SYS_clone, { CLONE_THREAD }, EPERM },
		{ "clone CLONE_NEWUSER", SYS_clone, { CLONE_NEWUSER | CLONE_THREAD }, EPERM },
		{ "clone CLONE_NEWUSER without thread", SYS_clone, { CLONE_NEWUSER | CLONE_FS }, EPERM },
		{ "openat bad path", SYS_openat, { AT_FDCWD, BAD, O_RDONLY }, EFAULT },
		{ "mount", SYS_mount, { BAD, BAD, BAD, 0, BAD }, EPERM },
		/* the program may not fork, in any of the ways there are */
		{ "fork", SYS_fork, { 0 }, EPERM },
		{ "vfork", SYS_vfork, { 0 }, EPERM },
		{ "clone fork", SYS_clone, { SIGCHLD, 0, 0, 0, 0 }, EPERM },
		{ "clone vfork", SYS_clone, { CLONE_VM | CLONE_VFORK | SIGCHLD, 0, 0, 0, 0 }, EPERM },
		{ "clone3", SYS_clone3, { BAD, 0 }, ENOSYS },
	};
	const struct call init_fork = { "clone fork (init)", SYS_clone, { SIGCHLD, 0, 0, 0, 0 }, 0 };
	for (size_t i = 0; i < ARRAY_SIZE(calls); i++)
		expect(f, true, &calls[i], calls[i].want);
	/* the jail's init, which has only the first filter, still forks */
	expect(f, false, &init_fork, 0);
	seccomp_filter_free(f);
}
END_TEST

START_TEST(test_groups_threads_no_process)
{
	char *groups[] = { "base", "threads", "fs_write" };
	struct seccomp_filter *f = compile_groups(groups, ARRAY_SIZE(groups));
	const struct call thread = { "clone CLONE_THREAD", SYS_clone, { CLONE_THREAD }, 0 };
	const struct call fork_ = { "clone fork", SYS_clone, { SIGCHLD, 0, 0, 0, 0 }, 0 };
	const struct call mkdir_ = { "mkdir", SYS_mkdir, { BAD, 0700 }, 0 };
	expect(f, true, &thread, EINVAL);
	expect(f, true, &fork_, EPERM);
	expect(f, true, &mkdir_, EFAULT);
	seccomp_filter_free(f);
}
END_TEST

/* The wasm backend's filter (SECURITY.md, "The wasm backend"): node is
 * executed from WASM_EXEC_FD and from nowhere else, and the program can
 * never own a descriptor of that number (RLIMIT_NOFILE at most it), so no
 * exec is left once node has started; no sockets, no forks, whatever the
 * policy's groups say.  The child reports each refusal, then starts
 * /bin/true the one allowed way. */
/* ... and node signals no process, itself included (a bare jail has no
 * pid namespace: jail.c) */
START_TEST(test_wasm_exec_only_from_its_descriptor)
{
	static const int want[] = { EPERM, EPERM, EPERM, EPERM, EBADF, ENOSYS, EPERM, EPERM, EPERM, EPERM, 0 };
	int got[ARRAY_SIZE(want)], pfd[2], status;
	struct policy p;
	struct seccomp_filter *f;
	pid_t pid;

	policy_init_default(&p);
	free(p.backend);
	p.backend = xstrdup("wasm");
	f = compile(&p);
	ck_assert_int_eq(pipe2(pfd, O_CLOEXEC), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char *argv[] = { "true", NULL }, *envp[] = { NULL };
		struct rlimit rl = { WASM_EXEC_FD, WASM_EXEC_FD };
		struct pc_err err;
		int n = 0, fd = open("/bin/true", O_PATH | O_CLOEXEC);
		if (fd < 0 || dup3(fd, WASM_EXEC_FD, O_CLOEXEC) < 0 || setrlimit(RLIMIT_NOFILE, &rl) < 0)
			_exit(100);
		if (seccomp_filter_install(f, &err) < 0 || seccomp_filter_install_program(f, &err) < 0)
			_exit(101);
#define TRY(call) (got[n++] = (call) < 0 ? errno : 0)
		TRY(syscall(SYS_execve, "/bin/true", argv, envp));
		TRY(syscall(SYS_execveat, AT_FDCWD, "/bin/true", argv, envp, 0));
		TRY(syscall(SYS_execveat, fd, "", argv, envp, AT_EMPTY_PATH));
		TRY(syscall(SYS_execveat, WASM_EXEC_FD, "", argv, envp, 0));
		TRY(dup2(0, WASM_EXEC_FD));
		TRY(socket(AF_UNIX, SOCK_STREAM, 0));
		TRY(syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0));
		TRY(kill(getppid(), 0));
		TRY(kill(getpid(), 0));
		TRY(syscall(SYS_tgkill, getpid(), gettid(), 0));
		got[n++] = (fcntl(WASM_EXEC_FD, F_GETFD) & FD_CLOEXEC) ? 0 : -1;
#undef TRY
		if (write(pfd[1], got, sizeof(got)) != sizeof(got))
			_exit(102);
		syscall(SYS_execveat, WASM_EXEC_FD, "", argv, envp, AT_EMPTY_PATH);
		_exit(103);
	}
	close(pfd[1]);
	ck_assert_int_eq(read(pfd[0], got, sizeof(got)), sizeof(got));
	close(pfd[0]);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	for (size_t i = 0; i < ARRAY_SIZE(want); i++)
		ck_assert_msg(got[i] == want[i], "check %zu: got %d (%s), expected %d", i, got[i],
			      strerror(got[i]), want[i]);
	/* /bin/true ran: the one way in worked */
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %#x", status);
	seccomp_filter_free(f);
	policy_free(&p);
}
END_TEST

START_TEST(test_groups_optional)
{
	char *groups[] = { "base", "memlock", "aio", "numa" };
	struct seccomp_filter *f = compile_groups(groups, ARRAY_SIZE(groups));
	const struct call mlock_ = { "mlock", SYS_mlock, { 0, 0 }, 0 };
	const struct call io_setup = { "io_setup", SYS_io_setup, { 0, BAD }, 0 };
	expect(f, true, &mlock_, 0);
	expect(f, true, &io_setup, EFAULT);
	seccomp_filter_free(f);
}
END_TEST

START_TEST(test_group_names)
{
	size_t n = 0;
	for (size_t i = 0; seccomp_group_names[i]; i++, n++) {
		char *one[] = { (char *)seccomp_group_names[i] };
		seccomp_filter_free(compile_groups(one, 1));
	}
	ck_assert_uint_ge(n, 5);
	for (size_t i = 0; seccomp_default_groups[i]; i++) {
		bool known = false;
		for (size_t j = 0; seccomp_group_names[j]; j++)
			known |= strcmp(seccomp_default_groups[i], seccomp_group_names[j]) == 0;
		ck_assert_msg(known, "default group %s is not in seccomp_group_names",
			      seccomp_default_groups[i]);
	}
}
END_TEST

START_TEST(test_unknown_group)
{
	char *groups[] = { "base", "nosuchgroup" };
	struct policy p;
	struct seccomp_filter *f = NULL;
	struct pc_err err = { 0 };
	memset(&p, 0, sizeof(p));
	p.seccomp_groups = groups;
	p.n_seccomp_groups = 2;
	ck_assert_int_eq(seccomp_filter_compile(&p, &f, &err), -1);
	ck_assert_ptr_null(f);
	ck_assert_str_eq(err.step, "seccomp");
	ck_assert_str_eq(err.msg, "unknown seccomp group \"nosuchgroup\"");
}
END_TEST

static int compile_rules(struct seccomp_rule *rules, size_t n, struct seccomp_filter **f,
			 struct pc_err *err)
{
	struct policy p;
	memset(&p, 0, sizeof(p));
	p.seccomp_rules = rules;
	p.n_seccomp_rules = n;
	return seccomp_filter_compile(&p, f, err);
}

START_TEST(test_rules)
{
	struct seccomp_rule rules[] = {
		{ "getppid", EACCES, false },
		{ "uname", 0, true },
		{ "ptrace", 0, false },
		{ "ioctl", 0, false },
		{ "syncfs", 0, false },
	};
	struct seccomp_filter *f = NULL;
	struct pc_err err = { 0 };
	const struct call getppid_ = { "getppid", SYS_getppid, { 0 }, 0 };
	const struct call uname_ = { "uname", SYS_uname, { BAD }, 0 };
	const struct call ptrace_ = { "ptrace", SYS_ptrace, { 0xdead, 0, 0, 0 }, 0 };
	const struct call tiocsti = { "ioctl TIOCSTI", SYS_ioctl, { PIPE_FD, TIOCSTI, BAD }, 0 };
	const struct call syncfs_ = { "syncfs", SYS_syncfs, { -1 }, 0 };
	const struct call getpid_ = { "getpid", SYS_getpid, { 0 }, 0 };

	ck_assert_int_eq(compile_rules(rules, ARRAY_SIZE(rules), &f, &err), 0);
	expect(f, true, &getppid_, EACCES);
	expect(f, true, &uname_, KILLED(SIGSYS));
	expect(f, true, &ptrace_, ESRCH);
	expect(f, true, &tiocsti, ENOTTY);  /* the rule replaced the argument filter */
	expect(f, true, &syncfs_, EBADF);
	expect(f, true, &getpid_, 0);
	seccomp_filter_free(f);
}
END_TEST

START_TEST(test_rule_unknown_syscall)
{
	struct seccomp_rule rules[] = { { "getpid", EPERM, false }, { "frobnicate", EPERM, false } };
	struct seccomp_filter *f = NULL;
	struct pc_err err = { 0 };
	ck_assert_int_eq(compile_rules(rules, ARRAY_SIZE(rules), &f, &err), -1);
	ck_assert_ptr_null(f);
	ck_assert_int_eq(err.errnum, EINVAL);
	ck_assert_str_eq(err.msg, "unknown system call \"frobnicate\" in the policy's seccomp rules");
}
END_TEST

START_TEST(test_rule_other_arch)
{
	/* a name libseccomp knows, but not on x86_64 */
	struct seccomp_rule rules[] = { { "socketcall", EPERM, false } };
	struct seccomp_filter *f = NULL;
	struct pc_err err = { 0 };
	ck_assert_int_eq(compile_rules(rules, ARRAY_SIZE(rules), &f, &err), -1);
	ck_assert_str_eq(err.msg, "system call \"socketcall\" (seccomp rules) does not exist on "
				  "this architecture");
}
END_TEST

START_TEST(test_rule_errno_range)
{
	struct seccomp_rule rules[] = { { "getpid", 4096, false } };
	struct seccomp_filter *f = NULL;
	struct pc_err err = { 0 };
	ck_assert_int_eq(compile_rules(rules, ARRAY_SIZE(rules), &f, &err), -1);
	ck_assert_str_eq(err.msg, "errno 4096 for getpid is out of range (1-4095)");
}
END_TEST

START_TEST(test_filter_size)
{
	struct seccomp_filter *f = compile_default(NET_LOOPBACK);
	size_t n = seccomp_filter_length(f);
	/* Every jail installs it, at a cost that grows with its length: 282
	 * instructions here when written, 75 us to install (1149 and 215 us
	 * as libseccomp compiled it).  Not so small that groups are missing. */
	ck_assert_uint_lt(n, 400);
	ck_assert_uint_gt(n, 150);
	seccomp_filter_free(f);
}
END_TEST

/* ------------------------------------------------------------ caps */

static uint64_t status_hex(const char *status, const char *key)
{
	const char *p = strstr(status, key);
	ck_assert_msg(p != NULL, "%s not in /proc/self/status", key);
	return strtoull(p + strlen(key), NULL, 16);
}

static long status_num(const char *status, const char *key)
{
	const char *p = strstr(status, key);
	ck_assert_msg(p != NULL, "%s not in /proc/self/status", key);
	return strtol(p + strlen(key), NULL, 10);
}

static int write_proc(const char *file, const char *text)
{
	int fd = open(file, O_WRONLY | O_CLOEXEC);
	int rc = fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text) ? 0 : -1;
	if (fd >= 0)
		close(fd);
	return rc;
}

/* In a child: a user namespace like the jail's (our ids mapped to 1000),
 * then caps_drop_jail; the child reports /proc/self/status. */
START_TEST(test_caps_drop_jail)
{
	int pfd[2], status;
	char st[4096] = "";
	ssize_t n, got = 0;
	pid_t pid;

	ck_assert_int_eq(pipe(pfd), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct pc_err err = { 0 };
		char map[64], *text = NULL;
		uid_t uid = geteuid();
		gid_t gid = getegid();
		size_t len;
		close(pfd[0]);
		if (unshare(CLONE_NEWUSER) < 0)
			_exit(10);
		snprintf(map, sizeof(map), "1000 %u 1\n", (unsigned)uid);
		if (write_proc("/proc/self/uid_map", map) < 0)
			_exit(11);
		if (write_proc("/proc/self/setgroups", "deny") < 0)
			_exit(12);
		snprintf(map, sizeof(map), "1000 %u 1\n", (unsigned)gid);
		if (write_proc("/proc/self/gid_map", map) < 0)
			_exit(13);
		if (caps_drop_jail(1000, 1000, &err) < 0) {
			dprintf(pfd[1], "FAIL %s: %s", err.step, err.msg);
			_exit(14);
		}
		/* securebits locked: uid 0 semantics cannot come back */
		if (prctl(PR_SET_SECUREBITS, 0, 0, 0, 0) == 0)
			_exit(15);
		if (read_file("/proc/self/status", 1 << 16, &text, &len) < 0)
			_exit(16);
		(void)!write(pfd[1], text, len);
		_exit(0);
	}
	close(pfd[1]);
	while ((n = read(pfd[0], st + got, sizeof(st) - 1 - (size_t)got)) > 0)
		got += n;
	close(pfd[0]);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 10) {
		unit_skip("caps: user namespaces unavailable here: caps_drop_jail not checked");
		return;
	}
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x: %s", status, st);
	ck_assert_uint_eq(status_hex(st, "CapInh:"), 0);
	ck_assert_uint_eq(status_hex(st, "CapPrm:"), 0);
	ck_assert_uint_eq(status_hex(st, "CapEff:"), 0);
	ck_assert_uint_eq(status_hex(st, "CapBnd:"), 0);
	ck_assert_uint_eq(status_hex(st, "CapAmb:"), 0);
	ck_assert_msg(strstr(st, "\nUid:\t1000\t1000\t1000\t1000\n") != NULL, "uids: %s", st);
	ck_assert_msg(strstr(st, "\nGid:\t1000\t1000\t1000\t1000\n") != NULL, "gids: %s", st);
}
END_TEST

START_TEST(test_caps_harden_supervisor)
{
	int pfd[2], status;
	char st[8192] = "";
	ssize_t n, got = 0;
	pid_t pid;

	ck_assert_int_eq(pipe(pfd), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct pc_err err = { 0 };
		char *text = NULL;
		size_t len;
		pid_t kid;
		close(pfd[0]);
		if (caps_harden_supervisor(&err) < 0) {
			dprintf(pfd[1], "FAIL %s: %s", err.step, err.msg);
			_exit(14);
		}
		if (prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0)
			_exit(15);
		if (read_file("/proc/self/status", 1 << 16, &text, &len) < 0)
			_exit(16);
		(void)!write(pfd[1], text, len);
		(void)!write(pfd[1], "\n--exec--\n", 10);
		/* what a program we start (an upstream MCP server) gets */
		kid = fork();
		if (kid == 0) {
			dup2(pfd[1], 1);
			execl("/bin/cat", "cat", "/proc/self/status", (char *)NULL);
			_exit(17);
		}
		if (kid < 0 || waitpid(kid, &status, 0) != kid || status != 0)
			_exit(18);
		_exit(0);
	}
	close(pfd[1]);
	while ((n = read(pfd[0], st + got, sizeof(st) - 1 - (size_t)got)) > 0)
		got += n;
	close(pfd[0]);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x: %s", status, st);
	if (geteuid() == 0) {
		const uint64_t keep = 1ULL << CAP_SETUID | 1ULL << CAP_SETGID | 1ULL << CAP_SYS_ADMIN |
				      1ULL << CAP_DAC_OVERRIDE | 1ULL << CAP_KILL |
				      1ULL << CAP_NET_BIND_SERVICE | 1ULL << CAP_NET_ADMIN;
		char *exec_part = strstr(st, "--exec--");
		ck_assert_ptr_nonnull(exec_part);
		*exec_part = '\0';
		ck_assert_uint_eq(status_hex(st, "CapEff:") & ~keep, 0);
		ck_assert_uint_eq(status_hex(st, "CapPrm:") & ~keep, 0);
		ck_assert_uint_eq(status_hex(st, "CapInh:"), 0);
		ck_assert_uint_eq(status_hex(st, "CapBnd:") & ~keep, 0);
		ck_assert_uint_ne(status_hex(st, "CapEff:") & (1ULL << CAP_SETUID), 0);
		/* permitted for egress runs, effective only around their setup */
		ck_assert_uint_eq(status_hex(st, "CapEff:") & (1ULL << CAP_NET_ADMIN), 0);
		ck_assert_uint_eq(status_hex(st, "CapEff:") & (1ULL << CAP_NET_BIND_SERVICE), 0);
		ck_assert_uint_ne(status_hex(st, "CapPrm:") & (1ULL << CAP_NET_ADMIN), 0);
		ck_assert_uint_eq(status_hex(st, "CapEff:") & (1ULL << CAP_SETPCAP), 0);
		ck_assert_msg(strstr(st, "\nGroups:\t \n") != NULL, "supplementary groups left: %s", st);
		/* root's children exec with nothing (SECBIT_NOROOT) */
		ck_assert_uint_eq(status_hex(exec_part + 1, "CapEff:"), 0);
		ck_assert_uint_eq(status_hex(exec_part + 1, "CapPrm:"), 0);
		ck_assert_int_eq(status_num(exec_part + 1, "Uid:"), 0);
	} else {
		ck_assert_uint_eq(status_hex(st, "CapEff:"), 0);
	}
}
END_TEST

Suite *seccomp_suite(void)
{
	Suite *s = suite_create("seccomp");
	TCase *tc = tcase_create("filter");
	TCase *groups = tcase_create("groups");
	TCase *rules = tcase_create("rules");
	TCase *caps = tcase_create("caps");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_hostile_eperm);
	tcase_add_test(tc, test_special_calls);
	tcase_add_test(tc, test_control_unfiltered);
	tcase_add_test(tc, test_x32_killed_without_filter_enosys);
	tcase_add_test(tc, test_loopback_inet);
	tcase_add_test(tc, test_vsock_refused);
	tcase_add_test(tc, test_filter_size);
	suite_add_tcase(s, tc);

	tcase_add_test(groups, test_groups_minimal);
	tcase_add_test(groups, test_groups_threads_no_process);
	tcase_add_test(groups, test_wasm_exec_only_from_its_descriptor);
	tcase_add_test(groups, test_groups_optional);
	tcase_add_test(groups, test_group_names);
	tcase_add_test(groups, test_unknown_group);
	suite_add_tcase(s, groups);

	tcase_add_test(rules, test_rules);
	tcase_add_test(rules, test_rule_unknown_syscall);
	tcase_add_test(rules, test_rule_other_arch);
	tcase_add_test(rules, test_rule_errno_range);
	suite_add_tcase(s, rules);

	tcase_add_test(caps, test_caps_drop_jail);
	tcase_add_test(caps, test_caps_harden_supervisor);
	suite_add_tcase(s, caps);
	return s;
}
