/* pycell: `pycell doctor`, the preflight.  Every check is tried for real
 * (a namespace is made, a filter installed, a cgroup created), and each
 * failing or degraded one prints the exact fix.  Exit 0 when runs can be
 * jailed at all (user namespaces and seccomp work), 1 otherwise. */
#include "config.h"

#include <fcntl.h>
#include <limits.h>
#include <jansson.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "base/log.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "config/result.h"
#include "jail/cgroup.h"
#include "jail/jail.h"
#include "jail/rootfs.h"
#include "run/egress.h"
#include "run/fonts.h"
#include "run/run.h"
#include "run/state.h"

enum check_status { CHECK_OK = 0, CHECK_WARN, CHECK_FAIL };

struct doctor {
	json_t *checks;
	bool jailable;
};

static const char *const status_names[] = { "ok", "warn", "fail" };

static void report(struct doctor *d, enum check_status st, const char *name, const char *fix,
		   const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void report(struct doctor *d, enum check_status st, const char *name, const char *fix,
		   const char *fmt, ...)
{
	cleanup_free char *detail = NULL;
	va_list ap;
	va_start(ap, fmt);
	if (vasprintf(&detail, fmt, ap) < 0)
		detail = NULL;
	va_end(ap);
	json_array_append_new(d->checks, json_pack("{s:s,s:s,s:s,s:s?}", "name", name, "status",
		status_names[st], "detail", detail ? detail : "", "fix", st == CHECK_OK ? NULL : fix));
}

/* -1 when the file does not exist */
static long read_sysctl(const char *path)
{
	cleanup_free char *s = NULL;
	size_t len;
	if (read_file(path, 64, &s, &len) < 0)
		return -1;
	return strtol(s, NULL, 10);
}

/* Run fn in a forked child; its exit status is 0 or an errno. */
static int in_child(int (*fn)(void))
{
	int st;
	pid_t pid = fork();
	if (pid < 0)
		return errno;
	if (pid == 0)
		_exit(fn());
	if (waitpid(pid, &st, 0) < 0)
		return errno;
	return WIFEXITED(st) ? WEXITSTATUS(st) : EINTR;
}

static int try_userns(void)
{
	/* the namespaces of a jail, made at once the way clone3 makes them */
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS |
		    CLONE_NEWCGROUP) < 0)
		return errno;
	return 0;
}

static int try_seccomp(void)
{
	struct sock_filter allow[] = { BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW) };
	struct sock_fprog prog = { .len = 1, .filter = allow };
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return errno;
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
		return errno;
	return 0;
}

/* The fix for AppArmor's restriction of unprivileged user namespaces
 * (Ubuntu 23.10 and later): a profile that lets this binary create them,
 * written out in full, so the fix works from an installed pycell too. */
static const char *apparmor_fix(char *buf, size_t len)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		snprintf(exe, sizeof(exe), "/usr/local/bin/pycell");
	else
		exe[n] = '\0';
	snprintf(buf, len,
		 "let pycell create user namespaces with an AppArmor profile: printf 'abi <abi/4.0>,\\n"
		 "include <tunables/global>\\nprofile pycell %s flags=(unconfined) {\\n  userns,\\n}\\n' "
		 "> /etc/apparmor.d/pycell && apparmor_parser -r /etc/apparmor.d/pycell "
		 "(or sysctl -w kernel.apparmor_restrict_unprivileged_userns=0, or run pycell as root)", exe);
	return buf;
}

