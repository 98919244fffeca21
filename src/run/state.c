/* pycell: the state directory (state.h).  Everything here goes through
 * one directory fd (STATE_DIR/sessions), opened once and checked. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "run/state.h"

/* the kinds of documents (state_doc_*), each a subdirectory */
static const char *const doc_kinds[] = { "tasks" };
#define N_KINDS (sizeof(doc_kinds) / sizeof(doc_kinds[0]))

struct state_dir {
	char *path;
	int fd;                      /* STATE_DIR/sessions */
	int kind_fd[N_KINDS];        /* STATE_DIR/tasks */
};

/* STATE_DIR/sub, made 0700 when missing, opened and checked. */
static int open_sub(int top, const char *path, const char *sub, struct pc_err *err);

uint64_t state_wall_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

bool state_id_ok(const char *id)
{
	size_t n = id ? strlen(id) : 0;
	if (n == 0 || n >= RANDOM_ID_SIZE || id[0] == '.')
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = id[i];
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' ||
		      c == '_' || c == '-'))
			return false;
	}
	return true;
}

/* fd (a directory, opened O_NOFOLLOW) may hold sessions: ours or root's,
 * and no one else may write it. */
static int check_dir(int fd, const char *what, struct pc_err *err)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return pc_syserr(err, "state_dir", "%s", what);
	if (st.st_uid != geteuid() && st.st_uid != 0)
		return pc_fail(err, EPERM, "state_dir", "%s belongs to uid %u, not to this user (%u) or root: "
			       "another user could read or plant sessions there", what, (unsigned)st.st_uid,
			       (unsigned)geteuid());
	if (st.st_mode & (S_IWGRP | S_IWOTH))
		return pc_fail(err, EPERM, "state_dir", "%s is writable by its group or by others (mode %04o): "
			       "another user could plant or remove sessions there; chmod 0700 it",
			       what, (unsigned)(st.st_mode & 07777));
	return 0;
}

int state_dir_open(const char *path, struct state_dir **out, struct pc_err *err)
{
	struct state_dir *d;
	int top, sub;

	if (path[0] != '/')
		return pc_fail(err, EINVAL, "state_dir", "%s: the state directory must be an absolute path", path);
	if (mkdir(path, 0700) < 0 && errno != EEXIST)
		return pc_syserr(err, "state_dir", "mkdir %s", path);
	top = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (top < 0)
		return pc_syserr(err, "state_dir", "%s%s", path,
				 errno == ELOOP || errno == ENOTDIR ? " (a symbolic link, or not a directory)" : "");
	if (check_dir(top, path, err) < 0 || (sub = open_sub(top, path, "sessions", err)) < 0) {
		close(top);
		return -1;
	}
	d = xcalloc(1, sizeof(*d));
	d->path = xstrdup(path);
	d->fd = sub;
	for (size_t i = 0; i < N_KINDS; i++)
		d->kind_fd[i] = -1;
	for (size_t i = 0; i < N_KINDS; i++)
		if ((d->kind_fd[i] = open_sub(top, path, doc_kinds[i], err)) < 0) {
			close(top);
			state_dir_free(d);
			return -1;
		}
	close(top);
	*out = d;
	return 0;
}

