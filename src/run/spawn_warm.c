/* pycell: the warm spawner, the supervisor's side of warm starts: it
 * starts a zygote (zygote.c) for the policy and asks it, over a control
 * socket, to clone each jail; the run's pidfd and sync socket come back,
 * and the jail is released and driven exactly like a cold one.  A run
 * waits for its jail's reply (ctl); the pool's jails are asked ahead on a
 * socket of their own (ahead), whose replies the loop reads, in order. */
#include "config.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <jansson.h>

#include "base/fault.h"
#include "base/log.h"
#include "base/loop.h"
#include "jail/rootfs.h"
#include "run/program.h"
#include "run/spawner.h"
#include "run/fonts.h"
#include "run/zygote.h"

#define ZYGOTE_REPLY_MS 10000
/* with python.preload: the data stack takes 1.5 s here, more under a
 * sanitizer on a busy machine */
#define ZYGOTE_PRELOAD_REPLY_MS 60000

/* A jail asked ahead, in the order asked: the zygote answers in order. */
struct spawn_ahead {
	struct spawn_ahead *next;
	spawn_ahead_fn done;  /* NULL: cancelled */
	void *ctx;
	/* its answer, read (ahead_take) and not yet given to done: the jail
	 * when ok, else why not */
	bool answered, ok;
	struct jail j;
	struct pc_err err;
};

struct zygote {
	struct spawner base;  /* first: a struct spawner * is a struct zygote * */
	uint64_t started_ms;  /* to restart a dead zygote at most once a second */
	pid_t pid;
	int ctl;              /* supervisor end of the control socket */
	int ahead;            /* and of the one for jails asked ahead */
	struct loop *loop;    /* that reads ahead's replies, while w_ahead is registered */
	struct loop_watch w_ahead;  /* registered while a jail asked ahead is wanted */
	/* and with it: written when answers were read outside the loop
	 * (wait_reply), so that the loop gives them on (on_ahead) */
	int kick;
	struct loop_watch w_kick;
	struct spawn_ahead *head, *tail;
	unsigned n_live;      /* of those, not cancelled */
	struct policy policy; /* the policy the zygote was started with */
	char *runtime_dir;
	char *fonts_dir;      /* fonts_dir_for(policy): its jails' (fonts.h) */
	/* With python.preload: a directory of ours the zygote's imports write
	 * to (zygote.h), made for each start and removed once it answered or
	 * died, so a zygote killed while importing leaves nothing behind */
	char scratch[64];
	bool dead;
	/* Started without waiting (spawner_warm_new_async, and every start
	 * after a death: zygote_restart): until its answer is read
	 * (warm_revive polls for it), its runs start cold; an async first
	 * start that failed is not tried again (failed) and they stay cold,
	 * where a restart that failed is tried again a second later. */
	bool async, starting, failed;
	bool restart;         /* starting: in place of one that died */
	uint64_t start_by;    /* starting: the answer's deadline */
	bool have_policy;     /* policy holds a parsed copy (free it) */
	struct pc_err start_err;  /* why the last start failed ("": it did not) */
	json_t *preload;      /* the zygote's report of python.preload */
};

static const struct spawner_ops warm_ops;

static struct zygote *zygote_of(struct spawner *sp)
{
	return (struct zygote *)sp;
}

static const struct zygote *zygote_of_const(const struct spawner *sp)
{
	return (const struct zygote *)sp;
}

static int wait_readable(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int n;
	do
		n = poll(&p, 1, ms);
	while (n < 0 && errno == EINTR);
	if (n == 0)
		errno = ETIMEDOUT;
	return n > 0 ? 0 : -1;
}


