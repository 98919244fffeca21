/* pycell: MCP over Streamable HTTP on libmicrohttpd (transport_http.h);
 * its other rooms are named in http_internal.h.
 *
 * Ownership: a struct hconn per TCP/unix connection (MHD's socket
 * context), a struct hreq per HTTP request (MHD's con_cls), a struct
 * legacy_session per 2025 session (Mcp-Session-Id).  An hreq is freed only
 * by MHD's completion callback; everything that can end a request early
 * (the client gone, its session deleted) marks it and lets MHD finish it. */
#include "config.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/json_scan.h"
#include "base/json_out.h"
#include "base/jsonrpc.h"
#include "base/log.h"
#include "mcp/http_internal.h"

const char *const http_denial_names[HTTP_DENIALS] = {
	"unauthorized", "forbidden", "body_too_large", "quota", "server_full",
};

/* ------------------------------------------------------------ responses */

static enum MHD_Result queue(struct MHD_Connection *c, unsigned status, const char *ctype, const char *body,
			     const char *const *headers)
{
	struct MHD_Response *resp = mhd.create_response_from_buffer(body ? strlen(body) : 0,
								     (void *)(body ? body : ""), MHD_RESPMEM_MUST_COPY);
	enum MHD_Result ret;
	if (!resp)
		return MHD_NO;
	if (ctype)
		mhd.add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
	for (size_t i = 0; headers && headers[i]; i += 2)
		mhd.add_response_header(resp, headers[i], headers[i + 1]);
	ret = mhd.queue_response(c, status, resp);
	mhd.destroy_response(resp);
	return ret;
}

/* r's response, now: queued with MHD, and r marked so. */
static enum MHD_Result respond(struct hreq *r, unsigned status, const char *ctype, const char *body,
			       const char *const *headers)
{
	r->queued = true;
	return queue(r->mhd, status, ctype, body, headers);
}

/* An HTTP error whose body is a JSON-RPC error (with the id when known). */
enum MHD_Result http_fail(struct hreq *r, unsigned status, int code, const char *msg, const char *const *headers)
{
	json_t *e = jsonrpc_error(r->id, code, msg, NULL);
	cleanup_free char *text = json_dumps(e, JSON_COMPACT);
	int kind = status == MHD_HTTP_UNAUTHORIZED ? HTTP_DENIED_TOKEN
		: status == MHD_HTTP_FORBIDDEN ? HTTP_DENIED_FORBIDDEN
		: status == MHD_HTTP_CONTENT_TOO_LARGE ? HTTP_DENIED_TOO_LARGE
		: status == MHD_HTTP_TOO_MANY_REQUESTS ? HTTP_DENIED_QUOTA
		: status == MHD_HTTP_SERVICE_UNAVAILABLE ? HTTP_DENIED_FULL : -1;
	const char *clen = r->state == HREQ_HEAD ? http_header(r->mhd, MHD_HTTP_HEADER_CONTENT_LENGTH) : NULL;
	unsigned long long body = clen ? strtoull(clen, NULL, 10) : 0;
	json_decref(e);
	if (kind >= 0)
		r->h->stats.denied[kind]++;
	/* up to REFUSED_BODY_MAX: a client without a valid token gets no
	 * more of the server's reading than that */
	if (body > 0 && body <= REFUSED_BODY_MAX && body <= r->h->cfg.max_body && text) {
		r->state = HREQ_REFUSED;
		r->refused_status = status;
		r->refused_text = steal_ptr(&text);
		r->refused_headers = headers;   /* static arrays, all of them */
		return MHD_YES;
	}
	return respond(r, status, "application/json", text, headers);
}

/* ------------------------------------------------------------ operations */

void http_server_stats(const struct http_server *h, struct http_stats *st)
{
	*st = h->stats;
	st->connections = h->n_conns;
	st->sessions = h->n_sessions;
	st->pending = h->n_pending;
}

static const struct http_route *route_of(const struct http_server *h, const char *url)
{
	for (size_t i = 0; i < h->cfg.n_routes; i++)
		if (strcmp(url, h->cfg.routes[i].path) == 0)
			return &h->cfg.routes[i];
	return NULL;
}

