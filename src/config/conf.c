/* pycell: the configuration file (man pycell.conf(5)). */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "config/conf.h"
#include "config/json_check.h"
#include "config/policy.h"

static const char *const top_keys[] = { "policy", "max_concurrent_runs", "max_message", "audit_log",
					"upstreams", "host_uid_base", "warm", "http", "network", "packages",
					"state_dir", NULL };
static const char *const packages_keys[] = { "cache", "cache_max", NULL };
static const char *const network_keys[] = { "pool", "hosts", NULL };
static const char *const upstream_keys[] = { "command", "env", "timeout", NULL };
static const char *const warm_keys[] = { "enabled", "ready", NULL };
static const char *const http_keys[] = { "listen", "tokens", "allow_hosts", "max_connections", "request_timeout",
					 "max_sessions", "session_idle", NULL };

#define JAIL_ID_COUNT 65536

void conf_init_default(struct pycell_conf *c)
{
	memset(c, 0, sizeof(*c));
	c->policy = xstrdup("default");
	c->max_concurrent_runs = 4;
	c->max_message = 4u << 20;
	c->warm_enabled = true;
	c->warm_ready = 2;
	c->host_uid_base = 100000;
	c->http_listen = xstrdup("127.0.0.1:8080");
	c->http_max_connections = 256;
	c->http_request_timeout_ms = 10000;
	c->http_max_sessions = 256;
	c->http_session_idle_ms = 3600000;
	c->net.pool_addr = htonl(0x0ae70000);   /* 10.231.0.0/16 */
	c->net.pool_prefix = 16;
	c->net.pool_mask = htonl(0xffff0000);
	c->packages_cache = xstrdup("/var/cache/pycell/packages");
	c->packages_cache_max = 4ULL << 30;
}

void net_conf_free(struct net_conf *net)
{
	for (size_t i = 0; i < net->n_hosts; i++)
		free(net->hosts[i].name);
	free(net->hosts);
	net->hosts = NULL;
	net->n_hosts = 0;
}

void net_conf_copy(struct net_conf *out, const struct net_conf *net)
{
	net_conf_free(out);
	*out = *net;
	out->hosts = net->n_hosts ? xcalloc(net->n_hosts, sizeof(*out->hosts)) : NULL;
	for (size_t i = 0; i < net->n_hosts; i++) {
		out->hosts[i] = net->hosts[i];
		out->hosts[i].name = xstrdup(net->hosts[i].name);
	}
}

const struct net_host *net_conf_host(const struct net_conf *net, const char *name)
{
	for (size_t i = 0; i < net->n_hosts; i++)
		if (strcmp(net->hosts[i].name, name) == 0)
			return &net->hosts[i];
	return NULL;
}

static void upstream_free(struct upstream_conf *u)
{
	free(u->name);
	jc_strv_free(u->argv, u->argc);
	jc_strv_free(u->env, u->n_env);
}

void conf_free(struct pycell_conf *c)
{
	if (!c)
		return;
	free(c->path);
	free(c->policy);
	free(c->audit_log);
	for (size_t i = 0; i < c->n_upstreams; i++)
		upstream_free(&c->upstreams[i]);
	free(c->upstreams);
	free(c->http_listen);
	free(c->http_tokens);
	jc_strv_free(c->http_allow_hosts, c->n_http_allow_hosts);
	net_conf_free(&c->net);
	free(c->packages_cache);
	free(c->state_dir);
	memset(c, 0, sizeof(*c));
}

bool conf_same_upstreams(const struct pycell_conf *a, const struct pycell_conf *b)
{
	if (a->n_upstreams != b->n_upstreams)
		return false;
	for (size_t i = 0; i < a->n_upstreams; i++) {
		const struct upstream_conf *u = &a->upstreams[i], *v = conf_upstream(b, u->name);
		if (!v || u->timeout_ms != v->timeout_ms || !strv_eq(u->argv, u->argc, v->argv, v->argc) ||
		    !strv_eq(u->env, u->n_env, v->env, v->n_env))
			return false;
	}
	return true;
}

const struct upstream_conf *conf_upstream(const struct pycell_conf *c, const char *name)
{
	for (size_t i = 0; i < c->n_upstreams; i++)
		if (strcmp(c->upstreams[i].name, name) == 0)
			return &c->upstreams[i];
	return NULL;
}

