/* pycell: `pycell serve`, the MCP server over Streamable HTTP (mcp/transport_http.h)
 * for many clients: one MCP server per policy its clients' tokens name. */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>

#include "base/log.h"
#include "bridge/bridge.h"
#include "cli/commands.h"
#include "cli/mcp_front.h"
#include "cli/options.h"
#include "cli/setup.h"
#include "cli/serve_metrics.h"
#include "cli/systemd.h"
#include "config/conf.h"
#include "run/egress.h"
#include "run/packages.h"
#include "config/json_check.h"
#include "mcp/transport_http.h"
#include "config/tokens.h"
#include "jail/jail.h"
#include "mcp/mcp.h"
#include "run/run.h"
#include "run/state.h"
#include "run/zygote.h"

static const char serve_usage[] =
	"Usage: pycell serve [OPTION]...\n"
	"Serve MCP (the Model Context Protocol) over Streamable HTTP on one endpoint, /mcp:\n"
	"protocol 2026-07-28 statelessly, the 2025 revisions in Mcp-Session-Id sessions.\n"
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
	"                            time to send a whole request, else the connection is cut;\n"
	"                            a kept-alive one idle that long is closed (default 10s)\n"
	"      --max-sessions N      2025-revision sessions at once (default 256)\n"
	"      --session-idle SECONDS\n"
	"                            a session unused this long ends (default 1h)\n"
	"      --drain-timeout SECONDS\n"
	"                            on SIGTERM, how long runs in flight may finish before they\n"
	"                            are killed (default 30s; 0: at once)\n"
	"      --replica NAME        this replica's name in a fleet behind a load balancer: task\n"
	"                            and session ids begin with NAME. (letters, digits, _ and -;\n"
	"                            up to 32)\n"
	"      --warm / --cold       warm starts (default: the config's warm.enabled, on)\n"
	"  -v, --verbose            log more to stderr (twice for debug)\n"
	"  -h, --help               show this help\n"
	"\n"
	"Also GET /healthz (ready? no token needed) and GET /metrics (Prometheus text; a token\n"
	"as for /mcp).  Logs and the audit log go to stderr (or the config's audit_log; to the\n"
	"journal under systemd).  A socket passed by systemd (pycell.socket) is served instead\n"
	"of http.listen.  SIGHUP rereads the configuration, token and policy files (runs in\n"
	"flight keep their policy; a change that takes a restart is refused).  SIGTERM stops\n"
	"taking requests (503), lets the runs in flight finish (up to --drain-timeout), pauses\n"
	"the sessions to the config's state_dir if it has one (resumed after a restart), and\n"
	"stops; SIGINT or a second SIGTERM kill every run and stop at once (exit status 0).\n"
	"See pycell(1).\n";

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

/* One MCP server per policy name, made when the server starts or when a
 * reload first names the policy. */
struct policy_server {
	char *name;                 /* as the token or the configuration names it */
	struct run_env *env;        /* in force; a reload replaces it */
	struct mcp_server *srv;
};

struct serve {
	const struct serve_opts *o;
	struct pycell_conf conf;    /* in force */
	bool activated;             /* serving a socket from systemd */
	struct policy_server *ps;
	size_t n_ps;
	/* envs a reload replaced: freed once no run in flight uses them */
	struct run_env **retired;
	size_t n_retired;
	struct ops_policy *ops;     /* the same servers, for /metrics and /healthz */
	struct mcp_server_config cfg;   /* of every server (hooks, replica); a reload sets the limits */
	const struct bridge *bridge;
	struct http_server *http;
	char **hosts;               /* --allow-host, split */
	size_t n_hosts;
	const char *default_policy;
	const char *tokens_file;    /* NULL: none */
	struct tokens toks;         /* in force */
	struct loop *loop;
	uint64_t drain_ms;          /* --drain-timeout */
	uint64_t drain_from;        /* draining (SIGTERM) since then */
	uint64_t drain_until;       /* draining (SIGTERM) until then; 0: not */
	int drain_fd;               /* timer: is the drain done? */
	struct loop_watch w_drain;
	int dog_fd;                 /* timer: the systemd watchdog */
	struct loop_watch w_dog;
	int retire_fd;              /* eventfd: free the retired envs no run uses */
	struct loop_watch w_retire;
	int stop_signal;
	bool done;
	struct state_dir *state;    /* pycell.conf state_dir; NULL: none */
};

