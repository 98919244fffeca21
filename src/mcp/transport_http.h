/* pycell: MCP over Streamable HTTP (`pycell serve`): one endpoint, /mcp,
 * on libmicrohttpd driven from the supervisor's event loop (no thread of
 * its own).  A 2026-07-28 request is served statelessly: a session of the
 * MCP layer lives for that one POST.  A 2025 client gets an
 * Mcp-Session-Id at initialize; its requests are routed to that session.
 * A response is JSON when nothing comes before it, else an SSE stream;
 * a client that drops the connection cancels its run. */
#ifndef PYCELL_TRANSPORT_HTTP_H
#define PYCELL_TRANSPORT_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/loop.h"
#include "base/prom.h"
#include "base/util.h"
#include "config/tokens.h"
#include "mcp/mcp.h"

struct http_server;

/* An operator endpoint beside the MCP one: a row of http_config.routes.
 * GET or HEAD only (others get 405); its handler lives with the rest of
 * the operator's side (pycell serve's: cli/cmd_serve.c, serve_metrics.c). */
struct http_route {
	const char *path;             /* "/healthz" */
	bool authenticated;           /* tokens, Host and Origin as /mcp has them; else none
				       * (such an endpoint tells only about itself) */
	const char *content_type;
	/* The body (malloc'd, into *body); returns the HTTP status. */
	unsigned (*answer)(void *ctx, char **body);
};

struct http_config {
	/* "127.0.0.1:8080", "[::1]:0", "0.0.0.0:8080" (IP literals only; port
	 * 0 picks one) or "unix:/path/to/socket" */
	const char *listen;
	/* > 0: serve this socket instead, bound and listening already (from
	 * systemd, which passes fds from 3 on); the server owns it from
	 * http_server_new on.  0: bind `listen`. */
	int listen_fd;
	/* NULL: no tokens: TCP must be loopback, and a unix socket admits only
	 * this user and root. */
	const struct tokens *tokens;
	/* Host names (and Origin hosts) accepted besides localhost, 127.0.0.1,
	 * [::1] and the listen address itself. */
	char *const *allow_hosts;
	size_t n_allow_hosts;
	size_t max_body;             /* larger bodies get 413 */
	unsigned max_connections;    /* beyond: refused at accept */
	unsigned request_timeout_s;  /* to send a whole request; then the connection is cut */
	unsigned max_sessions;       /* 2025 sessions at once; beyond: 503 */
	uint64_t session_idle_ms;    /* a 2025 session unused this long ends */
	unsigned max_pending;        /* requests being answered, all clients; beyond: 503 */
	/* This replica's name: 2025 session ids begin with "NAME." (a
	 * balancer routes by Mcp-Session-Id).  NULL: no prefix. */
	const char *replica;
	/* The MCP server for a client (its token's policy): t NULL without
	 * tokens, or for a unix peer allowed as this user. */
	struct mcp_server *(*server_for)(void *ctx, const struct token *t);
	/* The operator endpoints beside /mcp (serve's: /healthz, /metrics). */
	const struct http_route *routes;
	size_t n_routes;
	void *ctx;
};

/* Refused requests, by kind (the HTTP status says which), and load now. */
enum http_denial { HTTP_DENIED_TOKEN, HTTP_DENIED_FORBIDDEN, HTTP_DENIED_TOO_LARGE, HTTP_DENIED_QUOTA,
		   HTTP_DENIED_FULL, HTTP_DENIALS };
extern const char *const http_denial_names[HTTP_DENIALS];
struct http_stats {
	uint64_t denied[HTTP_DENIALS];
	uint64_t requests;           /* requests begun, every path */
	unsigned connections, sessions, pending;
	uint64_t last_connection_ms;  /* when the newest connection came (now_ms), 0: none yet */
};
void http_server_stats(const struct http_server *h, struct http_stats *st);

struct http_server *http_server_new(struct loop *l, const struct http_config *cfg, struct pc_err *err);
/* Another token file from now on (a reload).  Requests in flight are
 * answered whatever their token; a 2025 session whose token is no longer
 * in t ends (once its requests in flight are answered).  t must outlive
 * the server or the next call. */
void http_server_set_tokens(struct http_server *h, const struct tokens *t);
/* Other limits from now on (a reload): cfg's allow_hosts (which must
 * outlive the server or the next call), max_body, max_sessions and
 * session_idle_ms; the rest of cfg is not read.  A body being received
 * is held to the new cap from its next part on. */
void http_server_set_limits(struct http_server *h, const struct http_config *cfg);
/* Stop taking requests (a drain): a new MCP request gets 503 and its
 * connection is closed, so that a balancer sends it elsewhere; requests
 * in flight are answered.  The listener stays open until the server is
 * freed: closed now, it would reset the connections queued on it, whose
 * requests were sent and cannot be told from ones that ran. */
void http_server_quiesce(struct http_server *h);
/* Send what the MCP layer has answered now (resumed requests wait for
 * libmicrohttpd's next round otherwise).  Not from within a callback of
 * libmicrohttpd: from the MCP server's on_answered hook. */
void http_server_flush(struct http_server *h);
/* "http://127.0.0.1:PORT/mcp" or "unix:PATH": where it listens. */
const char *http_server_url(const struct http_server *h);
/* Ends every session and request (their runs are killed), closes the
 * listener and removes a unix socket it made. */
void http_server_free(struct http_server *h);

#endif
