/* pycell: one run on the event loop.  The run owns the jail (init's pidfd,
 * the sync socket), the three pipes, the tool socket, the timer and the
 * cgroup; the result is final when init is reaped and both output pipes
 * reached EOF.  Its callbacks all finish the same struct run (run_int.h),
 * and finish_if_complete() must see every one of them; how its jail is
 * made is run_jail.c's (through spawner.h and program.h), its
 * environment env.c's. */
#include "config.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/log.h"
#include "jail/cgroup.h"
#include "jail/jail.h"
#include "jail/rootfs.h"
#include "jail/seccomp.h"
#include "run/outputs.h"
#include "run/run.h"
#include "run/run_int.h"
#include "run/program.h"
#include "run/egress.h"
#include "run/spawner.h"

/* ------------------------------------------------------------ finishing */

static void unwatch_close(struct run *r, struct loop_watch *w, int *fd)
{
	loop_del(r->loop, w);
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static void finish_if_complete(struct run *r)
{
	struct run_result *res = &r->result;
	struct cgroup_stats st = { 0 };

	if (r->done || r->out.fd >= 0 || r->err.fd >= 0 ||
	    !(r->reaped || (r->req.finish_on_report && r->got_exit && !r->got_error)))
		return;
	r->done = true;
	res->duration_ms = now_ms() - r->t0;
	outbuf_finish(&res->out, "stdout");
	outbuf_finish(&res->err, "stderr");
	blob_rx_reset(&r->blob);
	/* nothing more is read from the jail: a run may finish before its
	 * processes are gone (finish_on_report), and the tool bridge lets go
	 * of the run below (on_tool_done) */
	unwatch_close(r, &r->w_tool, &r->tool_fd);
	unwatch_close(r, &r->w_timer, &r->timer_fd);
	unwatch_close(r, &r->w_stdin, &r->stdin_fd);
	if (r->src_polled)
		loop_del(r->loop, &r->w_stdin_src);
	if (r->got_exit) {
		res->cpu_ms = (uint64_t)r->exit_msg.cpu_us / 1000;
		res->memory_peak_bytes = (uint64_t)r->exit_msg.maxrss_kb * 1024;
	}
	/* the counters only: the cgroups go in run_free, after the caller
	 * has answered (removing them takes longer than reading them) */
	if (r->egress)
		egress_report(r->egress, res);
	if (r->cgroup && cgroup_run_stats(r->cgroup, &st) == 0) {
		if (st.cpu_us)
			res->cpu_ms = (st.cpu_us > r->cpu_base_us ? st.cpu_us - r->cpu_base_us : 0) / 1000;
		if (st.memory_peak_bytes)
			res->memory_peak_bytes = st.memory_peak_bytes;
	}
	if (r->got_error)
		res->status = RUN_SETUP_FAILED;
	else if (r->timed_out)
		res->status = RUN_TIMEOUT;
	else if (st.oom_killed)
		res->status = RUN_MEMORY_LIMIT;
	else if (r->cancelled || !r->got_exit)
		res->status = RUN_KILLED;
	else if (WIFEXITED(r->exit_msg.wait_status)) {
		res->exit_code = WEXITSTATUS(r->exit_msg.wait_status);
		res->status = res->exit_code == 0 ? RUN_OK : RUN_ERROR;
	} else {
		res->signal = WTERMSIG(r->exit_msg.wait_status);
		res->status = RUN_ERROR;
	}
	if (res->status != RUN_OK && res->status != RUN_ERROR && r->got_exit) {
		/* keep what python did report even when the run ended otherwise */
		if (WIFEXITED(r->exit_msg.wait_status))
			res->exit_code = WEXITSTATUS(r->exit_msg.wait_status);
		else
			res->signal = WTERMSIG(r->exit_msg.wait_status);
	}
	log_debug("run %d: %s after %llu ms", (int)r->jail.pid, run_status_name(res->status),
		  (unsigned long long)res->duration_ms);
	if (r->req.on_tool_done && !r->tool_done) {
		r->tool_done = true;
		r->req.on_tool_done(r, r->req.tool_ctx);
	}
	if (r->req.on_done)
		r->req.on_done(r, r->req.ctx);
}

static void kill_jail(struct run *r)
{
	if (r->spawned && !r->reaped)
		pidfd_send_signal(r->jail.pidfd, SIGKILL, NULL, 0);
	if (r->cgroup)
		cgroup_run_kill(r->cgroup);
}

/* ------------------------------------------------------------ callbacks */

static void on_output(struct loop_watch *w, uint32_t events, void *data)
{
	struct run *r = data;
	struct out_stream *s = w == &r->out.w ? &r->out : &r->err;
	char scratch[READ_CHUNK];

	for (int rounds = 0; rounds < 16; rounds++) {
		ssize_t n = read(s->fd, scratch, sizeof(scratch));
		if (n > 0) {
			/* a session's output is all its cells', kept by them */
			size_t kept = r->req.session ? 0 : outbuf_append(s->buf, scratch, (size_t)n);
			if (r->req.on_output)
				r->req.on_output(r->req.ctx, s->id, scratch, (size_t)n, kept);
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		/* EOF or error: this stream is done */
		unwatch_close(r, &s->w, &s->fd);
		finish_if_complete(r);
		return;
	}
	(void)events;
}

static void on_tool(struct loop_watch *w, uint32_t events, void *data);

int run_signal(struct run *r, int sig)
{
	if (!r->spawned || r->reaped || r->done || r->jail.pidfd < 0)
		return -1;
	return pidfd_send_signal(r->jail.pidfd, sig, NULL, 0);
}

static void on_sync(struct loop_watch *w, uint32_t events, void *data)
{
	struct run *r = data;
	struct jail_msg m;
	for (;;) {
		ssize_t n = recv_packet(r->jail.sync_fd, &m, sizeof(m), MSG_DONTWAIT);
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			unwatch_close(r, &r->w_sync, &r->jail.sync_fd);
			return;
		}
		if ((size_t)n != sizeof(m))
			continue;
		if (m.type == JAIL_MSG_ERROR && !r->got_error) {
			r->got_error = true;
			r->result.setup_error = m.err;
			r->result.setup_error.step[sizeof(m.err.step) - 1] = '\0';
			r->result.setup_error.msg[sizeof(m.err.msg) - 1] = '\0';
		} else if (m.type == JAIL_MSG_EXIT) {
			r->got_exit = true;
			r->exit_msg = m;
			if (r->req.finish_on_report && !r->reaped) {
				/* python wrote its last tool message before it
				 * exited, and init reports after that */
				if (r->tool_fd >= 0)
					on_tool(&r->w_tool, EPOLLIN, r);
				finish_if_complete(r);
				return;
			}
		}
	}
	(void)w;
	(void)events;
}

static void on_pidfd(struct loop_watch *w, uint32_t events, void *data)
{
	struct run *r = data;
	siginfo_t si;
	memset(&si, 0, sizeof(si));
	if (waitid((idtype_t)P_PIDFD, (id_t)r->jail.pidfd, &si, WEXITED | WNOHANG) < 0) {
		if (errno != ECHILD)
			return;
	} else if (si.si_pid == 0) {
		return;
	}
	/* init and python sent their last messages before exiting: read
	 * them before deciding */
	if (r->jail.sync_fd >= 0)
		on_sync(&r->w_sync, EPOLLIN, r);
	if (r->tool_fd >= 0)
		on_tool(&r->w_tool, EPOLLIN, r);
	r->reaped = true;
	unwatch_close(r, &r->w_pidfd, &r->jail.pidfd);
	unwatch_close(r, &r->w_sync, &r->jail.sync_fd);
	/* the pid namespace is gone; nothing can still hold the pipes, but a
	 * setup failure before exec may leave them unopened by anyone */
	unwatch_close(r, &r->w_tool, &r->tool_fd);
	finish_if_complete(r);
	(void)w;
	(void)events;
}

static void on_timer(struct loop_watch *w, uint32_t events, void *data)
{
	struct run *r = data;
	uint64_t ticks;
	(void)!read(r->timer_fd, &ticks, sizeof(ticks));
	if (!r->spawned) {
		/* setup failed before the jail existed: deliver the result now */
		r->reaped = true;
		unwatch_close(r, &r->out.w, &r->out.fd);
		unwatch_close(r, &r->err.w, &r->err.fd);
		finish_if_complete(r);
		return;
	}
	if (!r->reaped && !r->done) {
		r->timed_out = true;
		kill_jail(r);
	}
	(void)w;
	(void)events;
}

static void stdin_close(struct run *r)
{
	unwatch_close(r, &r->w_stdin, &r->stdin_fd);
	if (r->src_polled) {
		loop_del(r->loop, &r->w_stdin_src);
		r->src_polled = false;
	}
}

/* Refill the streaming-input buffer from req.stdin_fd. */
static void stdin_refill(struct run *r)
{
	ssize_t n;
	if (r->src_eof || r->src_off < r->src_len)
		return;
	n = read(r->req.stdin_fd, r->src_buf, READ_CHUNK);
	if (n > 0) {
		r->src_len = (size_t)n;
		r->src_off = 0;
	} else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
		r->src_eof = true;
	}
}

