/* pycell: jails made ahead of their requests (warm starts), for any
 * transport: stdio and HTTP take from the same pool.  Each ready jail has
 * gone through the whole jail sequence, and its python waits for a cell
 * (run_park); each serves exactly one run. */
#ifndef PYCELL_POOL_H
#define PYCELL_POOL_H

#include "base/loop.h"
#include "run/run.h"

struct run_pool;

/* Up to `size` jails of env's policy, made by spawner sp (none without
 * one: NULL), one of env's (run_env_warm_for).  The env must outlive the
 * pool. */
struct run_pool *run_pool_new(struct loop *l, const struct run_env *env, struct spawner *sp, unsigned size);
/* Replace the jails that died while waiting and ask for up to size; they
 * come from the loop (the zygote's round trip never holds it); a failure
 * is retried a second later at the earliest.  Asking costs the loop the
 * run's cgroup, pipes and a message, and its coming the id maps: call it
 * once a run has been answered, not on a request's path. */
void run_pool_fill(struct run_pool *p);
/* Start req (RUN_MODE_CELL) on the oldest ready jail, the most likely to
 * be done getting ready; NULL when there is none, the program is too large
 * for one, or none works (those that failed are freed): start req the
 * usual way then. */
struct run *run_pool_start(struct run_pool *p, const struct run_request *req);
/* Jails ready now, and how many the pool keeps (0 without warm starts,
 * and while the zygote that makes them starts or after it failed to;
 * both 0 for NULL). */
unsigned run_pool_ready(const struct run_pool *p);
unsigned run_pool_size(const struct run_pool *p);
/* Up: no warm starts, or the last ready jail it tried to make was made
 * (none ready now is load, not a fault). */
bool run_pool_up(const struct run_pool *p);
/* Kills and frees the jails still waiting. */
void run_pool_free(struct run_pool *p);

#endif
