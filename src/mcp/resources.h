/* pycell: MCP: resources (resources.c), what runs leave to be read, as
 * the core sees them: its feature row and its methods. */
#ifndef PYCELL_MCP_RESOURCES_H
#define PYCELL_MCP_RESOURCES_H

#include "mcp/internal.h"

#define MCP_RESOURCE_NOT_FOUND -32002

extern const struct mcp_feature mcp_resources_feature;
void mcp_resources_list(const struct mcp_req *r, const char *method, json_t *params);
void mcp_resources_read(const struct mcp_req *r, const char *method, json_t *params);
void mcp_resources_templates(const struct mcp_req *r, const char *method, json_t *params);

#endif