/* An operator endpoint: GET (or HEAD) only. */
static enum MHD_Result on_route(struct hreq *r, const struct http_route *rt, const char *method)
{
	static const char *const allow[] = { MHD_HTTP_HEADER_ALLOW, "GET, HEAD", NULL };
	cleanup_free char *body = NULL;
	unsigned status;

	if (rt->authenticated && (http_check_origin(r) < 0 || http_authenticate(r) < 0))
		return MHD_YES;
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return respond(r, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain; charset=utf-8",
			       "Method Not Allowed: GET\n", allow);
	status = rt->answer(r->h->cfg.ctx, &body);
	return respond(r, status, rt->content_type, body ? body : "", NULL);
}

/* ------------------------------------------------------------ requests */

/* The request will not be answered: stop its work.  Idempotent. */
static void hreq_abandon(struct hreq *r)
{
	if (r->gone)
		return;
	r->gone = true;
	if (r->state != HREQ_WORKING)
		return;
	if (r->mcp) {
		/* a stateless request's own session: ending it kills its run */
		mcp_conn_free(r->mcp);
		r->mcp = NULL;
	} else if (r->ls && r->id) {
		json_t *n = jsonrpc_notification("notifications/cancelled",
						 json_pack("{s:O,s:s}", "requestId", r->id, "reason",
							   "the HTTP client closed the connection"));
		mcp_conn_handle_message(r->ls->mcp, n);
		json_decref(n);
	}
	log_debug("serve: %s left before its answer: cancelled", http_client_name(r->who));
}

/* Have timer_fd fire at monotonic time `at` (ms) unless it fires sooner
 * already: an early wake-up only runs MHD once more, and MHD's timeout
 * moves at every request, so most calls here change nothing. */
static void timer_by(struct http_server *h, uint64_t at)
{
	struct itimerspec t = { { 0, 0 }, { (time_t)(at / 1000), (long)(at % 1000) * 1000000L } };
	if (h->timer_at && h->timer_at <= at)
		return;
	if (at == 0)
		t.it_value.tv_nsec = 1;   /* long past, but not "disarm" */
	h->timer_at = at ? at : 1;
	timerfd_settime(h->timer_fd, TFD_TIMER_ABSTIME, &t, NULL);
}

void hreq_resume(struct hreq *r)
{
	if (!r->suspended)
		return;
	r->suspended = false;
	mhd.resume_connection(r->mhd);
	/* In external polling mode MHD hears of a resumed connection only at
	 * its next MHD_run (its wake-up does not reach this loop): now. */
	timer_by(r->h, 0);
}

static void run_mhd(struct http_server *h);

/* The peer stopped sending.  A request being answered: the client left
 * (Streamable HTTP's cancellation), its run is stopped.  One being
 * received: it will never be whole, the connection is cut (libmicrohttpd
 * may not notice the end of input while it waits for a body).  MHD
 * hears nothing while a connection is suspended: this watch is how a
 * waiting request learns its client is gone. */
static void on_conn_hup(struct loop_watch *w, uint32_t events, void *data)
{
	struct hconn *hc = data;
	(void)events;
	loop_del(hc->h->loop, w);
	if (hc->req && hc->req->state >= HREQ_WORKING) {
		hreq_abandon(hc->req);
		hreq_resume(hc->req);
	} else if (!hc->cut) {
		hc->cut = true;
		shutdown(hc->fd, SHUT_RDWR);
	}
	run_mhd(hc->h);
}

static void hreq_free(struct hreq *r)
{
	struct http_server *h = r->h;
	if (r->state >= HREQ_WORKING)
		h->n_pending--;
	legacy_unlink(r);
	mcp_conn_free(r->mcp);
	json_decref(r->id);
	free(r->body);
	free(r->final);
	free(r->out);
	free(r->refused_text);
	free(r);
}

/* ------------------------------------------------------------ limits and tokens in force */

static void stateless_send(void *ctx, json_t *msg, const json_t *related)
{
	(void)related;
	hreq_push(ctx, msg);
}

void http_server_set_limits(struct http_server *h, const struct http_config *cfg)
{
	h->cfg.allow_hosts = cfg->allow_hosts;
	h->cfg.n_allow_hosts = cfg->n_allow_hosts;
	h->cfg.max_body = cfg->max_body;
	h->cfg.max_sessions = cfg->max_sessions;
	h->cfg.session_idle_ms = cfg->session_idle_ms;
	legacy_expire(h);
}

