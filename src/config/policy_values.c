/* pycell: the values of a policy that take more than a type's rule to
 * read: binds, seccomp rules and groups, interpreter flags, tool
 * patterns, the host name, the CPU share, the backend; and the helpers
 * the table's engine shares with them (policy_fields.h). */
#include "config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <seccomp.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "config/policy_fields.h"

const char *const policy_backend_names[] = { "native", "wasm", NULL };
static const char *const bind_keys[] = { "src", "dst", "optional", "writable", NULL };
static const char *const rule_keys[] = { "syscall", "action", NULL };

void pv_binds_free(struct bind_spec *b, size_t n)
{
	for (size_t i = 0; b && i < n; i++) {
		free(b[i].src);
		free(b[i].dst);
	}
	free(b);
}

void pv_rules_free(struct seccomp_rule *r, size_t n)
{
	for (size_t i = 0; r && i < n; i++)
		free(r[i].syscall);
	free(r);
}

static bool path_under(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

static int bind_path_check(const struct jc *c, const char *key, const json_t *v, bool is_dst,
			   const char **out)
{
	static const char *const host_kernel[] = { "/proc", "/sys", "/dev" };
	if (jc_abs_path(c, key, v, out) < 0)
		return -1;
	if (strcmp(*out, "/") == 0)
		return jc_fail(c, key, is_dst ? "cannot bind over the jail's root \"/\""
					      : "cannot bind the host's root \"/\"");
	for (size_t i = 0; i < ARRAY_SIZE(host_kernel); i++) {
		if (!path_under(*out, host_kernel[i]))
			continue;
		if (is_dst)
			return jc_fail(c, key, "\"%s\" is inside %s, which the jail provides", *out,
				       host_kernel[i]);
		return jc_fail(c, key, "\"%s\" is inside %s, which would expose the host kernel's interfaces",
			       *out, host_kernel[i]);
	}
	return 0;
}

static int apply_bind(const struct jc *c, const char *key, const json_t *v, struct bind_spec *b)
{
	char k[JC_KEY_MAX];
	const char *src, *dst;
	const json_t *f;
	if (json_is_string(v)) {
		if (bind_path_check(c, key, v, false, &src) < 0 ||
		    bind_path_check(c, key, v, true, &dst) < 0)
			return -1;
		b->src = xstrdup(src);
		b->dst = xstrdup(dst);
		return 0;
	}
	if (!json_is_object(v))
		return jc_expected(c, key, "a path or an object such as {\"src\": \"/opt/venv\"}", v);
	if (jc_object(c, key, v, bind_keys) < 0)
		return -1;
	jc_key(k, key, "src");
	if (!(f = json_object_get(v, "src")))
		return jc_fail(c, k, "missing (the host path to bind)");
	if (bind_path_check(c, k, f, false, &src) < 0)
		return -1;
	dst = src;
	jc_key(k, key, "dst");
	if ((f = json_object_get(v, "dst")) && bind_path_check(c, k, f, true, &dst) < 0)
		return -1;
	jc_key(k, key, "optional");
	if ((f = json_object_get(v, "optional")) && jc_bool(c, k, f, &b->optional) < 0)
		return -1;
	jc_key(k, key, "writable");
	if ((f = json_object_get(v, "writable")) && jc_bool(c, k, f, &b->writable) < 0)
		return -1;
	b->src = xstrdup(src);
	b->dst = xstrdup(dst);
	return 0;
}

int pv_parse_binds(const struct jc *c, const char *key, const json_t *v, struct policy *p)
{
	size_t i, j, n;
	struct bind_spec *b;
	if (!json_is_array(v))
		return jc_expected(c, "filesystem.binds", "an array", v);
	n = json_array_size(v);
	b = xcalloc(n, sizeof(*b));
	for (i = 0; i < n; i++) {
		char k[JC_KEY_MAX], k2[JC_KEY_MAX];
		jc_index(k, "filesystem.binds", i);
		if (apply_bind(c, k, json_array_get(v, i), &b[i]) < 0)
			goto fail;
		for (j = 0; j < i; j++)
			if (strcmp(b[j].dst, b[i].dst) == 0)
				break;
		if (j < i) {
			jc_index(k2, "filesystem.binds", j);
			jc_fail(c, k, "\"%s\" is already the destination of %s", b[i].dst, k2);
			goto fail;
		}
	}
	pv_binds_free(p->binds, p->n_binds);
	p->binds = b;
	p->n_binds = n;
	return 0;
fail:
	pv_binds_free(b, n);
	return -1;
}

/* An array of unique strings, each accepted by `check` (which may be NULL). */
int pv_string_list(const struct jc *c, const char *key, const json_t *v,
		       int (*check)(const struct jc *, const char *, const json_t *, const char *),
		       char ***out, size_t *n_out)
{
	size_t i, j, n;
	char **list;
	if (!json_is_array(v))
		return jc_expected(c, key, "an array of strings", v);
	n = json_array_size(v);
	list = xcalloc(n, sizeof(*list));
	for (i = 0; i < n; i++) {
		char k[JC_KEY_MAX];
		const json_t *e = json_array_get(v, i);
		const char *s;
		jc_index(k, key, i);
		if (jc_string(c, k, e, &s) < 0 || (check && check(c, k, e, s) < 0))
			goto fail;
		for (j = 0; j < i; j++)
			if (strcmp(list[j], s) == 0)
				break;
		if (j < i) {
			jc_fail(c, k, "\"%s\" is listed twice", s);
			goto fail;
		}
		list[i] = xstrdup(s);
	}
	jc_strv_free(*out, *n_out);
	*out = list;
	*n_out = n;
	return 0;
fail:
	jc_strv_free(list, n);
	return -1;
}

int pv_check_group(const struct jc *c, const char *key, const json_t *v, const char *s)
{
	char list[300] = "";
	size_t i, used = 0;
	for (i = 0; seccomp_group_names[i]; i++)
		if (strcmp(s, seccomp_group_names[i]) == 0)
			return 0;
	for (i = 0; seccomp_group_names[i] && used < sizeof(list); i++)
		used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s", i ? ", " : "",
					 seccomp_group_names[i]);
	return jc_fail(c, key, "unknown seccomp group \"%s\" (expected one of %s)", s, list);
}

