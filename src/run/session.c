/* pycell: a session: a jail whose python runs cells one at a time
 * (session.h).  The session owns its run, one timer, which times the
 * running cell or state transfer (its timeout, then the grace after the
 * interrupt), the read ends of the running cell's two pipes, and the
 * supervisor's end of a state transfer's pipe. */
#include "config.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "base/log.h"
#include "run/session.h"

/* the cell the jail runs: the session loop, binding no name in __main__ */
static const char session_boot[] = "__import__('pycell._session', fromlist=['_']).serve()\n";

enum cell_state { CELL_NONE, CELL_RUNNING, CELL_INTERRUPTED };

struct session {
	struct loop *loop;
	struct run *run;
	bool ready, ended;
	session_ready_fn ready_fn;
	session_gone_fn gone_fn;
	void *ctx;
	/* the tool bridge's hooks, for the jail's messages that are not ours */
	void (*tool_message)(struct run *r, json_t *msg, void *tool_ctx);
	void (*tool_done)(struct run *r, void *tool_ctx);
	void *tool_ctx;

	/* the running cell's output, to its cap; and whole (to the policy's
	 * cap) when the cell's is smaller */
	struct output_buf out, err, whole_out, whole_err;
	bool whole;
	uint64_t cap;
	uint64_t between;             /* bytes written outside any cell, dropped: the next cell says so */
	/* the running cell: its number, and its pipes (read ends; -1: none),
	 * which python has as fds 1 and 2 while it runs */
	enum cell_state state;
	struct session_cell cell;
	uint64_t number;
	struct cell_pipe { struct session *s; enum run_stream id; int fd; struct loop_watch w; } pipes[2];
	bool cancelled, timed_out;
	uint64_t t0;
	uint64_t net0_conn, net0_dns;   /* an egress session's counts when the cell began */
	int timer_fd;
	struct loop_watch w_timer;
	/* A session in the sessions' shared memory cgroup (cgroup.h): its
	 * memory is read every SESSION_MEMORY_TICK_MS while a cell or state
	 * transfer runs, and at a cell's end, and the session is killed once
	 * it holds more than limits.memory (memory_limit).  mem_fd: that
	 * tick's timer (-1 until the first such cell); over: what it held. */
	int mem_fd;
	struct loop_watch w_mem;
	uint64_t mem_limit, over;
	struct pc_err mem_err;        /* why it could not be read (over UINT64_MAX) */

	/* a state transfer (session_snapshot, session_restore), which runs
	 * as a cell does (state, timer): our end of its pipe, the caller's
	 * file, the bytes moved, and what went wrong on our side */
	enum xfer { XFER_NONE, XFER_SNAPSHOT, XFER_RESTORE } xfer;
	int xfer_pipe, xfer_file;
	struct loop_watch w_xfer;
	uint64_t xfer_bytes, xfer_max, xfer_ms;
	bool xfer_copy;               /* splice refused these files: read and write */
	struct pc_err xfer_err;
	session_state_fn xfer_done;
	void *xfer_ctx;
};

static void xfer_finish(struct session *s, json_t *report);
static void xfer_close(struct session *s);

/* The supervisor holds the session to limits.memory (run_memory_shared). */
static bool memory_watched(const struct session *s)
{
	return s->mem_limit && run_memory_shared(s->run);
}

/* The session's memory against limits.memory, when memory_watched:
 * false, with the jail being killed and s->over set, once it holds more. */
static bool memory_ok(struct session *s)
{
	uint64_t limit = s->mem_limit, bytes;
	struct pc_err err;
	if (!memory_watched(s) || s->over)
		return !s->over;
	if (run_memory(s->run, limit, &bytes, &err) < 0) {
		/* not counted is not held: the session goes */
		log_warn("session: %s: killing the session, whose memory limit cannot be held", err.msg);
		s->mem_err = err;
		bytes = UINT64_MAX;
	} else if (bytes <= limit) {
		return true;
	}
	s->over = bytes;
	log_debug("session: its processes hold %llu bytes, over limits.memory (%llu): killing it",
		  (unsigned long long)bytes, (unsigned long long)limit);
	run_cancel(s->run);
	return false;
}

