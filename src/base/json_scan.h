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

#endif