/* The policy loaded under this name, or NULL. */
static struct policy_server *loaded(const struct serve *s, const char *name)
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

/* GET /metrics: the Prometheus text. */
static unsigned metrics(void *ctx, char **body)
{
	struct serve *s = ctx;
	struct prom p = { 0 };
	ops_metrics(&p, s->ops, s->n_ps, s->bridge, s->http);
	*body = p.buf;
	return 200;
}

/* GET /healthz: ready to serve, or why not. */
static unsigned healthz(void *ctx, char **body)
{
	struct serve *s = ctx;
	char why[400] = "";
	bool ok = !s->drain_until && ops_healthy(s->ops, s->n_ps, s->bridge, why, sizeof(why));
	if (s->drain_until)
		snprintf(why, sizeof(why), "stopping");
	*body = ok ? xstrdup("ok\n") : xasprintf("not ready: %s\n", why);
	return ok ? 200 : 503;
}

/* The operator endpoints beside /mcp; /metrics is authenticated as /mcp
 * is, /healthz is open (it tells only whether this replica serves). */
static const struct http_route routes[] = {
	{ "/healthz", false, "text/plain; charset=utf-8", healthz },
	{ "/metrics", true, "text/plain; version=0.0.4; charset=utf-8", metrics },
};

/* ------------------------------------------------------------ what the configuration says */

/* Each value: the command line's, else the configuration's c. */
static const char *tokens_of(const struct serve *s, const struct pycell_conf *c)
{
	return s->o->tokens ? s->o->tokens : c->http_tokens;
}

static const char *default_policy_of(const struct serve *s, const struct pycell_conf *c)
{
	return s->o->policy ? s->o->policy : c->policy ? c->policy : "default";
}

static bool warm_of(const struct serve *s, const struct pycell_conf *c)
{
	return s->o->warm > 0 || (s->o->warm == 0 && c->warm_enabled);
}

static void server_limits(const struct serve *s, const struct pycell_conf *c, size_t n_policies,
			  struct mcp_server_config *cfg)
{
	cfg->max_runs = s->o->max_runs ? s->o->max_runs : c->max_concurrent_runs;
	cfg->ready = c->warm_ready;
	cfg->cache_private = n_policies > 1;
}

static void http_limits(const struct serve *s, const struct pycell_conf *c, struct http_config *h)
{
	const struct serve_opts *o = s->o;
	h->allow_hosts = o->allow_host ? s->hosts : c->http_allow_hosts;
	h->n_allow_hosts = o->allow_host ? s->n_hosts : c->n_http_allow_hosts;
	h->max_body = o->has_max_message ? o->max_message : c->max_message;
	h->max_sessions = o->max_sessions ? o->max_sessions : c->http_max_sessions;
	h->session_idle_ms = o->session_idle ? o->session_idle : c->http_session_idle_ms;
}

/* The policy names to serve: the default, then those the tokens name,
 * each once.  The strings are borrowed. */
static const char **policy_names(const char *def, const struct tokens *t, size_t *n)
{
	const char **v = xcalloc(1 + (t ? t->n : 0), sizeof(*v));
	*n = 0;
	for (size_t i = 0; i < 1 + (t ? t->n : 0); i++) {
		const char *name = i == 0 ? def : t->v[i - 1].policy;
		bool seen = false;
		for (size_t j = 0; name && j < *n; j++)
			seen |= strcmp(v[j], name) == 0;
		if (name && !seen)
			v[(*n)++] = name;
	}
	return v;
}

/* A policy's run environment, read from its file now. */
static struct run_env *env_load(const char *name, bool warm, struct pc_err *err)
{
	struct run_env *env = xcalloc(1, sizeof(*env));
	if (run_env_init(env, name, err) < 0) {
		free(env);
		return NULL;
	}
	if (warm && run_env_warm(env, err) < 0)
		log_warn("serve: policy %s: warm starts unavailable, runs start cold: %s", name, err->msg);
	return env;
}

static void env_free(struct run_env *env)
{
	if (env)
		run_env_free(env);
	free(env);
}

static void envs_free(struct run_env **envs, size_t n)
{
	for (size_t i = 0; envs && i < n; i++)
		env_free(envs[i]);
	free(envs);
}

