/* pycell-init's C library, on x86_64: the calls init_main.c and
 * init_wait.c make, each a system call, and the program's start.
 *
 * A static glibc program spends its start learning the processor: some
 * sixty CPUID instructions (the cache sizes its string functions tune
 * for).  In a virtual machine each one traps to the hypervisor: 7-8 us
 * on this project's test machine, 0.45 ms of CPU per start, and every
 * warm jail's init starts once.  This program needs none of it.  It is
 * linked with -nostdlib; other architectures link glibc as before
 * (Makefile.am).
 *
 * Each function has glibc's prototype (its headers declare them, so a
 * mismatch does not compile) and glibc's behaviour for what pycell-init
 * asks of it: -1 and errno on failure, signal() with SA_RESTART.  The
 * jail's seccomp filter is on before the exec, so this makes no call
 * glibc's start did not: arch_prctl (the stack protector's canary,
 * which a hardened build reads from the thread pointer) and those the
 * program itself makes. */
#include "config.h"

#include <asm/prctl.h>
#include <elf.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef __x86_64__
#error "init_rt.c is pycell-init's runtime on x86_64; elsewhere pycell-init links glibc (Makefile.am)"
#endif

#define SA_RESTORER_ 0x04000000
/* the kernel's signal set: 64 signals, 8 bytes (glibc's sigset_t has 128) */
#define KERNEL_SIGSET 8

int main(int argc, char **argv);
__attribute__((noreturn, used)) void init_rt_start(long *sp);
void __stack_chk_fail(void);

static int error_number;

int *__errno_location(void)
{
	return &error_number;
}

/* Without a canary check (no_stack_protector, here and in what the start
 * calls before it sets the thread pointer): the check reads %fs:0x28, and
 * until then %fs is 0 (a build with -fstack-protector-all checks every
 * function) */
__attribute__((no_stack_protector)) static long sys6(long nr, long a, long b, long c, long d, long e, long f)
{
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	long ret;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}

/* -1 and errno for the kernel's -errno */
static long sys(long nr, long a, long b, long c, long d, long e, long f)
{
	long ret = sys6(nr, a, b, c, d, e, f);
	if (ret < 0 && ret > -4096) {
		error_number = (int)-ret;
		return -1;
	}
	return ret;
}

__attribute__((no_stack_protector)) void _exit(int status)
{
	for (;;)
		sys6(SYS_exit_group, status, 0, 0, 0, 0, 0);
}

ssize_t write(int fd, const void *buf, size_t n)
{
	return sys(SYS_write, fd, (long)buf, (long)n, 0, 0, 0);
}

int close(int fd)
{
	return (int)sys(SYS_close, fd, 0, 0, 0, 0, 0);
}

int kill(pid_t pid, int sig)
{
	return (int)sys(SYS_kill, pid, sig, 0, 0, 0, 0);
}

int prctl(int option, ...)
{
	unsigned long arg[4];
	va_list ap;
	va_start(ap, option);
	for (int i = 0; i < 4; i++)
		arg[i] = va_arg(ap, unsigned long);
	va_end(ap);
	return (int)sys(SYS_prctl, option, (long)arg[0], (long)arg[1], (long)arg[2], (long)arg[3], 0);
}

pid_t waitpid(pid_t pid, int *status, int options)
{
	return (pid_t)sys(SYS_wait4, pid, (long)status, options, 0, 0, 0);
}

ssize_t recv(int fd, void *buf, size_t n, int flags)
{
	return sys(SYS_recvfrom, fd, (long)buf, (long)n, flags, 0, 0);
}

ssize_t send(int fd, const void *buf, size_t n, int flags)
{
	return sys(SYS_sendto, fd, (long)buf, (long)n, flags, 0, 0);
}

int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *timeout, const sigset_t *mask)
{
	return (int)sys(SYS_ppoll, (long)fds, (long)n, (long)timeout, (long)mask, KERNEL_SIGSET, 0);
}

int getrusage(__rusage_who_t who, struct rusage *ru)
{
	return (int)sys(SYS_getrusage, who, (long)ru, 0, 0, 0, 0);
}

int sigemptyset(sigset_t *set)
{
	memset(set, 0, sizeof(*set));
	return 0;
}

int sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
	return (int)sys(SYS_rt_sigprocmask, how, (long)set, (long)old, KERNEL_SIGSET, 0, 0);
}

/* A handler returns through this: the kernel's x86_64 signal frame has no
 * code of its own to return by */
void init_rt_restorer(void);
__asm__(".text\n"
	".align 16\n"
	"init_rt_restorer:\n\t"
	"mov $15, %eax\n\t" /* SYS_rt_sigreturn */
	"syscall\n\t"
	"hlt\n");

struct kernel_sigaction {
	void (*handler)(int);
	unsigned long flags;
	void (*restorer)(void);
	unsigned long mask;
};

