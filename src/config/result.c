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
	outbuf_free(&r->out);
	outbuf_free(&r->err);
	free(r->return_value);
	json_decref(r->images);
	json_decref(r->files);
	json_decref(r->network);
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
	json_object_set_new(o, "backend", json_string(r->backend ? r->backend : "native"));
	if (r->layers)
		json_object_set_new(o, "layers", result_layers_json(r->layers));
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
	if (r->images)
		json_object_set_new(o, "images", result_outputs_json(r->images));
	if (r->files)
		json_object_set_new(o, "files", result_outputs_json(r->files));
	if (r->network)
		json_object_set_new(o, "network", json_incref(r->network));
	return o;
}

json_t *result_layers_json(const char *const *layers)
{
	json_t *l = json_array();
	for (; *layers; layers++)
		json_array_append_new(l, json_string(*layers));
	return l;
}

json_t *result_outputs_json(const json_t *list)
{
	json_t *a = json_array(), *e;
	size_t i;
	json_array_foreach(list, i, e) {
		json_t *c = json_copy((json_t *)e);
		json_object_del(c, "data");
		json_array_append_new(a, c);
	}
	return a;
}

/* ------------------------------------------------------------ output */

void outbuf_init(struct output_buf *b, uint64_t cap)
{
	memset(b, 0, sizeof(*b));
	b->cap = cap;
	if (cap >= OUTBUF_SPLIT_MIN)
		b->ring_cap = (size_t)(cap - cap / 2 - OUTBUF_MARKER_MAX);
}

static size_t head_cap(const struct output_buf *b)
{
	return (size_t)(b->cap >= OUTBUF_SPLIT_MIN ? b->cap / 2 : b->cap);
}

/* Into the ring, whose oldest bytes go when it is full. */
static void ring_add(struct output_buf *b, const char *p, size_t n)
{
	if (!b->ring)
		b->ring = xmalloc(b->ring_cap);
	if (n >= b->ring_cap) {
		/* all the ring held, and the start of this, are dropped */
		b->dropped += b->ring_len + (n - b->ring_cap);
		memcpy(b->ring, p + n - b->ring_cap, b->ring_cap);
		b->ring_len = b->ring_cap;
		b->ring_pos = 0;
		return;
	}
	while (n) {
		size_t at = (b->ring_pos + b->ring_len) % b->ring_cap, k;
		if (b->ring_len == b->ring_cap) {   /* full: overwrite the oldest */
			at = b->ring_pos;
			k = b->ring_cap - at < n ? b->ring_cap - at : n;
			b->dropped += k;
			b->ring_pos = (b->ring_pos + k) % b->ring_cap;
		} else {
			k = b->ring_cap - b->ring_len;
			if (k > n)
				k = n;
			if (k > b->ring_cap - at)
				k = b->ring_cap - at;
			b->ring_len += k;
		}
		memcpy(b->ring + at, p, k);
		p += k;
		n -= k;
	}
}

/* data holds the whole stream up to the cap; past it, the head stays in
 * data and the rest goes through the ring. */
size_t outbuf_append(struct output_buf *b, const char *p, size_t n)
{
	size_t hc = head_cap(b), before = b->len < hc ? b->len : hc, live;
	if (!b->truncated) {
		size_t room = b->cap > b->len ? (size_t)b->cap - b->len : 0, k = n < room ? n : room;
		if (k) {
			if (b->alloc < b->len + k + 1) {
				size_t a = b->alloc ? b->alloc * 2 : 4096;
				while (a < b->len + k + 1)
					a *= 2;
				if (a > b->cap + 1)
					a = (size_t)b->cap + 1;
				b->data = xrealloc(b->data, a);
				b->alloc = a;
			}
			memcpy(b->data + b->len, p, k);
			b->len += k;
			b->data[b->len] = '\0';
			p += k;
			n -= k;
		}
		if (n) {
			/* past the cap: what data holds past the head starts the tail */
			b->truncated = true;
			if (b->ring_cap) {
				ring_add(b, b->data + hc, b->len - hc);
				b->len = hc;
				b->data[b->len] = '\0';
			}
		}
	}
	if (n) {
		if (b->ring_cap)
			ring_add(b, p, n);
		else
			b->dropped += n;
	}
	/* the head's new bytes: final, a caller may show them as they come */
	live = (b->len < hc ? b->len : hc) - before;
	return live;
}

/* bytes of s[0..n) that are the trailing part of a cut UTF-8 character */
static size_t utf8_cut_tail(const char *s, size_t n)
{
	size_t k = 0;
	while (k < n && k < 3 && ((unsigned char)s[n - 1 - k] & 0xc0) == 0x80)
		k++;
	if (k < n) {
		unsigned char lead = (unsigned char)s[n - 1 - k];
		size_t need = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
		if (need > k + 1)
			return k + 1;   /* the lead and its continuation bytes: cut short */
	}
	return 0;
}

void outbuf_finish(struct output_buf *b, const char *stream)
{
	char marker[OUTBUF_MARKER_MAX];
	size_t skip = 0, cut, m;
	char *tail;

	if (b->finished)
		return;
	b->finished = true;
	if (!b->ring_len) {
		/* the bytes outbuf_append called live; the rest are news */
		b->head_len = b->len < head_cap(b) ? b->len : head_cap(b);
		if (!b->data && b->truncated)
			b->data = xstrdup("");
		free(steal_ptr(&b->ring));
		return;
	}
	tail = xmalloc(b->ring_len);
	for (size_t i = 0; i < b->ring_len; i++)
		tail[i] = b->ring[(b->ring_pos + i) % b->ring_cap];
	free(steal_ptr(&b->ring));
	/* whole characters on both sides of the marker */
	cut = utf8_cut_tail(b->data, b->len);
	b->len -= cut;
	while (skip < b->ring_len && skip < 3 && ((unsigned char)tail[skip] & 0xc0) == 0x80)
		skip++;
	b->dropped += cut + skip;
	m = (size_t)snprintf(marker, sizeof(marker), "\n[... pycell: %llu bytes of %s dropped here ...]\n",
			     (unsigned long long)b->dropped, stream);
	if (m >= sizeof(marker))
		m = sizeof(marker) - 1;
	b->head_len = b->len;
	b->data = xrealloc(b->data, b->len + m + (b->ring_len - skip) + 1);
	memcpy(b->data + b->len, marker, m);
	memcpy(b->data + b->len + m, tail + skip, b->ring_len - skip);
	b->len += m + b->ring_len - skip;
	b->data[b->len] = '\0';
	b->alloc = b->len + 1;
	b->ring_len = b->ring_pos = 0;
	free(tail);
}

void outbuf_free(struct output_buf *b)
{
	free(b->data);
	free(b->ring);
	b->data = b->ring = NULL;
	b->len = b->ring_len = b->alloc = 0;
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
