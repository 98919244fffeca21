/* pycell: the fields of a policy, one table (policy_fields.h), and the
 * rules of each type: parse, write, compare, free. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "config/policy_fields.h"

_Static_assert(sizeof(uid_t) == sizeof(uint32_t) && sizeof(gid_t) == sizeof(uint32_t),
	       "identity.uid and identity.gid are PF_U32 rows");

/* ------------------------------------------------------------ the table */

#define MEMBER(m) .off = offsetof(struct policy, m), .size = sizeof(((struct policy *)0)->m), \
		  .align = __alignof__(((struct policy *)0)->m)
#define COUNT(m) .cnt_off = offsetof(struct policy, m), .cnt_size = sizeof(((struct policy *)0)->m), \
		 .cnt_align = __alignof__(((struct policy *)0)->m)

/* In the order of the file's sections, and of the keys in each: the order
 * of "expected one of ..." in messages and of the JSON written back. */
const struct policy_field policy_fields[] = {
	{ .key = "name", .type = PF_META, MEMBER(name), .doc = "the shipped name or the file's base name" },
	{ .key = "path", .type = PF_META, MEMBER(path), .doc = "the file it was loaded from" },
	{ .key = "description", .type = PF_STRING, MEMBER(description), .flags = PF_NOT_INHERITED,
	  .doc = "what the policy is for, shown by sandbox_info" },
	/* limits: a timeout of 10 ms to a day; memory from 16M */
	{ "limits", "timeout", PF_DURATION, MEMBER(limits.timeout_ms), .min = 10, .max = 24 * 3600 * 1000,
	  .zero_ok = true, .doc = "wall-clock time of a run" },
	{ "limits", "memory", PF_SIZE, MEMBER(limits.memory_bytes), .min = 16 * MiB, .max = JC_NO_MAX,
	  .zero_ok = true, .doc = "memory of the whole jail (cgroup)" },
	{ "limits", "cpu", PF_CPU, MEMBER(limits.cpu_millis), .parse = pv_parse_cpu,
	  .doc = "CPU share in cores" },
	/* init and python are two tasks already */
	{ "limits", "pids", PF_U32, MEMBER(limits.pids), .min = 2, .max = 4194304, .zero_ok = true,
	  .doc = "tasks (processes and threads)" },
	{ "limits", "output", PF_SIZE, MEMBER(limits.output_bytes), .min = 1 * KiB, .max = 1 * GiB,
	  .doc = "bytes kept of each of stdout and stderr" },
	/* tmpfs treats size=0 as unlimited, so 0 is not offered here */
	{ "limits", "tmp", PF_SIZE, MEMBER(limits.tmp_bytes), .min = 1 * MiB, .max = JC_NO_MAX,
	  .doc = "space for /tmp and /dev/shm together (directories of the root tmpfs)" },
	{ "limits", "workspace", PF_SIZE, MEMBER(limits.workspace_bytes), .min = 1 * MiB, .max = JC_NO_MAX,
	  .doc = "size of the tmpfs at /workspace" },
	{ "limits", "file_size", PF_SIZE, MEMBER(limits.file_bytes), .min = 4 * KiB, .max = JC_NO_MAX,
	  .zero_ok = true, .doc = "largest file a process may write (RLIMIT_FSIZE)" },
	/* 1048576 is the kernel's default nr_open, the most RLIMIT_NOFILE can be */
	{ "limits", "open_files", PF_U32, MEMBER(limits.open_files), .min = 16, .max = 1048576,
	  .doc = "open file descriptors per process (RLIMIT_NOFILE)" },
	{ "filesystem", "binds", PF_BINDS, MEMBER(binds), COUNT(n_binds), .parse = pv_parse_binds,
	  .doc = "host paths made visible in the jail" },
	{ "filesystem", "ca_certificates", PF_BOOL, MEMBER(ca_certificates),
	  .doc = "bind the host's CA certificates" },
	{ "filesystem", "dev_shm", PF_BOOL, MEMBER(dev_shm), .doc = "a /dev/shm, sharing /tmp's space" },
	{ .key = "network", .type = PF_NETWORK, MEMBER(network), .parse = pv_parse_network, .flags = PF_FILTER,
	  .doc = "none, the jail's own loopback, or {\"egress\": [destinations]}" },
	{ "seccomp", "groups", PF_STRV, MEMBER(seccomp_groups), COUNT(n_seccomp_groups), .flags = PF_FILTER,
	  .check = pv_check_group, .doc = "system call groups the jail may use" },
	{ "seccomp", "rules", PF_RULES, MEMBER(seccomp_rules), COUNT(n_seccomp_rules), .flags = PF_FILTER,
	  .parse = pv_parse_rules, .doc = "extra rules, one system call each" },
	{ "python", "interpreter", PF_PATH, MEMBER(python), .doc = "the interpreter inside the jail" },
	{ "python", "flags", PF_STRV, MEMBER(python_flags), COUNT(n_python_flags),
	  .parse = pv_parse_python_flags, .doc = "interpreter options" },
	{ "python", "preload", PF_STRV, MEMBER(python_preload), COUNT(n_python_preload), .check = pv_check_module,
	  .doc = "modules a warm server's zygote imports once, which its runs and sessions inherit" },
	{ "python", "env", PF_ENV, MEMBER(env), COUNT(n_env), .parse = pv_parse_env,
	  .doc = "environment variables added to the jail's clean environment" },
	{ "tools", "allow", PF_STRV, MEMBER(tools_allow), COUNT(n_tools_allow), .check = pv_check_tool_pattern,
	  .doc = "MCP tools the code may call" },
	{ "tools", "budget", PF_U32, MEMBER(tools_budget), .min = 0, .max = 100000,
	  .doc = "tool calls per run" },
	{ "tools", "max_argument_bytes", PF_SIZE, MEMBER(tools_arg_bytes), .min = 1 * KiB, .max = 16 * MiB,
	  .doc = "size of one call's arguments" },
	{ "tools", "max_result_bytes", PF_SIZE, MEMBER(tools_result_bytes), .min = 1 * KiB, .max = 64 * MiB,
	  .doc = "size of one call's result" },
	{ "packages", "index", PF_STRING, MEMBER(packages.index), .parse = pv_parse_index,
	  .doc = "the package index runs may install from (PEP 503 simple URL)" },
	{ "packages", "ca_bundle", PF_PATH, MEMBER(packages.ca_bundle), .doc = "CA certificates for an https index" },
	{ "packages", "allow", PF_STRV, MEMBER(packages.allow), COUNT(packages.n_allow), .check = pv_check_allow,
	  .doc = "packages runs may install: names with optional version bounds, or \"*\"" },
	{ .key = "backend", .type = PF_NAME, MEMBER(backend), .choices = policy_backend_names, .parse = pv_parse_backend,
	  .flags = PF_FILTER, .doc = "how Python runs: native CPython, or Pyodide in Node (wasm)" },
	{ "sessions", "max", PF_U32, MEMBER(sessions.max), .min = 0, .max = SESSIONS_MAX,
	  .doc = "sessions open at once on a server; 0: none" },
	{ "sessions", "max_per_client", PF_U32, MEMBER(sessions.max_per_client), .min = 1, .max = SESSIONS_MAX,
	  .doc = "sessions open at once per client" },
	{ "sessions", "idle_timeout", PF_DURATION, MEMBER(sessions.idle_ms), .min = 1000,
	  .max = 24 * 3600 * 1000, .doc = "a session without a cell this long is closed" },
	{ "sessions", "max_lifetime", PF_DURATION, MEMBER(sessions.lifetime_ms), .min = 1000,
	  .max = 7 * 24 * 3600 * 1000ULL, .doc = "a session is closed once it has lived this long (paused time not counted)" },
	{ "sessions", "snapshot_max", PF_SIZE, MEMBER(sessions.snapshot_bytes), .min = 1 * MiB, .max = JC_NO_MAX,
	  .doc = "the most a session's snapshot may hold (its globals and /workspace), to pause or fork it" },
	{ "sessions", "paused_keep", PF_DURATION, MEMBER(sessions.paused_keep_ms), .min = 60 * 1000,
	  .max = 365 * 24 * 3600 * 1000ULL, .doc = "a paused session not resumed this long is removed" },
	{ "sessions", "shared_memory", PF_SIZE, MEMBER(sessions.shared_memory_bytes), .min = SHARED_MEMORY_MIN,
	  .max = JC_NO_MAX, .zero_ok = true, .parse = pv_parse_shared_memory,
	  .doc = "0: each session is a memory cgroup of its own; else all share one of this size, and the "
		 "supervisor holds each to limits.memory" },
	/* the jail maps ids 0..65535; 0 would be root inside */
	{ "identity", "uid", PF_U32, MEMBER(jail_uid), .min = 1, .max = 65534,
	  .doc = "user the program runs as inside the jail" },
	{ "identity", "gid", PF_U32, MEMBER(jail_gid), .min = 1, .max = 65534,
	  .doc = "group the program runs as inside the jail" },
	{ "identity", "hostname", PF_STRING, MEMBER(hostname), .parse = pv_parse_hostname,
	  .doc = "host name inside the jail" },
};
const size_t policy_n_fields = ARRAY_SIZE(policy_fields);

