/* pycell: MCP: a request answered later: a run_python run (queued for a
 * run slot, started, its progress, its end), and sandbox_info waiting for
 * the interpreter's version. */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <sys/timerfd.h>

#include "base/jsonrpc.h"
#include "base/log.h"
#include "mcp/internal.h"
#include "mcp/render.h"

void mcp_call_free(struct mcp_call *c)
{
	struct mcp_batch *b = c->batch;
	if (c->sink)
		c->sink->lost(c);
	mcp_list_remove(c);
	if (c->srv->version_call == c)
		c->srv->version_call = NULL;
	if (c->host && c->host->release)
		c->host->release(c);
	run_free(c->run);
	if (c->cell_res) {
		result_free(c->cell_res);
		free(c->cell_res);
	}
	outbuf_free(&c->whole_out);
	outbuf_free(&c->whole_err);
	free(c->files_json);
	packages_cancel(c->pkg_op);
	if (c->pkg_dir)
		packages_put(c->pkg_dir);
	free(c->pkg_dir);
	for (size_t i = 0; i < c->n_packages; i++)
		free(c->packages[i]);
	free(c->packages);
	free(c->session_id);
	free(c->news);
	json_decref(c->id);
	json_decref(c->progress_token);
	free(c->code);
	free(c->variables_json);
	free(c->stdin_data);
	free(c);
	if (b) {
		b->pending--;
		mcp_batch_maybe_send(b);
	}
}

/* The call answers inside batch b: b waits for it. */
void mcp_call_join_batch(struct mcp_call *c, struct mcp_batch *b)
{
	c->batch = b;
	if (b)
		b->pending++;
}

struct mcp_call *mcp_call_new(struct mcp_server *s, const struct mcp_req *r, enum call_kind kind)
{
	struct mcp_call *c = xcalloc(1, sizeof(*c));
	c->srv = s;
	c->kind = kind;
	c->t_received = now_ms();
	c->log_min = MLOG_OFF;
	if (r) {
		c->conn = r->conn;
		c->id = json_incref(r->id);
		c->v = r->v;
		c->log_min = r->log_min;
	}
	if (kind == CALL_RUN_PYTHON)
		c->seq = ++s->next_seq;
	return c;
}

const char *mcp_call_owner(const struct mcp_call *c)
{
	return c->sink ? c->sink->owner(c) : c->conn ? c->conn->principal : NULL;
}

unsigned mcp_server_runs_of(const struct mcp_server *s, const char *principal)
{
	const struct call_list *lists[] = { &s->queue, &s->active };
	unsigned n = 0;
	for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++)
		for (const struct mcp_call *c = lists[i]->head; c; c = c->next) {
			const char *owner = mcp_call_owner(c);
			if ((c->kind == CALL_RUN_PYTHON || c->kind == CALL_SESSION_OPEN) && !c->ended &&
			    owner && strcmp(owner, principal) == 0)
				n++;
		}
	return n;
}

/* The run's wall-clock limit: its own, else the policy's (0: none). */
uint64_t mcp_call_timeout_ms(const struct mcp_call *c)
{
	const struct run_env *env = c->env ? c->env : c->srv->env;
	return c->timeout_ms ? c->timeout_ms : env->policy.limits.timeout_ms;
}

/* The call's response (stolen); dropped when it was cancelled. */
void mcp_call_reply(struct mcp_call *c, json_t *msg)
{
	if (c->cancelled || !c->conn) {
		json_decref(msg);
		return;
	}
	mcp_reply(c->conn, c->batch, msg);
}

/* notifications/progress, in milliseconds since the request arrived; the
 * value must grow with every notification, and the last one equals the
 * total when there is one. */
