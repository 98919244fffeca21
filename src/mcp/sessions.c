/* pycell: MCP: sessions, as MCP 2026-07-28 keeps state: an unguessable
 * handle that session_open mints and run_python takes as an ordinary
 * argument, the same on stdio and HTTP and in every revision.  Each is a
 * jail with a live interpreter (run/session.h), its client's only: a
 * handle of another client is "not found", as is a guessed one.
 *
 * A tool_session is on the server's list from its open until it is closed
 * (session_close, its idle time or lifetime ran out, its jail ended); it is
 * freed once no call holds it (an open waiting for the jail, a cell queued
 * or running) and no state transfer is under way.  Answers are sent from
 * mcp_on_defer, never from inside the run's callbacks.
 *
 * With a state directory (run/state.h), a session idle past its timeout is
 * paused instead: its python writes its state (run/session.h), which is
 * kept as a snapshot and a record, and the session leaves the list (its
 * jail and memory go).  A cell for a paused session's id brings it back:
 * a tool_session made from its record, whose fresh jail reads the snapshot
 * before the cell runs.  session_fork does the same into a new id, from a
 * live session's snapshot (made in a memfd, unless it is paused already)
 * while the original runs on. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "base/jsonrpc.h"
#include "base/log.h"
#include "config/json_check.h"
#include "mcp/render.h"
#include "mcp/sessions.h"
#include "mcp/sessions_int.h"
#include "run/session.h"
#include "run/state.h"

#define SESS_TICK_MS 1000
/* a jail whose python has not said it is ready this long after the open
 * is killed, and the open answered with why */
#define SESS_OPEN_MAX_MS 30000
/* expired paused sessions are looked for this often */
#define SESS_SWEEP_MS 60000

static const struct call_host cell_host;

/* Every second while there are sessions; with a state directory, every
 * SESS_SWEEP_MS otherwise (paused sessions expire there). */
static void sess_arm(struct mcp_server *s)
{
	struct itimerspec t = { 0 };
	if (s->sessions->list)
		t.it_interval.tv_sec = SESS_TICK_MS / 1000;
	else if (s->cfg.state)
		t.it_interval.tv_sec = SESS_SWEEP_MS / 1000;
	t.it_value = t.it_interval;
	timerfd_settime(s->sessions->fd, 0, &t, NULL);
}

/* A new session of principal's, not yet on the list. */
struct tool_session *ts_new(struct mcp_server *s, const char *principal)
{
	struct tool_session *p = xcalloc(1, sizeof(*p));
	p->srv = s;
	p->owner = principal ? xstrdup(principal) : NULL;
	p->env = s->env;
	p->t_opened = p->t_last = p->t_jail = now_ms();
	p->opened_wall = state_wall_ms();
	p->idle_ms = s->env->policy.sessions.idle_ms;
	p->lifetime_ms = s->env->policy.sessions.lifetime_ms;
	p->state_fd = -1;
	return p;
}

void ts_push(struct mcp_server *s, struct tool_session *p)
{
	p->next = s->sessions->list;
	s->sessions->list = p;
	sess_arm(s);
}

void tool_session_free(struct tool_session *p)
{
	session_free(p->live);
	if (p->state_fd >= 0)
		close(p->state_fd);
	json_decref(p->not_kept);
	packages_cancel(p->pkg_op);
	if (p->pkg_dir)
		packages_put(p->pkg_dir);
	free(p->pkg_dir);
	free(p->owner);
	free(p);
}

/* Close p: killed now if its cell runs (the cell ends as killed), freed
 * by mcp_sessions_settle once nothing holds it. */
void tool_session_close(struct tool_session *p, const char *why)
{
	if (p->closed)
		return;
	p->closed = true;
	log_debug("mcp: session %s closed: %s (%u cells)", p->id, why, p->cells);
	mcp_scope_closed(p->srv, p->id);   /* its files and output go with it */
	if (p->live)
		session_kill(p->live);
	if (p->pkg_op) {
		packages_cancel(p->pkg_op);
		p->pkg_op = NULL;
		pc_fail(&p->open_err, ECANCELED, "packages", "the session was closed (%s) before its packages were "
			"installed", why);
	}
	mcp_kick(p->srv);
}

