/* pycell: MCP: resources: what runs leave for their client to read
 * afterwards: the files a run or a session's cell created or changed in
 * /workspace, and a session cell's whole output.  Each belongs to the
 * client whose call made it (its principal, as sessions and tasks do):
 * another client's is "not found", as is a guessed one.  They are kept
 * in memory within RESOURCES_MAX_BYTES, the oldest going first when
 * more come: a run's for RESOURCE_RUN_TTL_MS, a session's until the
 * session is freed (closed, expired, ended), when its go with it.
 *
 *   pycell://sessions/{session_id}/files/{path}
 *   pycell://sessions/{session_id}/cells/{cell}/{stdout|stderr}
 *   pycell://runs/{run_id}/files/{path}
 *
 * When a client's list changes (a call keeps, replaces or drops files, a
 * session's go, a run's expire or make room), its 2025 connections hear
 * notifications/resources/list_changed: the call's own connection on that
 * call (over HTTP, on its stream, before its result), the others when they
 * can be told (stdio); a 2026-07-28 client hears it on its
 * subscriptions/listen streams (subscriptions.c, told through
 * mcp_resources_changed). */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "base/jsonrpc.h"
#include "base/log.h"
#include "mcp/resources.h"

/* all clients' in memory; a run's kept this long */
#define RESOURCES_MAX_BYTES (256u << 20)
#define RESOURCE_RUN_TTL_MS (30 * 60 * 1000)

struct mcp_resource {
	struct mcp_resource *next;    /* newest first */
	char *uri, *name, *mime, *owner;
	char sess[RANDOM_ID_SIZE];    /* its session's id; "" for a run's */
	char *data;                   /* the bytes */
	size_t len;
	uint64_t t_expires;           /* monotonic ms; 0: its session's */
};

/* The server's resources (s->resources). */
struct mcp_resources {
	struct mcp_resource *list;    /* newest first */
	size_t bytes;
};

/* Owner's list changed: its connections are to be told (tell_changed). */
static void mark_changed(struct mcp_server *s, const char *owner)
{
	for (struct mcp_conn *conn = s->conns; conn; conn = conn->next)
		if (conn->era == ERA_LEGACY && str_eq(conn->principal, owner))
			conn->resources_changed = true;
	mcp_resources_changed(s, owner);   /* 2026-07-28's listen streams */
}

/* Tell each connection marked, once: c's own as part of c (related to its
 * request, so that HTTP sends it on that request's stream). */
static void tell_changed(struct mcp_server *s, const struct mcp_call *c)
{
	for (struct mcp_conn *conn = s->conns; conn; conn = conn->next) {
		if (!conn->resources_changed)
			continue;
		conn->resources_changed = false;
		mcp_send(conn, jsonrpc_notification("notifications/resources/list_changed", NULL),
			 c && c->conn == conn ? c->id : NULL);
	}
}

static void res_free(struct mcp_resource *x)
{
	free(x->uri);
	free(x->name);
	free(x->mime);
	free(x->owner);
	free(x->data);
	free(x);
}

/* Drop what pred says (or, with pred NULL, the oldest while over the cap). */
static void res_drop(struct mcp_server *s, bool (*pred)(const struct mcp_resource *, const void *),
		     const void *arg)
{
	struct mcp_resource **pp = &s->resources->list;
	while (*pp) {
		struct mcp_resource *x = *pp;
		if (pred && pred(x, arg)) {
			*pp = x->next;
			s->resources->bytes -= x->len;
			mark_changed(s, x->owner);
			res_free(x);
			continue;
		}
		pp = &x->next;
	}
	while (!pred && s->resources->bytes > RESOURCES_MAX_BYTES && s->resources->list) {
		for (pp = &s->resources->list; (*pp)->next; pp = &(*pp)->next)
			;
		log_debug("mcp: resource %s dropped: the store is full", (*pp)->uri);
		s->resources->bytes -= (*pp)->len;
		mark_changed(s, (*pp)->owner);
		res_free(*pp);
		*pp = NULL;
	}
}

static bool expired(const struct mcp_resource *x, const void *now)
{
	return x->t_expires && x->t_expires <= *(const uint64_t *)now;
}

static bool has_uri(const struct mcp_resource *x, const void *uri)
{
	return strcmp(x->uri, uri) == 0;
}

static bool of_session(const struct mcp_resource *x, const void *id)
{
	return x->sess[0] && strcmp(x->sess, id) == 0;
}

static void expire(struct mcp_server *s)
{
	uint64_t now = now_ms();
	res_drop(s, expired, &now);
	tell_changed(s, NULL);
}

/* Keep data (taken) as uri, of session sess (NULL: of a run, for
 * RESOURCE_RUN_TTL_MS); a resource of the same uri is replaced. */