const char *zygote_flag_env(const char *flag)
{
	static const char *const map[][2] = {
		{ "-B", "PYTHONDONTWRITEBYTECODE=1" }, { "-u", "PYTHONUNBUFFERED=1" },
		{ "-O", "PYTHONOPTIMIZE=1" }, { "-OO", "PYTHONOPTIMIZE=2" },
		{ "-s", "PYTHONNOUSERSITE=1" }, { "-q", "" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(map); i++)
		if (strcmp(flag, map[i][0]) == 0)
			return map[i][1];
	return NULL;
}

/* "libpython3.11.so.1.0" for an interpreter whose real name is python3.11 */
static int libpython_name(const char *python, char *out, size_t len, struct pc_err *err)
{
	char real[PATH_MAX];
	const char *base;
	unsigned minor;
	char tail;
	if (!realpath(python, real))
		return pc_syserr(err, "warm", "interpreter %s", python);
	base = strrchr(real, '/') + 1;
	if (sscanf(base, "python3.%u%c", &minor, &tail) != 1)
		return pc_fail(err, ENOTSUP, "warm", "interpreter %s (%s) is not named python3.N", python, real);
	snprintf(out, len, "libpython3.%u.so.1.0", minor);
	return 0;
}

/* ------------------------------------------------------------ supervisor side */
static int zygote_exec(struct zygote *z, struct pc_err *err);
static int zygote_launch(struct zygote *z, struct pc_err *err);
static uint64_t start_timeout_ms(const struct zygote *z);

/* A zygote launched and not waited for: revive polls for its answer. */
static void zygote_launched(struct zygote *z)
{
	z->starting = true;
	z->start_by = now_ms() + start_timeout_ms(z);
}

/* Start a zygote for this policy.  Fails (and the caller stays on cold
 * starts) when the policy's interpreter has no loadable libpython or uses
 * flags a zygote cannot honour. */
static int warm_prepare(struct spawner *sp, const struct policy *p, const char *runtime_dir,
			struct pc_err *err)
{
	struct zygote *z = zygote_of(sp);
	cleanup_free char *ps = NULL;
	json_t *pj;

	z->runtime_dir = xstrdup(runtime_dir);
	z->fonts_dir = fonts_dir_for(p);
	/* our own copy, parsed the way the zygote parses it */
	pj = policy_to_json(p);
	ps = json_dumps(pj, JSON_COMPACT);
	json_decref(pj);
	if (!ps)
		return pc_fail(err, ENOMEM, "warm", "the policy for the zygote");
	if (policy_parse(ps, "zygote", &z->policy, err) < 0)
		return -1;
	z->have_policy = true;
	if (!z->async)
		return zygote_exec(z, err);
	if (zygote_launch(z, err) < 0)
		return -1;
	zygote_launched(z);
	return 0;
}

static void scratch_done(struct zygote *z)
{
	if (z->scratch[0])
		rm_tree(z->scratch);
	z->scratch[0] = '\0';
}

/* The zygote failed: it is killed now, so that the replies it owes on
 * ahead end (EOF) and the loop fails the jails asked of it; its
 * replacement is started before the next run (zygote_restart). */
static void zygote_lost(struct zygote *z)
{
	z->dead = true;
	if (z->pid > 0)
		kill(z->pid, SIGKILL);
	scratch_done(z);
}

/* Stop reading ahead's replies once no one wants one: a loop is freed
 * only after the jails asked from it were answered or cancelled. */
static void ahead_unwatch_idle(struct zygote *z)
{
	if (!z->n_live && z->w_ahead.registered)
		loop_del(z->loop, &z->w_ahead);
	if (!z->n_live && z->w_kick.registered)
		loop_del(z->loop, &z->w_kick);
}

/* Forget the jails asked ahead; those still wanted get err (NULL: none
 * may be). */
static void ahead_end_all(struct zygote *z, const struct pc_err *err)
{
	struct spawn_ahead *a = z->head;
	z->head = z->tail = NULL;
	z->n_live = 0;
	ahead_unwatch_idle(z);
	while (a) {
		struct spawn_ahead *next = a->next;
		if (a->answered && a->ok)
			jail_abort(&a->j);
		if (a->done && err)
			a->done(a->ctx, NULL, err);
		else if (a->done)
			log_warn("warm starts: a jail asked ahead was never answered");
		free(a);
		a = next;
	}
}

/* No jail from a zygote that is starting, not waited for (-1, err set).
 * Seldom: a run's revive starts a dead one's replacement first, and the
 * run is then not the zygote's (serves is false while it starts). */
static int restarting(struct pc_err *err)
{
	return pc_fail(err, EAGAIN, "warm", "the zygote died; another is starting");
}

/* Start a zygote in place of the one that died, without waiting for it
 * (with python.preload that is seconds, and the server's loop serves every
 * client meanwhile): until it has answered, its runs start cold. */
static int zygote_restart(struct zygote *z, struct pc_err *err)
{
	/* one that is starting is not dead, only not answered yet */
	if (z->starting)
		return restarting(err);
	/* the loop fails them first, when it reads the old zygote's EOF */
	if (z->n_live)
		return pc_fail(err, EAGAIN, "warm", "the zygote is gone, and the jails asked of it are not all answered yet");
	if (now_ms() - z->started_ms < 1000) {
		if (z->start_err.msg[0])
			return pc_fail(err, z->start_err.errnum, "warm", "the zygote is gone; starting another failed "
				       "less than a second ago: %s: %s", z->start_err.step, z->start_err.msg);
		return pc_fail(err, EPIPE, "warm", "the zygote is gone (restarted less than a second ago)");
	}
	log_warn("warm starts: the zygote (pid %d) stopped; starting a new one", (int)z->pid);
	ahead_end_all(z, NULL); /* cancelled ones: their jails went with it */
	if (z->ctl >= 0)
		close(z->ctl);
	if (z->ahead >= 0)
		close(z->ahead);
	/* none after a start that failed before its fork: kill(0) would be
	 * our own process group (the agent that started us, say) */
	if (z->pid > 0) {
		kill(z->pid, SIGKILL);
		waitpid(z->pid, NULL, 0);
	}
	scratch_done(z);
	z->ctl = z->ahead = -1;
	z->pid = 0;
	if (zygote_launch(z, err) < 0) {
		z->start_err = *err;
		return -1;
	}
	z->start_err.msg[0] = '\0';
	z->restart = true;
	zygote_launched(z);
	return 0;
}

/* The packet after the ready reply: what python.preload loaded, and
 * what it left out (logged). */
static int read_preload_report(struct zygote *z, struct pc_err *err)
{
	cleanup_free char *buf = xmalloc(ZYGOTE_REPORT_MAX + 1);
	const char *name, *why = NULL;
	json_t *failed, *v;
	ssize_t n = -1;

	if (wait_readable(z->ctl, ZYGOTE_REPLY_MS) == 0)
		n = recv_packet(z->ctl, buf, ZYGOTE_REPORT_MAX, 0);
	if (n <= 0)
		return pc_syserr(err, "warm", "the zygote's preload report");
	buf[n] = '\0';
	json_decref(z->preload);
	z->preload = json_loads(buf, 0, NULL);
	if (!json_is_object(z->preload) || (why = json_string_value(json_object_get(z->preload, "error"))))
		return pc_fail(err, EPROTO, "warm", "the zygote's preload report: %s", why ? why : buf);
	failed = json_object_get(z->preload, "failed");
	json_object_foreach(failed, name, v)
		log_warn("warm starts: python.preload: %s is left out: %s", name, json_string_value(v));
	json_object_foreach(json_object_get(z->preload, "unused"), name, v)
		log_warn("warm starts: python.preload: %s is loaded, but its first use in the zygote failed "
			 "(a run does that work itself): %s", name, json_string_value(v));
	if ((why = json_string_value(json_object_get(z->preload, "huge_pages_refused"))))
		log_debug("warm starts: huge pages refused for the zygote's memory (%s): it stays in 4 KiB pages", why);
	else
		log_debug("warm starts: %lld MiB of the zygote's memory in huge pages (%lld ms)",
			  (long long)json_integer_value(json_object_get(z->preload, "huge_pages_mib")),
			  (long long)json_integer_value(json_object_get(z->preload, "huge_pages_ms")));
	if (z->policy.n_python_preload)
		log_info("warm starts: python.preload: %zu of %zu modules in %lld ms",
			 json_array_size(json_object_get(z->preload, "loaded")), z->policy.n_python_preload,
			 (long long)json_integer_value(json_object_get(z->preload, "ms")));
	return 0;
}

json_t *spawner_preload(const struct spawner *sp)
{
	return sp && sp->ops == &warm_ops ? zygote_of_const(sp)->preload : NULL;
}

/* Start the zygote process for z's policy and send it its configuration;
 * its answer is zygote_answer's to read. */
static int zygote_launch(struct zygote *z, struct pc_err *err)
{
	const struct policy *p = &z->policy;
	const char *runtime_dir = z->runtime_dir;
	static const char *const pass_env[] = { "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "PYCELL_FAULT" };
	char *envp[ARRAY_SIZE(pass_env) + 1] = { 0 };
	char *argv[] = { "pycell", "__zygote", NULL };
	char libname[64];
	json_t *cfg;
	char *text;
	cleanup_pair int sv[2] = { -1, -1 }, av[2] = { -1, -1 };
	int n_env = 0;
	pid_t pid, parent;

	z->started_ms = now_ms();
	z->dead = true; /* until it answers */

	for (size_t i = 0; i < p->n_python_flags; i++)
		if (!zygote_flag_env(p->python_flags[i]))
			return pc_fail(err, ENOTSUP, "warm", "interpreter flag %s has no warm-start equivalent",
				       p->python_flags[i]);
	if (libpython_name(p->python, libname, sizeof(libname), err) < 0)
		return -1;
	for (size_t i = 0; i < ARRAY_SIZE(pass_env); i++) {
		const char *v = getenv(pass_env[i]);
#ifdef __SANITIZE_ADDRESS__
		/* the leak check at exit needs ptrace, which warm jails deny; and a
		 * jailed program's fault is its own: it dies of the signal, as
		 * an exec'd python would, not of ASan's report of it (a probe
		 * of i386 calls on a kernel without them: SIGSEGV) */
		if (i == 0) {
			envp[n_env++] = xasprintf("%s=%s%sdetect_leaks=0:handle_segv=0:handle_sigbus=0:handle_sigfpe=0:"
						  "handle_sigill=0", pass_env[i], v ? v : "", v ? ":" : "");
			continue;
		}
#endif
		if (v)
			envp[n_env++] = xasprintf("%s=%s", pass_env[i], v);
	}
	parent = getpid();
	if (fault_at("zygote")) {
		errno = EMFILE;
		pc_syserr(err, "warm", "socketpair (injected fault)");
		for (int i = 0; i < n_env; i++)
			free(envp[i]);
		return -1;
	}
	pid = socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0 ||
			      socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, av) < 0
		      ? -1
		      : fork();
	if (pid < 0) {
		pc_syserr(err, "warm", av[0] < 0 ? "socketpair" : "fork the zygote");
		for (int i = 0; i < n_env; i++)
			free(envp[i]);
		return -1;
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		/* above the fds they go to, so that neither lands on the other */
		int ctl = fcntl(sv[1], F_DUPFD_CLOEXEC, ZYGOTE_AHEAD_FD + 1);
		int ahead = fcntl(av[1], F_DUPFD_CLOEXEC, ZYGOTE_AHEAD_FD + 1);
		/* dies with the supervisor, and takes its jails along (jail.c) */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent || null < 0 || ctl < 0 || ahead < 0 ||
		    dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(ctl, ZYGOTE_FD) < 0 ||
		    dup2(ahead, ZYGOTE_AHEAD_FD) < 0 || syscall(SYS_close_range, ZYGOTE_AHEAD_FD + 1, ~0U, 0) < 0)
			_exit(127);
		execve("/proc/self/exe", argv, envp);
		_exit(127);
	}
	for (int i = 0; i < n_env; i++)
		free(envp[i]);
	close(steal_fd(&sv[1]));
	close(steal_fd(&av[1]));

	z->pid = pid;
	z->ctl = steal_fd(&sv[0]);
	z->ahead = steal_fd(&av[0]);
	/* our log level (info at most), which its empty environment and argv
	 * cannot carry */
	cfg = json_pack("{s:o,s:s,s:s,s:I,s:i}", "policy", policy_to_json(p), "runtime_dir", runtime_dir,
			"libpython", libname, "host_id_base", (json_int_t)jail_host_id_base, "log_level",
			(int)log_level);
	if (z->fonts_dir)
		json_object_set_new(cfg, "fonts_dir", json_string(z->fonts_dir));
	json_object_set_new(cfg, "init", json_string(pycell_init_path()));
	if (p->n_python_preload) {
		scratch_done(z);
		snprintf(z->scratch, sizeof(z->scratch), "/tmp/pycell-zygote-XXXXXX");
		if (!mkdtemp(z->scratch)) {
			z->scratch[0] = '\0';
			json_decref(cfg);
			pc_syserr(err, "warm", "mkdtemp /tmp/pycell-zygote-XXXXXX for the zygote's imports");
			return -1;
		}
		json_object_set_new(cfg, "scratch", json_string(z->scratch));
	}
	text = json_dumps(cfg, JSON_COMPACT);
	json_decref(cfg);
	if (!text || send(z->ctl, text, strlen(text), MSG_NOSIGNAL) < 0) {
		pc_syserr(err, "warm", "configure the zygote");
		goto fail;
	}
	free(text);
	return 0;
fail:
	free(text);
	return -1;
}

