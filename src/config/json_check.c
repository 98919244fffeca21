/* pycell: reading JSON documents with errors that name file, key and
 * what was expected. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "config/json_check.h"

#define JC_MAX_FILE (1024 * 1024)

static int jc_vfail(const struct jc *c, const char *key, const char *fmt, va_list ap)
{
	char what[400];
	vsnprintf(what, sizeof(what), fmt, ap);
	if (key && *key)
		return pc_fail(c->err, EINVAL, c->kind, "%s %s: %s: %s", c->kind, c->origin, key, what);
	return pc_fail(c->err, EINVAL, c->kind, "%s %s: %s", c->kind, c->origin, what);
}

int jc_fail(const struct jc *c, const char *key, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	jc_vfail(c, key, fmt, ap);
	va_end(ap);
	return -1;
}

int jc_expected(const struct jc *c, const char *key, const char *what, const json_t *got)
{
	enum { SHOW = 60 };
	cleanup_free char *s = json_dumps(got, JSON_ENCODE_ANY | JSON_COMPACT);
	if (!s)
		return jc_fail(c, key, "expected %s", what);
	if (strlen(s) > SHOW)
		return jc_fail(c, key, "expected %s, got %.*s...", what, SHOW, s);
	return jc_fail(c, key, "expected %s, got %s", what, s);
}

int jc_parse(const struct jc *c, const char *text, json_t **out)
{
	json_error_t e;
	/* NUL is allowed by the parser so that jc_string can name the key that
	 * holds it; duplicate keys would silently drop a setting. */
	json_t *root = json_loads(text, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &e);
	if (!root)
		return pc_fail(c->err, EINVAL, c->kind, "%s %s:%d:%d: invalid JSON: %s", c->kind,
			       c->origin, e.line, e.column, e.text);
	if (!json_is_object(root)) {
		jc_expected(c, NULL, "a JSON object at the top level", root);
		json_decref(root);
		return -1;
	}
	*out = root;
	return 0;
}

int jc_read_file(const struct jc *c, const char *path, char **out)
{
	char *buf;
	size_t len;
	if (read_file(path, JC_MAX_FILE, &buf, &len) < 0) {
		if (errno == EFBIG)
			return jc_fail(c, NULL, "file is larger than %d bytes", JC_MAX_FILE);
		return pc_syserr(c->err, c->kind, "%s %s: cannot read", c->kind, c->origin);
	}
	if (strlen(buf) != len) {
		free(buf);
		return jc_fail(c, NULL, "file contains a NUL byte");
	}
	*out = buf;
	return 0;
}

int jc_object(const struct jc *c, const char *key, const json_t *v, const char *const known[])
{
	const char *k;
	json_t *val;
	if (!json_is_object(v))
		return jc_expected(c, key, "an object", v);
	json_object_foreach ((json_t *)v, k, val) {
		char list[300] = "", sub[JC_KEY_MAX];
		size_t i, used = 0;
		for (i = 0; known[i]; i++)
			if (strcmp(k, known[i]) == 0)
				break;
		if (known[i])
			continue;
		for (i = 0; known[i] && used < sizeof(list); i++)
			used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s",
						 i ? ", " : "", known[i]);
		jc_key(sub, key, k);
		return jc_fail(c, sub, "unknown key (expected one of %s)", list);
	}
	return 0;
}

int jc_bool(const struct jc *c, const char *key, const json_t *v, bool *out)
{
	if (!json_is_boolean(v))
		return jc_expected(c, key, "true or false", v);
	*out = json_is_true(v);
	return 0;
}

int jc_string(const struct jc *c, const char *key, const json_t *v, const char **out)
{
	if (!json_is_string(v) || json_string_length(v) == 0)
		return jc_expected(c, key, "a non-empty string", v);
	if (strlen(json_string_value(v)) != json_string_length(v))
		return jc_fail(c, key, "string contains a NUL byte");
	*out = json_string_value(v);
	return 0;
}

