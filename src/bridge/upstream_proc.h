/* pycell: starting an upstream MCP server's process (upstream_proc.c). */
#ifndef PYCELL_UPSTREAM_PROC_H
#define PYCELL_UPSTREAM_PROC_H

#include <sys/types.h>

#include "base/util.h"
#include "config/conf.h"

struct upstream_proc {
	pid_t pid;          /* leader of its own process group */
	int pidfd;
	int in_fd, out_fd, err_fd;   /* its stdin, stdout, stderr: nonblocking, close-on-exec */
};

/* Fork and exec c's command; -1 with err when nothing was started. */
int upstream_proc_start(const struct upstream_conf *c, struct upstream_proc *p, struct pc_err *err);

#endif
