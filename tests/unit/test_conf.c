/* pycell: unit tests for the configuration file (src/config/conf.c, man pycell.conf(5)). */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config/conf.h"
#include "unit.h"

/* Test documents are written with ' for " to stay readable. */
static char *jq(const char *s)
{
	char *d = xstrdup(s);
	for (char *p = d; *p; p++)
		if (*p == '\'')
			*p = '"';
	return d;
}

#define UPSTREAM_NAME_MSG " is not a server name ([a-z0-9_-]+, at most 64): it prefixes tool names as NAME.tool"
#define COMMAND_MSG "expected a non-empty array of strings such as [\"npx\", \"-y\", \"@modelcontextprotocol/server-memory\"], got "

static const struct { const char *json; const char *msg; } bad[] = {
	/* syntax */
	{ "{'policy': 'default',}", "config c.conf:1:22: invalid JSON: string or '}' expected near '}'" },
	{ "{\n'max_concurrent_runs': 4,\n'max_concurrent_runs': 5}", "config c.conf:3:21: invalid JSON: duplicate object key" },
	{ "'policy'", "config c.conf:1:8: invalid JSON: '[' or '{' expected near '\"policy\"'" },
	{ "[{}]", "config c.conf: expected a JSON object at the top level, got [{}]" },
	/* unknown keys */
	{ "{'max_message': '1K'}", "config c.conf: max_message: expected a size from 4K to 1G, got \"1K\"" },
	{ "{'max_message': 'big'}", "config c.conf: max_message: expected a size such as 512M, got \"big\"" },
	{ "{'polciy': 'strict'}", "config c.conf: polciy: unknown key (expected one of policy, max_concurrent_runs, max_message, audit_log, upstreams, host_uid_base, warm, http, network, packages, state_dir)" },
	{ "{'upstreams': {'memory': {'command': ['x'], 'args': []}}}", "config c.conf: upstreams.memory.args: unknown key (expected one of command, env, timeout)" },
	{ "{'warm': {'size': 2}}", "config c.conf: warm.size: unknown key (expected one of enabled, ready)" },
	{ "{'warm': {'pool_size': 2}}", "config c.conf: warm.pool_size: unknown key (expected one of enabled, ready)" },
	/* policy */
	{ "{'policy': 5}", "config c.conf: policy: expected a policy name ([a-z0-9_-]+) or a path (containing / or ending in .json), got 5" },
	{ "{'policy': ''}", "config c.conf: policy: expected a policy name ([a-z0-9_-]+) or a path (containing / or ending in .json), got \"\"" },
	{ "{'policy': 'Strict'}", "config c.conf: policy: expected a policy name ([a-z0-9_-]+) or a path (containing / or ending in .json), got \"Strict\"" },
	{ "{'policy': 'strict\\u0000.json'}", "config c.conf: policy: expected a policy name ([a-z0-9_-]+) or a path (containing / or ending in .json), got \"strict\\u0000.json\"" },
	/* max_concurrent_runs */
	{ "{'max_concurrent_runs': 0}", "config c.conf: max_concurrent_runs: expected an integer from 1 to 1024, got 0" },
	{ "{'max_concurrent_runs': 1025}", "config c.conf: max_concurrent_runs: expected an integer from 1 to 1024, got 1025" },
	{ "{'max_concurrent_runs': '4'}", "config c.conf: max_concurrent_runs: expected an integer from 1 to 1024, got \"4\"" },
	{ "{'max_concurrent_runs': -1}", "config c.conf: max_concurrent_runs: expected an integer from 1 to 1024, got -1" },
	/* audit_log */
	{ "{'audit_log': 'audit.jsonl'}", "config c.conf: audit_log: expected an absolute path, got \"audit.jsonl\"" },
	{ "{'audit_log': false}", "config c.conf: audit_log: expected an absolute path, got false" },
	{ "{'audit_log': '/var/log/../audit'}", "config c.conf: audit_log: expected a normalized absolute path (no \".\", \"..\" or empty components), got \"/var/log/../audit\"" },
	/* upstreams */
	{ "{'upstreams': []}", "config c.conf: upstreams: expected an object of servers such as {\"memory\": {\"command\": [...]}}, got []" },
	{ "{'upstreams': {'My Server': {'command': ['x']}}}", "config c.conf: upstreams: \"My Server\"" UPSTREAM_NAME_MSG },
	{ "{'upstreams': {'a.b': {'command': ['x']}}}", "config c.conf: upstreams: \"a.b\"" UPSTREAM_NAME_MSG },
	{ "{'upstreams': {'': {'command': ['x']}}}", "config c.conf: upstreams: \"\"" UPSTREAM_NAME_MSG },
	{ "{'upstreams': {'Memory': {'command': ['x']}}}", "config c.conf: upstreams: \"Memory\"" UPSTREAM_NAME_MSG },
	{ "{'upstreams': {'memory': ['npx']}}", "config c.conf: upstreams.memory: expected an object, got [\"npx\"]" },
	{ "{'upstreams': {'memory': {}}}", "config c.conf: upstreams.memory.command: missing (the server's argv, such as [\"npx\", \"-y\", \"@modelcontextprotocol/server-memory\"])" },
	{ "{'upstreams': {'memory': {'command': []}}}", "config c.conf: upstreams.memory.command: " COMMAND_MSG "[]" },
	{ "{'upstreams': {'memory': {'command': 'npx -y x'}}}", "config c.conf: upstreams.memory.command: " COMMAND_MSG "\"npx -y x\"" },
	{ "{'upstreams': {'memory': {'command': ['npx', 1]}}}", "config c.conf: upstreams.memory.command[1]: expected a non-empty string, got 1" },
	{ "{'upstreams': {'memory': {'command': ['npx', '']}}}", "config c.conf: upstreams.memory.command[1]: expected a non-empty string, got \"\"" },
	{ "{'upstreams': {'memory': {'command': ['np\\u0000x']}}}", "config c.conf: upstreams.memory.command[0]: string contains a NUL byte" },
	{ "{'upstreams': {'memory': {'command': ['x'], 'env': {'A=B': 'c'}}}}", "config c.conf: upstreams.memory.env: \"A=B\" is not a variable name (letters, digits and _, not starting with a digit)" },
	{ "{'upstreams': {'memory': {'command': ['x'], 'env': {'A': 5}}}}", "config c.conf: upstreams.memory.env.A: expected a string, got 5" },
	{ "{'upstreams': {'memory': {'command': ['x'], 'env': ['A=B']}}}", "config c.conf: upstreams.memory.env: expected an object of strings such as {\"LANG\": \"C.UTF-8\"}, got [\"A=B\"]" },
	{ "{'upstreams': {'memory': {'command': ['x'], 'timeout': 0}}}", "config c.conf: upstreams.memory.timeout: expected a duration from 100ms to 1h, got 0" },
	{ "{'upstreams': {'memory': {'command': ['x'], 'timeout': '2h'}}}", "config c.conf: upstreams.memory.timeout: expected a duration from 100ms to 1h, got \"2h\"" },
	{ "{'upstreams': {'memory': {'command': ['x'], 'timeout': 'later'}}}", "config c.conf: upstreams.memory.timeout: expected a duration such as 30s, 500ms or 2m, got \"later\"" },
	{ "{'upstreams': {'ok': {'command': ['x']}, 'bad': {'command': []}}}", "config c.conf: upstreams.bad.command: " COMMAND_MSG "[]" },
	/* host_uid_base */
	{ "{'host_uid_base': 0}", "config c.conf: host_uid_base: expected an integer from 1000 to 4294901759, got 0" },
	{ "{'host_uid_base': 999}", "config c.conf: host_uid_base: expected an integer from 1000 to 4294901759, got 999" },
	{ "{'host_uid_base': 4294901760}", "config c.conf: host_uid_base: expected an integer from 1000 to 4294901759, got 4294901760" },
	{ "{'host_uid_base': '100000'}", "config c.conf: host_uid_base: expected an integer from 1000 to 4294901759, got \"100000\"" },
	/* warm */
	{ "{'warm': true}", "config c.conf: warm: expected an object, got true" },
	{ "{'warm': {'enabled': 'yes'}}", "config c.conf: warm.enabled: expected true or false, got \"yes\"" },
	{ "{'warm': {'ready': 17}}", "config c.conf: warm.ready: expected an integer from 0 to 16, got 17" },
	{ "{'warm': {'ready': -1}}", "config c.conf: warm.ready: expected an integer from 0 to 16, got -1" },
	{ "{'warm': {'ready': '2'}}", "config c.conf: warm.ready: expected an integer from 0 to 16, got \"2\"" },
	{ "{'network': {'pool': '10.0.0.0'}}", "config c.conf: network.pool: expected a private IPv4 network as a CIDR, such as \"10.231.0.0/16\", got \"10.0.0.0\"" },
	{ "{'network': {'pool': '10.0.0.1/16'}}", "config c.conf: network.pool: expected a private IPv4 network as a CIDR, such as \"10.231.0.0/16\", got \"10.0.0.1/16\"" },
	{ "{'network': {'pool': '10.0.0.0/31'}}", "config c.conf: network.pool: \"10.0.0.0/31\": a prefix from /8 to /30 (each run takes a /30)" },
	{ "{'network': {'hosts': {'a.test': '1.2.3'}}}", "config c.conf: network.hosts.a.test: expected an IPv4 address, got \"1.2.3\"" },
	{ "{'network': {'hosts': {'a.test': []}}}", "config c.conf: network.hosts.a.test: from 1 to 8 addresses" },
	{ "{'network': {'hosts': {'a.test': ['1.2.3.4', 5]}}}", "config c.conf: network.hosts.a.test[1]: expected an IPv4 address, got 5" },
	{ "{'network': {'hosts': {'not a name': '1.2.3.4'}}}", "config c.conf: network.hosts.not a name: not a host name (labels of letters, digits, - and _, dots between)" },
	{ "{'network': {'hosts': {'A.test': '1.2.3.4', 'a.TEST': '1.2.3.5'}}}", "config c.conf: network.hosts.a.TEST: listed twice (names are not case-sensitive)" },
	{ "{'network': {'mtu': 1400}}", "config c.conf: network.mtu: unknown key (expected one of pool, hosts)" },
};

