/* pycell: MCP over HTTP: 2025 sessions, each a connection of the MCP
 * layer named by its Mcp-Session-Id (http_internal.h). */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/jsonrpc.h"
#include "base/log.h"
#include "mcp/http_internal.h"

static void legacy_send(void *ctx, json_t *msg, const json_t *related)
{
	struct legacy_session *ls = ctx;
	const json_t *id = related ? related : json_object_get(msg, "id");
	/* a message for no request in flight (a session log line, or the
	 * answer to a request whose client left) has nowhere to go */
	for (struct hreq *r = ls->reqs; id && r; r = r->next)
		if (r->id && json_equal(r->id, id)) {
			hreq_push(r, msg);
			return;
		}
}

void legacy_free(struct legacy_session *ls)
{
	struct http_server *h = ls->h;
	struct legacy_session **pp;
	for (pp = &h->sessions; *pp && *pp != ls; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = ls->next;
	h->n_sessions--;
	/* its requests in flight end with an error */
	while (ls->reqs) {
		struct hreq *r = ls->reqs;
		json_t *e = jsonrpc_error(r->id, JSONRPC_INVALID_REQUEST, "Invalid Request: the session ended", NULL);
		legacy_unlink(r);
		hreq_push(r, e);   /* answered: nothing to cancel in a session that is gone */
		json_decref(e);
		r->ls = NULL;
	}
	mcp_conn_free(ls->mcp);
	free(ls);
}

struct legacy_session *legacy_new(struct http_server *h, struct mcp_server *srv, struct client *who)
{
	static const struct mcp_conn_ops ops = { .send = legacy_send };
	struct legacy_session *ls = xcalloc(1, sizeof(*ls));
	if (random_id(ls->id, h->cfg.replica) < 0) {
		free(ls);
		return NULL;
	}
	ls->h = h;
	ls->who = who;
	ls->last_used = now_ms();
	ls->mcp = mcp_conn_new(srv, &ops, ls);
	mcp_conn_set_principal(ls->mcp, who->name);
	ls->next = h->sessions;
	h->sessions = ls;
	h->n_sessions++;
	return ls;
}

struct legacy_session *legacy_find(struct http_server *h, const char *id)
{
	for (struct legacy_session *ls = h->sessions; ls; ls = ls->next)
		if (strcmp(ls->id, id) == 0)
			return ls->revoked ? NULL : ls;
	return NULL;
}

void legacy_expire(struct http_server *h)
{
	uint64_t now = now_ms();
	for (struct legacy_session *ls = h->sessions, *next; ls; ls = next) {
		next = ls->next;
		if (!ls->reqs && ls->revoked) {
			log_info("serve: session of %s ended: its token was withdrawn", http_client_name(ls->who));
			legacy_free(ls);
		} else if (!ls->reqs && now - ls->last_used > h->cfg.session_idle_ms) {
			log_info("serve: session of %s idle for %llu s: ended", http_client_name(ls->who),
				 (unsigned long long)(now - ls->last_used) / 1000);
			legacy_free(ls);
		}
	}
}

void legacy_unlink(struct hreq *r)
{
	if (!r->ls)
		return;
	if (r->prev)
		r->prev->next = r->next;
	else
		r->ls->reqs = r->next;
	if (r->next)
		r->next->prev = r->prev;
	r->prev = r->next = NULL;
}
