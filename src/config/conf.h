/* pycell: the configuration file, $sysconfdir/pycell/pycell.conf or
 * --config FILE (JSON, man pycell.conf(5)).  Named conf.h, not config.h:
 * a src/config.h would shadow autoconf's config.h for every file in src/. */
#ifndef PYCELL_CONF_H
#define PYCELL_CONF_H

#include <stdbool.h>
#include <stdint.h>

#include "base/util.h"

#define CONF_DEFAULT_PATH PYCELL_SYSCONFDIR "/pycell.conf"

/* An upstream MCP server, started as a stdio MCP client; its tools are
 * offered to jails as NAME.tool. */
struct upstream_conf {
	char *name;                 /* [a-z0-9_-]+ */
	char **argv;                /* command, NULL-terminated */
	size_t argc;
	char **env;                 /* "KEY=VALUE" for the server process */
	size_t n_env;
	uint64_t timeout_ms;        /* per tool call; default 30 s */
};

/* Network of egress runs ("network"): the private pool their veth pairs
 * take /30s from, and names the supervisor answers before asking DNS. */
#define NET_HOST_ADDRS_MAX 8
struct net_host {
	char *name;                 /* lower case */
	uint32_t addr[NET_HOST_ADDRS_MAX];   /* IPv4, network byte order */
	size_t n_addr;
};
struct net_conf {
	uint32_t pool_addr, pool_mask;   /* network byte order; 10.231.0.0/16 */
	unsigned pool_prefix;            /* 8..30 */
	struct net_host *hosts;
	size_t n_hosts;
};

struct pycell_conf {
	char *path;                 /* file loaded, NULL when none (built-in defaults) */
	char *policy;               /* default policy: a name or a path; "default" */
	uint32_t max_concurrent_runs;   /* 4 */
	uint64_t max_message;       /* the largest MCP message taken (4M) */
	char *audit_log;            /* audit JSON lines file; NULL = stderr */
	struct upstream_conf *upstreams;
	size_t n_upstreams;

	uint32_t host_uid_base;     /* as root: jail ids 0..65535 map to base.. */
	bool warm_enabled;          /* warm starts from a zygote (zygote.h) */
	uint32_t warm_ready;        /* jails made ahead for pycell mcp (2; 0 = none) */

	/* `pycell serve` ("http"); its options override each */
	char *http_listen;          /* "127.0.0.1:8080" */
	char *http_tokens;          /* token file; NULL: none */
	char **http_allow_hosts;    /* more Host/Origin names */
	size_t n_http_allow_hosts;
	uint32_t http_max_connections;   /* 256 */
	uint64_t http_request_timeout_ms;   /* 10 s */
	uint32_t http_max_sessions;      /* 256 */
	uint64_t http_session_idle_ms;   /* 1 h */

	struct net_conf net;

	/* "packages": where installed packages are kept (run/packages.h) */
	char *packages_cache;            /* /var/cache/pycell/packages */
	uint64_t packages_cache_max;     /* 4G */

	/* where paused sessions are kept (run/state.h); NULL: none, and
	 * sessions end at their idle timeout */
	char *state_dir;
};

void conf_init_default(struct pycell_conf *c);
/* Load `path`, or CONF_DEFAULT_PATH when path is NULL.  A missing default
 * file gives the built-in defaults; a missing explicit file is an error. */
int conf_load(const char *path, struct pycell_conf *out, struct pc_err *err);
/* Parse a config from JSON text; `origin` names it in error messages. */
int conf_parse(const char *json, const char *origin, struct pycell_conf *out, struct pc_err *err);
void conf_free(struct pycell_conf *c);
/* The upstream called `name`, or NULL. */
const struct upstream_conf *conf_upstream(const struct pycell_conf *c, const char *name);
/* The same upstream servers, started the same way (names, commands,
 * environments, timeouts)? */
bool conf_same_upstreams(const struct pycell_conf *a, const struct pycell_conf *b);

#define WARM_READY_MAX 16

/* Copy net (the hosts too) into *out, which is freed first. */
void net_conf_copy(struct net_conf *out, const struct net_conf *net);
void net_conf_free(struct net_conf *net);
/* The addresses of `name` (lower case) in net's hosts, or NULL. */
const struct net_host *net_conf_host(const struct net_conf *net, const char *name);

#endif
