/* pycell: `pycell run`, one jailed run from the command line. */
#include "config.h"

#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "base/log.h"
#include "bridge/bridge.h"
#include "cli/run_opts.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/setup.h"
#include "config/conf.h"
#include "run/egress.h"
#include "run/packages.h"
#include "jail/jail.h"
#include "run/run.h"
#include "run/zygote.h"

#define PROGRAM_MAX (64 << 20)

struct cli_run {
	bool stream;      /* print output as it comes (not --json) */
	bool done;
};

/* The head of each stream goes out as it comes; its tail at the end. */
static void cli_on_output(void *ctx, enum run_stream s, const char *buf, size_t len, size_t kept)
{
	struct cli_run *c = ctx;
	if (c->stream && kept)
		(void)write_all(s == RUN_STDOUT ? 1 : 2, buf, kept);
	(void)len;
}

static void cli_on_done(struct run *r, void *ctx)
{
	struct cli_run *c = ctx;
	c->done = true;
	(void)r;
}

static void report_end(const struct run_result *res, const struct policy *p)
{
	/* the head went out as it came; the rest (the marker and the tail,
	 * or what fits the cap after the head) only now */
	(void)write_all(1, res->out.data + res->out.head_len, res->out.len - res->out.head_len);
	(void)write_all(2, res->err.data + res->err.head_len, res->err.len - res->err.head_len);
	if (res->out.truncated)
		fprintf(stderr, "pycell: stdout truncated: %zu bytes kept (its head and tail), %llu dropped\n",
			res->out.len, (unsigned long long)res->out.dropped);
	if (res->err.truncated)
		fprintf(stderr, "pycell: stderr truncated: %zu bytes kept (its head and tail), %llu dropped\n",
			res->err.len, (unsigned long long)res->err.dropped);
	switch (res->status) {
	case RUN_SETUP_FAILED:
		fprintf(stderr, "pycell: the jail could not be set up: %s: %s\n",
			res->setup_error.step, res->setup_error.msg);
		break;
	case RUN_TIMEOUT:
		fprintf(stderr, "pycell: killed after the time limit of %.3g s\n",
			(double)p->limits.timeout_ms / 1000);
		break;
	case RUN_MEMORY_LIMIT:
		fprintf(stderr, "pycell: killed by the memory limit of %llu bytes\n",
			(unsigned long long)p->limits.memory_bytes);
		break;
	case RUN_KILLED:
		fprintf(stderr, "pycell: the run was killed\n");
		break;
	case RUN_OK:
	case RUN_ERROR:
	default:
		break;
	}
	for (int i = 0; i < res->n_warnings; i++)
		fprintf(stderr, "pycell: warning: %s\n", res->warnings[i]);
}

/* Upstream MCP servers from the config: start them, wait until they
 * listed their tools (or failed), and give the run its tools.  An egress
 * run gets the bridge without them too: its run record, with what its
 * network refused, goes to the audit log. */
static int start_tools(struct loop *l, const struct pycell_conf *conf, struct run_request *req,
		       struct bridge **out, struct pc_err *err)
{
	uint64_t wait_ms = 0;
	*out = NULL;
	if (!conf->n_upstreams && req->policy->network.mode != NET_EGRESS)
		return 0;
	*out = bridge_new(l, conf, err);
	if (!*out)
		return -1;
	for (size_t i = 0; i < conf->n_upstreams; i++)
		if (conf->upstreams[i].timeout_ms > wait_ms)
			wait_ms = conf->upstreams[i].timeout_ms;
	bridge_start(*out, NULL);
	bridge_wait_ready(*out, wait_ms);
	bridge_attach(*out, req);
	return 0;
}