/* How long a zygote may take to answer its configuration. */
static uint64_t start_timeout_ms(const struct zygote *z)
{
	return z->policy.n_python_preload ? ZYGOTE_PRELOAD_REPLY_MS : ZYGOTE_REPLY_MS;
}

/* The launched zygote's answer, readable now: ready (its preload report
 * read), or why not. */
static int zygote_answer(struct zygote *z, struct pc_err *err)
{
	struct spawn_reply reply;
	ssize_t n = recv_packet(z->ctl, &reply, sizeof(reply), 0);
	/* the imports are over, however they went */
	scratch_done(z);
	if (n == 0)
		return pc_fail(err, EPIPE, "warm", "the zygote exited before it was ready (what it said is on "
			       "standard error)");
	if (n < 0)
		return pc_syserr(err, "warm", "the zygote did not start");
	if (n != (ssize_t)sizeof(reply))
		return pc_fail(err, EPROTO, "warm", "the zygote's answer is %zd bytes, not %zu", n, sizeof(reply));
	if (!reply.ok) {
		*err = reply.err;
		return -1;
	}
	if (read_preload_report(z, err) < 0)
		return -1;
	z->dead = false;
	log_debug("zygote %d ready", (int)z->pid);
	return 0;
}

/* Start the zygote and wait until it is ready. */
static int zygote_exec(struct zygote *z, struct pc_err *err)
{
	if (zygote_launch(z, err) < 0)
		return -1;
	if (wait_readable(z->ctl, start_timeout_ms(z)) < 0)
		return pc_syserr(err, "warm", "the zygote did not start");
	return zygote_answer(z, err);
}

