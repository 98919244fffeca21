/* pycell: packages on request (packages.h).
 *
 * The install is an ordinary run of runtime/pycell/_install.py (pip,
 * in-process) under a policy made from the caller's (its interpreter,
 * flags, identity and binds): its network is an
 * egress list of the index's host and port alone, its only writable
 * place a staging directory of the cache bound at /pkg, its limits
 * those of an install (5 minutes, at least 1 GiB).  Nothing the jail
 * writes is trusted: pip's report is read as untrusted JSON, every
 * package in it (dependencies too) must be allowed by the policy, and
 * only then is the staged tree renamed into the cache. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "base/log.h"
#include "base/sha256.h"
#include "jail/seccomp.h"
#include "run/packages.h"
#include "run/run.h"

#define INSTALL_SCRIPT "pycell/_install.py"
#define INSTALL_TIMEOUT_MS (5 * 60 * 1000)
#define INSTALL_MEMORY (1ULL << 30)
#define INSTALL_TMP (2ULL << 30)
#define REPORT_MAX (4u << 20)
#define ERROR_TAIL 1500

static char *cache_dir;
static uint64_t cache_max = 4ULL << 30;

void packages_configure(const char *dir, uint64_t max_bytes)
{
	free(cache_dir);
	cache_dir = xstrdup(dir);
	cache_max = max_bytes;
}

static const char *cache(void)
{
	return cache_dir ? cache_dir : "/var/cache/pycell/packages";
}

/* ------------------------------------------------------------ names */

/* PEP 503: lower case, runs of - _ . as one -. */
static void normalize(const char *name, size_t n, char *out, size_t cap)
{
	size_t o = 0;
	for (size_t i = 0; i < n && o + 1 < cap; i++) {
		char ch = name[i];
		if (ch == '-' || ch == '_' || ch == '.') {
			if (o && out[o - 1] == '-')
				continue;
			ch = '-';
		}
		out[o++] = (ch >= 'A' && ch <= 'Z') ? (char)(ch - 'A' + 'a') : ch;
	}
	out[o] = '\0';
}

#define NAME_MAX_LEN 128

/* The name of a requirement (policy_requirement_ok checked it) and
 * where its version specifiers start. */
static const char *req_name(const char *s, char out[NAME_MAX_LEN])
{
	size_t n = strcspn(s, "=!<>~");
	normalize(s, n, out, NAME_MAX_LEN);
	return s + n;
}

static bool allowed_in(char *const *allow, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++) {
		char a[NAME_MAX_LEN];
		if (strcmp(allow[i], "*") == 0)
			return true;
		req_name(allow[i], a);
		if (strcmp(a, name) == 0)
			return true;
	}
	return false;
}

int packages_check(const struct policy *p, char *const *specs, size_t n, struct pc_err *err)
{
	if (n > PACKAGES_MAX)
		return pc_fail(err, E2BIG, "packages", "%zu packages: at most %d a request", n, PACKAGES_MAX);
	if (n && !p->packages.index)
		return pc_fail(err, EPERM, "packages", "the policy \"%s\" installs no packages (it names no packages.index)",
			       p->name ? p->name : "");
	for (size_t i = 0; i < n; i++) {
		char name[NAME_MAX_LEN];
		const char *why;
		if (!policy_requirement_ok(specs[i], &why))
			return pc_fail(err, EINVAL, "packages", "packages[%zu] \"%s\": %s", i, specs[i], why);
		req_name(specs[i], name);
		if (!allowed_in(p->packages.allow, p->packages.n_allow, name))
			return pc_fail(err, EPERM, "packages", "packages[%zu] \"%s\": %s is not among the packages the "
				       "policy allows (sandbox_info lists them)", i, specs[i], name);
	}
	return 0;
}

/* ------------------------------------------------------------ the cache */

struct held {
	char *dir;
	unsigned refs;
	struct held *next;
};
static struct held *held;

static void hold(const char *dir)
{
	struct held *h;
	for (h = held; h && strcmp(h->dir, dir) != 0; h = h->next)
		;
	if (!h) {
		h = xcalloc(1, sizeof(*h));
		h->dir = xstrdup(dir);
		h->next = held;
		held = h;
	}
	h->refs++;
}

