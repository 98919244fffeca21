/* pycell: `pycell serve`, the MCP server over Streamable HTTP (mcp/transport_http.h)
 * for many clients: one MCP server per policy its clients' tokens name. */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>

#include "base/log.h"
#include "bridge/bridge.h"
#include "cli/commands.h"
#include "cli/front.h"
#include "cli/options.h"
#include "cli/serve_ops.h"
#include "cli/service.h"
#include "config/conf.h"
#include "config/json_check.h"
#include "mcp/transport_http.h"
#include "config/tokens.h"
#include "jail/jail.h"
#include "mcp/mcp.h"
#include "run/run.h"
#include "run/zygote.h"

static const char serve_usage[] =
	"Usage: pycell serve [OPTION]...\n"
	"Serve MCP (the Model Context Protocol) over Streamable HTTP on one endpoint, /mcp:\n"
	"protocol 2026-07-28 statelessly, the 2025 revisions in Mcp-Session-Id sessions.\n"
	"Tools: run_python (run code in a fresh jail) and sandbox_info.\n"
	"\n"
	"      --listen ADDR         127.0.0.1:PORT, [::1]:PORT, 0.0.0.0:PORT (port 0: any) or\n"
	"                            unix:PATH (default: the config's http.listen, 127.0.0.1:8080)\n"
	"      --tokens FILE         bearer tokens (JSON, mode 0600; default: the config's\n"
	"                            http.tokens; see pycell.conf(5)): every\n"
	"                            request needs one; each names a policy and a run quota.\n"
	"                            Without it only loopback or a unix socket is served\n"
	"      --allow-host NAMES    more Host/Origin names to accept, comma-separated (behind a\n"
	"                            reverse proxy); localhost, 127.0.0.1, [::1] always are\n"
	"      --policy FILE|NAME    policy of runs whose token names none (default: the config\n"
	"                            file's, else \"default\")\n"
	"      --config FILE         configuration file (default " CONF_DEFAULT_PATH ")\n"
	"      --max-runs N          runs at once per policy; more wait (default: the config's, 4)\n"
	"      --max-message SIZE    largest request body, 4K to 1G (default: the config's, 4M);\n"
	"                            a larger one gets 413\n"
	"      --max-connections N   connections at once (default 256)\n"
	"      --request-timeout SECONDS\n"
	"                            time to send a whole request, else the connection is cut\n"
	"                            (default 10s)\n"
	"      --max-sessions N      2025-revision sessions at once (default 256)\n"
	"      --session-idle SECONDS\n"
	"                            a session unused this long ends (default 1h)\n"
	"      --drain-timeout SECONDS\n"
	"                            on SIGTERM, how long runs in flight may finish before they\n"
	"                            are killed (default 30s; 0: at once)\n"
	"      --replica NAME        this replica's name in a fleet behind a load balancer: task\n"
	"                            and session ids begin with NAME. (letters, digits, _ and -;\n"
	"                            up to 32)\n"
	"      --warm / --cold       warm starts (default: the config's warm.enabled, off)\n"
	"  -v, --verbose            log more to stderr (twice for debug)\n"
	"  -h, --help               show this help\n"
	"\n"
	"Also GET /healthz (ready? no token needed) and GET /metrics (Prometheus text; a token\n"
	"as for /mcp).  Logs and the audit log go to stderr (or the config's audit_log; to the\n"
	"journal under systemd).  A socket passed by systemd (pycell.socket) is served instead\n"
	"of http.listen.  SIGHUP rereads the token file.  SIGTERM stops taking requests (503), lets the\n"
	"runs in flight finish (up to --drain-timeout) and stops; SIGINT or a second SIGTERM\n"
	"kill every run and stop at once (exit status 0).  See pycell(1).\n";

