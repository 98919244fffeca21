/* pycell: MCP: 2026-07-28's subscriptions/listen streams (subscriptions.c),
 * as the core sees them: its feature row and its method. */
#ifndef PYCELL_MCP_SUBSCRIPTIONS_H
#define PYCELL_MCP_SUBSCRIPTIONS_H

#include "mcp/internal.h"

extern const struct mcp_feature mcp_subscriptions_feature;
void mcp_subscriptions_listen(const struct mcp_req *r, const char *method, json_t *params);

#endif
