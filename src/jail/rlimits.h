/* pycell: the jail's rlimits. */
#ifndef PYCELL_RLIMITS_H
#define PYCELL_RLIMITS_H

#include <stdbool.h>

#include "base/util.h"
#include "config/policy.h"

/* RLIMIT_NPROC is counted per user namespace (Linux >= 5.14). */
bool rlimit_nproc_per_userns(void);

/* In the jail child before exec: CORE 0, FSIZE, NOFILE, NPROC. */
int rlimits_apply(const struct limits *lim, struct pc_err *err);

#endif
