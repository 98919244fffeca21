/* pycell: the pool of ready jails (pool.h). */
#include "config.h"

#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "base/log.h"
#include "jail/jail.h"
#include "run/pool.h"
#include "run/spawner.h"

/* How often a pool whose zygote is starting looks whether it is ready. */
#define POOL_STARTING_LOOK_MS 50

struct run_pool {
	struct loop *loop;
	const struct run_env *env;
	struct spawner *sp;       /* what makes its jails; NULL: none */
	unsigned size;
	struct run **ready;       /* oldest first */
	unsigned n;
	struct run **making;      /* asked of the zygote, not come yet */
	unsigned n_making;
	uint64_t failed_ms;       /* when making one last failed */
	bool up;                  /* the last one tried was made */
	/* the next try after a failure, a second later (not only when a run
	 * ends: then that run's descriptors may be what the try lacked), and
	 * while the zygote starts, the next look whether it is ready */
	int timer_fd;
	struct loop_watch w_timer;
};

unsigned run_pool_ready(const struct run_pool *p)
{
	return p ? p->n : 0;
}

bool run_pool_up(const struct run_pool *p)
{
	return !run_pool_size(p) || p->up;
}

/* None while its zygote starts, or after it failed to (a client's:
 * spawner_warm_new_async): nothing can be made ahead then, and the
 * server is no less healthy for it. */
unsigned run_pool_size(const struct run_pool *p)
{
	return p && p->sp && p->sp->ops->serves(p->sp, &p->env->policy) ? p->size : 0;
}

static void on_retry(struct loop_watch *w, uint32_t events, void *data)
{
	struct run_pool *p = data;
	uint64_t n;
	(void)!read(p->timer_fd, &n, sizeof(n));
	run_pool_fill(p);
	(void)w;
	(void)events;
}

struct run_pool *run_pool_new(struct loop *l, const struct run_env *env, struct spawner *sp, unsigned size)
{
	struct run_pool *p = xcalloc(1, sizeof(*p));
	p->loop = l;
	p->env = env;
	p->sp = sp;
	p->size = size;
	p->ready = xcalloc(size ? size : 1, sizeof(*p->ready));
	p->making = xcalloc(size ? size : 1, sizeof(*p->making));
	/* without it, a failed try is retried when a run ends, as before */
	p->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (p->timer_fd >= 0 && loop_add(l, &p->w_timer, p->timer_fd, EPOLLIN, on_retry, p) < 0) {
		close(p->timer_fd);
		p->timer_fd = -1;
	}
	return p;
}

/* Take ready jail i off the list (the rest keep their order). */
static struct run *take(struct run_pool *p, unsigned i)
{
	struct run *r = p->ready[i];
	memmove(p->ready + i, p->ready + i + 1, (--p->n - i) * sizeof(*p->ready));
	return r;
}

/* run_pool_fill again in ms (replacing any time set before). */
static void fill_in(struct run_pool *p, uint64_t ms)
{
	struct itimerspec t = { .it_value = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000 } };
	if (p->timer_fd >= 0)
		timerfd_settime(p->timer_fd, 0, &t, NULL);
}

/* Making a ready jail failed: say why; the next try is a second away. */
static void pool_failed(struct run_pool *p, const struct pc_err *err)
{
	log_warn("pool: could not make a ready jail: %s: %s", err->step, err->msg);
	p->failed_ms = now_ms();
	p->up = false;
	fill_in(p, 1000);
}

/* A jail asked for by run_pool_fill came, or could not be made. */
static void on_parked(struct run *r, const struct pc_err *err, void *ctx)
{
	struct run_pool *p = ctx;
	unsigned i = 0;
	while (p->making[i] != r)
		i++;
	memmove(p->making + i, p->making + i + 1, (--p->n_making - i) * sizeof(*p->making));
	if (err) {
		pool_failed(p, err);
		run_free(r);
		return;
	}
	p->ready[p->n++] = r;
	p->up = true;
}

void run_pool_fill(struct run_pool *p)
{
	uint64_t since_failed;

	for (unsigned i = 0; i < p->n;) {
		if (run_parked_alive(p->ready[i])) {
			i++;
			continue;
		}
		log_warn("pool: a ready jail died while waiting; making another");
		run_free(take(p, i));
	}
	/* a zygote still starting (or failed to): no jail to make ahead; a
	 * pool of none restarts nothing (a run's start does that).  One that
	 * starts is looked at again soon, so that the pool fills once it is
	 * ready, with no run to ask */
	if (p->sp && p->size && p->sp->ops->revive && p->sp->ops->revive(p->sp, &p->env->policy)) {
		fill_in(p, POOL_STARTING_LOOK_MS);
		return;
	}
	since_failed = now_ms() - p->failed_ms;
	if (since_failed < 1000) {
		/* a timer that looked at a start may have taken the failure's */
		fill_in(p, 1000 - since_failed);
		return;
	}
	while (p->sp && p->sp->ops->serves(p->sp, &p->env->policy) && p->n + p->n_making < p->size) {
		struct run_request req = { .stdin_fd = -1 };
		struct pc_err err = { 0 };
		struct run *r;
		run_request_from_env(&req, p->env);
		req.spawner = p->sp;
		req.mode = RUN_MODE_CELL;
		if (!(r = run_park(p->loop, &req, on_parked, p, &err))) {
			pool_failed(p, &err);
			return;
		}
		p->making[p->n_making++] = r;
	}
}

struct run *run_pool_start(struct run_pool *p, const struct run_request *req)
{
	/* a program a ready jail cannot take (its files, with 64 KiB for
	 * their names) leaves the jails for the next call */
	if (req->code_len + (req->variables_json ? strlen(req->variables_json) : 0) + (64u << 10) >
	    JAIL_PARK_FILES_MAX)
		return NULL;
	while (p->n) {
		struct pc_err err = { 0 };
		struct run *r = take(p, 0);
		if (run_start_parked(r, req, &err) == 0)
			return r;
		log_warn("pool: a ready jail failed (%s: %s); trying another", err.step, err.msg);
		run_free(r);
	}
	return NULL;
}

void run_pool_free(struct run_pool *p)
{
	if (!p)
		return;
	for (unsigned i = 0; i < p->n; i++)
		run_free(p->ready[i]);
	for (unsigned i = 0; i < p->n_making; i++)
		run_free(p->making[i]);
	if (p->timer_fd >= 0) {
		loop_del(p->loop, &p->w_timer);
		close(p->timer_fd);
	}
	free(p->ready);
	free(p->making);
	free(p);
}