void mcp_call_progress(struct mcp_call *c, const char *message)
{
	json_t *params;
	uint64_t p;
	if (!c->progress_token || !c->conn || c->cancelled)
		return;
	p = now_ms() - c->t_received;
	if (c->progress_total && p >= c->progress_total)
		p = c->progress_total - 1;
	if (p <= c->last_progress) {
		if (c->n_progress)
			return;
		p = c->last_progress;
	}
	c->last_progress = p;
	c->n_progress++;
	c->t_progress = now_ms();
	params = json_pack("{s:O,s:I}", "progressToken", c->progress_token, "progress", (json_int_t)p);
	if (c->progress_total)
		json_object_set_new(params, "total", json_integer((json_int_t)c->progress_total));
	if (c->v >= PROTO_2025_03_26)
		json_object_set_new(params, "message", json_text(message, strlen(message)));
	mcp_send(c->conn, jsonrpc_notification("notifications/progress", params), c->id);
}

/* A progress notification of the run's time and its new output. */
static void progress_with_news(struct mcp_call *c)
{
	uint64_t ran = now_ms() - c->t_started;
	cleanup_free char *msg = NULL;
	if (!c->news_len && !c->news_dropped) {
		msg = xasprintf("running for %llu s", (unsigned long long)((ran + 500) / 1000));
	} else {
		char more[64] = "";
		if (c->news_dropped)
			snprintf(more, sizeof(more), "\n[... %llu bytes more: the result has them]",
				 (unsigned long long)c->news_dropped);
		msg = xasprintf("running for %llu s; output:\n%.*s%s", (unsigned long long)((ran + 500) / 1000),
				(int)c->news_len, c->news ? c->news : "", more);
	}
	c->news_len = 0;
	c->news_dropped = 0;
	mcp_call_progress(c, msg);
}

void mcp_call_output(void *ctx, enum run_stream st, const char *buf, size_t len)
{
	struct mcp_call *c = ctx;
	const char *label = st == RUN_STDERR ? "[stderr] " : "[stdout] ";
	size_t room;
	if (!c->progress_token || !c->conn || c->cancelled || c->ended || c->v < PROTO_2025_03_26)
		return;
	if (!c->news)
		c->news = xmalloc(PROGRESS_OUTPUT_MAX + 1);
	/* where the stream changes, it is named (stdout needs no name first) */
	if ((c->news_len ? st != c->news_stream : st == RUN_STDERR) &&
	    c->news_len + strlen(label) + 1 <= PROGRESS_OUTPUT_MAX) {
		if (c->news_len && c->news[c->news_len - 1] != '\n')
			c->news[c->news_len++] = '\n';
		memcpy(c->news + c->news_len, label, strlen(label));
		c->news_len += strlen(label);
	}
	c->news_stream = st;
	room = PROGRESS_OUTPUT_MAX - c->news_len;
	for (size_t i = 0; i < len && i < room; i++)   /* a NUL would end the message */
		c->news[c->news_len++] = buf[i] ? buf[i] : ' ';
	if (len > room)
		c->news_dropped += len - room;
	if (now_ms() - c->t_progress >= PROGRESS_OUTPUT_MS)
		progress_with_news(c);
}

static void tick_update(struct mcp_server *s)
{
	bool want = false;
	struct itimerspec its = { { 0, 0 }, { 0, 0 } };
	for (struct mcp_call *c = s->active.head; c && !want; c = c->next)
		want = c->state == CALL_RUNNING && c->progress_token && c->conn && !c->cancelled;
	if (want == s->tick_armed)
		return;
	if (want) {
		its.it_interval.tv_sec = PROGRESS_INTERVAL_MS / 1000;
		its.it_interval.tv_nsec = (PROGRESS_INTERVAL_MS % 1000) * 1000000L;
		its.it_value = its.it_interval;
	}
	timerfd_settime(s->tick_fd, 0, &its, NULL);
	s->tick_armed = want;
}

