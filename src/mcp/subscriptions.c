/* pycell: MCP: subscriptions/listen (2026-07-28), the one way a client of
 * that revision hears of changes outside its own requests: a request that
 * stays open, acknowledged at once with the notifications the server
 * agreed to send (notifications/subscriptions/acknowledged), then carrying
 * each of them, every one with the request's id as
 * io.modelcontextprotocol/subscriptionId.  It ends when the client
 * cancels it (notifications/cancelled, or an HTTP client closing the
 * stream), or with an empty result when the server stops taking requests
 * (mcp_server_quiesce: `pycell serve` draining).
 *
 * What this server can tell: resourcesListChanged, its client's (its
 * principal's) list of resources (resources.c).  Its tools change only
 * with a reload and it has no prompts, and resources/updated is not
 * offered: a filter asking for those is acknowledged without them, as the
 * revision says. */
#include "config.h"

#include <string.h>

#include "base/jsonrpc.h"
#include "base/log.h"
#include "mcp/subscriptions.h"

#define META_SUBSCRIPTION "io.modelcontextprotocol/subscriptionId"

struct listener {
	struct listener *next;
	struct mcp_call *call;        /* the subscriptions/listen request, waiting */
	char *owner;                  /* its client's principal (NULL: the anonymous one) */
	bool resources;               /* it asked for resourcesListChanged */
	bool pending;                 /* a change to tell at the next settle */
};

/* The server's listen streams (s->subscriptions). */
struct mcp_subscriptions {
	struct listener *list;
};

static json_t *meta_of(const struct mcp_call *c)
{
	return json_pack("{s:O}", META_SUBSCRIPTION, c->id);
}

/* A notification on c's stream: related to its request, so that HTTP sends
 * it on that request's response. */
static void notify(struct mcp_call *c, const char *method, json_t *params)
{
	json_object_set_new(params, "_meta", meta_of(c));
	if (c->conn)
		mcp_send(c->conn, jsonrpc_notification(method, params), c->id);
	else
		json_decref(params);
}

static void listen_release(struct mcp_call *c)
{
	struct mcp_subscriptions *subs = c->srv->subscriptions;
	struct listener *l = c->listener, **pp;
	for (pp = &subs->list; *pp && *pp != l; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = l->next;
	free(l->owner);
	free(l);
	c->listener = NULL;
	c->host = NULL;
}

static const struct call_host listen_host = { .release = listen_release };

/* The filter's key: absent, or a boolean; -1 when it is anything else. */
static int flag(const struct mcp_req *r, const json_t *filter, const char *key)
{
	const json_t *v = json_object_get(filter, key);
	if (!v)
		return 0;
	if (json_is_boolean(v))
		return json_is_true(v);
	mcp_fail(r, JSONRPC_INVALID_PARAMS, "Invalid params: a subscriptions/listen filter's flags are booleans",
		 json_pack("{s:s}", "key", key));
	return -1;
}

void mcp_subscriptions_listen(const struct mcp_req *r, const char *method, json_t *params)
{
	struct mcp_server *s = r->conn->srv;
	const json_t *filter = json_object_get(params, "notifications"), *uris;
	json_t *agreed;
	struct listener *l;
	struct mcp_call *c;
	int resources;
	(void)method;

	if (!json_is_object(filter)) {
		mcp_fail(r, JSONRPC_INVALID_PARAMS, "Invalid params: subscriptions/listen needs \"notifications\", the "
			 "filter (an object: resourcesListChanged, toolsListChanged, promptsListChanged, "
			 "resourceSubscriptions)", NULL);
		return;
	}
	if ((resources = flag(r, filter, "resourcesListChanged")) < 0 || flag(r, filter, "toolsListChanged") < 0 ||
	    flag(r, filter, "promptsListChanged") < 0)
		return;
	uris = json_object_get(filter, "resourceSubscriptions");
	if (uris && !json_is_array(uris)) {
		mcp_fail(r, JSONRPC_INVALID_PARAMS, "Invalid params: resourceSubscriptions is an array of URIs", NULL);
		return;
	}
	c = mcp_call_new(s, r, CALL_LISTEN);
	mcp_call_join_batch(c, r->b);
	c->state = CALL_WAITING;
	mcp_list_push(&s->active, c);
	l = xcalloc(1, sizeof(*l));
	l->call = c;
	l->owner = r->conn->principal ? xstrdup(r->conn->principal) : NULL;
	l->resources = resources;
	l->next = s->subscriptions->list;
	s->subscriptions->list = l;
	c->listener = l;
	c->host = &listen_host;
	/* what it asked for and this server tells, and nothing else */
	agreed = json_object();
	if (l->resources)
		json_object_set_new(agreed, "resourcesListChanged", json_true());
	notify(c, "notifications/subscriptions/acknowledged", json_pack("{s:o}", "notifications", agreed));
	log_debug("mcp: subscriptions/listen opened (resources: %s)", l->resources ? "yes" : "no");
}

static void subs_resources_changed(struct mcp_server *s, const char *owner)
{
	bool any = false;
	for (struct listener *l = s->subscriptions->list; l; l = l->next)
		if (l->resources && str_eq(l->owner, owner))
			any = l->pending = true;
	if (any)
		mcp_kick(s);   /* told from mcp_on_defer: one notification for what one turn changed */
}

static void subs_settle(struct mcp_server *s)
{
	for (struct listener *l = s->subscriptions->list; l; l = l->next)
		if (l->pending) {
			l->pending = false;
			notify(l->call, "notifications/resources/list_changed", json_object());
		}
}

/* Each stream ends gracefully: its result, empty but for its id. */
static void subs_quiesce(struct mcp_server *s)
{
	while (s->subscriptions->list) {
		struct mcp_call *c = s->subscriptions->list->call;
		mcp_call_reply(c, mcp_result(c->v, c->id, json_pack("{s:o}", "_meta", meta_of(c))));
		mcp_call_free(c);   /* listen_release unlinks it */
	}
}

static int subs_init(struct mcp_server *s, struct pc_err *err)
{
	s->subscriptions = xcalloc(1, sizeof(*s->subscriptions));
	(void)err;
	return 0;
}

/* The server's calls are freed before its features: no stream is left. */
static void subs_free(struct mcp_server *s)
{
	free(steal_ptr(&s->subscriptions));
}

const struct mcp_feature mcp_subscriptions_feature = {
	.name = "subscriptions", .init = subs_init, .free = subs_free, .settle = subs_settle,
	.resources_changed = subs_resources_changed, .quiesce = subs_quiesce,
};