static int errno_from_name(const char *s)
{
	for (int e = 1; e < 4096; e++) {
		const char *n = strerrorname_np(e);
		if (n && strcmp(n, s) == 0)
			return e;
	}
	return -1;
}

/* "allow", "kill", "errno:EPERM" or "errno:1" */
static int parse_action(const char *s, struct seccomp_rule *r)
{
	if (strcmp(s, "allow") == 0) {
		r->action_errno = 0;
		r->kill = false;
		return 0;
	}
	if (strcmp(s, "kill") == 0) {
		r->action_errno = 0;
		r->kill = true;
		return 0;
	}
	if (strncmp(s, "errno:", 6) != 0)
		return -1;
	s += 6;
	if (*s >= '1' && *s <= '9' && strspn(s, "0123456789") == strlen(s) && strlen(s) <= 4) {
		int e = atoi(s);
		if (e > 4095)
			return -1;
		r->action_errno = e;
	} else if (*s == 'E' && (r->action_errno = errno_from_name(s)) > 0) {
		;
	} else {
		return -1;
	}
	r->kill = false;
	return 0;
}

int pv_parse_rules(const struct jc *c, const char *key, const json_t *v, struct policy *p)
{
	size_t i, j, n;
	struct seccomp_rule *rules;
	if (!json_is_array(v))
		return jc_expected(c, "seccomp.rules", "an array", v);
	n = json_array_size(v);
	rules = xcalloc(n, sizeof(*rules));
	for (i = 0; i < n; i++) {
		char k[JC_KEY_MAX], kk[JC_KEY_MAX];
		const json_t *e = json_array_get(v, i), *f;
		const char *name, *action;
		int nr;
		jc_index(k, "seccomp.rules", i);
		if (jc_object(c, k, e, rule_keys) < 0)
			goto fail;
		jc_key(kk, k, "syscall");
		if (!(f = json_object_get(e, "syscall"))) {
			jc_fail(c, kk, "missing (the name of a system call)");
			goto fail;
		}
		if (jc_string(c, kk, f, &name) < 0)
			goto fail;
		nr = seccomp_syscall_resolve_name(name);
		if (nr == __NR_SCMP_ERROR) {
			jc_fail(c, kk, "unknown system call \"%s\"", name);
			goto fail;
		}
		/* libseccomp knows it, but only as another architecture's call */
		if (nr < 0) {
			jc_fail(c, kk, "\"%s\" is not a system call on this architecture", name);
			goto fail;
		}
		for (j = 0; j < i; j++)
			if (strcmp(rules[j].syscall, name) == 0)
				break;
		if (j < i) {
			jc_fail(c, kk, "\"%s\" already has a rule", name);
			goto fail;
		}
		jc_key(kk, k, "action");
		if (!(f = json_object_get(e, "action"))) {
			jc_fail(c, kk, "missing (\"allow\", \"kill\" or \"errno:NAME\")");
			goto fail;
		}
		if (!json_is_string(f) || jc_string(c, kk, f, &action) < 0 ||
		    parse_action(action, &rules[i]) < 0) {
			jc_expected(c, kk, "\"allow\", \"kill\" or \"errno:NAME\" such as \"errno:EPERM\"", f);
			goto fail;
		}
		rules[i].syscall = xstrdup(name);
	}
	pv_rules_free(p->seccomp_rules, p->n_seccomp_rules);
	p->seccomp_rules = rules;
	p->n_seccomp_rules = n;
	return 0;
fail:
	pv_rules_free(rules, n);
	return -1;
}

