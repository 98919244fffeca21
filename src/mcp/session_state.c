/* pycell: MCP: sessions that outlive their jails (sessions.c's; see its
 * head): a session paused to the state directory (run/state.h) and
 * resumed by its next cell in a fresh jail, a cell that comes while it
 * pauses handed on, and session_fork.  The state is made and read by the
 * session's own python (run/session.h's state transfers); the supervisor
 * keeps the bytes and the record, never what is in them. */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/log.h"
#include "mcp/render.h"
#include "mcp/sessions.h"
#include "mcp/sessions_int.h"
#include "run/session.h"
#include "run/state.h"

/* a snapshot made or read takes at most this long */
#define SESS_STATE_MAX_MS 120000
/* a result names at most this many things a snapshot left out */
#define NOT_KEPT_MAX 32

/* The paused session r's client names for tool: 0 and its record, when
 * it is the client's and this server's to resume; else -1, r answered:
 * "not found" (as a guessed id is), or its record is damaged (removed:
 * it cannot be used). */
int ts_find_paused(const struct mcp_req *r, const char *tool, const char *id, struct state_record *rec)
{
	struct mcp_server *s = r->conn->srv;
	struct pc_err err = { 0 };
	if (!s->cfg.state)
		goto not_found;
	if (state_load(s->cfg.state, id, rec, &err) < 0) {
		if (errno == ENOENT)
			goto not_found;
		log_warn("mcp: paused session %s: %s: removed", id, err.msg);
		state_remove(s->cfg.state, id);
		TOOL_ERROR(r, "%s: the session's record is damaged, and was removed: %s", tool, err.msg);
		return -1;
	}
	if (str_eq(rec->scope, s->cfg.state_scope) && str_eq(rec->owner, r->conn->principal))
		return 0;
	state_record_free(rec);
not_found:
	TOOL_ERROR(r, "%s: %s", tool, ts_not_found);
	return -1;
}

/* What a snapshot left out, from the runtime's report: a new array of
 * at most NOT_KEPT_MAX {name, why}, each cut to a sane length (the
 * jail wrote them). */
static json_t *not_kept_of(const json_t *report)
{
	json_t *out = json_array(), *e;
	size_t i;
	json_array_foreach(json_object_get(report, "not_kept"), i, e) {
		const char *name = json_string_value(json_object_get(e, "name"));
		const char *why = json_string_value(json_object_get(e, "why"));
		if (json_array_size(out) == NOT_KEPT_MAX)
			break;
		if (!name || !why)
			continue;
		json_array_append_new(out, json_pack("{s:s%,s:s%}", "name", name, (size_t)utf8_prefix(name, 100),
						     "why", why, (size_t)utf8_prefix(why, 200)));
	}
	return out;
}

/* "a (socket), b (thread)": what was not kept, for a result's text */
void ts_not_kept_text(const json_t *v, char *buf, size_t size)
{
	json_t *e;
	size_t i, n = 0;
	buf[0] = '\0';
	json_array_foreach(v, i, e) {
		int k = snprintf(buf + n, size - n, "%s%s (%s)", i ? ", " : "",
				 json_string_value(json_object_get(e, "name")), json_string_value(json_object_get(e, "why")));
		if (k < 0 || (size_t)k >= size - n)
			break;
		n += (size_t)k;
	}
}

/* End c, a cell that never ran, as a sandbox that could not be had. */
static void end_unrun(struct mcp_call *c, const struct pc_err *err)
{
	struct run_result *res = xcalloc(1, sizeof(*res));
	result_init(res);
	res->status = c->cancelled ? RUN_KILLED : RUN_SETUP_FAILED;
	res->setup_error = *err;
	c->cell_res = res;
	mcp_call_ended(c);
}

/* ------------------------------------------------------------ pause, resume, fork */

/* The policy's cap on a snapshot. */
static uint64_t snapshot_max(const struct tool_session *p) { return p->env->policy.sessions.snapshot_bytes; }


/* p paused (rec, just kept) while a cell for it came: the cell goes to
 * the session made from the record, which its start resumes. */
