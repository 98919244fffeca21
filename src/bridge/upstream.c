/* pycell: a stdio MCP client for one upstream server (see upstream.h);
 * its process is started by upstream_proc.c.  Longer than the ~700 lines a
 * file here keeps to: it is one state machine (stopped, initializing,
 * listing, ready, backoff) whose calls, timer, handshake and input all
 * read and change the same struct upstream; cut apart, each part would
 * need the whole of it through a header. */
#include "config.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/pidfd.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>

#include "base/jsonrpc.h"
#include "base/log.h"
#include "bridge/upstream.h"
#include "bridge/upstream_proc.h"

/* One line from the server: a result of the largest max_result_bytes a
 * policy may set (64 MiB) plus its envelope. */
#define UP_LINE_MAX ((64u << 20) + (64u << 10))
#define UP_ERRLINE_MAX 4096
/* Bytes not yet taken by a server that stopped reading: calls beyond are refused. */
#define UP_OUT_MAX (64u << 20)
/* The first restart is immediate, the next ones wait 250 ms, 500 ms, ... */
#define UP_BACKOFF_MIN_MS 250
#define UP_BACKOFF_MAX_MS 30000
/* A server that stayed up this long restarts at the shortest backoff. */
#define UP_STABLE_MS 10000
/* After a call timed out: a server that does not answer a ping within a
 * quarter of the call timeout (100 ms to 5 s) is hung, and is killed so
 * that it restarts.  Calls made meanwhile wait for the verdict. */
#define UP_PING_MIN_MS 100
#define UP_PING_MAX_MS 5000
#define UP_HANDSHAKE_MIN_MS 60000
#define UP_STOP_MS 500
#define UP_MAX_TOOLS 1024
#define UP_MAX_PAGES 64
#define UP_READ_CHUNK (64u << 10)
#define UP_PROTOCOL "2025-06-18"

enum up_state { UP_STOPPED, UP_INITIALIZING, UP_LISTING, UP_READY, UP_BACKOFF };
enum call_kind { CALL_TOOL, CALL_INIT, CALL_LIST, CALL_PING };

struct up_call {
	struct up_call *next;
	uint64_t id;
	enum call_kind kind;
	uint64_t deadline;
	bool sent;
	char *tool;
	json_t *arguments;
	upstream_reply_fn fn;
	void *ctx;
};

struct upstream {
	struct loop *loop;
	const struct upstream_conf *conf;
	void (*on_settled)(void *ctx, struct upstream *u);
	void *settled_ctx;

	enum up_state state;
	pid_t pid;
	int pidfd, in_fd, out_fd, err_fd, timer_fd;
	struct loop_watch w_pid, w_in, w_out, w_err, w_timer;
	struct line_reader out_lines, err_lines;
	char *obuf;
	size_t olen, ooff;

	uint64_t next_id;
	struct up_call *calls;     /* queued and in flight, oldest first */
	json_t *tools;             /* the last complete listing */
	json_t *listing;           /* pages being gathered */
	unsigned pages;
	bool relist;               /* list_changed arrived while listing */
	bool ping_out;             /* a hang check is in flight */
	bool killing;              /* up_kill was called for this process */
	uint64_t started_at, restart_at, backoff_ms;
	bool settled;
	char last_err[256];        /* the server's last stderr line */
};

static void up_kill(struct upstream *u, const char *why);
static void rearm(struct upstream *u);

/* The server has had its chance (it is ready, or failed and waits for a
 * restart): whoever waits for the upstreams to settle hears of it. */
static void settle(struct upstream *u)
{
	u->settled = true;
	if (u->on_settled)
		u->on_settled(u->settled_ctx, u);
}
static int spawn(struct upstream *u, struct pc_err *err);

/* ------------------------------------------------------------ calls */

static void call_free(struct up_call *c)
{
	free(c->tool);
	json_decref(c->arguments);
	free(c);
}

static void call_link(struct upstream *u, struct up_call *c)
{
	struct up_call **pp = &u->calls;
	while (*pp)
		pp = &(*pp)->next;
	c->next = NULL;
	*pp = c;
}

static struct up_call *call_unlink_id(struct upstream *u, uint64_t id)
{
	for (struct up_call **pp = &u->calls; *pp; pp = &(*pp)->next) {
		if ((*pp)->id == id) {
			struct up_call *c = *pp;
			*pp = c->next;
			c->next = NULL;
			return c;
		}
	}
	return NULL;
}

