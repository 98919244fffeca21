/* pycell-init: the init of a jail the zygote made, once python runs.
 *
 * The zygote clones a jail's init sharing its memory (jail.c,
 * jail_spec.small_init): init builds the jail, forks python, a copy of the
 * zygote as before, and then executes this program, a small static binary,
 * so that no second copy of the zygote's address space is made for init to
 * wait in: the kernel copies and tears down the page tables of the zygote
 * (60 MB of it written with the data stack preloaded) once a run instead of
 * twice.  What it does is what jail.c's jail_init does in other jails: wait
 * for a ready jail's cell, forward termination signals to python, reap
 * everything, and report python's wait status.
 *
 *   pycell-init SYNC_FD PYTHON_PID READY_FD PARK
 *
 * (argv[0] pycell-ready for a ready jail's, until its cell comes).
 * SYNC_FD is the socket to the supervisor; READY_FD a pipe python waits on
 * before it runs anything: it hears from us once we are not dumpable, so
 * it cannot open our memory in the moment between the exec (which makes a
 * process dumpable) and the prctl; PARK is 1 for a ready jail.  The jail's
 * seccomp filter, its ids and no_new_privs came with the exec; the
 * termination signals and SIGCHLD come blocked, so none sent meanwhile is
 * lost.  Built static and without the sanitizers; on x86_64 without a C
 * library too, on init_rt.c's system calls (it says why): so it calls
 * nothing but what init_rt.c has. */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jail/init_wait.h"
#include "jail/jail.h"

static const int fwd[] = { SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 };
static volatile pid_t python_pid;
static int sync_fd = -1;

static void forward_signal(int sig)
{
	if (python_pid > 0)
		kill(python_pid, sig);
}

static void on_sigchld(int sig)
{
	(void)sig;
}

static void send_msg(const struct jail_msg *m)
{
	(void)!send(sync_fd, m, sizeof(*m), MSG_NOSIGNAL);
}

/* s after dst[*at], cut to fit (with its NUL) */
static void append(char *dst, size_t cap, size_t *at, const char *s)
{
	while (*s && *at + 1 < cap)
		dst[(*at)++] = *s++;
	dst[*at] = '\0';
}

static __attribute__((noreturn)) void fail(int errnum, const char *msg)
{
	struct jail_msg m = { .type = JAIL_MSG_ERROR, .err.errnum = errnum };
	size_t at = 0, step = 0;
	append(m.err.step, sizeof(m.err.step), &step, "warm");
	append(m.err.msg, sizeof(m.err.msg), &at, msg);
	if (errnum) {
		append(m.err.msg, sizeof(m.err.msg), &at, ": ");
		append(m.err.msg, sizeof(m.err.msg), &at, strerror(errnum));
	}
	send_msg(&m);
	_exit(127);
}

/* a decimal of at most max, or -1 */
static int number(const char *s, long max)
{
	long v = 0;
	if (!*s)
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || (v = v * 10 + (*s - '0')) > max)
			return -1;
	}
	return (int)v;
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = forward_signal };
	struct sigaction chld = { .sa_handler = on_sigchld };
	struct jail_msg m;
	sigset_t none;
	int ready;
	bool park;

	/* first: python waits for the byte below before it runs anything */
	if (prctl(PR_SET_DUMPABLE, 0) < 0)
		_exit(127);
	if (argc != 5 || (sync_fd = number(argv[1], INT_MAX)) < 0 || (python_pid = number(argv[2], INT_MAX)) <= 0 ||
	    (ready = number(argv[3], INT_MAX)) < 0 || number(argv[4], 1) < 0) {
		/* not started by jail.c: say so to whoever runs it by hand */
		static const char usage[] = "pycell-init: the init of a jail pycell's zygote makes; not a command\n";
		(void)!write(2, usage, sizeof(usage) - 1);
		return 2;
	}
	park = argv[4][0] == '1';
	/* EPIPE, not the signal: python is gone already, and its status
	 * says how */
	signal(SIGPIPE, SIG_IGN);
	/* named before python runs: its comm is the exec path's ("10",
	 * from /proc/self/fd/10) until then, which a cell could see */
	prctl(PR_SET_NAME, park ? "pycell-ready" : "pycell-init");
	if (write(ready, "g", 1) != 1 && errno != EPIPE)
		fail(errno, "tell python that init is ready");
	close(ready);
	for (size_t i = 0; i < sizeof(fwd) / sizeof(fwd[0]); i++)
		sigaction(fwd[i], &sa, NULL);
	sigaction(SIGCHLD, &chld, NULL);
	if (park) {
		switch (init_await_start(sync_fd, python_pid)) {
		case 1:
			break;
		case 0:
			_exit(0);
		default:
			fail(errno, errno == EPROTO ? "bad start message for a ready jail" : "wait for the cell");
		}
		/* its cell came: a running jail's, in ps and /proc alike */
		prctl(PR_SET_NAME, "pycell-init");
		memset(argv[0], 0, strlen(argv[0]));
		memcpy(argv[0], "pycell-init", sizeof("pycell-init") - 1);
	}
	signal(SIGCHLD, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	init_exit_msg(&m, init_reap(python_pid, NULL));
	send_msg(&m);
	_exit(0);
}
