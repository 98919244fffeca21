/* pycell: the token file of `pycell serve` (tokens.h). */
#include "config.h"

#include <ctype.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/jsonrpc.h"
#include "base/sha256.h"
#include "config/json_check.h"
#include "config/tokens.h"

#define TOKENS_MAX 4096

static int parse_entry(const struct jc *c, const char *key, const json_t *e, struct token *t)
{
	static const char *const known[] = { "name", "sha256", "uid", "policy", "max_runs", NULL };
	char k[JC_KEY_MAX];
	const char *s;
	uint64_t v;
	json_t *hash = json_object_get(e, "sha256"), *uid = json_object_get(e, "uid");

	if (jc_object(c, key, e, known) < 0)
		return -1;
	jc_key(k, key, "name");
	if (jc_string(c, k, json_object_get(e, "name"), &s) < 0)
		return -1;
	t->name = xstrdup(s);
	if (!hash == !uid)
		return jc_fail(c, key, "expected either \"sha256\" (the hash of a bearer token) or \"uid\" "
			       "(a unix socket peer), not %s", hash ? "both" : "neither");
	if (hash) {
		jc_key(k, key, "sha256");
		if (jc_string(c, k, hash, &s) < 0)
			return -1;
		if (strlen(s) != 64 || strspn(s, "0123456789abcdef") != 64)
			return jc_expected(c, k, "64 lowercase hex digits (printf %s TOKEN | sha256sum)", hash);
		memcpy(t->sha256, s, 65);
	} else {
		jc_key(k, key, "uid");
		if (jc_uint(c, k, uid, 0, 0xfffffffe, true, &v) < 0)
			return -1;
		t->has_uid = true;
		t->uid = (uid_t)v;
	}
	if (json_object_get(e, "policy")) {
		jc_key(k, key, "policy");
		if (jc_string(c, k, json_object_get(e, "policy"), &s) < 0)
			return -1;
		t->policy = xstrdup(s);
	}
	if (json_object_get(e, "max_runs")) {
		jc_key(k, key, "max_runs");
		if (jc_uint(c, k, json_object_get(e, "max_runs"), 1, 1024, false, &v) < 0)
			return -1;
		t->max_runs = (uint32_t)v;
	}
	return 0;
}

int tokens_parse(const char *json, const char *origin, struct tokens *out, struct pc_err *err)
{
	static const char *const known[] = { "tokens", NULL };
	struct jc c = { "tokens", origin, err };
	cleanup_json json_t *doc = NULL;
	json_t *list, *e;
	size_t i;

	memset(out, 0, sizeof(*out));
	if (jc_parse(&c, json, &doc) < 0 || jc_object(&c, "", doc, known) < 0)
		return -1;
	list = json_object_get(doc, "tokens");
	if (!json_is_array(list))
		return jc_expected(&c, "tokens", "an array of {\"name\", \"sha256\" or \"uid\", \"policy\"?, "
				   "\"max_runs\"?}", list ? list : json_null());
	if (json_array_size(list) > TOKENS_MAX)
		return jc_fail(&c, "tokens", "at most %d entries", TOKENS_MAX);
	out->v = xcalloc(json_array_size(list) + 1, sizeof(*out->v));
	json_array_foreach (list, i, e) {
		char k[JC_KEY_MAX];
		jc_index(k, "tokens", i);
		out->n = i + 1;
		if (parse_entry(&c, k, e, &out->v[i]) < 0)
			goto fail;
		for (size_t j = 0; j < i; j++) {
			const struct token *a = &out->v[j], *b = &out->v[i];
			if (strcmp(a->name, b->name) == 0) {
				jc_fail(&c, k, "the name \"%s\" is already taken by tokens[%zu]", b->name, j);
				goto fail;
			}
			if ((b->sha256[0] && strcmp(a->sha256, b->sha256) == 0) ||
			    (b->has_uid && a->has_uid && a->uid == b->uid)) {
				jc_fail(&c, k, "the same token or uid as tokens[%zu] (\"%s\")", j, a->name);
				goto fail;
			}
		}
	}
	return 0;
fail:
	tokens_free(out);
	return -1;
}

int tokens_load(const char *path, struct tokens *out, struct pc_err *err)
{
	struct jc c = { "tokens", path, err };
	cleanup_free char *text = NULL;
	cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;

	memset(out, 0, sizeof(*out));
	if (fd < 0 || fstat(fd, &st) < 0)
		return pc_syserr(err, "tokens", "open %s", path);
	if (!S_ISREG(st.st_mode))
		return jc_fail(&c, "", "not a regular file");
	if (st.st_mode & 077)
		return jc_fail(&c, "", "mode %04o lets other users read or change the tokens; chmod 600 %s",
			       (unsigned)(st.st_mode & 07777), path);
	if (st.st_uid != geteuid() && st.st_uid != 0)
		return jc_fail(&c, "", "owned by uid %u, neither this user (%u) nor root", (unsigned)st.st_uid,
			       (unsigned)geteuid());
	if (jc_read_file(&c, path, &text) < 0)
		return -1;
	return tokens_parse(text, path, out, err);
}

void tokens_free(struct tokens *t)
{
	for (size_t i = 0; i < t->n; i++) {
		free(t->v[i].name);
		free(t->v[i].policy);
	}
	free(t->v);
	memset(t, 0, sizeof(*t));
}

const struct token *tokens_find_bearer(const struct tokens *t, const char *bearer, size_t len)
{
	char hash[65];
	const struct token *found = NULL;
	sha256_hex(bearer, len, hash);
	/* every entry is compared, whole: the time taken says nothing of
	 * which one matched, or how far */
	for (size_t i = 0; i < t->n; i++) {
		unsigned char diff = t->v[i].sha256[0] ? 0 : 1;
		for (size_t j = 0; j < 64; j++)
			diff |= (unsigned char)(hash[j] ^ t->v[i].sha256[j]);
		if (!diff)
			found = &t->v[i];
	}
	return found;
}

const struct token *tokens_find_uid(const struct tokens *t, uid_t uid)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->v[i].has_uid && t->v[i].uid == uid)
			return &t->v[i];
	return NULL;
}
