/* pycell: what the MCP front ends share (mcp_front.h). */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "cli/mcp_front.h"

static void attach_tools(void *ctx, struct run_request *req)
{
	bridge_attach(ctx, req);
}

static json_t *jail_tools(void *ctx, const struct policy *p)
{
	return bridge_tools_for_policy(ctx, p);
}

static bool tools_settled(void *ctx)
{
	return bridge_settled(ctx);
}

char *front_help(const char *usage)
{
	const char *end = strstr(usage, "\n\n");
	cleanup_free char *tools = mcp_tools_help();
	size_t head = end ? (size_t)(end - usage) + 1 : strlen(usage);
	return xasprintf("%.*s%s%s", (int)head, usage, tools, usage + head);
}

void front_bridge_hooks(struct mcp_server_config *cfg, struct bridge *b)
{
	cfg->attach_tools = attach_tools;
	cfg->jail_tools = jail_tools;
	cfg->tools_settled = tools_settled;
	cfg->tool_ctx = b;
}

static void on_signal(struct loop_watch *w, uint32_t events, void *data)
{
	struct front_signals *fs = data;
	struct signalfd_siginfo si;
	if (read(w->fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		fs->signal = (int)si.ssi_signo;
		if (fs->on)
			fs->on(fs->ctx, fs->signal);
		else
			*fs->stop = true;
	}
	(void)events;
}

static void term_signals(sigset_t *s)
{
	sigemptyset(s);
	sigaddset(s, SIGTERM);
	sigaddset(s, SIGINT);
	sigaddset(s, SIGHUP);
}

void front_signals_block(struct front_signals *fs)
{
	sigset_t sigs;
	memset(fs, 0, sizeof(*fs));
	fs->fd = -1;
	term_signals(&sigs);
	sigprocmask(SIG_BLOCK, &sigs, &fs->old);
}

int front_signals_watch(struct front_signals *fs, struct loop *l, bool *stop, struct pc_err *err)
{
	sigset_t sigs;
	term_signals(&sigs);
	fs->stop = stop;
	fs->fd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
	if (fs->fd < 0 || loop_add(l, &fs->w, fs->fd, EPOLLIN, on_signal, fs) < 0)
		return pc_syserr(err, "loop", "signalfd");
	return 0;
}

void front_signals_route(struct front_signals *fs, void (*on)(void *ctx, int signo), void *ctx)
{
	fs->on = on;
	fs->ctx = ctx;
}

void front_signals_end(struct front_signals *fs, struct loop *l)
{
	if (fs->w.registered)
		loop_del(l, &fs->w);
	if (fs->fd >= 0)
		close(fs->fd);
	fs->fd = -1;
	sigprocmask(SIG_SETMASK, &fs->old, NULL);
}