void mcp_on_tick(struct loop_watch *w, uint32_t events, void *data)
{
	struct mcp_server *s = data;
	uint64_t n;
	(void)!read(s->tick_fd, &n, sizeof(n));
	for (struct mcp_call *c = s->active.head; c; c = c->next) {
		uint64_t ran = now_ms() - c->t_started;
		/* the tick is the server's, not the run's: a run that just
		 * started waits for the next one, unless it has output to tell */
		if (c->state != CALL_RUNNING || c->ended || (ran < PROGRESS_INTERVAL_MS / 2 && !c->news_len) ||
		    now_ms() - c->t_progress < PROGRESS_OUTPUT_MS)
			continue;
		progress_with_news(c);
	}
	tick_update(s);
	(void)w;
	(void)events;
}

void mcp_kick(struct mcp_server *s)
{
	uint64_t one = 1;
	(void)!write(s->defer_fd, &one, sizeof(one));
}

void mcp_call_ended(struct mcp_call *c)
{
	c->ended = true;
	c->ended_next = c->srv->ended;
	c->srv->ended = c;
	mcp_kick(c->srv);
}

static void call_on_output(void *ctx, enum run_stream st, const char *buf, size_t len, size_t kept)
{
	mcp_call_output(ctx, st, buf, len);
	(void)kept;
}

static void call_on_done(struct run *r, void *ctx)
{
	mcp_call_ended(ctx);
	(void)r;
}

/* ------------------------------------------------------------ ends */

const double mcp_duration_bounds_s[MCP_DURATION_BUCKETS - 1] = {
	0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 60,
};

static void count_run(struct mcp_stats *st, const struct run_result *r)
{
	unsigned b = 0;
	st->runs[r->status]++;
	while (b < MCP_DURATION_BUCKETS - 1 && (double)r->duration_ms / 1000 > mcp_duration_bounds_s[b])
		b++;
	st->duration[b]++;
	st->duration_ms_sum += r->duration_ms;
}

/* The CallToolResult of run r of call c: the result object as
 * structuredContent (with its host's say, and what each feature kept of
 * it), and its text. */
static json_t *run_tool_result(struct mcp_call *c, const struct run_result *r)
{
	json_t *res = result_to_json(r);
	json_t *text, *links = json_array(), *out, *content, *img;
	size_t i;
	if (c->host && c->host->describe)
		json_object_set_new(res, "session", c->host->describe(c));
	for (size_t k = 0; k < mcp_n_features; k++) {
		json_t *kept = mcp_features[k]->keep ? mcp_features[k]->keep(c, r, res) : NULL;
		if (kept)
			json_array_extend(links, kept);
		json_decref(kept);
	}
	text = mcp_result_text(res, r, &c->env->policy, mcp_call_timeout_ms(c));
	out = mcp_tool_result(c->v, text, res, r->status != RUN_OK);
	/* the images as image content, the files and the whole output as
	 * links (which came with 2025-06-18) */
	content = json_object_get(out, "content");
	json_array_foreach(r->images, i, img)
		json_array_append_new(content, json_pack("{s:s,s:O,s:O}", "type", "image", "data",
			json_object_get(img, "data"), "mimeType", json_object_get(img, "mime_type")));
	if (c->v >= PROTO_2025_06_18)
		json_array_extend(content, links);
	json_decref(links);
	return out;
}