/* The policies of names, loaded: at the start of the server, or at a
 * reload.  On failure err names the token that named the policy, when a
 * token did (the first name is the default policy). */
static struct run_env **envs_load(const char **names, size_t n, const struct tokens *t, bool warm,
				  struct pc_err *err)
{
	struct run_env **envs = xcalloc(n ? n : 1, sizeof(*envs));
	for (size_t i = 0; i < n; i++) {
		if ((envs[i] = env_load(names[i], warm, err)))
			continue;
		for (size_t j = 0; i > 0 && t && j < t->n; j++)
			if (t->v[j].policy && strcmp(t->v[j].policy, names[i]) == 0) {
				pc_err_wrap(err, "tokens[%zu] (\"%s\"): policy", j, t->v[j].name);
				break;
			}
		envs_free(envs, i);
		return NULL;
	}
	return envs;
}

/* Free the envs replaced by a reload that no run in flight uses now. */
static void free_retired(struct serve *s)
{
	size_t k = 0;
	for (size_t i = 0; i < s->n_retired; i++) {
		bool used = false;
		for (size_t j = 0; j < s->n_ps && !used; j++)
			used = mcp_server_uses_env(s->ps[j].srv, s->retired[i]);
		if (used) {
			s->retired[k++] = s->retired[i];
		} else {
			run_env_unwatch(s->retired[i]);   /* freed from a callback of the loop */
			env_free(s->retired[i]);
		}
	}
	s->n_retired = k;
}

static void on_retire(struct loop_watch *w, uint32_t events, void *data)
{
	struct serve *s = data;
	uint64_t n;
	(void)!read(s->retire_fd, &n, sizeof(n));
	(void)w;
	(void)events;
	free_retired(s);
}

/* A server handed answers to its sessions: send them; and once the
 * server is done with its ended runs (it frees their jails after this
 * call, and they use their env to the last), free the envs no run uses
 * any more, from the loop. */
static void on_answered(void *ctx)
{
	struct serve *s = ctx;
	uint64_t one = 1;
	if (s->http)
		http_server_flush(s->http);
	if (s->n_retired)
		(void)!write(s->retire_fd, &one, sizeof(one));
}

static void server_add(struct serve *s, const char *name, struct run_env *env, struct mcp_server *srv)
{
	s->ps = xrealloc(s->ps, (s->n_ps + 1) * sizeof(*s->ps));
	s->ps[s->n_ps++] = (struct policy_server){ xstrdup(name), env, srv };
	s->ops = xrealloc(s->ops, s->n_ps * sizeof(*s->ops));
	s->ops[s->n_ps - 1] = (struct ops_policy){ s->ps[s->n_ps - 1].name, srv };
	mcp_server_on_answered(srv, on_answered, s);
}

/* ------------------------------------------------------------ signals */

/* What a reload cannot change while serving: listening, the audit log,
 * the upstream servers, the jails' host ids, and what libmicrohttpd was
 * started with.  Each takes a restart; the command line's value wins. */
static int fixed_at_start(const struct serve *s, const struct pycell_conf *c, struct pc_err *err)
{
	const struct pycell_conf *old = &s->conf;
	const char *key = NULL;
	if (!s->o->listen && !s->activated && !str_eq(old->http_listen, c->http_listen))
		key = "http.listen";
	else if (!s->o->max_connections && old->http_max_connections != c->http_max_connections)
		key = "http.max_connections";
	else if (!s->o->request_timeout && old->http_request_timeout_ms != c->http_request_timeout_ms)
		key = "http.request_timeout";
	else if (!str_eq(old->audit_log, c->audit_log))
		key = "audit_log";
	else if (!conf_same_upstreams(old, c))
		key = "upstreams";
	else if (old->host_uid_base != c->host_uid_base)
		key = "host_uid_base";
	else if (!str_eq(old->state_dir, c->state_dir))
		key = "state_dir";
	else if (!s->tokens_file != !tokens_of(s, c))
		key = "http.tokens";   /* tokens or none decides who may connect at all */
	if (!key)
		return 0;
	return pc_fail(err, EINVAL, "config", "%s: %s changed: it takes a restart%s", c->path ? c->path : "(built-in)",
		       key, strcmp(key, "http.tokens") == 0 ? " (between a token file and none)" : "");
}