/* One whose jail is being killed for the memory it held is found no
 * more, though its gone callback has yet to come. */
struct tool_session *ts_find(struct mcp_server *s, const json_t *id, const char *principal)
{
	for (struct tool_session *p = s->sessions->list; p; p = p->next)
		if (!p->closed && !p->close_why && !(p->live && session_over_memory(p->live)) && json_str_eq(id, p->id) &&
		    str_eq(p->owner, principal))
			return p;
	return NULL;
}

/* ------------------------------------------------------------ the jail's callbacks */


void ts_on_ready(struct session *live, const struct pc_err *err, void *ctx)
{
	struct tool_session *p = ctx;
	if (err) {
		struct pc_err e = *err;
		if (!e.msg[0])
			pc_fail(&e, ECHILD, "session", "the session's interpreter did not start");
		if (p->xfer == TS_RESUME || p->xfer == TS_FORK_TARGET) {
			ts_restore_failed(p, &e);
		} else {
			p->open_err = e;
			p->closed = true;
		}
	} else if (p->xfer == TS_RESUME || p->xfer == TS_FORK_TARGET) {
		p->jail_ready = true;   /* its state next */
		ts_restore_maybe(p);
	} else {
		p->ready = true;
		p->open_ms = now_ms() - p->t_opened;
		log_debug("mcp: session %s ready in %llu ms", p->id, (unsigned long long)p->open_ms);
	}
	mcp_kick(p->srv);
	(void)live;
}

void ts_on_gone(struct session *live, void *ctx)
{
	struct tool_session *p = ctx;
	tool_session_close(p, "its interpreter ended");
	(void)live;
}

/* Its packages are there (dir), or could not be had: the jail next. */
static void on_packages(void *ctx, const char *dir, const struct pc_err *err)
{
	struct tool_session *p = ctx;
	struct mcp_server *s = p->srv;
	struct run_request req;
	struct pc_err open_err = { 0 };

	p->pkg_op = NULL;
	if (dir) {
		p->pkg_dir = xstrdup(dir);
		mcp_run_request(s, &req, p->owner, true);
		req.packages_dir = p->pkg_dir;
		p->t_jail = now_ms();
		p->live = session_open(s->loop, &req, ts_on_ready, ts_on_gone, p, &open_err);
		err = p->live ? NULL : &open_err;
	}
	if (err) {
		p->open_err = *err;
		p->closed = true;
	}
	mcp_kick(s);
}

static void on_cell(struct session *live, struct run_result *res, void *ctx)
{
	struct mcp_call *c = ctx;
	struct tool_session *p = c->ts;
	if (p && p->resumed && p->resumed_cell + 1 == p->cells) {
		char what[1024];
		ts_not_kept_text(p->not_kept, what, sizeof(what));
		result_add_warning(res, "the session was paused %.0f s ago and resumed for this cell from its "
				   "snapshot (its globals and /workspace)%s%s", (double)p->paused_ms / 1000,
				   what[0] ? "; not kept: " : "", what);
	}
	c->cell_res = res;
	c->has_whole = session_take_whole_output(live, &c->whole_out, &c->whole_err);
	mcp_call_ended(c);
}

/* ------------------------------------------------------------ the timer */

