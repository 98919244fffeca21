/* pycell: a JSON text checked without building it (json_scan.h). */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json_scan.h"
#include "base/util.h"

#define MAX_DEPTH 2048   /* as jansson's parser */

struct scanner {
	const char *s;
	size_t len, pos;
	struct json_scan *out;
	int depth;
	/* where the value being read sits: the member names that lead to it
	 * from the top, for the three spans the caller wants */
	bool in_vars;
};

static void ws(struct scanner *sc)
{
	while (sc->pos < sc->len && strchr(" \t\n\r", sc->s[sc->pos]) && sc->s[sc->pos])
		sc->pos++;
}

static bool lit(struct scanner *sc, const char *w)
{
	size_t n = strlen(w);
	if (sc->len - sc->pos < n || memcmp(sc->s + sc->pos, w, n) != 0)
		return false;
	sc->pos += n;
	return true;
}

/* One UTF-8 character of a string, well formed (no overlongs, no
 * surrogates, at most U+10FFFF), as RFC 8259 wants a JSON text to be. */
static bool utf8_char(struct scanner *sc)
{
	const unsigned char *p = (const unsigned char *)sc->s + sc->pos;
	size_t left = sc->len - sc->pos, n;
	unsigned cp;
	if (p[0] < 0x80)
		n = 1, cp = p[0];
	else if (p[0] >= 0xC2 && p[0] < 0xE0)
		n = 2, cp = p[0] & 0x1F;
	else if (p[0] >= 0xE0 && p[0] < 0xF0)
		n = 3, cp = p[0] & 0x0F;
	else if (p[0] >= 0xF0 && p[0] < 0xF5)
		n = 4, cp = p[0] & 0x07;
	else
		return false;
	if (left < n)
		return false;
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xC0) != 0x80)
			return false;
		cp = cp << 6 | (p[i] & 0x3F);
	}
	if ((n == 3 && (cp < 0x800 || (cp >= 0xD800 && cp < 0xE000))) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
		return false;
	sc->pos += n;
	return true;
}

/* A string; its contents (escapes undone only as far as comparing a
 * member name needs: names with escapes never match) in *raw. */
static bool string(struct scanner *sc, const char **raw, size_t *raw_len)
{
	size_t start;
	bool escaped = false;
	if (sc->pos >= sc->len || sc->s[sc->pos] != '"')
		return false;
	start = ++sc->pos;
	while (sc->pos < sc->len) {
		unsigned char c = (unsigned char)sc->s[sc->pos];
		if (c == '"') {
			if (raw) {
				*raw = escaped ? NULL : sc->s + start;
				*raw_len = sc->pos - start;
			}
			sc->pos++;
			return true;
		}
		if (c < 0x20)
			return false;
		if (c == '\\') {
			escaped = true;
			if (++sc->pos >= sc->len)
				return false;
			c = (unsigned char)sc->s[sc->pos];
			if (c == 'u') {
				if (sc->len - sc->pos < 5)
					return false;
				for (int i = 1; i <= 4; i++)
					if (!strchr("0123456789abcdefABCDEF", sc->s[sc->pos + (size_t)i]) ||
					    !sc->s[sc->pos + (size_t)i])
						return false;
				sc->pos += 5;
			} else if (strchr("\"\\/bfnrt", c) && c) {
				sc->pos++;
			} else {
				return false;
			}
			continue;
		}
		if (!utf8_char(sc))
			return false;
	}
	return false;
}

static bool digits(struct scanner *sc)
{
	size_t start = sc->pos;
	while (sc->pos < sc->len && sc->s[sc->pos] >= '0' && sc->s[sc->pos] <= '9')
		sc->pos++;
	return sc->pos > start;
}

/* A number, and whether jansson can hold it: an integer within 64 bits,
 * or a real that does not overflow a double (one that underflows, to 0 or
 * to a subnormal, it holds). */