static void finish_run_python(struct mcp_call *c)
{
	struct mcp_server *s = c->srv;
	const struct run_result *r = c->run ? run_result(c->run) : c->cell_res;

	s->n_running--;
	count_run(&s->stats, r);
	log_debug("mcp: run %llu: %s in %llu ms%s", c->seq, run_status_name(r->status),
		  (unsigned long long)r->duration_ms, c->cancelled ? " (cancelled)" : "");
	if (r->status == RUN_SETUP_FAILED)
		log_error("mcp: run %llu: sandbox setup failed: %s: %s", c->seq, r->setup_error.step,
			  r->setup_error.msg);
	if (c->sink) {
		char summary[96];
		snprintf(summary, sizeof(summary), "run %s in %llu ms", run_status_name(r->status),
			 (unsigned long long)r->duration_ms);
		c->sink->finish(c, mcp_result_object(c->v, run_tool_result(c, r)), summary);
		return;
	}
	if (c->cancelled || !c->conn)
		return;
	mcp_call_log(c, r->status == RUN_SETUP_FAILED ? MLOG_ERROR : MLOG_INFO, "run %llu: %s in %llu ms",
		     c->seq, run_status_name(r->status), (unsigned long long)r->duration_ms);
	/* No progress notification at the end: one written right before the
	 * response reaches the SDKs after it (they handle notifications a tick
	 * later) and they report an unknown token.  The response says it all. */
	mcp_call_reply(c, mcp_result(c->v, c->id, run_tool_result(c, r)));
}

static void finish_version(struct mcp_call *c)
{
	struct mcp_server *s = c->srv;
	const struct run_result *r = c->run ? run_result(c->run) : NULL;
	char impl[32], ver[32];

	if (!r) {
		/* could not start: ensure_version_probe logged why */
	} else if (r->status == RUN_OK && r->out.data && sscanf(r->out.data, "%31s %31s", impl, ver) == 2) {
		const char *nl = strchr(r->out.data, '\n');
		json_t *list = nl ? json_loads(nl + 1, 0, NULL) : NULL, *e;
		size_t i;
		s->python_impl = xstrdup(impl);
		s->python_version = xstrdup(ver);
		s->packages = json_array();
		json_array_foreach(list, i, e)
			if (json_is_string(json_array_get(e, 0)) && json_is_string(json_array_get(e, 1)))
				json_array_append_new(s->packages, json_pack("{s:O,s:O}", "name", json_array_get(e, 0),
									     "version", json_array_get(e, 1)));
		json_decref(list);
	} else {
		log_warn("mcp: could not ask the interpreter for its version: %s%s%s",
			 run_status_name(r->status), r->status == RUN_SETUP_FAILED ? ": " : "",
			 r->status == RUN_SETUP_FAILED ? r->setup_error.msg : "");
	}
	s->version_call = NULL;   /* asked: the waiting sandbox_info calls may go */
	mcp_answer_waiting_info(s);
}

bool mcp_info_ready(struct mcp_server *s)
{
	return !s->version_call && (!s->cfg.tools_settled || s->cfg.tools_settled(s->cfg.tool_ctx));
}

void mcp_answer_waiting_info(struct mcp_server *s)
{
	if (!mcp_info_ready(s))
		return;
	for (struct mcp_call *w = s->active.head, *next; w; w = next) {
		next = w->next;
		if (w->kind == CALL_SANDBOX_INFO) {
			mcp_answer_sandbox_info(w);
			mcp_call_free(w);
		}
	}
}

void mcp_server_on_answered(struct mcp_server *s, void (*fn)(void *ctx), void *ctx)
{
	s->on_answered = fn;
	s->answered_ctx = ctx;
}

void mcp_server_tools_settled(struct mcp_server *s)
{
	mcp_kick(s);   /* mcp_on_defer answers the waiting sandbox_info calls */
}

/* ------------------------------------------------------------ scheduling */

void mcp_run_request(struct mcp_server *s, struct run_request *req, const char *client, bool tools)
{
	*req = (struct run_request){ .stdin_fd = -1, .client = client };
	run_request_from_env(req, s->env);
	/* no two principals' runs come from one zygote (one hash secret) */
	req->spawner = run_env_warm_for(s->env, client);
#ifndef PYCELL_COVERAGE
	/* answered on init's report; the jail's teardown is the loop's
	 * (run_free).  Not in a coverage build: init writes its counters as
	 * it exits, and must not be killed on the way. */
	req->finish_on_report = true;
#endif
	if (tools && s->cfg.attach_tools)
		s->cfg.attach_tools(s->cfg.tool_ctx, req);
}