static void memory_warning(struct session *s, struct run_result *res)
{
	uint64_t limit = s->mem_limit;
	if (s->over == UINT64_MAX)
		result_add_warning(res, "the session's memory could not be read (%s), so its limit of %llu bytes could "
				   "not be held: the session was killed", s->mem_err.msg, (unsigned long long)limit);
	else
		result_add_warning(res, "the session's processes held %llu bytes, more than its memory limit of %llu "
				   "(held by the supervisor: this policy's sessions share a memory cgroup)",
				   (unsigned long long)s->over, (unsigned long long)limit);
}

static void on_mem_tick(struct loop_watch *w, uint32_t events, void *data)
{
	struct session *s = data;
	uint64_t ticks;
	(void)!read(s->mem_fd, &ticks, sizeof(ticks));
	if (s->state != CELL_NONE && !memory_ok(s) && s->xfer && !s->xfer_err.msg[0])
		pc_fail(&s->xfer_err, ENOMEM, s->xfer == XFER_SNAPSHOT ? "snapshot" : "restore",
			"the session's processes held %llu bytes, more than its memory limit: the session was killed",
			(unsigned long long)s->over);
	(void)w;
	(void)events;
}

/* A cell or state transfer begins: its memory is watched (when it is
 * ours to watch), and the shared group's OOM kills from now on are its. */
static void memory_watch(struct session *s, bool on)
{
	uint64_t ns = SESSION_MEMORY_TICK_MS * 1000000ull;
	struct itimerspec t = { 0 };
	if (!memory_watched(s))
		return;
	if (on && s->mem_fd < 0) {
		s->mem_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
		if (s->mem_fd >= 0 && loop_add(s->loop, &s->w_mem, s->mem_fd, EPOLLIN, on_mem_tick, s) < 0) {
			close(s->mem_fd);
			s->mem_fd = -1;
		}
		if (s->mem_fd < 0)
			log_warn("session: no timer for its memory (%s): it is read at each cell's end only",
				 strerror(errno));
	}
	if (on)
		run_memory_mark(s->run);
	t.it_value = t.it_interval = (struct timespec){ (time_t)(ns / 1000000000), (long)(ns % 1000000000) };
	if (s->mem_fd >= 0)
		timerfd_settime(s->mem_fd, 0, on ? &t : &(struct itimerspec){ 0 }, NULL);
}

static void arm(struct session *s, uint64_t ms)
{
	struct itimerspec t = { .it_value = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000 } };
	timerfd_settime(s->timer_fd, 0, &t, NULL);
}

/* The next cell's output buffers, capped at cap (0: the policy's). */
static void buffers_init(struct session *s, uint64_t cap)
{
	outbuf_free(&s->out);
	outbuf_free(&s->err);
	outbuf_free(&s->whole_out);
	outbuf_free(&s->whole_err);
	s->whole = cap && cap < s->cap;
	outbuf_init(&s->out, s->whole ? cap : s->cap);
	outbuf_init(&s->err, s->whole ? cap : s->cap);
	outbuf_init(&s->whole_out, s->cap);
	outbuf_init(&s->whole_err, s->cap);
}

static void cell_output(struct session *s, enum run_stream st, const char *buf, size_t len)
{
	outbuf_append(st == RUN_STDOUT ? &s->out : &s->err, buf, len);
	if (s->whole)
		outbuf_append(st == RUN_STDOUT ? &s->whole_out : &s->whole_err, buf, len);
	if (s->state == CELL_RUNNING && s->cell.on_output)
		s->cell.on_output(s->cell.ctx, st, buf, len);
}

/* The jail's own fds 1 and 2: python holds them between cells, and what
 * comes there (a thread that outlived its cell, the loop's last words)
 * is no cell's: counted and dropped. */
static void on_jail_output(void *ctx, enum run_stream st, const char *buf, size_t len, size_t kept)
{
	struct session *s = ctx;
	s->between += len;
	log_debug("session: %zu bytes on the jail's %s, outside any cell: dropped", len,
		  st == RUN_STDOUT ? "stdout" : "stderr");
	(void)buf;
	(void)kept;
}

static void pipe_close(struct session *s, struct cell_pipe *p)
{
	if (p->fd < 0)
		return;
	loop_del(s->loop, &p->w);
	close(p->fd);
	p->fd = -1;
}