static void stdin_update_interest(struct run *r)
{
	bool have = r->stdin_left || (r->src_buf && r->src_off < r->src_len);
	if (r->stdin_fd < 0)
		return;
	if (!have && (r->req.stdin_fd < 0 || r->src_eof)) {
		stdin_close(r);
		return;
	}
	loop_mod(r->loop, &r->w_stdin, have || !r->src_polled ? EPOLLOUT : 0);
	if (r->src_polled)
		loop_mod(r->loop, &r->w_stdin_src, have ? 0 : EPOLLIN);
}

static void on_stdin_writable(struct loop_watch *w, uint32_t events, void *data)
{
	struct run *r = data;
	const char *p;
	size_t len;
	ssize_t n;

	if (events & (EPOLLERR | EPOLLHUP)) {
		stdin_close(r);
		return;
	}
	if (r->src_buf && !r->src_polled)
		stdin_refill(r); /* a regular file: always readable */
	if (r->stdin_left) {
		p = r->stdin_pos;
		len = r->stdin_left;
	} else if (r->src_buf && r->src_off < r->src_len) {
		p = r->src_buf + r->src_off;
		len = r->src_len - r->src_off;
	} else {
		stdin_update_interest(r);
		return;
	}
	n = write(r->stdin_fd, p, len);
	if (n < 0) {
		if (errno != EAGAIN && errno != EINTR)
			stdin_close(r); /* EPIPE: the program stopped reading */
		return;
	}
	if (r->stdin_left) {
		r->stdin_pos += n;
		r->stdin_left -= (size_t)n;
	} else {
		r->src_off += (size_t)n;
	}
	stdin_update_interest(r);
	(void)w;
}

