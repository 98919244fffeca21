/* pycell: `pycell mcp`, the MCP server on stdin/stdout. */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>

#include "base/jsonrpc.h"
#include "base/log.h"
#include "bridge/bridge.h"
#include "cli/commands.h"
#include "cli/mcp_front.h"
#include "cli/options.h"
#include "cli/setup.h"
#include "config/conf.h"
#include "run/egress.h"
#include "run/packages.h"
#include "config/result.h"
#include "jail/jail.h"
#include "mcp/mcp.h"
#include "mcp/transport_stdio.h"
#include "run/run.h"
#include "run/state.h"
#include "run/zygote.h"

/* What is still queued for stdout when the session ends gets this long
 * to drain. */
#define SHUTDOWN_FLUSH_MS 2000

static const char mcp_usage[] =
	"Usage: pycell mcp [OPTION]...\n"
	"Serve MCP (the Model Context Protocol) on stdin/stdout, one JSON-RPC message per line.\n"
	"\n"
	"      --policy FILE|NAME   policy of every run (default: the config file's, else \"default\")\n"
	"      --config FILE        configuration file (default " CONF_DEFAULT_PATH ")\n"
	"      --max-runs N         runs at once; more wait in a queue (default: the config's, 4)\n"
	"      --max-message SIZE   largest message accepted, 4K to 1G (default: the config's, 4M);\n"
	"                           a larger one is answered with an error, with its id\n"
	"      --tools-page-size N  tools per tools/list page (default: all; to test clients)\n"
	"      --warm / --cold      warm starts: clone each run's fresh jail from an initialised\n"
	"                           interpreter, and keep the config's warm.ready jails (2) made\n"
	"                           ahead (default: the config's warm.enabled, on)\n"
	"  -v, --verbose            log more to stderr (twice for debug)\n"
	"  -h, --help               show this help\n"
	"\n"
	"stdout carries only MCP messages; logs go to stderr.  EOF on stdin ends every run\n"
	"and the server (exit status 0).  See pycell(1).\n";

struct mcp_opts {
	bool help;
	const char *policy, *config;
	uint32_t max_runs, page_size;
	uint64_t max_message;
	bool has_max_message;
	int verbose;
	int warm;                /* 1 --warm, -1 --cold, 0 the config's */
};

#define MCP(field) offsetof(struct mcp_opts, field)

static const struct opt mcp_options[] = {
	{ OPT_ROW("help", 'h', OPT_HELP, MCP(help)) },
	{ OPT_ROW("verbose", 'v', OPT_COUNT, MCP(verbose)) },
	{ OPT_ROW("policy", 0, OPT_STRING, MCP(policy)) },
	{ OPT_ROW("config", 0, OPT_STRING, MCP(config)) },
	{ OPT_ROW("max-runs", 0, OPT_UINT, MCP(max_runs)), .min = 1, .max = 1024 },
	{ OPT_ROW("max-message", 0, OPT_SIZE, MCP(max_message)),
	  .given = OPT_GIVEN(struct mcp_opts, has_max_message), .min = 4096, .max = 1u << 30,
	  .range = "expected a size from 4K to 1G" },
	{ OPT_ROW("tools-page-size", 0, OPT_UINT, MCP(page_size)), .min = 1, .max = 1000 },
	{ OPT_ROW("warm", 0, OPT_SET, MCP(warm)), .set = 1 },
	{ OPT_ROW("cold", 0, OPT_SET, MCP(warm)), .set = -1 },
};

const struct opt_cmd cli_mcp_cmd = { "mcp", mcp_usage, mcp_options, ARRAY_SIZE(mcp_options), false };

struct mcp_stdio {
	struct stdio_transport *transport;
	struct mcp_conn *conn;
	bool done;
};

static void on_line(void *ctx, const char *line, size_t len)
{
	struct mcp_stdio *m = ctx;
	if (!m->done)
		mcp_conn_handle_text(m->conn, line, len);
}

static void on_oversized(void *ctx, size_t max, const char *id)
{
	struct mcp_stdio *m = ctx;
	if (!m->done)
		mcp_conn_oversized(m->conn, max, id);
}

static void on_close(void *ctx)
{
	struct mcp_stdio *m = ctx;
	m->done = true;
}

static void session_send(void *ctx, json_t *msg, const json_t *related)
{
	struct mcp_stdio *m = ctx;
	stdio_transport_send(m->transport, msg);
	(void)related;
}

static size_t session_unread(void *ctx)
{
	struct mcp_stdio *m = ctx;
	return stdio_transport_unread(m->transport);
}

static void on_tools_settled(void *ctx)
{
	mcp_server_tools_settled(ctx);
}