/* Options that change what python runs (-c, -m, a file, -) belong to
 * pycell; only single-letter switches and -X / -W with their argument
 * are accepted.  -I and -E are refused: the jail finds the pycell module
 * through PYTHONPATH, and its environment is already clean. */
int pv_parse_python_flags(const struct jc *c, const char *key, const json_t *v, struct policy *p)
{
	static const char what[] = "an interpreter option such as -B, -X utf8 or -W error";
	char **flags = NULL;
	size_t n_flags = 0, n;
	bool want_arg = false;
	if (pv_string_list(c, "python.flags", v, NULL, &flags, &n_flags) < 0)
		return -1;
	n = n_flags;
	for (size_t i = 0; i < n; i++) {
		char k[JC_KEY_MAX];
		const char *f = flags[i];
		jc_index(k, "python.flags", i);
		if (want_arg) {
			want_arg = false;
			continue;
		}
		if (f[0] != '-' || f[1] == '\0' || f[1] == '-')
			goto bad;
		for (const char *q = f + 1; *q; q++) {
			if (*q == 'X' || *q == 'W') {
				want_arg = q[1] == '\0';
				break;
			}
			if (*q == 'I' || *q == 'E') {
				jc_fail(c, k, "\"%s\": -I and -E would hide the pycell module, which is found through PYTHONPATH (the jail's environment is already clean)", f);
				goto fail;
			}
			if (!strchr("bBdOPqsSuvR", *q))
				goto bad;
		}
		continue;
bad:
		jc_expected(c, k, what, json_array_get(v, i));
fail:
		jc_strv_free(flags, n_flags);
		return -1;
	}
	if (want_arg) {
		char k[JC_KEY_MAX];
		jc_index(k, "python.flags", n - 1);
		jc_fail(c, k, "\"%s\" needs an argument after it", flags[n - 1]);
		jc_strv_free(flags, n_flags);
		return -1;
	}
	jc_strv_free(p->python_flags, p->n_python_flags);
	p->python_flags = flags;
	p->n_python_flags = n_flags;
	return 0;
}

/* A module's dotted name: Python identifiers (ASCII here) joined by dots. */
int pv_check_module(const struct jc *c, const char *key, const json_t *v, const char *s)
{
	static const char first[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_";
	const char *p = s;
	if (strlen(s) > 200)
		goto bad;
	for (;;) {
		if (!*p || !strchr(first, *p))
			goto bad;
		p += strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789");
		if (!*p)
			return 0;
		if (*p++ != '.')
			goto bad;
	}
bad:
	return jc_expected(c, key, "a module name such as numpy or matplotlib.pyplot", v);
}

/* "server.tool" with MCP's tool-name characters, or "server.*". */
int pv_check_tool_pattern(const struct jc *c, const char *key, const json_t *v, const char *s)
{
	static const char tool_chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.";
	size_t server = strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_-");
	const char *rest = s + server + 1;
	if (server == 0 || server > 64 || s[server] != '.' || strlen(s) > 200)
		goto bad;
	if (strcmp(rest, "*") == 0 || (*rest && strspn(rest, tool_chars) == strlen(rest)))
		return 0;
bad:
	return jc_expected(c, key, "a tool name such as memory.read_graph or a pattern such as memory.*", v);
}

static bool hostname_valid(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 64 || s[0] == '-' || s[0] == '.' || s[n - 1] == '-' || s[n - 1] == '.')
		return false;
	return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.") == n &&
	       !strstr(s, "..");
}