void packages_put(const char *dir)
{
	struct held **p = &held;
	while (*p && strcmp((*p)->dir, dir) != 0)
		p = &(*p)->next;
	if (*p && --(*p)->refs == 0) {
		struct held *h = *p;
		*p = h->next;
		free(h->dir);
		free(h);
	}
}

static bool is_held(const char *dir)
{
	for (struct held *h = held; h; h = h->next)
		if (strcmp(h->dir, dir) == 0)
			return true;
	return false;
}

static uint64_t tree_bytes;
static int add_size(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)path;
	(void)ftw;
	if (flag == FTW_F)
		tree_bytes += (uint64_t)st->st_blocks * 512;
	return 0;
}

static uint64_t du(const char *path)
{
	tree_bytes = 0;
	nftw(path, add_size, 16, FTW_PHYS);
	return tree_bytes;
}

/* The cache past its size: the sets used least recently go first, never
 * one a run of ours holds. */
static void evict(void)
{
	cleanup_free char *sets = xasprintf("%s/sets", cache());
	struct ent { char *path; time_t used; uint64_t bytes; } *e = NULL;
	size_t n = 0;
	uint64_t total = 0;
	DIR *d = opendir(sets);
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d))) {
		struct stat st;
		char *path;
		if (de->d_name[0] == '.')
			continue;
		path = xasprintf("%s/%s", sets, de->d_name);
		if (stat(path, &st) < 0) {
			free(path);
			continue;
		}
		e = xrealloc(e, (n + 1) * sizeof(*e));
		e[n] = (struct ent){ path, st.st_mtime, du(path) };
		total += e[n++].bytes;
	}
	closedir(d);
	while (total > cache_max) {
		size_t oldest = n;
		for (size_t i = 0; i < n; i++)
			if (e[i].path && !is_held(e[i].path) && (oldest == n || e[i].used < e[oldest].used))
				oldest = i;
		if (oldest == n)
			break;
		log_info("packages: cache over %llu bytes: removing %s", (unsigned long long)cache_max, e[oldest].path);
		rm_tree(e[oldest].path);
		total -= e[oldest].bytes;
		free(e[oldest].path);
		e[oldest].path = NULL;
	}
	for (size_t i = 0; i < n; i++)
		free(e[i].path);
	free(e);
}

/* cache/, sets/, requests/, staging/: traversable by the jail's ids (the
 * install jail reaches its staging dir through them, by name), not
 * listable by anyone else. */
static int cache_dirs(struct pc_err *err)
{
	static const char *const sub[] = { "", "/sets", "/requests", "/staging" };
	for (size_t i = 0; i < ARRAY_SIZE(sub); i++) {
		cleanup_free char *d = xasprintf("%s%s", cache(), sub[i]);
		if (mkdir_p(d, 0711, err) < 0)
			return -1;
		if (chmod(d, 0711) < 0)
			return pc_syserr(err, "packages", "chmod %s", d);
	}
	return 0;
}

/* ------------------------------------------------------------ an install */

struct pkg_op {
	struct loop *loop;
	pkg_done_fn done;
	void *ctx;
	char **specs;
	size_t n;
	char **allow;          /* the caller's policy's packages.allow */
	size_t n_allow;
	char rkey[65];
	char *source;          /* the index and its CA bundle's digest: part of every key */
	char *ca;              /* the CA bundle's bytes, read once: keyed, then given the install */
	size_t ca_len;
	char *set_dir;         /* a cache hit, or the install's result */
	struct pc_err err;
	bool failed;

	/* the install */
	struct policy policy;
	bool have_policy;
	struct seccomp_filter *filter;
	struct run *run;
	char *staging;
	char *code;
	size_t code_len;
	char **argv;

	int efd;
	struct loop_watch w;
	bool watched;
};

static void op_free(struct pkg_op *op)
{
	if (op->watched)
		loop_del(op->loop, &op->w);
	if (op->efd >= 0)
		close(op->efd);
	run_free(op->run);
	if (op->staging)
		rm_tree(op->staging);
	free(op->staging);
	seccomp_filter_free(op->filter);
	if (op->have_policy)
		policy_free(&op->policy);
	free(op->code);
	for (size_t i = 0; op->argv && op->argv[i]; i++)
		free(op->argv[i]);
	free(op->argv);
	for (size_t i = 0; i < op->n; i++)
		free(op->specs[i]);
	free(op->specs);
	for (size_t i = 0; i < op->n_allow; i++)
		free(op->allow[i]);
	free(op->allow);
	free(op->set_dir);
	free(op->source);
	free(op->ca);
	free(op);
}

