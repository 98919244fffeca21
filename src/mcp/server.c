/* pycell: MCP: a server, what every client of one policy shares (mcp.h):
 * made, reconfigured by a reload, counted, freed. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "mcp/internal.h"
#include "mcp/resources.h"
#include "mcp/sessions.h"
#include "mcp/subscriptions.h"
#include "mcp/tasks.h"
#include "mcp/tools.h"
#include "run/fonts.h"

/* The features, made in this order and freed in the reverse. */
const struct mcp_feature *const mcp_features[] = {
	&mcp_tasks_feature, &mcp_sessions_feature, &mcp_resources_feature, &mcp_subscriptions_feature,
};
const size_t mcp_n_features = ARRAY_SIZE(mcp_features);

struct mcp_server *mcp_server_new(struct loop *l, const struct run_env *env,
				  const struct mcp_server_config *cfg, struct pc_err *err)
{
	struct mcp_server *s = xcalloc(1, sizeof(*s));
	s->loop = l;
	s->env = env;
	s->cfg = *cfg;
	if (!s->cfg.max_runs)
		s->cfg.max_runs = DEFAULT_MAX_RUNS;
	s->tick_fd = s->hold_fd = s->after_fd = -1;
	s->defer_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (s->defer_fd < 0 || loop_add(l, &s->w_defer, s->defer_fd, EPOLLIN, mcp_on_defer, s) < 0) {
		pc_syserr(err, "mcp", "eventfd");
		goto fail;
	}
	s->tick_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (s->tick_fd < 0 || loop_add(l, &s->w_tick, s->tick_fd, EPOLLIN, mcp_on_tick, s) < 0) {
		pc_syserr(err, "mcp", "timerfd");
		goto fail;
	}
	s->hold_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (s->hold_fd < 0 || loop_add(l, &s->w_hold, s->hold_fd, EPOLLIN, mcp_on_hold, s) < 0) {
		pc_syserr(err, "mcp", "timerfd");
		goto fail;
	}
	s->after_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (s->after_fd < 0 || loop_add(l, &s->w_after, s->after_fd, EPOLLIN, mcp_on_after, s) < 0) {
		pc_syserr(err, "mcp", "timerfd");
		goto fail;
	}
	for (size_t k = 0; k < mcp_n_features; k++)
		if (mcp_features[k]->init(s, err) < 0)
			goto fail;
	s->tools = mcp_tools_new(&env->policy);
	if (!s->tools) {
		pc_fail(err, 0, "mcp", "could not build the tool definitions");
		goto fail;
	}
	s->pool = run_pool_new(l, env, env->warm, s->cfg.ready);
	run_pool_fill(s->pool);
	s->fonts = fonts_refresh(l, env);
	return s;
fail:
	mcp_server_free(s);
	return NULL;
}

int mcp_server_reconfigure(struct mcp_server *s, const struct run_env *env,
			   const struct mcp_server_config *cfg, struct pc_err *err)
{
	json_t *tools = mcp_tools_new(&env->policy);
	if (!tools)
		return pc_fail(err, 0, "mcp", "could not build the tool definitions");
	json_decref(s->tools);
	s->tools = tools;
	/* the ready jails are the old policy's: gone; the new pool fills
	 * from the loop, as after a run */
	run_pool_free(s->pool);
	mcp_pools_free(s);
	s->env = env;
	s->cfg.max_runs = cfg->max_runs ? cfg->max_runs : DEFAULT_MAX_RUNS;
	s->cfg.ready = cfg->ready;
	s->cfg.cache_private = cfg->cache_private;
	s->pool = run_pool_new(s->loop, env, env->warm, s->cfg.ready);
	/* the build of the old env's list (it may go with it) ends here */
	fonts_build_free(s->fonts);
	s->fonts = fonts_refresh(s->loop, env);
	mcp_kick(s);   /* more run slots start queued runs; the pool fills */
	return 0;
}

bool mcp_server_uses_env(const struct mcp_server *s, const struct run_env *env)
{
	if (s->env == env)
		return true;
	for (const struct mcp_call *c = s->active.head; c; c = c->next)
		if (c->env == env)
			return true;
	for (size_t i = 0; i < s->n_spent; i++)
		if (s->spent[i].env == env)
			return true;
	for (size_t k = 0; k < mcp_n_features; k++)
		if (mcp_features[k]->uses_env && mcp_features[k]->uses_env(s, env))
			return true;
	return false;
}

void mcp_server_quiesce(struct mcp_server *s)
{
	for (size_t k = 0; k < mcp_n_features; k++)
		if (mcp_features[k]->quiesce)
			mcp_features[k]->quiesce(s);
}

void mcp_server_stats(const struct mcp_server *s, struct mcp_stats *st)
{
	*st = s->stats;
	st->running = s->n_running;
	st->queued = s->queue.n;
	st->ready = run_pool_ready(s->pool);
	st->ready_target = run_pool_size(s->pool);
	st->pool_up = run_pool_up(s->pool);
	for (size_t i = 0; i < s->n_pools; i++) {
		st->ready += run_pool_ready(s->pools[i].pool);
		st->ready_target += run_pool_size(s->pools[i].pool);
		st->pool_up = st->pool_up && run_pool_up(s->pools[i].pool);
	}
	for (size_t k = 0; k < mcp_n_features; k++)
		if (mcp_features[k]->stats)
			mcp_features[k]->stats(s, st);
}

void mcp_server_free(struct mcp_server *s)
{
	if (!s)
		return;
	/* run_free kills and reaps each jail; nothing is sent (the ended and
	 * held calls are on the active list too) */
	s->ended = s->held = NULL;
	while (s->queue.head)
		mcp_call_free(s->queue.head);
	while (s->active.head) {
		s->active.head->cancelled = true;
		mcp_call_free(s->active.head);
	}
	for (size_t k = mcp_n_features; k-- > 0;)
		mcp_features[k]->free(s);
	mcp_free_spent(s);
	free(s->spent);
	run_pool_free(s->pool);
	mcp_pools_free(s);
	fonts_build_free(s->fonts);
	run_reap_pending();   /* the jails of runs answered before they had gone */
	loop_del(s->loop, &s->w_defer);
	loop_del(s->loop, &s->w_tick);
	loop_del(s->loop, &s->w_hold);
	if (s->hold_fd >= 0)
		close(s->hold_fd);
	loop_del(s->loop, &s->w_after);
	if (s->after_fd >= 0)
		close(s->after_fd);
	if (s->defer_fd >= 0)
		close(s->defer_fd);
	if (s->tick_fd >= 0)
		close(s->tick_fd);
	json_decref(s->tools);
	free(s->python_impl);
	free(s->python_version);
	json_decref(s->packages);
	free(s);
}
