/* pycell: what the two MCP front ends (`pycell mcp`, `pycell serve`)
 * share: the bridge as the MCP server's tool hooks, and the termination
 * signals as an event on the loop. */
#ifndef PYCELL_MCP_FRONT_H
#define PYCELL_MCP_FRONT_H

#include <signal.h>
#include <stdbool.h>

#include "base/loop.h"
#include "base/util.h"
#include "bridge/bridge.h"
#include "mcp/mcp.h"

/* The --help of an MCP command: its usage with, at the end of its first
 * paragraph, what the table of tools says of them (mcp_tools_help);
 * malloc'd. */
char *front_help(const char *usage);

/* The tool hooks of cfg served by bridge b (attach, list, settled). */
void front_bridge_hooks(struct mcp_server_config *cfg, struct bridge *b);

/* SIGTERM, SIGINT and SIGHUP, blocked and read from a signalfd on the
 * loop: one sets *stop and records itself in `signal`; or, with `on`
 * set (front_signals_route), is handed to on(ctx, signo). */
struct front_signals {
	sigset_t old;
	int fd;
	struct loop_watch w;
	int signal;
	bool *stop;
	void (*on)(void *ctx, int signo);
	void *ctx;
};
/* Block the signals (before anything starts, so none is lost). */
void front_signals_block(struct front_signals *fs);
/* Watch them on l; -1 with err. */
int front_signals_watch(struct front_signals *fs, struct loop *l, bool *stop, struct pc_err *err);
/* Hand each signal to on(ctx, signo) instead of stopping. */
void front_signals_route(struct front_signals *fs, void (*on)(void *ctx, int signo), void *ctx);
/* Unwatch, close, restore the mask. */
void front_signals_end(struct front_signals *fs, struct loop *l);

#endif
