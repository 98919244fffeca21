/* pycell: MCP over Streamable HTTP: what the rooms of the transport share
 * (transport_http.h is what the rest of pycell sees):
 *   transport_http.c  requests, their dispatch to the MCP layer, the
 *                     operator endpoints, connections and their bounds,
 *                     the loop, the server
 *   http_sse.c        a request's answer: JSON, or an SSE stream
 *   http_access.c     Host and Origin, tokens and the clients they name,
 *                     the Mcp-* headers a 2026 request mirrors
 *   http_legacy.c     2025 sessions (Mcp-Session-Id)
 *   http_listen.c     the listening socket (--listen, or systemd's)
 *   http_mhd.c        libmicrohttpd, loaded when first needed */
#ifndef PYCELL_HTTP_INTERNAL_H
#define PYCELL_HTTP_INTERNAL_H

#include <microhttpd.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <jansson.h>

#include "base/loop.h"
#include "base/util.h"
#include "mcp/mcp.h"
#include "mcp/transport_http.h"

/* libmicrohttpd, opened by the first http_server_new: linked, it and the
 * GnuTLS it brings (ten libraries, and GnuTLS's constructor) cost every
 * pycell process 1.2 ms at its start, `pycell run` and each cold jail's
 * supervisor included, which never serve HTTP. */
#define MHD_FUNCTIONS(X)                                                                   \
	X(start_daemon) X(stop_daemon) X(run) X(get_timeout) X(get_daemon_info)            \
	X(get_connection_info) X(lookup_connection_value) X(suspend_connection)             \
	X(resume_connection) X(queue_response) X(create_response_from_buffer)               \
	X(create_response_from_callback) X(add_response_header) X(destroy_response)
struct http_mhd_api {
#define MHD_FIELD(name) __typeof__(MHD_##name) *name;
	MHD_FUNCTIONS(MHD_FIELD)
#undef MHD_FIELD
};
extern struct http_mhd_api mhd;
/* Load it (once); -1 with err when it is missing or incomplete. */
int http_mhd_open(struct pc_err *err);

#define ENDPOINT "/mcp"
/* A refused request's body is read (then its refusal sent) up to this */
#define REFUSED_BODY_MAX 65536
#define HDR_SESSION "Mcp-Session-Id"
#define HDR_VERSION "MCP-Protocol-Version"
#define HDR_METHOD "Mcp-Method"
#define HDR_NAME "Mcp-Name"
#define META_VERSION "io.modelcontextprotocol/protocolVersion"
#define MCP_HEADER_MISMATCH -32020
/* Application error codes, outside JSON-RPC's reserved range as the
 * 2026-07-28 revision asks: the HTTP status, negated, less 31000. */
#define ERR_QUOTA -31429
#define ERR_FULL -31503
#define HEADER_MEMORY (64 * 1024)
#define SSE_BLOCK (16 * 1024)

enum conn_state { CONN_RECEIVING, CONN_ANSWERING };

/* A connection that has not yet sent a whole request that authenticated
 * (a valid token; without a token file, any whole request to /mcp) is
 * unproven: it has UNPROVEN_MS from its start (or the request timeout,
 * when shorter), and unproven connections are bounded per client address
 * (UNPROVEN_PER_ADDR) and in all (UNPROVEN_SHARE of max_connections):
 * past a bound the oldest of them is cut.  So clients that never
 * authenticate cannot hold the slots an authenticated one needs. */
#define UNPROVEN_MS 5000
#define UNPROVEN_PER_ADDR 64
#define UNPROVEN_SHARE(max) ((max) - (max) / 4)

/* Who a connection comes from, as the bounds count: the address without
 * the port (TCP), the peer's uid (a unix socket). */
struct peer_key {
	sa_family_t family;
	unsigned char addr[16];
};

struct hconn {
	struct hconn *prev, *next;
	struct http_server *h;
	int fd;
	enum conn_state state;
	uint64_t t_start;            /* when the request being received began (or,
	                              * kept alive, the last one ended) */
	bool graced;                 /* its time restarted once, a request arriving */
	uint64_t t_connect;          /* when the connection came */
	bool proven;                 /* it sent a whole request that authenticated */
	struct peer_key peer;
	bool cut;                    /* shut down for taking too long */
	bool peer_known;
	uid_t peer_uid;
	struct hreq *req;            /* the request being received or answered */
	struct loop_watch w_hup;     /* the peer stopping to send (EPOLLRDHUP) */
};

struct legacy_session;

/* A client as the token file names it.  Its runs in flight, which count
 * against its quota, are the MCP layer's to count (mcp_server_runs_of):
 * a call that became a task is still a run after its request ended. */
struct client {
	struct client *next;
	char *name;                  /* NULL: no token */
};

/* Where a request is in its life.  What else it carries are facts beside
 * that: the form of its answer (streaming), whether MHD holds a response
 * for it (queued), whether its connection waits (suspended), whether its
 * client left (gone). */
enum hreq_state {
	HREQ_HEAD,        /* on_request's first call: only its head is in */
	HREQ_BODY,        /* its body is coming (too_large: more than max_body came) */
	/* refused at its head, answered once its body (up to
	 * REFUSED_BODY_MAX) is read and dropped: a response before the
	 * body makes the client's send fail, and it never reads the status */
	HREQ_REFUSED,
	HREQ_WORKING,     /* handed to the MCP layer (counted in h->n_pending): its response is to come */
	HREQ_ANSWERED,    /* the MCP layer's response is in: in final, or at the end of out when streaming */
};