int cmd_mcp(int argc, char **argv)
{
	static const struct stdio_transport_ops tops = { on_line, on_oversized, on_close };
	static const struct mcp_conn_ops sops = { session_send, session_unread };
	struct mcp_opts o;
	struct pycell_conf conf;
	struct run_env env;
	struct pc_err err = { 0 };
	struct mcp_server_config cfg = { 0 };
	struct state_dir *state = NULL;
	char scope[RANDOM_ID_SIZE];
	struct mcp_server *server = NULL;
	struct bridge *bridge = NULL;
	struct mcp_stdio m = { 0 };
	struct loop *l = NULL;
	struct front_signals sigs;
	int rc;

	memset(&o, 0, sizeof(o));
	rc = opts_parse(&cli_mcp_cmd, argc, argv, &o, &err);
	if (rc < 0)
		return cli_usage_error("mcp", &err);
	if (o.help) {
		cleanup_free char *help = front_help(mcp_usage);
		fputs(help, stdout);
		return 0;
	}
	if (o.verbose)
		log_level = o.verbose > 1 ? LOG_DEBUG : LOG_INFO;

	if (cli_conf_setup(o.config, &conf, &err) < 0)
		return cli_input_error("mcp", &err);
	if (run_env_init(&env, o.policy ? o.policy : conf.policy, &err) < 0) {
		conf_free(&conf);
		return cli_input_error("mcp", &err);
	}
	/* the session's jails and its sessions need descriptors */
	cli_raise_nofile("mcp", env.policy.sessions.max);
	if (o.warm > 0 || (o.warm == 0 && conf.warm_enabled)) {
		/* a zygote that cannot start leaves the server on cold starts */
		if (run_env_warm(&env, &err) < 0)
			log_warn("mcp: warm starts unavailable, runs start cold: %s", err.msg);
		else if (policy_is_wasm(&env.policy))
			log_info("mcp: warm starts on (ready jails whose node has Pyodide loaded)");
		else
			log_info("mcp: warm starts on (zygote pid %d)", (int)zygote_pid(env.warm));
	}
	cfg.max_runs = o.max_runs ? o.max_runs : conf.max_concurrent_runs;
	if (!o.has_max_message)
		o.max_message = conf.max_message;
	cfg.ready = conf.warm_ready;
	cfg.page_size = o.page_size;
	if (conf.state_dir) {
		/* its paused sessions are this process's: its client is its
		 * connection, and a later pycell mcp is another client */
		if (state_dir_open(conf.state_dir, &state, &err) < 0 || random_id(scope, "stdio") < 0) {
			if (!err.msg[0])
				pc_fail(&err, EIO, "state_dir", "no random bytes for this server's scope");
			state_dir_free(state);
			run_env_free(&env);
			conf_free(&conf);
			return cli_input_error("mcp", &err);
		}
		cfg.state = state;
		cfg.state_scope = scope;
		cfg.state_ephemeral = true;
	}

	/* Termination signals end the session like EOF does, so runs are
	 * killed and their cgroups removed rather than left behind. */
	front_signals_block(&sigs);

	rc = 1; /* a server that cannot start or stops on an error exits 1 */
	l = loop_new();
	if (!l) {
		pc_syserr(&err, "loop", "epoll_create1");
		cli_setup_error("mcp", &err);
		goto out;
	}
	if (front_signals_watch(&sigs, l, &m.done, &err) < 0) {
		cli_setup_error("mcp", &err);
		goto out;
	}
	/* Upstream MCP servers for the jails: started now, ready a moment
	 * later; the client is served meanwhile.  An egress policy's runs
	 * are audited (what their network refused) with or without them. */
	if (conf.n_upstreams || env.policy.network.mode == NET_EGRESS) {
		bridge = bridge_new(l, &conf, &err);
		if (!bridge) {
			cli_setup_error("mcp", &err);
			goto out;
		}
		bridge_start(bridge, NULL);
		front_bridge_hooks(&cfg, bridge);
	}
	server = mcp_server_new(l, &env, &cfg, &err);
	if (!server) {
		cli_setup_error("mcp", &err);
		goto out;
	}
	if (bridge)
		bridge_on_settled(bridge, on_tools_settled, server);
	m.transport = stdio_transport_new(l, STDIN_FILENO, STDOUT_FILENO, (size_t)o.max_message, &tops, &m, &err);
	if (!m.transport) {
		cli_setup_error("mcp", &err);
		goto out;
	}
	m.conn = mcp_conn_new(server, &sops, &m);
	log_info("mcp: serving on stdio (policy %s, %u runs at once)", env.policy.name,
		 cfg.max_runs ? cfg.max_runs : 4);

	while (!m.done) {
		if (loop_run_once(l, -1) < 0) {
			pc_syserr(&err, "loop", "epoll_wait");
			cli_setup_error("mcp", &err);
			goto out;
		}
	}
	if (sigs.signal)
		log_info("mcp: %s: stopping", strsignal(sigs.signal));
	else
		log_debug("mcp: end of input: stopping");
	rc = 0;
out:
	/* Ending the session kills its runs; freeing the server reaps them. */
	mcp_conn_free(m.conn);
	mcp_server_free(server);
	bridge_free(bridge);
	if (m.transport) {
		stdio_transport_flush(m.transport, SHUTDOWN_FLUSH_MS);
		stdio_transport_free(m.transport);
	}
	front_signals_end(&sigs, l);
	loop_free(l);
	run_env_free(&env);
	state_dir_free(state);
	conf_free(&conf);
	return rc;
}
