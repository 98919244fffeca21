/* pycell: the ways of starting a jail, behind one table of operations.
 *
 * run.c drives a run through a spawner and never names one, the way crun
 * drives its cgroup managers through one struct of operations.  Each
 * spawner is one file: cold (a clone3 per run, spawn_cold.c), warm (cloned
 * by a zygote that holds an initialised interpreter, spawn_warm.c), wasm
 * (cloned cold, node with Pyodide loaded waits for its cell, spawn_wasm.c).
 *
 *	prepare  make it ready to start jails of one policy (warm: the zygote)
 *	serves   can it start a jail of this policy?
 *	spawn    clone a jail for a spec; the child waits for release
 *	release  write the jail's id maps and let it build itself; on failure
 *	         the jail is gone (warm: done already for a small init's jail,
 *	         as its answer came; then nothing)
 *	deliver  hand a jail made ahead (spec->park) its program, after its
 *	         release; NULL when the spawner makes no jails ahead
 *	spawn_ahead  spawn, for a jail made ahead (spec->park), without
 *	         waiting: the answer comes from the loop (warm: the zygote's
 *	         round trip never holds it); NULL with deliver
 *	cancel   the caller of spawn_ahead no longer wants that jail
 *	free     stop it (warm: the zygote, with the jails it still parents)
 */
#ifndef PYCELL_SPAWNER_H
#define PYCELL_SPAWNER_H

#include <stdbool.h>

#include <jansson.h>

#include "base/util.h"
#include "config/policy.h"
#include "jail/jail.h"

struct spawner;
struct loop;
/* A jail asked for with spawn_ahead and not come yet (the spawner's). */
struct spawn_ahead;
/* Its answer: j (the jail waits for its release) or err, never both. */
typedef void (*spawn_ahead_fn)(void *ctx, struct jail *j, const struct pc_err *err);

struct spawner_ops {
	const char *name;   /* "cold", "warm": in messages ("warm start failed") */
	int (*prepare)(struct spawner *sp, const struct policy *p, const char *runtime_dir,
		       struct pc_err *err);
	bool (*serves)(const struct spawner *sp, const struct policy *p);
	/* Optional: before a run of policy p opens its descriptors, a spawner
	 * that lost its process starts it again (when it may, and it serves
	 * p), so that the restart does not compete with that run for them,
	 * and does not wait for it; one whose start was not waited for looks
	 * whether it is ready.  True while it is starting: serves is false
	 * until a later revive finds it ready. */
	bool (*revive)(struct spawner *sp, const struct policy *p);
	int (*spawn)(struct spawner *sp, const struct jail_spec *s, struct jail *j, struct pc_err *err);
	int (*release)(struct spawner *sp, const struct jail_spec *s, struct jail *j, struct pc_err *err);
	int (*deliver)(struct spawner *sp, const struct jail_spec *s, struct jail *j,
		       struct pc_err *err);
	/* The spec's fds are sent with the request: the caller may close its
	 * copies on return.  done(ctx, ...) is called once, from loop l, unless
	 * cancelled first; NULL (err set) when the request could not be made.
	 * Whatever asked ahead is answered or cancelled before l is freed. */
	struct spawn_ahead *(*spawn_ahead)(struct spawner *sp, struct loop *l, const struct jail_spec *s,
					   spawn_ahead_fn done, void *ctx, struct pc_err *err);
	/* done is not called; the jail, when it comes, is killed. */
	void (*cancel)(struct spawner *sp, struct spawn_ahead *a);
	void (*free)(struct spawner *sp);
};

/* Every spawner starts with this; its own state follows. */
struct spawner {
	const struct spawner_ops *ops;
};

/* The cold spawner: one for the process, nothing to prepare or free. */
struct spawner *spawner_cold(void);
/* A warm spawner, not yet prepared (spawn_warm.c): prepare waits until
 * its zygote is ready. */
struct spawner *spawner_warm_new(void);
/* The same, but prepare only starts the zygote: until it has answered
 * (seen by revive, before each run), serves is false and the runs start
 * cold, and the loop serves everything else meanwhile; a zygote that
 * fails to start is logged, and its runs stay cold.  (Either spawner
 * starts a zygote that died this way, without waiting for it; a restart
 * that fails is tried again.) */
struct spawner *spawner_warm_new_async(void);
/* A warm spawner's report of its zygote's python.preload (zygote.h:
 * {"loaded", "failed", "ms"}), borrowed; NULL for any other spawner or a
 * zygote not started. */
json_t *spawner_preload(const struct spawner *sp);
/* The wasm backend's: jails cloned cold whose node loads Pyodide ahead and
 * waits for its cell (spawn_wasm.c); one for the process. */
struct spawner *spawner_wasm(void);
/* Hand the ready jail j its cell, the files of s, in one memfd (for each
 * file its name, a NUL, its length in 8 bytes of native order, its
 * bytes): the deliver of the warm and wasm spawners. */
int spawner_deliver_cell(const struct jail_spec *s, struct jail *j, struct pc_err *err);

#endif
