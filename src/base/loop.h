/* pycell: the single-threaded epoll event loop every interface runs on. */
#ifndef PYCELL_LOOP_H
#define PYCELL_LOOP_H

#include <stdbool.h>
#include <stdint.h>

struct loop;
struct loop_watch;

/* Called with the epoll events that fired on the watched fd. */
typedef void (*loop_fn)(struct loop_watch *w, uint32_t events, void *data);

struct loop_watch {
	int fd;
	uint32_t events;
	loop_fn fn;
	void *data;
	bool registered;
};

struct loop *loop_new(void);
void loop_free(struct loop *l);
/* Start watching w->fd for `events` (EPOLLIN/EPOLLOUT...).  The watch
 * struct is owned by the caller and must stay alive until loop_del. */
int loop_add(struct loop *l, struct loop_watch *w, int fd, uint32_t events, loop_fn fn, void *data);
int loop_mod(struct loop *l, struct loop_watch *w, uint32_t events);
void loop_del(struct loop *l, struct loop_watch *w);
/* Wait up to timeout_ms (-1 forever) and dispatch.  Returns the number of
 * events dispatched, or -1 on error (errno). */
int loop_run_once(struct loop *l, int timeout_ms);

#endif