static void call_finish(struct up_call *c, enum upstream_status st, json_t *result, const char *msg)
{
	if (c->fn)
		c->fn(c->ctx, st, result, msg);
	call_free(c);
}

/* ------------------------------------------------------------ output to the server */

static void flush_out(struct upstream *u)
{
	while (u->ooff < u->olen) {
		ssize_t n = write(u->in_fd, u->obuf + u->ooff, u->olen - u->ooff);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				loop_mod(u->loop, &u->w_in, EPOLLOUT);
				return;
			}
			up_kill(u, "its stdin is closed");
			return;
		}
		u->ooff += (size_t)n;
	}
	u->olen = u->ooff = 0;
	if (u->w_in.registered)
		loop_mod(u->loop, &u->w_in, 0);
}

static int send_msg(struct upstream *u, json_t *msg)
{
	size_t len;
	char *line;
	if (u->in_fd < 0) {
		json_decref(msg);
		return -1;
	}
	line = jsonrpc_dump_line(msg, &len);
	json_decref(msg);
	if (!line)
		return -1;
	if (u->olen - u->ooff + len > UP_OUT_MAX) {
		free(line);
		return -1;
	}
	if (u->ooff) {
		memmove(u->obuf, u->obuf + u->ooff, u->olen - u->ooff);
		u->olen -= u->ooff;
		u->ooff = 0;
	}
	u->obuf = xrealloc(u->obuf, u->olen + len);
	memcpy(u->obuf + u->olen, line, len);
	u->olen += len;
	free(line);
	flush_out(u);
	return 0;
}

static json_t *request(uint64_t id, const char *method, json_t *params)
{
	json_t *m = json_pack("{s:s,s:I,s:s}", "jsonrpc", "2.0", "id", (json_int_t)id, "method", method);
	if (params)
		json_object_set_new(m, "params", params);
	return m;
}

/* An internal request (handshake, ping) with its own deadline. */
static void send_internal(struct upstream *u, enum call_kind kind, const char *method, json_t *params,
			  uint64_t timeout_ms)
{
	struct up_call *c = xcalloc(1, sizeof(*c));
	c->id = ++u->next_id;
	c->kind = kind;
	c->deadline = now_ms() + timeout_ms;
	c->sent = true;
	call_link(u, c);
	if (send_msg(u, request(c->id, method, params)) < 0)
		up_kill(u, "a request could not be written to it");
	rearm(u);
}

static void send_cancelled(struct upstream *u, uint64_t id, const char *reason)
{
	send_msg(u, jsonrpc_notification("notifications/cancelled",
					 json_pack("{s:I,s:s}", "requestId", (json_int_t)id, "reason", reason)));
}

static int send_tool_call(struct upstream *u, struct up_call *c)
{
	json_t *args = c->arguments ? json_incref(c->arguments) : json_object();
	json_t *params = json_pack("{s:s,s:o}", "name", c->tool, "arguments", args);
	if (send_msg(u, request(c->id, "tools/call", params)) < 0)
		return -1;
	c->sent = true;
	return 0;
}

/* ------------------------------------------------------------ timer */

static void rearm(struct upstream *u)
{
	uint64_t next = 0, now = now_ms();
	struct itimerspec t = { 0 };
	for (struct up_call *c = u->calls; c; c = c->next)
		if (!next || c->deadline < next)
			next = c->deadline;
	if (u->state == UP_BACKOFF && (!next || u->restart_at < next))
		next = u->restart_at;
	if (next) {
		uint64_t d = next > now ? next - now : 1;
		t.it_value.tv_sec = (time_t)(d / 1000);
		t.it_value.tv_nsec = (long)(d % 1000) * 1000000L;
	}
	timerfd_settime(u->timer_fd, 0, &t, NULL);
}

static void schedule_restart(struct upstream *u, uint64_t now)
{
	u->state = UP_BACKOFF;
	u->restart_at = now + u->backoff_ms;
	u->backoff_ms = u->backoff_ms * 2 < UP_BACKOFF_MIN_MS ? UP_BACKOFF_MIN_MS
		      : u->backoff_ms * 2 > UP_BACKOFF_MAX_MS ? UP_BACKOFF_MAX_MS : u->backoff_ms * 2;
}

