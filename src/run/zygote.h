/* pycell: warm starts.  A zygote is the pycell binary re-executed as a
 * helper that loads libpython, initialises one interpreter, and never runs
 * user code itself.  For each run it clones a jail with jail_clone() — the
 * same namespaces, root filesystem, limits and seccomp filter as a cold
 * run — and pid 2 of that jail runs the program in the interpreter it
 * inherited, instead of exec'ing a fresh one.  The run's pidfd and sync
 * socket travel back to the supervisor, which releases the jail and drives
 * it exactly like a cold one.
 *
 *	struct zygote *z;
 *	zygote_start(&env.policy, env.runtime_dir, &z, &err);  // once
 *	run request: req.zygote = z;                            // per run
 *	zygote_free(z);
 */
#ifndef PYCELL_ZYGOTE_H
#define PYCELL_ZYGOTE_H

#include <stdbool.h>

#include "base/util.h"
#include "config/policy.h"
#include "jail/jail.h"

struct zygote;

/* Start a zygote for this policy.  Fails (and the caller stays on cold
 * starts) when the policy's interpreter has no loadable libpython or uses
 * flags a zygote cannot honour. */
int zygote_start(const struct policy *p, const char *runtime_dir, struct zygote **out,
		 struct pc_err *err);
/* Can this zygote serve a run of policy p (same interpreter and jail)? */
bool zygote_serves(const struct zygote *z, const struct policy *p);
/* Clone a jail from the zygote; on success j holds the pidfd and sync fd
 * and the child waits for jail_release().  Without spec->park it runs a
 * script: spec's files, with argv/envp as sys.argv and os.environ.  With
 * spec->park it becomes a ready jail for one cell (zygote_deliver). */
int zygote_spawn(struct zygote *z, const struct jail_spec *spec, struct jail *j, struct pc_err *err);
/* Hand a ready jail its cell: the files of spec (main.py, variables.json). */
int zygote_deliver(const struct jail_spec *spec, const struct jail *j, struct pc_err *err);
pid_t zygote_pid(const struct zygote *z);
void zygote_free(struct zygote *z);

/* The hidden subcommand the zygote runs as (`pycell __zygote`). */
int cmd_zygote(int argc, char **argv);

#endif
