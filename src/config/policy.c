/* pycell: policy files (man pycell-policy(5)).
 *
 * A file is applied on top of a base: the built-in defaults, or the policy
 * named by "extends".  Objects merge key by key (python.env too), arrays
 * and scalars replace.  Every file is validated as it is applied, so an
 * error names the file that holds the bad key. */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>

#include "config/json_check.h"
#include "config/policy.h"

#define DEFAULT_DESCRIPTION "Default policy: a private loopback network (nothing routed out), 512M memory, 30 s, no tool calls."

const char *const seccomp_group_names[] = {
	"base", "threads", "process", "fs_write", "sockets", "ipc", "sched", "memlock", "numa",
	"aio", NULL
};

const char *const seccomp_default_groups[] = {
	"base", "threads", "process", "fs_write", "sockets", "ipc", "sched", NULL
};

static const char *const top_keys[] = { "extends", "description", "limits", "filesystem",
					"network", "seccomp", "python", "tools", "backend",
					"identity", NULL };
static const char *const limits_keys[] = { "timeout", "memory", "cpu", "pids", "output", "tmp",
					   "workspace", "file_size", "open_files", NULL };
static const char *const filesystem_keys[] = { "binds", "ca_certificates", "dev_shm", NULL };
static const char *const bind_keys[] = { "src", "dst", "optional", "writable", NULL };
static const char *const seccomp_keys[] = { "groups", "rules", NULL };
static const char *const rule_keys[] = { "syscall", "action", NULL };
static const char *const python_keys[] = { "interpreter", "flags", "env", NULL };
static const char *const tools_keys[] = { "allow", "budget", "max_argument_bytes",
					  "max_result_bytes", NULL };
static const char *const identity_keys[] = { "uid", "gid", "hostname", NULL };

static char **strv_dup(const char *const *v, size_t n)
{
	char **d = xcalloc(n ? n : 1, sizeof(*d));
	for (size_t i = 0; i < n; i++)
		d[i] = xstrdup(v[i]);
	return d;
}

static char *name_from_origin(const char *origin)
{
	const char *base = strrchr(origin, '/');
	size_t n;
	base = base ? base + 1 : origin;
	n = strlen(base);
	if (n > 5 && strcmp(base + n - 5, ".json") == 0)
		n -= 5;
	return xasprintf("%.*s", (int)n, base);
}

void policy_init_default(struct policy *p)
{
	memset(p, 0, sizeof(*p));
	p->name = xstrdup("default");
	p->description = xstrdup(DEFAULT_DESCRIPTION);
	p->limits = (struct limits){
		.timeout_ms = 30 * 1000,
		.memory_bytes = 512 * MiB,
		.cpu_millis = 1000,
		.pids = 64,
		.output_bytes = 1 * MiB,
		.tmp_bytes = 64 * MiB,
		.workspace_bytes = 64 * MiB,
		.file_bytes = 0, /* storage is capped by the tmpfs sizes and the memory limit */
		.open_files = 256,
	};
	p->ca_certificates = false;
	p->dev_shm = true;
	p->network = NET_LOOPBACK;
	while (seccomp_default_groups[p->n_seccomp_groups])
		p->n_seccomp_groups++;
	p->seccomp_groups = strv_dup(seccomp_default_groups, p->n_seccomp_groups);
	p->python = xstrdup(DEFAULT_PYTHON);
	p->tools_budget = 50;
	p->tools_arg_bytes = 64 * KiB;
	p->tools_result_bytes = 1 * MiB;
	p->backend = xstrdup("native");
	p->jail_uid = 1000;
	p->jail_gid = 1000;
	p->hostname = xstrdup("pycell");
}

static void binds_free(struct bind_spec *b, size_t n)
{
	for (size_t i = 0; b && i < n; i++) {
		free(b[i].src);
		free(b[i].dst);
	}
	free(b);
}

static void rules_free(struct seccomp_rule *r, size_t n)
{
	for (size_t i = 0; r && i < n; i++)
		free(r[i].syscall);
	free(r);
}