void packages_cancel(struct pkg_op *op)
{
	if (op)
		op_free(op);
}

static void wake(struct pkg_op *op)
{
	uint64_t one = 1;
	(void)!write(op->efd, &one, sizeof(one));
}

static int fail(struct pkg_op *op, int errnum, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(struct pkg_op *op, int errnum, const char *fmt, ...)
{
	va_list ap;
	op->failed = true;
	op->err.errnum = errnum;
	snprintf(op->err.step, sizeof(op->err.step), "packages");
	va_start(ap, fmt);
	vsnprintf(op->err.msg, sizeof(op->err.msg), fmt, ap);
	va_end(ap);
	return -1;
}

/* pip's last words, for the error: its ERROR lines, else the tail. */
static void pip_error(const struct run_result *r, char *out, size_t cap)
{
	const char *s = r->err.data ? r->err.data : "", *e = s + r->err.len, *nl;
	size_t used = 0;
	for (const char *p = s; p < e && used < cap; p = nl ? nl + 1 : e) {
		size_t len;
		nl = memchr(p, '\n', (size_t)(e - p));
		len = (size_t)((nl ? nl : e) - p);
		if ((size_t)(e - p) > 6 && strncmp(p, "ERROR:", 6) == 0)
			used += (size_t)snprintf(out + used, cap - used, "%s%.*s", used ? " " : "", (int)len, p);
	}
	if (!used)
		snprintf(out, cap, "%.*s", (int)(r->err.len > ERROR_TAIL ? ERROR_TAIL : r->err.len),
			 r->err.len > ERROR_TAIL ? e - ERROR_TAIL : s);
}

/* A new file of ours (mode 0644), whole or not at all. */
static int create_file(const char *path, const char *data, size_t len)
{
	cleanup_close int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0 || write_all(fd, data, len) < 0) {
		int e = errno;
		unlink(path);
		errno = e;
		return -1;
	}
	return 0;
}

/* The wheel's digest that pip's report gives (download_info.archive_info:
 * hashes.sha256, else hash "sha256=..."), when it is 64 hex digits; else
 * NULL.  Part of a set's key, not a check: pip checked it against the
 * index's. */
static const char *wheel_sha256(const json_t *item)
{
	const json_t *ai = json_object_get(json_object_get(item, "download_info"), "archive_info");
	const char *h = json_string_value(json_object_get(json_object_get(ai, "hashes"), "sha256"));
	if (!h) {
		h = json_string_value(json_object_get(ai, "hash"));
		h = h && strncmp(h, "sha256=", 7) == 0 ? h + 7 : NULL;
	}
	return h && strlen(h) == 64 && strspn(h, "0123456789abcdef") == 64 ? h : NULL;
}

/* The set pip installed, checked: every package allowed, names and
 * versions plain.  Its key into key: what decides its bytes (the index and
 * its CA bundle, the interpreter's tag, each package's name, version and
 * wheel digest). */
