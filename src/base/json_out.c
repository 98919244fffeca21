/* pycell: compact JSON text of a jansson value in one pass.
 *
 * The same bytes as json_dumpb(v, JSON_COMPACT | JSON_ENCODE_ANY), made
 * for the messages that carry a run's output: jansson measures a message
 * by dumping it once and then dumps it again, and decodes every code
 * point of every string on the way (a 1 MiB output is two strings of a
 * response, four passes of UTF-8 decoding).  Here a string is copied in
 * runs between the bytes that need an escape, found with a table: a
 * jansson string is valid UTF-8 already (json_string checks it), and
 * jansson escapes nothing above 0x1f but '"' and '\'. */
#include "config.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/json_out.h"
#include "base/util.h"

struct out {
	char *p;
	size_t len, cap;
};

static void reserve(struct out *o, size_t n)
{
	size_t cap;
	if (o->len + n <= o->cap)
		return;
	cap = o->cap ? o->cap : 256;
	while (cap < o->len + n)
		cap *= 2;
	o->p = xrealloc(o->p, cap);
	o->cap = cap;
}

static void put(struct out *o, const char *s, size_t n)
{
	reserve(o, n);
	memcpy(o->p + o->len, s, n);
	o->len += n;
}

static void putc1(struct out *o, char c)
{
	reserve(o, 1);
	o->p[o->len++] = c;
}

/* What a byte becomes in a JSON string: 0 itself, 'u' \u00XX, else a
 * backslash and this letter. */
static const unsigned char escape[256] = {
	['\b'] = 'b', ['\f'] = 'f', ['\n'] = 'n', ['\r'] = 'r', ['\t'] = 't',
	[0x00] = 'u', [0x01] = 'u', [0x02] = 'u', [0x03] = 'u', [0x04] = 'u', [0x05] = 'u',
	[0x06] = 'u', [0x07] = 'u', [0x0b] = 'u', [0x0e] = 'u', [0x0f] = 'u', [0x10] = 'u',
	[0x11] = 'u', [0x12] = 'u', [0x13] = 'u', [0x14] = 'u', [0x15] = 'u', [0x16] = 'u',
	[0x17] = 'u', [0x18] = 'u', [0x19] = 'u', [0x1a] = 'u', [0x1b] = 'u', [0x1c] = 'u',
	[0x1d] = 'u', [0x1e] = 'u', [0x1f] = 'u',
	['"'] = '"', ['\\'] = '\\',
};

/* Does none of the 8 bytes need an escape (none below 0x20, no '"', no
 * '\')?  The usual bit tricks: a byte's top bit is set in m where the
 * byte is below 0x20 or 0 after the XOR; they may flag a clean byte
 * after a flagged one, never miss one, and this only decides whether to
 * skip 8 bytes at once. */
static bool clean8(const unsigned char *p)
{
	const uint64_t ones = 0x0101010101010101ULL, high = 0x8080808080808080ULL;
	uint64_t x, q, b;
	memcpy(&x, p, 8);
	q = x ^ (ones * '"');
	b = x ^ (ones * '\\');
	return !((((x - ones * 0x20) & ~x) | ((q - ones) & ~q) | ((b - ones) & ~b)) & high);
}

static void put_string(struct out *o, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0;
	reserve(o, n + 2);
	putc1(o, '"');
	while (i < n) {
		size_t j = i;
		char u[8];
		while (j + 8 <= n && clean8(p + j))
			j += 8;
		while (j < n && !escape[p[j]])
			j++;
		put(o, s + i, j - i);
		if (j == n)
			break;
		if (escape[p[j]] == 'u') {
			snprintf(u, sizeof(u), "\\u%04X", p[j]);
			put(o, u, 6);
		} else {
			u[0] = '\\';
			u[1] = (char)escape[p[j]];
			put(o, u, 2);
		}
		i = j + 1;
	}
	putc1(o, '"');
}

static int put_value(struct out *o, const json_t *v)
{
	char num[32];
	switch (json_typeof(v)) {
	case JSON_OBJECT: {
		json_t *obj = (json_t *)v;
		putc1(o, '{');
		for (void *it = json_object_iter(obj); it; it = json_object_iter_next(obj, it)) {
			const char *k = json_object_iter_key(it);
#if JANSSON_VERSION_HEX >= 0x020e00
			size_t kn = json_object_iter_key_len(it);   /* a key may hold a NUL */
#else
			size_t kn = strlen(k);
#endif
			if (it != json_object_iter(obj))
				putc1(o, ',');
			put_string(o, k, kn);
			putc1(o, ':');
			if (put_value(o, json_object_iter_value(it)) < 0)
				return -1;
		}
		putc1(o, '}');
		return 0;
	}
	case JSON_ARRAY:
		putc1(o, '[');
		for (size_t i = 0; i < json_array_size(v); i++) {
			if (i)
				putc1(o, ',');
			if (put_value(o, json_array_get(v, i)) < 0)
				return -1;
		}
		putc1(o, ']');
		return 0;
	case JSON_STRING:
		put_string(o, json_string_value(v), json_string_length(v));
		return 0;
	case JSON_INTEGER:
		put(o, num, (size_t)snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(v)));
		return 0;
	case JSON_REAL: {
		/* rare here, and jansson's format has its rules (a ".0", the
		 * shortest round trip): its own */
		char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
		if (!s)
			return -1;
		put(o, s, strlen(s));
		free(s);
		return 0;
	}
	case JSON_TRUE:
		put(o, "true", 4);
		return 0;
	case JSON_FALSE:
		put(o, "false", 5);
		return 0;
	case JSON_NULL:
		put(o, "null", 4);
		return 0;
	default:
		return -1;
	}
}

char *json_out(const json_t *v, const char *end, size_t *len)
{
	struct out o = { 0 };
	if (!v || put_value(&o, v) < 0) {
		free(o.p);
		return NULL;
	}
	if (end)
		put(&o, end, strlen(end));
	putc1(&o, '\0');
	*len = o.len - 1;
	return o.p;
}