/* ------------------------------------------------------------ the engine */

#define AT(p, off) ((void *)((char *)(p) + (off)))
#define AT_CONST(p, off) ((const void *)((const char *)(p) + (off)))

const char *const *policy_top_keys(void)
{
	static const char *keys[ARRAY_SIZE(policy_fields) + 2];
	size_t n = 0;
	if (keys[0])
		return keys;
	keys[n++] = "extends";
	for (size_t i = 0; i < policy_n_fields; i++) {
		const struct policy_field *f = &policy_fields[i];
		const char *k = f->section ? f->section : f->key;
		if (f->type == PF_META || strcmp(keys[n - 1], k) == 0)
			continue;
		keys[n++] = k;
	}
	keys[n] = NULL;
	return keys;
}

/* The keys of one section, NULL-terminated, into keys[]. */
static void section_keys(const char *section, const char *keys[], size_t max)
{
	size_t n = 0;
	for (size_t i = 0; i < policy_n_fields && n + 1 < max; i++)
		if (policy_fields[i].section && strcmp(policy_fields[i].section, section) == 0)
			keys[n++] = policy_fields[i].key;
	keys[n] = NULL;
}

static int parse_field(const struct jc *c, const char *key, const json_t *v, struct policy *p,
		       const struct policy_field *f)
{
	void *dst = AT(p, f->off);
	uint64_t n;
	const char *s;
	int choice;

	if (f->parse)
		return f->parse(c, key, v, p);
	switch (f->type) {
	case PF_STRING:
		if (jc_string(c, key, v, &s) < 0)
			return -1;
		free(*(char **)dst);
		*(char **)dst = xstrdup(s);
		return 0;
	case PF_PATH:
		if (jc_abs_path(c, key, v, &s) < 0)
			return -1;
		free(*(char **)dst);
		*(char **)dst = xstrdup(s);
		return 0;
	case PF_DURATION:
		return jc_duration(c, key, v, f->min, f->max, f->zero_ok, dst);
	case PF_SIZE:
		return jc_size(c, key, v, f->min, f->max, f->zero_ok, dst);
	case PF_U32:
		if (jc_uint(c, key, v, f->min, f->max, f->zero_ok, &n) < 0)
			return -1;
		*(uint32_t *)dst = (uint32_t)n;
		return 0;
	case PF_BOOL:
		return jc_bool(c, key, v, dst);
	case PF_ENUM:
		if (pv_apply_choice(c, key, v, f->choices, &choice) < 0)
			return -1;
		*(int *)dst = choice;
		return 0;
	case PF_STRV:
		return pv_string_list(c, key, v, f->check, dst, AT(p, f->cnt_off));
	case PF_META:
	case PF_CPU:
	case PF_NAME:
	case PF_ENV:
	case PF_BINDS:
	case PF_RULES:
	case PF_NETWORK:
	default:
		/* these rows have their own parser */
		return jc_fail(c, key, "no parser for this key (a bug in pycell)");
	}
}