static void start_ping(struct upstream *u)
{
	uint64_t ms = u->conf->timeout_ms / 4;
	ms = ms < UP_PING_MIN_MS ? UP_PING_MIN_MS : ms > UP_PING_MAX_MS ? UP_PING_MAX_MS : ms;
	if (u->ping_out || u->state != UP_READY)
		return;
	u->ping_out = true;
	send_internal(u, CALL_PING, "ping", NULL, ms);
}

static void on_timer(struct loop_watch *w, uint32_t events, void *data)
{
	struct upstream *u = data;
	uint64_t ticks, now = now_ms();
	struct up_call *expired = NULL, **tail = &expired;
	bool hang_check = false;

	(void)!read(u->timer_fd, &ticks, sizeof(ticks));
	for (struct up_call **pp = &u->calls; *pp;) {
		struct up_call *c = *pp;
		if (c->deadline > now) {
			pp = &c->next;
			continue;
		}
		*pp = c->next;
		c->next = NULL;
		*tail = c;
		tail = &c->next;
	}
	while (expired) {
		struct up_call *c = expired;
		char msg[200];
		expired = c->next;
		switch (c->kind) {
		case CALL_TOOL:
			if (c->sent) {
				send_cancelled(u, c->id, "timeout");
				hang_check = true;
				snprintf(msg, sizeof(msg), "upstream server \"%s\" did not answer within %llu ms",
					 u->conf->name, (unsigned long long)u->conf->timeout_ms);
			} else {
				snprintf(msg, sizeof(msg),
					 "upstream server \"%s\" is not running (it is being restarted) and did not come back within %llu ms",
					 u->conf->name, (unsigned long long)u->conf->timeout_ms);
			}
			call_finish(c, UPSTREAM_TIMEOUT, NULL, msg);
			break;
		case CALL_PING:
			u->ping_out = false;
			call_free(c);
			up_kill(u, "it did not answer a ping after a call timed out");
			break;
		case CALL_INIT:
		case CALL_LIST:
		default:
			call_free(c);
			up_kill(u, "it did not complete initialize and tools/list in time");
			break;
		}
	}
	if (hang_check)
		start_ping(u);
	if (u->state == UP_BACKOFF && u->restart_at <= now) {
		struct pc_err err;
		if (spawn(u, &err) < 0) {
			log_warn("upstream %s: %s", u->conf->name, err.msg);
			schedule_restart(u, now);
		}
	}
	rearm(u);
	(void)w;
	(void)events;
}

/* ------------------------------------------------------------ handshake */

static void send_list(struct upstream *u, const char *cursor)
{
	json_t *params = cursor ? json_pack("{s:s}", "cursor", cursor) : NULL;
	uint64_t ms = u->conf->timeout_ms > UP_HANDSHAKE_MIN_MS ? u->conf->timeout_ms : UP_HANDSHAKE_MIN_MS;
	send_internal(u, CALL_LIST, "tools/list", params, ms);
}

static void start_listing(struct upstream *u)
{
	json_decref(u->listing);
	u->listing = json_array();
	u->pages = 0;
	u->relist = false;
	send_list(u, NULL);
}

static void send_queued(struct upstream *u)
{
	if (u->state != UP_READY || u->ping_out)
		return;
	for (struct up_call **pp = &u->calls; *pp;) {
		struct up_call *c = *pp;
		if (c->kind != CALL_TOOL || c->sent) {
			pp = &c->next;
			continue;
		}
		if (!upstream_find_tool(u, c->tool, strlen(c->tool))) {
			char msg[200];
			*pp = c->next;
			snprintf(msg, sizeof(msg), "upstream server \"%s\" has no tool \"%.*s\"", u->conf->name,
				 utf8_prefix(c->tool, 80), c->tool);
			call_finish(c, UPSTREAM_UNKNOWN_TOOL, NULL, msg);
			continue;
		}
		if (send_tool_call(u, c) < 0) {
			char msg[200];
			*pp = c->next;
			snprintf(msg, sizeof(msg), "upstream server \"%s\" is not taking requests", u->conf->name);
			call_finish(c, UPSTREAM_UNAVAILABLE, NULL, msg);
			continue;
		}
		pp = &c->next;
	}
}