/* An async zygote still starting: ready once its answer is there; past
 * its deadline, or refused, it has failed for good (logged). */
static void zygote_poll(struct zygote *z)
{
	struct pollfd pf = { .fd = z->ctl, .events = POLLIN };
	struct pc_err err = { 0 };
	int n = poll(&pf, 1, 0);

	if (n == 0 && now_ms() < z->start_by)
		return;
	z->starting = false;
	if (n == 1 && zygote_answer(z, &err) == 0) {
		log_info("warm starts: zygote %d ready after %llu ms", (int)z->pid,
			 (unsigned long long)(now_ms() - z->started_ms));
		return;
	}
	if (n == 0)
		pc_fail(&err, ETIMEDOUT, "warm", "the zygote did not answer in %llu s",
			(unsigned long long)start_timeout_ms(z) / 1000);
	else if (n < 0)
		pc_syserr(&err, "warm", "poll the zygote");
	if (z->restart) {
		/* tried again before a run a second after its start, at the
		 * earliest (zygote_restart) */
		z->start_err = err;
		log_warn("warm starts: zygote %d could not be started; runs start cold until another is: %s: %s",
			 (int)z->pid, err.step, err.msg);
	} else {
		z->failed = true;
		log_warn("warm starts: zygote %d could not be started; its runs start cold: %s: %s", (int)z->pid,
			 err.step, err.msg);
	}
	zygote_lost(z);
}