int policy_fields_apply(const struct jc *c, const json_t *root, struct policy *p)
{
	const char *done_section = NULL;
	const json_t *section = root;

	for (size_t i = 0; i < policy_n_fields; i++) {
		const struct policy_field *f = &policy_fields[i];
		char key[JC_KEY_MAX];
		const json_t *v;

		if (f->type == PF_META)
			continue;
		if (f->flags & PF_NOT_INHERITED) {
			free(*(char **)AT(p, f->off));
			*(char **)AT(p, f->off) = NULL;
		}
		if (!f->section) {
			section = root;
			done_section = NULL;
			snprintf(key, sizeof(key), "%s", f->key);
		} else {
			if (!done_section || strcmp(done_section, f->section) != 0) {
				const char *keys[16];
				done_section = f->section;
				section = json_object_get(root, f->section);
				section_keys(f->section, keys, ARRAY_SIZE(keys));
				if (section && jc_object(c, f->section, section, keys) < 0)
					return -1;
			}
			if (!section)
				continue;
			jc_key(key, f->section, f->key);
		}
		if ((v = json_object_get(section, f->key)) && parse_field(c, key, v, p, f) < 0)
			return -1;
	}
	return 0;
}

static json_t *field_json(const struct policy *p, const struct policy_field *f)
{
	const void *src = AT_CONST(p, f->off);
	size_t n = f->cnt_size ? *(const size_t *)AT_CONST(p, f->cnt_off) : 0;
	json_t *a;

	switch (f->type) {
	case PF_STRING:
	case PF_PATH:
	case PF_NAME:
		return *(char *const *)src ? json_string(*(char *const *)src) : NULL;
	case PF_DURATION:
		return jc_duration_json(*(const uint64_t *)src);
	case PF_SIZE:
		return jc_size_json(*(const uint64_t *)src);
	case PF_U32:
		return json_integer(*(const uint32_t *)src);
	case PF_CPU:
		return json_real(*(const uint32_t *)src / 1000.0);
	case PF_BOOL:
		return json_boolean(*(const bool *)src);
	case PF_ENUM:
		return json_string(f->choices[*(const int *)src]);
	case PF_STRV:
		return pv_strv_json(*(char *const *const *)src, n);
	case PF_ENV:
		a = json_object();
		for (size_t i = 0; i < n; i++) {
			const char *e = (*(char *const *const *)src)[i], *eq = strchr(e, '=');
			cleanup_free char *k = strndup(e, (size_t)(eq - e));
			json_object_set_new(a, k, json_string(eq + 1));
		}
		return a;
	case PF_BINDS:
		a = json_array();
		for (size_t i = 0; i < n; i++) {
			const struct bind_spec *b = &(*(struct bind_spec *const *)src)[i];
			json_array_append_new(a, json_pack("{s:s, s:s, s:b, s:b}", "src", b->src, "dst", b->dst,
							   "optional", b->optional, "writable", b->writable));
		}
		return a;
	case PF_RULES:
		a = json_array();
		for (size_t i = 0; i < n; i++) {
			const struct seccomp_rule *r = &(*(struct seccomp_rule *const *)src)[i];
			json_array_append_new(a, json_pack("{s:s, s:o}", "syscall", r->syscall,
							   "action", pv_action_json(r)));
		}
		return a;
	case PF_NETWORK: {
		const struct net_policy *np = src;
		static const char *const modes[] = { "none", "loopback" };
		if (np->mode != NET_EGRESS)
			return json_string(modes[np->mode]);
		return json_pack("{s:o}", "egress", pv_strv_json(np->egress, np->n_egress));
	}
	case PF_META:
	default:
		return NULL;
	}
}