static void pause_handover(struct tool_session *p, struct state_record *rec)
{
	struct mcp_call *c = steal_ptr(&p->call);
	struct tool_session *q = ts_resume_prepare(p->srv, rec, p->owner);
	struct pc_err e = { 0 };
	q->call = c;
	c->ts = q;
	if (steal_ptr(&p->cell_waits) && ts_resume_start(q, &e) < 0)
		end_unrun(c, &e);   /* its turn came already: now, or never */
}

static void on_paused(struct session *live, const struct pc_err *err, const json_t *report, void *ctx)
{
	struct tool_session *p = ctx;
	struct mcp_server *s = p->srv;
	struct state_record rec = { 0 };
	struct pc_err e = { 0 };
	int fd = p->state_fd;

	p->state_fd = -1;
	p->xfer = TS_NONE;
	if (!err) {
		memcpy(rec.id, p->id, sizeof(rec.id));
		rec.scope = (char *)s->cfg.state_scope;
		rec.owner = p->owner;
		rec.policy = (char *)p->env->policy.name;
		rec.opened_at = p->opened_wall;
		rec.paused_at = state_wall_ms();
		rec.idle_ms = p->idle_ms;
		rec.lived_ms = now_ms() - p->t_opened;
		rec.bytes = (uint64_t)json_integer_value(json_object_get(report, "bytes"));
		rec.cells = p->cells;
		rec.not_kept = not_kept_of(report);
		if (state_commit(s->cfg.state, &rec, fd, &e) == 0) {
			log_info("mcp: session %s paused in %llu ms after %u cells: %llu bytes kept in %s", p->id,
				 (unsigned long long)(now_ms() - p->t_xfer), p->cells, (unsigned long long)rec.bytes,
				 state_dir_path(s->cfg.state));
			p->close_why = "paused";
			if (p->call)
				pause_handover(p, &rec);
			json_decref(rec.not_kept);
			mcp_kick(s);
			return;
		}
		json_decref(rec.not_kept);
		err = &e;
	} else {
		state_abort(s->cfg.state, p->id, fd);
	}
	if (p->call && !session_ended(p->live)) {
		/* a cell came meanwhile: the session stays as it was, and runs it */
		log_warn("mcp: session %s could not be paused, and stays open for its next cell: %s: %s", p->id,
			 err->step, err->msg);
		if (steal_ptr(&p->cell_waits) && ts_cell_send(p->call, &e) < 0)
			end_unrun(p->call, &e);
		mcp_kick(s);
		return;
	}
	log_warn("mcp: session %s could not be paused, and is closed: %s: %s", p->id, err->step, err->msg);
	p->close_why = "idle, and its state could not be kept";
	mcp_kick(s);
	(void)live;
}

/* Pause p (idle, or the server stops): its state to the state directory,
 * then it closes.  A session that cannot be paused is closed. */
void ts_pause_start(struct tool_session *p)
{
	struct mcp_server *s = p->srv;
	struct pc_err err = { 0 };
	int fd;
	if (p->pkg_dir) {
		/* its packages would have to be had again: not in this version */
		tool_session_close(p, "idle (a session opened with packages is not paused)");
		return;
	}
	fd = state_snap_create(s->cfg.state, p->id, &err);
	if (fd < 0 || session_snapshot(p->live, fd, snapshot_max(p), SESS_STATE_MAX_MS, on_paused, p, &err) < 0) {
		if (fd >= 0)
			state_abort(s->cfg.state, p->id, fd);
		log_warn("mcp: session %s could not be paused, and is closed: %s: %s", p->id, err.step, err.msg);
		tool_session_close(p, "idle, and its state could not be kept");
		return;
	}
	p->state_fd = fd;
	p->xfer = TS_PAUSE;
	p->t_xfer = now_ms();
}

/* A paused session of principal's, back on the list from its record:
 * its cell (mcp_tsession_take) resumes it when it starts. */
