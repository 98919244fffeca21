/* pycell: a small init (small_init.h). */
#include "config.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "base/fault.h"
#include "base/log.h"
#include "jail/jail.h"
#include "jail/small_init.h"

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
/* AddressSanitizer keeps one thread's stack bounds, here shared by the
 * zygote, init and (copied) python: told of each switch, it does not take
 * a call on the other stack for a stack overflow (a warning on the
 * program's stderr); and the stack's shadow is cleared after each init,
 * whose frames never returned */
static const void *caller_stack;
static size_t caller_stack_size;
#endif

/* python's C stack too: the size of a main thread's usual one */
#define SMALL_STACK_SIZE (8u << 20)
static char *small_stack;   /* its lowest byte, above the guard page */
/* Nonzero while a small init shares our memory: the kernel sets it to 0,
 * and wakes us, when that init's exec (or exit) lets go of it
 * (CLONE_CHILD_CLEARTID). */
static volatile pid_t small_sharing;
static bool small_cloned;   /* and not yet waited for (jail_small_wait) */

int small_init_prepare(struct pc_err *err)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	char *m;

	if (small_stack)
		return 0;
	/* a guard page below it */
	m = mmap(NULL, SMALL_STACK_SIZE + page, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
	if (m == MAP_FAILED)
		return pc_syserr(err, "clone", "map a stack for the jail's init");
	if (mprotect(m, page, PROT_NONE) < 0) {
		munmap(m, SMALL_STACK_SIZE + page);
		return pc_syserr(err, "clone", "guard the stack of the jail's init");
	}
	small_stack = m + page;
	return 0;
}

void small_init_on_stack(void (*fn)(void))
{
	ucontext_t back, on;

	/* a sanitizer build's runtime warns of swapcontext on stderr: there
	 * the probe learns its own stack's pages, which no jail writes */
#ifndef __SANITIZE_ADDRESS__
	if (!small_stack || getcontext(&on) < 0) {
#endif
		fn();
		return;
#ifndef __SANITIZE_ADDRESS__
	}
#endif
	on.uc_stack.ss_sp = small_stack;
	on.uc_stack.ss_size = SMALL_STACK_SIZE;
	on.uc_link = &back;
	makecontext(&on, fn, 0);
	if (swapcontext(&back, &on) < 0)
		fn();
}

#if defined(__x86_64__)
/* clone3 whose child starts on args->stack with no frame to return to:
 * the child calls fn(arg) there and exits with its value; the parent gets
 * the call's (the pid, or -errno).  glibc has no clone3 of its own. */
static long clone3_on_stack(struct clone_args *args, int (*fn)(void *), void *arg)
{
	register long ret __asm__("rax") = SYS_clone3;
	register struct clone_args *a __asm__("rdi") = args;
	register size_t n __asm__("rsi") = sizeof(*args);
	register int (*f)(void *) __asm__("r12") = fn;
	register void *x __asm__("r13") = arg;

	__asm__ volatile("syscall\n\t"
			 "test %%rax, %%rax\n\t"
			 "jnz 1f\n\t"
			 /* the child, on its stack (16-byte aligned: the
			  * call leaves fn the alignment the ABI gives) */
			 "xor %%ebp, %%ebp\n\t"
			 "mov %%r13, %%rdi\n\t"
			 "call *%%r12\n\t"
			 "mov %%eax, %%edi\n\t"
			 "mov %[exit], %%eax\n\t"
			 "syscall\n\t"
			 "hlt\n"
			 "1:"
			 : "+r"(ret)
			 : "r"(a), "r"(n), "r"(f), "r"(x), [exit] "i"(SYS_exit)
			 : "rcx", "r11", "memory");
	return ret;
}
#endif

/* The small init by clone3, made in the cgroup2 directory cgroup_fd (-1:
 * none) as it is made: a CLONE_VM child moved by a write to cgroup.procs
 * took 7-10 ms of the zygote's here (a forked one 0.1).  Its pid; -1 with
 * errno; -2 where clone3 is refused, once and from then on: a container
 * profile's ENOSYS (Docker's, podman's; EPERM in older Docker profiles,
 * which clone would meet too if the namespaces were what it refused),
 * an old kernel's E2BIG or EINVAL. */
static long small_clone3(int (*fn)(void *), void *arg, int flags, int cgroup_fd, int *pidfd)
{
#if defined(__x86_64__)
	static bool refused;
	struct clone_args args;
	long pid;

	if (refused)
		return -2;
	memset(&args, 0, sizeof(args));
	args.flags = (uint64_t)flags | CLONE_VM | CLONE_PIDFD | CLONE_CHILD_CLEARTID;
	args.pidfd = (uint64_t)(uintptr_t)pidfd;
	args.child_tid = (uint64_t)(uintptr_t)&small_sharing;
	args.exit_signal = SIGCHLD;
	args.stack = (uint64_t)(uintptr_t)small_stack;
	args.stack_size = SMALL_STACK_SIZE;
	if (cgroup_fd >= 0) {
		args.flags |= CLONE_INTO_CGROUP;
		args.cgroup = (uint64_t)cgroup_fd;
	}
	pid = fault_at("small_clone3") ? -ENOSYS : clone3_on_stack(&args, fn, arg);
	if (pid >= 0)
		return pid;
	if (pid == -ENOSYS || pid == -EPERM || pid == -E2BIG || pid == -EINVAL) {
		refused = true;
		log_info("jail: clone3 of a warm jail's init: %s; clone, and a move into its cgroup, from now on",
			 strerror((int)-pid));
		return -2;
	}
	errno = (int)-pid;
	return -1;
#else
	(void)fn, (void)arg, (void)flags, (void)cgroup_fd, (void)pidfd;
	return -2;
#endif
}

