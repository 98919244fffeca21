/* pycell: the rlimits of the jail, set in the jail child (jail.c, step
 * "rlimits") before it drops its capabilities: the backstop under the
 * cgroup limits, and the only limits where no cgroup controller serves. */
#include "config.h"

#include <stdio.h>
#include <sys/resource.h>
#include <sys/utsname.h>

#include "jail/rlimits.h"

/* RLIMIT_NPROC counts the tasks of one uid.  Since Linux 5.14 the count is
 * kept per user namespace (ucounts), so in the jail's fresh namespace it
 * counts this run's tasks only: a real per-run backstop for the pids
 * limit.  Before, it counted every task of the host uid the jail's uid
 * maps to, shared by all concurrent runs and anything else of that uid, so
 * one run could starve another: pycell does not set it there. */
bool rlimit_nproc_per_userns(void)
{
	struct utsname u;
	unsigned maj, min;
	if (uname(&u) < 0 || sscanf(u.release, "%u.%u", &maj, &min) != 2)
		return false;
	return maj > 5 || (maj == 5 && min >= 14);
}

/* Soft and hard both, never above the current hard limit (raising it
 * needs CAP_SYS_RESOURCE, which the jail does not have). */
static int lower_rlimit(int res, const char *name, uint64_t want, struct pc_err *err)
{
	struct rlimit rl;
	if (getrlimit(res, &rl) < 0)
		return pc_syserr(err, "rlimits", "getrlimit(%s)", name);
	if (rl.rlim_max != RLIM_INFINITY && want > rl.rlim_max)
		want = rl.rlim_max;
	rl.rlim_cur = rl.rlim_max = (rlim_t)want;
	if (setrlimit(res, &rl) < 0)
		return pc_syserr(err, "rlimits", "setrlimit(%s, %llu)", name, (unsigned long long)want);
	return 0;
}

/* Never RLIMIT_AS: runtimes reserve far more address space than they use
 * (CPython's allocators, numpy, the JIT of the WASM backend). */
int rlimits_apply(const struct limits *lim, bool own_userns, struct pc_err *err)
{
	if (lower_rlimit(RLIMIT_CORE, "RLIMIT_CORE", 0, err) < 0)
		return -1;
	if (lim->file_bytes && lower_rlimit(RLIMIT_FSIZE, "RLIMIT_FSIZE", lim->file_bytes, err) < 0)
		return -1;
	if (lim->open_files && lower_rlimit(RLIMIT_NOFILE, "RLIMIT_NOFILE", lim->open_files, err) < 0)
		return -1;
	if (lim->pids && own_userns && rlimit_nproc_per_userns() &&
	    lower_rlimit(RLIMIT_NPROC, "RLIMIT_NPROC", lim->pids, err) < 0)
		return -1;
	return 0;
}