struct serve_opts {
	bool help;
	const char *listen, *tokens, *allow_host, *policy, *config, *replica;
	uint32_t max_runs, max_connections, max_sessions;
	uint64_t max_message, request_timeout, session_idle, drain_timeout;
	bool has_drain_timeout;
	bool has_max_message;
	int verbose;
	int warm;
};

#define SV(field) offsetof(struct serve_opts, field)

static const struct opt serve_options[] = {
	{ OPT_ROW("help", 'h', OPT_HELP, SV(help)) },
	{ OPT_ROW("verbose", 'v', OPT_COUNT, SV(verbose)) },
	{ OPT_ROW("listen", 0, OPT_STRING, SV(listen)) },
	{ OPT_ROW("tokens", 0, OPT_STRING, SV(tokens)) },
	{ OPT_ROW("allow-host", 0, OPT_STRING, SV(allow_host)) },
	{ OPT_ROW("policy", 0, OPT_STRING, SV(policy)) },
	{ OPT_ROW("config", 0, OPT_STRING, SV(config)) },
	{ OPT_ROW("max-runs", 0, OPT_UINT, SV(max_runs)), .min = 1, .max = 1024 },
	{ OPT_ROW("max-message", 0, OPT_SIZE, SV(max_message)),
	  .given = OPT_GIVEN(struct serve_opts, has_max_message), .min = 4096, .max = 1u << 30,
	  .range = "expected a size from 4K to 1G" },
	{ OPT_ROW("max-connections", 0, OPT_UINT, SV(max_connections)), .min = 1, .max = 65536 },
	{ OPT_ROW("request-timeout", 0, OPT_DURATION, SV(request_timeout)), .min = 1000, .max = 3600000,
	  .range = "expected a duration from 1s to 1h" },
	{ OPT_ROW("max-sessions", 0, OPT_UINT, SV(max_sessions)), .min = 1, .max = 65536 },
	{ OPT_ROW("session-idle", 0, OPT_DURATION, SV(session_idle)), .min = 1000, .max = 7 * 24 * 3600000ULL,
	  .range = "expected a duration from 1s to 7 days" },
	{ OPT_ROW("drain-timeout", 0, OPT_DURATION, SV(drain_timeout)),
	  .given = OPT_GIVEN(struct serve_opts, has_drain_timeout), .min = 0, .max = 3600000,
	  .range = "expected a duration from 0 to 1h" },
	{ OPT_ROW("replica", 0, OPT_STRING, SV(replica)) },
	{ OPT_ROW("warm", 0, OPT_SET, SV(warm)), .set = 1 },
	{ OPT_ROW("cold", 0, OPT_SET, SV(warm)), .set = -1 },
};

const struct opt_cmd cli_serve_cmd = { "serve", serve_usage, serve_options, ARRAY_SIZE(serve_options), false };

/* One MCP server per policy, made when the server starts. */
struct policy_server {
	char *name;                 /* as the token or the configuration names it */
	struct run_env env;
	struct mcp_server *srv;
};

struct serve {
	struct policy_server *ps;
	size_t n_ps;
	struct ops_policy *ops;     /* the same servers, for /metrics and /healthz */
	const struct bridge *bridge;
	struct http_server *http;
	const char *default_policy;
	const char *tokens_file;    /* reread on SIGHUP */
	struct tokens toks;         /* in force */
	struct loop *loop;
	uint64_t drain_ms;          /* --drain-timeout */
	uint64_t drain_until;       /* draining (SIGTERM) until then; 0: not */
	int drain_fd;               /* timer: is the drain done? */
	struct loop_watch w_drain;
	int dog_fd;                 /* timer: the systemd watchdog */
	struct loop_watch w_dog;
	int stop_signal;
	bool done;
};

/* The policy loaded at start under this name, or NULL. */
static const struct policy_server *loaded(const struct serve *s, const char *name)
{
	for (size_t i = 0; i < s->n_ps; i++)
		if (strcmp(s->ps[i].name, name) == 0)
			return &s->ps[i];
	return NULL;
}

