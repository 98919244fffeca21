/* pycell: the jail's rlimits. */
#ifndef PYCELL_RLIMITS_H
#define PYCELL_RLIMITS_H

#include <stdbool.h>

#include "base/util.h"
#include "config/policy.h"

/* RLIMIT_NPROC is counted per user namespace (Linux >= 5.14). */
bool rlimit_nproc_per_userns(void);

/* In the jail child before exec: CORE 0, FSIZE, NOFILE, and NPROC when
 * the jail has a user namespace of its own (own_userns) to count it in. */
int rlimits_apply(const struct limits *lim, bool own_userns, struct pc_err *err);

#endif
