/* pycell: how a run gets its jail (run_int.h): the host's side (bare or
 * not, the spawner, cgroups, an egress network), the run's ends, the
 * jail's spec, and the clone: asked ahead, from the request's spawner, or
 * cold.  run.c drives the run once it has one. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/log.h"
#include "jail/cgroup.h"
#include "jail/jail.h"
#include "run/egress.h"
#include "run/program.h"
#include "run/run.h"
#include "run/run_int.h"
#include "run/spawner.h"

/* A packet larger than the sender's SO_SNDBUF fails with EMSGSIZE, and the
 * default (net.core.wmem_default) is ~208 KiB: raise it to the packet cap,
 * past net.core.wmem_max when we may (SO_SNDBUFFORCE needs CAP_NET_ADMIN). */
static void tool_sndbuf(int fd)
{
	int size = TOOL_MSG_MAX + (64 << 10);
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof(size)) < 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
}

static int make_pipe(int fds[2], bool parent_reads, struct pc_err *err)
{
	if (pipe2(fds, O_CLOEXEC) < 0)
		return pc_syserr(err, "spawn", "pipe");
	return set_nonblock(parent_reads ? fds[0] : fds[1], true);
}

/* Clone a jail with sp and release it; a jail made ahead whose program
 * is at hand (deliver) gets it at once, after its release. */
static int spawn_with(struct spawner *sp, struct jail_spec *spec, struct jail *j, bool deliver,
		      struct pc_err *err)
{
	if (sp->ops->spawn(sp, spec, j, err) < 0 || sp->ops->release(sp, spec, j, err) < 0)
		return -1;
	if (deliver && sp->ops->deliver(sp, spec, j, err) < 0) {
		jail_abort(j);
		return -1;
	}
	return 0;
}

struct program program_of(const struct run_request *q)
{
	return (struct program){ .mode = q->mode, .code = q->code, .code_len = q->code_len,
				 .prog_name = q->prog_name, .args = q->args,
				 .variables_json = q->variables_json, .files_json = q->files_json,
				 .outputs = q->outputs };
}

/* A parked run's jail came from its spawner (j), or could not be made:
 * released here, and the run's owner told. */
static void on_parked(void *ctx, struct jail *j, const struct pc_err *err)
{
	struct run *r = ctx;
	struct spawner *sp = r->req.spawner;
	struct jail_spec spec = { .policy = r->req.policy };
	struct pc_err release_err = { 0 };

	r->ahead = NULL;
	if (!err) {
		r->jail = *j;
		if (sp->ops->release(sp, &spec, &r->jail, &release_err) == 0) {
			r->spawner = sp;
			r->spawned = true;
			log_debug("run %d: ready", (int)r->jail.pid);
		} else {
			err = &release_err;
		}
	}
	r->parked(r, err, r->parked_ctx);
}

/* The run's cgroups, probing the env's first when it left that to its
 * first run (run_env.probe_later); none is a warning, not a failure. */
static int make_cgroups(struct run *r, struct pc_err *err)
{
	struct run_request *q = &r->req;
	struct pc_err ignored;

	if (q->probe_env && !q->probe_env->cgroups) {
		/* the v2 half: the v1 half comes while the jail builds its root */
		if (cgroup_env_probe_v2(&q->probe_env->cgroups, &ignored) < 0)
			q->probe_env->cgroups = NULL;
		q->cgroups = q->probe_env->cgroups;
		q->probe_env = NULL;
		log_debug("%6llu us: cgroup2 probed", (unsigned long long)log_elapsed_us());
	}
	if (q->cgroups && cgroup_run_create(q->cgroups, &q->policy->limits,
					    q->session ? q->policy->sessions.shared_memory_bytes : 0, !r->bare, &r->cgroup,
					    &r->result, err) < 0)
		return -1;
	log_debug("%6llu us: run cgroup created", (unsigned long long)log_elapsed_us());
	if (!q->cgroups)
		result_add_warning(&r->result, "no cgroup support: memory, pids and cpu limits rely on rlimits");
	return 0;
}

/* How a run's jail will be made, decided before it is. */
struct spawn_plan {
	struct spawner *sp;           /* the request's spawner, when it serves this run */
	bool served;
	bool later;                   /* jail_spec.cgroup.later */
	char *bare_runtime;           /* a bare wasm run's runtime dir, as the kernel names it */
};
static void plan_free(struct spawn_plan *pl)
{
	free(pl->bare_runtime);
}
#define cleanup_plan __attribute__((cleanup(plan_free)))

/* Step 1, the host's side: bare or not, which spawner, the run's cgroups
 * (or their v1 half later), an egress run's network (into spec). */
