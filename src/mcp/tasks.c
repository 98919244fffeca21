/* pycell: MCP: the Tasks extension (io.modelcontextprotocol/tasks, for
 * protocol 2026-07-28): a run_python call of a client that declares the
 * extension, still running after TASK_AFTER_MS, is answered with a task
 * handle; the run goes on, owned by the server, and its result is kept
 * for tasks/get until the task's TTL ends.  tasks/cancel kills the jail.
 * A task belongs to the client (token) that made it.
 *
 * With a state directory (run/state.h), each task is also a record there,
 * written (and synced) before its handle is answered and again when its
 * status changes, with its result: a tasks/get that finds no task in
 * memory looks there, so that after a restart a task that ended is still
 * answered, and one whose run the restart lost says so (failed), instead
 * of "no such task". */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "base/json_out.h"
#include "base/jsonrpc.h"
#include "base/log.h"
#include "mcp/render.h"
#include "mcp/tasks.h"
#include "run/state.h"

#define TASK_AFTER_MS 1000            /* a call still running this long becomes a task */
#define TASK_TTL_MS 3600000           /* a task is kept this long after it was made */
#define TASK_POLL_MS 1000             /* pollIntervalMs */
#define TASKS_MAX 256                 /* tasks kept per server */
#define TASKS_MAX_BYTES (64u << 20)   /* their results, in JSON bytes */
#define MCP_MISSING_CAPABILITY -32021
#define TASK_RECORD_MAX (TASKS_MAX_BYTES + (64u << 10))   /* a record read back, its result included */

enum task_status { TASK_WORKING, TASK_COMPLETED, TASK_FAILED, TASK_CANCELLED };

struct mcp_task {
	struct mcp_task *next;        /* the server's list, newest first */
	char id[RANDOM_ID_SIZE];      /* random_id, with the replica's name */
	char *owner;                  /* the principal of its client (NULL: none) */
	enum task_status status;
	char *message;                /* statusMessage */
	uint64_t created, updated;    /* wall clock, ms */
	uint64_t t_created;           /* monotonic, for the TTL */
	json_t *result;               /* TASK_COMPLETED: the CallToolResult */
	size_t bytes;                 /* of result, as JSON */
	struct mcp_call *call;        /* while its run goes on */
};

/* The server's tasks (s->tasks). */
struct mcp_tasks {
	struct mcp_task *list;        /* newest first */
	unsigned n;
	size_t bytes;                 /* of their results */
	int fd;                       /* timer: the next call that may become a task */
	struct loop_watch w;
};

static const char *const status_names[] = { "working", "completed", "failed", "cancelled" };