static struct mcp_server *server_for(void *ctx, const struct token *t)
{
	struct serve *s = ctx;
	const struct policy_server *ps = loaded(s, t && t->policy ? t->policy : s->default_policy);
	return ps ? ps->srv : s->ps[0].srv;   /* NULL not reached: every token's policy was loaded */
}

static void metrics(void *ctx, struct prom *p)
{
	struct serve *s = ctx;
	ops_metrics(p, s->ops, s->n_ps, s->bridge, s->http);
}

static bool healthy(void *ctx, char *why, size_t n)
{
	struct serve *s = ctx;
	if (s->drain_until) {
		snprintf(why, n, "stopping");
		return false;
	}
	return ops_healthy(s->ops, s->n_ps, s->bridge, why, n);
}

/* ------------------------------------------------------------ signals */

/* SIGHUP: the token file again.  A file that does not load, or that
 * names a policy this server did not load at start, is refused with the
 * reason; the tokens in force stay. */
static void reload(struct serve *s)
{
	struct tokens t = { 0 };
	struct pc_err err = { 0 };

	service_notify_reloading();
	if (!s->tokens_file) {
		log_warn("serve: reload: no token file to reread (configuration and policies are read at start; "
			 "restart to change them)");
		service_notify("READY=1\nSTATUS=serving; reload: nothing to reread");
		return;
	}
	if (tokens_load(s->tokens_file, &t, &err) < 0)
		goto refused;
	for (size_t i = 0; i < t.n; i++) {
		if (t.v[i].policy && !loaded(s, t.v[i].policy)) {
			pc_fail(&err, EINVAL, "tokens", "%s: tokens[%zu] (\"%s\"): policy \"%s\" was not loaded at start "
				"(restart to add a policy)", s->tokens_file, i, t.v[i].name, t.v[i].policy);
			tokens_free(&t);
			goto refused;
		}
	}
	tokens_free(&s->toks);
	s->toks = t;
	http_server_set_tokens(s->http, &s->toks);
	/* always said, whatever the log level, as "listening on" is */
	fprintf(stderr, "pycell: serve: reload: %zu token%s from %s in force (configuration and policies are "
		"read at start; restart to change them)\n", t.n, t.n == 1 ? "" : "s", s->tokens_file);
	service_notify("READY=1\nSTATUS=serving; reloaded %zu tokens", t.n);
	return;
refused:
	log_error("serve: reload refused, the tokens in force stay: %s", err.msg);
	service_notify("READY=1\nSTATUS=serving; the last reload was refused: %s", err.msg);
}

static bool drained(const struct serve *s)
{
	struct http_stats hs;
	http_server_stats(s->http, &hs);
	if (hs.pending)
		return false;
	for (size_t i = 0; i < s->n_ps; i++) {
		struct mcp_stats st;
		mcp_server_stats(s->ps[i].srv, &st);
		if (st.running || st.queued)
			return false;
	}
	return true;
}

static void on_drain_tick(struct loop_watch *w, uint32_t events, void *data)
{
	struct serve *s = data;
	uint64_t n;
	(void)!read(s->drain_fd, &n, sizeof(n));
	(void)w;
	(void)events;
	if (drained(s)) {
		log_info("serve: drained: every run in flight has ended");
		s->done = true;
	} else if (now_ms() >= s->drain_until) {
		log_warn("serve: the drain timeout passed: the runs still in flight are killed");
		s->done = true;
	}
}

/* SIGTERM: take no more requests; stop once the runs in flight have ended
 * or the drain timeout passed, whichever comes first. */