void policy_free(struct policy *p)
{
	if (!p)
		return;
	free(p->name);
	free(p->path);
	free(p->description);
	binds_free(p->binds, p->n_binds);
	jc_strv_free(p->seccomp_groups, p->n_seccomp_groups);
	rules_free(p->seccomp_rules, p->n_seccomp_rules);
	free(p->python);
	jc_strv_free(p->python_flags, p->n_python_flags);
	jc_strv_free(p->env, p->n_env);
	jc_strv_free(p->tools_allow, p->n_tools_allow);
	free(p->backend);
	free(p->hostname);
	memset(p, 0, sizeof(*p));
}

bool policy_is_name(const char *s)
{
	size_t n = strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_-");
	return n > 0 && n <= 64 && s[n] == '\0';
}

bool policy_is_path(const char *s)
{
	size_t n = strlen(s);
	return strchr(s, '/') || (n > 5 && strcmp(s + n - 5, ".json") == 0);
}

const char *const *policy_search_path(void)
{
	static char datadir_policy[PATH_MAX];
	static const char *dirs[3];
	snprintf(datadir_policy, sizeof(datadir_policy), "%s/policy", pycell_datadir());
	dirs[0] = PYCELL_SYSCONFDIR "/policy.d";
	dirs[1] = datadir_policy;
	dirs[2] = NULL;
	return dirs;
}

/* ------------------------------------------------------------ sections */

static int apply_limits(const struct jc *c, const json_t *o, struct limits *l)
{
	const json_t *v;
	uint64_t n;
	if (jc_object(c, "limits", o, limits_keys) < 0)
		return -1;
	if ((v = json_object_get(o, "timeout")) &&
	    jc_duration(c, "limits.timeout", v, 10, 24 * 3600 * 1000, true, &l->timeout_ms) < 0)
		return -1;
	if ((v = json_object_get(o, "memory")) &&
	    jc_size(c, "limits.memory", v, 16 * MiB, JC_NO_MAX, true, &l->memory_bytes) < 0)
		return -1;
	if ((v = json_object_get(o, "cpu"))) {
		double cores = json_is_number(v) ? json_number_value(v) : -1;
		if (!(cores == 0 || (cores >= 0.01 && cores <= 1024)))
			return jc_expected(c, "limits.cpu",
					   "a number of cores from 0.01 to 1024 (or 0 for no limit)", v);
		l->cpu_millis = (uint32_t)(cores * 1000 + 0.5);
	}
	if ((v = json_object_get(o, "pids"))) {
		/* init and python are two tasks already */
		if (jc_uint(c, "limits.pids", v, 2, 4194304, true, &n) < 0)
			return -1;
		l->pids = (uint32_t)n;
	}
	if ((v = json_object_get(o, "output")) &&
	    jc_size(c, "limits.output", v, 1 * KiB, 1 * GiB, false, &l->output_bytes) < 0)
		return -1;
	/* tmpfs treats size=0 as unlimited, so 0 is not offered here */
	if ((v = json_object_get(o, "tmp")) &&
	    jc_size(c, "limits.tmp", v, 1 * MiB, JC_NO_MAX, false, &l->tmp_bytes) < 0)
		return -1;
	if ((v = json_object_get(o, "workspace")) &&
	    jc_size(c, "limits.workspace", v, 1 * MiB, JC_NO_MAX, false, &l->workspace_bytes) < 0)
		return -1;
	if ((v = json_object_get(o, "file_size")) &&
	    jc_size(c, "limits.file_size", v, 4 * KiB, JC_NO_MAX, true, &l->file_bytes) < 0)
		return -1;
	if ((v = json_object_get(o, "open_files"))) {
		/* 1048576 is the kernel's default nr_open, the most RLIMIT_NOFILE can be */
		if (jc_uint(c, "limits.open_files", v, 16, 1048576, false, &n) < 0)
			return -1;
		l->open_files = (uint32_t)n;
	}
	return 0;
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

static int apply_binds(const struct jc *c, const json_t *v, struct policy *p)
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
	binds_free(p->binds, p->n_binds);
	p->binds = b;
	p->n_binds = n;
	return 0;
fail:
	binds_free(b, n);
	return -1;
}

