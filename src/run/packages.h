/* pycell: packages on request.  A run or session may ask for packages the
 * policy allows ("packages": {"index", "allow"}); pycell installs them in
 * a jail of its own whose egress is the index only, wheels only (pip
 * --only-binary :all:, so no package code runs), into a content-addressed
 * cache, and the run binds the set read-only at /run/pycell/packages.
 *
 * The cache (pycell.conf "packages.cache", owned by pycell, mode 0700):
 *	sets/KEY/      one installed set; KEY = sha256 of the interpreter's
 *	               ABI and the sorted name==version of every package in it
 *	requests/RKEY  the KEY a request resolved to; RKEY = sha256 of the
 *	               index, the interpreter, the allowlist's bounds and the
 *	               request: the same request again costs only the bind
 *	staging/       installs in progress (a crashed server's are swept)
 * Sets are used least recently first out when the cache passes its size;
 * a set a run of this process holds is never removed. */
#ifndef PYCELL_PACKAGES_H
#define PYCELL_PACKAGES_H

#include <stdbool.h>
#include <stdint.h>

#include "base/loop.h"
#include "base/util.h"
#include "config/policy.h"

struct run_request;
struct pkg_op;

/* The most packages one request names. */
#define PACKAGES_MAX 32

/* The cache this process uses (pycell.conf "packages"; copied). */
void packages_configure(const char *cache_dir, uint64_t max_bytes);

/* Check a request against the policy: -1 with err naming the package
 * (its index in the request) and what is wrong. */
int packages_check(const struct policy *p, char *const *specs, size_t n, struct pc_err *err);

/* done(ctx, dir, NULL) with the set's directory (valid until
 * packages_put(dir)), or done(ctx, NULL, err).  Called from loop l, never
 * from inside packages_get. */
typedef void (*pkg_done_fn)(void *ctx, const char *dir, const struct pc_err *err);
/* Get the set for a checked request: from the cache, or installed by a
 * run made from base (its cgroups, runtime and the policy, whose
 * interpreter and limits the install uses).  NULL (err set) when nothing
 * could be started. */
struct pkg_op *packages_get(struct loop *l, const struct run_request *base, char *const *specs, size_t n,
			    pkg_done_fn done, void *ctx, struct pc_err *err);
/* done is not called; an install in progress is killed. */
void packages_cancel(struct pkg_op *op);
/* A run is done with the set packages_get gave it. */
void packages_put(const char *dir);

#endif