static void res_add(struct mcp_server *s, const struct mcp_call *c, const char *sess, const char *uri,
		    const char *name, const char *mime, char *data, size_t len)
{
	struct mcp_resource *x = xcalloc(1, sizeof(*x));
	const char *owner = mcp_call_owner(c);
	res_drop(s, has_uri, uri);
	x->uri = xstrdup(uri);
	x->name = xstrdup(name);
	x->mime = xstrdup(mime);
	x->owner = owner ? xstrdup(owner) : NULL;
	x->data = data;
	x->len = len;
	if (sess)
		snprintf(x->sess, sizeof(x->sess), "%s", sess);
	else
		x->t_expires = now_ms() + RESOURCE_RUN_TTL_MS;
	x->next = s->resources->list;
	s->resources->list = x;
	s->resources->bytes += len;
	mark_changed(s, owner);
	res_drop(s, NULL, NULL);
}

/* A path as a URI's path: unreserved characters and "/" as they are. */
static char *uri_path(const char *p)
{
	static const char hex[] = "0123456789ABCDEF";
	char *out = xmalloc(strlen(p) * 3 + 1), *o = out;
	for (const unsigned char *q = (const unsigned char *)p; *q; q++) {
		if ((*q >= 'A' && *q <= 'Z') || (*q >= 'a' && *q <= 'z') || (*q >= '0' && *q <= '9') ||
		    strchr("-._~/", *q)) {
			*o++ = (char)*q;
		} else {
			*o++ = '%';
			*o++ = hex[*q >> 4];
			*o++ = hex[*q & 15];
		}
	}
	*o = '\0';
	return out;
}

static json_t *link_block(const char *uri, const char *name, const char *mime, size_t size, const char *what)
{
	return json_pack("{s:s,s:s,s:s,s:s,s:I,s:s}", "type", "resource_link", "uri", uri, "name", name,
			 "mimeType", mime, "size", (json_int_t)size, "description", what);
}

/* Keep what call c's run or cell r left for its client to read (the files
 * it changed, a cell's whole output) as resources; each file kept gets its
 * "uri" in res's "files", a cell's output its URIs in res's "session"
 * (whose "id" and "cell" say which: its host's describe).  Returns the
 * resource_link content blocks for them (a new array). */
static json_t *resources_keep(struct mcp_call *c, const struct run_result *r, json_t *res)
{
	struct mcp_server *s = c->srv;
	json_t *links = json_array(), *listed = json_object_get(res, "files"), *e;
	json_t *scope = json_object_get(res, "session");
	const char *sess = json_string_value(json_object_get(scope, "id"));
	char base[RANDOM_ID_SIZE + 32], run_id[RANDOM_ID_SIZE];
	size_t i;

	expire(s);
	if (scope && (!sess || strlen(sess) >= RANDOM_ID_SIZE || !json_is_true(json_object_get(scope, "alive"))))
		return links;   /* its files and output went with it */
	if (scope) {
		snprintf(base, sizeof(base), "pycell://sessions/%s", sess);
	} else {
		if (!r->files || random_id(run_id, s->cfg.replica) < 0)
			return links;
		snprintf(base, sizeof(base), "pycell://runs/%s", run_id);
	}
	json_array_foreach(r->files, i, e) {
		const char *path = json_string_value(json_object_get(e, "path"));
		const char *mime = json_string_value(json_object_get(e, "mime_type"));
		const json_t *b64 = json_object_get(e, "data");
		cleanup_free char *enc = uri_path(path);
		cleanup_free char *uri = xasprintf("%s/files/%s", base, enc);
		size_t len;
		char *data;
		if (json_is_true(json_object_get(e, "deleted"))) {
			res_drop(s, has_uri, uri);
			continue;
		}
		if (!b64 || !(data = b64_decode(json_string_value(b64), json_string_length(b64), &len)))
			continue;
		res_add(s, c, sess, uri, path, mime, data, len);
		json_object_set_new(json_array_get(listed, i), "uri", json_string(uri));
		json_array_append_new(links, link_block(uri, path, mime, len, "a file the code wrote in /workspace"));
	}
	if (scope) {
		/* the cell's whole output: the result's, or more when the call
		 * asked for less */
		const struct output_buf *bufs[2] = { c->has_whole ? &c->whole_out : &r->out,
						     c->has_whole ? &c->whole_err : &r->err };
		static const char *const names[2] = { "stdout", "stderr" };
		json_t *out = json_object();
		unsigned cell = (unsigned)json_integer_value(json_object_get(scope, "cell"));
		for (int k = 0; k < 2; k++) {
			char uri[RANDOM_ID_SIZE + 96], name[64];
			if (!bufs[k]->len)
				continue;
			snprintf(uri, sizeof(uri), "%s/cells/%u/%s", base, cell, names[k]);
			snprintf(name, sizeof(name), "cell %u %s", cell, names[k]);
			res_add(s, c, sess, uri, name, "text/plain", xmemdup(bufs[k]->data, bufs[k]->len), bufs[k]->len);
			json_object_set_new(out, names[k], json_string(uri));
			/* linked when the result holds less of it */
			if (k ? r->err.truncated : r->out.truncated)
				json_array_append_new(links, link_block(uri, name, "text/plain", bufs[k]->len,
								  "the cell's whole output"));
		}
		if (json_object_size(out))
			json_object_set_new(scope, "output", out);
		else
			json_decref(out);
	}
	tell_changed(s, c);
	return links;
}

