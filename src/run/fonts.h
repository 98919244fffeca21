/* pycell: matplotlib's font list, built once per interpreter and given to
 * every run read-only.
 *
 * A python that plots for the first time has matplotlib scan the fonts
 * and write its list (fontlist-vNNN.json) into its cache directory, which
 * in a jail is the run's own empty /tmp/matplotlib: every cold run, every
 * warm run whose zygote did not preload matplotlib, and every session paid
 * for that scan (0.2-0.4 s).  The list is built instead by a jail of the
 * policy, running runtime/pycell/_fonts.py (so every path in it is one a
 * run sees), kept in cache_subdir("fonts")/KEY (KEY: the interpreter and
 * the policy's binds), bound read-only at /run/pycell/fonts in each jail,
 * and linked from /tmp/matplotlib, where matplotlib looks (rootfs.c).
 * The list is stale when a directory its builder watched (the font
 * directories, the interpreter's module directories) has changed since;
 * pycell mcp and pycell serve build it again then, in the background,
 * at start.  No user's code runs in the build, and no run can write the
 * list. */
#ifndef PYCELL_FONTS_H
#define PYCELL_FONTS_H

#include "config/policy.h"

struct loop;
struct run_env;

/* KEY's directory for policy p (malloc'd), or NULL: no cache directory,
 * the wasm backend, or a run environment whose MPLCONFIGDIR is not
 * /tmp/matplotlib.  Whether the list is built is not looked at. */
char *fonts_dir_for(const struct policy *p);

/* Is dir's list (or its record that the interpreter has no matplotlib)
 * there and up to date with the directories it was built from?  When not,
 * why (what is missing, or which directory changed). */
bool fonts_fresh(const struct policy *p, const char *dir, char *why, size_t size);

/* Build env's font list when it is missing or stale: a run started on
 * loop l now, whose end puts the list in place (logged); NULL when
 * nothing was started (fresh, or there is no cache).  A build's failure
 * is logged, and the runs go on without a list, as before. */
struct fonts_build *fonts_refresh(struct loop *l, const struct run_env *env);
/* Stop a build (its jail is killed) and free it. */
void fonts_build_free(struct fonts_build *b);

#endif