/* Can this zygote serve a run of policy p (same interpreter and jail)? */
static bool warm_serves(const struct spawner *sp, const struct policy *p)
{
	const struct zygote *z = zygote_of_const(sp);
	/* an egress jail's veth and filters are made for it before its clone */
	return z->have_policy && !z->starting && !z->failed && p->network.mode != NET_EGRESS &&
	       policy_equal(&z->policy, p);
}

static bool warm_revive(struct spawner *sp, const struct policy *p)
{
	struct zygote *z = zygote_of(sp);
	struct pc_err err = { 0 };
	if (z->starting)
		zygote_poll(z);
	else if (z->dead && !z->failed && warm_serves(sp, p) && zygote_restart(z, &err) < 0)
		log_debug("warm starts: not restarted yet: %s", err.msg);
	return z->starting;
}

pid_t zygote_pid(const struct spawner *sp)
{
	return sp && sp->ops == &warm_ops ? zygote_of_const(sp)->pid : 0;
}

int spawner_deliver_cell(const struct jail_spec *s, struct jail *j, struct pc_err *err)
{
	uint64_t len;
	cleanup_close int memfd = warm_pack_files(s, false, &len, err);
	if (memfd < 0)
		return -1;
	if (len > JAIL_PARK_FILES_MAX)
		return pc_fail(err, EFBIG, "warm", "the program is too large for a ready jail");
	return jail_deliver(j, memfd, len, s->linger, err);
}