static int open_sub(int top, const char *path, const char *sub, struct pc_err *err)
{
	cleanup_free char *subpath = xasprintf("%s/%s", path, sub);
	int fd;
	if (mkdirat(top, sub, 0700) < 0 && errno != EEXIST)
		return pc_syserr(err, "state_dir", "mkdir %s", subpath);
	fd = openat(top, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return pc_syserr(err, "state_dir", "%s", subpath);
	if (check_dir(fd, subpath, err) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

int state_dir_check(const char *path, struct pc_err *err)
{
	static const char *const subs[] = { "sessions", "tasks" };
	int top, rc = 0;
	if (path[0] != '/')
		return pc_fail(err, EINVAL, "state_dir", "%s: the state directory must be an absolute path", path);
	top = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (top < 0 && errno == ENOENT)
		return 1;
	if (top < 0)
		return pc_syserr(err, "state_dir", "%s%s", path,
				 errno == ELOOP || errno == ENOTDIR ? " (a symbolic link, or not a directory)" : "");
	if (check_dir(top, path, err) < 0)
		rc = -1;
	for (size_t i = 0; rc == 0 && i < sizeof(subs) / sizeof(subs[0]); i++) {
		cleanup_free char *subpath = xasprintf("%s/%s", path, subs[i]);
		int fd = openat(top, subs[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 && errno == ENOENT)
			continue;
		if (fd < 0)
			rc = pc_syserr(err, "state_dir", "%s", subpath);
		else if (check_dir(fd, subpath, err) < 0)
			rc = -1;
		if (fd >= 0)
			close(fd);
	}
	close(top);
	return rc;
}

void state_dir_free(struct state_dir *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < N_KINDS; i++)
		if (d->kind_fd[i] >= 0)
			close(d->kind_fd[i]);
	close(d->fd);
	free(d->path);
	free(d);
}

const char *state_dir_path(const struct state_dir *d) { return d->path; }

static void name_of(char *buf, size_t size, const char *id, const char *ext)
{
	snprintf(buf, size, "%s.%s", id, ext);
}

#define NAME_SIZE (RANDOM_ID_SIZE + 32)

int state_snap_create(struct state_dir *d, const char *id, struct pc_err *err)
{
	char tmp[NAME_SIZE];
	int fd;
	if (!state_id_ok(id))
		return pc_fail(err, EINVAL, "state_dir", "a session id that cannot name a file");
	name_of(tmp, sizeof(tmp), id, "snap.tmp");
	(void)unlinkat(d->fd, tmp, 0);   /* an interrupted pause's */
	fd = openat(d->fd, tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return pc_syserr(err, "state_dir", "creating %s/sessions/%s", d->path, tmp);
	return fd;
}

void state_abort(struct state_dir *d, const char *id, int fd)
{
	char tmp[NAME_SIZE];
	if (fd >= 0)
		close(fd);
	name_of(tmp, sizeof(tmp), id, "snap.tmp");
	(void)unlinkat(d->fd, tmp, 0);
}

/* text, synced, as name in subdirectory kind (its fd dir), through name.tmp */
static int write_synced(struct state_dir *d, int dir, const char *kind, const char *name, const char *text,
			struct pc_err *err)
{
	char tmp[NAME_SIZE + 8];
	int fd;
	snprintf(tmp, sizeof(tmp), "%s.tmp", name);
	fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return pc_syserr(err, "state_dir", "creating %s/%s/%s", d->path, kind, tmp);
	if (write_all(fd, text, strlen(text)) < 0 || fsync(fd) < 0) {
		pc_syserr(err, "state_dir", "writing %s/%s/%s", d->path, kind, tmp);
		close(fd);
		unlinkat(dir, tmp, 0);
		return -1;
	}
	close(fd);
	if (renameat(dir, tmp, dir, name) < 0) {
		pc_syserr(err, "state_dir", "renaming %s/%s/%s", d->path, kind, tmp);
		unlinkat(dir, tmp, 0);
		return -1;
	}
	return 0;
}

int state_commit(struct state_dir *d, const struct state_record *r, int fd, struct pc_err *err)
{
	char tmp[NAME_SIZE], snap[NAME_SIZE], rec[NAME_SIZE];
	cleanup_free char *text = state_record_format(r);
	name_of(tmp, sizeof(tmp), r->id, "snap.tmp");
	name_of(snap, sizeof(snap), r->id, "snap");
	name_of(rec, sizeof(rec), r->id, "json");
	if (fsync(fd) < 0) {
		pc_syserr(err, "state_dir", "syncing %s/sessions/%s", d->path, tmp);
		state_abort(d, r->id, fd);
		return -1;
	}
	close(fd);
	if (renameat(d->fd, tmp, d->fd, snap) < 0) {
		pc_syserr(err, "state_dir", "renaming %s/sessions/%s", d->path, tmp);
		state_abort(d, r->id, -1);
		return -1;
	}
	if (strlen(text) > STATE_RECORD_MAX || write_synced(d, d->fd, "sessions", rec, text, err) < 0) {
		if (!err->msg[0])
			pc_fail(err, EFBIG, "state_dir", "the session's record is larger than %d KiB",
				STATE_RECORD_MAX >> 10);
		unlinkat(d->fd, snap, 0);
		return -1;
	}
	(void)fsync(d->fd);
	return 0;
}

/* The record in file name. */
static int load_name(struct state_dir *d, const char *name, struct state_record *r, struct pc_err *err)
{
	char buf[STATE_RECORD_MAX + 1];
	ssize_t n;
	int fd = openat(d->fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		pc_syserr(err, "state_dir", "%s/sessions/%s", d->path, name);
		errno = e;
		return -1;
	}
	n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n < 0 || n > STATE_RECORD_MAX) {
		pc_fail(err, n < 0 ? errno : EFBIG, "state_dir", "%s/sessions/%s: %s", d->path, name,
			n < 0 ? strerror(errno) : "larger than a record may be");
		errno = EIO;
		return -1;
	}
	if (state_record_parse(buf, (size_t)n, r, err) < 0) {
		pc_err_wrap(err, "%s/sessions/%s", d->path, name);
		errno = EIO;
		return -1;
	}
	return 0;
}

int state_load(struct state_dir *d, const char *id, struct state_record *r, struct pc_err *err)
{
	char rec[NAME_SIZE];
	if (!state_id_ok(id)) {
		errno = ENOENT;
		return pc_fail(err, ENOENT, "state_dir", "no such session");
	}
	name_of(rec, sizeof(rec), id, "json");
	if (load_name(d, rec, r, err) < 0)
		return -1;
	if (strcmp(r->id, id) != 0) {
		state_record_free(r);
		errno = EIO;
		return pc_fail(err, EIO, "state_dir", "%s/sessions/%s names another session", d->path, rec);
	}
	return 0;
}

int state_claim(struct state_dir *d, const char *id, struct state_record *r, struct pc_err *err)
{
	char rec[NAME_SIZE], claim[NAME_SIZE];
	if (!state_id_ok(id))
		return pc_fail(err, ENOENT, "state_dir", "no such session");
	name_of(rec, sizeof(rec), id, "json");
	name_of(claim, sizeof(claim), id, "claim");
	if (renameat2(d->fd, rec, d->fd, claim, RENAME_NOREPLACE) < 0)
		return pc_fail(err, errno == ENOENT ? ESRCH : errno, "state_dir", "%s",
			       errno == ENOENT ? "it was resumed elsewhere first (another call, or another replica)"
			       : errno == EEXIST ? "another resume of it is under way" : strerror(errno));
	if (load_name(d, claim, r, err) < 0 || strcmp(r->id, id) != 0) {
		if (!err->msg[0]) {
			state_record_free(r);
			pc_fail(err, EIO, "state_dir", "%s/sessions/%s names another session", d->path, claim);
		}
		(void)renameat2(d->fd, claim, d->fd, rec, RENAME_NOREPLACE);
		return -1;
	}
	return 0;
}

void state_unclaim(struct state_dir *d, const char *id)
{
	char rec[NAME_SIZE], claim[NAME_SIZE];
	name_of(rec, sizeof(rec), id, "json");
	name_of(claim, sizeof(claim), id, "claim");
	(void)renameat2(d->fd, claim, d->fd, rec, RENAME_NOREPLACE);
}

int state_snap_open(struct state_dir *d, const struct state_record *r, struct pc_err *err)
{
	char snap[NAME_SIZE];
	struct stat st;
	int fd;
	name_of(snap, sizeof(snap), r->id, "snap");
	fd = openat(d->fd, snap, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return pc_syserr(err, "state_dir", "the session's snapshot %s/sessions/%s", d->path, snap);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != r->bytes) {
		pc_fail(err, EIO, "state_dir", "the session's snapshot %s/sessions/%s is damaged: %lld bytes where its "
			"record says %llu", d->path, snap, (long long)st.st_size, (unsigned long long)r->bytes);
		close(fd);
		return -1;
	}
	return fd;
}

void state_remove(struct state_dir *d, const char *id)
{
	static const char *const ext[] = { "json", "claim", "snap", "snap.tmp", "json.tmp" };
	char name[NAME_SIZE];
	if (!state_id_ok(id))
		return;
	for (size_t i = 0; i < sizeof(ext) / sizeof(ext[0]); i++) {
		name_of(name, sizeof(name), id, ext[i]);
		(void)unlinkat(d->fd, name, 0);
	}
}

/* Each ID.json here (ID valid), in no order: fn(id, ctx). */
static void each_record(struct state_dir *d, void (*fn)(struct state_dir *d, const char *id, void *ctx), void *ctx)
{
	int fd = dup(d->fd);
	DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;
	if (!dir) {
		if (fd >= 0)
			close(fd);
		return;
	}
	rewinddir(dir);
	while ((e = readdir(dir))) {
		size_t n = strlen(e->d_name);
		char id[RANDOM_ID_SIZE];
		if (n <= 5 || n - 5 >= sizeof(id) || strcmp(e->d_name + n - 5, ".json") != 0)
			continue;
		memcpy(id, e->d_name, n - 5);
		id[n - 5] = '\0';
		if (state_id_ok(id))
			fn(d, id, ctx);
	}
	closedir(dir);
}

struct list_ctx {
	const char *scope, *owner;
	bool any_owner;
	struct state_record *v;
	size_t n, cap;
};

static void list_one(struct state_dir *d, const char *id, void *ctx)
{
	struct list_ctx *l = ctx;
	struct state_record r;
	struct pc_err err = { 0 };
	if (state_load(d, id, &r, &err) < 0) {
		if (errno != ENOENT)
			log_warn("state: %s", err.msg);
		return;
	}
	if ((l->scope && !str_eq(r.scope, l->scope)) || (!l->any_owner && !str_eq(r.owner, l->owner))) {
		state_record_free(&r);
		return;
	}
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 8;
		l->v = xrealloc(l->v, l->cap * sizeof(*l->v));
	}
	l->v[l->n++] = r;
}

size_t state_list(struct state_dir *d, const char *scope, const char *owner, bool any_owner,
		  struct state_record **out)
{
	struct list_ctx l = { scope, owner, any_owner, NULL, 0, 0 };
	each_record(d, list_one, &l);
	*out = l.v;
	return l.n;
}

struct sweep_ctx {
	uint64_t keep_ms, now;
	const char *scope;
	unsigned n;
};

static void sweep_one(struct state_dir *d, const char *id, void *ctx)
{
	struct sweep_ctx *w = ctx;
	struct state_record r;
	struct pc_err err = { 0 };
	bool go;
	if (state_load(d, id, &r, &err) < 0) {
		if (errno != ENOENT)
			log_warn("state: %s: left as it is", err.msg);
		return;
	}
	go = (w->scope && str_eq(r.scope, w->scope)) ||
	     (w->keep_ms && w->now > r.paused_at && w->now - r.paused_at > w->keep_ms);
	if (go) {
		log_info("state: session %s removed: %s", id, w->scope && str_eq(r.scope, w->scope)
			 ? "its server ended" : "paused longer than the policy's sessions.paused_keep");
		state_remove(d, id);
		w->n++;
	}
	state_record_free(&r);
}

unsigned state_sweep(struct state_dir *d, uint64_t keep_ms, const char *scope)
{
	struct sweep_ctx w = { keep_ms, state_wall_ms(), scope, 0 };
	each_record(d, sweep_one, &w);
	return w.n;
}

/* ------------------------------------------------------------ other documents */

static int kind_fd(const struct state_dir *d, const char *kind)
{
	for (size_t i = 0; i < N_KINDS; i++)
		if (strcmp(doc_kinds[i], kind) == 0)
			return d->kind_fd[i];
	return -1;
}

int state_doc_put(struct state_dir *d, const char *kind, const char *id, const char *text, struct pc_err *err)
{
	char name[NAME_SIZE];
	int dir = kind_fd(d, kind);
	if (dir < 0 || !state_id_ok(id))
		return pc_fail(err, EINVAL, "state_dir", "no place for %s %s", kind, id);
	name_of(name, sizeof(name), id, "json");
	return write_synced(d, dir, kind, name, text, err);
}

int state_doc_get(struct state_dir *d, const char *kind, const char *id, size_t max, char **text,
		  struct pc_err *err)
{
	char name[NAME_SIZE];
	int dir = kind_fd(d, kind), fd, e;
	size_t len;
	if (dir < 0 || !state_id_ok(id)) {
		errno = ENOENT;
		return pc_fail(err, ENOENT, "state_dir", "no such %s", kind);
	}
	name_of(name, sizeof(name), id, "json");
	fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		e = errno;
		pc_syserr(err, "state_dir", "%s/%s/%s", d->path, kind, name);
		errno = e;
		return -1;
	}
	if (read_fd_all(fd, max, text, &len) < 0) {
		e = errno;
		pc_syserr(err, "state_dir", "%s/%s/%s", d->path, kind, name);
		close(fd);
		errno = e == ENOENT ? EIO : e;
		return -1;
	}
	close(fd);
	return 0;
}

void state_doc_drop(struct state_dir *d, const char *kind, const char *id)
{
	char name[NAME_SIZE];
	int dir = kind_fd(d, kind);
	if (dir < 0 || !state_id_ok(id))
		return;
	name_of(name, sizeof(name), id, "json");
	(void)unlinkat(dir, name, 0);
}

unsigned state_doc_sweep(struct state_dir *d, const char *kind, uint64_t max_age_ms)
{
	int dir = kind_fd(d, kind), fd = dir >= 0 ? dup(dir) : -1;
	DIR *dp = fd >= 0 ? fdopendir(fd) : NULL;
	uint64_t now = state_wall_ms();
	struct dirent *e;
	unsigned n = 0;
	if (!dp) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	rewinddir(dp);
	while ((e = readdir(dp))) {
		struct stat st;
		uint64_t mtime;
		if (e->d_name[0] == '.' || fstatat(dir, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
			continue;
		mtime = (uint64_t)st.st_mtim.tv_sec * 1000 + (uint64_t)st.st_mtim.tv_nsec / 1000000;
		if (now > mtime && now - mtime > max_age_ms && unlinkat(dir, e->d_name, 0) == 0)
			n++;
	}
	closedir(dp);
	return n;
}

/* ------------------------------------------------------------ records */

static const char *const record_keys[] = { "version", "id", "scope", "owner", "policy", "opened_at", "paused_at",
					   "idle_ms", "lived_ms", "bytes", "cells", "not_kept", NULL };

static int bad(struct pc_err *err, const char *key, const char *what)
{
	return pc_fail(err, EINVAL, "state_dir", "a damaged session record: \"%s\" must be %s", key, what);
}

static int get_u64(const json_t *o, const char *key, uint64_t *out, struct pc_err *err)
{
	json_t *v = json_object_get(o, key);
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return bad(err, key, "an integer, 0 or more");
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

static int get_str(const json_t *o, const char *key, bool nullable, char **out, struct pc_err *err)
{
	json_t *v = json_object_get(o, key);
	if (nullable && json_is_null(v)) {
		*out = NULL;
		return 0;
	}
	if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
		return bad(err, key, nullable ? "a string or null" : "a string");
	*out = xstrdup(json_string_value(v));
	return 0;
}

int state_record_parse(const char *text, size_t len, struct state_record *r, struct pc_err *err)
{
	json_error_t je;
	json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je), *v, *e;
	const char *key;
	char *id = NULL;
	size_t i;

	memset(r, 0, sizeof(*r));
	if (!json_is_object(o)) {
		json_decref(o);
		return pc_fail(err, EINVAL, "state_dir", "a damaged session record: %s",
			       o ? "not a JSON object" : je.text);
	}
	json_object_foreach(o, key, v) {
		for (i = 0; record_keys[i] && strcmp(record_keys[i], key) != 0; i++)
			;
		if (!record_keys[i]) {
			pc_fail(err, EINVAL, "state_dir", "a session record with an unknown key \"%.*s\"",
				utf8_prefix(key, 64), key);
			goto fail;
		}
	}
	v = json_object_get(o, "version");
	if (!json_is_integer(v) || json_integer_value(v) != 1) {
		bad(err, "version", "1 (a record of another version of pycell)");
		goto fail;
	}
	if (get_str(o, "id", false, &id, err) < 0)
		goto fail;
	if (!state_id_ok(id)) {
		bad(err, "id", "a session id");
		goto fail;
	}
	strcpy(r->id, id);
	v = json_object_get(o, "not_kept");
	if (!json_is_array(v)) {
		bad(err, "not_kept", "an array");
		goto fail;
	}
	json_array_foreach(v, i, e) {
		json_t *name = json_object_get(e, "name"), *why = json_object_get(e, "why");
		if (!json_is_object(e) || json_object_size(e) != 2 || !json_is_string(name) || !json_is_string(why)) {
			bad(err, "not_kept", "an array of {name, why}, both strings");
			goto fail;
		}
	}
	if (get_str(o, "scope", false, &r->scope, err) < 0 || get_str(o, "owner", true, &r->owner, err) < 0 ||
	    get_str(o, "policy", true, &r->policy, err) < 0 || get_u64(o, "opened_at", &r->opened_at, err) < 0 ||
	    get_u64(o, "paused_at", &r->paused_at, err) < 0 || get_u64(o, "idle_ms", &r->idle_ms, err) < 0 ||
	    get_u64(o, "lived_ms", &r->lived_ms, err) < 0 || get_u64(o, "bytes", &r->bytes, err) < 0 ||
	    get_u64(o, "cells", &r->cells, err) < 0)
		goto fail;
	r->not_kept = json_incref(json_object_get(o, "not_kept"));
	free(id);
	json_decref(o);
	return 0;
fail:
	free(id);
	json_decref(o);
	state_record_free(r);
	return -1;
}

char *state_record_format(const struct state_record *r)
{
	json_t *none = json_array();
	json_t *o = json_pack("{s:i,s:s,s:s,s:s?,s:s?,s:I,s:I,s:I,s:I,s:I,s:I,s:O}", "version", 1, "id", r->id,
			      "scope", r->scope ? r->scope : "", "owner", r->owner, "policy", r->policy,
			      "opened_at", (json_int_t)r->opened_at, "paused_at", (json_int_t)r->paused_at,
			      "idle_ms", (json_int_t)r->idle_ms, "lived_ms", (json_int_t)r->lived_ms,
			      "bytes", (json_int_t)r->bytes, "cells", (json_int_t)r->cells,
			      "not_kept", r->not_kept ? r->not_kept : none);
	char *text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(o);
	json_decref(none);
	return text;
}

void state_record_free(struct state_record *r)
{
	free(r->scope);
	free(r->owner);
	free(r->policy);
	json_decref(r->not_kept);
	memset(r, 0, sizeof(*r));
}