static uint64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static json_t *iso8601(uint64_t ms)
{
	time_t s = (time_t)(ms / 1000);
	struct tm tm;
	char buf[40];
	gmtime_r(&s, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
	return json_sprintf("%s.%03uZ", buf, (unsigned)(ms % 1000));
}

/* ------------------------------------------------------------ records in the state directory */

/* Keep t's record (a no-op without a state directory). */
static void task_save(struct mcp_server *s, const struct mcp_task *t)
{
	struct pc_err err = { 0 };
	json_t *o;
	char *text;
	if (!s->cfg.state)
		return;
	o = json_pack("{s:i,s:s,s:s,s:s?,s:s,s:s?,s:I,s:I,s:O?}", "version", 1, "id", t->id, "scope",
		      s->cfg.state_scope, "owner", t->owner, "status", status_names[t->status], "message", t->message,
		      "created", (json_int_t)t->created, "updated", (json_int_t)t->updated, "result", t->result);
	text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (!text || state_doc_put(s->cfg.state, "tasks", t->id, text, &err) < 0)
		log_warn("mcp: task %s: its record could not be kept (it will not outlive this process): %s", t->id,
			 text ? err.msg : "out of memory");
	free(text);
}

/* A task of principal's from its record: a new task (on no list), or
 * NULL when there is none such (or it is another's, or damaged: logged). */
static struct mcp_task *task_load(struct mcp_server *s, const char *id, const char *principal)
{
	struct pc_err err = { 0 };
	cleanup_free char *text = NULL;
	json_t *o, *result, *jowner = NULL, *jmessage = NULL;
	json_error_t je;
	const char *rid, *status, *scope, *owner, *message;
	json_int_t version = 0, created = 0, updated = 0;
	struct mcp_task *t = NULL;
	size_t k;

	if (!s->cfg.state || state_doc_get(s->cfg.state, "tasks", id, TASK_RECORD_MAX, &text, &err) < 0) {
		if (s->cfg.state && errno != ENOENT)
			log_warn("mcp: task %s: %s", id, err.msg);
		return NULL;
	}
	o = json_loads(text, JSON_REJECT_DUPLICATES, &je);
	rid = status = scope = owner = message = NULL;
	result = NULL;
	if (!o || json_unpack_ex(o, &je, JSON_STRICT, "{s:I,s:s,s:s,s?o,s:s,s?o,s:I,s:I,s?o}", "version", &version,
				 "id", &rid, "scope", &scope, "owner", &jowner, "status", &status, "message",
				 &jmessage, "created", &created, "updated", &updated, "result", &result) < 0 ||
	    version != 1 || created < 0 || updated < 0 || strcmp(rid, id) != 0 ||
	    !(json_is_null(jowner) || json_is_string(jowner)) || !(json_is_null(jmessage) || json_is_string(jmessage))) {
		log_warn("mcp: task %s: its record in the state directory is damaged (%s): removed", id,
			 o ? je.text : "not JSON");
		state_doc_drop(s->cfg.state, "tasks", id);
		json_decref(o);
		return NULL;
	}
	if (json_is_null(result))
		result = NULL;
	owner = json_string_value(jowner);
	message = json_string_value(jmessage);
	for (k = 0; k < ARRAY_SIZE(status_names) && strcmp(status_names[k], status) != 0; k++)
		;
	if (k < ARRAY_SIZE(status_names) && str_eq(scope, s->cfg.state_scope) && str_eq(owner, principal) &&
	    (!result || json_is_object(result))) {
		t = xcalloc(1, sizeof(*t));
		snprintf(t->id, sizeof(t->id), "%s", id);
		t->owner = owner ? xstrdup(owner) : NULL;
		t->status = (enum task_status)k;
		t->message = message ? xstrdup(message) : NULL;
		t->created = (uint64_t)created;
		t->updated = (uint64_t)updated;
		uint64_t age = wall_ms() > t->created ? wall_ms() - t->created : 0;
		t->t_created = now_ms() > age ? now_ms() - age : 0;
		t->result = result ? json_incref(result) : NULL;
	}
	json_decref(o);
	return t;
}

/* t leaves the list; drop: its record too (it expired or was evicted;
 * at the server's end a record stays, for a server that comes after). */
static void task_unlink_free(struct mcp_server *s, struct mcp_task *t, bool drop)
{
	struct mcp_task **pp;
	if (drop && s->cfg.state)
		state_doc_drop(s->cfg.state, "tasks", t->id);
	for (pp = &s->tasks->list; *pp && *pp != t; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = t->next;
	s->tasks->n--;
	s->tasks->bytes -= t->bytes;
	if (t->call) {
		t->call->task = NULL;
		t->call->sink = NULL;
	}
	json_decref(t->result);
	free(t->owner);
	free(t->message);
	free(t);
}

/* Tasks past their TTL go; then, while over the caps, the oldest ended
 * ones.  A task still working is never dropped. */
static void evict(struct mcp_server *s, size_t room_bytes)
{
	uint64_t now = now_ms();
	for (struct mcp_task *t = s->tasks->list, *next; t; t = next) {
		next = t->next;
		if (t->status != TASK_WORKING && now - t->t_created >= TASK_TTL_MS)
			task_unlink_free(s, t, true);
	}
	while (s->tasks->n >= TASKS_MAX || s->tasks->bytes + room_bytes > TASKS_MAX_BYTES) {
		struct mcp_task *oldest = NULL;
		/* the list is newest first: the last ended one is the oldest */
		for (struct mcp_task *t = s->tasks->list; t; t = t->next)
			if (t->status != TASK_WORKING)
				oldest = t;
		if (!oldest)
			return;
		task_unlink_free(s, oldest, true);
	}
}

static void touch(struct mcp_server *s, struct mcp_task *t, enum task_status st, const char *message)
{
	t->status = st;
	free(t->message);
	t->message = message ? xstrdup(message) : NULL;
	t->updated = wall_ms();
	task_save(s, t);
}

/* The task as tasks/get shows it (DetailedTask). */
static json_t *task_json(const struct mcp_task *t)
{
	json_t *j = json_pack("{s:s,s:s,s:o,s:o,s:I,s:I}", "taskId", t->id, "status", status_names[t->status],
			      "createdAt", iso8601(t->created), "lastUpdatedAt", iso8601(t->updated),
			      "ttlMs", (json_int_t)TASK_TTL_MS, "pollIntervalMs", (json_int_t)TASK_POLL_MS);
	if (t->message)
		json_object_set_new(j, "statusMessage", json_string(t->message));
	if (t->status == TASK_COMPLETED && t->result)
		json_object_set(j, "result", t->result);
	if (t->status == TASK_FAILED)
		json_object_set_new(j, "error", json_pack("{s:i,s:s}", "code", JSONRPC_INTERNAL_ERROR, "message",
							  t->message ? t->message : "the run was lost"));
	return j;
}

static const struct call_sink task_sink;

/* Call c becomes a task: answered now with its handle, its run goes on
 * without the client's request.  false when no task can be kept (the
 * cap is reached by tasks still working): the call stays a plain call. */
static bool make_task(struct mcp_call *c)
{
	struct mcp_server *s = c->srv;
	struct mcp_task *t;
	json_t *handle;

	evict(s, 0);
	if (s->tasks->n >= TASKS_MAX)
		return false;
	t = xcalloc(1, sizeof(*t));
	if (random_id(t->id, s->cfg.replica) < 0) {
		free(t);
		return false;
	}
	t->owner = c->conn->principal ? xstrdup(c->conn->principal) : NULL;
	t->created = t->updated = wall_ms();
	t->t_created = now_ms();
	t->status = TASK_WORKING;
	t->message = xstrdup(c->state == CALL_QUEUED ? "queued" : "running");
	t->call = c;
	t->next = s->tasks->list;
	s->tasks->list = t;
	s->tasks->n++;
	c->task = t;
	c->sink = &task_sink;
	task_save(s, t);   /* before its handle is answered */
	log_debug("mcp: run %llu became task %s", c->seq, t->id);
	handle = task_json(t);
	json_object_set_new(handle, "resultType", json_string("task"));
	/* the handle is the answer; after it, nothing of the run reaches the
	 * client's request (progress and log messages are not sent for tasks) */
	mcp_call_reply(c, mcp_result(c->v, c->id, handle));
	c->conn = NULL;
	return true;
}

static bool due(const struct mcp_call *c, uint64_t now)
{
	return c->kind == CALL_RUN_PYTHON && c->task_ok && !c->task && c->conn && !c->cancelled && !c->ended &&
	       now - c->t_received >= TASK_AFTER_MS;
}

/* Arm the task timer for the next call that may become a task. */
void mcp_tasks_arm(struct mcp_server *s)
{
	struct call_list *lists[] = { &s->queue, &s->active };
	uint64_t next = 0, now = now_ms();
	struct itimerspec its = { 0 };
	for (size_t i = 0; i < ARRAY_SIZE(lists); i++)
		for (struct mcp_call *c = lists[i]->head; c; c = c->next)
			if (c->kind == CALL_RUN_PYTHON && c->task_ok && !c->task && c->conn && !c->cancelled &&
			    !c->ended && (!next || c->t_received + TASK_AFTER_MS < next))
				next = c->t_received + TASK_AFTER_MS;
	if (next) {
		uint64_t in = next > now ? next - now : 1;
		its.it_value.tv_sec = (time_t)(in / 1000);
		its.it_value.tv_nsec = (long)(in % 1000) * 1000000L;
	}
	timerfd_settime(s->tasks->fd, 0, &its, NULL);
}

static void on_timer(struct loop_watch *w, uint32_t events, void *data)
{
	struct mcp_server *s = data;
	struct call_list *lists[] = { &s->queue, &s->active };
	uint64_t n, now = now_ms();
	(void)!read(s->tasks->fd, &n, sizeof(n));
	(void)w;
	(void)events;
	for (size_t i = 0; i < ARRAY_SIZE(lists); i++)
		for (struct mcp_call *c = lists[i]->head; c; c = c->next)
			if (due(c, now) && !make_task(c))
				c->task_ok = false;   /* no room: it ends as a plain call */
	mcp_tasks_arm(s);
}

/* ------------------------------------------------------------ the call's sink */

static void task_finish(struct mcp_call *c, json_t *result, const char *summary)
{
	struct mcp_task *t = steal_ptr(&c->task);
	struct mcp_server *s = c->srv;
	size_t bytes = 0;
	char *text;
	c->sink = NULL;
	t->call = NULL;
	if (t->status != TASK_WORKING) {
		json_decref(result);   /* cancelled meanwhile: it stays cancelled */
		return;
	}
	text = json_out(result, NULL, &bytes);   /* its size, as it will be sent */
	if (!text)
		bytes = 0;
	free(text);
	evict(s, bytes);
	t->result = result;
	t->bytes = bytes;
	s->tasks->bytes += bytes;
	touch(s, t, TASK_COMPLETED, summary);
}

static void task_started(struct mcp_call *c)
{
	if (c->task->status == TASK_WORKING)
		touch(c->srv, c->task, TASK_WORKING, "running");
}

static void task_lost(struct mcp_call *c)
{
	struct mcp_task *t = steal_ptr(&c->task);
	c->sink = NULL;
	t->call = NULL;
	if (t->status == TASK_WORKING)
		touch(c->srv, t, TASK_FAILED, "the run ended without a result (the server is stopping)");
}

static const char *task_owner(const struct mcp_call *c)
{
	return c->task->owner;
}

static const struct call_sink task_sink = {
	.started = task_started, .finish = task_finish, .lost = task_lost, .owner = task_owner,
};

/* ------------------------------------------------------------ requests */

/* The task of r's client that params name; NULL: r is answered why not. */
static struct mcp_task *find_task(const struct mcp_req *r, json_t *params)
{
	struct mcp_server *s = r->conn->srv;
	json_t *id = json_object_get(params, "taskId");
	struct mcp_task *t;

	if (!r->tasks_ok) {
		mcp_fail(r, MCP_MISSING_CAPABILITY, "Missing required client capability: declare the extension "
			 EXT_TASKS " in clientCapabilities.extensions",
			 json_pack("{s:{s:{s:{}}}}", "requiredCapabilities", "extensions", EXT_TASKS));
		return NULL;
	}
	if (!json_is_string(id)) {
		mcp_fail(r, JSONRPC_INVALID_PARAMS, "Invalid params: \"taskId\", the task's id as a string, is "
			 "required", NULL);
		return NULL;
	}
	evict(s, 0);
	for (t = s->tasks->list; t; t = t->next)
		if (json_str_eq(id, t->id) && str_eq(t->owner, r->conn->principal))
			return t;
	if ((t = task_load(s, json_string_value(id), r->conn->principal))) {
		/* made by a server before this one (a restart), or another
		 * replica of the state directory */
		char *text = t->result ? json_out(t->result, NULL, &t->bytes) : NULL;
		free(text);
		evict(s, t->bytes);
		t->next = s->tasks->list;
		s->tasks->list = t;
		s->tasks->n++;
		s->tasks->bytes += t->bytes;
		if (t->status == TASK_WORKING)
			touch(s, t, TASK_FAILED, "the server stopped while the task ran: its run was lost");
		if (now_ms() - t->t_created < TASK_TTL_MS)
			return t;
		task_unlink_free(s, t, true);   /* expired */
	}
	mcp_fail(r, JSONRPC_INVALID_PARAMS, "Invalid params: no such task (its results are kept for an "
		 "hour; a task is only its own client's)", json_pack("{s:O}", "taskId", id));
	return NULL;
}

void mcp_tasks_get(const struct mcp_req *r, const char *method, json_t *params)
{
	struct mcp_task *t = find_task(r, params);
	if (t)
		mcp_answer(r, task_json(t));
	(void)method;
}

/* This server never asks for input: there is nothing to take. */
void mcp_tasks_update(const struct mcp_req *r, const char *method, json_t *params)
{
	if (find_task(r, params))
		mcp_answer(r, json_object());
	(void)method;
}

void mcp_tasks_cancel(const struct mcp_req *r, const char *method, json_t *params)
{
	struct mcp_task *t = find_task(r, params);
	if (!t)
		return;
	if (t->status == TASK_WORKING) {
		touch(r->conn->srv, t, TASK_CANCELLED, "cancelled by the client");
		log_debug("mcp: task %s cancelled by the client", t->id);
		if (t->call)
			mcp_call_cancel(t->call);   /* a running one's on_done follows; the task stays cancelled */
	}
	mcp_answer(r, json_object());
	(void)method;
}

/* ------------------------------------------------------------ the feature */

static int tasks_init(struct mcp_server *s, struct pc_err *err)
{
	s->tasks = xcalloc(1, sizeof(*s->tasks));
	s->tasks->fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (s->tasks->fd < 0 || loop_add(s->loop, &s->tasks->w, s->tasks->fd, EPOLLIN, on_timer, s) < 0)
		return pc_syserr(err, "mcp", "timerfd");
	if (s->cfg.state)
		state_doc_sweep(s->cfg.state, "tasks", TASK_TTL_MS);   /* kept an hour from their last change */
	return 0;
}

static void tasks_free(struct mcp_server *s)
{
	if (!s->tasks)
		return;
	while (s->tasks->list)
		task_unlink_free(s, s->tasks->list, s->cfg.state_ephemeral);
	if (s->tasks->fd >= 0) {
		loop_del(s->loop, &s->tasks->w);
		close(s->tasks->fd);
	}
	free(steal_ptr(&s->tasks));
}

static void tasks_stats(const struct mcp_server *s, struct mcp_stats *st)
{
	st->tasks = s->tasks->n;
}

const struct mcp_feature mcp_tasks_feature = {
	.name = "tasks", .init = tasks_init, .free = tasks_free, .stats = tasks_stats,
};