static int warm_deliver(struct spawner *sp, const struct jail_spec *s, struct jail *j,
			struct pc_err *err)
{
	return spawner_deliver_cell(s, j, err);
}

/* Ask the zygote, on control socket fd, for a jail for spec s.  -1 with
 * err set when it could not be asked (the zygote is lost when sending
 * failed). */
static int send_request(struct zygote *z, int fd, const struct jail_spec *s, struct pc_err *err)
{
	struct spawn_req req;
	int out[REQ_MAX_FDS], n;
	int rc;

	if (warm_request_pack(s, &req, out, &n, err) < 0)
		return -1;
	rc = send_fds(fd, &req, sizeof(req), out, n);
	close(out[REQ_FD_MEMFD]);
	if (rc < 0) {
		pc_syserr(err, "warm", "the zygote stopped answering");
		zygote_lost(z);
		return -1;
	}
	return 0;
}

/* One reply from control socket fd: 1 with j set, 0 with reply->err, -1
 * with errno when there is none (EAGAIN with MSG_DONTWAIT) or the zygote
 * is gone.  A jail with a small init (jail.h) is released here, as it
 * comes: the zygote waits for that before it serves anything else. */
static int recv_reply(struct zygote *z, int fd, int flags, struct spawn_reply *reply, struct jail *j)
{
	int fds[3] = { -1, -1, -1 };
	char ctl[CMSG_SPACE(sizeof(fds))];
	struct iovec iov = { reply, sizeof(*reply) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
			     .msg_controllen = sizeof(ctl) };
	struct cmsghdr *c;
	ssize_t n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC | flags);

	if (n < 0)
		return -1;
	if (n != (ssize_t)sizeof(*reply)) {
		errno = n == 0 ? EPIPE : EPROTO;
		return -1;
	}
	c = CMSG_FIRSTHDR(&mh);
	if (reply->ok && fault_at("warm_reply"))
		mh.msg_flags |= MSG_CTRUNC;   /* none fit: what came is closed below */
	/* a failure reply carries no fds; a success reply two or three, unless
	 * we had no room for them (EMFILE: the kernel installs what fits and
	 * says MSG_CTRUNC): what did come is closed, or it leaks */
	if (!reply->ok || !c || c->cmsg_type != SCM_RIGHTS || reply->n_fds < 2 || reply->n_fds > 3 ||
	    c->cmsg_len != CMSG_LEN((size_t)reply->n_fds * sizeof(int)) || (mh.msg_flags & MSG_CTRUNC)) {
		for (; c; c = CMSG_NXTHDR(&mh, c))
			if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
				for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++)
					close(((int *)CMSG_DATA(c))[i]);
		if (!reply->ok)
			return 0;
		errno = (mh.msg_flags & MSG_CTRUNC) ? EMFILE : EPROTO;
		return -1;
	}
	memcpy(fds, CMSG_DATA(c), (size_t)reply->n_fds * sizeof(int));
	/* whole: a zygote's jail is never bare */
	*j = (struct jail){ .pid = reply->pid, .pidfd = fds[0], .sync_fd = fds[1], .prog_fd = fds[2] };
	if (reply->small_init) {
		struct jail_spec spec = { .policy = &z->policy };
		/* jail_release kills the jail when it fails */
		if (jail_release(&spec, j, &reply->err) < 0)
			return 0;
		j->released = true;
	}
	return 1;
}

/* One answer from ahead, for the oldest jail asked ahead still without
 * one: 1 read, 0 none there, -1 the zygote is gone (or owes none). */