static void on_list_page(struct upstream *u, json_t *result)
{
	json_t *tools = json_object_get(result, "tools"), *t, *cursor;
	size_t i;
	if (!json_is_array(tools)) {
		json_decref(u->listing);
		u->listing = NULL;
		if (u->state == UP_LISTING)
			up_kill(u, "its tools/list result has no \"tools\" array");
		return;
	}
	json_array_foreach (tools, i, t) {
		json_t *name = json_object_get(t, "name");
		if (!json_is_string(name) || json_array_size(u->listing) >= UP_MAX_TOOLS)
			continue;
		json_array_append(u->listing, t);
	}
	cursor = json_object_get(result, "nextCursor");
	if (json_is_string(cursor) && ++u->pages < UP_MAX_PAGES) {
		send_list(u, json_string_value(cursor));
		return;
	}
	json_decref(u->tools);
	u->tools = u->listing;
	u->listing = NULL;
	if (u->state == UP_LISTING) {
		u->state = UP_READY;
		u->settled = true;
		log_debug("upstream %s: ready with %zu tools", u->conf->name, json_array_size(u->tools));
	}
	send_queued(u);
	rearm(u);
	if (u->relist)
		start_listing(u);
	if (u->on_settled)
		u->on_settled(u->settled_ctx, u);
}

static void on_init_result(struct upstream *u, json_t *result)
{
	if (!json_is_object(result)) {
		up_kill(u, "its initialize result is not an object");
		return;
	}
	send_msg(u, jsonrpc_notification("notifications/initialized", NULL));
	u->state = UP_LISTING;
	start_listing(u);
}

/* ------------------------------------------------------------ input from the server */

static void on_response(struct upstream *u, struct jsonrpc_msg *m, json_t *msg)
{
	json_t *result = json_object_get(msg, "result"), *error = json_object_get(msg, "error");
	struct up_call *c;
	if (!json_is_integer(m->id) || json_integer_value(m->id) <= 0)
		return;
	c = call_unlink_id(u, (uint64_t)json_integer_value(m->id));
	if (!c)
		return;   /* answered after it timed out or was cancelled */
	switch (c->kind) {
	case CALL_TOOL:
		if (result && json_is_object(result)) {
			call_finish(c, UPSTREAM_OK, result, NULL);
		} else {
			const char *text = json_string_value(json_object_get(error, "message"));
			char buf[600];
			if (result)
				text = "its result is not an object";
			snprintf(buf, sizeof(buf), "%s", text ? text : "error without a message");
			call_finish(c, UPSTREAM_RPC_ERROR, NULL, buf);
		}
		c = NULL;
		break;
	case CALL_INIT:
		if (error)
			up_kill(u, "it refused initialize");
		else
			on_init_result(u, result);
		break;
	case CALL_LIST:
		if (error) {
			json_decref(u->listing);
			u->listing = NULL;
			if (u->state == UP_LISTING)
				up_kill(u, "it refused tools/list");
		} else {
			on_list_page(u, result);
		}
		break;
	case CALL_PING:
		u->ping_out = false;
		send_queued(u);
		break;
	default:
		break;
	}
	if (c)
		call_free(c);
	rearm(u);
}

static void on_line(void *ctx, const char *line, size_t len)
{
	struct upstream *u = ctx;
	json_t *err_resp = NULL, *msg = jsonrpc_parse(line, len, &err_resp);
	struct jsonrpc_msg m;
	json_decref(err_resp);
	if (!msg) {
		log_debug("upstream %s: a stdout line that is not JSON (%zu bytes)", u->conf->name, len);
		return;
	}
	jsonrpc_classify(msg, &m);
	switch (m.kind) {
	case JSONRPC_RESPONSE:
		on_response(u, &m, msg);
		break;
	case JSONRPC_REQUEST:
		/* the server asking us: we offer no client features but ping */
		if (strcmp(m.method, "ping") == 0)
			send_msg(u, jsonrpc_result(m.id, json_object()));
		else
			send_msg(u, jsonrpc_error(m.id, JSONRPC_METHOD_NOT_FOUND, "Method not found", NULL));
		break;
	case JSONRPC_NOTIFICATION:
		if (strcmp(m.method, "notifications/tools/list_changed") == 0 && u->state == UP_READY) {
			if (u->listing)
				u->relist = true;
			else
				start_listing(u);
		}
		break;
	case JSONRPC_INVALID:
	default:
		log_debug("upstream %s: invalid JSON-RPC message: %s", u->conf->name, m.why);
		break;
	}
	json_decref(msg);
}

