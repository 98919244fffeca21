/* pycell: newline-delimited JSON-RPC on a pair of fds (stdin/stdout) on
 * the event loop.  Reads never buffer more than one capped line; writes
 * never block: what the peer does not take yet is queued and flushed on
 * EPOLLOUT. */
#ifndef PYCELL_TRANSPORT_STDIO_H
#define PYCELL_TRANSPORT_STDIO_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/loop.h"
#include "base/util.h"

struct stdio_transport;

struct stdio_transport_ops {
	/* One line, without its newline. */
	void (*on_line)(void *ctx, const char *line, size_t len);
	/* A line went over max_message and is being discarded. */
	void (*on_oversized)(void *ctx, size_t max, const char *id);
	/* The input reached EOF or failed, or the output's reader went away:
	 * the session is over.  Called once. */
	void (*on_close)(void *ctx);
};

/* Serve on in_fd/out_fd (made non-blocking; restored by free).  Fds that
 * epoll cannot watch (regular files, /dev/null) are read and written
 * directly. */
struct stdio_transport *stdio_transport_new(struct loop *l, int in_fd, int out_fd, size_t max_message,
					    const struct stdio_transport_ops *ops, void *ctx,
					    struct pc_err *err);
/* Queue one message as a line and start writing it. */
void stdio_transport_send(struct stdio_transport *t, const json_t *msg);
/* Bytes sent that the reader has not read yet: those queued here, and
 * those in the pipe (or the socket's send queue) of out_fd. */
size_t stdio_transport_unread(const struct stdio_transport *t);
/* Write what is queued, waiting at most timeout_ms for the reader. */
void stdio_transport_flush(struct stdio_transport *t, int timeout_ms);
void stdio_transport_free(struct stdio_transport *t);

#endif