static void check_userns(struct doctor *d)
{
	char aa_fix[PATH_MAX + 512];
	long max_ns = read_sysctl("/proc/sys/user/max_user_namespaces");
	long aa = read_sysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns");
	long deb = read_sysctl("/proc/sys/kernel/unprivileged_userns_clone");
	bool root = geteuid() == 0;
	int e = in_child(try_userns);

	if (e == 0) {
		report(d, CHECK_OK, "user namespaces", NULL,
		       "unshare(user, mount, pid, net, ipc, uts, cgroup) works");
	} else {
		const char *fix;
		if (max_ns == 0)
			fix = "sysctl -w user.max_user_namespaces=15000 and keep it in /etc/sysctl.d/90-pycell.conf";
		else if (!root && aa == 1)
			fix = apparmor_fix(aa_fix, sizeof(aa_fix));
		else if (!root && deb == 0)
			fix = "sysctl -w kernel.unprivileged_userns_clone=1 and keep it in /etc/sysctl.d/90-pycell.conf";
		else
			fix = "inside a container: allow unshare/clone of namespaces (Docker/Podman: "
			      "--security-opt seccomp=unconfined --security-opt apparmor=unconfined, or run pycell "
			      "on the host); check the kernel has CONFIG_USER_NS=y";
		report(d, CHECK_FAIL, "user namespaces", fix, "unshare(user, mount, pid, net, ipc, uts, cgroup): %s",
		       strerror(e));
		d->jailable = false;
	}

	if (aa < 0)
		report(d, CHECK_OK, "apparmor userns", NULL, "no AppArmor user namespace restriction in this kernel");
	else if (aa == 0)
		report(d, CHECK_OK, "apparmor userns", NULL, "kernel.apparmor_restrict_unprivileged_userns = 0");
	else if (root)
		report(d, CHECK_OK, "apparmor userns", NULL, "kernel.apparmor_restrict_unprivileged_userns = %ld "
		       "(applies to unprivileged users; pycell runs as root)", aa);
	else
		report(d, e == 0 ? CHECK_WARN : CHECK_FAIL, "apparmor userns", apparmor_fix(aa_fix, sizeof(aa_fix)),
		       "kernel.apparmor_restrict_unprivileged_userns = %ld: unprivileged user namespaces need "
		       "an AppArmor profile that allows them", aa);

	if (max_ns < 0)
		report(d, CHECK_WARN, "max user namespaces", "check that /proc is mounted",
		       "/proc/sys/user/max_user_namespaces is missing");
	else if (max_ns == 0)
		report(d, CHECK_FAIL, "max user namespaces",
		       "sysctl -w user.max_user_namespaces=15000 and keep it in /etc/sysctl.d/90-pycell.conf",
		       "user.max_user_namespaces = 0: no user namespace can be made");
	else if (max_ns < 64)
		report(d, CHECK_WARN, "max user namespaces",
		       "sysctl -w user.max_user_namespaces=15000 and keep it in /etc/sysctl.d/90-pycell.conf",
		       "user.max_user_namespaces = %ld: few concurrent runs possible", max_ns);
	else
		report(d, CHECK_OK, "max user namespaces", NULL, "user.max_user_namespaces = %ld", max_ns);
}

static void check_seccomp(struct doctor *d)
{
	cleanup_free char *actions = NULL;
	size_t len;
	int e = in_child(try_seccomp);
	if (e) {
		report(d, CHECK_FAIL, "seccomp", "use a kernel built with CONFIG_SECCOMP=y and CONFIG_SECCOMP_FILTER=y",
		       "seccomp(SECCOMP_SET_MODE_FILTER): %s", strerror(e));
		d->jailable = false;
		return;
	}
	if (read_file("/proc/sys/kernel/seccomp/actions_avail", 4096, &actions, &len) == 0) {
		actions[strcspn(actions, "\n")] = '\0';
		if (!strstr(actions, "errno") || !strstr(actions, "kill_process")) {
			report(d, CHECK_FAIL, "seccomp", "use Linux 4.14 or later",
			       "filter actions available: %s (errno and kill_process are needed)", actions);
			d->jailable = false;
			return;
		}
		report(d, CHECK_OK, "seccomp", NULL, "filters install; actions: %s", actions);
		return;
	}
	report(d, CHECK_OK, "seccomp", NULL, "filters install");
}