static void on_oversized(void *ctx, size_t max, const char *id)
{
	struct upstream *u = ctx;
	char *end = NULL;
	unsigned long long n = id ? strtoull(id, &end, 10) : 0;
	struct up_call *c = n && end && *end == '\0' ? call_unlink_id(u, n) : NULL;
	char msg[160];
	log_warn("upstream %s: dropped a message over %zu bytes", u->conf->name, max);
	if (!c)
		return;   /* no id seen, or not one of ours: nothing waits for it */
	/* the answer of a tool call: it fails now rather than at its deadline */
	snprintf(msg, sizeof(msg), "its answer was over the %zu-byte limit of a message", max);
	if (c->kind == CALL_TOOL) {
		call_finish(c, UPSTREAM_RPC_ERROR, NULL, msg);
	} else {
		call_free(c);
		up_kill(u, msg);
	}
	rearm(u);
}

static void on_err_line(void *ctx, const char *line, size_t len)
{
	struct upstream *u = ctx;
	if (len == 0)
		return;
	snprintf(u->last_err, sizeof(u->last_err), "%.*s", (int)len, line);
	log_debug("upstream %s: stderr: %s", u->conf->name, u->last_err);
}

static void on_err_oversized(void *ctx, size_t max, const char *id)
{
	(void)ctx;
	(void)max;
	(void)id;
}

static const struct line_reader_ops out_ops = { on_line, on_oversized };
static const struct line_reader_ops err_ops = { on_err_line, on_err_oversized };