struct tool_session *ts_resume_prepare(struct mcp_server *s, struct state_record *rec, const char *principal)
{
	struct tool_session *p = ts_new(s, principal);
	uint64_t now = now_ms(), policy_idle = s->env->policy.sessions.idle_ms;
	memcpy(p->id, rec->id, sizeof(p->id));
	p->idle_ms = rec->idle_ms && rec->idle_ms < policy_idle ? rec->idle_ms : policy_idle;
	p->t_opened = rec->lived_ms < now ? now - rec->lived_ms : 0;   /* its lifetime counts the time it lived */
	p->opened_wall = rec->opened_at;
	p->cells = (unsigned)rec->cells;
	p->paused = true;
	p->paused_ms = state_wall_ms() > rec->paused_at ? state_wall_ms() - rec->paused_at : 0;
	p->not_kept = steal_ptr(&rec->not_kept);
	/* another replica's (its own is down, or was): the balancer sends its
	 * calls there as soon as that one is back, so it lives here only for
	 * its cells, and goes back to the state directory after each */
	if (s->cfg.replica) {
		size_t n = strlen(s->cfg.replica);
		p->foreign = strncmp(p->id, s->cfg.replica, n) != 0 || p->id[n] != '.';
	} else {
		p->foreign = strchr(p->id, '.') != NULL;
	}
	ts_push(s, p);
	return p;
}

/* From a paused session's cell, as it starts: claim its record, start a
 * jail, which reads the snapshot once it is ready (restore_maybe). */
int ts_resume_start(struct tool_session *p, struct pc_err *err)
{
	struct mcp_server *s = p->srv;
	const struct policy *pol = &s->env->policy;
	struct state_record rec;
	struct run_request req;
	unsigned live = 0;
	int fd;

	for (const struct tool_session *q = s->sessions->list; q; q = q->next)
		live += !q->closed && !q->close_why && !q->paused;
	if (live >= pol->sessions.max)
		return pc_fail(err, EAGAIN, "session", "the server has %u sessions open, the most it keeps; "
			       "try again later", pol->sessions.max);
	if (state_claim(s->cfg.state, p->id, &rec, err) < 0)
		return pc_err_wrap(err, "the session could not be resumed");
	fd = state_snap_open(s->cfg.state, &rec, err);
	state_record_free(&rec);
	if (fd < 0) {
		state_remove(s->cfg.state, p->id);   /* a snapshot that does not match its record is of no use */
		p->close_why = "its snapshot is damaged";
		return pc_err_wrap(err, "the session could not be resumed, and is removed");
	}
	mcp_run_request(s, &req, p->owner, true);
	p->env = s->env;   /* its state runs under the policy in force now */
	p->t_jail = now_ms();
	p->live = session_open(s->loop, &req, ts_on_ready, ts_on_gone, p, err);
	if (!p->live) {
		close(fd);
		state_unclaim(s->cfg.state, p->id);
		return pc_err_wrap(err, "the session could not be resumed");
	}
	p->state_fd = fd;
	p->xfer = TS_RESUME;
	return 0;
}

static void on_restored(struct session *live, const struct pc_err *err, const json_t *report, void *ctx);

/* A fork's target or a resumed session, once its jail is ready and its
 * snapshot whole: the jail reads it. */
void ts_restore_maybe(struct tool_session *p)
{
	struct pc_err err = { 0 };
	if (p->closed) {
		/* given up (its open failed, or it was closed) */
		if (p->state_fd >= 0)
			close(p->state_fd);
		p->state_fd = -1;
		p->xfer = TS_NONE;
		mcp_kick(p->srv);
		return;
	}
	if (!p->jail_ready || (p->xfer == TS_FORK_TARGET && !p->state_ready))
		return;
	if (session_restore(p->live, p->state_fd, SESS_STATE_MAX_MS, on_restored, p, &err) < 0)
		ts_restore_failed(p, &err);
}

/* A resume or a fork failed (err): a resume's cell ends with why, and its
 * snapshot stays to be resumed again unless it is damaged; a fork's open
 * is answered with why. */