static const char *v2_fix(const struct cgroup_info *ci)
{
	switch (ci->v2_state) {
	case CG2_OK:
		return NULL;
	case CG2_NOT_MOUNTED:
	case CG2_BOUND_TO_V1:
		return "boot with the unified cgroup hierarchy: add systemd.unified_cgroup_hierarchy=1 to "
		       "GRUB_CMDLINE_LINUX in /etc/default/grub, run update-grub and reboot";
	case CG2_NOT_DELEGATED:
	case CG2_BUSY:
	case CG2_PARTIAL:
		return "give pycell a delegated cgroup of its own: run it as a service with Delegate=yes "
		       "(contrib/pycell.service), or start it with systemd-run --scope -p Delegate=yes -- pycell ...; "
		       "pycell moves itself into <cgroup>/pycell-supervisor and puts each run beside it";
	case CG2_ROOT_NOT_ENABLED:
		return "enable the controllers for children of the root cgroup: echo '+memory +pids +cpu' > "
		       "/sys/fs/cgroup/cgroup.subtree_control (pycell never changes the root cgroup itself), or run "
		       "pycell in a delegated cgroup (systemd-run --scope -p Delegate=yes -- pycell ...)";
	case CG2_NOT_WRITABLE:
		return "run pycell as root with CAP_DAC_OVERRIDE (a hierarchy's root directory is mode 0555), or in "
		       "a cgroup delegated to its user (Delegate=yes; in a container, a runtime that mounts the "
		       "container's cgroup read-write and gives it to pycell's user)";
	default:
		return NULL;
	}
}

static void check_cgroups(struct doctor *d, const struct cgroup_info *ci)
{
	char v1[512] = "";
	int n_v1 = 0, n_none = 0;
	char none[64] = "";
	const char *v1_fix = "run pycell as root with CAP_DAC_OVERRIDE (a hierarchy's root directory is mode "
			     "0555, so only that capability lets root make a child there), or in a cgroup "
			     "delegated to it";

	if (ci->v2_state == CG2_OK)
		report(d, CHECK_OK, "cgroup v2", NULL, "memory, pids and cpu delegated; runs go below %s",
		       ci->v2_parent);
	else
		report(d, CHECK_WARN, "cgroup v2", v2_fix(ci), "%s%s%s",
		       ci->v2_detail ? ci->v2_detail : "not usable",
		       ci->v2_parent ? "; run cgroups without controllers still go below " : "",
		       ci->v2_parent ? ci->v2_parent : "");

	for (int c = 0; c < CG_NCTRL; c++) {
		if (ci->by[c] == ENF_CGROUP1) {
			snprintf(v1 + strlen(v1), sizeof(v1) - strlen(v1), "%s%s in %s%s", n_v1 ? ", " : "",
				 cgroup_ctrl_name(c), ci->dir[c], c == CG_MEMORY && ci->memsw ? " (with swap)" : "");
			n_v1++;
		} else if (ci->by[c] == ENF_NONE || ci->by[c] == ENF_RLIMIT) {
			snprintf(none + strlen(none), sizeof(none) - strlen(none), "%s%s", n_none ? ", " : "",
				 cgroup_ctrl_name(c));
			n_none++;
		}
	}
	if (n_v1 && !ci->v1_detail)
		report(d, CHECK_OK, "cgroup v1", NULL, "%s", v1);
	else if (n_v1)
		report(d, CHECK_WARN, "cgroup v1", v1_fix, "%s; not usable: %s", v1, ci->v1_detail);
	else if (ci->v2_state == CG2_OK)
		report(d, CHECK_OK, "cgroup v1", NULL, "not needed: cgroup v2 has every controller");
	else if (ci->v1_detail)
		report(d, CHECK_WARN, "cgroup v1", v1_fix, "no usable v1 hierarchy for %s: %s", none, ci->v1_detail);
	else
		report(d, CHECK_WARN, "cgroup v1", v2_fix(ci), "no v1 hierarchy mounted for %s", none);

	if (n_none)
		report(d, CHECK_WARN, "limits", v2_fix(ci), "no cgroup controller for %s: %s", none,
		       ci->by[CG_PIDS] == ENF_RLIMIT && n_none == 1
			       ? "the pids limit falls back to RLIMIT_NPROC"
			       : "those limits are not enforced (pids falls back to RLIMIT_NPROC where the kernel "
				 "counts it per user namespace) and each run's result warns about it");
	else
		report(d, CHECK_OK, "limits", NULL, "memory by %s, pids by %s, cpu by %s (mode %s); rlimits as a "
		       "backstop", limit_enforcer_name(ci->by[CG_MEMORY]), limit_enforcer_name(ci->by[CG_PIDS]),
		       limit_enforcer_name(ci->by[CG_CPU]), ci->mode);

	if (ci->bpf_device)
		report(d, CHECK_OK, "device filter", NULL, "cgroup BPF device program attaches below %s",
		       ci->v2_parent);
	else
		report(d, CHECK_WARN, "device filter",
		       "run pycell as root (CAP_BPF and CAP_NET_ADMIN) on a kernel with CONFIG_CGROUP_BPF=y, a cgroup2 "
		       "mount and a build with libbpf; without it the jail still sees only the five device nodes",
		       "%s", ci->bpf_detail ? ci->bpf_detail : "not available");
}

