/* pycell: JSON-RPC 2.0 framing and messages. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/json_out.h"
#include "base/jsonrpc.h"
#include "base/util.h"

/* A buffer that grew for one big line is given back once that line is
 * done, so an idle server does not keep megabytes around. */
#define LINE_KEEP_CAP (64u << 10)

void line_reader_init(struct line_reader *lr, size_t max)
{
	memset(lr, 0, sizeof(*lr));
	lr->max = max ? max : JSONRPC_DEFAULT_MAX_MESSAGE;
}

void line_reader_free(struct line_reader *lr)
{
	free(lr->buf);
	lr->buf = NULL;
	lr->len = lr->cap = 0;
}

static void deliver(const struct line_reader_ops *ops, void *ctx, const char *line, size_t len)
{
	if (len > 0 && line[len - 1] == '\r')
		len--;
	ops->on_line(ctx, line, len);
}

static void append(struct line_reader *lr, const char *p, size_t n)
{
	if (lr->len + n > lr->cap) {
		size_t cap = lr->cap ? lr->cap : 4096;
		while (cap < lr->len + n)
			cap *= 2;
		if (cap > lr->max)
			cap = lr->max;
		lr->buf = xrealloc(lr->buf, cap);
		lr->cap = cap;
	}
	memcpy(lr->buf + lr->len, p, n);
	lr->len += n;
}

void line_reader_feed(struct line_reader *lr, const char *data, size_t len,
		      const struct line_reader_ops *ops, void *ctx)
{
	size_t i = 0;
	while (i < len) {
		const char *nl = memchr(data + i, '\n', len - i);
		size_t seg = nl ? (size_t)(nl - (data + i)) : len - i;
		size_t next = i + seg + (nl ? 1 : 0);

		if (!lr->discarding && lr->len + seg > lr->max) {
			/* over the cap: from here only its id is looked for */
			lr->discarding = true;
			lr->discarded = lr->len;
			json_id_finder_init(&lr->id);
			json_id_finder_feed(&lr->id, lr->buf, lr->len);
			lr->len = 0;
		}
		if (lr->discarding) {
			lr->discarded += seg;
			json_id_finder_feed(&lr->id, data + i, seg);
			if (nl) {
				lr->discarding = false;
				ops->on_oversized(ctx, lr->max, json_id_finder_result(&lr->id));
			}
			i = next;
			continue;
		}
		if (nl && lr->len == 0) {
			deliver(ops, ctx, data + i, seg);   /* whole line in the chunk: no copy */
		} else {
			append(lr, data + i, seg);
			if (nl) {
				deliver(ops, ctx, lr->buf, lr->len);
				lr->len = 0;
			}
		}
		if (nl && lr->cap > LINE_KEEP_CAP) {
			free(lr->buf);
			lr->buf = NULL;
			lr->cap = 0;
		}
		i = next;
	}
}

/* ------------------------------------------------------------ messages */