/* pycell run is over for its caller once python's status and output are
 * known and written out.  What is left, the jail's init exiting (the
 * kernel tearing down its namespaces) and the run's cgroups removed, is
 * done by a child of ours that holds nothing the caller waits on (its
 * standard streams are /dev/null), and this process returns at once:
 * true.  Nothing is left behind: the child ends once the jail and its
 * cgroups are gone (it holds their locks meanwhile, cgroup_probe.c), and
 * a child killed on the way leaves what the next supervisor's sweep
 * removes.  The parent ends with _exit, and so does the child once the
 * jail and its cgroups are gone (memory is the kernel's to free, below).
 * TEARDOWN_CHILD: this is that child; TEARDOWN_HERE: no fork (it
 * failed, or a coverage build, whose jail init writes its counters as it
 * exits and would be killed mid-way by its parent-death signal). */
enum teardown { TEARDOWN_HERE, TEARDOWN_PARENT, TEARDOWN_CHILD };

static enum teardown teardown_later(void)
{
	int null;
	pid_t pid;
#ifdef PYCELL_COVERAGE
	return TEARDOWN_HERE;
#endif
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid != 0)
		return pid > 0 ? TEARDOWN_PARENT : TEARDOWN_HERE;
	prctl(PR_SET_NAME, "pycell-teardown");
	null = open("/dev/null", O_RDWR | O_CLOEXEC);
#ifdef __SANITIZE_ADDRESS__
	/* a sanitizer build keeps stderr, where its reports go: the caller
	 * waits for the teardown then, as it did before */
	for (int fd = 0; fd < 2 && null >= 0; fd++)
#else
	for (int fd = 0; fd < 3 && null >= 0; fd++)
#endif
		dup2(null, fd);
	if (null > 2)
		close(null);
	return TEARDOWN_CHILD;
}