static void on_sess_timer(struct loop_watch *w, uint32_t events, void *data)
{
	struct mcp_server *s = data;
	uint64_t n, now = now_ms();
	(void)!read(s->sessions->fd, &n, sizeof(n));
	for (struct tool_session *p = s->sessions->list; p; p = p->next) {
		if (p->closed)
			continue;
		if (p->paused && !p->call && !p->xfer) {
			/* its cell went before it started: it stays paused */
			p->paused = false;
			tool_session_close(p, "not resumed after all");
			continue;
		}
		if (!p->ready) {
			if (!p->pkg_op && !p->xfer && now - p->t_jail >= SESS_OPEN_MAX_MS)
				tool_session_close(p, "its interpreter did not get ready");
			continue;
		}
		if (p->xfer)
			continue;   /* it pauses, or a fork of it is made */
		if (now - p->t_opened >= p->lifetime_ms)
			tool_session_close(p, "its lifetime ran out");
		else if (!p->call && now - p->t_last >= p->idle_ms && s->cfg.state)
			ts_pause_start(p);
		else if (!p->call && now - p->t_last >= p->idle_ms)
			tool_session_close(p, "idle");
	}
	if (s->cfg.state && now - s->sessions->t_swept >= SESS_SWEEP_MS) {
		s->sessions->t_swept = now;
		state_sweep(s->cfg.state, s->env->policy.sessions.paused_keep_ms, NULL);
	}
	(void)w;
	(void)events;
}

static int sessions_init(struct mcp_server *s, struct pc_err *err)
{
	s->sessions = xcalloc(1, sizeof(*s->sessions));
	s->sessions->fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (s->sessions->fd < 0 || loop_add(s->loop, &s->sessions->w, s->sessions->fd, EPOLLIN, on_sess_timer, s) < 0)
		return pc_syserr(err, "mcp", "timerfd");
	if (s->cfg.state) {
		s->sessions->t_swept = now_ms();
		state_sweep(s->cfg.state, s->env->policy.sessions.paused_keep_ms, NULL);
		sess_arm(s);
	}
	return 0;
}

static void sessions_free(struct mcp_server *s)
{
	if (!s->sessions)
		return;
	/* a stdio server's paused sessions are its client's, who goes now */
	if (s->cfg.state && s->cfg.state_ephemeral)
		state_sweep(s->cfg.state, 0, s->cfg.state_scope);
	while (s->sessions->list) {
		struct tool_session *p = s->sessions->list;
		s->sessions->list = p->next;
		tool_session_free(p);
	}
	if (s->sessions->fd >= 0) {
		loop_del(s->loop, &s->sessions->w);
		close(s->sessions->fd);
	}
	free(steal_ptr(&s->sessions));
}

/* pycell serve stops (SIGTERM): with a state directory, the sessions
 * pause now, or as soon as their cell ends, and are counted as running
 * until they have (sessions_stats): the drain waits for them. */
static void sessions_quiesce(struct mcp_server *s)
{
	s->sessions->quiescing = true;
	mcp_kick(s);
}

static void sessions_stats(const struct mcp_server *s, struct mcp_stats *st)
{
	if (!s->cfg.state || !s->sessions->quiescing)
		return;
	for (const struct tool_session *p = s->sessions->list; p; p = p->next)
		if (!p->closed && (p->xfer == TS_PAUSE || p->ready))
			st->running++;
}

static bool sessions_use_env(const struct mcp_server *s, const struct run_env *env)
{
	for (const struct tool_session *p = s->sessions->list; p; p = p->next)
		if (p->env == env)
			return true;
	return false;
}

/* ------------------------------------------------------------ answers */

static json_t *open_answer(const struct tool_session *p)
{
	json_t *o = json_pack("{s:s,s:f,s:f,s:I}", "session_id", p->id, "idle_timeout_s", (double)p->idle_ms / 1000,
			      "max_lifetime_s", (double)p->lifetime_ms / 1000, "open_ms", (json_int_t)p->open_ms);
	if (p->forked_from[0]) {
		json_object_set_new(o, "forked_from", json_string(p->forked_from));
		json_object_set_new(o, "snapshot_bytes", json_integer((json_int_t)p->xfer_bytes));
		json_object_set_new(o, "not_kept", p->not_kept ? json_deep_copy(p->not_kept) : json_array());
	}
	return o;
}

