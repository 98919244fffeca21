/* pycell: what a jail is given to run (program.h). */
#include "config.h"

#include <sched.h>
#include <string.h>

#include "jail/rootfs.h"
#include "run/program.h"

void program_strv_free(char **v)
{
	if (!v)
		return;
	for (char **p = v; *p; p++)
		free(*p);
	free(v);
}

#ifdef HAVE_WASM
/* node with its permission model (reads of the run's files and the
 * workspace, writes to the workspace; no child processes, workers, native
 * addons or WASI) and no code from strings (eval, new Function: the way
 * from any JavaScript object to the global scope), running the runner.
 * A bare jail's node reads the runtime (runner, Pyodide, the pycell
 * package) and writes nothing: no directory of the host is the run's. */
static char **wasm_argv(const struct program *prog, size_t nargs)
{
	static const char *const jailed[] = {
		"--allow-fs-read=" JAIL_RUN_DIR, "--allow-fs-read=" JAIL_WORKSPACE,
		"--allow-fs-write=" JAIL_WORKSPACE,
	};
	const char *rt = prog->bare_runtime;
	size_t n = 0;
	char **v = xcalloc(ARRAY_SIZE(jailed) + nargs + 12, sizeof(char *));

	v[n++] = xstrdup(PYCELL_NODE);
	v[n++] = xstrdup(PYCELL_NODE_PERMISSION);
	if (rt) {
		v[n++] = xasprintf("--allow-fs-read=%s", rt);
	} else {
		for (size_t i = 0; i < ARRAY_SIZE(jailed); i++)
			v[n++] = xstrdup(jailed[i]);
	}
	v[n++] = xstrdup("--disallow-code-generation-from-strings");
	v[n++] = xstrdup("--no-warnings");
	v[n++] = xstrdup(PYCELL_NODE_WASM_TIER);
	/* runner RUN_DIR WORKSPACE: "-" for each in a bare jail */
	v[n++] = rt ? xasprintf("%s/wasm/runner.mjs", rt) : xstrdup(JAIL_WASM_RUNNER);
	v[n++] = xstrdup(rt ? "-" : JAIL_RUN_DIR);
	v[n++] = xstrdup(rt ? "-" : JAIL_WORKSPACE);
	if (prog->mode == RUN_MODE_CELL) {
		v[n++] = xstrdup(prog->ready || rt ? "cell-ready" : "cell");
	} else {
		v[n++] = xstrdup("script");
		v[n++] = xstrdup(prog->prog_name ? prog->prog_name : "main.py");
	}
	for (size_t i = 0; i < nargs; i++)
		v[n++] = xstrdup(prog->args[i]);
	return v;
}
#endif

char **program_argv(const struct policy *p, const struct program *prog)
{
	size_t n = 0, nargs = 0;
	char **v;
	while (prog->args && prog->args[nargs])
		nargs++;
#ifdef HAVE_WASM
	if (policy_is_wasm(p))
		return wasm_argv(prog, nargs);
#endif
	v = xcalloc(p->n_python_flags + nargs + 5, sizeof(char *));
	v[n++] = xstrdup(p->python);
	for (size_t i = 0; i < p->n_python_flags; i++)
		v[n++] = xstrdup(p->python_flags[i]);
	if (prog->mode == RUN_MODE_CELL) {
		v[n++] = xstrdup("-c");
		v[n++] = xstrdup("import pycell._cell as c; c.main()");
	} else {
		v[n++] = xasprintf(JAIL_RUN_DIR "/%s", prog->prog_name ? prog->prog_name : "main.py");
	}
	for (size_t i = 0; i < nargs; i++)
		v[n++] = xstrdup(prog->args[i]);
	return v;
}

unsigned program_threads(const struct policy *p)
{
	cpu_set_t set;
	unsigned cpus = sched_getaffinity(0, sizeof(set), &set) == 0 ? (unsigned)CPU_COUNT(&set) : 1;
	unsigned n = p->limits.cpu_millis ? (p->limits.cpu_millis + 999) / 1000 : cpus;
	if (n > cpus)
		n = cpus;
	if (p->limits.pids && n > p->limits.pids / 2)
		n = p->limits.pids / 2;
	return n ? n : 1;
}

/* The variables the thread pools of numerical libraries size themselves
 * by, and program_threads' count in each */
static const char *const thread_vars[] = {
	"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS",
	"NUMEXPR_NUM_THREADS", "NUMEXPR_MAX_THREADS",
};

static bool env_overridden(const struct policy *p, const char *name, size_t klen)
{
	for (size_t j = 0; j < p->n_env; j++)
		if (strncmp(p->env[j], name, klen) == 0 && p->env[j][klen] == '=')
			return true;
	return false;
}

char **program_envp(const struct policy *p, bool packages)
{
	static const char *const base[] = {
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=" JAIL_WORKSPACE,
		"TMPDIR=/tmp",
		"LANG=C.UTF-8",
		"PYTHONPATH=" JAIL_LIB_DIR,
		"PYTHONDONTWRITEBYTECODE=1",
		/* plots render to images; matplotlib's caches stay out of /workspace */
		"MPLBACKEND=Agg",
		"MPLCONFIGDIR=/tmp/matplotlib",
		"XDG_CACHE_HOME=/tmp/.cache",
		"USER=pycell",
		"LOGNAME=pycell",
	};
	size_t n = 0;
	unsigned threads = program_threads(p);
	char **v = xcalloc(ARRAY_SIZE(base) + ARRAY_SIZE(thread_vars) + p->n_env + 1, sizeof(char *));
	for (size_t i = 0; i < ARRAY_SIZE(base); i++) {
		if (env_overridden(p, base[i], (size_t)(strchr(base[i], '=') - base[i])))
			continue;
		/* a run with packages finds them after the runtime */
		if (packages && strncmp(base[i], "PYTHONPATH=", 11) == 0)
			v[n++] = xstrdup("PYTHONPATH=" JAIL_LIB_DIR ":" JAIL_PACKAGES_DIR);
		else
			v[n++] = xstrdup(base[i]);
	}
	for (size_t i = 0; i < ARRAY_SIZE(thread_vars); i++)
		if (!env_overridden(p, thread_vars[i], strlen(thread_vars[i])))
			v[n++] = xasprintf("%s=%u", thread_vars[i], threads);
	for (size_t j = 0; j < p->n_env; j++)
		v[n++] = xstrdup(p->env[j]);
	return v;
}

void program_files(struct jail_spec *spec, const struct program *prog, char **vars)
{
	spec->n_files = 0;
	spec->files[spec->n_files++] = (struct jail_file){
		prog->mode == RUN_MODE_CELL || !prog->prog_name ? "main.py" : prog->prog_name, prog->code,
		prog->code_len };
	if (prog->mode == RUN_MODE_CELL) {
		*vars = xstrdup(prog->variables_json ? prog->variables_json : "{}");
		spec->files[spec->n_files++] = (struct jail_file){ "variables.json", *vars, strlen(*vars) };
		if (prog->files_json)
			spec->files[spec->n_files++] = (struct jail_file){ "files.json", prog->files_json,
									   strlen(prog->files_json) };
		if (prog->outputs)
			spec->files[spec->n_files++] = (struct jail_file){ "outputs", "1", 1 };
	}
}