static void drain(struct serve *s)
{
	struct itimerspec tick = { { 0, 50 * 1000000L }, { 0, 1 } };
	service_notify("STOPPING=1\nSTATUS=draining");
	http_server_quiesce(s->http);
	s->drain_until = now_ms() + s->drain_ms;
	s->drain_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (s->drain_ms == 0 || s->drain_fd < 0 ||
	    loop_add(s->loop, &s->w_drain, s->drain_fd, EPOLLIN, on_drain_tick, s) < 0) {
		s->done = true;
		return;
	}
	log_info("serve: SIGTERM: taking no more requests; runs in flight may finish for %llu s",
		 (unsigned long long)s->drain_ms / 1000);
	timerfd_settime(s->drain_fd, 0, &tick, NULL);
}

static void on_signal(void *ctx, int signo)
{
	struct serve *s = ctx;
	s->stop_signal = signo;
	if (signo == SIGHUP)
		reload(s);
	else if (signo == SIGTERM && !s->drain_until)
		drain(s);
	else
		s->done = true;   /* SIGINT, or SIGTERM again: now */
}

static void on_watchdog(struct loop_watch *w, uint32_t events, void *data)
{
	struct serve *s = data;
	uint64_t n;
	(void)!read(s->dog_fd, &n, sizeof(n));
	(void)w;
	(void)events;
	service_notify("WATCHDOG=1");
}

/* WATCHDOG=1 at half the interval systemd asks for, from the loop: a
 * wedged loop misses it and systemd restarts the service. */
static int watchdog_start(struct serve *s, struct pc_err *err)
{
	uint64_t usec = service_watchdog_usec();
	struct itimerspec t;
	if (!usec)
		return 0;
	usec /= 2;
	t.it_interval.tv_sec = (time_t)(usec / 1000000);
	t.it_interval.tv_nsec = (long)(usec % 1000000) * 1000;
	t.it_value = t.it_interval;
	s->dog_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (s->dog_fd < 0 || loop_add(s->loop, &s->w_dog, s->dog_fd, EPOLLIN, on_watchdog, s) < 0)
		return pc_syserr(err, "watchdog", "timerfd");
	timerfd_settime(s->dog_fd, 0, &t, NULL);
	return 0;
}

static void on_tools_settled(void *ctx)
{
	struct serve *s = ctx;
	for (size_t i = 0; i < s->n_ps; i++)
		mcp_server_tools_settled(s->ps[i].srv);
}

static void on_answered(void *ctx)
{
	http_server_flush(ctx);
}

/* The names of --allow-host, split at commas (an array of strings). */
static char **split_hosts(const char *list, size_t *n)
{
	char **v = NULL;
	*n = 0;
	while (list && *list) {
		size_t len = strcspn(list, ",");
		if (len) {
			v = xrealloc(v, (*n + 1) * sizeof(*v));
			v[(*n)++] = xasprintf("%.*s", (int)len, list);
		}
		list += len + (list[len] == ',');
	}
	return v;
}

/* Each policy once: the default, then those the tokens name. */
static int load_policies(struct serve *s, const struct tokens *toks, bool warm, struct pc_err *err)
{
	size_t n = 1 + (toks ? toks->n : 0);
	s->ps = xcalloc(n, sizeof(*s->ps));
	for (size_t i = 0; i < n; i++) {
		const char *name = i == 0 ? s->default_policy : toks->v[i - 1].policy;
		bool seen = false;
		if (!name)
			continue;
		for (size_t j = 0; j < s->n_ps; j++)
			seen |= strcmp(s->ps[j].name, name) == 0;
		if (seen)
			continue;
		if (run_env_init(&s->ps[s->n_ps].env, name, err) < 0) {
			if (i > 0)
				pc_err_wrap(err, "tokens[%zu] (\"%s\"): policy", i - 1, toks->v[i - 1].name);
			return -1;
		}
		s->ps[s->n_ps].name = xstrdup(name);
		if (warm && run_env_warm(&s->ps[s->n_ps].env, err) < 0)
			log_warn("serve: policy %s: warm starts unavailable, runs start cold: %s", name, err->msg);
		s->n_ps++;
	}
	return 0;
}

