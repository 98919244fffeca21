/* pycell: a ready jail's program, the supervisor's and the zygote's side
 * (jail.h): the files packed in one memfd, handed to the jail, read back. */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

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
