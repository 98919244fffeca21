/* pycell: MCP over HTTP: who may ask, and from where (http_internal.h):
 * Host and Origin, tokens and the clients they name, the Mcp-* headers
 * a 2026-07-28 request mirrors from its body. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/jsonrpc.h"
#include "base/log.h"
#include "mcp/http_internal.h"

const char *http_header(struct MHD_Connection *c, const char *name)
{
	return mhd.lookup_connection_value(c, MHD_HEADER_KIND, name);
}

static bool is_loopback_name(const char *host, size_t len)
{
	return (len == 9 && strncasecmp(host, "localhost", 9) == 0) || (len == 9 && !strncmp(host, "127.0.0.1", 9)) ||
	       (len == 5 && !strncmp(host, "[::1]", 5));
}

/* The host part of a Host header value ("name", "name:port", "[v6]:port"). */
static size_t host_part(const char *v)
{
	const char *colon;
	if (v[0] == '[') {
		const char *end = strchr(v, ']');
		return end ? (size_t)(end - v) + 1 : strlen(v);
	}
	colon = strrchr(v, ':');
	return colon ? (size_t)(colon - v) : strlen(v);
}

static bool host_allowed(const struct http_server *h, const char *host, size_t len)
{
	if (is_loopback_name(host, len))
		return true;
	if (h->listen_host && strlen(h->listen_host) == len && strncasecmp(h->listen_host, host, len) == 0)
		return true;
	for (size_t i = 0; i < h->cfg.n_allow_hosts; i++)
		if (strlen(h->cfg.allow_hosts[i]) == len && strncasecmp(h->cfg.allow_hosts[i], host, len) == 0)
			return true;
	return false;
}

/* An Origin such as "http://localhost:3000": its host must be allowed. */
static bool origin_allowed(const struct http_server *h, const char *origin)
{
	const char *p = strstr(origin, "://");
	const char *end;
	if (!p)
		return false;
	p += 3;
	end = p + strcspn(p, "/");
	return host_allowed(h, p, host_part(p) < (size_t)(end - p) ? host_part(p) : (size_t)(end - p));
}

/* An Mcp-Name value as the body would have it: "=?base64?...?=" decoded. */
static char *header_value(const char *v, size_t *len)
{
	size_t n = strlen(v);
	if (n >= 11 && strncmp(v, "=?base64?", 9) == 0 && strcmp(v + n - 2, "?=") == 0)
		return b64_decode(v + 9, n - 11, len);
	*len = n;
	return xstrdup(v);
}

const char *http_client_name(const struct client *c)
{
	return c && c->name ? c->name : "a client";
}

static struct client *client_of(struct http_server *h, const struct token *t)
{
	struct client *c;
	if (!t)
		return &h->anonymous;
	for (c = h->clients; c; c = c->next)
		if (strcmp(c->name, t->name) == 0)
			return c;
	c = xcalloc(1, sizeof(*c));
	c->name = xstrdup(t->name);
	c->next = h->clients;
	h->clients = c;
	return c;
}

/* Who is asking, by the token file now in force: 0 with r->who, its
 * quota and its policy's server set (no token needed: the anonymous
 * client), or -1 with the status queued. */
static int admit(struct hreq *r, const struct token *t)
{
	r->who = client_of(r->h, t);
	r->max_runs = t ? t->max_runs : 0;
	r->srv = r->h->cfg.server_for(r->h->cfg.ctx, t);
	return 0;
}

int http_authenticate(struct hreq *r)
{
	struct http_server *h = r->h;
	const char *auth = http_header(r->mhd, MHD_HTTP_HEADER_AUTHORIZATION);
	const struct token *t;
	static const char *const need[] = { MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"pycell\"", NULL };
	static const char *const bad[] = { MHD_HTTP_HEADER_WWW_AUTHENTICATE,
					   "Bearer realm=\"pycell\", error=\"invalid_token\"", NULL };

	if (r->h->is_unix && r->hc->peer_known) {
		bool self = r->hc->peer_uid == geteuid() || r->hc->peer_uid == 0;
		if (h->cfg.tokens && (t = tokens_find_uid(h->cfg.tokens, r->hc->peer_uid)))
			return admit(r, t);
		/* this user and root need no token (a bearer they send is checked) */
		if (self && (!auth || !h->cfg.tokens))
			return admit(r, NULL);
		if (!h->cfg.tokens) {
			http_fail(r, MHD_HTTP_FORBIDDEN, JSONRPC_INVALID_REQUEST, "Forbidden: this socket serves its own "
			     "user and root only", NULL);
			return -1;
		}
	}
	if (!h->cfg.tokens)
		return admit(r, NULL);
	if (!auth) {
		http_fail(r, MHD_HTTP_UNAUTHORIZED, JSONRPC_INVALID_REQUEST, "Unauthorized: send Authorization: Bearer "
		     "TOKEN", need);
		return -1;
	}
	if (strncasecmp(auth, "Bearer ", 7) != 0 ||
	    !(t = tokens_find_bearer(h->cfg.tokens, auth + 7, strlen(auth + 7)))) {
		http_fail(r, MHD_HTTP_UNAUTHORIZED, JSONRPC_INVALID_REQUEST, "Unauthorized: the token is not valid", bad);
		return -1;
	}
	return admit(r, t);
}

