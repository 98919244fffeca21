/* pycell: who may use `pycell serve`: the token file (man pycell.conf(5),
 * "TOKEN FILE").  Each entry names a client, the policy its runs get and
 * how many of its runs may be in flight; it is known by the SHA-256 of
 * its bearer token (the token itself is never stored) or, on a unix
 * socket, by the peer's uid. */
#ifndef PYCELL_TOKENS_H
#define PYCELL_TOKENS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/util.h"

struct token {
	char *name;
	char sha256[65];        /* "" when the entry is a uid */
	bool has_uid;
	uid_t uid;
	char *policy;           /* NULL: the server's */
	uint32_t max_runs;      /* runs in flight at once (0: no own cap) */
};

struct tokens {
	struct token *v;
	size_t n;
};

/* Load `path`: a JSON object {"tokens": [...]}; refused when group or
 * others may read or write it, or another user owns it. */
int tokens_load(const char *path, struct tokens *out, struct pc_err *err);
int tokens_parse(const char *json, const char *origin, struct tokens *out, struct pc_err *err);
void tokens_free(struct tokens *t);
/* The entry whose hash is that of `bearer`, compared in constant time; NULL. */
const struct token *tokens_find_bearer(const struct tokens *t, const char *bearer, size_t len);
const struct token *tokens_find_uid(const struct tokens *t, uid_t uid);

#endif
