/* pycell: MCP: the Tasks extension (io.modelcontextprotocol/tasks, for
 * protocol 2026-07-28): a run_python call of a client that declares the
 * extension, still running after TASK_AFTER_MS, is answered with a task
 * handle; the run goes on, owned by the server, and its result is kept
 * for tasks/get until the task's TTL ends.  tasks/cancel kills the jail.
 * A task belongs to the client (token) that made it. */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/timerfd.h>
#include <time.h>

#include "base/json_out.h"
#include "base/jsonrpc.h"
#include "base/log.h"
#include "mcp/internal.h"

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

static void task_unlink_free(struct mcp_server *s, struct mcp_task *t)
{
	struct mcp_task **pp;
	for (pp = &s->tasks; *pp && *pp != t; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = t->next;
	s->n_tasks--;
	s->task_bytes -= t->bytes;
	if (t->call)
		t->call->task = NULL;
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
	for (struct mcp_task *t = s->tasks, *next; t; t = next) {
		next = t->next;
		if (t->status != TASK_WORKING && now - t->t_created >= TASK_TTL_MS)
			task_unlink_free(s, t);
	}
	while (s->n_tasks >= TASKS_MAX || s->task_bytes + room_bytes > TASKS_MAX_BYTES) {
		struct mcp_task *oldest = NULL;
		/* the list is newest first: the last ended one is the oldest */
		for (struct mcp_task *t = s->tasks; t; t = t->next)
			if (t->status != TASK_WORKING)
				oldest = t;
		if (!oldest)
			return;
		task_unlink_free(s, oldest);
	}
}

static void touch(struct mcp_task *t, enum task_status st, const char *message)
{
	t->status = st;
	free(t->message);
	t->message = message ? xstrdup(message) : NULL;
	t->updated = wall_ms();
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

/* Call c becomes a task: answered now with its handle, its run goes on
 * without the client's request.  false when no task can be kept (the
 * cap is reached by tasks still working): the call stays a plain call. */
static bool make_task(struct mcp_call *c)
{
	struct mcp_server *s = c->srv;
	struct mcp_task *t;
	json_t *handle;

	evict(s, 0);
	if (s->n_tasks >= TASKS_MAX)
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
	t->next = s->tasks;
	s->tasks = t;
	s->n_tasks++;
	c->task = t;
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
	timerfd_settime(s->task_fd, 0, &its, NULL);
}

void mcp_on_task_timer(struct loop_watch *w, uint32_t events, void *data)
{
	struct mcp_server *s = data;
	struct call_list *lists[] = { &s->queue, &s->active };
	uint64_t n, now = now_ms();
	(void)!read(s->task_fd, &n, sizeof(n));
	(void)w;
	(void)events;
	for (size_t i = 0; i < ARRAY_SIZE(lists); i++)
		for (struct mcp_call *c = lists[i]->head; c; c = c->next)
			if (due(c, now) && !make_task(c))
				c->task_ok = false;   /* no room: it ends as a plain call */
	mcp_tasks_arm(s);
}

void mcp_task_finish(struct mcp_task *t, json_t *result, const char *summary)
{
	struct mcp_server *s = t->call->srv;
	size_t bytes = 0;
	char *text;
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
	s->task_bytes += bytes;
	touch(t, TASK_COMPLETED, summary);
}

void mcp_task_started(struct mcp_task *t)
{
	if (t->status == TASK_WORKING)
		touch(t, TASK_WORKING, "running");
}

void mcp_task_lost(struct mcp_task *t)
{
	t->call = NULL;
	if (t->status == TASK_WORKING)
		touch(t, TASK_FAILED, "the run ended without a result (the server is stopping)");
}

void mcp_tasks_free(struct mcp_server *s)
{
	while (s->tasks)
		task_unlink_free(s, s->tasks);
}

/* tasks/get, tasks/update, tasks/cancel: the task of r's client. */
void mcp_handle_task_request(const struct mcp_req *r, const char *method, json_t *params)
{
	struct mcp_server *s = r->conn->srv;
	json_t *id = json_object_get(params, "taskId");
	struct mcp_task *t = NULL;

	if (!r->tasks_ok) {
		mcp_fail(r, MCP_MISSING_CAPABILITY, "Missing required client capability: declare the extension "
			 EXT_TASKS " in clientCapabilities.extensions",
			 json_pack("{s:{s:{s:{}}}}", "requiredCapabilities", "extensions", EXT_TASKS));
		return;
	}
	if (!json_is_string(id)) {
		mcp_fail(r, JSONRPC_INVALID_PARAMS, "Invalid params: \"taskId\", the task's id as a string, is "
			 "required", NULL);
		return;
	}
	evict(s, 0);
	for (t = s->tasks; t; t = t->next)
		if (json_str_eq(id, t->id) && str_eq(t->owner, r->conn->principal))
			break;
	if (!t) {
		mcp_fail(r, JSONRPC_INVALID_PARAMS, "Invalid params: no such task (its results are kept for an "
			 "hour; a task is only its own client's)", json_pack("{s:O}", "taskId", id));
		return;
	}
	if (strcmp(method, "tasks/get") == 0) {
		mcp_answer(r, task_json(t));
		return;
	}
	if (strcmp(method, "tasks/cancel") == 0 && t->status == TASK_WORKING) {
		struct mcp_call *c = t->call;
		touch(t, TASK_CANCELLED, "cancelled by the client");
		log_debug("mcp: task %s cancelled by the client", t->id);
		if (c) {
			c->cancelled = true;
			if (c->state == CALL_RUNNING)
				mcp_call_cancel_run(c);   /* on_done follows; the task stays cancelled */
			else
				mcp_call_free(c);
		}
	}
	/* tasks/update: this server never asks for input; nothing to take */
	mcp_answer(r, json_object());
}
