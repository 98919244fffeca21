/* pycell: the result object of a run. */
#include "config.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "config/result.h"

const char *run_status_name(enum run_status s)
{
	switch (s) {
	case RUN_OK: return "ok";
	case RUN_ERROR: return "error";
	case RUN_TIMEOUT: return "timeout";
	case RUN_MEMORY_LIMIT: return "memory_limit";
	case RUN_KILLED: return "killed";
	case RUN_SETUP_FAILED: return "setup_failed";
	default: return "unknown";
	}
}

const char *limit_enforcer_name(enum limit_enforcer e)
{
	switch (e) {
	case ENF_NONE: return "none";
	case ENF_CGROUP2: return "cgroup2";
	case ENF_CGROUP1: return "cgroup1";
	case ENF_RLIMIT: return "rlimit";
	case ENF_TMPFS: return "tmpfs";
	case ENF_SUPERVISOR: return "supervisor";
	default: return "unknown";
	}
}

void result_init(struct run_result *r)
{
	memset(r, 0, sizeof(*r));
	r->exit_code = -1;
}

void result_free(struct run_result *r)
{
	free(r->out.data);
	free(r->err.data);
	free(r->return_value);
	for (int i = 0; i < r->n_warnings; i++)
		free(r->warnings[i]);
	json_decref(r->tool_calls);
	result_init(r);
}

void result_add_limit(struct run_result *r, const char *name, uint64_t value, enum limit_enforcer by)
{
	for (int i = 0; i < r->n_limits; i++) {
		if (strcmp(r->limits[i].name, name) == 0) {
			r->limits[i].value = value;
			r->limits[i].by = by;
			return;
		}
	}
	if (r->n_limits < RESULT_MAX_LIMITS)
		r->limits[r->n_limits++] = (struct limit_report){ name, value, by };
}

void result_add_warning(struct run_result *r, const char *fmt, ...)
{
	char *s;
	va_list ap;
	if (r->n_warnings >= RESULT_MAX_WARNINGS)
		return;
	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) >= 0)
		r->warnings[r->n_warnings++] = s;
	va_end(ap);
}

/* Length of the valid UTF-8 sequence at p (1-4), or 0 if invalid. */
static size_t utf8_seq(const unsigned char *p, size_t left)
{
	unsigned c = p[0];
	size_t n;
	unsigned min;
	if (c < 0x80)
		return 1;
	if ((c & 0xe0) == 0xc0) { n = 2; min = 0x80; c &= 0x1f; }
	else if ((c & 0xf0) == 0xe0) { n = 3; min = 0x800; c &= 0x0f; }
	else if ((c & 0xf8) == 0xf0) { n = 4; min = 0x10000; c &= 0x07; }
	else
		return 0;
	if (left < n)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		c = (c << 6) | (p[i] & 0x3f);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	return n;
}

json_t *json_text(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, bad = 0;
	char *buf, *o;
	json_t *j;
	while (i < len) {
		size_t n;
		uint64_t w;
		/* most output is ASCII: 8 bytes at a time while it is */
		if (i + 8 <= len && (memcpy(&w, p + i, 8), !(w & 0x8080808080808080ULL))) {
			i += 8;
			continue;
		}
		if (p[i] < 0x80) {
			i++;
			continue;
		}
		n = utf8_seq(p + i, len - i);
		if (!n) {
			bad++;
			n = 1;
		}
		i += n;
	}
	/* valid UTF-8, checked above: jansson need not decode it again */
	if (!bad)
		return json_stringn_nocheck(s ? s : "", len);
	buf = o = xmalloc(len + bad * 2 + 1);
	for (i = 0; i < len;) {
		size_t n = utf8_seq(p + i, len - i);
		if (!n) {
			memcpy(o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
		} else {
			memcpy(o, p + i, n);
			o += n;
			i += n;
		}
	}
	j = json_stringn_nocheck(buf, (size_t)(o - buf));
	free(buf);
	return j;
}

json_t *result_to_json(const struct run_result *r)
{
	json_t *o = json_object(), *lim = json_array(), *warn = json_array();
	json_object_set_new(o, "status", json_string(run_status_name(r->status)));
	json_object_set_new(o, "exit_code", r->exit_code >= 0 ? json_integer(r->exit_code) : json_null());
	json_object_set_new(o, "signal", r->signal ? json_integer(r->signal) : json_null());
	json_object_set_new(o, "stdout", json_text(r->out.data, r->out.len));
	json_object_set_new(o, "stderr", json_text(r->err.data, r->err.len));
	json_object_set_new(o, "truncated", json_pack("{s:b,s:b}", "stdout", r->out.truncated,
						      "stderr", r->err.truncated));
	if (r->out.dropped || r->err.dropped)
		json_object_set_new(o, "dropped_bytes", json_pack("{s:I,s:I}", "stdout",
			(json_int_t)r->out.dropped, "stderr", (json_int_t)r->err.dropped));
	{
		json_t *rv = NULL;
		if (r->return_value)
			rv = json_loads(r->return_value, JSON_DECODE_ANY, NULL);
		json_object_set_new(o, "return_value", rv ? rv : json_null());
	}
	json_object_set_new(o, "duration_ms", json_integer((json_int_t)r->duration_ms));
	json_object_set_new(o, "cpu_ms", json_integer((json_int_t)r->cpu_ms));
	json_object_set_new(o, "memory_peak_bytes", json_integer((json_int_t)r->memory_peak_bytes));
	for (int i = 0; i < r->n_limits; i++)
		json_array_append_new(lim, json_pack("{s:s,s:I,s:s}", "name", r->limits[i].name, "value",
			(json_int_t)r->limits[i].value, "enforced_by", limit_enforcer_name(r->limits[i].by)));
	json_object_set_new(o, "limits", lim);
	for (int i = 0; i < r->n_warnings; i++)
		json_array_append_new(warn, json_string(r->warnings[i]));
	json_object_set_new(o, "warnings", warn);
	if (r->status == RUN_SETUP_FAILED) {
		const char *en = r->setup_error.errnum ? strerrorname_np(r->setup_error.errnum) : NULL;
		json_object_set_new(o, "setup_error", json_pack("{s:s,s:i,s:s?,s:s}",
			"step", r->setup_error.step, "errno", r->setup_error.errnum,
			"errno_name", en, "message", r->setup_error.msg));
	}
	json_object_set_new(o, "tool_calls", r->tool_calls ? json_incref(r->tool_calls) : json_null());
	return o;
}

int result_exit_status(const struct run_result *r)
{
	switch (r->status) {
	case RUN_OK:
	case RUN_ERROR:
		if (r->signal)
			return 128 + r->signal;
		return r->exit_code >= 0 ? r->exit_code : 1;
	case RUN_TIMEOUT: return EXIT_TIMEOUT;
	case RUN_MEMORY_LIMIT: return EXIT_MEMORY_LIMIT;
	case RUN_KILLED: return 128 + SIGKILL;
	case RUN_SETUP_FAILED: return EXIT_SETUP_FAILED;
	default: return EXIT_SETUP_FAILED;
	}
}
