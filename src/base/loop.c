/* pycell: the epoll event loop. */
#include "config.h"

#include <errno.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "base/loop.h"
#include "base/util.h"

struct loop {
	int epfd;
	/* the batch being dispatched, so loop_del can drop pending events of a
	 * watch that a callback removed (and perhaps freed) */
	struct epoll_event *pending;
	int n_pending;
};

struct loop *loop_new(void)
{
	struct loop *l = xcalloc(1, sizeof(*l));
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0) {
		free(l);
		return NULL;
	}
	return l;
}

void loop_free(struct loop *l)
{
	if (!l)
		return;
	close(l->epfd);
	free(l);
}

int loop_add(struct loop *l, struct loop_watch *w, int fd, uint32_t events, loop_fn fn, void *data)
{
	struct epoll_event ev = { .events = events, .data.ptr = w };
	w->fd = fd;
	w->events = events;
	w->fn = fn;
	w->data = data;
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		return -1;
	w->registered = true;
	return 0;
}

int loop_mod(struct loop *l, struct loop_watch *w, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = w };
	if (!w->registered)
		return -1;
	if (w->events == events)
		return 0;
	w->events = events;
	return epoll_ctl(l->epfd, EPOLL_CTL_MOD, w->fd, &ev);
}

void loop_del(struct loop *l, struct loop_watch *w)
{
	if (!w->registered)
		return;
	epoll_ctl(l->epfd, EPOLL_CTL_DEL, w->fd, NULL);
	w->registered = false;
	for (int i = 0; i < l->n_pending; i++)
		if (l->pending[i].data.ptr == w)
			l->pending[i].data.ptr = NULL;
}

int loop_run_once(struct loop *l, int timeout_ms)
{
	struct epoll_event evs[32];
	int n = epoll_wait(l->epfd, evs, (int)ARRAY_SIZE(evs), timeout_ms);
	if (n < 0)
		return errno == EINTR ? 0 : -1;
	l->pending = evs;
	l->n_pending = n;
	for (int i = 0; i < n; i++) {
		struct loop_watch *w = evs[i].data.ptr;
		if (w)
			w->fn(w, evs[i].events, w->data);
	}
	l->pending = NULL;
	l->n_pending = 0;
	return n;
}