void http_server_set_tokens(struct http_server *h, const struct tokens *t)
{
	h->cfg.tokens = t;
	for (struct legacy_session *ls = h->sessions; ls; ls = ls->next) {
		bool kept = !ls->who->name;
		for (size_t i = 0; t && !kept && i < t->n; i++)
			kept = strcmp(t->v[i].name, ls->who->name) == 0;
		ls->revoked |= !kept;
	}
	legacy_expire(h);
}

static bool is_tool_run(const json_t *msg)
{
	return json_str_eq(json_object_get(msg, "method"), "tools/call");
}

/* ------------------------------------------------------------ dispatch */

/* Valid JSON that jansson refuses for its numbers (json_scan.h): read
 * with those numbers as 0, to route it; the MCP layer gets the text as
 * sent and says what it makes of them. */
static json_t *parse_wide(const char *text, size_t len)
{
	struct json_scan sc;
	cleanup_free char *copy = NULL;
	json_t *unused = NULL, *msg;
	if (!text || json_scan(text, len, &sc) < 0 || sc.n_wide == 0 || sc.n_wide > JSON_SCAN_MAX_WIDE)
		return NULL;
	copy = json_scan_narrowed(text, len, &sc);
	msg = jsonrpc_parse(copy, len, &unused);
	json_decref(unused);
	return msg;
}

/* The whole body is in: route it.  Returns with a response queued, or
 * with the request handed to the MCP layer (HREQ_WORKING). */
static enum MHD_Result process(struct hreq *r)
{
	struct http_server *h = r->h;
	const char *sid = http_header(r->mhd, HDR_SESSION);
	const char *accept = http_header(r->mhd, MHD_HTTP_HEADER_ACCEPT);
	json_t *unused = NULL;
	cleanup_json json_t *msg = NULL;
	bool request;

	if (r->too_large)
		return http_fail(r, MHD_HTTP_CONTENT_TOO_LARGE, JSONRPC_INVALID_REQUEST,
			    "Invalid Request: the body is too large", NULL);
	r->sse_ok = accept && strstr(accept, "text/event-stream");
	msg = jsonrpc_parse(r->body ? r->body : "", r->body_len, &unused);
	json_decref(unused);
	if (!msg && !(msg = parse_wide(r->body, r->body_len)))
		return http_fail(r, MHD_HTTP_BAD_REQUEST, JSONRPC_PARSE_ERROR, "Parse error: the body is not valid JSON",
			    NULL);
	if (json_is_array(msg))
		return http_fail(r, MHD_HTTP_BAD_REQUEST, JSONRPC_INVALID_REQUEST,
			    "Invalid Request: JSON-RPC batches are not taken over HTTP; send one message per POST", NULL);
	request = json_is_object(msg) && json_object_get(msg, "method") && json_object_get(msg, "id");
	if (request && jsonrpc_id_valid(json_object_get(msg, "id")))
		r->id = json_incref(json_object_get(msg, "id"));
	r->is_initialize = request && json_str_eq(json_object_get(msg, "method"), "initialize");