/* Read what the pipe holds now, at most all of it; at its end (every
 * writer gone) close it. */
static void pipe_read(struct cell_pipe *p, size_t most)
{
	char buf[16384];
	while (p->fd >= 0 && most) {
		ssize_t n = read(p->fd, buf, most < sizeof(buf) ? most : sizeof(buf));
		if (n > 0) {
			cell_output(p->s, p->id, buf, (size_t)n);
			most -= (size_t)n;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		pipe_close(p->s, p);
	}
}

static void on_pipe(struct loop_watch *w, uint32_t events, void *data)
{
	pipe_read(data, 16 * 16384);   /* then the loop's other work */
	(void)w;
	(void)events;
}

/* The cell ended: what its pipes hold now is the last of it (no more than
 * that, though a writer goes on); then they close, and whatever writes to
 * them later (the cell's own code, after an end it sent itself) writes to
 * nobody. */
static void pipes_finish(struct session *s)
{
	for (int i = 0; i < 2; i++) {
		struct cell_pipe *p = &s->pipes[i];
		int n = 0;
		if (p->fd >= 0 && ioctl(p->fd, FIONREAD, &n) == 0 && n > 0)
			pipe_read(p, (size_t)n);
		pipe_close(s, p);
	}
}

/* The running cell's result: what python said of it (end: pycell/cell_end's
 * params), or NULL when the jail ended under it. */
static void cell_finish(struct session *s, json_t *end)
{
	struct run_result *res = xcalloc(1, sizeof(*res));
	struct run_result *jail = run_result_mut(s->run);
	struct session_cell cell = s->cell;
	json_t *code = json_object_get(end, "exit_code");
	/* what the cell left held, read before its result is */
	bool kill = end && !memory_ok(s);

	memory_watch(s, false);
	result_init(res);
	pipes_finish(s);
	outbuf_finish(&s->out, "stdout");
	outbuf_finish(&s->err, "stderr");
	if (s->whole) {
		outbuf_finish(&s->whole_out, "stdout");
		outbuf_finish(&s->whole_err, "stderr");
	}
	res->out = s->out;
	res->err = s->err;
	memset(&s->out, 0, sizeof(s->out));
	memset(&s->err, 0, sizeof(s->err));
	res->return_value = steal_ptr(&jail->return_value);
	res->images = steal_ptr(&jail->images);
	res->files = steal_ptr(&jail->files);
	res->duration_ms = now_ms() - s->t0;
	{
		uint64_t c, d;
		if (run_egress_counts(s->run, &c, &d))
			res->network = json_pack("{s:I,s:I}", "refused_connections", (json_int_t)(c - s->net0_conn),
						 "refused_dns_queries", (json_int_t)(d - s->net0_dns));
	}
	res->cpu_ms = (uint64_t)json_integer_value(json_object_get(end, "cpu_ms"));
	res->memory_peak_bytes = (uint64_t)json_integer_value(json_object_get(end, "maxrss_kb")) * 1024;
	for (int i = 0; i < jail->n_limits; i++)
		if (strcmp(jail->limits[i].name, "timeout_ms") != 0)
			result_add_limit(res, jail->limits[i].name, jail->limits[i].value, jail->limits[i].by);
	if (cell.timeout_ms)
		result_add_limit(res, "timeout_ms", cell.timeout_ms, ENF_SUPERVISOR);
	if (cell.output_bytes && cell.output_bytes < s->cap)
		result_add_limit(res, "output_bytes", cell.output_bytes, ENF_SUPERVISOR);
	for (int i = 0; i < jail->n_warnings; i++)
		result_add_warning(res, "%s", jail->warnings[i]);
	if (s->between) {
		result_add_warning(res, "%llu bytes written while no cell ran (by a thread or process that outlived "
				   "its cell) were dropped", (unsigned long long)s->between);
		s->between = 0;
	}
	if (end) {
		res->exit_code = json_is_integer(code) ? (int)json_integer_value(code) : 1;
		res->status = kill ? RUN_MEMORY_LIMIT : s->timed_out ? RUN_TIMEOUT : s->cancelled ? RUN_KILLED
			    : res->exit_code == 0 ? RUN_OK : RUN_ERROR;
		if (kill)
			result_add_warning(res, "the session ended: its interpreter is being killed");
	} else {
		/* the jail ended: how, as a run's result says it (memory_limit
		 * when the OOM killer took python), unless our timer killed it
		 * or the session held more memory than it may */
		res->status = s->over ? RUN_MEMORY_LIMIT : s->timed_out ? RUN_TIMEOUT : s->cancelled ? RUN_KILLED
			    : jail->status;
		if (res->status == RUN_OK)
			res->status = RUN_ERROR;   /* the session loop never exits 0 mid-cell */
		res->exit_code = jail->exit_code;
		res->signal = jail->signal;
		res->setup_error = jail->setup_error;
		result_add_warning(res, "the session ended: its interpreter is gone");
	}
	if (s->over)
		memory_warning(s, res);
	s->state = CELL_NONE;
	s->cancelled = s->timed_out = false;
	memset(&s->cell, 0, sizeof(s->cell));
	arm(s, 0);
	cell.done(s, res, cell.ctx);
	buffers_init(s, 0);
}

bool session_take_whole_output(struct session *s, struct output_buf *out, struct output_buf *err)
{
	if (!s->whole || !s->whole_out.finished)
		return false;
	*out = s->whole_out;
	*err = s->whole_err;
	memset(&s->whole_out, 0, sizeof(s->whole_out));
	memset(&s->whole_err, 0, sizeof(s->whole_err));
	s->whole = false;
	return true;
}

static void on_tool_message(struct run *r, json_t *msg, void *ctx)
{
	struct session *s = ctx;
	const char *method = json_string_value(json_object_get(msg, "method"));
	bool note = !json_object_get(msg, "id");

	if (note && method && strcmp(method, "pycell/session_ready") == 0) {
		if (!s->ready) {
			s->ready = true;
			log_debug("session: ready");
			s->ready_fn(s, NULL, s->ctx);
		}
		return;
	}
	if (note && method && strcmp(method, "pycell/cell_end") == 0) {
		json_t *params = json_object_get(msg, "params");
		json_t *number = json_object_get(params, "cell");
		/* the end of the running cell, by its number: a stale one (the
		 * loop's own, after the cell's code sent one first) is no end */
		if (s->state == CELL_NONE || !json_is_integer(number) ||
		    (uint64_t)json_integer_value(number) != s->number) {
			log_debug("session: a cell end that is not the running cell's: ignored");
			return;
		}
		/* python flushed its streams before it said so: what the
		 * cell's pipes hold now is the last of it */
		cell_finish(s, params);
		return;
	}
	if (note && method && s->xfer &&
	    strcmp(method, s->xfer == XFER_SNAPSHOT ? "pycell/snapshot_end" : "pycell/restore_end") == 0) {
		xfer_finish(s, json_object_get(msg, "params"));
		return;
	}
	if (s->tool_message)
		s->tool_message(r, msg, s->tool_ctx);
	else
		run_tool_unhandled(r, msg);
}

static void on_tool_done(struct run *r, void *ctx)
{
	struct session *s = ctx;
	if (s->tool_done)
		s->tool_done(r, s->tool_ctx);
}

/* The jail's run ended (once): no more cells.  Its owner hears it as
 * the open's failure, or as the session gone. */
static void on_done(struct run *r, void *ctx)
{
	struct session *s = ctx;
	s->ended = true;
	log_debug("session: its jail ended: %s", run_status_name(run_result(r)->status));
	if (!s->ready) {
		struct pc_err err = { 0 };
		const struct run_result *res = run_result(r);
		if (res->status == RUN_SETUP_FAILED)
			err = res->setup_error;
		else
			pc_fail(&err, ECHILD, "session", "the session's interpreter ended before it was ready (%s)",
				run_status_name(res->status));
		s->ready_fn(s, &err, s->ctx);
		return;
	}
	if (s->xfer)
		xfer_finish(s, NULL);
	else if (s->state != CELL_NONE)
		cell_finish(s, NULL);
	s->gone_fn(s, s->ctx);
}

static void on_timer(struct loop_watch *w, uint32_t events, void *data)
{
	struct session *s = data;
	uint64_t ticks;
	(void)!read(s->timer_fd, &ticks, sizeof(ticks));
	if (s->state == CELL_RUNNING) {
		/* KeyboardInterrupt in the cell; the session goes on if the
		 * cell lets it */
		s->timed_out = !s->cancelled;
		s->state = CELL_INTERRUPTED;
		log_debug("session: %s %s: interrupting it", s->xfer ? "state transfer" : "cell",
			  s->cancelled ? "cancelled" : "timed out");
		if (run_signal(s->run, SIGINT) == 0) {
			arm(s, SESSION_GRACE_MS);
			return;
		}
	}
	if (s->state == CELL_INTERRUPTED) {
		log_debug("session: the %s ignored its interrupt: killing the session", s->xfer ? "state transfer" : "cell");
		run_cancel(s->run);
	}
	(void)w;
	(void)events;
}

struct session *session_open(struct loop *l, const struct run_request *q, session_ready_fn ready,
			     session_gone_fn gone, void *ctx, struct pc_err *err)
{
	struct session *s = xcalloc(1, sizeof(*s));
	struct run_request req = *q;

	s->loop = l;
	s->cap = q->policy->limits.output_bytes;
	buffers_init(s, 0);
	for (int i = 0; i < 2; i++)
		s->pipes[i] = (struct cell_pipe){ s, i ? RUN_STDERR : RUN_STDOUT, -1, { 0 } };
	s->xfer_pipe = -1;
	s->mem_fd = -1;
	s->mem_limit = q->policy->limits.memory_bytes;
	s->ready_fn = ready;
	s->gone_fn = gone;
	s->ctx = ctx;
	s->tool_message = q->on_tool_message;
	s->tool_done = q->on_tool_done;
	s->tool_ctx = q->tool_ctx;
	s->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (s->timer_fd < 0 || loop_add(l, &s->w_timer, s->timer_fd, EPOLLIN, on_timer, s) < 0) {
		pc_syserr(err, "session", "timerfd");
		session_free(s);
		return NULL;
	}
	req.mode = RUN_MODE_CELL;
	req.code = session_boot;
	req.code_len = strlen(session_boot);
	req.prog_name = "main.py";
	req.variables_json = NULL;
	req.args = NULL;
	req.stdin_data = NULL;
	req.stdin_len = 0;
	req.stdin_fd = -1;
	req.timeout_ms = 0;
	req.session = true;
	req.outputs = true;
	req.on_output = on_jail_output;
	req.on_done = on_done;
	req.ctx = s;
	req.on_tool_message = on_tool_message;
	req.on_tool_done = on_tool_done;
	req.tool_ctx = s;
	/* Not from the pool: its jails have warmed up for a run (pycell._cell.
	 * warm_up), and an idle session would keep the pages that wrote, 0.25
	 * MiB with the default policy, 0.35 with the data stack; a jail of
	 * its own gets the session's loop at once and does not (jail_spec.
	 * warm_up), for a start some ms longer (tests/bench/data.py) */
	if (run_start(l, &req, &s->run, err) < 0) {
		session_free(s);
		return NULL;
	}
	return s;
}

static json_t *json_or_null(const char *text)
{
	json_t *v = text ? json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL) : NULL;
	return v ? v : json_null();
}

