/* pycell: matplotlib's font list, built once (fonts.h). */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "base/log.h"
#include "base/loop.h"
#include "base/sha256.h"
#include "jail/rootfs.h"
#include "jail/seccomp.h"
#include "run/fonts.h"
#include "run/program.h"
#include "run/run.h"

#define FONTS_SCRIPT "pycell/_fonts.py"
#define FONTS_TIMEOUT_S 120
#define FONTS_LIST_MAX (16u << 20)   /* matplotlib's is some 100 kB */
#define WATCH_MAX (1u << 20)
#define WATCH_DIRS_MAX 4096

/* ------------------------------------------------------------ the key */

/* The run environment's MPLCONFIGDIR is the one the link goes into. */
static bool mplconfigdir_is_ours(const struct policy *p)
{
	char **envp = program_envp(p, false);
	bool ours = false;
	for (char **e = envp; *e; e++)
		if (strncmp(*e, "MPLCONFIGDIR=", 13) == 0)
			ours = strcmp(*e + 13, JAIL_MPLCONFIGDIR) == 0;
	program_strv_free(envp);
	return ours;
}

char *fonts_dir_for(const struct policy *p)
{
	cleanup_free char *base = NULL, *text = NULL;
	json_t *k, *binds;
	struct stat st = { 0 };
	char key[65];

	if (policy_is_wasm(p) || !mplconfigdir_is_ours(p) || !(base = cache_subdir("fonts", 0711)))
		return NULL;
	binds = json_array();
	/* what the list's paths are made of: the interpreter (this file, as
	 * it is now) and what the policy binds where */
	(void)stat(p->python, &st);
	for (size_t i = 0; i < p->n_binds; i++)
		json_array_append_new(binds, json_pack("[s,s,b]", p->binds[i].src, p->binds[i].dst,
						       p->binds[i].optional));
	k = json_pack("{s:i,s:s,s:[I,I,I,I],s:o}", "fonts", 1, "python", p->python, "stat", (json_int_t)st.st_dev,
		      (json_int_t)st.st_ino, (json_int_t)st.st_mtime, (json_int_t)st.st_size, "binds", binds);
	text = json_dumps(k, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(k);
	if (!text)
		return NULL;
	sha256_hex(text, strlen(text), key);
	return xasprintf("%s/%.32s", base, key);
}

/* ------------------------------------------------------------ fresh or stale */

/* A directory as the jail named it, where this process finds it: through
 * the policy's bind whose destination holds it (the longest), else at
 * the same path (/usr is bound where it is).  NULL: in no bind and not
 * under /usr, so this process cannot look at it. */
static char *host_path(const struct policy *p, const char *path)
{
	const struct bind_spec *best = NULL;
	size_t best_len = 0;
	for (size_t i = 0; i < p->n_binds; i++) {
		size_t n = strlen(p->binds[i].dst);
		if (n > best_len && strncmp(path, p->binds[i].dst, n) == 0 && (path[n] == '/' || !path[n])) {
			best = &p->binds[i];
			best_len = n;
		}
	}
	if (best)
		return xasprintf("%s%s", best->src, path + best_len);
	if (strncmp(path, "/usr/", 5) == 0)
		return xstrdup(path);
	return NULL;
}

/* The whole of path, at most max bytes, when it is a regular file: not a
 * link or a FIFO, which the build's jail could leave where its files go
 * (EINVAL: not regular; EFBIG: larger).  -1 with errno. */
static int read_regular(const char *path, size_t max, char **out, size_t *len)
{
	cleanup_close int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return -1;
	if (!S_ISREG(st.st_mode)) {
		errno = EINVAL;
		return -1;
	}
	return read_fd_all(fd, max, out, len);
}

/* watch.json of dir, as the builder wrote it and the supervisor checked
 * it: {"matplotlib": VERSION|null, "dirs": {PATH: MTIME_NS}}; NULL with why
 * when it is not that. */
static json_t *watch_read(const char *path, const char **why)
{
	cleanup_free char *text = NULL;
	size_t len;
	json_t *w, *dirs;
	const char *k;
	json_t *v;

	if (read_regular(path, WATCH_MAX, &text, &len) < 0) {
		*why = errno == ENOENT ? "none yet" : errno == EINVAL ? "not a regular file" : strerror(errno);
		return NULL;
	}
	w = json_loadb(text, len, 0, NULL);
	dirs = json_object_get(w, "dirs");
	*why = "not a record of the directories it watches";
	if (!json_is_object(dirs) || json_object_size(dirs) > WATCH_DIRS_MAX ||
	    !(json_is_string(json_object_get(w, "matplotlib")) || json_is_null(json_object_get(w, "matplotlib")))) {
		json_decref(w);
		return NULL;
	}
	json_object_foreach(dirs, k, v) {
		if (k[0] != '/' || !json_is_integer(v)) {
			json_decref(w);
			return NULL;
		}
	}
	return w;
}

/* Stale when a watched directory's time has changed or it is gone. */
bool fonts_fresh(const struct policy *p, const char *dir, char *why, size_t size)
{
	cleanup_free char *wpath = xasprintf("%s/watch.json", dir);
	const char *bad = NULL, *k;
	json_t *w = watch_read(wpath, &bad), *v;
	char name[NAME_MAX + 1];

	if (!w) {
		snprintf(why, size, "%s: %s", wpath, bad);
		return false;
	}
	if (json_is_string(json_object_get(w, "matplotlib")) && !rootfs_font_list(dir, name, sizeof(name))) {
		snprintf(why, size, "%s has no font list", dir);
		json_decref(w);
		return false;
	}
	json_object_foreach(json_object_get(w, "dirs"), k, v) {
		cleanup_free char *host = host_path(p, k);
		struct stat st;
		if (!host)
			continue;
		if (stat(host, &st) < 0 || (json_int_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec !=
						   json_integer_value(v)) {
			snprintf(why, size, "%s changed since it was built", k);
			json_decref(w);
			return false;
		}
	}
	json_decref(w);
	return true;
}

/* ------------------------------------------------------------ the build */

struct fonts_build {
	struct loop *loop;
	const struct policy *base;   /* the env's: outlives the build */
	char *dir;                   /* KEY's directory */
	char *staging;               /* KEY.build.PID: the jail's /fonts */
	struct policy policy;        /* the build's */
	bool have_policy;
	struct seccomp_filter *filter;
	char *code;
	size_t code_len;
	struct run *run;
	uint64_t started_ms;
	int efd;
	struct loop_watch w;
	bool watched;
};

void fonts_build_free(struct fonts_build *b)
{
	if (!b)
		return;
	if (b->watched)
		loop_del(b->loop, &b->w);
	if (b->efd >= 0)
		close(b->efd);
	run_free(b->run);
	if (b->staging)
		rm_tree(b->staging);
	if (b->have_policy)
		policy_free(&b->policy);
	seccomp_filter_free(b->filter);
	free(b->code);
	free(b->staging);
	free(b->dir);
	free(b);
}

/* A new file of ours at path: 0644 whatever the umask (a jail's user
 * reads it), synced. */
static int write_new(const char *path, const char *data, size_t len, struct pc_err *err)
{
	cleanup_close int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0 || fchmod(fd, 0644) < 0 || write_all(fd, data, len) < 0 || fsync(fd) < 0)
		return pc_syserr(err, "fonts", "write %s", path);
	return 0;
}

/* A copy of src (a regular file of at most max bytes, read_regular) made
 * by this process at dst, mode 0644. */
static int copy_file(const char *src, const char *dst, size_t max, struct pc_err *err)
{
	cleanup_free char *data = NULL;
	size_t len;
	if (read_regular(src, max, &data, &len) < 0)
		return errno == EINVAL || errno == EFBIG
			       ? pc_fail(err, errno, "fonts", "%s is not a regular file of at most %zu bytes", src, max)
			       : pc_syserr(err, "fonts", "read %s", src);
	return write_new(dst, data, len, err);
}

/* The build's output, checked, in a directory of ours (the staging
 * directory's name and .new) that then takes KEY's place: the list copied (matplotlib's file, which only
 * the runs' matplotlib reads), the record parsed and written again. */
static int keep(struct fonts_build *b, struct pc_err *err)
{
	cleanup_free char *made = xasprintf("%s.new", b->staging), *wsrc = NULL, *wdst = NULL;
	cleanup_free char *wtext = NULL;
	const char *why = NULL;
	char name[NAME_MAX + 1];
	json_t *w;
	int rc = -1;

	wsrc = xasprintf("%s/watch.json", b->staging);
	if (!(w = watch_read(wsrc, &why)))
		return pc_fail(err, EINVAL, "fonts", "%s: %s", wsrc, why);
	rm_tree(made);
	if (mkdir(made, 0755) < 0 || chmod(made, 0755) < 0) {
		pc_syserr(err, "fonts", "mkdir %s", made);
		goto out;
	}
	if (json_is_string(json_object_get(w, "matplotlib"))) {
		cleanup_free char *src = NULL, *dst = NULL;
		if (!rootfs_font_list(b->staging, name, sizeof(name))) {
			pc_fail(err, ENOENT, "fonts", "matplotlib %s left no font list in %s",
				json_string_value(json_object_get(w, "matplotlib")), b->staging);
			goto out;
		}
		src = xasprintf("%s/%s", b->staging, name);
		dst = xasprintf("%s/%s", made, name);
		if (copy_file(src, dst, FONTS_LIST_MAX, err) < 0)
			goto out;
	}
	wdst = xasprintf("%s/watch.json", made);
	wtext = json_dumps(w, JSON_COMPACT);
	if (!wtext || write_new(wdst, wtext, strlen(wtext), err) < 0) {
		if (!wtext)
			pc_fail(err, ENOMEM, "fonts", "write %s", wdst);
		goto out;
	}
	/* in place of the stale one at once, if there is one (a run that
	 * bound it keeps what it bound); two servers building at once: the
	 * last one's stays */
	if (renameat2(AT_FDCWD, made, AT_FDCWD, b->dir, RENAME_EXCHANGE) < 0 &&
	    (errno != ENOENT || rename(made, b->dir) < 0)) {
		pc_syserr(err, "fonts", "rename %s to %s", made, b->dir);
		goto out;
	}
	rc = 0;
out:
	rm_tree(made);   /* the stale list, after the exchange */
	json_decref(w);
	return rc;
}

static void on_build_done(struct run *r, void *ctx)
{
	struct fonts_build *b = ctx;
	uint64_t one = 1;
	/* the run is freed from the loop, not from inside its own callback */
	(void)!write(b->efd, &one, sizeof(one));
	(void)r;
}

static void on_wake(struct loop_watch *w, uint32_t events, void *data)
{
	struct fonts_build *b = data;
	const struct run_result *r = run_result(b->run);
	struct pc_err err = { 0 };
	uint64_t n;

	(void)!read(b->efd, &n, sizeof(n));
	if (r->status == RUN_SETUP_FAILED)
		log_warn("fonts: the build's jail could not be made: %s: %s", r->setup_error.step,
			 r->setup_error.msg);
	else if (r->status != RUN_OK || r->exit_code != 0)
		log_warn("fonts: building matplotlib's font list for %s failed (%s, exit %d): %s", b->base->python,
			 run_status_name(r->status), r->exit_code,
			 r->err.len > 300 ? r->err.data + r->err.len - 300 : r->err.data ? r->err.data : "");
	else if (keep(b, &err) < 0)
		log_warn("fonts: %s: %s", err.step, err.msg);
	else
		log_info("fonts: matplotlib's font list for %s built in %llu ms (%s)", b->base->python,
			 (unsigned long long)(now_ms() - b->started_ms), b->dir);
	loop_del(b->loop, &b->w);
	b->watched = false;
	run_free(b->run);
	b->run = NULL;
	rm_tree(b->staging);
	(void)w;
	(void)events;
}

/* The build's policy: the env's interpreter, identity and binds, the
 * staging directory its only writable place besides /tmp, no network,
 * no tools, no sessions, no packages. */
static int build_policy(struct fonts_build *b, struct pc_err *err)
{
	json_t *pj = policy_to_json(b->base), *fs, *lim;
	cleanup_free char *text = NULL;
	int rc;

	json_object_del(pj, "description");
	json_object_del(pj, "sessions");
	json_object_del(pj, "tools");
	json_object_del(pj, "packages");
	json_object_set_new(pj, "network", json_string("none"));
	fs = json_object_get(pj, "filesystem");
	json_array_append_new(json_object_get(fs, "binds"),
			      json_pack("{s:s,s:s,s:b}", "src", b->staging, "dst", "/fonts", "writable", 1));
	lim = json_object_get(pj, "limits");
	json_object_set_new(lim, "timeout", json_integer(FONTS_TIMEOUT_S));
	text = json_dumps(pj, JSON_COMPACT);
	json_decref(pj);
	rc = policy_parse(text, "the font list's build", &b->policy, err);
	b->have_policy = rc == 0;
	return rc;
}

static int build_start(struct fonts_build *b, const struct run_env *env, struct pc_err *err)
{
	cleanup_free char *script = xasprintf("%s/" FONTS_SCRIPT, env->runtime_dir);
	struct run_request req = { .stdin_fd = -1 };

	static unsigned n;   /* two servers of one process may build one key */
	b->staging = xasprintf("%s.build.%d.%u", b->dir, (int)getpid(), n++);
	rm_tree(b->staging);
	/* the jail's user writes it: its id is not ours when a range is mapped */
	if (mkdir(b->staging, 0777) < 0 || chmod(b->staging, 0777) < 0)
		return pc_syserr(err, "fonts", "mkdir %s", b->staging);
	if (read_file(script, 1u << 20, &b->code, &b->code_len) < 0)
		return pc_syserr(err, "fonts", "read %s", script);
	if (build_policy(b, err) < 0 || seccomp_filter_compile(&b->policy, &b->filter, err) < 0)
		return -1;
	if ((b->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0 ||
	    loop_add(b->loop, &b->w, b->efd, EPOLLIN, on_wake, b) < 0)
		return pc_syserr(err, "fonts", "watch the build");
	b->watched = true;
	req.policy = &b->policy;
	req.filter = b->filter;
	req.cgroups = env->cgroups;
	req.runtime_dir = env->runtime_dir;
	req.mode = RUN_MODE_SCRIPT;
	req.code = b->code;
	req.code_len = b->code_len;
	req.prog_name = "_fonts.py";
	req.on_done = on_build_done;
	req.ctx = b;
	b->started_ms = now_ms();
	return run_start(b->loop, &req, &b->run, err);
}

struct fonts_build *fonts_refresh(struct loop *l, const struct run_env *env)
{
	struct fonts_build *b;
	struct pc_err err = { 0 };
	char why[PATH_MAX + 64];

	if (!env->fonts_dir)
		return NULL;
	if (fonts_fresh(&env->policy, env->fonts_dir, why, sizeof(why))) {
		log_debug("fonts: %s is up to date", env->fonts_dir);
		return NULL;
	}
	b = xcalloc(1, sizeof(*b));
	b->loop = l;
	b->base = &env->policy;
	b->dir = xstrdup(env->fonts_dir);
	b->efd = -1;
	log_info("fonts: building matplotlib's font list for %s in the background (%s)", env->policy.python, why);
	if (build_start(b, env, &err) < 0) {
		log_warn("fonts: %s: %s", err.step, err.msg);
		fonts_build_free(b);
		return NULL;
	}
	return b;
}