static void on_stdin_source(struct loop_watch *w, uint32_t events, void *data)
{
	struct run *r = data;
	stdin_refill(r);
	stdin_update_interest(r);
	(void)w;
	(void)events;
}

static void tool_reply_error(struct run *r, json_t *id, int code, const char *msg)
{
	json_t *reply = json_pack("{s:s,s:O,s:{s:i,s:s}}", "jsonrpc", "2.0", "id", id, "error",
				  "code", code, "message", msg);
	if (reply)
		run_tool_send(r, reply);
	json_decref(reply);
}

void run_tool_unhandled(struct run *r, const json_t *msg)
{
	json_t *id = json_object_get(msg, "id");
	if (id)
		tool_reply_error(r, id, -32601, "no tools are available in this run");
}

/* A warm cell's python saying how it ended, just before its exit
 * (zygote.c, report_end): taken as init's report would be, when the run
 * may finish on it.  True when that finished the run. */
static bool python_ended(struct run *r, json_t *params)
{
	json_t *st = json_object_get(params, "status"), *cpu = json_object_get(params, "cpu_us"),
	       *rss = json_object_get(params, "maxrss_kb");
	if (!r->req.finish_on_report || r->got_exit || r->done || !json_is_integer(st) ||
	    json_integer_value(st) < 0 || json_integer_value(st) > 255)
		return false;
	r->got_exit = true;
	r->exit_msg.type = JAIL_MSG_EXIT;
	r->exit_msg.wait_status = (int32_t)(json_integer_value(st) << 8);
	r->exit_msg.cpu_us = json_is_integer(cpu) && json_integer_value(cpu) > 0 ? json_integer_value(cpu) : 0;
	r->exit_msg.maxrss_kb = json_is_integer(rss) && json_integer_value(rss) > 0 ? json_integer_value(rss) : 0;
	finish_if_complete(r);
	return r->done;
}