/* The cell's two pipes: read ends watched here, write ends (in w) for
 * python.  -1 (err) with nothing left open. */
static int pipes_open(struct session *s, int w[2], struct pc_err *err)
{
	for (int i = 0; i < 2; i++) {
		int fds[2] = { -1, -1 };
		if (pipe2(fds, O_CLOEXEC) < 0 || set_nonblock(fds[0], true) < 0 ||
		    loop_add(s->loop, &s->pipes[i].w, fds[0], EPOLLIN, on_pipe, &s->pipes[i]) < 0) {
			int e = errno;
			if (fds[0] >= 0) {
				close(fds[0]);
				close(fds[1]);
			}
			for (int j = 0; j < i; j++) {
				pipe_close(s, &s->pipes[j]);
				close(w[j]);
			}
			errno = e;
			return pc_syserr(err, "session", "the cell's pipes");
		}
		s->pipes[i].fd = fds[0];
		w[i] = fds[1];
	}
	return 0;
}

int session_run_cell(struct session *s, const struct session_cell *cell, struct pc_err *err)
{
	json_t *msg;
	size_t size;
	int rc, w[2];
	if (session_ended(s) || !s->ready)
		return pc_fail(err, ESRCH, "session", "the session has ended");
	if (s->state != CELL_NONE)
		return pc_fail(err, EBUSY, "session", "the session is running a cell");
	msg = json_pack("{s:s,s:s,s:{s:I,s:s%,s:o,s:o,s:b}}", "jsonrpc", "2.0", "method", "pycell/cell", "params",
			"cell", (json_int_t)(s->number + 1), "code", cell->code, cell->code_len,
			"variables", json_or_null(cell->variables_json),
			"files", json_or_null(cell->files_json), "outputs", 1);
	if (!msg)
		return pc_fail(err, EINVAL, "session", "the cell could not be encoded");
	size = json_dumpb(msg, NULL, 0, JSON_COMPACT);
	if (size > SESSION_CELL_MAX) {
		json_decref(msg);
		return pc_fail(err, EMSGSIZE, "session", "the cell with its files is %zu bytes as JSON, more "
			       "than the %d MiB one cell may carry: pass fewer files", size, SESSION_CELL_MAX >> 20);
	}
	if (pipes_open(s, w, err) < 0) {
		json_decref(msg);
		return -1;
	}
	rc = run_tool_send_fds(s->run, msg, w, 2);
	json_decref(msg);
	close(w[0]);
	close(w[1]);
	if (rc < 0) {
		pipes_finish(s);
		return pc_syserr(err, "session", "sending the cell");
	}
	s->number++;
	buffers_init(s, cell->output_bytes);
	s->cell = *cell;
	s->state = CELL_RUNNING;
	s->t0 = now_ms();
	run_egress_counts(s->run, &s->net0_conn, &s->net0_dns);
	s->cancelled = s->timed_out = false;
	if (cell->timeout_ms)
		arm(s, cell->timeout_ms);
	memory_watch(s, true);
	return 0;
}