int cmd_serve(int argc, char **argv)
{
	struct serve_opts o;
	struct pycell_conf conf;
	struct pc_err err = { 0 };
	struct mcp_server_config cfg = { 0 };
	struct http_config hcfg = { 0 };
	struct http_server *http = NULL;
	struct bridge *bridge = NULL;
	struct serve s = { 0 };
	struct loop *l = NULL;
	struct front_signals sigs;
	char **hosts = NULL;
	const char *tokens_file;
	size_t n_hosts = 0;
	struct rlimit nofile;
	int rc, sock;

	memset(&o, 0, sizeof(o));
	rc = opts_parse(&cli_serve_cmd, argc, argv, &o, &err);
	if (rc < 0)
		return cli_usage_error("serve", &err);
	if (o.help) {
		fputs(serve_usage, stdout);
		return 0;
	}
	if (o.verbose)
		log_level = o.verbose > 1 ? LOG_DEBUG : LOG_INFO;
	if (o.replica && (!*o.replica || strlen(o.replica) > REPLICA_NAME_MAX ||
			  o.replica[strspn(o.replica, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")])) {
		pc_fail(&err, EINVAL, "options", "--replica '%s': expected 1 to %d letters, digits, _ or -", o.replica,
			REPLICA_NAME_MAX);
		return cli_usage_error("serve", &err);
	}
	if (conf_load(o.config, &conf, &err) < 0)
		return cli_input_error("serve", &err);
	if (conf.host_uid_base)
		jail_host_id_base = conf.host_uid_base;
	s.drain_fd = s.dog_fd = -1;
	s.drain_ms = o.has_drain_timeout ? o.drain_timeout : 30000;
	tokens_file = s.tokens_file = o.tokens ? o.tokens : conf.http_tokens;
	if (tokens_file && tokens_load(tokens_file, &s.toks, &err) < 0) {
		conf_free(&conf);
		return cli_input_error("serve", &err);
	}
	s.default_policy = o.policy ? o.policy : conf.policy ? conf.policy : "default";
	rc = 1;
	if (load_policies(&s, tokens_file ? &s.toks : NULL, o.warm > 0 || (o.warm == 0 && conf.warm_enabled), &err) < 0) {
		rc = cli_input_error("serve", &err);
		goto out_env;
	}
	/* connections and jails need descriptors: the soft limit goes up to
	 * the hard one */
	if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
		nofile.rlim_cur = nofile.rlim_max;
		setrlimit(RLIMIT_NOFILE, &nofile);
	}

	front_signals_block(&sigs);
	l = s.loop = loop_new();
	if (!l) {
		pc_syserr(&err, "loop", "epoll_create1");
		cli_setup_error("serve", &err);
		goto out;
	}
	if (front_signals_watch(&sigs, l, &s.done, &err) < 0) {
		cli_setup_error("serve", &err);
		goto out;
	}
	front_signals_route(&sigs, on_signal, &s);
	/* The bridge always: it writes the audit record of every run, with
	 * the client that asked; and it reaches the upstreams, if any. */
	bridge = bridge_new(l, &conf, &err);
	if (!bridge) {
		cli_setup_error("serve", &err);
		goto out;
	}
	service_use_journal(bridge);
	bridge_start(bridge, NULL);
	cfg.max_runs = o.max_runs ? o.max_runs : conf.max_concurrent_runs;
	cfg.ready = conf.warm_ready;
	cfg.replica = o.replica;
	front_bridge_hooks(&cfg, bridge);
	cfg.cache_private = s.n_ps > 1;
	s.ops = xcalloc(s.n_ps, sizeof(*s.ops));
	s.bridge = bridge;
	for (size_t i = 0; i < s.n_ps; i++) {
		s.ps[i].srv = mcp_server_new(l, &s.ps[i].env, &cfg, &err);
		if (!s.ps[i].srv) {
			cli_setup_error("serve", &err);
			goto out;
		}
		s.ops[i] = (struct ops_policy){ s.ps[i].name, s.ps[i].srv };
	}
	bridge_on_settled(bridge, on_tools_settled, &s);

	if (o.allow_host) {
		hosts = split_hosts(o.allow_host, &n_hosts);
		hcfg.allow_hosts = hosts;
		hcfg.n_allow_hosts = n_hosts;
	} else {
		hcfg.allow_hosts = conf.http_allow_hosts;
		hcfg.n_allow_hosts = conf.n_http_allow_hosts;
	}
	sock = service_listen_fd(&err);
	if (sock < 0 || (sock > 0 && o.listen)) {
		if (sock > 0) {
			close(sock);
			pc_fail(&err, EINVAL, "listen", "--listen %s and a socket from systemd: serve one (drop "
				"--listen, or the socket unit)", o.listen);
		}
		cli_setup_error("serve", &err);
		goto out;
	}
	hcfg.listen_fd = sock;
	hcfg.listen = o.listen ? o.listen : conf.http_listen;
	hcfg.tokens = tokens_file ? &s.toks : NULL;
	hcfg.max_body = o.has_max_message ? o.max_message : conf.max_message;
	hcfg.max_connections = o.max_connections ? o.max_connections : conf.http_max_connections;
	hcfg.request_timeout_s = (unsigned)((o.request_timeout ? o.request_timeout : conf.http_request_timeout_ms) / 1000);
	hcfg.max_sessions = o.max_sessions ? o.max_sessions : conf.http_max_sessions;
	hcfg.session_idle_ms = o.session_idle ? o.session_idle : conf.http_session_idle_ms;
	hcfg.max_pending = 4096;
	hcfg.replica = o.replica;
	hcfg.server_for = server_for;
	hcfg.metrics = metrics;
	hcfg.healthy = healthy;
	hcfg.ctx = &s;
	http = http_server_new(l, &hcfg, &err);
	if (!http) {
		cli_setup_error("serve", &err);
		goto out;
	}
	s.http = http;
	for (size_t i = 0; i < s.n_ps; i++)
		mcp_server_on_answered(s.ps[i].srv, on_answered, http);
	if (watchdog_start(&s, &err) < 0) {
		cli_setup_error("serve", &err);
		goto out;
	}
	/* always said, whatever the log level: clients and scripts read it */
	fprintf(stderr, "pycell: serve: listening on %s (policy %s, %s%s)\n", http_server_url(http),
		s.default_policy, tokens_file ? "tokens from " : "no tokens", tokens_file ? tokens_file : "");
	service_notify("READY=1\nSTATUS=serving on %s", http_server_url(http));

	while (!s.done) {
		if (loop_run_once(l, -1) < 0 && errno != EINTR) {
			pc_syserr(&err, "loop", "epoll_wait");
			cli_setup_error("serve", &err);
			goto out;
		}
	}
	log_info("serve: %s: stopping", strsignal(s.stop_signal));
	service_notify("STOPPING=1");
	rc = 0;
out:
	if (s.w_drain.registered)
		loop_del(l, &s.w_drain);
	if (s.w_dog.registered)
		loop_del(l, &s.w_dog);
	if (s.drain_fd >= 0)
		close(s.drain_fd);
	if (s.dog_fd >= 0)
		close(s.dog_fd);
	http_server_free(http);
	for (size_t i = 0; i < s.n_ps; i++)
		mcp_server_free(s.ps[i].srv);
	bridge_free(bridge);
	front_signals_end(&sigs, l);
	loop_free(l);
out_env:
	for (size_t i = 0; i < s.n_ps; i++) {
		run_env_free(&s.ps[i].env);
		free(s.ps[i].name);
	}
	free(s.ps);
	free(s.ops);
	jc_strv_free(hosts, n_hosts);
	tokens_free(&s.toks);
	conf_free(&conf);
	return rc;
}