static bool number(struct scanner *sc)
{
	size_t start = sc->pos;
	bool real = false, wide;
	char buf[512];
	if (sc->pos < sc->len && sc->s[sc->pos] == '-')
		sc->pos++;
	if (sc->pos < sc->len && sc->s[sc->pos] == '0')
		sc->pos++;
	else if (!digits(sc))
		return false;
	if (sc->pos < sc->len && sc->s[sc->pos] == '.') {
		sc->pos++;
		real = true;
		if (!digits(sc))
			return false;
	}
	if (sc->pos < sc->len && (sc->s[sc->pos] == 'e' || sc->s[sc->pos] == 'E')) {
		sc->pos++;
		real = true;
		if (sc->pos < sc->len && (sc->s[sc->pos] == '+' || sc->s[sc->pos] == '-'))
			sc->pos++;
		if (!digits(sc))
			return false;
	}
	if (sc->pos - start >= sizeof(buf)) {
		/* a number this long is out of range unless it is a real that
		 * rounds within it: leave that to strtod on a heap copy */
		char *copy = strndup(sc->s + start, sc->pos - start);
		double d;
		errno = 0;
		d = copy ? strtod(copy, NULL) : HUGE_VAL;
		free(copy);
		wide = !real || (errno == ERANGE && (d == HUGE_VAL || d == -HUGE_VAL));
	} else {
		memcpy(buf, sc->s + start, sc->pos - start);
		buf[sc->pos - start] = '\0';
		errno = 0;
		if (real) {
			double d = strtod(buf, NULL);
			/* as jansson judges it: an overflow is too wide; an
			 * underflow (to 0 or to a subnormal, ERANGE both) is not */
			wide = errno == ERANGE && (d == HUGE_VAL || d == -HUGE_VAL);
		} else {
			(void)strtoll(buf, NULL, 10);
			wide = errno == ERANGE;
		}
	}
	if (wide) {
		struct json_scan *o = sc->out;
		if (o->n_wide < JSON_SCAN_MAX_WIDE)
			o->wide[o->n_wide] = (struct json_span){ start, sc->pos - start };
		o->n_wide++;
		if (!sc->in_vars)
			o->n_wide_outside++;
	}
	return true;
}

static bool value(struct scanner *sc, int path);

/* path: how the value being read is reached from the top: 0 the top
 * object, 1 its "params", 2 params' "arguments", -1 anywhere else. */
static bool object(struct scanner *sc, int path)
{
	sc->pos++;   /* { */
	ws(sc);
	if (sc->pos < sc->len && sc->s[sc->pos] == '}') {
		sc->pos++;
		return true;
	}
	for (;;) {
		const char *name;
		size_t name_len, vstart;
		int next = -1;
		bool vars = false, id = false;
		ws(sc);
		if (!string(sc, &name, &name_len))
			return false;
		ws(sc);
		if (sc->pos >= sc->len || sc->s[sc->pos] != ':')
			return false;
		sc->pos++;
		ws(sc);
#define NAMED(w) (name && name_len == strlen(w) && memcmp(name, w, name_len) == 0)
		if (path == 0 && NAMED("params"))
			next = 1;
		else if (path == 1 && NAMED("arguments"))
			next = 2;
		else if (path == 2 && NAMED("variables"))
			vars = true;
		else if (path == 0 && NAMED("id"))
			id = true;
#undef NAMED
		vstart = sc->pos;
		if (vars)
			sc->in_vars = true;
		if (!value(sc, next))
			return false;
		if (vars) {
			sc->in_vars = false;
			sc->out->vars = (struct json_span){ vstart, sc->pos - vstart };
		}
		if (id)
			sc->out->id = (struct json_span){ vstart, sc->pos - vstart };
		ws(sc);
		if (sc->pos < sc->len && sc->s[sc->pos] == ',') {
			sc->pos++;
			continue;
		}
		if (sc->pos < sc->len && sc->s[sc->pos] == '}') {
			sc->pos++;
			return true;
		}
		return false;
	}
}

static bool array(struct scanner *sc)
{
	sc->pos++;   /* [ */
	ws(sc);
	if (sc->pos < sc->len && sc->s[sc->pos] == ']') {
		sc->pos++;
		return true;
	}
	for (;;) {
		ws(sc);
		if (!value(sc, -1))
			return false;
		ws(sc);
		if (sc->pos < sc->len && sc->s[sc->pos] == ',') {
			sc->pos++;
			continue;
		}
		if (sc->pos < sc->len && sc->s[sc->pos] == ']') {
			sc->pos++;
			return true;
		}
		return false;
	}
}

static bool value(struct scanner *sc, int path)
{
	bool ok;
	if (sc->pos >= sc->len)
		return false;
	switch (sc->s[sc->pos]) {
	case '{':
		if (++sc->depth > MAX_DEPTH)
			return false;
		ok = object(sc, path);
		sc->depth--;
		return ok;
	case '[':
		if (++sc->depth > MAX_DEPTH)
			return false;
		ok = array(sc);
		sc->depth--;
		return ok;
	case '"':
		return string(sc, NULL, NULL);
	case 't':
		return lit(sc, "true");
	case 'f':
		return lit(sc, "false");
	case 'n':
		return lit(sc, "null");
	default:
		return number(sc);
	}
}

