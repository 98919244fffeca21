/* pycell: the stdio transport of `pycell mcp`. */
#include "config.h"

#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <linux/sockios.h>

#include "base/jsonrpc.h"
#include "base/log.h"
#include "mcp/transport_stdio.h"

#define READ_CHUNK (64u << 10)
/* A client that sends requests but does not read the answers: stop
 * reading its input until it has taken most of what is queued. */
#define OUT_HIGH_WATER (16u << 20)
#define OUT_LOW_WATER (1u << 20)

struct stdio_transport {
	struct loop *loop;
	const struct stdio_transport_ops *ops;
	void *ctx;

	int in_fd, out_fd;
	int out_unread_ioctl;         /* FIONREAD (a pipe), SIOCOUTQ (a socket), 0: neither */
	int in_flags, out_flags;      /* F_GETFL at start, restored by free */
	struct loop_watch w_in, w_out;
	/* For an input epoll refuses (a regular file): an eventfd that is
	 * always readable stands in for it, so the loop keeps calling us. */
	int ready_fd;
	bool in_watched, out_watched, reading, paused, closed, out_broken;

	struct line_reader lr;
	char *out;
	size_t out_head, out_len, out_cap;
};

static void transport_close(struct stdio_transport *t)
{
	if (t->closed)
		return;
	t->closed = true;
	t->ops->on_close(t->ctx);
}

static void set_reading(struct stdio_transport *t, bool on)
{
	if (t->in_watched)
		loop_mod(t->loop, &t->w_in, on ? EPOLLIN : 0);
}

static void stop_input(struct stdio_transport *t)
{
	if (t->in_watched) {
		loop_del(t->loop, &t->w_in);
		t->in_watched = false;
	}
	if (t->ready_fd >= 0) {
		close(t->ready_fd);
		t->ready_fd = -1;
	}
	t->reading = false;
}

static void out_interest(struct stdio_transport *t, bool want)
{
	if (t->out_watched)
		loop_mod(t->loop, &t->w_out, want ? EPOLLOUT : 0);
}

/* Write as much as the reader takes now. */
static void flush_some(struct stdio_transport *t)
{
	while (t->out_head < t->out_len) {
		ssize_t n = write(t->out_fd, t->out + t->out_head, t->out_len - t->out_head);
		if (n > 0) {
			t->out_head += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			out_interest(t, true);
			return;
		}
		log_debug("mcp: stdout: %s", n < 0 ? strerror(errno) : "short write");
		t->out_broken = true;
		t->out_head = t->out_len = 0;
		out_interest(t, false);
		transport_close(t);
		return;
	}
	t->out_head = t->out_len = 0;
	if (t->out_cap > OUT_LOW_WATER) {
		free(t->out);
		t->out = NULL;
		t->out_cap = 0;
	}
	out_interest(t, false);
	if (t->paused) {
		t->paused = false;
		set_reading(t, t->reading);
	}
}

static void on_out(struct loop_watch *w, uint32_t events, void *data)
{
	struct stdio_transport *t = data;
	if ((events & EPOLLERR) && t->out_head == t->out_len) {
		/* the reader is gone and there is nothing to say: we are done */
		t->out_broken = true;
		out_interest(t, false);
		loop_del(t->loop, &t->w_out);
		t->out_watched = false;
		transport_close(t);
		return;
	}
	flush_some(t);
	(void)w;
}

static void read_some(struct stdio_transport *t)
{
	char buf[READ_CHUNK];
	const struct line_reader_ops lops = { t->ops->on_line, t->ops->on_oversized };
	ssize_t n = read(t->in_fd, buf, sizeof(buf));

	if (n > 0) {
		line_reader_feed(&t->lr, buf, (size_t)n, &lops, t->ctx);
		if (t->out_len - t->out_head > OUT_HIGH_WATER && !t->paused && t->reading) {
			t->paused = true;
			set_reading(t, false);
		}
		return;
	}
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n < 0)
		log_debug("mcp: stdin: %s", strerror(errno));
	/* A last message without its newline still counts. */
	if (!t->lr.discarding && t->lr.len > 0) {
		static const char nl = '\n';
		line_reader_feed(&t->lr, &nl, 1, &lops, t->ctx);
	}
	stop_input(t);
	transport_close(t);
}

static void on_in(struct loop_watch *w, uint32_t events, void *data)
{
	struct stdio_transport *t = data;
	read_some(t);
	(void)w;
	(void)events;
}

static int save_flags(int fd, int *flags, struct pc_err *err)
{
	*flags = fcntl(fd, F_GETFL);
	if (*flags < 0)
		return pc_syserr(err, "mcp", "fcntl(%d, F_GETFL)", fd);
	return 0;
}