static void answer_open(struct tool_session *p)
{
	struct mcp_call *c = steal_ptr(&p->opening);
	json_t *res;
	if (p->open_err.msg[0]) {
		log_error("mcp: session %s could not be opened: %s: %s", p->id, p->open_err.step, p->open_err.msg);
		res = mcp_tool_error(c->v, "The session could not be %s: %s: %s", p->forked_from[0] ? "forked" : "opened",
				     p->open_err.step, p->open_err.msg);
	} else {
		res = mcp_structured_result(c->v, open_answer(p));
	}
	c->ts = NULL;
	mcp_call_reply(c, mcp_result(c->v, c->id, res));
	mcp_call_free(c);
}

static void sessions_settle(struct mcp_server *s)
{
	struct tool_session **pp = &s->sessions->list;
	while (*pp) {
		struct tool_session *p = *pp;
		if (p->close_why)
			tool_session_close(p, steal_ptr(&p->close_why));
		if (p->drop_snapshot && !p->call) {
			p->drop_snapshot = false;
			state_remove(s->cfg.state, p->id);
		}
		/* the server stops: what can be paused is; and another
		 * replica's session, once its cell was answered */
		if ((s->sessions->quiescing || p->foreign) && s->cfg.state && p->ready && !p->closed && !p->call &&
		    !p->xfer)
			ts_pause_start(p);
		if (p->opening && (p->ready || p->open_err.msg[0]))
			answer_open(p);
		if (p->closed && !p->opening && !p->call && !p->xfer) {
			*pp = p->next;
			tool_session_free(p);
			continue;
		}
		pp = &p->next;
	}
	sess_arm(s);
}

/* ------------------------------------------------------------ the tools */

/* Answer r with an isError result whose text is printf's. */

const char ts_not_found[] =
	"no such session: it was closed, ran out of time or ended, or it is another client's; "
	"session_list shows yours, session_open makes a new one";

/* The arguments of tool name: an object with only the keys in allowed
 * (",a,b,"), which says says. */
bool ts_check_keys(const struct mcp_req *r, const char *name, const json_t *args, const char *allowed,
		       const char *says)
{
	const char *key;
	json_t *v;
	if (args && !json_is_null(args) && !json_is_object(args)) {
		TOOL_ERROR(r, "Invalid arguments for %s: they must be an object", name);
		return false;
	}
	json_object_foreach((json_t *)args, key, v) {
		char quoted[80];
		snprintf(quoted, sizeof(quoted), ",%s,", key);
		if (!strstr(allowed, quoted) || strlen(key) > 64) {
			TOOL_ERROR(r, "Invalid arguments for %s: unknown argument \"%.*s\"; it takes %s", name,
				   utf8_prefix(key, 64), key, says);
			return false;
		}
	}
	return true;
}

unsigned ts_count_open(const struct mcp_server *s, const char *principal, bool mine)
{
	unsigned n = 0;
	for (const struct tool_session *p = s->sessions->list; p; p = p->next)
		if (!p->closed && (!mine || str_eq(p->owner, principal)))
			n++;
	return n;
}

/* p, being made, goes on the list, and r waits for it (answer_open). */
void ts_opening(struct mcp_server *s, const struct mcp_req *r, struct tool_session *p)
{
	struct mcp_call *c = mcp_call_new(s, r, CALL_SESSION_OPEN);
	mcp_call_join_batch(c, r->b);
	c->state = CALL_WAITING;
	c->ts = p;
	c->host = &cell_host;
	mcp_list_push(&s->active, c);
	p->opening = c;
	ts_push(s, p);
}

