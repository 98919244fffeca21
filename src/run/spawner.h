/* pycell: the ways of starting a jail, behind one table of operations.
 *
 * run.c drives a run through a spawner and never names one, the way crun
 * drives its cgroup managers through one struct of operations.  Each
 * spawner is one file: cold (a clone3 per run, spawn_cold.c), warm (cloned
 * by a zygote that holds an initialised interpreter, spawn_warm.c); the
 * WASM and session starts come the same way.
 *
 *	prepare  make it ready to start jails of one policy (warm: the zygote)
 *	serves   can it start a jail of this policy?
 *	spawn    clone a jail for a spec; the child waits for release
 *	release  write the jail's id maps and let it build itself; on failure
 *	         the jail is gone
 *	deliver  hand a jail made ahead (spec->park) its program, after its
 *	         release; NULL when the spawner makes no jails ahead
 *	free     stop it (warm: the zygote, with the jails it still parents)
 */
#ifndef PYCELL_SPAWNER_H
#define PYCELL_SPAWNER_H

#include <stdbool.h>

#include "base/util.h"
#include "config/policy.h"
#include "jail/jail.h"

struct spawner;

struct spawner_ops {
	const char *name;   /* "cold", "warm": in messages ("warm start failed") */
	int (*prepare)(struct spawner *sp, const struct policy *p, const char *runtime_dir,
		       struct pc_err *err);
	bool (*serves)(const struct spawner *sp, const struct policy *p);
	int (*spawn)(struct spawner *sp, const struct jail_spec *s, struct jail *j, struct pc_err *err);
	int (*release)(struct spawner *sp, const struct jail_spec *s, struct jail *j, struct pc_err *err);
	int (*deliver)(struct spawner *sp, const struct jail_spec *s, const struct jail *j,
		       struct pc_err *err);
	void (*free)(struct spawner *sp);
};

/* Every spawner starts with this; its own state follows. */
struct spawner {
	const struct spawner_ops *ops;
};

/* The cold spawner: one for the process, nothing to prepare or free. */
struct spawner *spawner_cold(void);
/* A warm spawner, not yet prepared (spawn_warm.c). */
struct spawner *spawner_warm_new(void);

#endif
