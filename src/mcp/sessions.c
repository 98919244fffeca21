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
#include <sys/mman.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "base/jsonrpc.h"
#include "base/log.h"
#include "config/json_check.h"
#include "mcp/render.h"
#include "mcp/sessions.h"
#include "run/session.h"
#include "run/state.h"

#define SESS_TICK_MS 1000
/* a jail whose python has not said it is ready this long after the open
 * is killed, and the open answered with why */
#define SESS_OPEN_MAX_MS 30000
/* a snapshot made or read takes at most this long */
#define SESS_STATE_MAX_MS 120000
/* expired paused sessions are looked for this often */
#define SESS_SWEEP_MS 60000
/* a result names at most this many things a snapshot left out */
#define NOT_KEPT_MAX 32

/* A state transfer a session is part of: its own pause, the snapshot a
 * fork of it takes, the snapshot it is resumed or forked from. */
enum ts_xfer { TS_NONE, TS_PAUSE, TS_FORK_SOURCE, TS_RESUME, TS_FORK_TARGET };

struct tool_session {
	struct tool_session *next;
	struct mcp_server *srv;
	char id[RANDOM_ID_SIZE];
	char *owner;                  /* its client's principal (NULL: the anonymous one) */
	const struct run_env *env;    /* its policy, from its open (a reload changes the server's) */
	struct session *live;         /* its jail, with the interpreter (run/session.h) */
	struct mcp_call *opening;     /* session_open, until the jail is ready */
	struct mcp_call *call;        /* the run_python call of its cell, queued or running */
	uint64_t t_opened, t_last, idle_ms, lifetime_ms, open_ms;
	unsigned cells;
	bool ready;                   /* the jail said so */
	bool closed;                  /* off the list for good; freed once not held */
	struct pc_err open_err;       /* the open failed (open_err.msg[0]) */
	/* its packages (session_open's): being had, then held while it lives */
	struct pkg_op *pkg_op;
	char *pkg_dir;
	uint64_t t_jail;              /* when its jail was asked for */

	/* its state, with a state directory or in a fork */
	uint64_t opened_wall;         /* when it was first opened (wall clock, ms) */
	enum ts_xfer xfer;
	int state_fd;                 /* the snapshot being written or read; -1: none */
	bool jail_ready;              /* resume, fork target: the jail is there, waiting for its state */
	bool state_ready;             /* fork target: the source's snapshot is whole */
	bool paused;                  /* resume: made from a record; its cell waits for the restore */
	bool damaged;                 /* resume: its snapshot cannot be restored, and goes */
	struct tool_session *peer;    /* a fork's other side, while its snapshot is made */
	char forked_from[RANDOM_ID_SIZE];
	json_t *not_kept;             /* what its last snapshot left out, for the answer or the next cell */
	bool resumed;                 /* its next cell's result says it was paused and resumed */
	uint64_t paused_ms;           /* how long it was paused (resumed) */
	uint64_t xfer_bytes;          /* its snapshot's size */
	uint64_t t_xfer;              /* when its pause began */
	uint64_t resumed_cell;        /* the cell it was resumed for (its result says so) */
	const char *close_why;        /* to be closed, from the loop (settle), for this reason */
	bool drop_snapshot;           /* resumed: its snapshot goes once its first cell was answered */
	bool foreign;                 /* resumed here, its handle naming another replica: pauses after each cell */
	bool cell_waits;              /* its cell's turn came while it paused: it runs once that is done */
};

/* The server's sessions (s->sessions). */
struct mcp_sessions {
	struct tool_session *list;    /* from its open until it is freed */
	int fd;                       /* timer: idle and lifetime limits, every second */
	struct loop_watch w;
	bool quiescing;               /* the server stops: idle sessions pause (with a state directory) */
	uint64_t t_swept;             /* expired paused sessions were last removed then */
};

static const struct call_host cell_host;
static int cell_send(struct mcp_call *c, struct pc_err *err);

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
static struct tool_session *ts_new(struct mcp_server *s, const char *principal)
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

static void ts_push(struct mcp_server *s, struct tool_session *p)
{
	p->next = s->sessions->list;
	s->sessions->list = p;
	sess_arm(s);
}

static void tool_session_free(struct tool_session *p)
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
static void tool_session_close(struct tool_session *p, const char *why)
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

static struct tool_session *find(struct mcp_server *s, const json_t *id, const char *principal)
{
	for (struct tool_session *p = s->sessions->list; p; p = p->next)
		if (!p->closed && !p->close_why && json_str_eq(id, p->id) && str_eq(p->owner, principal))
			return p;
	return NULL;
}

/* A paused session's record, when it is principal's and this server's
 * to resume: 0; else -1 (it is "not found", as a guessed id is), or -2
 * when its record is damaged (err; it is removed: it cannot be used). */
