/* pycell: MCP: run_python's sessions (sessions.c; a jail kept across
 * cells, run/session.h), as the core sees them: its feature row, the
 * tools that open, close and list them, and run_python's session_id. */
#ifndef PYCELL_MCP_SESSIONS_H
#define PYCELL_MCP_SESSIONS_H

#include "mcp/internal.h"

extern const struct mcp_feature mcp_sessions_feature;
/* The session tools' handlers (rows of mcp_tool_rows). */
void mcp_tool_session_open(const struct mcp_req *r, const json_t *args, const json_t *progress_token);
void mcp_tool_session_close(const struct mcp_req *r, const json_t *args, const json_t *progress_token);
void mcp_tool_session_list(const struct mcp_req *r, const json_t *args, const json_t *progress_token);
void mcp_tool_session_fork(const struct mcp_req *r, const json_t *args, const json_t *progress_token);
/* run_python with a session_id: c takes the session, its host the
 * session's (0), or the client is answered why not (-1; c is not queued). */
int mcp_tsession_take(struct mcp_call *c, const struct mcp_req *r);

#endif