json_t *jsonrpc_parse(const char *text, size_t len, json_t **error_response)
{
	json_error_t jerr;
	/* Duplicate keys are refused: two readers of one message must never
	 * disagree about which "method" or "id" it has.  \u0000 is valid JSON
	 * (code, stdin and variables may hold it): strings keep their length,
	 * and what is compared as a name goes through json_str_eq. */
	const char *nul = memchr(text, '\0', len);
	json_t *v;
	/* A raw NUL byte is never JSON (in a string it must be written
	 * \u0000), but jansson reads past one as if it were not there
	 * ("[1<NUL>]" is [1]): such text would be one message to jansson and
	 * another to every other reader (json_scan, the id finder).  The
	 * libFuzzer target fuzz_jsonrpc found the disagreement. */
	if (nul) {
		*error_response = jsonrpc_error(NULL, JSONRPC_PARSE_ERROR, "Parse error: the message is not valid JSON",
						json_pack("{s:s,s:I}", "detail", "a NUL byte (write \\u0000 in a string)",
							  "position", (json_int_t)(nul - text)));
		return NULL;
	}
	v = json_loadb(text, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
	if (v) {
		*error_response = NULL;
		return v;
	}
	*error_response = jsonrpc_error(NULL, JSONRPC_PARSE_ERROR, "Parse error: the message is not valid JSON",
					json_pack("{s:s,s:i}", "detail", jerr.text, "position", jerr.position));
	return NULL;
}

bool json_str_eq(const json_t *v, const char *s)
{
	size_t n = strlen(s);
	return json_is_string(v) && json_string_length(v) == n && memcmp(json_string_value(v), s, n) == 0;
}

bool jsonrpc_id_valid(const json_t *id)
{
	return id && (json_is_string(id) || json_is_integer(id) || json_is_real(id));
}

/* Fills `out` for a valid message and returns NULL, or returns why the
 * message is not valid JSON-RPC. */
static const char *classify(json_t *msg, struct jsonrpc_msg *out)
{
	json_t *version, *method, *id, *params;
	if (!json_is_object(msg))
		return "a JSON-RPC message must be an object";

	id = json_object_get(msg, "id");
	if (jsonrpc_id_valid(id))
		out->id = id;
	version = json_object_get(msg, "jsonrpc");
	if (!json_str_eq(version, "2.0"))
		return "\"jsonrpc\" must be \"2.0\"";

	method = json_object_get(msg, "method");
	if (!method) {
		bool has_result = json_object_get(msg, "result") != NULL;
		bool has_error = json_object_get(msg, "error") != NULL;
		if (out->id && has_result != has_error) {
			out->kind = JSONRPC_RESPONSE;
			return NULL;
		}
		return "a request needs a \"method\"";
	}
	if (!json_is_string(method) || json_string_length(method) == 0)
		return "\"method\" must be a non-empty string";
	if (strlen(json_string_value(method)) != json_string_length(method))
		return "\"method\" must not contain \\u0000";
	params = json_object_get(msg, "params");
	if (params && !json_is_object(params) && !json_is_array(params))
		return "\"params\" must be an object";
	if (id && !out->id)
		return "\"id\" must be a string or a number";

	out->method = json_string_value(method);
	out->params = params;
	out->kind = id ? JSONRPC_REQUEST : JSONRPC_NOTIFICATION;
	return NULL;
}

void jsonrpc_classify(json_t *msg, struct jsonrpc_msg *out)
{
	memset(out, 0, sizeof(*out));
	out->why = classify(msg, out);
	if (out->why)
		out->kind = JSONRPC_INVALID;
}

static json_t *envelope(void)
{
	return json_pack("{s:s}", "jsonrpc", "2.0");
}

json_t *jsonrpc_result(json_t *id, json_t *result)
{
	json_t *m;
	/* a result that could not be built is an error, never an empty success */
	if (!result)
		return jsonrpc_error(id, JSONRPC_INTERNAL_ERROR,
				     "Internal error: the server could not build this response", NULL);
	m = envelope();
	json_object_set(m, "id", id);
	json_object_set_new(m, "result", result);
	return m;
}

json_t *jsonrpc_error(json_t *id, int code, const char *message, json_t *data)
{
	json_t *m = envelope();
	json_t *e = json_pack("{s:i,s:s}", "code", code, "message", message);
	if (data)
		json_object_set_new(e, "data", data);
	if (id)
		json_object_set(m, "id", id);
	json_object_set_new(m, "error", e);
	return m;
}

json_t *jsonrpc_errorf(json_t *id, int code, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return jsonrpc_error(id, code, buf, NULL);
}

json_t *jsonrpc_notification(const char *method, json_t *params)
{
	json_t *m = envelope();
	json_object_set_new(m, "method", json_string(method));
	if (params)
		json_object_set_new(m, "params", params);
	return m;
}

char *jsonrpc_dump_line(const json_t *msg, size_t *len)
{
	/* compact JSON never holds a raw newline: strings escape it */
	return json_out(msg, "\n", len);
}