static int plan_spawn(struct run *r, bool park, struct spawn_plan *pl, struct jail_spec *spec, struct pc_err *err)
{
	const struct run_request *q = &r->req;
	const struct policy *p = q->policy;
	struct pc_err ns_why = { 0 };

	if (q->spawner && q->spawner->ops->revive)
		q->spawner->ops->revive(q->spawner, p);
	/* the wasm backend runs where the host refuses namespaces, without
	 * them; the native one needs them (its clone fails, saying so) */
	r->bare = policy_is_wasm(p) && jail_namespaces_refused(&ns_why);
	r->result.layers = jail_layers(policy_is_wasm(p), r->bare);
	if (r->bare) {
		/* all node may read, named as the kernel will see it */
		if (!(pl->bare_runtime = realpath(q->runtime_dir, NULL)))
			return pc_syserr(err, "runtime", "the runtime directory %s", q->runtime_dir);
		result_add_warning(&r->result, "this host refuses namespaces (%s): the wasm run has no namespace "
				   "and no root of its own; \"layers\" lists what confines it (SECURITY.md, "
				   "\"The wasm backend without namespaces\")", ns_why.msg);
	}
	/* the request's spawner starts this run (else a cold one, start_jail) */
	pl->sp = q->spawner;
	pl->served = pl->sp && pl->sp->ops->serves(pl->sp, p) && p->network.mode != NET_EGRESS && !q->packages_dir;
	if (make_cgroups(r, err) < 0)
		return -1;
	/* The first run of an env probed by halves (pycell run): a cold
	 * jail, cloned into its cgroup2 dir, builds its root while the v1
	 * half is probed and made, and waits for it before anything of its
	 * program (jail_spec.cgroup.later).  Any other jail has it all first. */
	pl->later = cgroup_run_later(r->cgroup) && !park && !pl->served && !r->bare && p->network.mode != NET_EGRESS;
	if (!pl->later && cgroup_run_finish(r->cgroup, &p->limits, !r->bare, &r->result, err) < 0)
		return -1;
	if (p->network.mode == NET_EGRESS) {
		if (park)
			return pc_fail(err, ENOTSUP, "egress", "an egress run is never made ahead");
		if (egress_new(r->loop, p, cgroup_run_clone_fd(r->cgroup), &r->egress, err) < 0)
			return -1;
		egress_spec(r->egress, spec);
	}
	return 0;
}

/* A run's stdin, stdout and stderr and its tool socket: [0] of stdin and
 * [1] of the others are the jail's; tool[1] is the jail's. */
struct run_ends {
	int in[2], out[2], err[2], tool[2];
};
static void ends_close(struct run_ends *x)
{
	close_pair(x->in);
	close_pair(x->out);
	close_pair(x->err);
	close_pair(x->tool);
}
#define cleanup_ends __attribute__((cleanup(ends_close)))

/* Step 2: the ends, or -1 with err (those made are x's to close). */
static int make_ends(struct run_ends *x, struct pc_err *err)
{
	/* one packet carries a whole message (a cell's return value is up
	 * to 1 MiB): raise the jail's send buffer past the default 208 KiB;
	 * SO_SNDBUFFORCE lets root exceed wmem_max */
	int sz = TOOL_SOCKET_BUFFER;

	if (make_pipe(x->in, false, err) < 0 || make_pipe(x->out, true, err) < 0 || make_pipe(x->err, true, err) < 0)
		return -1;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, x->tool) < 0)
		return pc_syserr(err, "spawn", "tool socketpair");
	if (setsockopt(x->tool[1], SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)) < 0)
		setsockopt(x->tool[1], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	tool_sndbuf(x->tool[0]);
	tool_sndbuf(x->tool[1]);
	return 0;
}

/* Step 3: the spec of the jail: its program (prog; vars holds what
 * program_files made), environment, ends and cgroups. */
static void fill_spec(struct run *r, bool park, const struct spawn_plan *pl, const struct run_ends *x,
		      struct program *prog, char **vars, struct jail_spec *spec)
{
	const struct run_request *q = &r->req;
	const struct policy *p = q->policy;