/* A call that ends before its run could start (its packages could not
 * be had, or it was cancelled meanwhile): a result of its own, answered
 * as any run's is (finish_run_python). */
static void call_end_unstarted(struct mcp_call *c, enum run_status status, const struct pc_err *err)
{
	struct run_result *r = xcalloc(1, sizeof(*r));
	result_init(r);
	r->status = status;
	if (err)
		r->setup_error = *err;
	c->cell_res = r;
	mcp_call_ended(c);
}

static int call_start_run(struct mcp_call *c, struct pc_err *err);

static void call_packages_done(void *ctx, const char *dir, const struct pc_err *err)
{
	struct mcp_call *c = ctx;
	struct pc_err start_err = { 0 };
	c->pkg_op = NULL;
	if (!dir) {
		mcp_call_log(c, MLOG_ERROR, "run %llu: %s", c->seq, err->msg);
		call_end_unstarted(c, RUN_SETUP_FAILED, err);
		return;
	}
	c->pkg_dir = xstrdup(dir);
	if (call_start_run(c, &start_err) < 0)
		call_end_unstarted(c, RUN_SETUP_FAILED, &start_err);
}

void mcp_call_cancel_run(struct mcp_call *c)
{
	if (c->pkg_op)
		mcp_call_cancel_packages(c);
	else if (c->run)
		run_cancel(c->run);
	else if (c->host && c->host->cancel)
		c->host->cancel(c);
}

void mcp_call_cancel(struct mcp_call *c)
{
	c->cancelled = true;
	if (c->state == CALL_RUNNING && c->kind == CALL_RUN_PYTHON)
		mcp_call_cancel_run(c);
	else
		mcp_call_free(c);
}

void mcp_resources_changed(struct mcp_server *s, const char *owner)
{
	for (size_t k = 0; k < mcp_n_features; k++)
		if (mcp_features[k]->resources_changed)
			mcp_features[k]->resources_changed(s, owner);
}

void mcp_scope_closed(struct mcp_server *s, const char *session_id)
{
	for (size_t k = 0; k < mcp_n_features; k++)
		if (mcp_features[k]->scope_closed)
			mcp_features[k]->scope_closed(s, session_id);
}

/* Cancelled while its packages were being had: nothing ran. */
void mcp_call_cancel_packages(struct mcp_call *c)
{
	packages_cancel(c->pkg_op);
	c->pkg_op = NULL;
	c->cancelled = true;
	call_end_unstarted(c, RUN_KILLED, NULL);
}

static int call_start(struct mcp_call *c, struct pc_err *err)
{
	struct mcp_server *s = c->srv;

	if (c->host) {
		/* a cell of a session: its jail is there */
		c->state = CALL_RUNNING;
		c->t_started = now_ms();
		return c->host->start(c, err);
	}
	c->env = s->env;
	if (c->n_packages && !c->pkg_dir) {
		/* the run starts once its packages are there (on the loop) */
		struct run_request base;
		mcp_run_request(s, &base, mcp_call_owner(c), false);
		c->state = CALL_RUNNING;
		c->t_started = now_ms();
		c->pkg_op = packages_get(s->loop, &base, c->packages, c->n_packages, call_packages_done, c, err);
		return c->pkg_op ? 0 : -1;
	}
	return call_start_run(c, err);
}