static int find_paused(struct mcp_server *s, const char *id, const char *principal, struct state_record *rec,
		       struct pc_err *err)
{
	if (!s->cfg.state)
		return -1;
	if (state_load(s->cfg.state, id, rec, err) < 0) {
		if (errno == ENOENT)
			return -1;
		log_warn("mcp: paused session %s: %s: removed", id, err->msg);
		state_remove(s->cfg.state, id);
		return -2;
	}
	if (!str_eq(rec->scope, s->cfg.state_scope) || !str_eq(rec->owner, principal)) {
		state_record_free(rec);
		return -1;
	}
	return 0;
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
static void not_kept_text(const json_t *v, char *buf, size_t size)
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

/* ------------------------------------------------------------ the jail's callbacks */

static void restore_maybe(struct tool_session *p);
static void restore_failed(struct tool_session *p, const struct pc_err *err);

static void on_ready(struct session *live, const struct pc_err *err, void *ctx)
{
	struct tool_session *p = ctx;
	if (err) {
		struct pc_err e = *err;
		if (!e.msg[0])
			pc_fail(&e, ECHILD, "session", "the session's interpreter did not start");
		if (p->xfer == TS_RESUME || p->xfer == TS_FORK_TARGET) {
			restore_failed(p, &e);
		} else {
			p->open_err = e;
			p->closed = true;
		}
	} else if (p->xfer == TS_RESUME || p->xfer == TS_FORK_TARGET) {
		p->jail_ready = true;   /* its state next */
		restore_maybe(p);
	} else {
		p->ready = true;
		p->open_ms = now_ms() - p->t_opened;
		log_debug("mcp: session %s ready in %llu ms", p->id, (unsigned long long)p->open_ms);
	}
	mcp_kick(p->srv);
	(void)live;
}

static void on_gone(struct session *live, void *ctx)
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
		p->live = session_open(s->loop, &req, NULL, on_ready, on_gone, p, &open_err);
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
		not_kept_text(p->not_kept, what, sizeof(what));
		result_add_warning(res, "the session was paused %.0f s ago and resumed for this cell from its "
				   "snapshot (its globals and /workspace)%s%s", (double)p->paused_ms / 1000,
				   what[0] ? "; not kept: " : "", what);
	}
	c->cell_res = res;
	c->has_whole = session_take_whole_output(live, &c->whole_out, &c->whole_err);
	mcp_call_ended(c);
}

/* ------------------------------------------------------------ pause, resume, fork */

/* The policy's cap on a snapshot, and what the session is called in a log. */
static uint64_t snapshot_max(const struct tool_session *p) { return p->env->policy.sessions.snapshot_bytes; }

static struct tool_session *resume_prepare(struct mcp_server *s, struct state_record *rec, const char *principal);
static int resume_start(struct tool_session *p, struct pc_err *err);

/* p paused (rec, just kept) while a cell for it came: the cell goes to
 * the session made from the record, which its start resumes. */
static void pause_handover(struct tool_session *p, struct state_record *rec)
{
	struct mcp_call *c = steal_ptr(&p->call);
	struct tool_session *q = resume_prepare(p->srv, rec, p->owner);
	struct pc_err e = { 0 };
	q->call = c;
	c->ts = q;
	if (steal_ptr(&p->cell_waits) && resume_start(q, &e) < 0)
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
		if (steal_ptr(&p->cell_waits) && cell_send(p->call, &e) < 0)
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
static void pause_start(struct tool_session *p)
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
static struct tool_session *resume_prepare(struct mcp_server *s, struct state_record *rec, const char *principal)
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
static int resume_start(struct tool_session *p, struct pc_err *err)
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
	p->live = session_open(s->loop, &req, mcp_pool_for(s, p->owner), on_ready, on_gone, p, err);
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
static void restore_maybe(struct tool_session *p)
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
		restore_failed(p, &err);
}

/* A resume or a fork failed (err): a resume's cell ends with why, and its
 * snapshot stays to be resumed again unless it is damaged; a fork's open
 * is answered with why. */
static void restore_failed(struct tool_session *p, const struct pc_err *err)
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
		restore_failed(p, err);
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
		} else if (c && cell_send(c, &e) < 0) {
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
			restore_failed(q, err);
		} else {
			q->not_kept = not_kept_of(report);
			q->xfer_bytes = (uint64_t)json_integer_value(json_object_get(report, "bytes"));
			q->state_ready = true;
			restore_maybe(q);
		}
	}
	mcp_kick(src->srv);
	(void)live;
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
			pause_start(p);
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
			pause_start(p);
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
#define TOOL_ERROR(r, ...) mcp_answer((r), mcp_tool_error((r)->v, __VA_ARGS__))

static const char not_found[] =
	"no such session: it was closed, ran out of time or ended, or it is another client's; "
	"session_list shows yours, session_open makes a new one";

/* The arguments of tool name: an object with only the keys in allowed
 * (",a,b,"), which says says. */