	if (sid) {
		/* a 2025 session's request */
		struct legacy_session *ls = legacy_find(h, sid);
		const char *hv = http_header(r->mhd, HDR_VERSION);
		if (!ls || ls->who != r->who)
			return http_fail(r, MHD_HTTP_NOT_FOUND, JSONRPC_INVALID_REQUEST, "Not Found: no such session "
				    "(it ended, or was never made); initialize again", NULL);
		if (hv) {
			bool known = false;
			for (int i = 0; mcp_protocol_versions[i]; i++)
				known |= strcmp(hv, mcp_protocol_versions[i]) == 0 && strcmp(hv, MCP_MODERN_PROTOCOL);
			if (!known)
				return http_fail(r, MHD_HTTP_BAD_REQUEST, JSONRPC_INVALID_REQUEST, "Bad Request: unsupported "
					    HDR_VERSION " for a session", NULL);
		}
		/* its answer is routed by id: a request without a valid one
		 * could not be answered */
		if (request && !r->id)
			return http_fail(r, MHD_HTTP_BAD_REQUEST, JSONRPC_INVALID_REQUEST, "Invalid Request: the id must be "
				    "a string or a number", NULL);
		for (struct hreq *o = ls->reqs; r->id && o; o = o->next)
			if (o->id && json_equal(o->id, r->id))
				return http_fail(r, MHD_HTTP_BAD_REQUEST, JSONRPC_INVALID_REQUEST, "Invalid Request: this id "
					    "belongs to a request still in progress", NULL);
		r->ls = ls;
		ls->last_used = now_ms();
	} else if (r->is_initialize) {
		legacy_expire(h);
		if (h->n_sessions >= h->cfg.max_sessions) {
			static const char *const retry[] = { MHD_HTTP_HEADER_RETRY_AFTER, "5", NULL };
			return http_fail(r, MHD_HTTP_SERVICE_UNAVAILABLE, ERR_FULL, "Service Unavailable: too many sessions; "
				    "try again later", retry);
		}
		r->ls = legacy_new(h, r->srv, r->who);
		r->new_legacy = r->ls != NULL;
		if (!r->ls)
			return http_fail(r, MHD_HTTP_INTERNAL_SERVER_ERROR, JSONRPC_INTERNAL_ERROR,
				    "Internal error: no session id", NULL);
	} else if (request && json_object_get(json_object_get(json_object_get(msg, "params"), "_meta"), META_VERSION)) {
		r->modern = true;
		if (http_check_mirrored_headers(r, msg) < 0)
			return MHD_YES;
	}

	if (!request) {
		/* a notification or a response: taken, nothing comes back */
		if (!json_is_object(msg) || (!json_object_get(msg, "method") && !json_object_get(msg, "id")))
			return http_fail(r, MHD_HTTP_BAD_REQUEST, JSONRPC_INVALID_REQUEST, "Invalid Request: neither a "
				    "request, a notification nor a response", NULL);
		if (json_object_get(msg, "method") && json_object_get(msg, "id"))
			return http_fail(r, MHD_HTTP_BAD_REQUEST, JSONRPC_INVALID_REQUEST, "Invalid Request: the id must be "
				    "a string or an integer", NULL);
		if (r->ls)
			mcp_conn_handle_text(r->ls->mcp, r->body, r->body_len);
		return respond(r, MHD_HTTP_ACCEPTED, NULL, NULL, NULL);
	}

	if (h->n_pending >= h->cfg.max_pending) {
		static const char *const retry[] = { MHD_HTTP_HEADER_RETRY_AFTER, "1", NULL };
		return http_fail(r, MHD_HTTP_SERVICE_UNAVAILABLE, ERR_FULL, "Service Unavailable: the server is full; try "
			    "again later", retry);
	}
	if (is_tool_run(msg)) {
		/* the request becomes a call at once (mcp_conn_handle_text
		 * below), so the calls already made are all there is to count */
		if (r->max_runs && r->who->name && mcp_server_runs_of(r->srv, r->who->name) >= r->max_runs) {
			static const char *const retry[] = { MHD_HTTP_HEADER_RETRY_AFTER, "1", NULL };
			return http_fail(r, MHD_HTTP_TOO_MANY_REQUESTS, ERR_QUOTA, "Too Many Requests: this token's runs are "
				    "all in use; try again when one ends", retry);
		}
	}
	h->n_pending++;
	r->state = HREQ_WORKING;
	if (r->ls) {
		r->next = r->ls->reqs;
		if (r->next)
			r->next->prev = r;
		r->ls->reqs = r;
		mcp_conn_handle_text(r->ls->mcp, r->body, r->body_len);
	} else {
		static const struct mcp_conn_ops ops = { .send = stateless_send };
		r->mcp = mcp_conn_new(r->srv, &ops, r);
		mcp_conn_set_principal(r->mcp, r->who->name);
		mcp_conn_handle_text(r->mcp, r->body, r->body_len);
	}
	return MHD_YES;
}

