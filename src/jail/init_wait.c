/* pycell: what a jail's init does while python runs (init_wait.h). */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jail/init_wait.h"
#include "jail/jail.h"
#include "jail/jail_program.h"

int init_await_start(int sync_fd, pid_t python)
{
	struct pollfd pf = { .fd = sync_fd, .events = POLLIN };
	struct program_msg m;
	sigset_t open;
	ssize_t n;

	sigemptyset(&open);
	for (;;) {
		/* checked with SIGCHLD blocked, waited for with it open: an
		 * exit in between interrupts the ppoll */
		if (waitpid(python, NULL, WNOHANG) == python)
			return 0;
		if (ppoll(&pf, 1, NULL, &open) > 0)
			break;
		if (errno != EINTR)
			return -1;
	}
	do
		n = recv(sync_fd, &m, sizeof(m), 0);
	while (n < 0 && errno == EINTR);
	if (n <= 0)
		return (int)n;
	if (n != (ssize_t)sizeof(m) || m.type != JAIL_MSG_PROGRAM || m.len != 0) {
		errno = EPROTO;
		return -1;
	}
	return 1;
}

int init_reap(pid_t python, void (*between)(void))
{
	int status = 0;
	for (;;) {
		pid_t p = waitpid(-1, &status, 0);
		if (p == python)
			return status;
		if (p < 0 && errno != EINTR)
			_exit(126);
		if (between)
			between();
	}
}

void init_exit_msg(struct jail_msg *m, int wait_status)
{
	struct rusage ru;
	getrusage(RUSAGE_CHILDREN, &ru);
	*m = (struct jail_msg){ .type = JAIL_MSG_EXIT, .wait_status = wait_status };
	m->cpu_us = (int64_t)ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec + (int64_t)ru.ru_stime.tv_sec * 1000000 +
		    ru.ru_stime.tv_usec;
	m->maxrss_kb = ru.ru_maxrss;
}