/* Host and Origin: against DNS rebinding, a page of another site that
 * reaches this server through a name it controls is refused. */
int http_check_origin(struct hreq *r)
{
	const char *host = http_header(r->mhd, MHD_HTTP_HEADER_HOST);
	const char *origin = http_header(r->mhd, MHD_HTTP_HEADER_ORIGIN);
	if (r->h->is_unix && !origin)
		return 0;
	if ((host && !host_allowed(r->h, host, host_part(host))) || (origin && !origin_allowed(r->h, origin))) {
		log_warn("serve: refused a request with Host %s, Origin %s", host ? host : "-", origin ? origin : "-");
		http_fail(r, MHD_HTTP_FORBIDDEN, JSONRPC_INVALID_REQUEST, "Forbidden: Host or Origin not allowed", NULL);
		return -1;
	}
	return 0;
}

static char *param_header(void *ctx, const char *name, size_t *len)
{
	struct hreq *r = ctx;
	char full[96];
	const char *v;
	snprintf(full, sizeof(full), "Mcp-Param-%s", name);
	v = http_header(r->mhd, full);
	return v ? header_value(v, len) : NULL;
}

/* 2026-07-28: the headers say what the body says. */
int http_check_mirrored_headers(struct hreq *r, const json_t *msg)
{
	const char *method = json_string_value(json_object_get(msg, "method"));
	json_t *params = json_object_get(msg, "params");
	const char *hv = http_header(r->mhd, HDR_VERSION), *hm = http_header(r->mhd, HDR_METHOD);
	const char *hn = http_header(r->mhd, HDR_NAME);
	json_t *name = NULL;
	char why[160];

	if (!hv) {
		snprintf(why, sizeof(why), "Header mismatch: %s is missing", HDR_VERSION);
		goto bad;
	}
	if (!json_str_eq(json_object_get(json_object_get(params, "_meta"), META_VERSION), hv)) {
		snprintf(why, sizeof(why), "Header mismatch: %s %.40s is not the body's %s", HDR_VERSION, hv,
			 META_VERSION);
		goto bad;
	}
	if (!hm || !method || strcmp(hm, method) != 0) {
		snprintf(why, sizeof(why), "Header mismatch: %s %.60s does not match the body's method", HDR_METHOD,
			 hm ? hm : "is missing and");
		goto bad;
	}
	if (!strcmp(method, "tools/call") || !strcmp(method, "prompts/get"))
		name = json_object_get(params, "name");
	else if (!strcmp(method, "resources/read"))
		name = json_object_get(params, "uri");
	else if (!strncmp(method, "tasks/", 6))
		name = json_object_get(params, "taskId");   /* routes a task to the server that holds it */
	if (name) {
		size_t len;
		cleanup_free char *v = hn ? header_value(hn, &len) : NULL;
		if (!v || !json_is_string(name) || json_string_length(name) != len ||
		    memcmp(json_string_value(name), v, len) != 0) {
			snprintf(why, sizeof(why), "Header mismatch: %s %s the body's name", HDR_NAME,
				 hn ? "does not match" : "is missing; it carries");
			goto bad;
		}
	}
	if (!strcmp(method, "tools/call") && r->srv &&
	    mcp_check_param_headers(r->srv, params, param_header, r, why, sizeof(why)) < 0)
		goto bad;
	return 0;
bad:
	http_fail(r, MHD_HTTP_BAD_REQUEST, MCP_HEADER_MISMATCH, why, NULL);
	return -1;
}