/* Queue what r has to say now, or wait for it. */
static enum MHD_Result answer(struct hreq *r)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;

	if (r->gone && !r->queued) {
		return respond(r, MHD_HTTP_NO_CONTENT, NULL, NULL, NULL);
	}
	if (r->streaming) {
		resp = mhd.create_response_from_callback(MHD_SIZE_UNKNOWN, SSE_BLOCK, http_sse_reader, r, NULL);
		if (!resp)
			return MHD_NO;
		mhd.add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
		mhd.add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
		mhd.add_response_header(resp, "X-Accel-Buffering", "no");
		if (r->is_initialize && r->ls && r->ls->initialized)
			mhd.add_response_header(resp, HDR_SESSION, r->ls->id);
		r->queued = true;
		ret = mhd.queue_response(r->mhd, MHD_HTTP_OK, resp);
		mhd.destroy_response(resp);
		return ret;
	}
	if (r->state == HREQ_ANSWERED) {
		const char *sess[] = { HDR_SESSION, r->ls ? r->ls->id : "", NULL };
		return respond(r, (unsigned)r->status, "application/json", r->final,
			       r->is_initialize && r->ls && r->ls->initialized ? sess : NULL);
	}
	/* answered later: wait (on_conn_hup hears the client leave) */
	r->suspended = true;
	mhd.suspend_connection(r->mhd);
	return MHD_YES;
}

static enum MHD_Result on_delete(struct hreq *r)
{
	const char *sid = http_header(r->mhd, HDR_SESSION);
	struct legacy_session *ls = sid ? legacy_find(r->h, sid) : NULL;
	static const char *const allow[] = { MHD_HTTP_HEADER_ALLOW, "POST", NULL };
	if (!sid)
		return http_fail(r, MHD_HTTP_METHOD_NOT_ALLOWED, JSONRPC_INVALID_REQUEST, "Method Not Allowed: DELETE "
			    "ends a 2025 session named by " HDR_SESSION, allow);
	if (!ls || ls->who != r->who)
		return http_fail(r, MHD_HTTP_NOT_FOUND, JSONRPC_INVALID_REQUEST, "Not Found: no such session", NULL);
	log_info("serve: session of %s ended by the client", http_client_name(ls->who));
	legacy_free(ls);
	return respond(r, MHD_HTTP_OK, NULL, NULL, NULL);
}