void mcp_tool_session_open(const struct mcp_req *r, const json_t *args, const json_t *progress_token)
{
	struct mcp_server *s = r->conn->srv;
	const struct policy *pol = &s->env->policy;
	const char *principal = r->conn->principal;
	struct run_request req;
	struct pc_err err = { 0 };
	json_t *v = json_object_get(args, "idle_timeout_s");
	uint64_t idle = pol->sessions.idle_ms;
	struct tool_session *p;

	cleanup_strv char **pkgs = NULL;
	size_t n_pkgs = 0;
	json_t *pv = json_object_get(args, "packages");

	if (!ts_check_keys(r, "session_open", args, ",idle_timeout_s,packages,", "idle_timeout_s and packages"))
		return;
	if (policy_is_wasm(pol)) {
		TOOL_ERROR(r, "Sessions need the native backend: this server's policy %s runs Python on the "
			   "wasm backend, which keeps no interpreter between calls in this version",
			   pol->name ? pol->name : "");
		return;
	}
	if (pv && !json_is_null(pv)) {
		size_t i;
		json_t *e;
		if (!json_is_array(pv) || json_array_size(pv) > PACKAGES_MAX) {
			TOOL_ERROR(r, "Invalid arguments for session_open: \"packages\" must be an array of at most %d "
				   "requirements such as [\"pandas==2.2.3\"]", PACKAGES_MAX);
			return;
		}
		pkgs = xcalloc(json_array_size(pv) + 1, sizeof(char *));
		json_array_foreach(pv, i, e) {
			if (!json_is_string(e) || strlen(json_string_value(e)) != json_string_length(e)) {
				TOOL_ERROR(r, "Invalid arguments for session_open: packages[%zu] must be a string such as "
					   "\"pandas==2.2.3\"", i);
				return;
			}
			pkgs[n_pkgs++] = xstrdup(json_string_value(e));
		}
		if (packages_check(pol, pkgs, n_pkgs, &err) < 0) {
			TOOL_ERROR(r, "Invalid arguments for session_open: %s", err.msg);
			return;
		}
	}
	if (v && !json_is_null(v)) {
		double t = json_number_value(v);
		if (!json_is_number(v) || !(t > 0) || !isfinite(t)) {
			TOOL_ERROR(r, "Invalid arguments for session_open: \"idle_timeout_s\" must be a number of "
				   "seconds greater than 0");
			return;
		}
		if (t * 1000 > (double)pol->sessions.idle_ms) {
			TOOL_ERROR(r, "Invalid arguments for session_open: \"idle_timeout_s\" %g is above this "
				   "server's limit of %g s", t, (double)pol->sessions.idle_ms / 1000);
			return;
		}
		idle = (uint64_t)ceil(t * 1000);
	}
	if (ts_count_open(s, principal, true) >= pol->sessions.max_per_client) {
		TOOL_ERROR(r, "Too many sessions: this client has %u open, the most it may; close one "
			   "(session_close) or let it expire", pol->sessions.max_per_client);
		return;
	}
	if (ts_count_open(s, NULL, false) >= pol->sessions.max) {
		TOOL_ERROR(r, "Too many sessions: the server has %u open, the most it keeps; try again "
			   "later", pol->sessions.max);
		return;
	}
	p = ts_new(s, principal);
	if (random_id(p->id, s->cfg.replica) < 0) {
		tool_session_free(p);
		TOOL_ERROR(r, "The session could not be opened: no random bytes for its id");
		return;
	}
	p->idle_ms = idle;

	mcp_run_request(s, &req, principal, true);
	if (n_pkgs)
		p->pkg_op = packages_get(s->loop, &req, pkgs, n_pkgs, on_packages, p, &err);
	else
		p->live = session_open(s->loop, &req, ts_on_ready, ts_on_gone, p, &err);
	if (!p->live && !p->pkg_op) {
		TOOL_ERROR(r, "The session could not be opened: %s: %s", err.step, err.msg);
		tool_session_free(p);
		return;
	}
	ts_opening(s, r, p);
	log_debug("mcp: session %s opening", p->id);
}