static int apply_filesystem(const struct jc *c, const json_t *o, struct policy *p)
{
	const json_t *v;
	if (jc_object(c, "filesystem", o, filesystem_keys) < 0)
		return -1;
	if ((v = json_object_get(o, "binds")) && apply_binds(c, v, p) < 0)
		return -1;
	if ((v = json_object_get(o, "ca_certificates")) &&
	    jc_bool(c, "filesystem.ca_certificates", v, &p->ca_certificates) < 0)
		return -1;
	if ((v = json_object_get(o, "dev_shm")) && jc_bool(c, "filesystem.dev_shm", v, &p->dev_shm) < 0)
		return -1;
	return 0;
}

/* An array of unique strings, each accepted by `check` (which may be NULL). */
static int string_list(const struct jc *c, const char *key, const json_t *v,
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

static int check_group(const struct jc *c, const char *key, const json_t *v, const char *s)
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

static int apply_rules(const struct jc *c, const json_t *v, struct policy *p)
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
	rules_free(p->seccomp_rules, p->n_seccomp_rules);
	p->seccomp_rules = rules;
	p->n_seccomp_rules = n;
	return 0;
fail:
	rules_free(rules, n);
	return -1;
}

static int apply_seccomp(const struct jc *c, const json_t *o, struct policy *p)
{
	const json_t *v;
	if (jc_object(c, "seccomp", o, seccomp_keys) < 0)
		return -1;
	if ((v = json_object_get(o, "groups")) &&
	    string_list(c, "seccomp.groups", v, check_group, &p->seccomp_groups, &p->n_seccomp_groups) < 0)
		return -1;
	if ((v = json_object_get(o, "rules")) && apply_rules(c, v, p) < 0)
		return -1;
	return 0;
}

/* Options that change what python runs (-c, -m, a file, -) belong to
 * pycell; only single-letter switches and -X / -W with their argument
 * are accepted.  -I and -E are refused: the jail finds the pycell module
 * through PYTHONPATH, and its environment is already clean. */
static int apply_python_flags(const struct jc *c, const json_t *v, struct policy *p)
{
	static const char what[] = "an interpreter option such as -B, -X utf8 or -W error";
	char **flags = NULL;
	size_t n_flags = 0, n;
	bool want_arg = false;
	if (string_list(c, "python.flags", v, NULL, &flags, &n_flags) < 0)
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

static int apply_python(const struct jc *c, const json_t *o, struct policy *p)
{
	const json_t *v;
	const char *s;
	if (jc_object(c, "python", o, python_keys) < 0)
		return -1;
	if ((v = json_object_get(o, "interpreter"))) {
		if (jc_abs_path(c, "python.interpreter", v, &s) < 0)
			return -1;
		free(p->python);
		p->python = xstrdup(s);
	}
	if ((v = json_object_get(o, "flags")) && apply_python_flags(c, v, p) < 0)
		return -1;
	if ((v = json_object_get(o, "env"))) {
		if (json_object_get(v, "PYTHONPATH"))
			return jc_fail(c, "python.env.PYTHONPATH",
				       "set by pycell, which finds its module through it (bind a directory or use a venv's interpreter instead)");
		if (jc_env(c, "python.env", v, &p->env, &p->n_env) < 0)
			return -1;
	}
	return 0;
}

/* "server.tool" with MCP's tool-name characters, or "server.*". */
static int check_tool_pattern(const struct jc *c, const char *key, const json_t *v, const char *s)
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

static int apply_tools(const struct jc *c, const json_t *o, struct policy *p)
{
	const json_t *v;
	uint64_t n;
	if (jc_object(c, "tools", o, tools_keys) < 0)
		return -1;
	if ((v = json_object_get(o, "allow")) &&
	    string_list(c, "tools.allow", v, check_tool_pattern, &p->tools_allow, &p->n_tools_allow) < 0)
		return -1;
	if ((v = json_object_get(o, "budget"))) {
		if (jc_uint(c, "tools.budget", v, 0, 100000, false, &n) < 0)
			return -1;
		p->tools_budget = (uint32_t)n;
	}
	if ((v = json_object_get(o, "max_argument_bytes")) &&
	    jc_size(c, "tools.max_argument_bytes", v, 1 * KiB, 16 * MiB, false, &p->tools_arg_bytes) < 0)
		return -1;
	if ((v = json_object_get(o, "max_result_bytes")) &&
	    jc_size(c, "tools.max_result_bytes", v, 1 * KiB, 64 * MiB, false, &p->tools_result_bytes) < 0)
		return -1;
	return 0;
}

static bool hostname_valid(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 64 || s[0] == '-' || s[0] == '.' || s[n - 1] == '-' || s[n - 1] == '.')
		return false;
	return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.") == n &&
	       !strstr(s, "..");
}