int pv_apply_choice(const struct jc *c, const char *key, const json_t *v,
			const char *const choices[], int *out)
{
	char what[120] = "";
	size_t used = 0;
	for (int i = 0; choices[i]; i++)
		if (json_is_string(v) && strcmp(json_string_value(v), choices[i]) == 0 &&
		    json_string_length(v) == strlen(choices[i])) {
			*out = i;
			return 0;
		}
	for (int i = 0; choices[i]; i++)
		used += (size_t)snprintf(what + used, sizeof(what) - used, "%s\"%s\"",
					 i == 0 ? "" : choices[i + 1] ? ", " : " or ", choices[i]);
	return jc_expected(c, key, what, v);
}

json_t *pv_strv_json(char *const *v, size_t n)
{
	json_t *a = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

json_t *pv_action_json(const struct seccomp_rule *r)
{
	const char *name;
	if (r->kill)
		return json_string("kill");
	if (r->action_errno == 0)
		return json_string("allow");
	name = strerrorname_np(r->action_errno);
	if (name)
		return json_sprintf("errno:%s", name);
	return json_sprintf("errno:%d", r->action_errno);
}

int pv_parse_cpu(const struct jc *c, const char *key, const json_t *v, struct policy *p)
{
	double cores = json_is_number(v) ? json_number_value(v) : -1;
	if (!(cores == 0 || (cores >= 0.01 && cores <= 1024)))
		return jc_expected(c, key, "a number of cores from 0.01 to 1024 (or 0 for no limit)", v);
	p->limits.cpu_millis = (uint32_t)(cores * 1000 + 0.5);
	return 0;
}

/* 0 is no "no limit" here: it is a memory cgroup for each session */
int pv_parse_shared_memory(const struct jc *c, const char *key, const json_t *v, struct policy *p)
{
	uint64_t n;
	if (jc_size(c, key, v, 0, JC_NO_MAX, true, &n) < 0)
		return -1;
	if (n && n < SHARED_MEMORY_MIN)
		return jc_expected(c, key, "a size of at least 64M (or 0: a memory cgroup for each session)", v);
	p->sessions.shared_memory_bytes = n;
	return 0;
}

int pv_parse_env(const struct jc *c, const char *key, const json_t *v, struct policy *p)
{
	if (json_object_get(v, "PYTHONPATH"))
		return jc_fail(c, "python.env.PYTHONPATH",
			       "set by pycell, which finds its module through it (bind a directory or use a venv's interpreter instead)");
	return jc_env(c, key, v, &p->env, &p->n_env);
}

int pv_parse_backend(const struct jc *c, const char *key, const json_t *v, struct policy *p)
{
	int choice;
#ifndef HAVE_WASM
	/* refused, never accepted and run as CPython */
	if (json_is_string(v) && strcmp(json_string_value(v), "wasm") == 0)
		return jc_fail(c, key, "\"wasm\" (Pyodide) is not built into this pycell "
			       "(configure --with-wasm): use \"native\" or leave backend out");
#endif
	if (pv_apply_choice(c, key, v, policy_backend_names, &choice) < 0)
		return -1;
	free(p->backend);
	p->backend = xstrdup(policy_backend_names[choice]);
	return 0;
}

int pv_parse_hostname(const struct jc *c, const char *key, const json_t *v, struct policy *p)
{
	if (!json_is_string(v) || !hostname_valid(json_string_value(v)) ||
	    strlen(json_string_value(v)) != json_string_length(v))
		return jc_expected(c, key, "a host name of letters, digits, '-' and '.' (at most 64)", v);
	free(p->hostname);
	p->hostname = xstrdup(json_string_value(v));
	return 0;
}


/* ------------------------------------------------------------ network */

static const char *const network_keys[] = { "egress", NULL };

/* A host name as DNS writes it: labels of letters, digits, '-' and '_'
 * (1 to 63 each, no '-' first or last), dots between, 253 at most; at
 * least one letter somewhere, so that a mistyped address is not taken
 * for a name. */
static bool host_name_ok(const char *s, size_t n)
{
	size_t label = 0;
	bool alpha = false;
	if (n == 0 || n > EGRESS_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char ch = s[i];
		if (ch == '.') {
			if (label == 0 || s[i - 1] == '-')
				return false;
			label = 0;
			continue;
		}
		if (!(isalnum((unsigned char)ch) || ch == '-' || ch == '_'))
			return false;
		if (ch == '-' && label == 0)
			return false;
		alpha |= isalpha((unsigned char)ch) != 0;
		if (++label > 63)
			return false;
	}
	return label > 0 && s[n - 1] != '-' && alpha;
}

int policy_egress_parse(const char *s, struct egress_dest *d, const char **why)
{
	const char *colon = strrchr(s, ':'), *slash;
	char host[EGRESS_NAME_MAX + 1];
	size_t hn;
	struct in_addr a;

	memset(d, 0, sizeof(*d));
	if (s[0] == '[' || (colon && memchr(s, ':', (size_t)(colon - s)))) {
		*why = "IPv6 destinations are not supported (an egress run has IPv4 only)";
		return -1;
	}
	if (!colon) {
		*why = "no port: write HOST:PORT, or HOST:* for any port";
		return -1;
	}
	if (strcmp(colon + 1, "*") != 0) {
		char *end;
		unsigned long port;
		errno = 0;
		port = strtoul(colon + 1, &end, 10);
		if (!isdigit((unsigned char)colon[1]) || *end || errno || port < 1 || port > 65535) {
			*why = "the port is not a number from 1 to 65535 (or *)";
			return -1;
		}
		d->port = (uint16_t)port;
	}
	hn = (size_t)(colon - s);
	if (hn == 0 || hn > EGRESS_NAME_MAX) {
		*why = hn ? "the host is longer than 253 characters" : "no host before the port";
		return -1;
	}
	memcpy(host, s, hn);
	host[hn] = '\0';
	slash = strchr(host, '/');
	d->prefix = 32;
	if (slash) {
		char *end;
		unsigned long pfx;
		errno = 0;
		pfx = strtoul(slash + 1, &end, 10);
		if (!isdigit((unsigned char)slash[1]) || *end || errno || pfx > 32) {
			*why = "the prefix length after / is not a number from 0 to 32";
			return -1;
		}
		d->prefix = (unsigned)pfx;
		host[slash - host] = '\0';
	}
	if (inet_pton(AF_INET, host, &a) == 1) {
		d->mask = d->prefix ? htonl(~0u << (32 - d->prefix)) : 0;
		d->addr = a.s_addr;
		if (d->addr & ~d->mask) {
			*why = "the address has bits set past its prefix length (write the network's first address)";
			return -1;
		}
		return 0;
	}
	if (slash) {
		*why = "a prefix length goes after an IPv4 address only";
		return -1;
	}
	if (strspn(host, "0123456789.") == hn) {
		*why = "not an IPv4 address (four numbers from 0 to 255)";
		return -1;
	}
	if (!host_name_ok(host, hn)) {
		*why = "not a host name (labels of letters, digits, - and _, dots between)";
		return -1;
	}
	for (size_t i = 0; i < hn; i++)
		d->name[i] = (char)tolower((unsigned char)host[i]);
	return 0;
}

static int check_egress(const struct jc *c, const char *key, const json_t *v, const char *s)
{
	struct egress_dest d;
	const char *why;
	(void)v;
	if (policy_egress_parse(s, &d, &why) < 0)
		return jc_fail(c, key, "\"%s\": %s", s, why);
	return 0;
}

int pv_parse_network(const struct jc *c, const char *key, const json_t *v, struct policy *p)
{
	static const char *const modes[] = { "none", "loopback", NULL };
	struct net_policy *np = &p->network;
	char k[JC_KEY_MAX];
	const json_t *e;
	char **list = NULL;
	size_t n = 0;
	int mode;

	if (json_is_string(v) && strcmp(json_string_value(v), "egress") == 0)
		return jc_fail(c, key, "an egress network lists its destinations: {\"egress\": [\"api.example.com:443\"]}");
	if (json_is_string(v)) {
		if (pv_apply_choice(c, key, v, modes, &mode) < 0)
			return -1;
		jc_strv_free(np->egress, np->n_egress);
		np->egress = NULL;
		np->n_egress = 0;
		np->mode = (enum net_mode)mode;
		return 0;
	}
	if (!json_is_object(v))
		return jc_expected(c, key, "\"none\", \"loopback\" or {\"egress\": [\"HOST:PORT\", ...]}", v);
	if (jc_object(c, key, v, network_keys) < 0)
		return -1;
	jc_key(k, key, "egress");
	if (!(e = json_object_get(v, "egress")))
		return jc_fail(c, k, "missing (the destinations a run may reach, e.g. [\"api.example.com:443\"])");
	if (pv_string_list(c, k, e, check_egress, &list, &n) < 0)
		return -1;
	if (n == 0 || n > EGRESS_MAX) {
		jc_strv_free(list, n);
		if (n == 0)
			return jc_fail(c, k, "empty: give at least one destination, or use \"none\"");
		return jc_fail(c, k, "%zu destinations: at most %d", n, EGRESS_MAX);
	}
	jc_strv_free(np->egress, np->n_egress);
	np->egress = list;
	np->n_egress = n;
	np->mode = NET_EGRESS;
	return 0;
}

/* ------------------------------------------------------------ packages */

static bool name_char(char ch)
{
	return isalnum((unsigned char)ch) || ch == '.' || ch == '_' || ch == '-';
}

bool policy_requirement_ok(const char *s, const char **why)
{
	static const char *const ops[] = { "===", "==", "!=", "<=", ">=", "~=", "<", ">" };
	size_t n = 0;
	while (name_char(s[n]))
		n++;
	if (n == 0 || !isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[n - 1]) || n > 100) {
		*why = "not a package name (letters, digits, . _ -, starting and ending with a letter or digit)";
		return false;
	}
	s += n;
	while (*s) {
		size_t k, v = 0;
		for (k = 0; k < ARRAY_SIZE(ops); k++)
			if (strncmp(s, ops[k], strlen(ops[k])) == 0)
				break;
		if (k == ARRAY_SIZE(ops)) {
			*why = "after the name: version specifiers such as ==1.2 or >=2,<3 (no extras, markers, spaces or URLs)";
			return false;
		}
		s += strlen(ops[k]);
		while (s[v] && (isalnum((unsigned char)s[v]) || strchr(".*+!_-", s[v])))
			v++;
		if (v == 0) {
			*why = "a version specifier without a version";
			return false;
		}
		s += v;
		if (*s == ',')
			s++;
		else if (*s) {
			*why = "after the name: version specifiers such as ==1.2 or >=2,<3 (no extras, markers, spaces or URLs)";
			return false;
		}
	}
	return true;
}