void mcp_tool_session_close(const struct mcp_req *r, const json_t *args, const json_t *progress_token)
{
	struct mcp_server *s = r->conn->srv;
	json_t *id = json_object_get(args, "session_id");
	struct tool_session *p;

	if (!ts_check_keys(r, "session_close", args, ",session_id,", "only session_id"))
		return;
	if (!json_is_string(id)) {
		TOOL_ERROR(r, "Invalid arguments for session_close: \"session_id\", the handle session_open "
			   "returned, is required");
		return;
	}
	p = ts_find(s, id, r->conn->principal);
	if (!p) {
		/* a paused one: its snapshot goes */
		struct state_record rec;
		if (ts_find_paused(r, "session_close", json_string_value(id), &rec) < 0)
			return;
		state_remove(s->cfg.state, rec.id);
		log_debug("mcp: paused session %s closed: session_close", rec.id);
		mcp_answer(r, mcp_structured_result(r->v, json_pack("{s:s,s:i}", "session_id", rec.id, "cells",
								    (int)rec.cells)));
		state_record_free(&rec);
		return;
	}
	if (p->paused && s->cfg.state)
		state_remove(s->cfg.state, p->id);   /* on its way back, or waiting to be: it stays closed */
	tool_session_close(p, "session_close");
	mcp_answer(r, mcp_structured_result(r->v, json_pack("{s:s,s:i}", "session_id", p->id, "cells",
							    (int)p->cells)));
}

void mcp_tool_session_list(const struct mcp_req *r, const json_t *args, const json_t *progress_token)
{
	struct mcp_server *s = r->conn->srv;
	json_t *list = json_array();
	uint64_t now = now_ms(), wall = state_wall_ms(), keep = s->env->policy.sessions.paused_keep_ms;
	struct state_record *paused = NULL;
	size_t n_paused;

	if (!ts_check_keys(r, "session_list", args, ",", "no arguments; call it with {}"))
		return;
	for (struct tool_session *p = s->sessions->list; p; p = p->next) {
		uint64_t by_idle = p->t_last + p->idle_ms, by_age = p->t_opened + p->lifetime_ms;
		uint64_t closes = by_idle < by_age ? by_idle : by_age;
		if (p->closed || !str_eq(p->owner, r->conn->principal))
			continue;
		json_array_append_new(list, json_pack("{s:s,s:i,s:b,s:b,s:f,s:f,s:f}", "session_id", p->id,
			"cells", (int)p->cells, "busy", p->call != NULL || !p->ready || p->xfer, "paused", p->paused,
			"age_s", (double)(wall - p->opened_wall) / 1000, "idle_s", (double)(now - p->t_last) / 1000,
			"closes_in_s", closes > now ? (double)(closes - now) / 1000 : 0.0));
	}
	/* and those paused in the state directory: their next cell resumes them */
	n_paused = s->cfg.state ? state_list(s->cfg.state, s->cfg.state_scope, r->conn->principal, false, &paused) : 0;
	for (size_t i = 0; i < n_paused; i++) {
		struct state_record *q = &paused[i];
		uint64_t gone = q->paused_at + keep;
		json_t *idv = json_string(q->id);
		if (!ts_find(s, idv, r->conn->principal))
			json_array_append_new(list, json_pack("{s:s,s:i,s:b,s:b,s:f,s:f,s:f}", "session_id", q->id,
				"cells", (int)q->cells, "busy", 0, "paused", 1,
				"age_s", wall > q->opened_at ? (double)(wall - q->opened_at) / 1000 : 0.0,
				"idle_s", wall > q->paused_at ? (double)(wall - q->paused_at + q->idle_ms) / 1000 : 0.0,
				"closes_in_s", gone > wall ? (double)(gone - wall) / 1000 : 0.0));
		json_decref(idv);
		state_record_free(q);
	}
	free(paused);
	mcp_answer(r, mcp_structured_result(r->v, json_pack("{s:o}", "sessions", list)));
	(void)progress_token;
}

/* ------------------------------------------------------------ cells */