/* Egress policies need what the device filter needs (a cgroup v2
 * directory per run, cgroup BPF), and CAP_NET_ADMIN for their veth pairs:
 * without it they are refused, never run with another network. */
static void check_egress(struct doctor *d, const struct cgroup_env *env, const struct cgroup_info *ci)
{
	struct pc_err err = { 0 };
	if (egress_host_check(env, &err) == 0)
		report(d, CHECK_OK, "egress", NULL, "egress policies can run: veth pairs, socket-address filters below %s",
		       ci->v2_parent);
	else
		report(d, CHECK_WARN, "egress", "run pycell as root on a host where the device filter attaches (above), "
		       "with a build that has libnl and libbpf; policies without an egress list are not affected",
		       "%s; egress policies are refused", err.msg);
}

static void check_python(struct doctor *d)
{
	if (access(DEFAULT_PYTHON, X_OK) == 0)
		report(d, CHECK_OK, "python", NULL, "%s", DEFAULT_PYTHON);
	else
		report(d, CHECK_FAIL, "python", "apt-get install python3, or set \"python\" in the policy",
		       "%s: %s", DEFAULT_PYTHON, strerror(errno));
}

/* pycell-init, which a warm jail's init executes (src/jail/small_init.h):
 * without it warm jails still run, each init a copy of the zygote. */
static void check_init(struct doctor *d)
{
	const char *path = pycell_init_path();
	if (access(path, X_OK) == 0)
		report(d, CHECK_OK, "init", NULL, "%s: a warm jail's init holds nothing of the zygote", path);
	else
		report(d, CHECK_WARN, "init", "make install (or PYCELL_DATADIR=the built source tree)",
		       "%s: %s; a warm jail's init stays a copy of the zygote (its page tables copied at "
		       "every run)", path, strerror(errno));
}

/* The wasm backend: built in, its Node there, its runner and Pyodide's
 * memory snapshot in the data dir.  A warning at most: native runs do
 * not need it, and a wasm policy says why it is refused. */
static void check_wasm(struct doctor *d)
{
#ifdef HAVE_WASM
	cleanup_free char *runner = xasprintf("%s/runtime/wasm/runner.mjs", pycell_datadir());
	cleanup_free char *snap = xasprintf("%s/runtime/wasm/pyodide/snapshot.bin", pycell_datadir());
	struct pc_err why = { 0 };
	if (access(PYCELL_NODE, X_OK) < 0)
		report(d, CHECK_WARN, "wasm", "install Node >= 20 at " PYCELL_NODE ", or configure --with-wasm where "
		       "it is", "%s: %s; wasm runs fail to start", PYCELL_NODE, strerror(errno));
	else if (access(runner, R_OK) < 0)
		report(d, CHECK_WARN, "wasm", "make install (or PYCELL_DATADIR=the source tree)",
		       "%s: %s; wasm runs fail to start", runner, strerror(errno));
	else if (access(snap, R_OK) < 0)
		report(d, CHECK_WARN, "wasm", "make (it makes the snapshot with Node)",
		       "%s: %s; wasm runs start without it, about 2 s slower", snap, strerror(errno));
	else if (jail_namespaces_refused(&why))
		/* the run still goes: it says so itself, and this says what to fix */
		report(d, CHECK_WARN, "wasm", "let pycell make user namespaces (the user namespaces line)",
		       "Pyodide " PYODIDE_VERSION " in " PYCELL_NODE " runs without namespaces, as this host "
		       "refuses them (%s): confined by no capabilities, no_new_privs, seccomp, rlimits, node's "
		       "permission model and WebAssembly, without a root, pid or network namespace of its own",
		       why.msg);
	else
		report(d, CHECK_OK, "wasm", NULL, "Pyodide " PYODIDE_VERSION " in " PYCELL_NODE
		       " (permission model, no code from strings), from a memory snapshot, in the same jail as "
		       "native runs");
#else
	report(d, CHECK_WARN, "wasm", "configure --with-wasm (Node >= 20 and the pinned npm pyodide: npm ci "
	       "--prefix runtime/wasm)", "not built in: wasm policies are refused");
#endif
}