/* A string or null (NULL); `*out` is replaced. */
static int nullable_path(const struct jc *c, const char *key, const json_t *v, char **out)
{
	const char *s;
	if (json_is_null(v)) {
		free(*out);
		*out = NULL;
		return 0;
	}
	if (jc_abs_path(c, key, v, &s) < 0)
		return -1;
	free(*out);
	*out = xstrdup(s);
	return 0;
}

static int apply_command(const struct jc *c, const char *key, const json_t *v, struct upstream_conf *u)
{
	static const char what[] =
		"a non-empty array of strings such as [\"npx\", \"-y\", \"@modelcontextprotocol/server-memory\"]";
	size_t n;
	if (!json_is_array(v) || json_array_size(v) == 0)
		return jc_expected(c, key, what, v);
	n = json_array_size(v);
	u->argv = xcalloc(n + 1, sizeof(*u->argv));
	u->argc = n;
	for (size_t i = 0; i < n; i++) {
		char k[JC_KEY_MAX];
		const char *s;
		jc_index(k, key, i);
		if (jc_string(c, k, json_array_get(v, i), &s) < 0)
			return -1;
		u->argv[i] = xstrdup(s);
	}
	return 0;
}

static int apply_upstream(const struct jc *c, const char *name, const json_t *v, struct upstream_conf *u)
{
	char key[JC_KEY_MAX], k[JC_KEY_MAX];
	const json_t *f;
	jc_key(key, "upstreams", name);
	u->name = xstrdup(name);
	u->timeout_ms = 30 * 1000;
	if (!policy_is_name(name))
		return jc_fail(c, "upstreams",
			       "\"%s\" is not a server name ([a-z0-9_-]+, at most 64): it prefixes tool names as NAME.tool",
			       name);
	if (jc_object(c, key, v, upstream_keys) < 0)
		return -1;
	jc_key(k, key, "command");
	if (!(f = json_object_get(v, "command")))
		return jc_fail(c, k, "missing (the server's argv, such as [\"npx\", \"-y\", \"@modelcontextprotocol/server-memory\"])");
	if (apply_command(c, k, f, u) < 0)
		return -1;
	jc_key(k, key, "env");
	if ((f = json_object_get(v, "env")) && jc_env(c, k, f, &u->env, &u->n_env) < 0)
		return -1;
	jc_key(k, key, "timeout");
	if ((f = json_object_get(v, "timeout")) &&
	    jc_duration(c, k, f, 100, 3600 * 1000, false, &u->timeout_ms) < 0)
		return -1;
	return 0;
}

static int apply_upstreams(const struct jc *c, const json_t *v, struct pycell_conf *conf)
{
	const char *name;
	json_t *val;
	if (!json_is_object(v))
		return jc_expected(c, "upstreams", "an object of servers such as {\"memory\": {\"command\": [...]}}", v);
	conf->upstreams = xcalloc(json_object_size(v), sizeof(*conf->upstreams));
	json_object_foreach ((json_t *)v, name, val) {
		/* counted before it is filled, so conf_free releases a partial one */
		struct upstream_conf *u = &conf->upstreams[conf->n_upstreams++];
		if (apply_upstream(c, name, val, u) < 0)
			return -1;
	}
	return 0;
}

static int apply_warm(const struct jc *c, const json_t *o, struct pycell_conf *conf)
{
	const json_t *v;
	if (jc_object(c, "warm", o, warm_keys) < 0)
		return -1;
	uint64_t n;
	if ((v = json_object_get(o, "enabled")) && jc_bool(c, "warm.enabled", v, &conf->warm_enabled) < 0)
		return -1;
	if ((v = json_object_get(o, "ready"))) {
		if (jc_uint(c, "warm.ready", v, 0, WARM_READY_MAX, false, &n) < 0)
			return -1;
		conf->warm_ready = (uint32_t)n;
	}
	return 0;
}

static int host_addr(const struct jc *c, const char *key, const json_t *v, uint32_t *out)
{
	struct in_addr a;
	if (!json_is_string(v) || inet_pton(AF_INET, json_string_value(v), &a) != 1)
		return jc_expected(c, key, "an IPv4 address", v);
	*out = a.s_addr;
	return 0;
}