int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	struct kernel_sigaction k = { 0 }, was = { 0 };
	if (act) {
		k.handler = act->sa_handler;
		k.flags = (unsigned long)act->sa_flags | SA_RESTORER_;
		k.restorer = init_rt_restorer;
		memcpy(&k.mask, &act->sa_mask, sizeof(k.mask));
	}
	if (sys(SYS_rt_sigaction, sig, act ? (long)&k : 0, old ? (long)&was : 0, KERNEL_SIGSET, 0, 0) < 0)
		return -1;
	if (old) {
		memset(old, 0, sizeof(*old));
		old->sa_handler = was.handler;
		old->sa_flags = (int)(was.flags & ~(unsigned long)SA_RESTORER_);
		memcpy(&old->sa_mask, &was.mask, sizeof(was.mask));
	}
	return 0;
}

__sighandler_t signal(int sig, __sighandler_t handler)
{
	struct sigaction sa = { .sa_handler = handler, .sa_flags = SA_RESTART }, old;
	if (sigaction(sig, &sa, &old) < 0)
		return SIG_ERR;
	return old.sa_handler;
}

/* Byte by byte, with a barrier in each loop: the compiler would otherwise
 * see a memset in a memset (a strlen in strlen) and call it */
void *memset(void *dst, int c, size_t n)
{
	unsigned char *d = dst;
	for (size_t i = 0; i < n; i++) {
		d[i] = (unsigned char)c;
		__asm__ volatile("" ::: "memory");
	}
	return dst;
}

void *memcpy(void *restrict dst, const void *restrict src, size_t n)
{
	unsigned char *d = dst;
	const unsigned char *s = src;
	for (size_t i = 0; i < n; i++) {
		d[i] = s[i];
		__asm__ volatile("" ::: "memory");
	}
	return dst;
}

size_t strlen(const char *s)
{
	size_t n = 0;
	while (s[n]) {
		n++;
		__asm__ volatile("" ::: "memory");
	}
	return n;
}

/* glibc's words for what pycell-init's calls can fail with (init_main.c's
 * fail() sends one to the supervisor) */
char *strerror(int errnum)
{
	static const struct {
		int errnum;
		const char *text;
	} known[] = {
		{ EBADF, "Bad file descriptor" },
		{ EINTR, "Interrupted system call" },
		{ EIO, "Input/output error" },
		{ EAGAIN, "Resource temporarily unavailable" },
		{ ENOMEM, "Cannot allocate memory" },
		{ EFAULT, "Bad address" },
		{ EINVAL, "Invalid argument" },
		{ EPIPE, "Broken pipe" },
		{ EPROTO, "Protocol error" },
		{ ENOTSOCK, "Socket operation on non-socket" },
		{ ENOTCONN, "Transport endpoint is not connected" },
		{ ECONNRESET, "Connection reset by peer" },
		{ ECHILD, "No child processes" },
	};
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (known[i].errnum == errnum)
			return (char *)known[i].text;
	return (char *)"an error without a name here (see errno(3))";
}

void __stack_chk_fail(void)
{
	static const char msg[] = "pycell-init: stack smashing detected\n";
	(void)!write(2, msg, sizeof(msg) - 1);
	/* not abort(): a signal of its own to a namespace's init is ignored */
	_exit(127);
}

/* The thread pointer's block: %fs:0 points at itself, as the x86_64 ABI
 * has it, and %fs:0x28 holds the stack protector's canary */
static struct {
	void *self;
	unsigned long unused[4];
	unsigned long canary;
} thread_block __attribute__((aligned(64)));

/* From _start, with the stack the kernel made: argc, argv, NULL, envp,
 * NULL, then the auxiliary vector.  Without a canary of its own: the
 * thread pointer is set here. */
__attribute__((noreturn, used, no_stack_protector)) void init_rt_start(long *sp)
{
	int argc = (int)sp[0];
	char **argv = (char **)(sp + 1);
	long *p = sp + 1 + argc + 1;

	while (*p)
		p++;
	for (p++; p[0]; p += 2)
		if (p[0] == AT_RANDOM) {   /* the address of 16 random bytes */
			const unsigned char *r = (const unsigned char *)p[1];
			for (int i = 0; i < 8; i++)   /* not memcpy: it may check a canary */
				thread_block.canary = thread_block.canary << 8 | r[i];
		}
	/* the first byte zero, as glibc has it: a string overrun stops there */
	thread_block.canary &= ~0xfful;
	thread_block.self = &thread_block;
	if (sys6(SYS_arch_prctl, ARCH_SET_FS, (long)&thread_block, 0, 0, 0, 0) < 0)
		_exit(127);
	_exit(main(argc, argv));
}

__asm__(".text\n"
	".global _start\n"
	".type _start, @function\n"
	"_start:\n\t"
	"xor %ebp, %ebp\n\t"
	"mov %rsp, %rdi\n\t"
	"and $-16, %rsp\n\t"
	"call init_rt_start\n\t"
	"hlt\n");