json_t *policy_fields_json(const struct policy *p, unsigned flags)
{
	json_t *root = json_object();
	for (size_t i = 0; i < policy_n_fields; i++) {
		const struct policy_field *f = &policy_fields[i];
		json_t *v, *o = root;
		if (f->type == PF_META || (flags && !(f->flags & flags)))
			continue;
		if (!(v = field_json(p, f)))
			continue;
		if (f->section) {
			o = json_object_get(root, f->section);
			if (!o) {
				o = json_object();
				json_object_set_new(root, f->section, o);
			}
		}
		json_object_set_new(o, f->key, v);
	}
	return root;
}

static bool field_equal(const struct policy *a, const struct policy *b, const struct policy_field *f)
{
	const void *x = AT_CONST(a, f->off), *y = AT_CONST(b, f->off);
	size_t n = f->cnt_size ? *(const size_t *)AT_CONST(a, f->cnt_off) : 0;

	if (f->cnt_size && n != *(const size_t *)AT_CONST(b, f->cnt_off))
		return false;
	switch (f->type) {
	case PF_STRING:
	case PF_PATH:
	case PF_NAME:
		return str_eq(*(char *const *)x, *(char *const *)y);
	case PF_DURATION:
	case PF_SIZE:
		return *(const uint64_t *)x == *(const uint64_t *)y;
	case PF_U32:
	case PF_CPU:
		return *(const uint32_t *)x == *(const uint32_t *)y;
	case PF_BOOL:
		return *(const bool *)x == *(const bool *)y;
	case PF_ENUM:
		return *(const int *)x == *(const int *)y;
	case PF_STRV:
	case PF_ENV:
		return strv_eq(*(char *const *const *)x, n, *(char *const *const *)y, n);
	case PF_BINDS:
		for (size_t i = 0; i < n; i++) {
			const struct bind_spec *p = &(*(struct bind_spec *const *)x)[i];
			const struct bind_spec *q = &(*(struct bind_spec *const *)y)[i];
			if (!str_eq(p->src, q->src) || !str_eq(p->dst, q->dst) || p->optional != q->optional ||
			    p->writable != q->writable)
				return false;
		}
		return true;
	case PF_RULES:
		for (size_t i = 0; i < n; i++) {
			const struct seccomp_rule *p = &(*(struct seccomp_rule *const *)x)[i];
			const struct seccomp_rule *q = &(*(struct seccomp_rule *const *)y)[i];
			if (!str_eq(p->syscall, q->syscall) || p->action_errno != q->action_errno ||
			    p->kill != q->kill)
				return false;
		}
		return true;
	case PF_NETWORK: {
		const struct net_policy *p = x, *q = y;
		return p->mode == q->mode && p->n_egress == q->n_egress &&
		       strv_eq(p->egress, p->n_egress, q->egress, q->n_egress);
	}
	case PF_META:
	default:
		return true;
	}
}