struct hreq {
	struct hreq *prev, *next;     /* on its session's list of requests in flight */
	struct http_server *h;
	struct hconn *hc;
	struct MHD_Connection *mhd;  
	struct legacy_session *ls;    /* a 2025 session's request; NULL: stateless */
	struct mcp_conn *mcp;         /* a stateless request's own MCP connection */
	struct client *who;           /* who asked (authenticate) */
	uint32_t max_runs;            /* its token's run quota then (0: none) */
	struct mcp_server *srv;
	char *body;
	size_t body_len;
	enum hreq_state state;
	bool too_large;
	bool queued;                  /* a response is queued with MHD */
	bool suspended;               /* its connection waits (hreq_resume) */
	bool sse_ok;                  /* Accept names text/event-stream */
	bool streaming;               /* the answer is an SSE stream */
	bool gone;                    /* the client left; nothing more is sent */
	bool is_initialize;
	bool new_legacy;              /* its initialize made r->ls */
	unsigned refused_status;      /* HREQ_REFUSED: what is sent once the body is read */
	char *refused_text;
	const char *const *refused_headers;
	bool modern;                  /* its _meta names a protocol version */
	json_t *id;                   /* the JSON-RPC request's id, if any */
	char *final;                  /* the response, as JSON text */
	int status;                   /* its HTTP status */
	char *out;                    /* SSE bytes not yet taken by MHD */
	size_t out_len, out_off;
};

struct legacy_session {
	struct legacy_session *next;
	struct http_server *h;
	char id[RANDOM_ID_SIZE];
	struct mcp_conn *mcp;         /* its MCP connection */
	struct client *who;
	bool revoked;                 /* its token left the token file: ends when idle */
	uint64_t last_used;
	struct hreq *reqs;            /* requests in flight */
	bool initialized;
};

struct http_server {
	struct loop *loop;
	struct http_config cfg;
	struct MHD_Daemon *d;
	int listen_fd;
	bool is_unix;
	char *unix_path;
	char *url;
	char *listen_host;            /* the listen address, accepted as a Host */
	struct loop_watch w_mhd;
	int timer_fd;                 /* MHD's timeout */
	uint64_t timer_at;            /* when timer_fd fires (monotonic ms); 0: disarmed */
	struct loop_watch w_timer;
	int tick_fd;                  /* once a second: slow requests, idle sessions */
	struct loop_watch w_tick;
	struct hconn *conns;
	struct legacy_session *sessions;
	unsigned n_sessions, n_pending;
	/* Who has asked, by token name: outlives the token file it came
	 * from (http_server_set_tokens), so requests and sessions hold no
	 * pointer into it.  `anonymous`: without a token. */
	struct client *clients;
	struct client anonymous;
	unsigned n_conns;
	struct http_stats stats;
	bool quiesced;                /* http_server_quiesce: new MCP requests get 503 */
};

/* ---- transport_http.c */
/* Let MHD take r's answer (or the next part of its stream). */
void hreq_resume(struct hreq *r);
/* r's JSON-RPC error with HTTP status, now. */
enum MHD_Result http_fail(struct hreq *r, unsigned status, int code, const char *msg, const char *const *headers);

/* ---- http_sse.c */
/* A message of the MCP layer for request r: its response, or a
 * notification on its SSE stream (dropped for a client that takes none). */
void hreq_push(struct hreq *r, json_t *msg);
/* MHD's reader of r's SSE stream. */
ssize_t http_sse_reader(void *cls, uint64_t pos, char *buf, size_t max);

/* ---- http_access.c */
const char *http_header(struct MHD_Connection *c, const char *name);
const char *http_client_name(const struct client *c);
/* Who is asking, by the token file now in force: 0 with r->who; or -1,
 * with r refused (401; 403 for a unix peer that is not this user). */
int http_authenticate(struct hreq *r);
/* Host and Origin: 0, or -1 with r refused (403). */
int http_check_origin(struct hreq *r);
/* A 2026 request's Mcp-* headers against its body: 0, or -1 with r refused (400). */
int http_check_mirrored_headers(struct hreq *r, const json_t *msg);

/* ---- http_legacy.c: 2025 sessions */
struct legacy_session *legacy_new(struct http_server *h, struct mcp_server *srv, struct client *who);
/* The session of id, unless its token was withdrawn; NULL: none. */
struct legacy_session *legacy_find(struct http_server *h, const char *id);
/* Its requests in flight end with an error; freed. */
void legacy_free(struct legacy_session *ls);
/* End the idle ones, and those whose token was withdrawn once idle. */
void legacy_expire(struct http_server *h);
/* r leaves its session's list of requests in flight. */
void legacy_unlink(struct hreq *r);

/* ---- http_listen.c */
/* The listening socket fd, bound already (by http_listen_on, or by
 * systemd): where it listens, as a URL and as a Host name. */
int http_adopt(struct http_server *h, int fd, const char *what, struct pc_err *err);
/* Bind and listen on spec (ADDRESS:PORT, or unix:PATH). */
int http_listen_on(struct http_server *h, const char *spec, struct pc_err *err);

#endif