int json_scan(const char *text, size_t len, struct json_scan *out)
{
	struct scanner sc = { .s = text, .len = len, .out = out };
	memset(out, 0, sizeof(*out));
	ws(&sc);
	if (!value(&sc, sc.pos < len && text[sc.pos] == '{' ? 0 : -1))
		return -1;
	ws(&sc);
	return sc.pos == len ? 0 : -1;
}

/* ------------------------------------------------------------ the id of a text too large to keep */

void json_id_finder_init(struct json_id_finder *f)
{
	memset(f, 0, sizeof(*f));
}

static void id_put(struct json_id_finder *f, char c)
{
	if (f->id_len + 1 < JSON_ID_MAX) {
		f->id[f->id_len++] = c;
		return;
	}
	/* too long to be an id worth answering: none */
	f->capturing = false;
	f->state = ID_DONE;
	f->id_len = 0;
}

static void id_end(struct json_id_finder *f)
{
	f->capturing = false;
	f->state = ID_DONE;
	f->id[f->id_len] = '\0';
}

/* "id" as a key, byte by byte: i, then d, then the closing quote */
static void key_byte(struct json_id_finder *f, char c)
{
	static const char id[] = "id";
	f->key_is_id = f->key_is_id && f->key_len < 2 && c == id[f->key_len];
	f->key_len++;
}

void json_id_finder_feed(struct json_id_finder *f, const char *p, size_t n)
{
	for (size_t i = 0; i < n && f->state != ID_DONE; i++) {
		char c = p[i];
		if (f->in_str) {
			if (f->capturing)
				id_put(f, c);
			if (f->esc) {
				f->esc = false;
				if (f->state == ID_IN_KEY)
					f->key_is_id = false;   /* an escape in a key: not spelled "id" */
			} else if (c == '\\') {
				f->esc = true;
				if (f->state == ID_IN_KEY)
					f->key_is_id = false;
			} else if (c == '"') {
				f->in_str = false;
				if (f->state == ID_IN_KEY)
					f->state = ID_COLON;
			} else if (f->state == ID_IN_KEY) {
				key_byte(f, c);
			}
			continue;
		}
		switch (c) {
		case ' ': case '\t': case '\r': case '\n':
			break;
		case '"':
			f->in_str = true;
			if (f->depth == 1 && f->state == ID_KEY) {
				f->state = ID_IN_KEY;
				f->key_len = 0;
				f->key_is_id = true;
			} else if (f->capturing) {
				id_put(f, c);
			}
			break;
		case '{':
		case '[':
			if (f->depth == 0 && (c == '[' || f->state != ID_BEFORE)) {
				f->state = ID_DONE;   /* not an object */
				break;
			}
			if (f->capturing)
				id_put(f, c);
			if (++f->depth == 1)
				f->state = ID_KEY;
			break;
		case '}':
		case ']':
			if (f->depth == 1 && f->capturing) {
				id_end(f);
				break;
			}
			if (f->capturing)
				id_put(f, c);
			if (--f->depth <= 0)
				f->state = ID_DONE;
			break;
		case ',':
			if (f->depth == 1 && f->capturing)
				id_end(f);
			else if (f->depth == 1)
				f->state = ID_KEY;
			else if (f->capturing)
				id_put(f, c);
			break;
		case ':':
			if (f->depth == 1 && f->state == ID_COLON) {
				f->state = ID_VALUE;
				f->capturing = f->key_is_id && f->key_len == 2;
				f->id_len = 0;
			} else if (f->capturing) {
				id_put(f, c);
			}
			break;
		default:
			if (f->capturing)
				id_put(f, c);
			break;
		}
	}
}

const char *json_id_finder_result(const struct json_id_finder *f)
{
	return f->state == ID_DONE && f->id_len ? f->id : NULL;
}

char *json_scan_narrowed(const char *text, size_t len, const struct json_scan *sc)
{
	char *copy = xmalloc(len + 1);
	memcpy(copy, text, len);
	copy[len] = '\0';
	for (size_t i = 0; i < sc->n_wide && i < JSON_SCAN_MAX_WIDE; i++) {
		memset(copy + sc->wide[i].off, ' ', sc->wide[i].len);
		copy[sc->wide[i].off] = '0';
	}
	return copy;
}
