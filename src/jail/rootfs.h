/* pycell: the jail's root filesystem, built on a fresh tmpfs. */
#ifndef PYCELL_ROOTFS_H
#define PYCELL_ROOTFS_H

#include "base/util.h"
#include "jail/jail.h"

/* In the jail child (own mount namespace, caps in its userns): build the
 * root, pivot into it, detach the host, make / read-only, cwd /workspace. */
int rootfs_build(const struct jail_spec *spec, struct pc_err *err);

#define JAIL_RUN_DIR "/run/pycell"
#define JAIL_LIB_DIR "/run/pycell/lib"
#define JAIL_WORKSPACE "/workspace"
/* ptys one jail may hold open at once (its devpts instance's max=) */
#define JAIL_MAX_PTYS "64"

#endif