/* No more packets can come: the peer closed its end, or shut down its
 * writing (code in the jail can: read to its end, the socket stayed
 * readable and the loop spun on it until the run ended). */
static bool peer_gone(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLRDHUP };
	return poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLRDHUP));
}

static void on_tool(struct loop_watch *w, uint32_t events, void *data)
{
	struct run *r = data;
	char *buf = xmalloc(TOOL_MSG_MAX + 1);
	for (int i = 0; i < 64; i++) {
		ssize_t n = recv_packet(r->tool_fd, buf, TOOL_MSG_MAX + 1, MSG_DONTWAIT | MSG_TRUNC);
		json_t *msg, *method, *id;
		if (n < 0 && errno == EAGAIN)
			break;
		/* SEQPACKET: 0 is an empty packet, or the end once the peer
		 * hung up or shut down, which EPOLLIN alone does not say: ask */
		if (n == 0 && !(events & EPOLLHUP) && !peer_gone(r->tool_fd))
			continue;
		if (n <= 0) {
			unwatch_close(r, &r->w_tool, &r->tool_fd);
			break;
		}
		if (n > TOOL_MSG_MAX) {
			tool_reply_error(r, json_null(), -32600, "message too large");
			continue;
		}
		/* \u0000 is valid JSON: refusing it would leave the call unanswered
		 * (a parse error has no id); the bridge rejects NULs in names */
		msg = json_loadb(buf, (size_t)n, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, NULL);
		if (!json_is_object(msg)) {
			tool_reply_error(r, json_null(), -32700, "parse error");
			json_decref(msg);
			continue;
		}
		method = json_object_get(msg, "method");
		id = json_object_get(msg, "id");
		if (json_is_string(method) && strcmp(json_string_value(method), "pycell/result") == 0 && !id) {
			json_t *v = json_object_get(json_object_get(msg, "params"), "return_value");
			free(r->result.return_value);
			r->result.return_value = v ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
		} else if (json_is_string(method) && strcmp(json_string_value(method), "pycell/blob") == 0 && !id) {
			if (r->req.outputs)
				blob_rx_packet(&r->blob, &r->result, json_object_get(msg, "params"));
		} else if (json_is_string(method) && strcmp(json_string_value(method), "pycell/exit") == 0 && !id) {
			if (python_ended(r, json_object_get(msg, "params"))) {
				json_decref(msg);
				break;
			}
		} else if (r->req.on_tool_message) {
			r->req.on_tool_message(r, msg, r->req.tool_ctx);
		} else {
			run_tool_unhandled(r, msg);
		}
		json_decref(msg);
	}
	free(buf);
	(void)w;
	(void)events;
}

int run_tool_send(struct run *r, json_t *msg)
{
	return run_tool_send_fds(r, msg, NULL, 0);
}

int run_tool_send_fds(struct run *r, json_t *msg, const int *fds, int n_fds)
{
	cleanup_free char *s = NULL;
	if (r->tool_fd < 0) {
		errno = EPIPE;
		return -1;
	}
	s = json_dumps(msg, JSON_COMPACT);
	if (!s) {
		errno = ENOMEM;
		return -1;
	}
	/* the socket is non-blocking: a full one fails at once */
	return send_fds(r->tool_fd, s, strlen(s), fds, n_fds);
}

/* ------------------------------------------------------------ start */

static void setup_failed(struct run *r, const struct pc_err *e)
{
	struct itimerspec now = { .it_value = { 0, 1 } };
	r->got_error = true;
	r->result.setup_error = *e;
	/* deliver on_done from the loop, never from inside run_start */
	timerfd_settime(r->timer_fd, 0, &now, NULL);
}

/* What the run keeps of each stream: the policy's cap, or the request's
 * when it is smaller. */
static uint64_t output_cap(const struct run_request *q)
{
	uint64_t cap = q->policy->limits.output_bytes;
	return q->output_bytes && q->output_bytes < cap ? q->output_bytes : cap;
}