bool policy_fields_equal(const struct policy *a, const struct policy *b)
{
	for (size_t i = 0; i < policy_n_fields; i++)
		if (!field_equal(a, b, &policy_fields[i]))
			return false;
	return true;
}

void policy_fields_free(struct policy *p)
{
	for (size_t i = 0; i < policy_n_fields; i++) {
		const struct policy_field *f = &policy_fields[i];
		void *v = AT(p, f->off);
		size_t n = f->cnt_size ? *(size_t *)AT(p, f->cnt_off) : 0;
		switch (f->type) {
		case PF_META:
		case PF_STRING:
		case PF_PATH:
		case PF_NAME:
			free(*(char **)v);
			break;
		case PF_STRV:
		case PF_ENV:
			jc_strv_free(*(char ***)v, n);
			break;
		case PF_BINDS:
			pv_binds_free(*(struct bind_spec **)v, n);
			break;
		case PF_RULES:
			pv_rules_free(*(struct seccomp_rule **)v, n);
			break;
		case PF_NETWORK:
			jc_strv_free(((struct net_policy *)v)->egress, ((struct net_policy *)v)->n_egress);
			break;
		case PF_DURATION:
		case PF_SIZE:
		case PF_U32:
		case PF_CPU:
		case PF_BOOL:
		case PF_ENUM:
		default:
			break;
		}
	}
	memset(p, 0, sizeof(*p));
}
