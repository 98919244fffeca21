/* pycell: MCP: the Tasks extension (tasks.c), as the core sees it: its
 * feature row, the timer a queued call arms, and its methods. */
#ifndef PYCELL_MCP_TASKS_H
#define PYCELL_MCP_TASKS_H

#include "mcp/internal.h"

#define EXT_TASKS "io.modelcontextprotocol/tasks"

extern const struct mcp_feature mcp_tasks_feature;
/* Arm the timer for the next call that may become a task. */
void mcp_tasks_arm(struct mcp_server *s);
/* tasks/get, tasks/update, tasks/cancel: a task of r's client */
void mcp_tasks_get(const struct mcp_req *r, const char *method, json_t *params);
void mcp_tasks_update(const struct mcp_req *r, const char *method, json_t *params);
void mcp_tasks_cancel(const struct mcp_req *r, const char *method, json_t *params);

#endif