static int call_start_run(struct mcp_call *c, struct pc_err *err)
{
	struct mcp_server *s = c->srv;
	struct run_request req;
	struct run_pool *pool;

	mcp_run_request(s, &req, mcp_call_owner(c),
			c->kind == CALL_RUN_PYTHON);
	req.mode = c->kind == CALL_PY_VERSION ? RUN_MODE_SCRIPT : RUN_MODE_CELL;
	req.code = c->code;
	req.code_len = c->code_len;
	req.prog_name = "main.py";
	req.variables_json = c->variables_json;
	req.files_json = c->files_json;
	req.stdin_data = c->stdin_data;
	req.stdin_len = c->stdin_len;
	req.timeout_ms = c->timeout_ms;
	req.output_bytes = c->output_bytes;
	req.outputs = c->kind == CALL_RUN_PYTHON;
	req.packages_dir = c->pkg_dir;
	if (c->kind == CALL_RUN_PYTHON)
		req.on_output = call_on_output;
	req.on_done = call_on_done;
	req.ctx = c;
	c->state = CALL_RUNNING;
	c->t_started = now_ms();
	/* the next ready jail is made once this run has been answered
	 * (on_defer): made now, it would compete with this run for the CPU
	 * and hold the loop for the zygote's round trip */
	if (c->kind == CALL_RUN_PYTHON && !c->pkg_dir && (pool = mcp_pool_for(s, mcp_call_owner(c))) &&
	    (c->run = run_pool_start(pool, &req)))
		return 0;
	return run_start(s->loop, &req, &c->run, err);
}

void mcp_schedule(struct mcp_server *s)
{
	struct mcp_call *c;
	while (s->n_running < s->cfg.max_runs && (c = s->queue.head)) {
		struct pc_err err = { 0 };
		mcp_list_remove(c);
		mcp_list_push(&s->active, c);
		if (call_start(c, &err) < 0) {
			/* a run that never started (no fd for its timer): a
			 * setup_failed result like any jail's that failed */
			struct run_result r;
			json_t *res;
			log_error("mcp: run %llu: could not start: %s", c->seq, err.msg);
			s->stats.start_failures++;
			mcp_call_log(c, MLOG_ERROR, "run %llu: could not start: %s", c->seq, err.msg);
			result_init(&r);
			r.status = RUN_SETUP_FAILED;
			r.setup_error = err;
			res = run_tool_result(c, &r);
			result_free(&r);
			if (c->sink) {
				c->sink->finish(c, mcp_result_object(c->v, res), "the sandbox could not be started");
			} else {
				mcp_call_reply(c, mcp_result(c->v, c->id, res));
			}
			mcp_call_free(c);
			continue;
		}
		s->n_running++;
		if (mcp_call_timeout_ms(c))
			c->progress_total = c->t_started - c->t_received + mcp_call_timeout_ms(c);
		log_debug("mcp: run %llu started (%u running, %u queued)", c->seq, s->n_running, s->queue.n);
		mcp_call_log(c, MLOG_INFO, "run %llu started", c->seq);
		if (c->sink)
			c->sink->started(c);
		mcp_call_progress(c, "started");
	}
	tick_update(s);
}

/* A run's answer follows the call's last progress notification by at
 * least this long, and, where the transport can tell (stdio), until the
 * client has read that notification, rechecked every PROGRESS_DRAIN_POLL_MS
 * for at most PROGRESS_DRAIN_MAX_MS.  The SDKs handle a notification a
 * microtask after the message read with it: one that reaches them in the
 * same read as the response finds its token gone, and they report an
 * unknown token.  A client busy for longer than the gap (validating the
 * results of eight warm calls) read both in one go. */
#define PROGRESS_GAP_MS 30
#define PROGRESS_DRAIN_POLL_MS 2
#define PROGRESS_DRAIN_MAX_MS 1000

static size_t conn_unread(const struct mcp_conn *conn)
{
	return conn->ops.unread ? conn->ops.unread(conn->ctx) : 0;
}

/* Hold c's answer until its last notification is PROGRESS_GAP_MS old and
 * has been read. */
