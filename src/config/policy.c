/* pycell: policy files (man pycell-policy(5)).
 *
 * A file is applied on top of a base: the built-in defaults, or the policy
 * named by "extends".  Objects merge key by key (python.env too), arrays
 * and scalars replace.  Every file is validated as it is applied, so an
 * error names the file that holds the bad key. */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "base/jsonrpc.h"
#include "config/json_check.h"
#include "config/policy.h"
#include "config/policy_fields.h"

#define DEFAULT_DESCRIPTION "Default policy: a private loopback network (nothing routed out), 512M memory, 30 s, no tool calls."

const char *const seccomp_group_names[] = {
	"base", "threads", "process", "fs_write", "sockets", "ipc", "sched", "memlock", "numa",
	"aio", NULL
};

const char *const seccomp_default_groups[] = {
	"base", "threads", "process", "fs_write", "sockets", "ipc", "sched", NULL
};

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
	p->network.mode = NET_LOOPBACK;
	while (seccomp_default_groups[p->n_seccomp_groups])
		p->n_seccomp_groups++;
	p->seccomp_groups = strv_dup(seccomp_default_groups, p->n_seccomp_groups);
	p->python = xstrdup(DEFAULT_PYTHON);
	p->tools_budget = 50;
	p->tools_arg_bytes = 64 * KiB;
	p->tools_result_bytes = 1 * MiB;
	p->backend = xstrdup("native");
	p->sessions = (struct session_limits){ .max = 8, .max_per_client = 4, .idle_ms = 10 * 60 * 1000,
					       .lifetime_ms = 60 * 60 * 1000, .snapshot_bytes = 1ULL << 30,
					       .paused_keep_ms = 24 * 3600 * 1000ULL };
	p->jail_uid = 1000;
	p->jail_gid = 1000;
	p->hostname = xstrdup("pycell");
}

void policy_set_network(struct policy *p, enum net_mode mode)
{
	jc_strv_free(p->network.egress, p->network.n_egress);
	p->network.egress = NULL;
	p->network.n_egress = 0;
	p->network.mode = mode;
}

static int check_backend(const struct jc *c, const struct policy *p);

int policy_set_backend(struct policy *p, const char *backend, struct pc_err *err)
{
	struct jc c = { "option", "--backend", err };
	char *was = p->backend;
#ifndef HAVE_WASM
	if (strcmp(backend, "wasm") == 0)
		return pc_fail(err, ENOTSUP, "backend", "the wasm backend (Pyodide) is not built into this pycell "
			       "(configure --with-wasm)");
#endif
	p->backend = xstrdup(backend);
	if (check_backend(&c, p) < 0) {
		free(p->backend);
		p->backend = was;
		return -1;
	}
	free(was);
	return 0;
}

bool policy_is_wasm(const struct policy *p)
{
	return p->backend && strcmp(p->backend, "wasm") == 0;
}

void policy_free(struct policy *p)
{
	if (p)
		policy_fields_free(p);
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

/* What the wasm backend cannot give is refused where the policy asks for
 * it, never accepted and left out: Pyodide has no sockets (an egress
 * list), pip's installs are for CPython (packages), and Node would read
 * NODE_OPTIONS from the environment (which could turn its permission model
 * off). */
static int check_backend(const struct jc *c, const struct policy *p)
{
	if (!policy_is_wasm(p))
		return 0;
	if (p->network.mode == NET_EGRESS)
		return jc_fail(c, "network", "an egress list needs the native backend: the wasm backend "
			       "(Pyodide) has no sockets");
	if (p->packages.index)
		return jc_fail(c, "packages", "packages on request need the native backend: pip installs "
			       "CPython wheels, which Pyodide cannot load");
	if (p->limits.open_files > WASM_EXEC_FD)  /* never 0: its row's minimum is 16 */
		return jc_fail(c, "limits.open_files", "at most %d with the wasm backend (node is "
			       "executed from descriptor %d, which its program must never be able to "
			       "open)", WASM_EXEC_FD, WASM_EXEC_FD);
	for (size_t i = 0; i < p->n_env; i++)
		if (strncmp(p->env[i], "NODE_", 5) == 0)
			return jc_fail(c, "python.env", "%.*s: not with the wasm backend (Node, which runs "
				       "it, would read it)", (int)strcspn(p->env[i], "="), p->env[i]);
	return 0;
}

static int build(const char *text, const char *origin, const char *self_real,
		 struct chain *chain, struct policy *out, struct pc_err *err)
{
	struct jc c = { "policy", origin, err };
	struct policy p;
	cleanup_json json_t *root = NULL;
	const json_t *ext;

	if (jc_parse(&c, text, &root) < 0 || jc_object(&c, NULL, root, policy_top_keys()) < 0)
		return -1;
	if ((ext = json_object_get(root, "extends"))) {
		if (build_base(&c, ext, self_real, chain, &p, err) < 0)
			return -1;
	} else {
		policy_init_default(&p);
	}
	if (policy_fields_apply(&c, root, &p) < 0 || check_backend(&c, &p) < 0) {
		policy_free(&p);
		return -1;
	}
	*out = p;
	return 0;
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

json_t *policy_to_json(const struct policy *p)
{
	return policy_fields_json(p, 0);
}

json_t *policy_filter_json(const struct policy *p)
{
	return policy_fields_json(p, PF_FILTER);
}

bool policy_equal(const struct policy *a, const struct policy *b)
{
	return policy_fields_equal(a, b);
}