static int apply_identity(const struct jc *c, const json_t *o, struct policy *p)
{
	const json_t *v;
	uint64_t n;
	/* The jail maps ids 0..65535; 0 would be root inside. */
	if (jc_object(c, "identity", o, identity_keys) < 0)
		return -1;
	if ((v = json_object_get(o, "uid"))) {
		if (jc_uint(c, "identity.uid", v, 1, 65534, false, &n) < 0)
			return -1;
		p->jail_uid = (uid_t)n;
	}
	if ((v = json_object_get(o, "gid"))) {
		if (jc_uint(c, "identity.gid", v, 1, 65534, false, &n) < 0)
			return -1;
		p->jail_gid = (gid_t)n;
	}
	if ((v = json_object_get(o, "hostname"))) {
		if (!json_is_string(v) || !hostname_valid(json_string_value(v)) ||
		    strlen(json_string_value(v)) != json_string_length(v))
			return jc_expected(c, "identity.hostname",
					   "a host name of letters, digits, '-' and '.' (at most 64)", v);
		free(p->hostname);
		p->hostname = xstrdup(json_string_value(v));
	}
	return 0;
}

static int apply_choice(const struct jc *c, const char *key, const json_t *v,
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

static const char *const network_names[] = { "none", "loopback", NULL };
static const char *const backend_names[] = { "native", NULL };

/* Apply the keys of `root` (validated) on top of *p. */
static int policy_apply(const struct jc *c, const json_t *root, struct policy *p)
{
	const json_t *v;
	const char *s;
	int choice;

	free(p->description);
	p->description = NULL;
	if ((v = json_object_get(root, "description"))) {
		if (jc_string(c, "description", v, &s) < 0)
			return -1;
		p->description = xstrdup(s);
	}
	if ((v = json_object_get(root, "limits")) && apply_limits(c, v, &p->limits) < 0)
		return -1;
	if ((v = json_object_get(root, "filesystem")) && apply_filesystem(c, v, p) < 0)
		return -1;
	if ((v = json_object_get(root, "network"))) {
		if (apply_choice(c, "network", v, network_names, &choice) < 0)
			return -1;
		p->network = choice == 1 ? NET_LOOPBACK : NET_NONE;
	}
	if ((v = json_object_get(root, "seccomp")) && apply_seccomp(c, v, p) < 0)
		return -1;
	if ((v = json_object_get(root, "python")) && apply_python(c, v, p) < 0)
		return -1;
	if ((v = json_object_get(root, "tools")) && apply_tools(c, v, p) < 0)
		return -1;
	if ((v = json_object_get(root, "backend"))) {
		/* refused, never accepted and run as CPython, until it exists */
		if (json_is_string(v) && strcmp(json_string_value(v), "wasm") == 0)
			return jc_fail(c, "backend", "\"wasm\" (Pyodide) is not built in this version: "
				       "use \"native\" or leave backend out");
		if (apply_choice(c, "backend", v, backend_names, &choice) < 0)
			return -1;
		free(p->backend);
		p->backend = xstrdup(backend_names[choice]);
	}
	if ((v = json_object_get(root, "identity")) && apply_identity(c, v, p) < 0)
		return -1;
	return 0;
}

/* ------------------------------------------------------------ loading */

/* The files of an "extends" chain being loaded, outermost first. */
struct chain {
	const char *real[POLICY_MAX_EXTENDS + 1];
	int n;
};

static int build(const char *text, const char *origin, const char *self_real,
		 struct chain *chain, struct policy *out, struct pc_err *err);

/* Read `path` and build it as the next link of the chain.  A failure to
 * read it is reported in the context `c`/`key` of the file that extends it
 * (both NULL for the file policy_load was asked for, where the chain is
 * still empty). */
static int build_file(const struct jc *c, const char *key, const char *path,
		      struct chain *chain, struct policy *out, struct pc_err *err)
{
	cleanup_free char *real = realpath(path, NULL);
	cleanup_free char *text = NULL;
	struct jc fc = { "policy", path, err };
	if (!real) {
		if (key)
			return pc_syserr(err, "policy", "%s %s: %s: cannot read %s", c->kind, c->origin, key, path);
		return pc_syserr(err, "policy", "policy %s: cannot read", path);
	}
	for (int i = 0; i < chain->n; i++)
		if (strcmp(chain->real[i], real) == 0)
			return jc_fail(c, key, "cycle: %s is already being loaded", path);
	if (chain->n > POLICY_MAX_EXTENDS)
		return jc_fail(c, key, "more than %d levels of \"extends\"", POLICY_MAX_EXTENDS);
	if (jc_read_file(&fc, path, &text) < 0)
		return -1;
	return build(text, path, real, chain, out, err);
}

/* Resolve the "extends" reference of the file `self_real` (NULL for a
 * string) into a path, or NULL for the built-in default. */
static int resolve_extends(const struct jc *c, const json_t *v, const char *self_real, char **out)
{
	const char *ref;
	if (!json_is_string(v) || jc_string(c, "extends", v, &ref) < 0 ||
	    (!policy_is_name(ref) && !policy_is_path(ref)))
		return jc_expected(c, "extends",
				   "a policy name ([a-z0-9_-]+) or a path (containing / or ending in .json)", v);
	if (policy_is_path(ref)) {
		const char *slash = self_real ? strrchr(self_real, '/') : NULL;
		if (ref[0] != '/' && slash)
			*out = xasprintf("%.*s/%s", (int)(slash - self_real), self_real, ref);
		else
			*out = xstrdup(ref);
		return 0;
	}
	for (const char *const *d = policy_search_path(); *d; d++) {
		cleanup_free char *cand = xasprintf("%s/%s.json", *d, ref);
		cleanup_free char *real = realpath(cand, NULL);
		/* /etc/pycell/policy.d/default.json may extend the shipped "default" */
		if (!real || (self_real && strcmp(real, self_real) == 0))
			continue;
		*out = steal_ptr(&cand);
		return 0;
	}
	if (strcmp(ref, "default") == 0) {
		*out = NULL;
		return 0;
	}
	const char *const *d = policy_search_path();
	return jc_fail(c, "extends", "no policy named \"%s\" in %s or %s", ref, d[0], d[1]);
}

/* Build the base named by "extends" into *p. */
static int build_base(const struct jc *c, const json_t *ext, const char *self_real,
		      struct chain *chain, struct policy *p, struct pc_err *err)
{
	cleanup_free char *base = NULL;
	int ret;
	if (resolve_extends(c, ext, self_real, &base) < 0)
		return -1;
	if (!base) {
		policy_init_default(p);
		return 0;
	}
	if (self_real)
		chain->real[chain->n++] = self_real;
	ret = build_file(c, "extends", base, chain, p, err);
	if (self_real)
		chain->n--;
	return ret;
}

static int build(const char *text, const char *origin, const char *self_real,
		 struct chain *chain, struct policy *out, struct pc_err *err)
{
	struct jc c = { "policy", origin, err };
	struct policy p;
	json_t *root;
	const json_t *ext;
	int ret = -1;

	if (jc_parse(&c, text, &root) < 0)
		return -1;
	if (jc_object(&c, NULL, root, top_keys) < 0)
		goto out;
	if ((ext = json_object_get(root, "extends"))) {
		if (build_base(&c, ext, self_real, chain, &p, err) < 0)
			goto out;
	} else {
		policy_init_default(&p);
	}
	if (policy_apply(&c, root, &p) < 0) {
		policy_free(&p);
		goto out;
	}
	*out = p;
	ret = 0;
out:
	json_decref(root);
	return ret;
}

static void set_identity(struct policy *p, const char *name, const char *path)
{
	free(p->name);
	free(p->path);
	p->name = xstrdup(name);
	p->path = path ? xstrdup(path) : NULL;
}

int policy_parse(const char *json, const char *origin, struct policy *out, struct pc_err *err)
{
	struct chain chain = { .n = 0 };
	cleanup_free char *name = name_from_origin(origin);
	if (build(json, origin, NULL, &chain, out, err) < 0)
		return -1;
	set_identity(out, name, NULL);
	return 0;
}

int policy_load(const char *name_or_path, struct policy *out, struct pc_err *err)
{
	struct chain chain = { .n = 0 };
	const char *ref = name_or_path ? name_or_path : "default";
	cleanup_free char *path = NULL;
	cleanup_free char *name = NULL;

	if (policy_is_path(ref)) {
		path = xstrdup(ref);
		name = name_from_origin(ref);
	} else if (policy_is_name(ref)) {
		for (const char *const *d = policy_search_path(); *d && !path; d++) {
			char *cand = xasprintf("%s/%s.json", *d, ref);
			if (access(cand, F_OK) == 0)
				path = cand;
			else
				free(cand);
		}
		if (!path && strcmp(ref, "default") == 0) {
			policy_init_default(out);
			return 0;
		}
		if (!path) {
			const char *const *d = policy_search_path();
			return pc_fail(err, ENOENT, "policy", "policy \"%s\": not found in %s or %s", ref,
				       d[0], d[1]);
		}
		name = xstrdup(ref);
	} else {
		return pc_fail(err, EINVAL, "policy",
			       "policy \"%s\": expected a policy name ([a-z0-9_-]+) or a path (containing / or ending in .json)",
			       ref);
	}
	if (build_file(NULL, NULL, path, &chain, out, err) < 0)
		return -1;
	set_identity(out, name, path);
	return 0;
}

/* ------------------------------------------------------------ writing */

static json_t *strv_json(char *const *v, size_t n)
{
	json_t *a = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

static json_t *action_json(const struct seccomp_rule *r)
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

json_t *policy_to_json(const struct policy *p)
{
	json_t *root = json_object(), *o, *a;

	if (p->description)
		json_object_set_new(root, "description", json_string(p->description));

	o = json_object();
	json_object_set_new(o, "timeout", jc_duration_json(p->limits.timeout_ms));
	json_object_set_new(o, "memory", jc_size_json(p->limits.memory_bytes));
	json_object_set_new(o, "cpu", json_real(p->limits.cpu_millis / 1000.0));
	json_object_set_new(o, "pids", json_integer(p->limits.pids));
	json_object_set_new(o, "output", jc_size_json(p->limits.output_bytes));
	json_object_set_new(o, "tmp", jc_size_json(p->limits.tmp_bytes));
	json_object_set_new(o, "workspace", jc_size_json(p->limits.workspace_bytes));
	json_object_set_new(o, "file_size", jc_size_json(p->limits.file_bytes));
	json_object_set_new(o, "open_files", json_integer(p->limits.open_files));
	json_object_set_new(root, "limits", o);

	o = json_object();
	a = json_array();
	for (size_t i = 0; i < p->n_binds; i++)
		json_array_append_new(a, json_pack("{s:s, s:s, s:b, s:b}", "src", p->binds[i].src,
						   "dst", p->binds[i].dst, "optional", p->binds[i].optional,
						   "writable", p->binds[i].writable));
	json_object_set_new(o, "binds", a);
	json_object_set_new(o, "ca_certificates", json_boolean(p->ca_certificates));
	json_object_set_new(o, "dev_shm", json_boolean(p->dev_shm));
	json_object_set_new(root, "filesystem", o);

	json_object_set_new(root, "network", json_string(network_names[p->network == NET_LOOPBACK]));

	o = json_object();
	json_object_set_new(o, "groups", strv_json(p->seccomp_groups, p->n_seccomp_groups));
	a = json_array();
	for (size_t i = 0; i < p->n_seccomp_rules; i++)
		json_array_append_new(a, json_pack("{s:s, s:o}", "syscall", p->seccomp_rules[i].syscall,
						   "action", action_json(&p->seccomp_rules[i])));
	json_object_set_new(o, "rules", a);
	json_object_set_new(root, "seccomp", o);

	o = json_object();
	json_object_set_new(o, "interpreter", json_string(p->python));
	json_object_set_new(o, "flags", strv_json(p->python_flags, p->n_python_flags));
	a = json_object();
	for (size_t i = 0; i < p->n_env; i++) {
		const char *eq = strchr(p->env[i], '=');
		cleanup_free char *k = strndup(p->env[i], (size_t)(eq - p->env[i]));
		json_object_set_new(a, k, json_string(eq + 1));
	}
	json_object_set_new(o, "env", a);
	json_object_set_new(root, "python", o);

	o = json_object();
	json_object_set_new(o, "allow", strv_json(p->tools_allow, p->n_tools_allow));
	json_object_set_new(o, "budget", json_integer(p->tools_budget));
	json_object_set_new(o, "max_argument_bytes", jc_size_json(p->tools_arg_bytes));
	json_object_set_new(o, "max_result_bytes", jc_size_json(p->tools_result_bytes));
	json_object_set_new(root, "tools", o);

	json_object_set_new(root, "backend", json_string(p->backend));
	json_object_set_new(root, "identity", json_pack("{s:i, s:i, s:s}", "uid", (int)p->jail_uid,
							"gid", (int)p->jail_gid, "hostname", p->hostname));
	return root;
}

static bool str_eq(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

static bool strv_eq(char *const *a, size_t na, char *const *b, size_t nb)
{
	if (na != nb)
		return false;
	for (size_t i = 0; i < na; i++)
		if (!str_eq(a[i], b[i]))
			return false;
	return true;
}

bool policy_equal(const struct policy *a, const struct policy *b)
{
	const struct limits *la = &a->limits, *lb = &b->limits;
	if (la->timeout_ms != lb->timeout_ms || la->memory_bytes != lb->memory_bytes ||
	    la->cpu_millis != lb->cpu_millis || la->pids != lb->pids ||
	    la->output_bytes != lb->output_bytes || la->tmp_bytes != lb->tmp_bytes ||
	    la->workspace_bytes != lb->workspace_bytes || la->file_bytes != lb->file_bytes ||
	    la->open_files != lb->open_files)
		return false;
	if (!str_eq(a->description, b->description) || a->n_binds != b->n_binds ||
	    a->ca_certificates != b->ca_certificates || a->dev_shm != b->dev_shm ||
	    a->network != b->network)
		return false;
	for (size_t i = 0; i < a->n_binds; i++)
		if (!str_eq(a->binds[i].src, b->binds[i].src) || !str_eq(a->binds[i].dst, b->binds[i].dst) ||
		    a->binds[i].optional != b->binds[i].optional || a->binds[i].writable != b->binds[i].writable)
			return false;
	if (!strv_eq(a->seccomp_groups, a->n_seccomp_groups, b->seccomp_groups, b->n_seccomp_groups) ||
	    a->n_seccomp_rules != b->n_seccomp_rules)
		return false;
	for (size_t i = 0; i < a->n_seccomp_rules; i++)
		if (!str_eq(a->seccomp_rules[i].syscall, b->seccomp_rules[i].syscall) ||
		    a->seccomp_rules[i].action_errno != b->seccomp_rules[i].action_errno ||
		    a->seccomp_rules[i].kill != b->seccomp_rules[i].kill)
			return false;
	return str_eq(a->python, b->python) &&
	       strv_eq(a->python_flags, a->n_python_flags, b->python_flags, b->n_python_flags) &&
	       strv_eq(a->env, a->n_env, b->env, b->n_env) &&
	       strv_eq(a->tools_allow, a->n_tools_allow, b->tools_allow, b->n_tools_allow) &&
	       a->tools_budget == b->tools_budget && a->tools_arg_bytes == b->tools_arg_bytes &&
	       a->tools_result_bytes == b->tools_result_bytes && str_eq(a->backend, b->backend) &&
	       a->jail_uid == b->jail_uid && a->jail_gid == b->jail_gid &&
	       str_eq(a->hostname, b->hostname);
}
