/* pycell: a ready jail's program, the supervisor's and the zygote's side
 * (jail.h): the files packed in one memfd, handed to the jail, read back;
 * and the jail's init's side (jail_program.h), until the cell comes. */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jail/init_wait.h"
#include "jail/jail.h"
#include "jail/jail_program.h"

int jail_unpack_files(struct jail_spec *s, const char *buf, uint64_t len)
{
	uint64_t off = 0;
	s->n_files = 0;
	while (off < len) {
		struct jail_file *f;
		uint64_t n;
		size_t name_len = strnlen(buf + off, len - off);
		if (s->n_files == JAIL_MAX_FILES || off + name_len + 1 + sizeof(n) > len)
			return -1;
		f = &s->files[s->n_files++];
		f->name = buf + off;
		off += name_len + 1;
		memcpy(&n, buf + off, sizeof(n));
		off += sizeof(n);
		if (n > len - off)
			return -1;
		f->data = buf + off;
		f->len = n;
		off += n;
	}
	return 0;
}

int jail_deliver(struct jail *j, int memfd, uint64_t len, bool linger, struct pc_err *err)
{
	struct program_msg m = { .type = JAIL_MSG_PROGRAM, .linger = linger, .len = len };
	if (j->prog_fd < 0) {
		/* node's: init copies the bytes into its pipe */
		if (send_fds(j->sync_fd, &m, sizeof(m), &memfd, 1) < 0)
			return pc_syserr(err, "warm", "hand the program to a ready jail");
		return 0;
	}
	/* python's, straight: one process less to wake before the cell
	 * runs; then init, which only learns that the jail is running */
	if (send_fds(j->prog_fd, &m, sizeof(m), &memfd, 1) < 0)
		return pc_syserr(err, "warm", "hand the program to a ready jail's python");
	close(j->prog_fd);   /* python has its program */
	j->prog_fd = -1;
	m.len = 0;
	if (send(j->sync_fd, &m, sizeof(m), MSG_NOSIGNAL) != (ssize_t)sizeof(m))
		return pc_syserr(err, "warm", "tell a ready jail's init that its cell came");
	return 0;
}

int jail_receive_program(int prog_fd, uint64_t *len, bool *linger)
{
	struct program_msg m;
	int fd = -1, got;
	ssize_t n;

	do
		n = recv_fds(prog_fd, &m, sizeof(m), &fd, 1, &got);
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(m) || got != 1) {
		if (n > 0 && got == 1)
			close(fd);
		errno = n == 0 ? EPIPE : EPROTO;
		return -1;
	}
	*len = m.len;
	*linger = m.linger == 1;
	return fd;
}

/* ------------------------------------------------------------ in the jail's init */

/* Parked jails (a warm pool): the program comes after the root
 * (jail_program.h: the message that brings it). */

/* In a ready jail's init: the program message from the supervisor, and
 * its memfd (returned; m->len its size).  A supervisor that let the jail
 * go unused (EOF) ends it. */
static int recv_program(int sync_fd, struct program_msg *m, struct pc_err *err)
{
	int fd = -1, got;
	ssize_t n;

	do
		n = recv_fds(sync_fd, m, sizeof(*m), &fd, 1, &got);
	while (n < 0 && errno == EINTR);
	if (n == 0)
		_exit(0);
	if (n != (ssize_t)sizeof(*m) || m->type != JAIL_MSG_PROGRAM || m->len > JAIL_PARK_FILES_MAX || got != 1) {
		if (got == 1)
			close(fd);
		return pc_fail(err, EPROTO, "warm", "bad program message for a ready jail");
	}
	return fd;
}

/* Until the supervisor sends the program.  When the jail's program goes
 * first (its end of prog_fd closes), so does the jail: the supervisor
 * makes another. */
static int wait_program(int sync_fd, int prog_fd, struct pc_err *err)
{
	struct pollfd pf[2] = { { .fd = sync_fd, .events = POLLIN }, { .fd = prog_fd, .events = 0 } };

	while (poll(pf, 2, -1) < 0)
		if (errno != EINTR)
			return pc_syserr(err, "warm", "wait for the program");
	/* the program's end closed (it died waiting): POLLHUP on a socket,
	 * POLLERR on a pipe's writing end */
	if (!(pf[0].revents & POLLIN) && pf[1].revents)
		_exit(0);
	return 0;
}

static void on_sigchld(int sig)
{
	(void)sig;
}

/* A native ready jail's init, until its cell comes: python gets the
 * program straight from the supervisor (jail_deliver), which tells us
 * after, with a program message without a memfd; init never sees the
 * program.  A supervisor that let the jail go unused (EOF), or a python
 * that died waiting, ends the jail (the supervisor makes another). */
int program_await_start(int sync_fd, pid_t python, struct pc_err *err)
{
	struct sigaction sa = { .sa_handler = on_sigchld };
	sigset_t chld;
	int rc;

	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	sigaction(SIGCHLD, &sa, NULL);
	rc = init_await_start(sync_fd, python);
	if (rc == 0)
		_exit(0);
	if (rc < 0 && errno == EPROTO)
		return pc_fail(err, EPROTO, "warm", "bad start message for a ready jail");
	if (rc < 0)
		return pc_syserr(err, "warm", "wait for the cell");
	signal(SIGCHLD, SIG_DFL);
	sigprocmask(SIG_UNBLOCK, &chld, NULL);
	return 0;
}

/* The same for the wasm backend's node, which cannot take a descriptor
 * from a socket: init copies the memfd's bytes, after their length (8
 * bytes, native order), into the pipe node reads (WASM_PROG_FD). */
int program_forward_bytes(int sync_fd, int pipe_fd, struct pc_err *err)
{
	struct program_msg m;
	off_t off = 0;
	ssize_t n;
	int fd;

	if (wait_program(sync_fd, pipe_fd, err) < 0 || (fd = recv_program(sync_fd, &m, err)) < 0)
		return -1;
	if (write_all(pipe_fd, &m.len, sizeof(m.len)) < 0)
		goto fail;
	while ((uint64_t)off < m.len) {
		n = sendfile(pipe_fd, fd, &off, m.len - (uint64_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			goto fail;
	}
	close(fd);
	return 0;
fail:
	close(fd);
	return pc_syserr(err, "warm", "hand the program to node");
}

/* A bare jail's node, which has no /run/pycell of the host's to read, gets
 * its files the same way, from init's copy of the spec: their length, then
 * the files packed as jail_unpack_files reads them. */
int program_write_bytes(const struct jail_spec *s, int pipe_fd, struct pc_err *err)
{
	uint64_t len = 0;

	for (int i = 0; i < s->n_files; i++)
		len += strlen(s->files[i].name) + 1 + sizeof(uint64_t) + s->files[i].len;
	if (write_all(pipe_fd, &len, sizeof(len)) < 0)
		return pc_syserr(err, "exec", "hand the program to node");
	for (int i = 0; i < s->n_files; i++) {
		const struct jail_file *f = &s->files[i];
		uint64_t n = f->len;
		if (write_all(pipe_fd, f->name, strlen(f->name) + 1) < 0 || write_all(pipe_fd, &n, sizeof(n)) < 0 ||
		    write_all(pipe_fd, f->data, f->len) < 0)
			return pc_syserr(err, "exec", "hand %s to node", f->name);
	}
	return 0;
}
