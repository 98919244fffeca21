/* pycell: the jail's root filesystem, built on a fresh tmpfs. */
#ifndef PYCELL_ROOTFS_H
#define PYCELL_ROOTFS_H

#include "base/util.h"
#include "jail/jail.h"

/* In the jail child (own mount namespace, caps in its userns): build the
 * root, pivot into it, detach the host, make / read-only, cwd /workspace. */
/* dns: an egress run's resolver (its gateway, network byte order) for
 * /etc/resolv.conf; 0: none. */
int rootfs_build(const struct jail_spec *spec, uint32_t dns, struct pc_err *err);

#define JAIL_RUN_DIR "/run/pycell"
#define JAIL_LIB_DIR "/run/pycell/lib"
/* A run's packages (run/packages.h), bound read-only; on PYTHONPATH after the runtime. */
#define JAIL_PACKAGES_DIR "/run/pycell/packages"
#define JAIL_WORKSPACE "/workspace"
/* matplotlib's font list (run/fonts.h), bound read-only when built, and
 * linked from MPLCONFIGDIR, where matplotlib looks for it */
#define JAIL_FONTS_DIR "/run/pycell/fonts"
#define JAIL_MPLCONFIGDIR "/tmp/matplotlib"
/* The wasm backend's program (runtime/wasm/runner.mjs), in the runtime */
#define JAIL_WASM_RUNNER JAIL_LIB_DIR "/wasm/runner.mjs"
/* ptys one jail may hold open at once (its devpts instance's max=) */
#define JAIL_MAX_PTYS "64"

/* The font list in directory dir (fontlist-vNNN.json, a regular file) into
 * name: true; false when dir has none.  Paths as the caller sees them. */
bool rootfs_font_list(const char *dir, char *name, size_t size);

#endif
