/* pycell: MCP: what a result looks like to the client (render.c): it
 * only formats; the core sends. */
#ifndef PYCELL_MCP_RENDER_H
#define PYCELL_MCP_RENDER_H

#include "mcp/internal.h"

/* The readable text block of a run_python result: a new JSON string. */
json_t *mcp_result_text(const json_t *res, const struct run_result *r, const struct policy *p,
			uint64_t timeout_ms);
/* A tools/call result of the text block (stolen) and the structured
 * content (stolen; sent to clients of 2025-06-18 and later). */
json_t *mcp_tool_result(enum proto v, json_t *text, json_t *structured, bool is_error);
json_t *mcp_tool_error(enum proto v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A tools/call result whose structured content st (stolen) is also its
 * text block, as indented JSON. */
json_t *mcp_structured_result(enum proto v, json_t *st);
json_t *mcp_sandbox_info(struct mcp_server *s);
/* The servers of the policy's tools.allow, as modules, in the order
 * first named: a malloc'd list joined by ", " (NULL: none). */
char *mcp_tools_modules_text(const struct policy *p);

#endif