static int ahead_take(struct zygote *z)
{
	struct spawn_ahead *a = z->head;
	struct spawn_reply reply;
	struct jail j;
	int rc = recv_reply(z, z->ahead, MSG_DONTWAIT, &reply, &j);

	while (a && a->answered)
		a = a->next;
	if (rc < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (rc < 0 && errno == EMFILE) {
		/* the reply came, its descriptors did not fit: that jail
		 * failed, the zygote did not */
		rc = 0;
		pc_syserr(&reply.err, "warm", "receive the jail's descriptors");
	}
	if (rc < 0 || !a) {
		if (rc == 1)
			jail_abort(&j);
		return -1;
	}
	a->answered = true;
	a->ok = rc == 1;
	if (a->ok)
		a->j = j;
	else
		a->err = reply.err;
	return 1;
}

/* A reply on ctl within ms (0), or -1 with errno.  Meanwhile, the answers
 * to jails asked ahead are read and their jails released (recv_reply):
 * the zygote may be waiting for that before it reads our request; the
 * loop gives them on (kick). */
static int wait_reply(struct zygote *z, int ms)
{
	uint64_t until = now_ms() + (uint64_t)ms;
	bool ahead = z->ahead >= 0;

	for (;;) {
		struct pollfd p[2] = { { .fd = z->ctl, .events = POLLIN }, { .fd = ahead ? z->ahead : -1, .events = POLLIN } };
		uint64_t now = now_ms();
		int n = now >= until ? 0 : poll(p, 2, (int)(until - now));
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0)
			errno = ETIMEDOUT;
		if (n <= 0)
			return -1;
		if (p[0].revents)
			return 0;
		switch (ahead_take(z)) {
		case 1:
			if (z->kick >= 0)
				(void)eventfd_write(z->kick, 1);
			break;
		case 0:
			break;
		default:
			/* gone (the loop hears of its end: on_ahead), or an
			 * answer no jail asked for: lost either way */
			zygote_lost(z);
			ahead = false;
			break;
		}
	}
}

/* Clone a jail from the zygote; on success j holds the pidfd and sync fd
 * and the child waits for its release.  Without spec->park it runs a
 * script: spec's files, with argv/envp as sys.argv and os.environ.  With
 * spec->park it becomes a ready jail for one cell (warm_deliver). */
static int warm_spawn(struct spawner *sp, const struct jail_spec *s, struct jail *j, struct pc_err *err)
{
	struct zygote *z = zygote_of(sp);
	struct spawn_reply reply;

	if (z->dead)
		return zygote_restart(z, err) < 0 ? -1 : restarting(err);
	if (send_request(z, z->ctl, s, err) < 0)
		return -1;
	if (wait_reply(z, ZYGOTE_REPLY_MS) == 0) {
		switch (recv_reply(z, z->ctl, 0, &reply, j)) {
		case 1:
			return 0;
		case 0:
			*err = reply.err;
			return -1;
		default:
			/* our table was full, not the zygote wrong: it serves on
			 * (the jail it made ends when its sync socket closes) */
			if (errno == EMFILE)
				return pc_syserr(err, "warm", "receive the jail's descriptors");
			break;
		}
	}
	pc_syserr(err, "warm", "the zygote stopped answering");
	zygote_lost(z);
	return -1;
}

/* The zygote's replies on ahead (or those wait_reply read: the kick),
 * given to the jails asked ahead in the order asked. */
static void on_ahead(struct loop_watch *w, uint32_t events, void *data)
{
	struct zygote *z = data;
	struct spawn_ahead *a;
	eventfd_t n;
	int rc;

	if (z->kick >= 0)
		(void)eventfd_read(z->kick, &n);
	while ((rc = ahead_take(z)) > 0)
		;
	if (rc < 0) {
		struct pc_err err = { 0 };
		pc_fail(&err, EPIPE, "warm", "the zygote stopped answering");
		zygote_lost(z);
		ahead_end_all(z, &err);
		return;
	}
	while ((a = z->head) && a->answered) {
		z->head = a->next;
		if (!z->head)
			z->tail = NULL;
		if (a->done)
			z->n_live--;
		ahead_unwatch_idle(z);
		if (!a->done) {
			if (a->ok)
				jail_abort(&a->j);
		} else if (a->ok) {
			a->done(a->ctx, &a->j, NULL);
		} else {
			a->done(a->ctx, NULL, &a->err);
		}
		free(a);
	}
	(void)w;
	(void)events;
}

