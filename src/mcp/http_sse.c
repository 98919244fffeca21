/* pycell: MCP over HTTP: a request's answer, one JSON response or an SSE
 * stream that carries its notifications, in order, before it
 * (http_internal.h). */
#include "config.h"

#include <string.h>

#include "base/json_out.h"
#include "base/jsonrpc.h"
#include "mcp/http_internal.h"

/* The HTTP status of a JSON-RPC response, as Streamable HTTP asks. */
static int status_of(const struct hreq *r, const json_t *msg)
{
	json_t *err = json_object_get(msg, "error");
	json_int_t code;
	if (!err)
		return MHD_HTTP_OK;
	code = json_integer_value(json_object_get(err, "code"));
	switch (code) {
	case JSONRPC_PARSE_ERROR:
	case JSONRPC_INVALID_REQUEST:
	case MCP_HEADER_MISMATCH:
	case -32021:
	case -32022:
		return MHD_HTTP_BAD_REQUEST;
	case JSONRPC_METHOD_NOT_FOUND:
		/* 2026-07-28: an unknown method is 404 with -32601 */
		return r->ls ? MHD_HTTP_OK : MHD_HTTP_NOT_FOUND;
	case JSONRPC_INVALID_PARAMS:
		/* a stateless request without a version in its _meta is not a
		 * 2026 request: 4xx, so that a client may fall back to
		 * initialize; a 2026 request's bad params are its answer */
		return r->ls || r->modern ? MHD_HTTP_OK : MHD_HTTP_BAD_REQUEST;
	default:
		return MHD_HTTP_OK;
	}
}

static void sse_append(struct hreq *r, const json_t *msg)
{
	static const char head[] = "event: message\ndata: ";
	size_t n;
	cleanup_free char *text = json_out(msg, "\n\n", &n);
	if (!text)
		return;
	if (r->out_off == r->out_len) {
		r->out_off = r->out_len = 0;
	}
	r->out = xrealloc(r->out, r->out_len + sizeof(head) - 1 + n);
	memcpy(r->out + r->out_len, head, sizeof(head) - 1);
	memcpy(r->out + r->out_len + sizeof(head) - 1, text, n);
	r->out_len += sizeof(head) - 1 + n;
}

/* A message of the MCP layer for request r. */
void hreq_push(struct hreq *r, json_t *msg)
{
	bool response = !json_object_get(msg, "method");
	size_t n;
	if (r->state == HREQ_ANSWERED || r->gone)
		return;
	if (response) {
		r->state = HREQ_ANSWERED;
		r->status = status_of(r, msg);
		if (r->streaming)
			sse_append(r, msg);
		else
			r->final = json_out(msg, NULL, &n);
		if (r->is_initialize && r->ls && json_object_get(msg, "result"))
			r->ls->initialized = true;
	} else {
		/* notifications are only for a client that takes a stream;
		 * once it is queued, each goes on it (http_sse_reader) */
		if (!r->sse_ok || (r->queued && !r->streaming))
			return;
		r->streaming = true;
		sse_append(r, msg);
	}
	hreq_resume(r);
}

/* SSE: what is buffered, then the end once the response is in. */
ssize_t http_sse_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct hreq *r = cls;
	size_t n = r->out_len - r->out_off;
	(void)pos;
	if (r->gone)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	if (n) {
		if (n > max)
			n = max;
		memcpy(buf, r->out + r->out_off, n);
		r->out_off += n;
		return (ssize_t)n;
	}
	if (r->state == HREQ_ANSWERED)
		return MHD_CONTENT_READER_END_OF_STREAM;
	/* nothing yet: wait for the next message (hreq_push resumes) */
	r->suspended = true;
	mhd.suspend_connection(r->mhd);
	return 0;
}