/* "from 2 to 4194304 (or 0 for no limit)", "of at least 16M" */
static void range_text(char *buf, size_t len, const char *noun, uint64_t min, uint64_t max,
		       bool zero_ok, bool as_size)
{
	char lo[32], hi[32];
	if (as_size) {
		jc_format_size(lo, sizeof(lo), min);
		jc_format_size(hi, sizeof(hi), max);
	} else {
		snprintf(lo, sizeof(lo), "%" PRIu64, min);
		snprintf(hi, sizeof(hi), "%" PRIu64, max);
	}
	if (max == JC_NO_MAX)
		snprintf(buf, len, "%s of at least %s%s", noun, lo, zero_ok ? " (or 0 for no limit)" : "");
	else
		snprintf(buf, len, "%s from %s to %s%s", noun, lo, hi, zero_ok ? " (or 0 for no limit)" : "");
}

static bool in_range(uint64_t v, uint64_t min, uint64_t max, bool zero_ok)
{
	return (v == 0 && zero_ok) || (v >= min && v <= max);
}

int jc_uint(const struct jc *c, const char *key, const json_t *v, uint64_t min, uint64_t max,
	    bool zero_ok, uint64_t *out)
{
	char what[120];
	range_text(what, sizeof(what), "an integer", min, max, zero_ok, false);
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    !in_range((uint64_t)json_integer_value(v), min, max, zero_ok))
		return jc_expected(c, key, what, v);
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

int jc_size(const struct jc *c, const char *key, const json_t *v, uint64_t min, uint64_t max,
	    bool zero_ok, uint64_t *out)
{
	char what[120];
	struct pc_err ignored;
	uint64_t n;
	if (json_is_integer(v) && json_integer_value(v) >= 0)
		n = (uint64_t)json_integer_value(v);
	else if (!json_is_string(v) || parse_size(json_string_value(v), &n, &ignored) < 0 ||
		 strlen(json_string_value(v)) != json_string_length(v))
		return jc_expected(c, key, "a size such as 512M", v);
	if (!in_range(n, min, max, zero_ok)) {
		range_text(what, sizeof(what), "a size", min, max, zero_ok, true);
		return jc_expected(c, key, what, v);
	}
	*out = n;
	return 0;
}

void jc_format_duration(char *buf, size_t len, uint64_t ms)
{
	if (ms % 3600000 == 0 && ms)
		snprintf(buf, len, "%" PRIu64 "h", ms / 3600000);
	else if (ms % 60000 == 0 && ms)
		snprintf(buf, len, "%" PRIu64 "m", ms / 60000);
	else if (ms % 1000 == 0)
		snprintf(buf, len, "%" PRIu64 "s", ms / 1000);
	else
		snprintf(buf, len, "%" PRIu64 "ms", ms);
}

int jc_duration(const struct jc *c, const char *key, const json_t *v, uint64_t min_ms,
		uint64_t max_ms, bool zero_ok, uint64_t *out_ms)
{
	struct pc_err ignored; /* the message below names the key and what it got */
	uint64_t ms;
	if (json_is_number(v) && json_number_value(v) >= 0 && json_number_value(v) <= 1e12)
		ms = (uint64_t)(json_number_value(v) * 1000 + 0.5);
	else if (!json_is_string(v) || parse_duration_ms(json_string_value(v), &ms, &ignored) < 0 ||
		 strlen(json_string_value(v)) != json_string_length(v))
		return jc_expected(c, key, "a duration such as 30s, 500ms or 2m", v);
	if (!in_range(ms, min_ms, max_ms, zero_ok)) {
		char lo[32], hi[32], what[120];
		jc_format_duration(lo, sizeof(lo), min_ms);
		jc_format_duration(hi, sizeof(hi), max_ms);
		snprintf(what, sizeof(what), "a duration from %s to %s%s", lo, hi,
			 zero_ok ? " (or 0 for no limit)" : "");
		return jc_expected(c, key, what, v);
	}
	*out_ms = ms;
	return 0;
}

