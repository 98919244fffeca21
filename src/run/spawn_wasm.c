/* pycell: the wasm backend's spawner.  Its jails are cloned as cold ones
 * are; one made ahead (spec->park) execs node, which loads Pyodide from its
 * snapshot and waits on a pipe for its cell (jail.c copies the cell's
 * files in), so that a call pays for none of the 0.4 s of node's start.
 * One jail per cell, as everywhere: nothing of a run is used again. */
#include "config.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "base/loop.h"
#include "run/spawner.h"

/* A jail asked for ahead: cloned at once, answered from the loop (the
 * caller expects its answer later, as the zygote's comes). */
struct spawn_ahead {
	struct loop *loop;
	struct loop_watch w;
	int efd;
	struct jail j;
	bool made;
	struct pc_err err;
	spawn_ahead_fn done;
	void *ctx;
};

static int wasm_prepare(struct spawner *sp, const struct policy *p, const char *runtime_dir,
			struct pc_err *err)
{
	return 0;
}

static bool wasm_serves(const struct spawner *sp, const struct policy *p)
{
	return policy_is_wasm(p);
}

static int wasm_spawn(struct spawner *sp, const struct jail_spec *s, struct jail *j, struct pc_err *err)
{
	return jail_clone(s, j, err);
}

static int wasm_release(struct spawner *sp, const struct jail_spec *s, struct jail *j, struct pc_err *err)
{
	return jail_release(s, j, err);
}

static int wasm_deliver(struct spawner *sp, const struct jail_spec *s, struct jail *j,
			struct pc_err *err)
{
	return spawner_deliver_cell(s, j, err);
}

static void ahead_end(struct spawn_ahead *a)
{
	loop_del(a->loop, &a->w);
	close(a->efd);
	free(a);
}

static void on_ahead(struct loop_watch *w, uint32_t events, void *data)
{
	struct spawn_ahead *a = data;
	spawn_ahead_fn done = a->done;
	void *ctx = a->ctx;
	struct jail j = a->j;
	struct pc_err err = a->err;
	bool made = a->made;

	ahead_end(a);
	done(ctx, made ? &j : NULL, made ? NULL : &err);
	(void)w;
	(void)events;
}

static struct spawn_ahead *wasm_spawn_ahead(struct spawner *sp, struct loop *l, const struct jail_spec *s,
					    spawn_ahead_fn done, void *ctx, struct pc_err *err)
{
	struct spawn_ahead *a = xcalloc(1, sizeof(*a));
	uint64_t one = 1;

	a->loop = l;
	a->done = done;
	a->ctx = ctx;
	a->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (a->efd < 0) {
		pc_syserr(err, "warm", "eventfd");
		free(a);
		return NULL;
	}
	if (loop_add(l, &a->w, a->efd, EPOLLIN, on_ahead, a) < 0) {
		pc_syserr(err, "warm", "epoll_ctl");
		close(a->efd);
		free(a);
		return NULL;
	}
	a->made = jail_clone(s, &a->j, &a->err) == 0;
	(void)!write(a->efd, &one, sizeof(one));
	return a;
}

static void wasm_cancel(struct spawner *sp, struct spawn_ahead *a)
{
	if (a->made)
		jail_abort(&a->j);
	ahead_end(a);
}

static void wasm_free(struct spawner *sp)
{
}

static const struct spawner_ops wasm_ops = {
	.name = "wasm",
	.prepare = wasm_prepare,
	.serves = wasm_serves,
	.spawn = wasm_spawn,
	.release = wasm_release,
	.deliver = wasm_deliver,
	.spawn_ahead = wasm_spawn_ahead,
	.cancel = wasm_cancel,
	.free = wasm_free,
};

static struct spawner wasm = { .ops = &wasm_ops };

struct spawner *spawner_wasm(void)
{
	return &wasm;
}