void ts_restore_failed(struct tool_session *p, const struct pc_err *err)
{
	struct mcp_server *s = p->srv;
	struct pc_err e = *err;
	if (p->state_fd >= 0)
		close(p->state_fd);
	p->state_fd = -1;
	if (p->peer) {
		/* its source's snapshot goes on, into the source's own copy */
		p->peer->peer = NULL;
		p->peer = NULL;
	}
	if (p->xfer == TS_RESUME) {
		if (p->damaged) {
			state_remove(s->cfg.state, p->id);
			pc_err_wrap(&e, "the session could not be resumed, and is removed");
		} else {
			state_unclaim(s->cfg.state, p->id);
			pc_err_wrap(&e, "the session could not be resumed (it stays paused)");
		}
		log_warn("mcp: session %s: %s: %s", p->id, e.step, e.msg);
		if (p->call)
			end_unrun(p->call, &e);
		p->close_why = p->damaged ? "its snapshot is damaged" : "it could not be resumed";
	} else {
		p->open_err = e;   /* answer_open says it could not be forked */
		p->close_why = "its fork failed";
	}
	p->paused = false;   /* a resume's record is given back (or gone): closing it leaves it there */
	p->xfer = TS_NONE;
	mcp_kick(s);
}

static void on_restored(struct session *live, const struct pc_err *err, const json_t *report, void *ctx)
{
	struct tool_session *p = ctx;
	struct mcp_server *s = p->srv;
	json_t *more;
	if (err) {
		p->damaged = json_is_true(json_object_get(report, "damaged"));
		ts_restore_failed(p, err);
		return;
	}
	close(p->state_fd);
	p->state_fd = -1;
	/* modules that did not import again: not kept either */
	more = not_kept_of(report);
	if (!p->not_kept)
		p->not_kept = json_array();
	json_array_extend(p->not_kept, more);
	json_decref(more);
	p->ready = true;
	p->jail_ready = false;
	p->open_ms = now_ms() - p->t_jail;
	if (p->xfer == TS_RESUME) {
		struct pc_err e = { 0 };
		struct mcp_call *c = p->call;
		/* its snapshot goes after the cell's answer (removing a large
		 * file takes the disk a while: it would hold the answer) */
		p->drop_snapshot = true;
		log_info("mcp: session %s resumed in %llu ms, after %llu s paused", p->id, (unsigned long long)p->open_ms,
			 (unsigned long long)p->paused_ms / 1000);
		p->xfer = TS_NONE;
		p->paused = false;
		p->resumed = true;
		p->resumed_cell = p->cells;
		if (c && c->cancelled) {
			pc_fail(&e, ECANCELED, "session", "the call was cancelled while its session was resumed");
			end_unrun(c, &e);
		} else if (c && ts_cell_send(c, &e) < 0) {
			end_unrun(c, &e);
		}
	} else {
		log_info("mcp: session %s forked from %s in %llu ms", p->id, p->forked_from,
			 (unsigned long long)p->open_ms);
		p->xfer = TS_NONE;
	}
	mcp_kick(s);
	(void)live;
}

/* A fork's source wrote its snapshot (or could not). */
static void on_fork_snapshot(struct session *live, const struct pc_err *err, const json_t *report, void *ctx)
{
	struct tool_session *src = ctx, *q = src->peer;
	close(src->state_fd);   /* the target reads its own copy */
	src->state_fd = -1;
	src->xfer = TS_NONE;
	src->peer = NULL;
	src->t_last = now_ms();
	if (q) {
		q->peer = NULL;
		if (err) {
			ts_restore_failed(q, err);
		} else {
			q->not_kept = not_kept_of(report);
			q->xfer_bytes = (uint64_t)json_integer_value(json_object_get(report, "bytes"));
			q->state_ready = true;
			ts_restore_maybe(q);
		}
	}
	mcp_kick(src->srv);
	(void)live;
}