static int apply_network(const struct jc *c, const json_t *o, struct pycell_conf *conf)
{
	struct net_conf *net = &conf->net;
	const json_t *v, *a;
	const char *name;
	if (jc_object(c, "network", o, network_keys) < 0)
		return -1;
	if ((v = json_object_get(o, "pool"))) {
		struct egress_dest d;
		const char *why = "not a CIDR";
		cleanup_free char *s = json_is_string(v) ? xasprintf("%s:*", json_string_value(v)) : NULL;
		if (!s || policy_egress_parse(s, &d, &why) < 0 || d.name[0] || !strchr(json_string_value(v), '/'))
			return jc_expected(c, "network.pool", "a private IPv4 network as a CIDR, such as \"10.231.0.0/16\"", v);
		if (d.prefix < 8 || d.prefix > 30)
			return jc_fail(c, "network.pool", "\"%s\": a prefix from /8 to /30 (each run takes a /30)",
				       json_string_value(v));
		net->pool_addr = d.addr;
		net->pool_mask = d.mask;
		net->pool_prefix = d.prefix;
	}
	if ((v = json_object_get(o, "hosts"))) {
		if (!json_is_object(v))
			return jc_expected(c, "network.hosts", "an object of host names and IPv4 addresses", v);
		net_conf_free(net);
		net->hosts = xcalloc(json_object_size(v) + 1, sizeof(*net->hosts));
		json_object_foreach((json_t *)v, name, a) {
			struct net_host *h = &net->hosts[net->n_hosts];
			struct egress_dest d;
			const char *why;
			char k[JC_KEY_MAX];
			cleanup_free char *s = xasprintf("%s:*", name);
			jc_key(k, "network.hosts", name);
			if (policy_egress_parse(s, &d, &why) < 0 || !d.name[0])
				return jc_fail(c, k, "not a host name (labels of letters, digits, - and _, dots between)");
			if (net_conf_host(net, d.name))
				return jc_fail(c, k, "listed twice (names are not case-sensitive)");
			if (json_is_array(a)) {
				if (json_array_size(a) < 1 || json_array_size(a) > NET_HOST_ADDRS_MAX)
					return jc_fail(c, k, "from 1 to %d addresses", NET_HOST_ADDRS_MAX);
				for (size_t i = 0; i < json_array_size(a); i++) {
					char ki[JC_KEY_MAX];
					jc_index(ki, k, i);
					if (host_addr(c, ki, json_array_get(a, i), &h->addr[i]) < 0)
						return -1;
				}
				h->n_addr = json_array_size(a);
			} else {
				if (host_addr(c, k, a, &h->addr[0]) < 0)
					return -1;
				h->n_addr = 1;
			}
			h->name = xstrdup(d.name);
			net->n_hosts++;
		}
	}
	return 0;
}

static int apply_http(const struct jc *c, const json_t *o, struct pycell_conf *conf)
{
	const json_t *v;
	const char *s;
	uint64_t n;
	if (jc_object(c, "http", o, http_keys) < 0)
		return -1;
	if ((v = json_object_get(o, "listen"))) {
		if (jc_string(c, "http.listen", v, &s) < 0)
			return -1;
		free(conf->http_listen);
		conf->http_listen = xstrdup(s);
	}
	if ((v = json_object_get(o, "tokens")) && nullable_path(c, "http.tokens", v, &conf->http_tokens) < 0)
		return -1;
	if ((v = json_object_get(o, "allow_hosts"))) {
		size_t i;
		const json_t *h;
		if (!json_is_array(v))
			return jc_expected(c, "http.allow_hosts", "an array of host names", v);
		conf->http_allow_hosts = xcalloc(json_array_size(v) + 1, sizeof(char *));
		json_array_foreach (v, i, h) {
			char k[JC_KEY_MAX];
			jc_index(k, "http.allow_hosts", i);
			if (jc_string(c, k, h, &s) < 0)
				return -1;
			if (strpbrk(s, "/,: \t"))
				return jc_expected(c, k, "a host name (no scheme, port, comma or space)", h);
			conf->http_allow_hosts[conf->n_http_allow_hosts++] = xstrdup(s);
		}
	}
	if ((v = json_object_get(o, "max_connections"))) {
		if (jc_uint(c, "http.max_connections", v, 1, 65536, false, &n) < 0)
			return -1;
		conf->http_max_connections = (uint32_t)n;
	}
	if ((v = json_object_get(o, "request_timeout")) &&
	    jc_duration(c, "http.request_timeout", v, 1000, 3600000, false, &conf->http_request_timeout_ms) < 0)
		return -1;
	if ((v = json_object_get(o, "max_sessions"))) {
		if (jc_uint(c, "http.max_sessions", v, 1, 65536, false, &n) < 0)
			return -1;
		conf->http_max_sessions = (uint32_t)n;
	}
	if ((v = json_object_get(o, "session_idle")) &&
	    jc_duration(c, "http.session_idle", v, 1000, 7 * 24 * 3600000ULL, false, &conf->http_session_idle_ms) < 0)
		return -1;
	return 0;
}