int mcp_tsession_take(struct mcp_call *c, const struct mcp_req *r)
{
	struct mcp_server *s = c->srv;
	json_t *id = json_string(c->session_id);
	struct tool_session *p = ts_find(s, id, r->conn->principal);
	struct state_record rec;
	uint64_t max;
	json_decref(id);
	if (!p) {
		/* paused: back on the list, resumed when its cell starts */
		if (ts_find_paused(r, "run_python", c->session_id, &rec) < 0)
			return -1;
		p = ts_resume_prepare(s, &rec, r->conn->principal);
		state_record_free(&rec);
	}
	/* one that is pausing takes its cell, which runs (resumed) after */
	if (p->call || (!p->ready && !p->paused) || (p->xfer && p->xfer != TS_PAUSE)) {
		TOOL_ERROR(r, "run_python: the session is busy %s; wait for it to finish, then call again",
			   p->call ? "running a cell"
			   : p->xfer == TS_FORK_SOURCE ? "writing its state for a fork" : "starting");
		return -1;
	}
	/* a cell's time: the call's, else its session's policy's, never more */
	max = p->env->policy.limits.timeout_ms;
	if (max && (!c->timeout_ms || c->timeout_ms > max))
		c->timeout_ms = max;
	p->call = c;
	c->ts = p;
	c->host = &cell_host;
	c->env = p->env;
	return 0;
}

int ts_cell_send(struct mcp_call *c, struct pc_err *err)
{
	struct tool_session *p = c->ts;
	struct session_cell cell = {
		.code = c->code, .code_len = c->code_len, .variables_json = c->variables_json,
		.files_json = c->files_json, .timeout_ms = c->timeout_ms, .output_bytes = c->output_bytes,
		.on_output = mcp_call_output, .done = on_cell, .ctx = c,
	};
	if (p->closed || !p->live)
		return pc_fail(err, ESRCH, "session", "the session was closed before its cell could start");
	if (session_run_cell(p->live, &cell, err) < 0)
		return -1;
	p->cells++;
	p->t_last = now_ms();
	return 0;
}

/* The cell's turn came: a paused session is resumed first (its cell is
 * sent once its state is back, or ends with why not). */
static int cell_start(struct mcp_call *c, struct pc_err *err)
{
	struct tool_session *p = c->ts;
	if (p && p->xfer == TS_PAUSE) {
		log_info("mcp: session %s: a cell came while it paused: it runs once resumed", p->id);
		p->cell_waits = true;   /* on_paused hands it on */
		return 0;
	}
	if (p && p->paused && !p->closed && !p->xfer)
		return ts_resume_start(p, err);
	return ts_cell_send(c, err);
}

static json_t *cell_describe(const struct mcp_call *c)
{
	const struct tool_session *p = c->ts;
	bool alive;
	if (!p)
		return NULL;
	alive = !p->closed && p->live && !session_ended(p->live);
	if (p->resumed && p->resumed_cell + 1 == p->cells)
		return json_pack("{s:s,s:i,s:b,s:b,s:f,s:O}", "id", p->id, "cell", (int)p->cells, "alive", alive,
				 "resumed", 1, "paused_s", (double)p->paused_ms / 1000, "not_kept", p->not_kept);
	return json_pack("{s:s,s:i,s:b}", "id", p->id, "cell", (int)p->cells, "alive", alive);
}

static void cell_release(struct mcp_call *c)
{
	struct tool_session *p = c->ts;
	if (!p)
		return;
	if (p->call == c) {
		p->call = NULL;
		p->t_last = now_ms();
	}
	if (p->opening == c)
		p->opening = NULL;   /* the client left: the session stays, listed */
	c->ts = NULL;
	c->host = NULL;
	mcp_kick(c->srv);
}

static void cell_cancel(struct mcp_call *c)
{
	/* a session being resumed for it finishes that first (its cell
	 * then ends as cancelled, unrun) */
	if (c->ts && c->ts->live && c->ts->call == c && !c->ts->xfer)
		session_cancel_cell(c->ts->live);
}

static const struct call_host cell_host = {
	.start = cell_start, .cancel = cell_cancel, .describe = cell_describe, .release = cell_release,
};

const struct mcp_feature mcp_sessions_feature = {
	.name = "sessions", .init = sessions_init, .free = sessions_free, .settle = sessions_settle,
	.quiesce = sessions_quiesce, .uses_env = sessions_use_env, .stats = sessions_stats,
};