/* SIGHUP: the configuration file, the token file and every policy file
 * again.  Runs from now on are the new policies'; runs in flight,
 * tasks and 2025 sessions go on (a session keeps its policy's server).  A
 * configuration, token file or policy that does not load, or a change
 * that takes a restart, is refused with the reason; all in force stays. */
static void reload(struct serve *s)
{
	struct pycell_conf c;
	struct tokens t = { 0 };
	struct pc_err err = { 0 };
	struct run_env **envs = NULL;
	struct mcp_server **added = NULL;
	struct mcp_server_config cfg = s->cfg;
	const char **names = NULL;
	struct http_config hl = { 0 };
	const char *tf;
	size_t n = 0, n_new = 0;
	unsigned long sessions = 0;

	service_notify_reloading();
	if (conf_load(s->o->config, &c, &err) < 0)
		goto refused_early;
	if (fixed_at_start(s, &c, &err) < 0)
		goto refused;
	tf = tokens_of(s, &c);
	if (tf && tokens_load(tf, &t, &err) < 0)
		goto refused;
	names = policy_names(default_policy_of(s, &c), tf ? &t : NULL, &n);
	envs = envs_load(names, n, tf ? &t : NULL, warm_of(s, &c), &err);
	if (!envs)
		goto refused;
	/* a server for each policy named for the first time */
	for (size_t i = 0; i < n; i++)
		n_new += !loaded(s, names[i]);
	server_limits(s, &c, s->n_ps + n_new, &cfg);
	added = xcalloc(n, sizeof(*added));
	for (size_t i = 0; i < n; i++)
		if (!loaded(s, names[i]) && !(added[i] = mcp_server_new(s->loop, envs[i], &cfg, &err)))
			goto refused;

	/* in force from here */
	s->cfg = cfg;
	for (size_t i = 0; i < n; i++) {
		struct policy_server *ps = loaded(s, names[i]);
		if (added[i]) {
			server_add(s, names[i], envs[i], added[i]);
			continue;
		}
		if (mcp_server_reconfigure(ps->srv, envs[i], &cfg, &err) < 0) {
			log_error("serve: reload: policy %s keeps its earlier version: %s", names[i], err.msg);
			env_free(envs[i]);
			continue;
		}
		s->retired = xrealloc(s->retired, (s->n_retired + 1) * sizeof(*s->retired));
		s->retired[s->n_retired++] = ps->env;
		ps->env = envs[i];
	}
	/* a policy no longer named serves on the sessions and tasks begun on
	 * it, cold: its ready jails are for new runs, which it gets no more */
	for (size_t i = 0; i < s->n_ps; i++) {
		bool named = false;
		for (size_t j = 0; j < n && !named; j++)
			named = strcmp(names[j], s->ps[i].name) == 0;
		if (!named) {
			struct mcp_server_config idle = cfg;
			idle.ready = 0;
			if (mcp_server_reconfigure(s->ps[i].srv, s->ps[i].env, &idle, &err) < 0)
				log_error("serve: reload: policy %s: %s", s->ps[i].name, err.msg);
		}
	}
	/* the policies' sessions.max may have grown: their descriptors, as at
	 * start (a policy no longer named keeps the sessions it has) */
	for (size_t i = 0; i < s->n_ps; i++)
		sessions += s->ps[i].env->policy.sessions.max;
	cli_raise_nofile("serve: reload", sessions);
	http_limits(s, &c, &hl);
	http_server_set_limits(s->http, &hl);
	tokens_free(&s->toks);
	s->toks = t;
	s->tokens_file = tf;
	http_server_set_tokens(s->http, tf ? &s->toks : NULL);
	conf_free(&s->conf);
	s->conf = c;
	cli_conf_apply(&s->conf);
	s->default_policy = default_policy_of(s, &s->conf);
	free_retired(s);
	free(added);
	free(envs);
	free(names);
	/* always said, whatever the log level, as "listening on" is */
	if (s->tokens_file)
		fprintf(stderr, "pycell: serve: reload: %zu token%s from %s in force", s->toks.n,
			s->toks.n == 1 ? "" : "s", s->tokens_file);
	else
		fprintf(stderr, "pycell: serve: reload: no tokens");
	fprintf(stderr, "; policy %s by default; %zu polic%s reread; configuration %s\n", s->default_policy, n,
		n == 1 ? "y" : "ies", s->conf.path ? s->conf.path : "built-in");
	service_notify("READY=1\nSTATUS=serving; reloaded %zu tokens, %zu policies", s->toks.n, n);
	return;
refused:
	for (size_t i = 0; added && i < n; i++)
		mcp_server_free(added[i]);
	free(added);
	envs_free(envs, n);
	tokens_free(&t);
	free(names);
	conf_free(&c);
refused_early:
	log_error("serve: reload refused, the configuration, policies and tokens in force stay: %s", err.msg);
	service_notify("READY=1\nSTATUS=serving; the last reload was refused: %s", err.msg);
}