static bool hold_answer(struct mcp_server *s, struct mcp_call *c)
{
	uint64_t now = now_ms(), due = c->t_progress + PROGRESS_GAP_MS;
	struct itimerspec t = { 0 }, cur;
	if (c->kind != CALL_RUN_PYTHON || !c->n_progress || c->cancelled || !c->conn)
		return false;
	if (now >= due) {
		if (now >= c->t_progress + PROGRESS_DRAIN_MAX_MS || !conn_unread(c->conn))
			return false;
		due = now + PROGRESS_DRAIN_POLL_MS;
	}
	c->ended_next = s->held;
	s->held = c;
	timerfd_gettime(s->hold_fd, &cur);
	if ((!cur.it_value.tv_sec && !cur.it_value.tv_nsec) ||
	    (uint64_t)cur.it_value.tv_sec * 1000 + (uint64_t)cur.it_value.tv_nsec / 1000000 > due - now) {
		t.it_value.tv_nsec = (long)(due - now) * 1000000;
		timerfd_settime(s->hold_fd, 0, &t, NULL);
	}
	return true;
}

void mcp_on_hold(struct loop_watch *w, uint32_t events, void *data)
{
	struct mcp_server *s = data;
	uint64_t n;
	(void)!read(s->hold_fd, &n, sizeof(n));
	/* back to the ended list: mcp_on_defer answers what is due, holds the rest */
	while (s->held) {
		struct mcp_call *c = s->held;
		s->held = c->ended_next;
		c->ended_next = s->ended;
		s->ended = c;
	}
	mcp_kick(s);
	(void)w;
	(void)events;
}

/* How long after an answer its jail's teardown and the pool's refill
 * wait: the client's read of the answer goes first.  The refill (the
 * zygote's clone, the new jail's root) held warm calls 0.4 ms on the wire
 * when it came at once, taking the CPU from the client that was to read
 * the answer (tests/bench, 2 cores). */
#define AFTER_ANSWER_MS 3

void mcp_free_spent(struct mcp_server *s)
{
	struct itimerspec off = { 0 };
	if (s->after_fd >= 0)
		timerfd_settime(s->after_fd, 0, &off, NULL);
	for (size_t i = 0; i < s->n_spent; i++)
		run_free(s->spent[i].run);
	s->n_spent = 0;
}

void mcp_on_after(struct loop_watch *w, uint32_t events, void *data)
{
	struct mcp_server *s = data;
	uint64_t n;
	(void)!read(s->after_fd, &n, sizeof(n));
	mcp_free_spent(s);
	mcp_pools_fill(s, false);
	/* their envs may be free now (a reload's old ones) */
	if (s->on_answered)
		s->on_answered(s->answered_ctx);
	(void)w;
	(void)events;
}

/* The answered runs go to s->spent: torn down by mcp_on_after, whose
 * timer the first of them arms (later ones never push it back, so a
 * steady stream of answers cannot hold them for ever).  Without a timer,
 * or with no ready jail left for the next call, nothing waits. */
static void after_answers(struct mcp_server *s, const struct spent_run *spent, size_t n_spent)
{
	struct itimerspec t = { .it_value = { 0, AFTER_ANSWER_MS * 1000000L } };
	bool armed = s->n_spent > 0;
	s->spent = xrealloc(s->spent, (s->n_spent + n_spent) * sizeof(*s->spent));
	memcpy(s->spent + s->n_spent, spent, n_spent * sizeof(*spent));
	s->n_spent += n_spent;
	if (s->after_fd < 0 || (!armed && timerfd_settime(s->after_fd, 0, &t, NULL) < 0)) {
		mcp_free_spent(s);
		mcp_pools_fill(s, false);
		return;
	}
	mcp_pools_fill(s, true);
}