static void output_init(struct run *r)
{
	outbuf_free(&r->result.out);
	outbuf_free(&r->result.err);
	outbuf_init(&r->result.out, output_cap(&r->req));
	outbuf_init(&r->result.err, output_cap(&r->req));
}

static struct run *run_new(struct loop *l, const struct run_request *q, struct pc_err *err)
{
	struct run *r = xcalloc(1, sizeof(*r));

	r->loop = l;
	r->req = *q;
	result_init(&r->result);
	r->result.backend = policy_is_wasm(q->policy) ? "wasm" : "native";
	r->out = (struct out_stream){ .fd = -1, .id = RUN_STDOUT, .buf = &r->result.out };
	r->err = (struct out_stream){ .fd = -1, .id = RUN_STDERR, .buf = &r->result.err };
	output_init(r);
	r->stdin_fd = r->tool_fd = r->jail.pidfd = r->jail.sync_fd = r->jail.prog_fd = -1;
	r->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (r->timer_fd < 0 || loop_add(l, &r->w_timer, r->timer_fd, EPOLLIN, on_timer, r) < 0) {
		pc_syserr(err, "spawn", "timerfd");
		run_free(r);
		return NULL;
	}
	return r;
}

/* The limits the supervisor and the tmpfs sizes enforce, in the result. */
static void add_limits(struct run *r)
{
	const struct run_request *q = &r->req;
	const struct limits *lim = &q->policy->limits;
	r->timeout_ms = q->session ? 0 : lim->timeout_ms;
	if (q->timeout_ms && (!r->timeout_ms || q->timeout_ms < r->timeout_ms))
		r->timeout_ms = q->timeout_ms;
	if (r->timeout_ms)
		result_add_limit(&r->result, "timeout_ms", r->timeout_ms, ENF_SUPERVISOR);
	result_add_limit(&r->result, "output_bytes", output_cap(&r->req), ENF_SUPERVISOR);
	/* the wasm backend's /tmp is Pyodide's own, in its heap: memory_bytes
	 * holds it, not the jail's tmpfs (which node may not write) */
	if (!policy_is_wasm(q->policy))
		result_add_limit(&r->result, "tmp_bytes", lim->tmp_bytes, ENF_TMPFS);
	/* a bare jail's /workspace is Pyodide's too */
	if (!r->bare)
		result_add_limit(&r->result, "workspace_bytes", lim->workspace_bytes, ENF_TMPFS);
}

/* The request's part: its limits in the result, the loop's watches, stdin
 * and the timer.  From here the run is on. */
static int run_go(struct run *r, struct pc_err *err)
{
	const struct run_request *q = &r->req;
	struct loop *l = r->loop;

	if (!r->t0)
		r->t0 = now_ms(); /* a parked run's was stamped at its delivery */
	add_limits(r);
	if (loop_add(l, &r->out.w, r->out.fd, EPOLLIN, on_output, r) < 0 ||
	    loop_add(l, &r->err.w, r->err.fd, EPOLLIN, on_output, r) < 0 ||
	    loop_add(l, &r->w_sync, r->jail.sync_fd, EPOLLIN, on_sync, r) < 0 ||
	    loop_add(l, &r->w_pidfd, r->jail.pidfd, EPOLLIN, on_pidfd, r) < 0 ||
	    loop_add(l, &r->w_tool, r->tool_fd, EPOLLIN, on_tool, r) < 0 ||
	    loop_add(l, &r->w_stdin, r->stdin_fd, EPOLLOUT, on_stdin_writable, r) < 0)
		return pc_syserr(err, "spawn", "epoll_ctl");
	if (q->stdin_data && q->stdin_len) {
		r->stdin_pos = q->stdin_data;
		r->stdin_left = q->stdin_len;
	} else if (q->stdin_fd >= 0) {
		r->src_buf = xmalloc(READ_CHUNK);
		if (loop_add(l, &r->w_stdin_src, q->stdin_fd, EPOLLIN, on_stdin_source, r) == 0)
			r->src_polled = true;
		else if (errno != EPERM)
			r->src_eof = true;
	}
	stdin_update_interest(r);
	if (r->timeout_ms) {
		struct itimerspec t = { .it_value = { (time_t)(r->timeout_ms / 1000),
						      (long)(r->timeout_ms % 1000) * 1000000 } };
		timerfd_settime(r->timer_fd, 0, &t, NULL);
	}
	return 0;
}

