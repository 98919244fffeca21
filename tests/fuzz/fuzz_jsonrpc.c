/* pycell fuzz target: JSON-RPC framing and classification (src/base/jsonrpc.c),
 * what the MCP client, the upstream servers and the jail all send.
 * Checks beyond "no crash": the line reader hands on exactly the bytes of
 * each line and never buffers more than its cap; a message classified as a
 * request has a valid id and a method; a response built for any id that
 * classify returns is a valid JSON-RPC message that parses back; the
 * streaming id finder (for lines too large to keep) finds the same "id" as
 * the parser, whenever the line is an object that parses; json_out writes
 * every message that parses exactly as jansson's json_dumpb does. */
#include "config.h"

#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json_out.h"
#include "base/jsonrpc.h"

#define CAP 4096

struct seen {
	size_t lines, bytes, oversized;
};

static void check_message(const char *line, size_t len)
{
	json_t *err = NULL, *msg = jsonrpc_parse(line, len, &err);
	struct jsonrpc_msg m;
	assert((msg == NULL) != (err == NULL));
	if (!msg) {
		/* a parse error answers without an id */
		assert(json_object_get(err, "id") == NULL);
		json_decref(err);
		return;
	}
	{
		/* the one-pass writer and jansson agree byte for byte */
		size_t want_n = json_dumpb(msg, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY), n;
		char *want = malloc(want_n + 1), *got = json_out(msg, NULL, &n);
		assert(want && got && json_dumpb(msg, want, want_n, JSON_COMPACT | JSON_ENCODE_ANY) == want_n);
		if (n != want_n || memcmp(got, want, n) != 0) {
			fprintf(stderr, "json_out: %.*s\njansson:  %.*s\n", (int)n, got, (int)want_n, want);
			abort();
		}
		free(want);
		free(got);
	}
	if (json_is_object(msg)) {
		struct json_id_finder f;
		const json_t *want = json_object_get(msg, "id");
		const char *found;
		json_id_finder_init(&f);
		json_id_finder_feed(&f, line, len);
		found = json_id_finder_result(&f);
		if (found) {
			json_t *got = json_loads(found, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
			if (!want || !got || !json_equal(got, want)) {
				fprintf(stderr, "id finder: found %s, the parser %s\n", found,
					want ? json_dumps(want, JSON_ENCODE_ANY) : "none");
				abort();
			}
			json_decref(got);
		} else if (json_is_integer(want) && !memchr(line, '\\', len)) {
			fprintf(stderr, "id finder: missed the integer id\n");
			abort();
		}
		jsonrpc_classify(msg, &m);
		if (m.kind == JSONRPC_REQUEST) {
			assert(m.method && jsonrpc_id_valid(m.id));
		}
		if (m.kind == JSONRPC_INVALID)
			assert(m.why && *m.why);
		if (m.id && jsonrpc_id_valid(m.id)) {
			json_t *reply = jsonrpc_error(m.id, JSONRPC_INVALID_REQUEST, "x", NULL);
			size_t n;
			char *text = jsonrpc_dump_line(reply, &n);
			json_t *back, *e2 = NULL;
			assert(text && n > 0 && text[n - 1] == '\n' && !memchr(text, '\n', n - 1));
			back = jsonrpc_parse(text, n - 1, &e2);
			assert(back && json_equal(json_object_get(back, "id"), m.id));
			json_decref(back);
			free(text);
			json_decref(reply);
		}
	}
	json_decref(msg);
}

static void on_line(void *ctx, const char *line, size_t len)
{
	struct seen *s = ctx;
	assert(len <= CAP);
	assert(!memchr(line, '\n', len));
	s->lines++;
	s->bytes += len;
	check_message(line, len);
}

static void on_oversized(void *ctx, size_t max, const char *id)
{
	struct seen *s = ctx;
	assert(max == CAP);
	assert(!id || strlen(id) < JSON_ID_MAX);
	s->oversized++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct line_reader_ops ops = { on_line, on_oversized };
	struct line_reader lr;
	struct seen s = { 0 };
	size_t half = size / 2;
	line_reader_init(&lr, CAP);
	/* in two pieces, as reads split a stream anywhere */
	line_reader_feed(&lr, (const char *)data, half, &ops, &s);
	line_reader_feed(&lr, (const char *)data + half, size - half, &ops, &s);
	assert(lr.len <= CAP);
	line_reader_free(&lr);
	assert(s.bytes <= size);
	return 0;
}