/* python.preload of the policy given (else the configuration's): its
 * zygote started as a server would start it, and what it imported. */
/* The env of the policy a check is about (--policy, else the
 * configuration's), loaded: 0; -1 when it could not be, said as the
 * check's warning. */
static int policy_env(struct doctor *d, const char *check, const char *policy, const char *config,
		      struct run_env *env)
{
	struct pycell_conf conf = { 0 };
	struct pc_err err = { 0 };
	int rc = -1;

	if (!policy && conf_load(config, &conf, &err) < 0)
		report(d, CHECK_WARN, check, "fix the configuration (pycell.conf(5)), or name a policy with "
		       "--policy", "%s", err.msg);
	else if (run_env_load(env, policy ? policy : conf.policy, &err) < 0)
		report(d, CHECK_WARN, check, "fix the policy (pycell-policy(5))", "%s", err.msg);
	else
		rc = 0;
	conf_free(&conf);
	return rc;
}

/* A preload report's {name: why}, as "name (why); name (why)"; NULL when
 * empty */
static char *name_whys(json_t *whys)
{
	const char *name;
	json_t *v;
	char *out = NULL;
	json_object_foreach(whys, name, v) {
		char *more = xasprintf("%s%s%s (%s)", out ? out : "", out ? "; " : "", name, json_string_value(v));
		free(out);
		out = more;
	}
	return out;
}

static void check_preload(struct doctor *d, const char *policy, const char *config)
{
	struct run_env env;
	struct pc_err err = { 0 };
	json_t *r;
	cleanup_free char *left = NULL, *unused = NULL;

	if (policy_env(d, "preload", policy, config, &env) < 0)
		return;
	if (!env.policy.n_python_preload) {
		report(d, CHECK_OK, "preload", NULL, "policy %s preloads nothing", env.policy.name);
	} else if (policy_is_wasm(&env.policy)) {
		report(d, CHECK_OK, "preload", NULL, "policy %s: the wasm backend preloads nothing (it imports on "
		       "demand)", env.policy.name);
	} else if (run_env_prepare(&env, &err) < 0 || run_env_warm(&env, &err) < 0) {
		report(d, CHECK_WARN, "preload", "take the module named out of python.preload, or fix what the "
		       "message names; until then the policy's runs start cold", "policy %s: %s", env.policy.name,
		       err.msg);
	} else {
		r = run_env_preload(&env);
		left = name_whys(json_object_get(r, "failed"));
		unused = name_whys(json_object_get(r, "unused"));
		if (left)
			report(d, CHECK_WARN, "preload", "install the modules left out, or take them out of "
			       "python.preload", "policy %s: %zu of %zu modules imported; left out: %s", env.policy.name,
			       json_array_size(json_object_get(r, "loaded")), env.policy.n_python_preload, left);
		else if (unused)
			report(d, CHECK_WARN, "preload", "fix the module's installation (each run does that work itself "
			       "until then)", "policy %s: all %zu modules imported by its zygote, but the first use of %s "
			       "failed there", env.policy.name, env.policy.n_python_preload, unused);
		else
			report(d, CHECK_OK, "preload", NULL, "policy %s: all %zu modules imported by its zygote",
			       env.policy.name, env.policy.n_python_preload);
		json_decref(r);
	}
	run_env_free(&env);
}