static int check_report(struct pkg_op *op, char key[65])
{
	cleanup_free char *report = NULL, *abi = NULL, *rpath = xasprintf("%s/report.json", op->staging),
			  *apath = xasprintf("%s/abi.txt", op->staging);
	size_t rlen = 0, alen = 0;
	json_t *root, *install;
	size_t i;
	char **lines = NULL;
	size_t nl = 0;
	json_t *item;
	cleanup_free char *text = NULL;
	int rc = -1;

	if (read_file(rpath, REPORT_MAX, &report, &rlen) < 0 || read_file(apath, 128, &abi, &alen) < 0)
		return fail(op, EPROTO, "the install left no report (pip ended without one)");
	if (alen == 0 || strspn(abi, "abcdefghijklmnopqrstuvwxyz0123456789._-\n") != alen)
		return fail(op, EPROTO, "the install's interpreter tag is not plain text");
	abi[strcspn(abi, "\n")] = '\0';
	root = json_loadb(report, rlen, 0, NULL);
	install = json_object_get(root, "install");
	if (!json_is_array(install) || json_array_size(install) == 0 || json_array_size(install) > 1024) {
		json_decref(root);
		return fail(op, EPROTO, "pip's report lists no installed package");
	}
	json_array_foreach(install, i, item) {
		json_t *md = json_object_get(item, "metadata");
		const char *name = json_string_value(json_object_get(md, "name"));
		const char *ver = json_string_value(json_object_get(md, "version"));
		char norm[NAME_MAX_LEN];
		if (!name || !ver || strlen(name) >= NAME_MAX_LEN || strlen(ver) > 64 ||
		    strspn(ver, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.+!_-") != strlen(ver)) {
			fail(op, EPROTO, "pip's report has a package without a plain name and version");
			goto out;
		}
		const char *digest = wheel_sha256(item);
		normalize(name, strlen(name), norm, sizeof(norm));
		if (!allowed_in(op->allow, op->n_allow, norm)) {
			fail(op, EPERM, "%s %s, which the request needs, is not among the packages the policy allows: "
			     "nothing was kept", norm, ver);
			goto out;
		}
		lines = xrealloc(lines, (nl + 1) * sizeof(*lines));
		lines[nl++] = xasprintf("%s==%s sha256:%s", norm, ver, digest ? digest : "-");
	}
	qsort(lines, nl, sizeof(*lines), str_cmp_ptr);
	{
		/* the source comes from us, not the report: an install from one
		 * index can never make or take a set of another's */
		cleanup_free char *joined = strv_join(lines, nl, "\n");
		text = xasprintf("pycell-set 2\n%s\n%s\n%s\n", op->source, abi, joined);
	}
	sha256_hex(text, strlen(text), key);
	rc = 0;
out:
	for (size_t k = 0; k < nl; k++)
		free(lines[k]);
	free(lines);
	json_decref(root);
	return rc;
}

static void keep(struct pkg_op *op, const char key[65])
{
	cleanup_free char *site = xasprintf("%s/site", op->staging);
	cleanup_free char *set = xasprintf("%s/sets/%s", cache(), key);
	cleanup_free char *req = xasprintf("%s/requests/%s", cache(), op->rkey);
	cleanup_free char *tmp = xasprintf("%s/requests/.%s", cache(), op->rkey);
	struct stat st;

	if (stat(site, &st) < 0 && mkdir(site, 0755) < 0) {
		fail(op, errno, "the install left no site directory");
		return;
	}
	/* the same set from another request: keep the one there */
	if (rename(site, set) < 0 && errno != EEXIST && errno != ENOTEMPTY) {
		fail(op, errno, "rename %s to %s: %s", site, set, strerror(errno));
		return;
	}
	chmod(set, 0755);
	if (create_file(tmp, key, strlen(key)) < 0 || rename(tmp, req) < 0)
		log_warn("packages: could not record request %s: %s", op->rkey, strerror(errno));
	op->set_dir = xstrdup(set);
}

static void on_install_done(struct run *r, void *ctx)
{
	wake(ctx);
	(void)r;
}

static void on_wake(struct loop_watch *w, uint32_t events, void *data)
{
	struct pkg_op *op = data;
	uint64_t n;
	(void)!read(op->efd, &n, sizeof(n));
	if (op->run && !op->set_dir && !op->failed) {
		const struct run_result *r = run_result(op->run);
		char key[65];
		if (r->status != RUN_OK || r->exit_code != 0) {
			char why[sizeof(op->err.msg) / 2];
			cleanup_free char *list = strv_join(op->specs, op->n, ", ");
			if (r->status == RUN_SETUP_FAILED) {
				fail(op, r->setup_error.errnum, "installing %s: the install jail could not be made: %s: %s",
				     list, r->setup_error.step, r->setup_error.msg);
			} else {
				pip_error(r, why, sizeof(why));
				fail(op, EIO, "installing %s from %s: %s: %s", list, op->policy.packages.index,
				     r->status == RUN_ERROR ? "pip failed" : run_status_name(r->status), why);
			}
		} else if (check_report(op, key) == 0) {
			keep(op, key);
		}
		if (op->set_dir) {
			/* held first: the new set is never what makes room */
			hold(op->set_dir);
			evict();
			log_info("packages: installed %s", op->set_dir);
		}
	} else if (op->set_dir) {
		hold(op->set_dir);   /* from the cache */
	}
	{
		pkg_done_fn done = op->done;
		void *ctx = op->ctx;
		struct pc_err err = op->err;
		cleanup_free char *dir = op->set_dir ? xstrdup(op->set_dir) : NULL;
		bool failed = op->failed || !dir;
		op_free(op);
		done(ctx, failed ? NULL : dir, failed ? &err : NULL);
	}
	(void)w;
	(void)events;
}

/* The interpreter, as the cache knows it: a new build is another key. */
static char *interpreter_id(const struct policy *p)
{
	struct stat st;
	if (stat(p->python, &st) < 0)
		return xasprintf("%s", p->python);
	return xasprintf("%s %llu %llu %lld %lld", p->python, (unsigned long long)st.st_dev,
			 (unsigned long long)st.st_ino, (long long)st.st_mtime, (long long)st.st_size);
}

/* Where a policy's packages come from, as keys hold it (op->source): its
 * index and the digest of its CA bundle ("-": the system's), whose bytes
 * op keeps for the install.  -1 (err) when the bundle cannot be read. */
static int package_source(struct pkg_op *op, const struct policy *p, struct pc_err *err)
{
	char digest[65] = "-";
	if (p->packages.ca_bundle) {
		if (read_file(p->packages.ca_bundle, 4u << 20, &op->ca, &op->ca_len) < 0)
			return pc_syserr(err, "packages", "read the CA bundle %s", p->packages.ca_bundle);
		sha256_hex(op->ca, op->ca_len, digest);
	}
	op->source = xasprintf("%s\nca %s", p->packages.index, digest);
	return 0;
}

static char *constraints(const struct policy *p)
{
	char *out = xstrdup("");
	for (size_t i = 0; i < p->packages.n_allow; i++) {
		char name[NAME_MAX_LEN];
		const char *spec = req_name(p->packages.allow[i], name);
		char *next;
		if (!*spec)
			continue;
		next = xasprintf("%s%s%s\n", out, name, spec);
		free(out);
		out = next;
	}
	return out;
}

/* The install's policy: the caller's interpreter and identity, the
 * index as its only destination, the staging dir its only writable
 * place besides /tmp, an install's limits, no tools. */
static int install_policy(struct pkg_op *op, const struct policy *base, struct pc_err *err)
{
	json_t *pj = policy_to_json(base), *lim, *fs, *binds;
	cleanup_free char *dest = policy_index_dest(base->packages.index), *text = NULL;
	uint64_t mem = base->limits.memory_bytes;
	int rc;

	json_object_del(pj, "description");
	json_object_del(pj, "sessions");
	json_object_del(pj, "tools");
	json_object_set_new(pj, "network", json_pack("{s:[s]}", "egress", dest));
	/* the caller's binds stay (its interpreter may be a bound venv's) */
	fs = json_object_get(pj, "filesystem");
	binds = json_object_get(fs, "binds");
	json_array_append_new(binds, json_pack("{s:s,s:s,s:b}", "src", op->staging, "dst", "/pkg", "writable", 1));
	json_object_set_new(fs, "ca_certificates", json_true());
	lim = json_object_get(pj, "limits");
	json_object_set_new(lim, "timeout", json_integer(INSTALL_TIMEOUT_MS / 1000));
	json_object_set_new(lim, "memory", json_integer((json_int_t)(mem && mem < INSTALL_MEMORY ? INSTALL_MEMORY : mem)));
	json_object_set_new(lim, "tmp", json_integer((json_int_t)INSTALL_TMP));
	json_object_set_new(lim, "file_size", json_integer(0));
	json_object_del(pj, "packages");
	text = json_dumps(pj, JSON_COMPACT);
	json_decref(pj);
	rc = policy_parse(text, "the package install", &op->policy, err);
	if (rc == 0) {
		op->have_policy = true;
		/* its index, for the messages */
		op->policy.packages.index = xstrdup(base->packages.index);
	}
	return rc;
}

static int start_install(struct pkg_op *op, const struct run_request *base, struct pc_err *err)
{
	const struct policy *p = base->policy;
	cleanup_free char *script = xasprintf("%s/" INSTALL_SCRIPT, base->runtime_dir);
	cleanup_free char *cons = constraints(p), *cpath = NULL;
	struct run_request req = { .stdin_fd = -1 };
	char rnd[8], hex[17];
	size_t n = 0;

	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
		return pc_syserr(err, "packages", "getrandom");
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(hex + 2 * i, 3, "%02x", (unsigned char)rnd[i]);
	op->staging = xasprintf("%s/staging/%s", cache(), hex);
	if (mkdir(op->staging, 0777) < 0 || chmod(op->staging, 0777) < 0) {
		pc_syserr(err, "packages", "mkdir %s", op->staging);
		free(op->staging);
		op->staging = NULL;
		return -1;
	}
	cpath = xasprintf("%s/constraints.txt", op->staging);
	if (create_file(cpath, cons, strlen(cons)) < 0)
		return pc_syserr(err, "packages", "write %s", cpath);
	if (op->ca) {
		/* the bytes its key holds the digest of */
		cleanup_free char *dst = xasprintf("%s/ca.pem", op->staging);
		if (create_file(dst, op->ca, op->ca_len) < 0)
			return pc_syserr(err, "packages", "write %s", dst);
	}
	if (read_file(script, 1u << 20, &op->code, &op->code_len) < 0)
		return pc_syserr(err, "packages", "read %s", script);
	if (install_policy(op, p, err) < 0 || seccomp_filter_compile(&op->policy, &op->filter, err) < 0)
		return -1;
	op->argv = xcalloc(op->n + 2, sizeof(char *));
	op->argv[n++] = xstrdup(p->packages.index);
	for (size_t i = 0; i < op->n; i++)
		op->argv[n++] = xstrdup(op->specs[i]);
	req.policy = &op->policy;
	req.filter = op->filter;
	req.cgroups = base->cgroups;
	req.runtime_dir = base->runtime_dir;
	req.mode = RUN_MODE_SCRIPT;
	req.code = op->code;
	req.code_len = op->code_len;
	req.prog_name = "_install.py";
	req.args = op->argv;
	req.on_done = on_install_done;
	req.ctx = op;
	log_info("packages: installing %s (staging %s)", op->specs[0], op->staging);
	return run_start(op->loop, &req, &op->run, err);
}

struct pkg_op *packages_get(struct loop *l, const struct run_request *base, char *const *specs, size_t n,
			    pkg_done_fn done, void *ctx, struct pc_err *err)
{
	const struct policy *p = base->policy;
	struct pkg_op *op = xcalloc(1, sizeof(*op));
	cleanup_free char *interp = interpreter_id(p), *cons = constraints(p), *text = NULL, *joined = NULL;
	cleanup_free char *rpath = NULL, *set = NULL;
	size_t len;

	op->loop = l;
	op->done = done;
	op->ctx = ctx;
	op->efd = -1;
	op->specs = xcalloc(n, sizeof(char *));
	op->allow = xcalloc(p->packages.n_allow + 1, sizeof(char *));
	for (size_t i = 0; i < p->packages.n_allow; i++)
		op->allow[op->n_allow++] = xstrdup(p->packages.allow[i]);
	for (size_t i = 0; i < n; i++) {
		char name[NAME_MAX_LEN];
		const char *spec = req_name(specs[i], name);
		op->specs[op->n++] = xasprintf("%s%s", name, spec);
	}
	qsort(op->specs, op->n, sizeof(char *), str_cmp_ptr);
	if (package_source(op, p, err) < 0)
		goto fail;
	joined = strv_join(op->specs, op->n, "\n");
	text = xasprintf("pycell-request 2\n%s\n%s\n%s--\n%s\n", op->source, interp, cons, joined);
	sha256_hex(text, strlen(text), op->rkey);
	if ((op->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
		pc_syserr(err, "packages", "eventfd");
		goto fail;
	}
	if (loop_add(l, &op->w, op->efd, EPOLLIN, on_wake, op) < 0) {
		pc_syserr(err, "packages", "watch the install");
		goto fail;
	}
	op->watched = true;
	if (cache_dirs(err) < 0)
		goto fail;
	rpath = xasprintf("%s/requests/%s", cache(), op->rkey);
	if (read_file(rpath, 80, &set, &len) == 0 && len == 64 && strspn(set, "0123456789abcdef") == 64) {
		struct stat st;
		cleanup_free char *dir = xasprintf("%s/sets/%s", cache(), set);
		if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) {
			utimensat(AT_FDCWD, dir, NULL, 0);   /* used now: last out */
			op->set_dir = steal_ptr(&dir);
			log_debug("packages: %s from the cache", op->set_dir);
			wake(op);
			return op;
		}
	}
	if (start_install(op, base, err) < 0)
		goto fail;
	return op;
fail:
	op_free(op);
	return NULL;
}
