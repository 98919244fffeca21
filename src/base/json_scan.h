/* pycell: a JSON text checked without building it, for the messages
 * jansson refuses although they are valid JSON: numbers it cannot hold
 * (integers beyond 64 bits, reals that overflow a double).  The scan says
 * whether the text is JSON (RFC 8259, UTF-8 included) and where the parts
 * an MCP server needs are: the request's "id", and
 * "params.arguments.variables", whose big integers Python can take. */
#ifndef PYCELL_JSON_SCAN_H
#define PYCELL_JSON_SCAN_H

#include <stdbool.h>
#include <stddef.h>

struct json_span {
	size_t off, len;   /* len 0: not there */
};

#define JSON_SCAN_MAX_WIDE 16

struct json_scan {
	struct json_span id;      /* the top-level object's "id" value */
	struct json_span vars;    /* params.arguments.variables */
	size_t n_wide;            /* numbers jansson cannot hold */
	struct json_span wide[JSON_SCAN_MAX_WIDE];   /* the first of them */
	size_t n_wide_outside;    /* of those, not inside vars */
};

/* 0 when text is one JSON value (with white space around it), else -1. */
int json_scan(const char *text, size_t len, struct json_scan *out);
/* A copy of text (malloc'd, len bytes) with each of sc's wide numbers
 * written as 0 and blanks: what jansson can read, for routing it. */
char *json_scan_narrowed(const char *text, size_t len, const struct json_scan *sc);

/* The top-level "id" of a JSON object fed in pieces, without keeping the
 * text: for a message too large to keep, whose answer still needs its id.
 * Only the first "id" member counts, and only an id of at most
 * JSON_ID_MAX - 1 bytes; the result is the id's JSON text, for the caller
 * to parse and check (the text as a whole was never checked). */
#define JSON_ID_MAX 256
struct json_id_finder {
	int depth;                /* of nesting; the object itself is 1 */
	enum { ID_BEFORE, ID_KEY, ID_IN_KEY, ID_COLON, ID_VALUE, ID_DONE } state;
	bool in_str, esc, capturing, key_is_id;
	size_t key_len, id_len;
	char id[JSON_ID_MAX];
};
void json_id_finder_init(struct json_id_finder *f);
void json_id_finder_feed(struct json_id_finder *f, const char *p, size_t n);
/* The id's JSON text (NUL-terminated), or NULL when there was none. */
const char *json_id_finder_result(const struct json_id_finder *f);

#endif