int run_start(struct loop *l, const struct run_request *q, struct run **out, struct pc_err *err)
{
	struct pc_err setup_err = { 0 };
	struct run *r = run_new(l, q, err);

	*out = r;
	if (!r)
		return -1;
	r->t0 = now_ms();
	if (run_spawn(r, false, &setup_err) < 0) {
		add_limits(r);
		setup_failed(r, &setup_err);
		return 0;
	}
	if (run_go(r, err) < 0) {
		run_free(r);
		*out = NULL;
		return -1;
	}
	return 0;
}

struct run *run_park(struct loop *l, const struct run_request *q, run_parked_fn parked, void *ctx,
		     struct pc_err *err)
{
	struct run *r;
	if (q->mode != RUN_MODE_CELL) {
		pc_fail(err, EINVAL, "warm", "ready jails run cells only");
		return NULL;
	}
	r = run_new(l, q, err);
	if (!r)
		return NULL;
	r->parked = parked;
	r->parked_ctx = ctx;
	if (run_spawn(r, true, err) < 0) {
		run_free(r);
		return NULL;
	}
	return r;
}

bool run_parked_alive(const struct run *r)
{
	struct pollfd pf = { .fd = r->jail.pidfd, .events = POLLIN };
	return poll(&pf, 1, 0) == 0;
}

int run_start_parked(struct run *r, const struct run_request *q, struct pc_err *err)
{
	struct jail_spec spec = { 0 };
	cleanup_free char *vars = NULL;
	struct program prog;

	/* same policy (the jail is built for it), same kind of program */
	if (q->policy != r->req.policy || q->mode != RUN_MODE_CELL || r->req.mode != RUN_MODE_CELL)
		return pc_fail(err, EINVAL, "warm", "the ready jail was made for another policy or mode");
	if (!run_parked_alive(r))
		return pc_fail(err, ESRCH, "warm", "the ready jail is gone");
	spec.policy = q->policy;
	spec.argv = r->argv;
	spec.envp = r->envp;
	spec.linger = q->finish_on_report;
	prog = program_of(q);
	program_files(&spec, &prog, &vars);
	/* the run's time starts before its program can: stamped after the
	 * delivery (and the CPU reading below), a 2 s sleep measured 1998 ms */
	r->t0 = now_ms();
	if (r->spawner->ops->deliver(r->spawner, &spec, &r->jail, err) < 0)
		return -1;
	/* the run's CPU time starts now: what made the jail ready is not its */
	r->cpu_base_us = cgroup_run_cpu_us(r->cgroup);
	r->req = *q;
	output_init(r);   /* nothing came yet: the cell's own cap */
	return run_go(r, err);
}

void run_cancel(struct run *r)
{
	if (r->done)
		return;
	r->cancelled = true;
	if (!r->spawned) {
		struct itimerspec now = { .it_value = { 0, 1 } };
		timerfd_settime(r->timer_fd, 0, &now, NULL);
		return;
	}
	kill_jail(r);
}

bool run_done(const struct run *r) { return r->done; }
const struct run_result *run_result(const struct run *r) { return &r->result; }
bool run_egress_counts(const struct run *r, uint64_t *connections, uint64_t *dns_queries)
{
	if (!r->egress)
		return false;
	egress_counts(r->egress, connections, dns_queries);
	return true;
}

struct run_result *run_result_mut(struct run *r) { return &r->result; }

bool run_memory_shared(const struct run *r) { return cgroup_run_shared(r->cgroup); }
int run_memory(const struct run *r, uint64_t limit, uint64_t *bytes, struct pc_err *err)
{
	return cgroup_run_memory(r->cgroup, limit, bytes, err);
}
void run_memory_mark(struct run *r) { cgroup_run_mark(r->cgroup); }