void mcp_tool_session_fork(const struct mcp_req *r, const json_t *args, const json_t *progress_token)
{
	struct mcp_server *s = r->conn->srv;
	const struct policy *pol = &s->env->policy;
	const char *principal = r->conn->principal;
	json_t *id = json_object_get(args, "session_id");
	struct tool_session *src, *q;
	struct state_record rec = { 0 };
	struct run_request req;
	struct pc_err err = { 0 };
	int fd = -1;

	if (!ts_check_keys(r, "session_fork", args, ",session_id,", "only session_id"))
		return;
	if (!json_is_string(id)) {
		TOOL_ERROR(r, "Invalid arguments for session_fork: \"session_id\", the handle of the session to "
			   "fork, is required");
		return;
	}
	src = ts_find(s, id, principal);
	if (src && src->paused && !src->xfer) {
		src = NULL;   /* on the list for a cell that has not started: its record is still there */
	}
	if (!src && ts_find_paused(r, "session_fork", json_string_value(id), &rec) < 0)
		return;
	if (src && (src->call || !src->ready || src->xfer)) {
		TOOL_ERROR(r, "session_fork: the session is busy %s; wait for it to finish, then call again",
			   src->call ? "running a cell" : !src->ready ? "starting" : "writing its state");
		goto out;
	}
	if (src && src->pkg_dir) {
		TOOL_ERROR(r, "session_fork: the session was opened with packages, and this version forks only "
			   "sessions without; open a new session with the same packages instead");
		goto out;
	}
	if (ts_count_open(s, principal, true) >= pol->sessions.max_per_client) {
		TOOL_ERROR(r, "Too many sessions: this client has %u open, the most it may; close one "
			   "(session_close) or let it expire", pol->sessions.max_per_client);
		goto out;
	}
	if (ts_count_open(s, NULL, false) >= pol->sessions.max) {
		TOOL_ERROR(r, "Too many sessions: the server has %u open, the most it keeps; try again "
			   "later", pol->sessions.max);
		goto out;
	}
	/* the state: a live session writes it to a memfd of its own, which
	 * the fork reads through a copy of the fd; a paused one's is on disk */
	fd = src ? memfd_create("pycell-fork", MFD_CLOEXEC) : state_snap_open(s->cfg.state, &rec, &err);
	if (fd < 0) {
		if (src)
			pc_syserr(&err, "session_fork", "memfd_create");
		TOOL_ERROR(r, "The session could not be forked: %s: %s", err.step, err.msg);
		goto out;
	}
	q = ts_new(s, principal);
	if (random_id(q->id, s->cfg.replica) < 0) {
		tool_session_free(q);
		close(fd);
		TOOL_ERROR(r, "The session could not be forked: no random bytes for its id");
		goto out;
	}
	snprintf(q->forked_from, sizeof(q->forked_from), "%s", json_string_value(id));
	q->idle_ms = src ? src->idle_ms : rec.idle_ms && rec.idle_ms < q->idle_ms ? rec.idle_ms : q->idle_ms;
	q->xfer = TS_FORK_TARGET;
	if (src) {
		q->state_fd = dup(fd);
		if (q->state_fd < 0 || session_snapshot(src->live, fd, snapshot_max(src), SESS_STATE_MAX_MS,
							on_fork_snapshot, src, &err) < 0) {
			if (q->state_fd < 0)
				pc_syserr(&err, "session_fork", "dup");
			close(fd);
			tool_session_free(q);
			TOOL_ERROR(r, "The session could not be forked: %s: %s", err.step, err.msg);
			goto out;
		}
		src->state_fd = fd;
		src->xfer = TS_FORK_SOURCE;
		src->peer = q;
		q->peer = src;
	} else {
		q->state_fd = fd;
		q->state_ready = true;
		q->xfer_bytes = rec.bytes;
		q->not_kept = steal_ptr(&rec.not_kept);
	}
	mcp_run_request(s, &req, principal, true);
	q->live = session_open(s->loop, &req, ts_on_ready, ts_on_gone, q, &err);
	if (!q->live) {
		/* the source's snapshot goes on, into its own copy, for nobody */
		ts_restore_failed(q, &err);
	}
	ts_opening(s, r, q);
	log_debug("mcp: session %s forking from %s", q->id, q->forked_from);
out:
	state_record_free(&rec);
	(void)progress_token;
}