/* matplotlib's font list for the policy (run/fonts.h): built and up to
 * date, or why not; doctor builds nothing. */
static void check_fonts(struct doctor *d, const char *policy, const char *config)
{
	struct run_env env;
	cleanup_free char *dir = NULL;
	char why[PATH_MAX + 64], name[NAME_MAX + 1];

	if (policy_env(d, "fonts", policy, config, &env) < 0)
		return;
	if (!(dir = fonts_dir_for(&env.policy)))
		report(d, CHECK_OK, "fonts", NULL, "policy %s: no font list (the wasm backend, an MPLCONFIGDIR of "
		       "its own, or no cache: PYCELL_CACHE_DIR); matplotlib scans the fonts in each run",
		       env.policy.name);
	else if (!fonts_fresh(&env.policy, dir, why, sizeof(why)))
		report(d, CHECK_WARN, "fonts", "start pycell mcp or pycell serve once: it builds the list at start",
		       "policy %s: matplotlib's font list is not built or is stale (%s); until it is, each run's "
		       "first plot scans the fonts", env.policy.name, why);
	else if (rootfs_font_list(dir, name, sizeof(name)))
		report(d, CHECK_OK, "fonts", NULL, "policy %s: matplotlib's font list %s/%s, up to date",
		       env.policy.name, dir, name);
	else
		report(d, CHECK_OK, "fonts", NULL, "policy %s: %s has no matplotlib (recorded in %s; built again "
		       "once it has)", env.policy.name, env.policy.python, dir);
	run_env_free(&env);
}

/* The configuration's state_dir: usable (whose, what it holds), and dill
 * for what plain pickle cannot keep. */
static void check_state(struct doctor *d, const char *config)
{
	struct pycell_conf conf = { 0 };
	struct state_dir *sd = NULL;
	struct state_record *recs = NULL;
	struct pc_err err = { 0 };
	size_t n;
	int dill, rc;

	if (conf_load(config, &conf, &err) < 0) {
		report(d, CHECK_WARN, "state", "fix the configuration (pycell.conf(5))", "%s", err.msg);
		return;
	}
	if (!conf.state_dir) {
		report(d, CHECK_OK, "state", NULL, "no state_dir: idle sessions are closed, not paused, and tasks "
		       "do not outlive the server");
		conf_free(&conf);
		return;
	}
	/* as the server would find it, making nothing (the server does) */
	rc = state_dir_check(conf.state_dir, &err);
	if (rc < 0) {
		report(d, CHECK_WARN, "state", "make it the server's user's, mode 0700, and run doctor as that user "
		       "(or fix state_dir in pycell.conf(5))",
		       "%s: a server of this user with this configuration does not start", err.msg);
		conf_free(&conf);
		return;
	}
	n = 0;
	if (rc == 0 && state_dir_open(conf.state_dir, &sd, &err) == 0)
		n = state_list(sd, NULL, NULL, true, &recs);
	for (size_t i = 0; i < n; i++)
		state_record_free(&recs[i]);
	free(recs);
	dill = system(DEFAULT_PYTHON " -c 'import dill' >/dev/null 2>&1");
	if (dill != 0)
		report(d, CHECK_WARN, "state", "apt-get install python3-dill",
		       "%s: usable; without dill for " DEFAULT_PYTHON ", a paused session keeps no function or class "
		       "that plain pickle cannot take (it names them)", conf.state_dir);
	else
		report(d, CHECK_OK, "state", NULL, "%s: idle sessions pause there (%zu paused now%s)", conf.state_dir,
		       n, rc == 1 ? "; the server makes it" : "");
	state_dir_free(sd);
	conf_free(&conf);
}

static void print_text(const struct doctor *d)
{
	size_t i;
	json_t *c;
	printf("pycell doctor: what this host offers the jail\n\n");
	json_array_foreach(d->checks, i, c) {
		const char *fix = json_string_value(json_object_get(c, "fix"));
		printf("  %-4s  %-20s %s\n", json_string_value(json_object_get(c, "status")),
		       json_string_value(json_object_get(c, "name")), json_string_value(json_object_get(c, "detail")));
		if (fix)
			printf("        %-20s fix: %s\n", "", fix);
	}
	printf("\n%s\n", d->jailable ? "runs can be jailed on this host"
				     : "runs cannot be jailed on this host: apply the fixes marked fail");
}