static struct spawn_ahead *warm_spawn_ahead(struct spawner *sp, struct loop *l, const struct jail_spec *s,
					    spawn_ahead_fn done, void *ctx, struct pc_err *err)
{
	struct zygote *z = zygote_of(sp);
	struct spawn_ahead *a;

	if (!s->park) {
		pc_fail(err, EINVAL, "warm", "only ready jails are asked ahead");
		return NULL;
	}
	if (z->dead) {
		if (zygote_restart(z, err) == 0)
			restarting(err);
		return NULL;
	}
	if (z->w_ahead.registered && z->loop != l) {
		pc_fail(err, EINVAL, "warm", "jails asked ahead from two loops");
		return NULL;
	}
	z->loop = l;
	if (z->kick < 0 && (z->kick = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
		pc_syserr(err, "warm", "eventfd");
		return NULL;
	}
	if (!z->w_ahead.registered && loop_add(l, &z->w_ahead, z->ahead, EPOLLIN, on_ahead, z) < 0) {
		pc_syserr(err, "warm", "epoll_ctl");
		return NULL;
	}
	if (!z->w_kick.registered && loop_add(l, &z->w_kick, z->kick, EPOLLIN, on_ahead, z) < 0) {
		pc_syserr(err, "warm", "epoll_ctl");
		ahead_unwatch_idle(z);
		return NULL;
	}
	if (send_request(z, z->ahead, s, err) < 0) {
		ahead_unwatch_idle(z);
		return NULL;
	}
	a = xcalloc(1, sizeof(*a));
	a->done = done;
	a->ctx = ctx;
	if (z->tail)
		z->tail->next = a;
	else
		z->head = a;
	z->tail = a;
	z->n_live++;
	return a;
}

static void warm_cancel(struct spawner *sp, struct spawn_ahead *a)
{
	struct zygote *z = zygote_of(sp);
	if (!a->done)
		return;
	a->done = NULL;
	z->n_live--;
	ahead_unwatch_idle(z);
}

static int warm_release(struct spawner *sp, const struct jail_spec *s, struct jail *j, struct pc_err *err)
{
	return jail_release(s, j, err);
}

/* A zygote returns from its loop when its control socket closes, kills
 * the jails it made and waits for them, and exits like any process (its
 * gcov counters, in a coverage build, with it); one that has not within
 * a second is killed, and its jails die of their parent-death signal. */
static void zygote_stop(pid_t pid)
{
	cleanup_close int fd = pidfd_open(pid, 0);
	struct pollfd p = { .fd = fd, .events = POLLIN };
	if (fd < 0 || poll(&p, 1, 1000) != 1)
		kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

static void warm_free(struct spawner *sp)
{
	struct zygote *z = zygote_of(sp);
	ahead_end_all(z, NULL);
	if (z->ctl >= 0)
		close(z->ctl);
	if (z->ahead >= 0)
		close(z->ahead);
	if (z->kick >= 0)
		close(z->kick);
	if (z->pid > 0)
		zygote_stop(z->pid);
	scratch_done(z);
	if (z->have_policy)
		policy_free(&z->policy);
	json_decref(z->preload);
	free(z->runtime_dir);
	free(z->fonts_dir);
	free(z);
}

static const struct spawner_ops warm_ops = {
	.name = "warm",
	.prepare = warm_prepare,
	.serves = warm_serves,
	.revive = warm_revive,
	.spawn = warm_spawn,
	.release = warm_release,
	.deliver = warm_deliver,
	.spawn_ahead = warm_spawn_ahead,
	.cancel = warm_cancel,
	.free = warm_free,
};

struct spawner *spawner_warm_new(void)
{
	struct zygote *z = xcalloc(1, sizeof(*z));
	z->base.ops = &warm_ops;
	z->ctl = z->ahead = z->kick = -1;
	return &z->base;
}

struct spawner *spawner_warm_new_async(void)
{
	struct spawner *sp = spawner_warm_new();
	zygote_of(sp)->async = true;
	return sp;
}