static void resources_drop_session(struct mcp_server *s, const char *session_id)
{
	res_drop(s, of_session, session_id);
	tell_changed(s, NULL);
}

static int resources_init(struct mcp_server *s, struct pc_err *err)
{
	s->resources = xcalloc(1, sizeof(*s->resources));
	(void)err;
	return 0;
}

static void resources_free(struct mcp_server *s)
{
	if (!s->resources)
		return;
	while (s->resources->list) {
		struct mcp_resource *x = s->resources->list;
		s->resources->list = x->next;
		res_free(x);
	}
	free(steal_ptr(&s->resources));
}

const struct mcp_feature mcp_resources_feature = {
	.name = "resources", .init = resources_init, .free = resources_free, .keep = resources_keep,
	.scope_closed = resources_drop_session,
};

/* ------------------------------------------------------------ requests */

static bool textual(const char *mime)
{
	static const char *const apps[] = { "application/json", "application/jsonl", "application/xml",
					    "application/yaml", "image/svg+xml", NULL };
	if (strncmp(mime, "text/", 5) == 0)
		return true;
	for (int i = 0; apps[i]; i++)
		if (strcmp(mime, apps[i]) == 0)
			return true;
	return false;
}

/* 2026-07-28 wants every list and read to say how long it may be cached:
 * these are the client's own, and change with every run. */
static json_t *private(const struct mcp_req *r, json_t *result)
{
	if (proto_is_modern(r->v)) {
		json_object_set_new(result, "ttlMs", json_integer(0));
		json_object_set_new(result, "cacheScope", json_string("private"));
	}
	return result;
}

void mcp_resources_list(const struct mcp_req *r, const char *method, json_t *params)
{
	json_t *list = json_array();
	(void)method;
	(void)params;
	expire(r->conn->srv);
	for (const struct mcp_resource *x = r->conn->srv->resources->list; x; x = x->next)
		if (str_eq(x->owner, r->conn->principal))
			json_array_append_new(list, json_pack("{s:s,s:s,s:s,s:I}", "uri", x->uri, "name", x->name,
							      "mimeType", x->mime, "size", (json_int_t)x->len));
	mcp_answer(r, private(r, json_pack("{s:o}", "resources", list)));
}

void mcp_resources_templates(const struct mcp_req *r, const char *method, json_t *params)
{
	json_t *t = json_pack("[{s:s,s:s,s:s},{s:s,s:s,s:s,s:s},{s:s,s:s,s:s}]",
		"uriTemplate", "pycell://sessions/{session_id}/files/{+path}", "name", "session-files",
		"description", "A file a cell of one of your sessions created or changed in /workspace",
		"uriTemplate", "pycell://sessions/{session_id}/cells/{cell}/{stream}", "name", "cell-output",
		"description", "The whole stdout or stderr of a session's cell", "mimeType", "text/plain",
		"uriTemplate", "pycell://runs/{run_id}/files/{+path}", "name", "run-files",
		"description", "A file a run_python call without a session wrote in /workspace (kept 30 minutes)");
	(void)method;
	(void)params;
	mcp_answer(r, private(r, json_pack("{s:o}", "resourceTemplates", t)));
}

void mcp_resources_read(const struct mcp_req *r, const char *method, json_t *params)
{
	const json_t *uri = json_object_get(params, "uri");
	const struct mcp_resource *x;
	json_t *content;
	(void)method;

	if (!json_is_string(uri)) {
		mcp_fail(r, JSONRPC_INVALID_PARAMS, "Invalid params: resources/read needs \"uri\", a string", NULL);
		return;
	}
	expire(r->conn->srv);
	for (x = r->conn->srv->resources->list; x; x = x->next)
		if (json_str_eq(uri, x->uri) && str_eq(x->owner, r->conn->principal))
			break;
	if (!x) {
		/* -32002 until 2026-07-28, which says -32602 */
		mcp_fail(r, proto_is_modern(r->v) ? JSONRPC_INVALID_PARAMS : MCP_RESOURCE_NOT_FOUND,
			 "Resource not found", json_pack("{s:O}", "uri", uri));
		return;
	}
	content = json_pack("{s:s,s:s}", "uri", x->uri, "mimeType", x->mime);
	{
		json_t *text = textual(x->mime) ? json_stringn(x->data, x->len) : NULL;   /* NULL: not UTF-8 */
		if (text) {
			json_object_set_new(content, "text", text);
		} else {
			cleanup_free char *b64 = b64_encode(x->data, x->len);
			json_object_set_new(content, "blob", json_string(b64));
		}
	}
	mcp_answer(r, private(r, json_pack("{s:[o]}", "contents", content)));
}