static const char doctor_usage[] =
	"Usage: pycell doctor [--json] [--policy FILE|NAME] [--config FILE]\n"
	"Check what this host offers the jail (user namespaces, AppArmor, cgroups v2/v1, seccomp,\n"
	"BPF device filter, egress, the wasm backend), what a policy preloads, whether its font list\n"
	"is built, and the state directory of paused sessions, and print the exact fix for what is\n"
	"missing.  Exit status 0 when runs can be jailed, 1 when they cannot.\n"
	"\n"
	"  --json              print one JSON object instead of text\n"
	"  --policy FILE|NAME  the policy whose python.preload and font list to check (default: the\n"
	"                      configuration's)\n"
	"  --config FILE       the configuration, its default policy and state_dir (default\n"
	"                      " CONF_DEFAULT_PATH ")\n"
	"  -h, --help          show this help\n";

struct doctor_opts {
	bool help, json;
	const char *policy, *config;
};

static const struct opt doctor_options[] = {
	{ OPT_ROW("help", 'h', OPT_HELP, offsetof(struct doctor_opts, help)) },
	{ OPT_ROW("json", 0, OPT_FLAG, offsetof(struct doctor_opts, json)) },
	{ OPT_ROW("policy", 0, OPT_STRING, offsetof(struct doctor_opts, policy)) },
	{ OPT_ROW("config", 0, OPT_STRING, offsetof(struct doctor_opts, config)) },
};

const struct opt_cmd cli_doctor_cmd = { "doctor", doctor_usage, doctor_options, ARRAY_SIZE(doctor_options),
				      false };

int cmd_doctor(int argc, char **argv)
{
	struct doctor_opts o = { 0 };
	struct doctor d;
	struct cgroup_env *env = NULL;
	struct cgroup_info ci;
	struct pc_err err;
	int i;

	i = opts_parse(&cli_doctor_cmd, argc, argv, &o, &err);
	if (i < 0)
		return cli_usage_error("doctor", &err);
	if (o.help) {
		fputs(doctor_usage, stdout);
		return 0;
	}
	d = (struct doctor){ .checks = json_array(), .jailable = true };

	check_userns(&d);
	check_seccomp(&d);
	if (cgroup_env_probe(&env, &err) < 0)
		env = NULL;
	cgroup_env_info(env, &ci);
	check_cgroups(&d, &ci);
	check_egress(&d, env, &ci);
	check_python(&d);
	check_init(&d);
	check_wasm(&d);
	check_preload(&d, o.policy, o.config);
	check_fonts(&d, o.policy, o.config);
	check_state(&d, o.config);

	if (o.json) {
		json_t *lim = json_object(), *dirs = json_object();
		json_t *out;
		for (int c = 0; c < CG_NCTRL; c++) {
			json_object_set_new(lim, cgroup_ctrl_name(c), json_string(limit_enforcer_name(ci.by[c])));
			json_object_set_new(dirs, cgroup_ctrl_name(c), ci.dir[c] ? json_string(ci.dir[c]) : json_null());
		}
		/* limits: what enforces each; dirs: where the runs' cgroups go */
		out = json_pack("{s:b,s:O,s:{s:s,s:s?,s:s?,s:o,s:o,s:b}}", "jailable", d.jailable, "checks", d.checks,
				"cgroups", "mode", ci.mode, "v2_mount", ci.v2_mount, "v2_parent", ci.v2_parent,
				"limits", lim, "dirs", dirs, "device_filter", ci.bpf_device);
		if (out) {
			char *s = json_dumps(out, JSON_INDENT(2));
			if (s)
				puts(s);
			free(s);
			json_decref(out);
		}
	} else {
		print_text(&d);
	}
	cgroup_env_free(env);
	json_decref(d.checks);
	return d.jailable ? 0 : 1;
}