START_TEST(test_bad)
{
	cleanup_free char *json = jq(bad[_i].json);
	struct pycell_conf c;
	struct pc_err err = { 0 };
	int rc = conf_parse(json, "c.conf", &c, &err);
	if (rc == 0)
		conf_free(&c);
	ck_assert_msg(rc == -1, "accepted: %s", json);
	ck_assert_msg(strcmp(err.msg, bad[_i].msg) == 0, "%s\n  got:      %s\n  expected: %s", json, err.msg,
		      bad[_i].msg);
	ck_assert_str_eq(err.step, "config");
}
END_TEST

START_TEST(test_defaults)
{
	struct pycell_conf c;
	struct pc_err err = { 0 };
	ck_assert_msg(conf_parse("{}", "c.conf", &c, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(c.policy, "default");
	ck_assert_uint_eq(c.max_concurrent_runs, 4);
	ck_assert_ptr_null(c.audit_log);
	ck_assert_uint_eq(c.n_upstreams, 0);
	ck_assert_uint_eq(c.host_uid_base, 100000);
	ck_assert(c.warm_enabled);   /* warm starts are the default */
	ck_assert_uint_eq(c.warm_ready, 2);
	ck_assert_ptr_null(c.path);
	ck_assert_uint_eq(c.net.pool_addr, htonl(0x0ae70000));   /* 10.231.0.0/16 */
	ck_assert_uint_eq(c.net.pool_mask, htonl(0xffff0000));
	ck_assert_uint_eq(c.net.pool_prefix, 16);
	ck_assert_uint_eq(c.net.n_hosts, 0);
	conf_free(&c);
}
END_TEST

START_TEST(test_network)
{
	cleanup_free char *json = jq("{'network': {'pool': '198.19.0.0/20',"
				     " 'hosts': {'Index.Test': '198.18.0.2', 'multi.test': ['198.18.0.2', '198.18.0.3']}}}");
	struct pycell_conf c;
	struct net_conf copy = { 0 };
	struct pc_err err = { 0 };
	const struct net_host *h;
	ck_assert_msg(conf_parse(json, "c.conf", &c, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(c.net.pool_addr, htonl(0xc6130000));
	ck_assert_uint_eq(c.net.pool_mask, htonl(0xfffff000));
	ck_assert_uint_eq(c.net.pool_prefix, 20);
	ck_assert_uint_eq(c.net.n_hosts, 2);
	h = net_conf_host(&c.net, "index.test");   /* names are kept in lower case */
	ck_assert_ptr_nonnull(h);
	ck_assert_uint_eq(h->n_addr, 1);
	ck_assert_uint_eq(h->addr[0], htonl(0xc6120002));
	ck_assert_ptr_null(net_conf_host(&c.net, "Index.Test"));
	net_conf_copy(&copy, &c.net);
	conf_free(&c);
	h = net_conf_host(&copy, "multi.test");   /* the copy owns its names */
	ck_assert_ptr_nonnull(h);
	ck_assert_uint_eq(h->n_addr, 2);
	ck_assert_uint_eq(h->addr[1], htonl(0xc6120003));
	net_conf_free(&copy);
}
END_TEST

static const char full[] =
	"{'policy': '/etc/pycell/policy.d/team.json', 'max_concurrent_runs': 16,"
	" 'audit_log': '/var/log/pycell/audit.jsonl',"
	" 'upstreams': {"
	"   'memory': {'command': ['npx', '-y', '@modelcontextprotocol/server-memory'],"
	"              'env': {'MEMORY_FILE_PATH': '/var/lib/pycell/memory.json'}},"
	"   'fs_2': {'command': ['/usr/bin/mcp-fs', '/srv'], 'timeout': '5s'}},"
	" 'host_uid_base': 200000, 'warm': {'enabled': true, 'ready': 0}}";

START_TEST(test_full)
{
	struct pycell_conf c;
	struct pc_err err = { 0 };
	cleanup_free char *json = jq(full);
	const struct upstream_conf *u;
	ck_assert_msg(conf_parse(json, "c.conf", &c, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(c.policy, "/etc/pycell/policy.d/team.json");
	ck_assert_uint_eq(c.max_concurrent_runs, 16);
	ck_assert_str_eq(c.audit_log, "/var/log/pycell/audit.jsonl");
	ck_assert_uint_eq(c.n_upstreams, 2);
	u = conf_upstream(&c, "memory");
	ck_assert_ptr_nonnull(u);
	ck_assert_uint_eq(u->argc, 3);
	ck_assert_str_eq(u->argv[0], "npx");
	ck_assert_str_eq(u->argv[2], "@modelcontextprotocol/server-memory");
	ck_assert_ptr_null(u->argv[3]);
	ck_assert_uint_eq(u->n_env, 1);
	ck_assert_str_eq(u->env[0], "MEMORY_FILE_PATH=/var/lib/pycell/memory.json");
	ck_assert_uint_eq(u->timeout_ms, 30000);
	u = conf_upstream(&c, "fs_2");
	ck_assert_ptr_nonnull(u);
	ck_assert_uint_eq(u->timeout_ms, 5000);
	ck_assert_uint_eq(u->n_env, 0);
	ck_assert_ptr_null(conf_upstream(&c, "fs"));
	ck_assert_uint_eq(c.host_uid_base, 200000);
	ck_assert(c.warm_enabled);
	ck_assert_uint_eq(c.warm_ready, 0);
	conf_free(&c);
}
END_TEST

/* `pycell serve`'s settings: defaults, values, and each mistake named. */
START_TEST(test_http_settings)
{
	static const struct { const char *doc, *msg; } wrong[] = {
		{ "{\"http\": null}", "config c.conf: http: expected an object, got null" },
		{ "{\"http\": {\"port\": 1}}", "config c.conf: http.port: unknown key (expected one of listen, tokens, allow_hosts, "
		  "max_connections, request_timeout, max_sessions, session_idle)" },
		{ "{\"http\": {\"tokens\": \"t.json\"}}", NULL },
		{ "{\"http\": {\"allow_hosts\": [\"a.example:80\"]}}",
		  "config c.conf: http.allow_hosts[0]: expected a host name (no scheme, port, comma or space), got "
		  "\"a.example:80\"" },
		{ "{\"http\": {\"request_timeout\": \"0s\"}}", NULL },
		{ "{\"http\": {\"max_sessions\": 0}}", NULL },
	};
	struct pycell_conf c;
	struct pc_err err = { 0 };
	ck_assert_int_eq(conf_parse("{}", "c.conf", &c, &err), 0);
	ck_assert_str_eq(c.http_listen, "127.0.0.1:8080");
	ck_assert_ptr_null(c.http_tokens);
	ck_assert_uint_eq(c.http_max_connections, 256);
	ck_assert_uint_eq(c.http_request_timeout_ms, 10000);
	ck_assert_uint_eq(c.http_max_sessions, 256);
	ck_assert_uint_eq(c.http_session_idle_ms, 3600000);
	conf_free(&c);
	ck_assert_int_eq(conf_parse("{\"http\": {\"listen\": \"unix:/run/pycell/mcp.sock\", \"tokens\": "
				    "\"/etc/pycell/tokens.json\", \"allow_hosts\": [\"mcp.example.org\"], "
				    "\"max_connections\": 64, \"request_timeout\": \"5s\", \"max_sessions\": 8, "
				    "\"session_idle\": \"10m\"}}", "c.conf", &c, &err), 0);
	ck_assert_str_eq(c.http_listen, "unix:/run/pycell/mcp.sock");
	ck_assert_str_eq(c.http_tokens, "/etc/pycell/tokens.json");
	ck_assert_uint_eq(c.n_http_allow_hosts, 1);
	ck_assert_str_eq(c.http_allow_hosts[0], "mcp.example.org");
	ck_assert_uint_eq(c.http_max_connections, 64);
	ck_assert_uint_eq(c.http_request_timeout_ms, 5000);
	ck_assert_uint_eq(c.http_max_sessions, 8);
	ck_assert_uint_eq(c.http_session_idle_ms, 600000);
	conf_free(&c);
	for (size_t i = 0; i < ARRAY_SIZE(wrong); i++) {
		ck_assert_msg(conf_parse(wrong[i].doc, "c.conf", &c, &err) == -1, "%s was taken", wrong[i].doc);
		if (wrong[i].msg)
			ck_assert_str_eq(err.msg, wrong[i].msg);
	}
}
END_TEST

START_TEST(test_load_files)
{
	struct pycell_conf c;
	struct pc_err err = { 0 };
	cleanup_free char *dir = unit_mkdtemp();
	cleanup_free char *good = unit_write(dir, "pycell.conf", "{\"max_concurrent_runs\": 2}");
	cleanup_free char *badf = unit_write(dir, "bad.conf", "{\n  \"max_concurrent_runs\": 0\n}\n");
	cleanup_free char *msg = NULL;

	ck_assert_msg(conf_load(good, &c, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(c.max_concurrent_runs, 2);
	ck_assert_str_eq(c.path, good);
	conf_free(&c);

	ck_assert_int_eq(conf_load(badf, &c, &err), -1);
	msg = xasprintf("config %s: max_concurrent_runs: expected an integer from 1 to 1024, got 0", badf);
	ck_assert_str_eq(err.msg, msg);

	/* an explicit --config file must exist */
	ck_assert_int_eq(conf_load("/nonexistent/pycell.conf", &c, &err), -1);
	ck_assert_str_eq(err.msg, "config /nonexistent/pycell.conf: cannot read: No such file or directory");
	ck_assert_int_eq(err.errnum, ENOENT);
	unit_rmtree(dir);
}
END_TEST

START_TEST(test_load_default_path)
{
	/* the default file may be missing; whatever is there must load */
	struct pycell_conf c;
	struct pc_err err = { 0 };
	ck_assert_str_eq(CONF_DEFAULT_PATH, PYCELL_SYSCONFDIR "/pycell.conf");
	if (access(CONF_DEFAULT_PATH, F_OK) == 0) {
		ck_assert_msg(conf_load(NULL, &c, &err) == 0, "%s", err.msg);
		ck_assert_str_eq(c.path, CONF_DEFAULT_PATH);
	} else {
		ck_assert_msg(conf_load(NULL, &c, &err) == 0, "%s", err.msg);
		ck_assert_ptr_null(c.path);
		ck_assert_uint_eq(c.max_concurrent_runs, 4);
	}
	conf_free(&c);
}
END_TEST

/* What a reload compares: the same upstreams whatever their order in
 * the file; any change of a command, an environment or a timeout, or a
 * server more or less, is a change. */
START_TEST(test_same_upstreams)
{
	static const char *const docs[] = {
		"{'upstreams': {'a': {'command': ['x', '1'], 'env': {'K': 'v'}}, 'b': {'command': ['y']}}}",
		"{'upstreams': {'b': {'command': ['y']}, 'a': {'command': ['x', '1'], 'env': {'K': 'v'}}}}",
		"{'upstreams': {'a': {'command': ['x', '2'], 'env': {'K': 'v'}}, 'b': {'command': ['y']}}}",
		"{'upstreams': {'a': {'command': ['x', '1'], 'env': {'K': 'w'}}, 'b': {'command': ['y']}}}",
		"{'upstreams': {'a': {'command': ['x', '1'], 'env': {'K': 'v'}}, 'b': {'command': ['y'], 'timeout': '5s'}}}",
		"{'upstreams': {'a': {'command': ['x', '1'], 'env': {'K': 'v'}}}}",
		"{'upstreams': {'a': {'command': ['x', '1'], 'env': {'K': 'v'}}, 'c': {'command': ['y']}}}",
		"{}",
	};
	struct pycell_conf c[ARRAY_SIZE(docs)];
	struct pc_err err = { 0 };
	for (size_t i = 0; i < ARRAY_SIZE(docs); i++) {
		cleanup_free char *json = jq(docs[i]);
		ck_assert_msg(conf_parse(json, "c.conf", &c[i], &err) == 0, "%s: %s", docs[i], err.msg);
	}
	for (size_t i = 0; i < ARRAY_SIZE(docs); i++)
		for (size_t j = 0; j < ARRAY_SIZE(docs); j++) {
			bool same = i == j || (i < 2 && j < 2);
			ck_assert_msg(conf_same_upstreams(&c[i], &c[j]) == same, "%zu vs %zu", i, j);
		}
	for (size_t i = 0; i < ARRAY_SIZE(docs); i++)
		conf_free(&c[i]);
}
END_TEST

Suite *conf_suite(void)
{
	Suite *s = suite_create("conf");
	TCase *bad_tc = tcase_create("malformed"), *good = tcase_create("valid");
	tcase_add_loop_test(bad_tc, test_bad, 0, (int)ARRAY_SIZE(bad));
	tcase_add_test(good, test_defaults);
	tcase_add_test(good, test_full);
	tcase_add_test(good, test_http_settings);
	tcase_add_test(good, test_network);
	tcase_add_test(good, test_load_files);
	tcase_add_test(good, test_load_default_path);
	tcase_add_test(good, test_same_upstreams);
	suite_add_tcase(s, bad_tc);
	suite_add_tcase(s, good);
	return s;
}