struct stdio_transport *stdio_transport_new(struct loop *l, int in_fd, int out_fd, size_t max_message,
					    const struct stdio_transport_ops *ops, void *ctx,
					    struct pc_err *err)
{
	struct stdio_transport *t = xcalloc(1, sizeof(*t));
	t->loop = l;
	t->ops = ops;
	t->ctx = ctx;
	t->in_fd = in_fd;
	t->out_fd = out_fd;
	t->ready_fd = -1;
	t->in_flags = t->out_flags = -1;
	line_reader_init(&t->lr, max_message);

	if (save_flags(in_fd, &t->in_flags, err) < 0 || save_flags(out_fd, &t->out_flags, err) < 0)
		goto fail;
	{
		struct stat st;
		/* FIONREAD answers on either end of a pipe */
		if (fstat(out_fd, &st) == 0)
			t->out_unread_ioctl = S_ISFIFO(st.st_mode) ? FIONREAD : S_ISSOCK(st.st_mode) ? SIOCOUTQ : 0;
	}
	if (loop_add(l, &t->w_in, in_fd, EPOLLIN, on_in, t) == 0) {
		t->in_watched = true;
		set_nonblock(in_fd, true);
	} else if (errno == EPERM) {
		t->ready_fd = eventfd(1, EFD_CLOEXEC | EFD_NONBLOCK);
		if (t->ready_fd < 0) {
			pc_syserr(err, "mcp", "eventfd");
			goto fail;
		}
		if (loop_add(l, &t->w_in, t->ready_fd, EPOLLIN, on_in, t) < 0) {
			pc_syserr(err, "mcp", "epoll_ctl(eventfd)");
			goto fail;
		}
		t->in_watched = true;
	} else {
		pc_syserr(err, "mcp", "epoll_ctl(stdin)");
		goto fail;
	}
	t->reading = true;
	if (loop_add(l, &t->w_out, out_fd, 0, on_out, t) == 0) {
		t->out_watched = true;
		set_nonblock(out_fd, true);
	} else if (errno != EPERM) {
		/* EPERM: a file or /dev/null, where writes complete at once */
		pc_syserr(err, "mcp", "epoll_ctl(stdout)");
		goto fail;
	}
	return t;
fail:
	stdio_transport_free(t);
	return NULL;
}

void stdio_transport_send(struct stdio_transport *t, const json_t *msg)
{
	size_t len;
	cleanup_free char *line = NULL;
	if (t->out_broken)
		return;
	line = jsonrpc_dump_line(msg, &len);
	if (!line) {
		log_error("mcp: could not serialise a message");
		return;
	}
	if (t->out_len + len > t->out_cap) {
		if (t->out_head > 0) {
			memmove(t->out, t->out + t->out_head, t->out_len - t->out_head);
			t->out_len -= t->out_head;
			t->out_head = 0;
		}
		if (t->out_len + len > t->out_cap) {
			size_t cap = t->out_cap ? t->out_cap : 64u << 10;
			while (cap < t->out_len + len)
				cap *= 2;
			t->out = xrealloc(t->out, cap);
			t->out_cap = cap;
		}
	}
	memcpy(t->out + t->out_len, line, len);
	t->out_len += len;
	/* With nothing queued before this line, write it now; otherwise
	 * EPOLLOUT is already armed and keeps the order. */
	if (t->out_len == len + t->out_head)
		flush_some(t);
}

size_t stdio_transport_unread(const struct stdio_transport *t)
{
	int n = 0;
	if (t->out_unread_ioctl && (ioctl(t->out_fd, (unsigned long)t->out_unread_ioctl, &n) < 0 || n < 0))
		n = 0;
	return t->out_len - t->out_head + (size_t)n;
}

void stdio_transport_flush(struct stdio_transport *t, int timeout_ms)
{
	uint64_t deadline = now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
	while (!t->out_broken && t->out_head < t->out_len) {
		struct pollfd p = { .fd = t->out_fd, .events = POLLOUT };
		uint64_t now = now_ms();
		if (now >= deadline)
			break;
		if (poll(&p, 1, (int)(deadline - now)) < 0 && errno != EINTR)
			break;
		flush_some(t);
	}
}

void stdio_transport_free(struct stdio_transport *t)
{
	if (!t)
		return;
	stop_input(t);
	if (t->out_watched)
		loop_del(t->loop, &t->w_out);
	/* stdin/stdout may be shared with a shell: leave them as we found them */
	if (t->in_flags >= 0)
		fcntl(t->in_fd, F_SETFL, t->in_flags);
	if (t->out_flags >= 0)
		fcntl(t->out_fd, F_SETFL, t->out_flags);
	line_reader_free(&t->lr);
	free(t->out);
	free(t);
}