static struct hconn *conn_of(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci = mhd.get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return ci ? ci->socket_context : NULL;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
				  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
	struct http_server *h = cls;
	struct hreq *r = *con_cls;
	(void)version;

	if (!r) {
		const struct http_route *rt;
		const char *clen;
		r = xcalloc(1, sizeof(*r));
		r->h = h;
		r->mhd = c;
		r->hc = conn_of(c);
		*con_cls = r;
		if (!r->hc)
			return MHD_NO;
		r->hc->req = r;
		h->stats.requests++;
		r->state = HREQ_HEAD;
		if ((rt = route_of(h, url)))
			return on_route(r, rt, method);
		if (strcmp(url, ENDPOINT) != 0)
			return http_fail(r, MHD_HTTP_NOT_FOUND, JSONRPC_INVALID_REQUEST, "Not Found: the MCP endpoint is "
				    ENDPOINT, NULL);
		if (http_check_origin(r) < 0 || http_authenticate(r) < 0)
			return MHD_YES;
		r->hc->proven = true;
		if (h->quiesced) {
			static const char *const closing[] = { MHD_HTTP_HEADER_CONNECTION, "close", NULL };
			return http_fail(r, MHD_HTTP_SERVICE_UNAVAILABLE, ERR_FULL, "Service Unavailable: the server is "
				    "stopping; try another", closing);
		}
		if (strcmp(method, MHD_HTTP_METHOD_DELETE) == 0)
			return on_delete(r);
		if (strcmp(method, MHD_HTTP_METHOD_POST) != 0) {
			/* no standalone stream: a 2025 client may go without it */
			static const char *const allow[] = { MHD_HTTP_HEADER_ALLOW, "POST, DELETE", NULL };
			return http_fail(r, MHD_HTTP_METHOD_NOT_ALLOWED, JSONRPC_INVALID_REQUEST, "Method Not Allowed: POST "
				    "one JSON-RPC message", allow);
		}
		clen = http_header(c, MHD_HTTP_HEADER_CONTENT_LENGTH);
		if (clen && strtoull(clen, NULL, 10) > h->cfg.max_body)
			return http_fail(r, MHD_HTTP_CONTENT_TOO_LARGE, JSONRPC_INVALID_REQUEST,
				    "Invalid Request: the body is too large", NULL);
		return MHD_YES;
	}
	if (r->state == HREQ_HEAD)
		r->state = HREQ_BODY;
	if (r->state == HREQ_REFUSED && !r->queued) {
		if (*upload_size) {
			*upload_size = 0;   /* read and dropped */
			return MHD_YES;
		}
		return respond(r, r->refused_status, "application/json", r->refused_text, r->refused_headers);
	}
	if (r->queued)
		return MHD_YES;   /* the rest of a refused body */
	if (*upload_size) {
		if (!r->too_large && r->body_len + *upload_size <= r->h->cfg.max_body) {
			r->body = xrealloc(r->body, r->body_len + *upload_size + 1);
			memcpy(r->body + r->body_len, upload, *upload_size);
			r->body_len += *upload_size;
			r->body[r->body_len] = '\0';
		} else {
			r->too_large = true;
		}
		*upload_size = 0;
		return MHD_YES;
	}
	if (r->state == HREQ_BODY) {
		enum MHD_Result ret;
		r->hc->state = CONN_ANSWERING;
		ret = process(r);
		if (r->queued || ret == MHD_NO)
			return ret;
	}
	return answer(r);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
	struct hreq *r = *con_cls;
	struct hconn *hc = conn_of(c);
	(void)cls;
	if (hc) {
		hc->state = CONN_RECEIVING;
		hc->t_start = now_ms();
		hc->graced = false;
		hc->req = NULL;
	}
	if (!r)
		return;
	if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK || r->state != HREQ_ANSWERED)
		hreq_abandon(r);
	/* an initialize that did not succeed leaves no session behind */
	if (r->new_legacy && r->ls && !r->ls->initialized)
		legacy_free(r->ls);
	hreq_free(r);
	*con_cls = NULL;
}