/* Read what is there; returns false at EOF or error. */
static bool drain(struct upstream *u, int fd, struct line_reader *lr, const struct line_reader_ops *ops)
{
	char *buf = xmalloc(UP_READ_CHUNK);
	bool open = true;
	for (int i = 0; i < 16; i++) {
		ssize_t n = read(fd, buf, UP_READ_CHUNK);
		if (n > 0) {
			line_reader_feed(lr, buf, (size_t)n, ops, u);
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			break;
		open = false;
		break;
	}
	free(buf);
	return open;
}

static void close_watch(struct upstream *u, struct loop_watch *w, int *fd)
{
	loop_del(u->loop, w);
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static void on_out(struct loop_watch *w, uint32_t events, void *data)
{
	struct upstream *u = data;
	if (!drain(u, u->out_fd, &u->out_lines, &out_ops)) {
		close_watch(u, &u->w_out, &u->out_fd);
		up_kill(u, "it closed its stdout");
	}
	(void)w;
	(void)events;
}

static void on_err(struct loop_watch *w, uint32_t events, void *data)
{
	struct upstream *u = data;
	if (!drain(u, u->err_fd, &u->err_lines, &err_ops))
		close_watch(u, &u->w_err, &u->err_fd);
	(void)w;
	(void)events;
}

static void on_in(struct loop_watch *w, uint32_t events, void *data)
{
	struct upstream *u = data;
	if (events & (EPOLLERR | EPOLLHUP)) {
		close_watch(u, &u->w_in, &u->in_fd);
		up_kill(u, "it closed its stdin");
		return;
	}
	flush_out(u);
	(void)w;
}

/* ------------------------------------------------------------ process */

static void up_kill(struct upstream *u, const char *why)
{
	if (u->pidfd < 0 || u->killing)
		return;
	u->killing = true;
	log_warn("upstream %s: restarting it: %s", u->conf->name, why);
	/* the group: an npx-style launcher leaves the real server as a grandchild */
	kill(-u->pid, SIGKILL);
	pidfd_send_signal(u->pidfd, SIGKILL, NULL, 0);
}

static void describe_exit(const siginfo_t *si, char *buf, size_t len)
{
	if (si->si_code == CLD_EXITED)
		snprintf(buf, len, "exited with status %d", si->si_status);
	else
		snprintf(buf, len, "was killed by signal %d", si->si_status);
}

static void on_pidfd(struct loop_watch *w, uint32_t events, void *data)
{
	struct upstream *u = data;
	siginfo_t si;
	char how[64];
	uint64_t now = now_ms();

	/* the answers it wrote before dying still count */
	if (u->out_fd >= 0)
		drain(u, u->out_fd, &u->out_lines, &out_ops);
	if (u->err_fd >= 0)
		drain(u, u->err_fd, &u->err_lines, &err_ops);
	/* while the leader is a zombie its pid cannot be reused as a group id */
	kill(-u->pid, SIGKILL);
	memset(&si, 0, sizeof(si));
	if (waitid((idtype_t)P_PIDFD, (id_t)u->pidfd, &si, WEXITED) < 0)
		si.si_code = CLD_KILLED;
	describe_exit(&si, how, sizeof(how));
	log_warn("upstream %s %s%s%s", u->conf->name, how, u->last_err[0] ? "; its last message: " : "",
		 u->last_err);

	close_watch(u, &u->w_pid, &u->pidfd);
	close_watch(u, &u->w_in, &u->in_fd);
	close_watch(u, &u->w_out, &u->out_fd);
	close_watch(u, &u->w_err, &u->err_fd);
	line_reader_free(&u->out_lines);
	line_reader_free(&u->err_lines);
	free(u->obuf);
	u->obuf = NULL;
	u->olen = u->ooff = 0;
	json_decref(u->listing);
	u->listing = NULL;
	u->ping_out = false;
	u->pid = 0;

	if (now - u->started_at >= UP_STABLE_MS)
		u->backoff_ms = 0;
	schedule_restart(u, now);
	settle(u);

	/* calls it was answering fail; queued ones wait for the restart */
	for (struct up_call **pp = &u->calls; *pp;) {
		struct up_call *c = *pp;
		if (c->kind == CALL_TOOL && !c->sent) {
			pp = &c->next;
			continue;
		}
		*pp = c->next;
		if (c->kind == CALL_TOOL) {
			char msg[200];
			snprintf(msg, sizeof(msg), "upstream server \"%s\" %s while the call was in progress",
				 u->conf->name, how);
			call_finish(c, UPSTREAM_EXITED, NULL, msg);
		} else {
			call_free(c);
		}
	}
	rearm(u);
	(void)w;
	(void)events;
}

static int spawn(struct upstream *u, struct pc_err *err)
{
	struct upstream_proc p;
	if (upstream_proc_start(u->conf, &p, err) < 0)
		return -1;
	u->pid = p.pid;
	u->pidfd = p.pidfd;
	u->in_fd = p.in_fd;
	u->out_fd = p.out_fd;
	u->err_fd = p.err_fd;
	line_reader_init(&u->out_lines, UP_LINE_MAX);
	line_reader_init(&u->err_lines, UP_ERRLINE_MAX);
	u->last_err[0] = '\0';
	u->killing = false;
	u->started_at = now_ms();
	if (loop_add(u->loop, &u->w_pid, u->pidfd, EPOLLIN, on_pidfd, u) < 0 ||
	    loop_add(u->loop, &u->w_in, u->in_fd, 0, on_in, u) < 0 ||
	    loop_add(u->loop, &u->w_out, u->out_fd, EPOLLIN, on_out, u) < 0 ||
	    loop_add(u->loop, &u->w_err, u->err_fd, EPOLLIN, on_err, u) < 0) {
		/* the pidfd watch (if it was added) restarts it later */
		pc_syserr(err, "upstream", "upstream %s: epoll_ctl", u->conf->name);
		kill(-p.pid, SIGKILL);
		return -1;
	}
	log_debug("upstream %s: started (pid %d)", u->conf->name, (int)p.pid);
	u->state = UP_INITIALIZING;
	send_internal(u, CALL_INIT, "initialize",
		      json_pack("{s:s,s:{},s:{s:s,s:s}}", "protocolVersion", UP_PROTOCOL, "capabilities",
				"clientInfo", "name", "pycell", "version", PACKAGE_VERSION),
		      u->conf->timeout_ms > UP_HANDSHAKE_MIN_MS ? u->conf->timeout_ms : UP_HANDSHAKE_MIN_MS);
	return 0;
}

/* ------------------------------------------------------------ API */

struct upstream *upstream_new(struct loop *l, const struct upstream_conf *c,
			      void (*on_settled)(void *ctx, struct upstream *u), void *ctx)
{
	struct upstream *u = xcalloc(1, sizeof(*u));
	u->loop = l;
	u->conf = c;
	u->on_settled = on_settled;
	u->settled_ctx = ctx;
	u->pidfd = u->in_fd = u->out_fd = u->err_fd = -1;
	u->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (u->timer_fd < 0 || loop_add(l, &u->w_timer, u->timer_fd, EPOLLIN, on_timer, u) < 0) {
		if (u->timer_fd >= 0)
			close(u->timer_fd);
		free(u);
		return NULL;
	}
	return u;
}

int upstream_start(struct upstream *u, struct pc_err *err)
{
	if (u->state != UP_STOPPED)
		return 0;
	if (spawn(u, err) < 0) {
		u->backoff_ms = UP_BACKOFF_MIN_MS;
		schedule_restart(u, now_ms());
		settle(u);
		rearm(u);
		return -1;
	}
	return 0;
}

void upstream_free(struct upstream *u)
{
	if (!u)
		return;
	while (u->calls) {
		struct up_call *c = u->calls;
		u->calls = c->next;
		call_free(c);
	}
	if (u->pidfd >= 0) {
		struct pollfd pfd = { .fd = u->pidfd, .events = POLLIN };
		siginfo_t si;
		/* EOF on stdin is how MCP asks a stdio server to stop */
		close_watch(u, &u->w_in, &u->in_fd);
		kill(-u->pid, SIGTERM);
		if (poll(&pfd, 1, UP_STOP_MS) <= 0)
			pidfd_send_signal(u->pidfd, SIGKILL, NULL, 0);
		kill(-u->pid, SIGKILL);
		waitid((idtype_t)P_PIDFD, (id_t)u->pidfd, &si, WEXITED);
	}
	close_watch(u, &u->w_pid, &u->pidfd);
	close_watch(u, &u->w_in, &u->in_fd);
	close_watch(u, &u->w_out, &u->out_fd);
	close_watch(u, &u->w_err, &u->err_fd);
	close_watch(u, &u->w_timer, &u->timer_fd);
	line_reader_free(&u->out_lines);
	line_reader_free(&u->err_lines);
	json_decref(u->tools);
	json_decref(u->listing);
	free(u->obuf);
	free(u);
}

const char *upstream_name(const struct upstream *u) { return u->conf->name; }
bool upstream_ready(const struct upstream *u) { return u->state == UP_READY; }
bool upstream_settled(const struct upstream *u) { return u->settled; }
json_t *upstream_tools(const struct upstream *u) { return u->tools; }

json_t *upstream_find_tool(const struct upstream *u, const char *name, size_t len)
{
	size_t i;
	json_t *t;
	json_array_foreach (u->tools, i, t) {
		json_t *n = json_object_get(t, "name");
		if (json_string_length(n) == len && memcmp(json_string_value(n), name, len) == 0)
			return t;
	}
	return NULL;
}

uint64_t upstream_call(struct upstream *u, const char *tool, json_t *arguments, upstream_reply_fn fn,
		       void *ctx, struct pc_err *err)
{
	struct up_call *c;
	if (u->state == UP_READY && !upstream_find_tool(u, tool, strlen(tool))) {
		pc_fail(err, ENOENT, "upstream", "no such tool");
		return 0;
	}
	c = xcalloc(1, sizeof(*c));
	c->id = ++u->next_id;
	c->kind = CALL_TOOL;
	c->deadline = now_ms() + u->conf->timeout_ms;
	c->tool = xstrdup(tool);
	c->arguments = json_incref(arguments);
	c->fn = fn;
	c->ctx = ctx;
	if (u->state == UP_READY && !u->ping_out && send_tool_call(u, c) < 0) {
		call_free(c);
		pc_fail(err, EAGAIN, "upstream", "the server is not taking requests (its input is full)");
		return 0;
	}
	call_link(u, c);
	rearm(u);
	return c->id;
}

void upstream_cancel(struct upstream *u, uint64_t call_id)
{
	struct up_call *c = call_unlink_id(u, call_id);
	if (!c)
		return;
	if (c->sent)
		send_cancelled(u, c->id, "the run that made the call ended");
	call_free(c);
	rearm(u);
}