int cmd_run(int argc, char **argv)
{
	struct run_opts o;
	struct pc_err err = { 0 };
	struct run_env env;
	struct run_request req = { .stdin_fd = -1 };
	struct cli_run c = { 0 };
	struct loop *l = NULL;
	struct run *r = NULL;
	struct pycell_conf conf;
	struct bridge *bridge = NULL;
	struct pc_err warm_err = { 0 };
	cleanup_free char *code = NULL;
	cleanup_free char *prog_name = NULL;
	cleanup_close int stdin_file = -1;
	size_t code_len = 0;
	enum teardown td;
	int status;

	if (cli_parse_run(argc, argv, &o, &err) < 0)
		return cli_usage_error("run", &err);
	if (o.help) {
		fputs(cli_run_usage, stdout);
		return 0;
	}
	if (o.debug)
		log_level = LOG_DEBUG;
	log_debug("%6llu us: start", (unsigned long long)log_elapsed_us());

	if (o.code) {
		code = xstrdup(o.code);
		code_len = strlen(code);
		prog_name = xstrdup("main.py");
	} else if (o.from_stdin) {
		if (read_fd_all(0, PROGRAM_MAX, &code, &code_len) < 0) {
			pc_syserr(&err, "program", "cannot read the program from stdin");
			return cli_input_error("run", &err);
		}
		prog_name = xstrdup("main.py");
	} else {
		cleanup_free char *tmp = xstrdup(o.file);
		if (read_file(o.file, PROGRAM_MAX, &code, &code_len) < 0) {
			pc_syserr(&err, "program", "cannot read %s", o.file);
			return cli_input_error("run", &err);
		}
		prog_name = xstrdup(basename(tmp));
		if (!prog_name[0] || strcmp(prog_name, ".") == 0 || strcmp(prog_name, "..") == 0 ||
		    strcmp(prog_name, "lib") == 0 || strcmp(prog_name, "variables.json") == 0) {
			free(prog_name);
			prog_name = xstrdup("main.py");
		}
	}
	if (o.stdin_file && strcmp(o.stdin_file, "-") != 0) {
		stdin_file = open(o.stdin_file, O_RDONLY | O_CLOEXEC);
		if (stdin_file < 0) {
			pc_syserr(&err, "stdin", "--stdin %s", o.stdin_file);
			return cli_input_error("run", &err);
		}
	}

	if (cli_conf_setup(o.config, &conf, &err) < 0)
		return cli_input_error("run", &err);
	if (run_env_load(&env, o.policy ? o.policy : conf.policy, &err) < 0) {
		conf_free(&conf);
		return cli_input_error("run", &err);
	}
	if (cli_apply_overrides(&o, &env.policy, &err) < 0) {
		run_env_free(&env);
		conf_free(&conf);
		return cli_input_error("run", &err);
	}
	log_debug("%6llu us: policy %s loaded", (unsigned long long)log_elapsed_us(), env.policy.name);
	/* a cold run probes the cgroups while its jail builds its root */
	env.probe_later = !o.warm;
	if (run_env_prepare(&env, &err) < 0) {
		run_env_free(&env);
		conf_free(&conf);
		return cli_setup_error("run", &err);
	}
	log_debug("%6llu us: seccomp program ready", (unsigned long long)log_elapsed_us());

	if (o.warm && run_env_warm(&env, &warm_err) == 0)
		log_debug("%6llu us: zygote started", (unsigned long long)log_elapsed_us());
	run_request_from_env(&req, &env);
	if (env.probe_later)
		req.probe_env = &env;
	req.mode = RUN_MODE_SCRIPT;
	req.code = code;
	req.code_len = code_len;
	req.prog_name = prog_name;
	req.args = o.args;
	if (stdin_file >= 0)
		req.stdin_fd = stdin_file;
	else if (!o.from_stdin)
		req.stdin_fd = 0;
	req.on_output = cli_on_output;
	req.on_done = cli_on_done;
	req.ctx = &c;
	c.stream = !o.json;

	l = loop_new();
	if (!l)
		pc_syserr(&err, "loop", "epoll_create1");
	if (l && start_tools(l, &conf, &req, &bridge, &err) == 0)
		/* a cold run without upstream servers is over for the caller
		 * once python's status and output are known (teardown_later) */
		req.finish_on_report = !env.warm && !bridge;
	if (!l || err.msg[0] || run_start(l, &req, &r, &err) < 0) {
		bridge_free(bridge);
		loop_free(l);
		run_env_free(&env);
		conf_free(&conf);
		return cli_setup_error("run", &err);
	}
	if (o.warm && !env.warm)
		result_add_warning(run_result_mut(r), "warm starts unavailable, started cold: %s",
				   warm_err.msg);
	log_debug("%6llu us: jail spawned", (unsigned long long)log_elapsed_us());
	while (!c.done)
		if (loop_run_once(l, -1) < 0) {
			pc_syserr(&err, "loop", "epoll_wait");
			cli_setup_error("run", &err);
			break;
		}
	log_debug("%6llu us: run finished", (unsigned long long)log_elapsed_us());

	if (o.json) {
		json_t *j = result_to_json(run_result(r));
		char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		if (s) {
			puts(s);
			free(s);
		}
		json_decref(j);
	} else {
		report_end(run_result(r), &env.policy);
	}
	status = result_exit_status(run_result(r));
	td = req.finish_on_report && run_done(r) ? teardown_later() : TEARDOWN_HERE;
	if (td == TEARDOWN_PARENT)
		_exit(status);
	run_settle(r, 1000);
	run_free(r);
#ifndef __SANITIZE_ADDRESS__
	if (td == TEARDOWN_CHILD) {
		/* the cgroups' removals the loop was to finish, then nothing
		 * but memory is left: the kernel frees it at once, where free()
		 * through pages copied at the fork (a fault each) and the
		 * libraries' exit handlers took 0.4 ms of CPU a run.  A
		 * sanitizer build goes on, for LeakSanitizer's look at exit. */
		cgroup_env_free(env.cgroups);
		_exit(status);
	}
#endif
	bridge_free(bridge);
	loop_free(l);
	run_env_free(&env);
	conf_free(&conf);
	return status;
}
