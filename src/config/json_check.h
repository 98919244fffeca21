/* pycell: reading JSON documents (policies, the config file) with errors
 * that name the file, the key path and what was expected:
 *   policy /x/p.json: limits.memory: expected a size such as 512M, got "lots"
 * Every getter takes the full key path for its message and returns -1
 * after filling the pc_err. */
#ifndef PYCELL_JSON_CHECK_H
#define PYCELL_JSON_CHECK_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/util.h"

struct jc {
	const char *kind;    /* "policy" or "config": message prefix and error step */
	const char *origin;  /* the file (or other source) named in messages */
	struct pc_err *err;
};

/* Room for a key path such as "filesystem.binds[12].dst". */
#define JC_KEY_MAX 192
/* Marks an open upper bound for the range getters. */
#define JC_NO_MAX UINT64_MAX

#define KiB ((uint64_t)1024)
#define MiB (KiB * 1024)
#define GiB (MiB * 1024)

int jc_fail(const struct jc *c, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* "KEY: expected WHAT, got <the value as compact JSON>" */
int jc_expected(const struct jc *c, const char *key, const char *what, const json_t *got);
/* Parse a whole document; it must be an object.  Syntax errors are
 * reported as "kind origin:line:column: invalid JSON: ...". */
int jc_parse(const struct jc *c, const char *text, json_t **out);
/* Read a file of at most 1 MiB; it must not contain NUL bytes. */
int jc_read_file(const struct jc *c, const char *path, char **out);
/* `v` must be an object whose keys are all in `known` (NULL-terminated). */
int jc_object(const struct jc *c, const char *key, const json_t *v, const char *const known[]);

int jc_bool(const struct jc *c, const char *key, const json_t *v, bool *out);
/* A string without NUL bytes; empty strings are refused. */
int jc_string(const struct jc *c, const char *key, const json_t *v, const char **out);
/* An integer in [min, max], or 0 when zero_ok ("0 for no limit"). */
int jc_uint(const struct jc *c, const char *key, const json_t *v, uint64_t min, uint64_t max,
	    bool zero_ok, uint64_t *out);
/* A size: "512M" (parse_size) or an integer number of bytes. */
int jc_size(const struct jc *c, const char *key, const json_t *v, uint64_t min, uint64_t max,
	    bool zero_ok, uint64_t *out);
/* A duration: "30s", "500ms", "2m" (parse_duration_ms) or a number of
 * seconds; the result is in milliseconds. */
int jc_duration(const struct jc *c, const char *key, const json_t *v, uint64_t min_ms,
		uint64_t max_ms, bool zero_ok, uint64_t *out_ms);
/* An absolute path with no ".", ".." or empty components and no trailing
 * slash, so that what is checked is what the kernel will resolve. */
int jc_abs_path(const struct jc *c, const char *key, const json_t *v, const char **out);
/* Merge an object of environment variables into a "KEY=VALUE" array:
 * a key already present is replaced. */
int jc_env(const struct jc *c, const char *key, const json_t *v, char ***env, size_t *n);

/* Free a NULL-or-array of n strings. */
void jc_strv_free(char **v, size_t n);
/* Key path helpers: "parent.child" and "parent[i]". */
void jc_key(char buf[JC_KEY_MAX], const char *parent, const char *child);
void jc_index(char buf[JC_KEY_MAX], const char *parent, size_t i);
/* Inverse of the getters for writing documents back: 536870912 -> "512M",
 * 30000 -> "30s"; values without an exact unit stay integers / "250ms". */
json_t *jc_size_json(uint64_t bytes);
json_t *jc_duration_json(uint64_t ms);
/* "16M", "1G", "1536": for messages */
void jc_format_size(char *buf, size_t len, uint64_t bytes);
/* "30s", "10m", "1h", "250ms": for messages */
void jc_format_duration(char *buf, size_t len, uint64_t ms);

#endif
