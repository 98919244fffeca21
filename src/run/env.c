/* pycell: a run environment (run.h): a policy loaded, its seccomp
 * program compiled, its cgroups probed, and its warm spawners (one, and
 * one per principal of pycell serve up to RUN_ENV_WARM_PRINCIPALS). */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "jail/cgroup.h"
#include "jail/seccomp.h"
#include "run/egress.h"
#include "run/fonts.h"
#include "run/run.h"
#include "run/spawner.h"

int run_env_load(struct run_env *env, const char *policy_name, struct pc_err *err)
{
	memset(env, 0, sizeof(*env));
	return policy_load(policy_name ? policy_name : "default", &env->policy, err);
}

int run_env_prepare(struct run_env *env, struct pc_err *err)
{
	struct pc_err ignored;
	free(env->runtime_dir);
	env->runtime_dir = xasprintf("%s/runtime", pycell_datadir());
	free(env->fonts_dir);
	env->fonts_dir = fonts_dir_for(&env->policy);
	/* an egress policy's host check needs them now */
	if (env->policy.network.mode == NET_EGRESS)
		env->probe_later = false;
	if (!env->cgroups && !env->probe_later && cgroup_env_probe(&env->cgroups, &ignored) < 0)
		env->cgroups = NULL;
	if (!env->probe_later)
		log_debug("%6llu us: cgroups probed", (unsigned long long)log_elapsed_us());
	seccomp_filter_free(env->filter);
	env->filter = NULL;
	if (env->policy.network.mode == NET_EGRESS && egress_host_check(env->cgroups, err) < 0)
		return pc_err_wrap(err, "policy %s", env->policy.name ? env->policy.name : "");
	return seccomp_filter_compile(&env->policy, &env->filter, err);
}

int run_env_init(struct run_env *env, const char *policy_name, struct pc_err *err)
{
	if (run_env_load(env, policy_name, err) < 0)
		return -1;
	return run_env_prepare(env, err);
}

struct warm_units {
	size_t n;
	struct warm_unit {
		char *principal;
		struct spawner *sp;      /* NULL: it could not be started (cold) */
	} v[RUN_ENV_WARM_PRINCIPALS];
	bool full_said;              /* "past the bound" logged once */
};

json_t *run_env_preload(const struct run_env *env)
{
	json_t *r = spawner_preload(env->warm);
	if (!r)
		return json_pack("{s:[],s:{}}", "loaded", "failed");
	json_t *out = json_pack("{s:O,s:O}", "loaded", json_object_get(r, "loaded"), "failed", json_object_get(r, "failed"));
	json_t *unused = json_object_get(r, "unused");
	/* a first use that failed in the zygote, said only when one did */
	if (json_object_size(unused))
		json_object_set(out, "unused", unused);
	return out;
}

int run_env_warm(struct run_env *env, struct pc_err *err)
{
	if (env->policy.network.mode == NET_EGRESS)
		return pc_fail(err, ENOTSUP, "warm", "the runs of an egress policy start cold (each jail's veth pair and "
			       "filters are made for it before its clone)");
	struct spawner *sp;
	if (env->warm)
		return 0;
	if (policy_is_wasm(&env->policy)) {
		/* no zygote: ready jails whose node has Pyodide loaded */
		env->warm = spawner_wasm();
		return 0;
	}
	sp = spawner_warm_new();
	if (sp->ops->prepare(sp, &env->policy, env->runtime_dir, err) < 0) {
		sp->ops->free(sp);
		return -1;
	}
	env->warm = sp;
	env->units = xcalloc(1, sizeof(*env->units));
	return 0;
}

struct spawner *run_env_warm_for(const struct run_env *env, const char *principal)
{
	struct warm_units *u = env->units;
	struct warm_unit *w;
	struct pc_err err = { 0 };
	if (!env->warm || !principal || !u)
		return env->warm;
	for (size_t i = 0; i < u->n; i++)
		if (strcmp(u->v[i].principal, principal) == 0)
			return u->v[i].sp;
	if (u->n == RUN_ENV_WARM_PRINCIPALS) {
		if (!u->full_said)
			log_warn("warm starts: policy %s: %d clients have a zygote of their own already; the runs of "
				 "others start cold", env->policy.name ? env->policy.name : "", RUN_ENV_WARM_PRINCIPALS);
		u->full_said = true;
		return NULL;
	}
	w = &u->v[u->n++];
	w->principal = xstrdup(principal);
	/* not waited for: the loop serves every other client meanwhile, and
	 * this one's runs start cold until it is ready */
	w->sp = spawner_warm_new_async();
	if (w->sp->ops->prepare(w->sp, &env->policy, env->runtime_dir, &err) < 0) {
		log_warn("warm starts: a zygote for %s could not be started; its runs start cold: %s: %s", principal,
			 err.step, err.msg);
		w->sp->ops->free(w->sp);
		w->sp = NULL;
	} else {
		log_info("warm starts: a zygote of its own for %s, starting", principal);
	}
	return w->sp;
}

void run_env_unwatch(struct run_env *env)
{
	cgroup_env_unwatch(env->cgroups);
}

void run_env_free(struct run_env *env)
{
	for (size_t i = 0; env->units && i < env->units->n; i++) {
		if (env->units->v[i].sp)
			env->units->v[i].sp->ops->free(env->units->v[i].sp);
		free(env->units->v[i].principal);
	}
	free(env->units);
	if (env->warm)
		env->warm->ops->free(env->warm);
	seccomp_filter_free(env->filter);
	cgroup_env_free(env->cgroups);
	policy_free(&env->policy);
	free(env->runtime_dir);
	free(env->fonts_dir);
	memset(env, 0, sizeof(*env));
}

void run_request_from_env(struct run_request *req, const struct run_env *env)
{
	req->policy = &env->policy;
	req->filter = env->filter;
	req->cgroups = env->cgroups;
	req->runtime_dir = env->runtime_dir;
	req->fonts_dir = env->fonts_dir;
	req->spawner = env->warm;
}