static int conf_apply(const struct jc *c, const json_t *root, struct pycell_conf *conf)
{
	const json_t *v;
	uint64_t n;
	if (jc_object(c, NULL, root, top_keys) < 0)
		return -1;
	if ((v = json_object_get(root, "policy"))) {
		const char *s = json_is_string(v) ? json_string_value(v) : "";
		if (strlen(s) != json_string_length(v) || (!policy_is_name(s) && !policy_is_path(s)))
			return jc_expected(c, "policy",
					   "a policy name ([a-z0-9_-]+) or a path (containing / or ending in .json)", v);
		free(conf->policy);
		conf->policy = xstrdup(s);
	}
	if ((v = json_object_get(root, "max_concurrent_runs"))) {
		if (jc_uint(c, "max_concurrent_runs", v, 1, 1024, false, &n) < 0)
			return -1;
		conf->max_concurrent_runs = (uint32_t)n;
	}
	if ((v = json_object_get(root, "max_message")) &&
	    jc_size(c, "max_message", v, 4096, 1u << 30, false, &conf->max_message) < 0)
		return -1;
	if ((v = json_object_get(root, "audit_log")) && nullable_path(c, "audit_log", v, &conf->audit_log) < 0)
		return -1;
	if ((v = json_object_get(root, "upstreams")) && apply_upstreams(c, v, conf) < 0)
		return -1;
	if ((v = json_object_get(root, "host_uid_base"))) {
		/* below 1000 are the host's system accounts; the range must fit in 32 bits */
		if (jc_uint(c, "host_uid_base", v, 1000, UINT32_MAX - JAIL_ID_COUNT, false, &n) < 0)
			return -1;
		conf->host_uid_base = (uint32_t)n;
	}
	if ((v = json_object_get(root, "warm")) && apply_warm(c, v, conf) < 0)
		return -1;
	if ((v = json_object_get(root, "http")) && apply_http(c, v, conf) < 0)
		return -1;
	if ((v = json_object_get(root, "network")) && apply_network(c, v, conf) < 0)
		return -1;
	if ((v = json_object_get(root, "state_dir"))) {
		const char *s;
		if (jc_abs_path(c, "state_dir", v, &s) < 0)
			return -1;
		free(conf->state_dir);
		conf->state_dir = xstrdup(s);
	}
	if ((v = json_object_get(root, "packages"))) {
		const json_t *f;
		if (jc_object(c, "packages", v, packages_keys) < 0)
			return -1;
		if ((f = json_object_get(v, "cache"))) {
			const char *s;
			if (jc_abs_path(c, "packages.cache", f, &s) < 0)
				return -1;
			free(conf->packages_cache);
			conf->packages_cache = xstrdup(s);
		}
		if ((f = json_object_get(v, "cache_max")) &&
		    jc_size(c, "packages.cache_max", f, 1ULL << 10, JC_NO_MAX, false, &conf->packages_cache_max) < 0)
			return -1;
	}
	return 0;
}

int conf_parse(const char *json, const char *origin, struct pycell_conf *out, struct pc_err *err)
{
	struct jc c = { "config", origin, err };
	struct pycell_conf conf;
	json_t *root;
	int ret;
	if (jc_parse(&c, json, &root) < 0)
		return -1;
	conf_init_default(&conf);
	ret = conf_apply(&c, root, &conf);
	json_decref(root);
	if (ret < 0) {
		conf_free(&conf);
		return -1;
	}
	*out = conf;
	return 0;
}

int conf_load(const char *path, struct pycell_conf *out, struct pc_err *err)
{
	const char *file = path ? path : CONF_DEFAULT_PATH;
	struct jc c = { "config", file, err };
	cleanup_free char *text = NULL;
	if (!path && access(file, F_OK) < 0 && errno == ENOENT) {
		conf_init_default(out);
		return 0;
	}
	if (jc_read_file(&c, file, &text) < 0 || conf_parse(text, file, out, err) < 0)
		return -1;
	out->path = xstrdup(file);
	return 0;
}
