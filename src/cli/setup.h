/* pycell: a command's configuration (pycell.conf), loaded and put in
 * force the same way by every command that runs jails (run, mcp, serve,
 * policy-test) and by serve's reload: the jail's host ids, egress and
 * the package cache take their settings from it here, and only here. */
#ifndef PYCELL_SETUP_H
#define PYCELL_SETUP_H

#include "base/util.h"
#include "config/conf.h"

/* Load path (NULL: the default one) into c and put it in force; -1 with
 * err naming the file and key, and nothing changed. */
int cli_conf_setup(const char *path, struct pycell_conf *c, struct pc_err *err);
/* Put c, already loaded (a reload's), in force. */
void cli_conf_apply(const struct pycell_conf *c);

/* What a server holds for each open session (pipes, sockets, timers, its
 * pidfd, and its cgroup dirs: 14 with the v1 and v2 hierarchies both, as
 * counted at 1,000 sessions; fewer on cgroup v2 alone). */
#define SESSION_FDS 14
/* A server's descriptors: the soft RLIMIT_NOFILE raised to the hard one,
 * and a warning, naming what to raise, when that is still short of what
 * `sessions` open sessions (the policies' sessions.max, summed) need. */
void cli_raise_nofile(const char *cmd, unsigned long sessions);

#endif
