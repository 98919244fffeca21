/* pycell: JSON-RPC 2.0: newline framing with a size cap, message
 * validation, and the response / error / notification objects. */
#ifndef PYCELL_JSONRPC_H
#define PYCELL_JSONRPC_H

#include <jansson.h>

#include "base/json_scan.h"

/* A JSON value this scope holds a reference to: dropped at scope exit
 * unless handed on with steal_ptr(). */
static inline void pc_json_decrefp(json_t **j) { json_decref(*j); }
#define cleanup_json __attribute__((cleanup(pc_json_decrefp)))
#include <stdbool.h>
#include <stddef.h>

#define JSONRPC_PARSE_ERROR -32700
#define JSONRPC_INVALID_REQUEST -32600
#define JSONRPC_METHOD_NOT_FOUND -32601
#define JSONRPC_INVALID_PARAMS -32602
#define JSONRPC_INTERNAL_ERROR -32603

/* Default cap on one message (one line on stdio). */
#define JSONRPC_DEFAULT_MAX_MESSAGE (4u << 20)

/* ------------------------------------------------------------ framing */

/* Splits a byte stream into lines.  A line longer than `max` is never
 * buffered: the reader reports it once and discards up to the next
 * newline, so hostile input costs at most `max` bytes of memory. */
struct line_reader {
	char *buf;
	size_t len, cap, max;
	bool discarding;     /* inside an oversized line */
	size_t discarded;    /* bytes of it seen so far */
	struct json_id_finder id;   /* of the oversized line, for its answer */
};

struct line_reader_ops {
	/* A complete line without its "\n" (and without a trailing "\r"). */
	void (*on_line)(void *ctx, const char *line, size_t len);
	/* A line went over the cap; called once, at its end, with the JSON
	 * text of its top-level "id" when one was seen (else NULL). */
	void (*on_oversized)(void *ctx, size_t max, const char *id);
};

void line_reader_init(struct line_reader *lr, size_t max);
void line_reader_free(struct line_reader *lr);
/* Feed bytes; calls ops for every complete line. */
void line_reader_feed(struct line_reader *lr, const char *data, size_t len,
		      const struct line_reader_ops *ops, void *ctx);

/* ------------------------------------------------------------ messages */

enum jsonrpc_kind {
	JSONRPC_REQUEST,       /* method + id: needs a response */
	JSONRPC_NOTIFICATION,  /* method, no id */
	JSONRPC_RESPONSE,      /* id + result or error (a reply to us) */
	JSONRPC_INVALID,       /* anything else */
};

struct jsonrpc_msg {
	enum jsonrpc_kind kind;
	const char *method;    /* borrowed from the message */
	json_t *id;            /* borrowed; NULL for notifications */
	json_t *params;        /* borrowed; NULL when absent */
	const char *why;       /* JSONRPC_INVALID: what is wrong */
};

/* Parse one message text.  Returns the value (any JSON type: arrays are
 * batches, the caller decides) or NULL with *error_response set to a
 * -32700 response. */
json_t *jsonrpc_parse(const char *text, size_t len, json_t **error_response);
/* Classify a single (non-array) message.  For JSONRPC_INVALID, `id` is
 * the message's id when it is a valid one, so the error can carry it. */
void jsonrpc_classify(json_t *msg, struct jsonrpc_msg *out);
/* A valid request id: a string or an integer (MCP forbids null). */
bool jsonrpc_id_valid(const json_t *id);
/* Is v the string s, byte for byte?  Messages may carry \u0000 in strings
 * (valid JSON, loaded with JSON_ALLOW_NUL): a comparison with strcmp would
 * take "run_python\u0000x" for "run_python". */
bool json_str_eq(const json_t *v, const char *s);

/* {"jsonrpc":"2.0","id":id,"result":result}; steals result, borrows id.
 * A NULL result (it could not be built) gives an internal error (-32603)
 * with the id instead: never an empty success. */
json_t *jsonrpc_result(json_t *id, json_t *result);
/* {"jsonrpc":"2.0","id":id,"error":{code,message[,data]}}; without "id"
 * when id is NULL (it could not be read: MCP's schemas, from 2025-11-25
 * on, and the SDKs take an absent id there, not JSON-RPC's null);
 * steals data (may be NULL). */
json_t *jsonrpc_error(json_t *id, int code, const char *message, json_t *data);
json_t *jsonrpc_errorf(json_t *id, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* {"jsonrpc":"2.0","method":method,"params":params}; steals params. */
json_t *jsonrpc_notification(const char *method, json_t *params);
/* Compact one-line text followed by "\n" (caller frees). */
char *jsonrpc_dump_line(const json_t *msg, size_t *len);

#endif