void run_settle(struct run *r, int timeout_ms)
{
	struct pollfd p = { .fd = r->jail.pidfd, .events = POLLIN };
	if (!r->spawned || r->reaped || p.fd < 0)
		return;
	/* readable once init has exited, for its parent or not (waitid then
	 * fails with ECHILD in a child of the parent, which on_pidfd takes as
	 * the exit) */
	if (poll(&p, 1, timeout_ms) == 1)
		on_pidfd(&r->w_pidfd, EPOLLIN, r);
}

/* The jails of runs that finished on their init's report and were freed
 * before init had exited: killed (it was on its way out) and reaped from
 * the loop once it has, so that no one waits for the kernel's teardown
 * of its namespaces (a mount namespace's ends with an RCU grace period,
 * milliseconds: tests/bench/floor). */
struct reaping {
	struct loop_watch w;
	struct loop *loop;
	int pidfd;
	struct reaping *next;
};
static struct reaping *reapings;

static void reaping_end(struct reaping *x, int flags)
{
	siginfo_t si;
	struct reaping **p = &reapings;
	while (*p != x)
		p = &(*p)->next;
	*p = x->next;
	loop_del(x->loop, &x->w);
	/* our child when the start was cold; the zygote reaps warm ones */
	waitid((idtype_t)P_PIDFD, (id_t)x->pidfd, &si, WEXITED | flags);
	close(x->pidfd);
	free(x);
}

static void on_reaped(struct loop_watch *w, uint32_t events, void *data)
{
	reaping_end(data, WNOHANG);
	(void)w;
	(void)events;
}

static bool reap_later(struct run *r)
{
	struct reaping *x;
	if (!r->done || !r->req.finish_on_report || r->jail.pidfd < 0)
		return false;
	if (r->spawner != spawner_cold()) {
		/* the zygote is the jail's parent and reaps it: nothing to
		 * wait for here, and no descriptor kept */
		loop_del(r->loop, &r->w_pidfd);
		pidfd_send_signal(r->jail.pidfd, SIGKILL, NULL, 0);
		close(r->jail.pidfd);
		r->jail.pidfd = -1;
		return true;
	}
	x = xcalloc(1, sizeof(*x));
	x->loop = r->loop;
	x->pidfd = r->jail.pidfd;
	loop_del(r->loop, &r->w_pidfd);   /* one watch per fd in an epoll set */
	if (loop_add(r->loop, &x->w, x->pidfd, EPOLLIN, on_reaped, x) < 0) {
		free(x);
		return false;
	}
	pidfd_send_signal(x->pidfd, SIGKILL, NULL, 0);
	r->jail.pidfd = -1;
	x->next = reapings;
	reapings = x;
	return true;
}

void run_reap_pending(void)
{
	while (reapings)
		reaping_end(reapings, 0);
}

void run_free(struct run *r)
{
	if (!r)
		return;
	if (r->ahead)
		r->req.spawner->ops->cancel(r->req.spawner, r->ahead);
	if (r->spawned && !r->reaped && !reap_later(r)) {
		siginfo_t si;
		kill_jail(r);
		waitid((idtype_t)P_PIDFD, (id_t)r->jail.pidfd, &si, WEXITED);
	}
	if (r->req.on_tool_done && !r->tool_done) {
		r->tool_done = true;
		r->req.on_tool_done(r, r->req.tool_ctx);
	}
	unwatch_close(r, &r->w_pidfd, &r->jail.pidfd);
	unwatch_close(r, &r->w_sync, &r->jail.sync_fd);
	if (r->jail.prog_fd >= 0)
		close(r->jail.prog_fd);
	unwatch_close(r, &r->out.w, &r->out.fd);
	unwatch_close(r, &r->err.w, &r->err.fd);
	unwatch_close(r, &r->w_tool, &r->tool_fd);
	unwatch_close(r, &r->w_timer, &r->timer_fd);
	stdin_close(r);
	if (r->cgroup) {
		cgroup_run_kill(r->cgroup);
		cgroup_run_destroy(r->cgroup, r->loop);
	}
	egress_free(r->egress);
	blob_rx_reset(&r->blob);
	free(r->src_buf);
	program_strv_free(r->argv);
	program_strv_free(r->envp);
	result_free(&r->result);
	free(r);
}