/* ------------------------------------------------------------ state transfers */

static void xfer_close(struct session *s)
{
	if (s->xfer_pipe < 0)
		return;
	loop_del(s->loop, &s->w_xfer);
	close(s->xfer_pipe);
	s->xfer_pipe = -1;
}

/* Move what can be moved now between the pipe and the file, at the
 * file's offset s->xfer_bytes: splice, or read and write where the file
 * refuses it.  >0 bytes moved; 0 the end of what is read; -1 errno
 * (EAGAIN: the pipe is empty, or full). */
static ssize_t xfer_move(struct session *s)
{
	char buf[65536];
	loff_t off = (loff_t)s->xfer_bytes;
	bool in = s->xfer == XFER_SNAPSHOT;   /* from the pipe into the file */
	ssize_t n;
	if (!s->xfer_copy) {
		n = in ? splice(s->xfer_pipe, NULL, s->xfer_file, &off, 1 << 20, SPLICE_F_NONBLOCK | SPLICE_F_MOVE)
		       : splice(s->xfer_file, &off, s->xfer_pipe, NULL, 1 << 20, SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
		if (n >= 0 || errno != EINVAL)
			return n;
		s->xfer_copy = true;
	}
	if (!in) {
		/* what the pipe does not take now is read again next time */
		n = pread(s->xfer_file, buf, sizeof(buf), off);
		return n > 0 ? write(s->xfer_pipe, buf, (size_t)n) : n;
	}
	n = read(s->xfer_pipe, buf, sizeof(buf));
	for (ssize_t done = 0, w; n > 0 && done < n; done += w)
		if ((w = pwrite(s->xfer_file, buf + done, (size_t)(n - done), off + done)) < 0)
			return -1;
	return n;
}

/* A transfer moves at most this much per turn of the loop, then lets the
 * loop's other work go first (a 100 MB state would hold it 0.1 s). */
#define XFER_TURN (8u << 20)

/* A snapshot: what the pipe holds now goes to the file, to the cap, at
 * most most bytes. */
static void xfer_drain(struct session *s, uint64_t most)
{
	for (uint64_t moved = 0; s->xfer_pipe >= 0 && moved < most;) {
		ssize_t n = xfer_move(s);
		if (n > 0) {
			moved += (uint64_t)n;
			s->xfer_bytes += (uint64_t)n;
			if (s->xfer_max && s->xfer_bytes > s->xfer_max) {
				pc_fail(&s->xfer_err, EFBIG, "snapshot", "the session's state is more than the %llu "
					"bytes a snapshot may hold (the policy's sessions.snapshot_max)",
					(unsigned long long)s->xfer_max);
				xfer_close(s);
			}
			continue;
		}
		if (n == 0) {
			xfer_close(s);   /* python closed its end */
			return;
		}
		if (errno == EAGAIN)
			return;
		if (errno == EINTR)
			continue;
		pc_syserr(&s->xfer_err, "snapshot", "writing the session's state");
		xfer_close(s);
	}
}

/* A restore: the file goes into the pipe as python reads it; at the
 * file's end the pipe closes, which python reads as the state's end. */
static void xfer_feed(struct session *s, uint64_t most)
{
	for (uint64_t moved = 0; s->xfer_pipe >= 0 && moved < most;) {
		ssize_t n = xfer_move(s);
		if (n > 0) {
			moved += (uint64_t)n;
			s->xfer_bytes += (uint64_t)n;
			continue;
		}
		if (n == 0) {
			xfer_close(s);
			return;
		}
		if (errno == EAGAIN)
			return;
		if (errno == EINTR)
			continue;
		if (errno != EPIPE)   /* EPIPE: python stopped reading; its end says why */
			pc_syserr(&s->xfer_err, "restore", "reading the snapshot");
		xfer_close(s);
	}
}

static void on_xfer(struct loop_watch *w, uint32_t events, void *data)
{
	struct session *s = data;
	if (s->xfer == XFER_SNAPSHOT)
		xfer_drain(s, XFER_TURN);
	else
		xfer_feed(s, XFER_TURN);
	(void)w;
	(void)events;
}

/* The transfer ended: python said how (report), or the jail ended under
 * it (NULL). */
static void xfer_finish(struct session *s, json_t *report)
{
	enum xfer kind = s->xfer;
	const char *step = kind == XFER_SNAPSHOT ? "snapshot" : "restore";
	struct pc_err err = s->xfer_err;
	json_t *ok = json_object_get(report, "ok"), *said = json_object_get(report, "bytes");
	session_state_fn done = s->xfer_done;

	if (kind == XFER_SNAPSHOT)
		xfer_drain(s, UINT64_MAX);   /* python closed its end before it said so: the last of it */
	if (s->xfer_err.msg[0])
		err = s->xfer_err;
	xfer_close(s);
	s->xfer = XFER_NONE;
	s->state = CELL_NONE;
	arm(s, 0);
	memory_watch(s, false);
	if (err.msg[0]) {
		/* ours first: the cap, the disk */
	} else if (s->timed_out) {
		pc_fail(&err, ETIMEDOUT, step, "the session's python took longer than %llu ms",
			(unsigned long long)s->xfer_ms);
	} else if (!report) {
		pc_fail(&err, ECHILD, step, "the session's interpreter ended during it");
	} else if (!json_is_true(ok)) {
		const char *why = json_string_value(json_object_get(report, "error"));
		pc_fail(&err, EIO, step, "%.*s", utf8_prefix(why ? why : "it failed", 400), why ? why : "it failed");
	} else if (kind == XFER_SNAPSHOT &&
		   (!json_is_integer(said) || (uint64_t)json_integer_value(said) != s->xfer_bytes)) {
		pc_fail(&err, EIO, step, "the session's python said it wrote %lld bytes, and %llu came",
			(long long)json_integer_value(said), (unsigned long long)s->xfer_bytes);
	}
	s->cancelled = s->timed_out = false;
	s->xfer_done = NULL;
	done(s, err.msg[0] ? &err : NULL, report, s->xfer_ctx);
}

static int xfer_start(struct session *s, enum xfer kind, int fd, uint64_t max_bytes, uint64_t ms,
		      session_state_fn done, void *ctx, struct pc_err *err)
{
	const char *step = kind == XFER_SNAPSHOT ? "snapshot" : "restore";
	int p[2], ours, theirs, rc;
	json_t *msg;

	if (session_ended(s) || !s->ready)
		return pc_fail(err, ESRCH, step, "the session has ended");
	if (s->state != CELL_NONE)
		return pc_fail(err, EBUSY, step, "the session is running a cell");
	if (pipe2(p, O_CLOEXEC) < 0)
		return pc_syserr(err, step, "pipe2");
	(void)fcntl(p[0], F_SETPIPE_SZ, 1 << 20);   /* fewer wake-ups; the default 64 KiB works too */
	ours = kind == XFER_SNAPSHOT ? p[0] : p[1];
	theirs = kind == XFER_SNAPSHOT ? p[1] : p[0];
	if (set_nonblock(ours, true) < 0 ||
	    loop_add(s->loop, &s->w_xfer, ours, kind == XFER_SNAPSHOT ? EPOLLIN : EPOLLOUT, on_xfer, s) < 0) {
		pc_syserr(err, step, "the state's pipe");
		close(p[0]);
		close(p[1]);
		return -1;
	}
	msg = json_pack("{s:s,s:s,s:{s:I}}", "jsonrpc", "2.0", "method",
			kind == XFER_SNAPSHOT ? "pycell/snapshot" : "pycell/restore", "params", "max_bytes",
			(json_int_t)(max_bytes > (uint64_t)INT64_MAX ? 0 : max_bytes));
	rc = msg ? run_tool_send_fds(s->run, msg, &theirs, 1) : -1;
	json_decref(msg);
	close(theirs);
	s->xfer_pipe = ours;
	if (rc < 0) {
		xfer_close(s);
		return pc_syserr(err, step, "sending it to the session");
	}
	s->xfer = kind;
	s->xfer_file = fd;
	s->xfer_bytes = 0;
	s->xfer_max = max_bytes;
	s->xfer_ms = ms;
	s->xfer_copy = false;
	memset(&s->xfer_err, 0, sizeof(s->xfer_err));
	s->xfer_done = done;
	s->xfer_ctx = ctx;
	s->state = CELL_RUNNING;
	s->cancelled = s->timed_out = false;
	s->t0 = now_ms();
	if (ms)
		arm(s, ms);
	memory_watch(s, true);
	return 0;
}

int session_snapshot(struct session *s, int fd, uint64_t max_bytes, uint64_t ms, session_state_fn done, void *ctx,
		     struct pc_err *err)
{
	return xfer_start(s, XFER_SNAPSHOT, fd, max_bytes, ms, done, ctx, err);
}

int session_restore(struct session *s, int fd, uint64_t ms, session_state_fn done, void *ctx, struct pc_err *err)
{
	struct stat st;
	/* python is told the size, which no length in the state may pass */
	if (fstat(fd, &st) < 0)
		return pc_syserr(err, "restore", "fstat");
	return xfer_start(s, XFER_RESTORE, fd, (uint64_t)st.st_size, ms, done, ctx, err);
}

bool session_busy(const struct session *s) { return s->state != CELL_NONE; }
/* one held over its memory limit is being killed: it has ended too */
bool session_ended(const struct session *s) { return s->ended || s->over; }
bool session_over_memory(const struct session *s) { return s->over != 0; }
struct run *session_run(struct session *s) { return s->run; }

void session_cancel_cell(struct session *s)
{
	if (s->state != CELL_RUNNING)
		return;
	s->cancelled = true;
	arm(s, 0);
	on_timer(&s->w_timer, EPOLLIN, s);
}

void session_kill(struct session *s)
{
	if (s->run && !s->ended)
		run_cancel(s->run);
}

void session_free(struct session *s)
{
	if (!s)
		return;
	if (s->timer_fd >= 0) {
		loop_del(s->loop, &s->w_timer);
		close(s->timer_fd);
	}
	if (s->mem_fd >= 0) {
		loop_del(s->loop, &s->w_mem);
		close(s->mem_fd);
	}
	pipe_close(s, &s->pipes[0]);
	pipe_close(s, &s->pipes[1]);
	xfer_close(s);
	run_free(s->run);
	outbuf_free(&s->out);
	outbuf_free(&s->err);
	outbuf_free(&s->whole_out);
	outbuf_free(&s->whole_err);
	free(s);
}