	*prog = program_of(q);
	prog->bare_runtime = pl->bare_runtime;
	/* a wasm cell from its spawner: node reads it from the pipe, made
	 * ahead or delivered at once */
	prog->ready = policy_is_wasm(p) && q->mode == RUN_MODE_CELL && pl->served && pl->sp->ops->deliver;
	r->argv = program_argv(p, prog);
	r->envp = program_envp(p, q->packages_dir != NULL);
	spec->policy = p;
	spec->bare = r->bare;
	spec->filter = q->filter;
	spec->argv = r->argv;
	spec->envp = r->envp;
	spec->park = park;
	if (!park)
		program_files(spec, prog, vars);
	spec->runtime_dir = q->runtime_dir;
	spec->packages_dir = q->packages_dir;
	spec->fonts_dir = q->fonts_dir;
	spec->stdio[0] = x->in[0];
	spec->stdio[1] = x->out[1];
	spec->stdio[2] = x->err[1];
	spec->tool_fd = x->tool[1];
	spec->cgroup.later = pl->later;
	spec->cgroup.dir_fd = cgroup_run_clone_fd(r->cgroup);
	spec->cgroup.into = spec->cgroup.dir_fd >= 0;
	spec->cgroup.n_tasks = cgroup_run_tasks_fds(r->cgroup, spec->cgroup.tasks);
}

/* Step 4: the jail: asked ahead (park: its spawner answers from the loop,
 * on_parked), from the request's spawner, or cold (also when that
 * spawner's start failed, with a warning). */
static int start_jail(struct run *r, bool park, const struct spawn_plan *pl, struct program *prog,
		      struct jail_spec *spec, struct pc_err *err)
{
	const struct run_request *q = &r->req;
	struct spawner *sp = pl->sp;

	if (park) {
		/* jails made ahead come from a spawner that can deliver to them */
		if (!pl->served || !sp->ops->deliver || !sp->ops->spawn_ahead)
			return pc_fail(err, EINVAL, "warm", "no spawner makes ready jails for this policy");
		r->ahead = sp->ops->spawn_ahead(sp, r->loop, spec, on_parked, r, err);
		return r->ahead ? 0 : -1;
	}
	if (pl->served) {
		/* a spawner that makes jails ahead starts a cell the same way,
		 * and gives it its cell at once */
		struct pc_err sp_err = { 0 };
		spec->park = q->mode == RUN_MODE_CELL && sp->ops->deliver;
		spec->linger = spec->park && q->finish_on_report;
		if (spawn_with(sp, spec, &r->jail, spec->park, &sp_err) == 0)
			goto spawned;
		spec->linger = false;
		spec->park = false;
		result_add_warning(&r->result, "%s start failed, started cold: %s: %s", sp->ops->name,
				   sp_err.step, sp_err.msg);
		if (prog->ready) {
			/* node reads the files the cold jail is given */
			prog->ready = false;
			program_strv_free(r->argv);
			spec->argv = r->argv = program_argv(q->policy, prog);
		}
	}
	sp = spawner_cold();
	if (spawn_with(sp, spec, &r->jail, false, err) < 0)
		return -1;
	if (pl->later) {
		int tasks[CGROUP_MAX_TASKS];
		if (cgroup_run_finish(r->cgroup, &q->policy->limits, !r->bare, &r->result, err) < 0 ||
		    jail_cgroups_done(&r->jail, tasks, cgroup_run_tasks_fds(r->cgroup, tasks), err) < 0) {
			jail_abort(&r->jail);
			return -1;
		}
	}
spawned:
	r->spawner = sp;
	r->spawned = true;
	return 0;
}

/* Everything up to a jail that builds itself, in four steps: the host's
 * side (plan_spawn), the ends (make_ends), the spec (fill_spec), the
 * clone (start_jail).  A parked run (park) comes from a spawner that
 * makes jails ahead and gets its program later (run_start_parked).  -1
 * with *setup_err set when the jail could not be made. */
int run_spawn(struct run *r, bool park, struct pc_err *setup_err)
{
	cleanup_plan struct spawn_plan pl = { 0 };
	cleanup_ends struct run_ends x = { { -1, -1 }, { -1, -1 }, { -1, -1 }, { -1, -1 } };
	cleanup_free char *vars = NULL;
	struct jail_spec spec = { 0 };
	struct program prog;

	if (plan_spawn(r, park, &pl, &spec, setup_err) < 0 || make_ends(&x, setup_err) < 0)
		return -1;
	fill_spec(r, park, &pl, &x, &prog, &vars, &spec);
	if (start_jail(r, park, &pl, &prog, &spec, setup_err) < 0)
		return -1;
	/* the jail's ends are its own now (or travel with the request): ours
	 * go to the run, and x's cleanup closes the jail's */
	r->stdin_fd = steal_fd(&x.in[1]);
	r->out.fd = steal_fd(&x.out[0]);
	r->err.fd = steal_fd(&x.err[0]);
	r->tool_fd = steal_fd(&x.tool[0]);
	set_nonblock(r->tool_fd, true);
	return 0;
}