static bool check_keys(const struct mcp_req *r, const char *name, const json_t *args, const char *allowed,
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

static unsigned count_open(const struct mcp_server *s, const char *principal, bool mine)
{
	unsigned n = 0;
	for (const struct tool_session *p = s->sessions->list; p; p = p->next)
		if (!p->closed && (!mine || str_eq(p->owner, principal)))
			n++;
	return n;
}

/* p, being made, goes on the list, and r waits for it (answer_open). */
static void ts_opening(struct mcp_server *s, const struct mcp_req *r, struct tool_session *p)
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

	if (!check_keys(r, "session_open", args, ",idle_timeout_s,packages,", "idle_timeout_s and packages"))
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
	if (count_open(s, principal, true) >= pol->sessions.max_per_client) {
		TOOL_ERROR(r, "Too many sessions: this client has %u open, the most it may; close one "
			   "(session_close) or let it expire", pol->sessions.max_per_client);
		return;
	}
	if (count_open(s, NULL, false) >= pol->sessions.max) {
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
		p->live = session_open(s->loop, &req, mcp_pool_for(s, principal), on_ready, on_gone, p, &err);
	if (!p->live && !p->pkg_op) {
		TOOL_ERROR(r, "The session could not be opened: %s: %s", err.step, err.msg);
		tool_session_free(p);
		return;
	}
	ts_opening(s, r, p);
	log_debug("mcp: session %s opening", p->id);
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
	int fd = -1, found;

	if (!check_keys(r, "session_fork", args, ",session_id,", "only session_id"))
		return;
	if (!json_is_string(id)) {
		TOOL_ERROR(r, "Invalid arguments for session_fork: \"session_id\", the handle of the session to "
			   "fork, is required");
		return;
	}
	src = find(s, id, principal);
	if (src && src->paused && !src->xfer) {
		src = NULL;   /* on the list for a cell that has not started: its record is still there */
	}
	found = src ? 0 : find_paused(s, json_string_value(id), principal, &rec, &err);
	if (found == -2) {
		TOOL_ERROR(r, "session_fork: the session's record is damaged, and was removed: %s", err.msg);
		return;
	}
	if (found < 0) {
		TOOL_ERROR(r, "session_fork: %s", not_found);
		return;
	}
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
	if (count_open(s, principal, true) >= pol->sessions.max_per_client) {
		TOOL_ERROR(r, "Too many sessions: this client has %u open, the most it may; close one "
			   "(session_close) or let it expire", pol->sessions.max_per_client);
		goto out;
	}
	if (count_open(s, NULL, false) >= pol->sessions.max) {
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
	q->live = session_open(s->loop, &req, mcp_pool_for(s, principal), on_ready, on_gone, q, &err);
	if (!q->live) {
		/* the source's snapshot goes on, into its own copy, for nobody */
		restore_failed(q, &err);
	}
	ts_opening(s, r, q);
	log_debug("mcp: session %s forking from %s", q->id, q->forked_from);
out:
	state_record_free(&rec);
	(void)progress_token;
}

void mcp_tool_session_close(const struct mcp_req *r, const json_t *args, const json_t *progress_token)
{
	struct mcp_server *s = r->conn->srv;
	json_t *id = json_object_get(args, "session_id");
	struct tool_session *p;

	if (!check_keys(r, "session_close", args, ",session_id,", "only session_id"))
		return;
	if (!json_is_string(id)) {
		TOOL_ERROR(r, "Invalid arguments for session_close: \"session_id\", the handle session_open "
			   "returned, is required");
		return;
	}
	p = find(s, id, r->conn->principal);
	if (!p) {
		/* a paused one: its snapshot goes */
		struct state_record rec;
		struct pc_err err = { 0 };
		int found = find_paused(s, json_string_value(id), r->conn->principal, &rec, &err);
		if (found == -2) {
			TOOL_ERROR(r, "session_close: the session's record is damaged, and was removed: %s", err.msg);
			return;
		}
		if (found < 0) {
			TOOL_ERROR(r, "session_close: %s", not_found);
			return;
		}
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

	if (!check_keys(r, "session_list", args, ",", "no arguments; call it with {}"))
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
		if (!find(s, idv, r->conn->principal))
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
	struct tool_session *p = find(s, id, r->conn->principal);
	struct state_record rec;
	struct pc_err err = { 0 };
	uint64_t max;
	int found;
	json_decref(id);
	if (!p) {
		/* paused: back on the list, resumed when its cell starts */
		found = find_paused(s, c->session_id, r->conn->principal, &rec, &err);
		if (found == -2) {
			TOOL_ERROR(r, "run_python: the session's record is damaged, and was removed: %s", err.msg);
			return -1;
		}
		if (found < 0) {
			TOOL_ERROR(r, "run_python: %s", not_found);
			return -1;
		}
		p = resume_prepare(s, &rec, r->conn->principal);
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

static int cell_send(struct mcp_call *c, struct pc_err *err)
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
		return resume_start(p, err);
	return cell_send(c, err);
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