static bool path_is_normal(const char *p)
{
	const char *s = p;
	if (*s != '/')
		return false;
	if (strcmp(s, "/") == 0)
		return true;
	while (*s == '/') {
		const char *comp = s + 1, *end = strchrnul(comp, '/');
		size_t n = (size_t)(end - comp);
		if (n == 0 || (n == 1 && comp[0] == '.') || (n == 2 && comp[0] == '.' && comp[1] == '.'))
			return false;
		s = end;
	}
	return true;
}

int jc_abs_path(const struct jc *c, const char *key, const json_t *v, const char **out)
{
	const char *s;
	if (!json_is_string(v) || json_string_value(v)[0] != '/')
		return jc_expected(c, key, "an absolute path", v);
	if (jc_string(c, key, v, &s) < 0)
		return -1;
	if (strlen(s) >= 4096 || !path_is_normal(s))
		return jc_expected(c, key, "a normalized absolute path (no \".\", \"..\" or empty components)", v);
	*out = s;
	return 0;
}

static bool env_name_valid(const char *k)
{
	if (!(*k == '_' || (*k >= 'A' && *k <= 'Z') || (*k >= 'a' && *k <= 'z')))
		return false;
	for (; *k; k++)
		if (!(*k == '_' || (*k >= 'A' && *k <= 'Z') || (*k >= 'a' && *k <= 'z') ||
		      (*k >= '0' && *k <= '9')))
			return false;
	return true;
}

int jc_env(const struct jc *c, const char *key, const json_t *v, char ***env, size_t *n)
{
	const char *k;
	json_t *val;
	if (!json_is_object(v))
		return jc_expected(c, key, "an object of strings such as {\"LANG\": \"C.UTF-8\"}", v);
	json_object_foreach ((json_t *)v, k, val) {
		char sub[JC_KEY_MAX];
		const char *s;
		size_t i, klen = strlen(k);
		if (!env_name_valid(k))
			return jc_fail(c, key, "\"%s\" is not a variable name (letters, digits and _, not starting with a digit)", k);
		jc_key(sub, key, k);
		if (!json_is_string(val))
			return jc_expected(c, sub, "a string", val);
		s = json_string_value(val);
		if (strlen(s) != json_string_length(val))
			return jc_fail(c, sub, "string contains a NUL byte");
		for (i = 0; i < *n; i++)
			if (strncmp((*env)[i], k, klen) == 0 && (*env)[i][klen] == '=')
				break;
		if (i == *n) {
			*env = xrealloc(*env, (*n + 1) * sizeof(**env));
			(*n)++;
		} else {
			free((*env)[i]);
		}
		(*env)[i] = xasprintf("%s=%s", k, s);
	}
	return 0;
}

void jc_strv_free(char **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

void jc_key(char buf[JC_KEY_MAX], const char *parent, const char *child)
{
	if (parent && *parent)
		snprintf(buf, JC_KEY_MAX, "%s.%s", parent, child);
	else
		snprintf(buf, JC_KEY_MAX, "%s", child);
}

void jc_index(char buf[JC_KEY_MAX], const char *parent, size_t i)
{
	snprintf(buf, JC_KEY_MAX, "%s[%zu]", parent, i);
}

static const char size_units[] = "KMGT";

void jc_format_size(char *buf, size_t len, uint64_t bytes)
{
	int u = -1;
	uint64_t v = bytes;
	while (v && v % 1024 == 0 && u < 3) {
		v /= 1024;
		u++;
	}
	if (u < 0)
		snprintf(buf, len, "%" PRIu64, bytes);
	else
		snprintf(buf, len, "%" PRIu64 "%c", v, size_units[u]);
}

json_t *jc_size_json(uint64_t bytes)
{
	char buf[32];
	if (bytes == 0 || bytes % 1024 != 0)
		return json_integer((json_int_t)bytes);
	jc_format_size(buf, sizeof(buf), bytes);
	return json_string(buf);
}

json_t *jc_duration_json(uint64_t ms)
{
	char buf[32];
	if (ms == 0)
		return json_integer(0);
	jc_format_duration(buf, sizeof(buf), ms);
	return json_string(buf);
}