long small_init_clone(int (*fn)(void *), void *arg, int flags, int cgroup_fd, int *pidfd, bool *joined,
		      struct pc_err *err)
{
	long pid;

	*joined = false;
	if (small_sharing)
		return pc_fail(err, EBUSY, "clone", "a jail's init shares our memory still (a bug in pycell)");
	if (small_init_prepare(err) < 0)
		return -1;
	if (fault_at("small_clone")) {
		errno = EPERM;
		return pc_syserr(err, "clone", "clone into new namespaces (injected fault)");
	}
	small_sharing = 1;
	pid = small_clone3(fn, arg, flags, cgroup_fd, pidfd);
	if (pid >= 0)
		*joined = cgroup_fd >= 0;
	else if (pid == -2)
		pid = clone(fn, small_stack + SMALL_STACK_SIZE,
			    flags | CLONE_VM | CLONE_PIDFD | CLONE_CHILD_CLEARTID | SIGCHLD, arg, pidfd, NULL,
			    &small_sharing);
	if (pid < 0) {
		small_sharing = 0;
		return pc_syserr(err, "clone", "clone into new namespaces");
	}
	small_cloned = true;
	return pid;
}

void small_init_started(void)
{
#ifdef __SANITIZE_ADDRESS__
	__sanitizer_start_switch_fiber(NULL, small_stack, SMALL_STACK_SIZE);
	__sanitizer_finish_switch_fiber(NULL, &caller_stack, &caller_stack_size);
#endif
}

void jail_small_wait(void)
{
	pid_t v;

	if (!small_cloned)
		return;
	small_cloned = false;
	while ((v = small_sharing) != 0)
		syscall(SYS_futex, &small_sharing, FUTEX_WAIT, v, NULL, NULL, 0);
	/* nothing of that jail's setup stays in our memory for the next
	 * jails to inherit (python has its copy); the next init's first
	 * writes find zero pages instead of copying these */
	madvise(small_stack, SMALL_STACK_SIZE, MADV_DONTNEED);
#ifdef __SANITIZE_ADDRESS__
	/* and the redzones its frames marked, which no return cleared */
	__asan_unpoison_memory_region(small_stack, SMALL_STACK_SIZE);
	if (caller_stack_size) {
		__sanitizer_start_switch_fiber(NULL, caller_stack, caller_stack_size);
		__sanitizer_finish_switch_fiber(NULL, NULL, NULL);
	}
#endif
}

int small_init_cgroup(int dir_fd, pid_t pid, struct pc_err *err)
{
	cleanup_close int fd = openat(dir_fd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
	char num[16];
	int len = snprintf(num, sizeof(num), "%d", (int)pid);
	if (fd < 0 || write(fd, num, (size_t)len) != len)
		return pc_syserr(err, "cgroup", "move the jail's init into the run's cgroup");
	return 0;
}

/* Through /proc: the jail's filter lets init execve, not execveat. */
void small_init_exec(int init_fd, int sync_fd, pid_t python, int ready, bool park, const int *forwarded, size_t n,
		     struct pc_err *err)
{
	/* argv[0] the name it has from the exec on, as a ready jail's or a
	 * running one's (the kernel's comm is the path's, until its prctl) */
	char ready_name[] = "pycell-ready", name[] = "pycell-init", sync[16], pid[16], rd[16];
	char parked[] = { park ? '1' : '0', '\0' };
	char path[48];
	char *argv[] = { park ? ready_name : name, sync, pid, rd, parked, NULL };
	char *envp[] = { NULL };
	sigset_t block;

	sigemptyset(&block);
	sigaddset(&block, SIGCHLD);
	for (size_t i = 0; i < n; i++)
		sigaddset(&block, forwarded[i]);
	sigprocmask(SIG_BLOCK, &block, NULL);
	/* init keeps none of the run's pipes: EOF on them means python and
	 * its descendants are done writing */
	for (int fd = 0; fd <= 3; fd++)
		close(fd);
	snprintf(sync, sizeof(sync), "%d", sync_fd);
	snprintf(pid, sizeof(pid), "%d", (int)python);
	snprintf(rd, sizeof(rd), "%d", ready);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", init_fd);
	if (fcntl(sync_fd, F_SETFD, 0) < 0 || fcntl(ready, F_SETFD, 0) < 0) {
		pc_syserr(err, "exec", "keep the sync socket and ready pipe open for pycell-init");
		return;
	}
	/* through syscall(2): a coverage build's gcov wraps execve() (jail.c) */
	syscall(SYS_execve, path, argv, envp);
	pc_syserr(err, "exec", "execute pycell-init");
}

void small_init_await(const int ready[2], int init_fd)
{
	char go;
	ssize_t n;

	close(ready[1]);
	close(init_fd);
	do
		n = read(ready[0], &go, 1);
	while (n < 0 && errno == EINTR);
	if (n != 1)
		_exit(127);
	close(ready[0]);
}