static void peer_key_of(struct MHD_Connection *c, struct hconn *hc)
{
	const union MHD_ConnectionInfo *ci = mhd.get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = ci ? ci->client_addr : NULL;
	memset(&hc->peer, 0, sizeof(hc->peer));
	if (sa && sa->sa_family == AF_INET) {
		hc->peer.family = AF_INET;
		memcpy(hc->peer.addr, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
	} else if (sa && sa->sa_family == AF_INET6) {
		hc->peer.family = AF_INET6;
		memcpy(hc->peer.addr, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
	} else if (hc->peer_known) {
		hc->peer.family = AF_UNIX;
		memcpy(hc->peer.addr, &hc->peer_uid, sizeof(hc->peer_uid));
	}
}

static bool unproven(const struct hconn *hc)
{
	return !hc->proven && !hc->cut && hc->fd >= 0;
}

static void cut(struct hconn *hc, const char *why)
{
	log_debug("serve: a connection cut: %s", why);
	hc->cut = true;
	shutdown(hc->fd, SHUT_RDWR);
}

/* Before hc (new, not yet listed) joins: the unproven connections of its
 * address, and all of them, within their bounds, the oldest cut. */
static void make_room(struct http_server *h, struct hconn *hc)
{
	unsigned mine = 0, all = 0;
	struct hconn *oldest_mine = NULL, *oldest = NULL;
	for (struct hconn *o = h->conns; o; o = o->next) {
		if (!unproven(o))
			continue;
		all++;
		if (!oldest || o->t_connect <= oldest->t_connect)
			oldest = o;
		if (memcmp(&o->peer, &hc->peer, sizeof(o->peer)) == 0) {
			mine++;
			if (!oldest_mine || o->t_connect <= oldest_mine->t_connect)
				oldest_mine = o;
		}
	}
	if (mine >= UNPROVEN_PER_ADDR) {
		cut(oldest_mine, "no whole authenticated request yet, and its address has too many such");
		if (oldest == oldest_mine)
			oldest = NULL;
		all--;
	}
	if (oldest && all >= UNPROVEN_SHARE(h->cfg.max_connections))
		cut(oldest, "no whole authenticated request yet, and too many such in all");
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	struct http_server *h = cls;
	struct hconn *hc = *socket_context;
	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci = mhd.get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
		hc = xcalloc(1, sizeof(*hc));
		hc->h = h;
		hc->fd = ci ? ci->connect_fd : -1;
		hc->t_start = now_ms();
		h->stats.last_connection_ms = hc->t_start;
		if (h->is_unix && hc->fd >= 0) {
			struct ucred cred;
			socklen_t len = sizeof(cred);
			if (getsockopt(hc->fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
				hc->peer_known = true;
				hc->peer_uid = cred.uid;
			}
		}
		hc->t_connect = hc->t_start;
		peer_key_of(c, hc);
		make_room(h, hc);
		hc->next = h->conns;
		if (hc->next)
			hc->next->prev = hc;
		h->conns = hc;
		h->n_conns++;
		*socket_context = hc;
		if (hc->fd >= 0)
			loop_add(h->loop, &hc->w_hup, hc->fd, EPOLLRDHUP, on_conn_hup, hc);
		return;
	}
	if (!hc)
		return;
	if (hc->w_hup.registered)
		loop_del(h->loop, &hc->w_hup);
	if (hc->prev)
		hc->prev->next = hc->next;
	else
		h->conns = hc->next;
	if (hc->next)
		hc->next->prev = hc->prev;
	h->n_conns--;
	free(hc);
	*socket_context = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char buf[512];
	size_t n;
	(void)cls;
	vsnprintf(buf, sizeof(buf), fmt, ap);
	n = strlen(buf);
	while (n && buf[n - 1] == '\n')
		buf[--n] = '\0';
	log_debug("serve: libmicrohttpd: %s", buf);
}

/* ------------------------------------------------------------ the loop */

/* MHD's next timeout, if any: timer_fd fires by then (a wake-up with no
 * timeout due is harmless, so a timer armed earlier stays). */
static void arm_timer(struct http_server *h)
{
	MHD_UNSIGNED_LONG_LONG ms = 0;
	if (mhd.get_timeout(h->d, &ms) == MHD_YES)
		timer_by(h, now_ms() + (ms ? ms : 1));
}

static void run_mhd(struct http_server *h)
{
	mhd.run(h->d);
	arm_timer(h);
}

static void on_mhd(struct loop_watch *w, uint32_t events, void *data)
{
	(void)w;
	(void)events;
	run_mhd(data);
}

static void on_timer(struct loop_watch *w, uint32_t events, void *data)
{
	struct http_server *h = data;
	uint64_t n;
	(void)!read(h->timer_fd, &n, sizeof(n));
	h->timer_at = 0;
	(void)w;
	(void)events;
	run_mhd(h);
}

/* Bytes waiting in hc's socket, unread: a request that came in the same
 * wakeup as this tick, as its connection's idle time ran out (a busy
 * loop meets both at once).  Cut, its client could not tell whether it
 * ran: its time starts now instead, once a request (a slow client gets
 * one limit more at most). */
static bool arriving(struct hconn *hc)
{
	int n = 0;
	if (hc->graced || ioctl(hc->fd, FIONREAD, &n) < 0 || n <= 0)
		return false;
	hc->graced = true;
	return true;
}

/* Once a second: a connection that has not sent its whole request within
 * the limit is cut (a slow client cannot hold a slot; a kept-alive one
 * idle that long is closed), and idle sessions end. */
static void on_tick(struct loop_watch *w, uint32_t events, void *data)
{
	struct http_server *h = data;
	uint64_t n, now = now_ms(), limit = (uint64_t)h->cfg.request_timeout_s * 1000;
	(void)!read(h->tick_fd, &n, sizeof(n));
	(void)w;
	(void)events;
	for (struct hconn *hc = h->conns; hc; hc = hc->next) {
		if (hc->state != CONN_RECEIVING || hc->cut || hc->fd < 0)
			continue;
		if (now - hc->t_start > limit) {
			if (arriving(hc))
				hc->t_start = now;
			else
				cut(hc, "no whole request within the request timeout");
		} else if (!hc->proven && now - hc->t_connect > (limit < UNPROVEN_MS ? limit : UNPROVEN_MS))
			cut(hc, "no whole authenticated request within its first seconds");
	}
	legacy_expire(h);
	run_mhd(h);
}

struct http_server *http_server_new(struct loop *l, const struct http_config *cfg, struct pc_err *err)
{
	struct http_server *h = xcalloc(1, sizeof(*h));
	const union MHD_DaemonInfo *di;
	struct itimerspec sec = { { 1, 0 }, { 1, 0 } };

	h->loop = l;
	h->cfg = *cfg;
	h->listen_fd = h->timer_fd = h->tick_fd = -1;
	if (http_mhd_open(err) < 0)
		goto fail;
	if (cfg->listen_fd > 0) {
		h->listen_fd = cfg->listen_fd;
		if (http_adopt(h, cfg->listen_fd, "the socket systemd passed", err) < 0)
			goto fail;
	} else if (http_listen_on(h, cfg->listen, err) < 0) {
		goto fail;
	}
	/* Its own timeout (a connection without traffic) past ours: on_tick
	 * closes idle and slow ones first, and spares a request that meets
	 * the tick (arriving), which libmicrohttpd would close unread; its
	 * own is left for a client that does not read its answer. */
	h->d = mhd.start_daemon(MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG, 0, NULL, NULL,
				on_request, h,
				MHD_OPTION_EXTERNAL_LOGGER, mhd_log, h,
				MHD_OPTION_LISTEN_SOCKET, h->listen_fd,
				MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
				MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
				MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->max_connections,
				MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->request_timeout_s + 2,
				MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HEADER_MEMORY,
				MHD_OPTION_END);
	if (!h->d) {
		pc_fail(err, EIO, "serve", "libmicrohttpd would not start on %s", cfg->listen);
		goto fail;
	}
	di = mhd.get_daemon_info(h->d, MHD_DAEMON_INFO_EPOLL_FD);
	h->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	h->tick_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (!di || h->timer_fd < 0 || h->tick_fd < 0 ||
	    loop_add(l, &h->w_mhd, di->epoll_fd, EPOLLIN, on_mhd, h) < 0 ||
	    loop_add(l, &h->w_timer, h->timer_fd, EPOLLIN, on_timer, h) < 0 ||
	    loop_add(l, &h->w_tick, h->tick_fd, EPOLLIN, on_tick, h) < 0) {
		pc_syserr(err, "serve", "event loop");
		goto fail;
	}
	timerfd_settime(h->tick_fd, 0, &sec, NULL);
	arm_timer(h);
	return h;
fail:
	http_server_free(h);
	return NULL;
}

void http_server_quiesce(struct http_server *h)
{
	h->quiesced = true;
}

void http_server_flush(struct http_server *h)
{
	run_mhd(h);
}

const char *http_server_url(const struct http_server *h)
{
	return h->url;
}

void http_server_free(struct http_server *h)
{
	if (!h)
		return;
	while (h->sessions)
		legacy_free(h->sessions);
	if (h->d) {
		/* MHD must not be stopped with a connection suspended: every
		 * request is abandoned (its run killed) and resumed */
		for (struct hconn *hc = h->conns; hc; hc = hc->next) {
			if (hc->req) {
				hreq_abandon(hc->req);
				hreq_resume(hc->req);
			}
			if (hc->fd >= 0)
				shutdown(hc->fd, SHUT_RDWR);
		}
		for (int round = 0; round < 3; round++)
			mhd.run(h->d);
		mhd.stop_daemon(h->d);
	}
	if (h->w_mhd.registered)
		loop_del(h->loop, &h->w_mhd);
	if (h->w_timer.registered)
		loop_del(h->loop, &h->w_timer);
	if (h->w_tick.registered)
		loop_del(h->loop, &h->w_tick);
	if (h->timer_fd >= 0)
		close(h->timer_fd);
	if (h->tick_fd >= 0)
		close(h->tick_fd);
	if (h->listen_fd >= 0)
		close(h->listen_fd);
	if (h->unix_path)
		unlink(h->unix_path);
	free(h->unix_path);
	free(h->url);
	free(h->listen_host);
	for (struct client *c = h->clients, *next; c; c = next) {
		next = c->next;
		free(c->name);
		free(c);
	}
	free(h);
}