int pv_check_allow(const struct jc *c, const char *key, const json_t *v, const char *s)
{
	const char *why;
	(void)v;
	if (strcmp(s, "*") == 0 || policy_requirement_ok(s, &why))
		return 0;
	return jc_fail(c, key, "\"%s\": %s", s, why);
}

char *policy_index_dest(const char *url)
{
	bool https = strncmp(url, "https://", 8) == 0;
	const char *h = url + (https ? 8 : 7);
	size_t n = strcspn(h, "/");
	if (memchr(h, ':', n))
		return xasprintf("%.*s", (int)n, h);
	return xasprintf("%.*s:%s", (int)n, h, https ? "443" : "80");
}

int pv_parse_index(const struct jc *c, const char *key, const json_t *v, struct policy *p)
{
	const char *s, *h, *why;
	struct egress_dest d;
	cleanup_free char *dest = NULL;

	if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
		return jc_expected(c, key, "an index URL such as \"https://pypi.org/simple/\"", v);
	s = json_string_value(v);
	if (strncmp(s, "https://", 8) != 0 && strncmp(s, "http://", 7) != 0)
		return jc_fail(c, key, "\"%s\": an http:// or https:// URL", s);
	dest = policy_index_dest(s);
	h = strstr(s, "//") + 2;
	if (policy_egress_parse(dest, &d, &why) < 0)
		return jc_fail(c, key, "\"%s\": the host and port (%s): %s", s, dest, why);
	if (d.port == 0)
		return jc_fail(c, key, "\"%s\": the host and port (%s): a port, not *", s, dest);
	h += strcspn(h, "/");
	if (strspn(h, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~/%") != strlen(h))
		return jc_fail(c, key, "\"%s\": the path has characters other than letters, digits and - . _ ~ / %%", s);
	free(p->packages.index);
	p->packages.index = xstrdup(s);
	return 0;
}