void mcp_on_defer(struct loop_watch *w, uint32_t events, void *data)
{
	struct mcp_server *s = data;
	struct spent_run *spent = NULL;
	size_t n_spent = 0;
	uint64_t n;
	(void)!read(s->defer_fd, &n, sizeof(n));
	while (s->ended) {
		struct mcp_call *c = s->ended;
		s->ended = c->ended_next;
		if (hold_answer(s, c))
			continue;
		if (c->kind == CALL_PY_VERSION)
			finish_version(c);
		else
			finish_run_python(c);
		/* the jail is done; it is torn down and its cgroups removed
		 * once the answers are out (stdio wrote them already, HTTP
		 * sends them from on_answered) and the client has had a moment
		 * to read them (after_answers): it does not wait for that */
		spent = xrealloc(spent, (n_spent + 1) * sizeof(*spent));
		spent[n_spent++] = (struct spent_run){ steal_ptr(&c->run), c->env };
		mcp_call_free(c);
	}
	mcp_answer_waiting_info(s);
	for (size_t k = 0; k < mcp_n_features; k++)
		if (mcp_features[k]->settle)
			mcp_features[k]->settle(s);
	if (s->on_answered)
		s->on_answered(s->answered_ctx);
	if (n_spent)
		after_answers(s, spent, n_spent);
	free(spent);
	mcp_schedule(s);
	if (!n_spent)
		mcp_pools_fill(s, false);
	(void)w;
	(void)events;
}

struct run_pool *mcp_pool_for(struct mcp_server *s, const char *principal)
{
	struct spawner *sp = run_env_warm_for(s->env, principal);
	/* no principal, or no zygote per principal (cold; wasm, whose ready
	 * jails share nothing): the server's pool */
	if (sp == s->env->warm)
		return s->pool;
	if (!sp)
		return NULL;   /* past the bound: cold */
	for (size_t i = 0; i < s->n_pools; i++)
		if (s->pools[i].sp == sp)
			return s->pools[i].pool;
	s->pools = xrealloc(s->pools, (s->n_pools + 1) * sizeof(*s->pools));
	s->pools[s->n_pools++] = (struct principal_pool){ sp, run_pool_new(s->loop, s->env, sp, s->cfg.ready) };
	return s->pools[s->n_pools - 1].pool;
}

void mcp_pools_fill(struct mcp_server *s, bool only_empty)
{
	for (size_t i = 0; i <= s->n_pools; i++) {
		struct run_pool *p = i < s->n_pools ? s->pools[i].pool : s->pool;
		if (!only_empty || !run_pool_ready(p))
			run_pool_fill(p);
	}
}

void mcp_pools_free(struct mcp_server *s)
{
	for (size_t i = 0; i < s->n_pools; i++)
		run_pool_free(s->pools[i].pool);
	free(s->pools);
	s->pools = NULL;
	s->n_pools = 0;
}

void mcp_version_probe(struct mcp_server *s)
{
	/* its version, then the distributions it can import, as JSON */
	static const char code[] =
		"import sys\nprint(sys.implementation.name, '%d.%d.%d' % sys.version_info[:3])\n"
		"import json\nfrom importlib import metadata\n"
		"seen = {}\n"
		"for d in metadata.distributions():\n"
		"    try:\n"
		"        name = d.metadata['Name']\n"
		"    except Exception:\n"
		"        continue\n"
		"    if name and name.lower() not in seen:\n"
		"        seen[name.lower()] = [name, d.version or '']\n"
		"print(json.dumps(sorted(seen.values(), key=lambda x: x[0].lower())))\n";
	struct pc_err err = { 0 };
	struct mcp_call *c;
	if (s->version_call)
		return;
	c = mcp_call_new(s, NULL, CALL_PY_VERSION);
	c->code = xstrdup(code);
	c->code_len = strlen(code);
	mcp_list_push(&s->active, c);
	s->version_call = c;
	/* Not counted against max_runs: it is ours, short, and asked once. */
	if (call_start(c, &err) < 0) {
		log_warn("mcp: could not start the version probe: %s", err.msg);
		/* answer the waiting sandbox_info calls without a version */
		c->ended = true;
		c->ended_next = s->ended;
		s->ended = c;
		c->run = NULL;
		mcp_kick(s);
	}
}

