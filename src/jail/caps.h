/* pycell: capabilities.  The jail keeps none; the supervisor only what it uses. */
#ifndef PYCELL_CAPS_H
#define PYCELL_CAPS_H

#include <stdbool.h>
#include <sys/types.h>

#include "base/util.h"

/* In the jail child, after the mounts: switch to uid/gid, and empty the
 * effective, permitted, inheritable, ambient and bounding sets. */
int caps_drop_jail(uid_t uid, gid_t gid, struct pc_err *err);
/* The same for a jail without namespaces (jail.c, bare): ids uid:gid,
 * supplementary groups dropped when as_root, no capability left. */
int caps_drop_bare(uid_t uid, gid_t gid, bool as_root, struct pc_err *err);
/* In the supervisor at start: not dumpable; drop capabilities not needed. */
int caps_harden_supervisor(struct pc_err *err);
/* CAP_NET_ADMIN and CAP_NET_BIND_SERVICE into the effective set (on) or
 * out of it, when they are permitted: a supervisor running as root holds
 * them for egress runs, effective only while it sets one up.  Nothing
 * when they are not permitted (the setup then fails with EPERM). */
int caps_net(bool on, struct pc_err *err);

#endif