/* A drain ends this long after the last new connection at the earliest: a
 * balancer goes on sending here until its health check sees "stopping",
 * and each of those requests gets 503 (it retries them elsewhere); one
 * that came just as the server exits would be reset unanswered. */
#define DRAIN_QUIET_MS 1000

static bool drained(const struct serve *s)
{
	struct http_stats hs;
	uint64_t quiet_from;
	http_server_stats(s->http, &hs);
	quiet_from = hs.last_connection_ms > s->drain_from ? hs.last_connection_ms : s->drain_from;
	if (hs.pending || now_ms() - quiet_from < DRAIN_QUIET_MS)
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
		log_info("serve: drained: every run in flight has ended, and no new connection came for %d ms",
			 DRAIN_QUIET_MS);
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
	for (size_t i = 0; i < s->n_ps; i++)
		mcp_server_quiesce(s->ps[i].srv);   /* listen streams end now: they wait for no run */
	s->drain_from = now_ms();
	s->drain_until = s->drain_from + s->drain_ms;
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

int cmd_serve(int argc, char **argv)
{
	struct serve_opts o;
	struct pc_err err = { 0 };
	struct http_config hcfg = { 0 };
	struct bridge *bridge = NULL;
	struct serve s = { 0 };
	struct run_env **envs = NULL;
	const char **names = NULL;
	struct front_signals sigs;
	bool blocked = false;
	unsigned long sessions = 0;
	size_t n = 0;
	int rc, sock;

	memset(&o, 0, sizeof(o));
	rc = opts_parse(&cli_serve_cmd, argc, argv, &o, &err);
	if (rc < 0)
		return cli_usage_error("serve", &err);
	if (o.help) {
		cleanup_free char *help = front_help(serve_usage);
		fputs(help, stdout);
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
	s.o = &o;
	if (cli_conf_setup(o.config, &s.conf, &err) < 0)
		return cli_input_error("serve", &err);
	s.drain_fd = s.dog_fd = s.retire_fd = -1;
	s.drain_ms = o.has_drain_timeout ? o.drain_timeout : 30000;
	s.tokens_file = tokens_of(&s, &s.conf);
	if (s.tokens_file && tokens_load(s.tokens_file, &s.toks, &err) < 0) {
		conf_free(&s.conf);
		return cli_input_error("serve", &err);
	}
	s.default_policy = default_policy_of(&s, &s.conf);
	rc = 1;
	if (s.conf.state_dir) {
		/* sessions paused here are resumed by any serve of this
		 * directory: after a restart, or by another replica */
		if (state_dir_open(s.conf.state_dir, &s.state, &err) < 0) {
			rc = cli_input_error("serve", &err);
			goto out;
		}
		s.cfg.state = s.state;
		s.cfg.state_scope = "serve";
	}
	names = policy_names(s.default_policy, s.tokens_file ? &s.toks : NULL, &n);
	envs = envs_load(names, n, s.tokens_file ? &s.toks : NULL, warm_of(&s, &s.conf), &err);
	if (!envs) {
		rc = cli_input_error("serve", &err);
		goto out;
	}
	/* connections, jails and sessions need descriptors */
	for (size_t i = 0; i < n; i++)
		sessions += envs[i]->policy.sessions.max;
	cli_raise_nofile("serve", sessions);

	front_signals_block(&sigs);
	blocked = true;
	s.loop = loop_new();
	if (!s.loop) {
		pc_syserr(&err, "loop", "epoll_create1");
		cli_setup_error("serve", &err);
		goto out;
	}
	if (front_signals_watch(&sigs, s.loop, &s.done, &err) < 0) {
		cli_setup_error("serve", &err);
		goto out;
	}
	front_signals_route(&sigs, on_signal, &s);
	s.retire_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (s.retire_fd < 0 || loop_add(s.loop, &s.w_retire, s.retire_fd, EPOLLIN, on_retire, &s) < 0) {
		pc_syserr(&err, "loop", "eventfd");
		cli_setup_error("serve", &err);
		goto out;
	}
	/* The bridge always: it writes the audit record of every run, with
	 * the client that asked; and it reaches the upstreams, if any. */
	bridge = bridge_new(s.loop, &s.conf, &err);
	if (!bridge) {
		cli_setup_error("serve", &err);
		goto out;
	}
	service_use_journal(bridge);
	bridge_start(bridge, NULL);
	s.cfg.replica = o.replica;
	front_bridge_hooks(&s.cfg, bridge);
	server_limits(&s, &s.conf, n, &s.cfg);
	s.bridge = bridge;
	for (size_t i = 0; i < n; i++) {
		/* the servers own their envs from here */
		struct mcp_server *srv = mcp_server_new(s.loop, envs[i], &s.cfg, &err);
		if (!srv) {
			cli_setup_error("serve", &err);
			goto out;
		}
		server_add(&s, names[i], envs[i], srv);
		envs[i] = NULL;
	}
	bridge_on_settled(bridge, on_tools_settled, &s);

	if (o.allow_host)
		s.hosts = split_hosts(o.allow_host, &s.n_hosts);
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
	s.activated = sock > 0;
	hcfg.listen_fd = sock;
	hcfg.listen = o.listen ? o.listen : s.conf.http_listen;
	hcfg.tokens = s.tokens_file ? &s.toks : NULL;
	http_limits(&s, &s.conf, &hcfg);
	hcfg.max_connections = o.max_connections ? o.max_connections : s.conf.http_max_connections;
	hcfg.request_timeout_s = (unsigned)((o.request_timeout ? o.request_timeout : s.conf.http_request_timeout_ms) / 1000);
	hcfg.max_pending = 4096;
	hcfg.replica = o.replica;
	hcfg.server_for = server_for;
	hcfg.routes = routes;
	hcfg.n_routes = ARRAY_SIZE(routes);
	hcfg.ctx = &s;
	s.http = http_server_new(s.loop, &hcfg, &err);
	if (!s.http) {
		cli_setup_error("serve", &err);
		goto out;
	}
	if (watchdog_start(&s, &err) < 0) {
		cli_setup_error("serve", &err);
		goto out;
	}
	/* always said, whatever the log level: clients and scripts read it */
	fprintf(stderr, "pycell: serve: listening on %s (policy %s, %s%s)\n", http_server_url(s.http),
		s.default_policy, s.tokens_file ? "tokens from " : "no tokens", s.tokens_file ? s.tokens_file : "");
	service_notify("READY=1\nSTATUS=serving on %s", http_server_url(s.http));

	while (!s.done) {
		if (loop_run_once(s.loop, -1) < 0 && errno != EINTR) {
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
		loop_del(s.loop, &s.w_drain);
	if (s.w_dog.registered)
		loop_del(s.loop, &s.w_dog);
	if (s.w_retire.registered)
		loop_del(s.loop, &s.w_retire);
	if (s.retire_fd >= 0)
		close(s.retire_fd);
	if (s.drain_fd >= 0)
		close(s.drain_fd);
	if (s.dog_fd >= 0)
		close(s.dog_fd);
	http_server_free(s.http);
	for (size_t i = 0; i < s.n_ps; i++)
		mcp_server_free(s.ps[i].srv);
	bridge_free(bridge);
	state_dir_free(s.state);
	if (blocked)
		front_signals_end(&sigs, s.loop);
	loop_free(s.loop);
	for (size_t i = 0; i < s.n_ps; i++) {
		env_free(s.ps[i].env);
		free(s.ps[i].name);
	}
	envs_free(envs, n);
	for (size_t i = 0; i < s.n_retired; i++)
		env_free(s.retired[i]);
	free(s.retired);
	free(s.ps);
	free(s.ops);
	free(names);
	jc_strv_free(s.hosts, s.n_hosts);
	tokens_free(&s.toks);
	conf_free(&s.conf);
	return rc;
}
