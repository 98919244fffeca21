/* pycell: MCP: the tools (tools.c): one row each, their schemas
 * (schemas.c, made by make from src/mcp/schemas/) and run_python's
 * arguments. */
#ifndef PYCELL_MCP_TOOLS_H
#define PYCELL_MCP_TOOLS_H

#include "mcp/internal.h"

/* run_python's files: how many, their bytes as sent (one message to a
 * session's jail carries them, under 4 MiB), a path's length */
#define FILES_MAX 64
#define FILES_MAX_BYTES (3 << 20)
#define FILE_PATH_MAX 1024
/* run_python's max_output_bytes: at least this */
#define OUTPUT_BYTES_MIN 256
/* run_python's variables as the client wrote them, when they hold numbers
 * jansson cannot (protocol.c, parse_wide): a key no client can send (not
 * UTF-8), beside the variables read with those numbers as 0. */
#define RAW_VARIABLES_KEY "\xff" "raw variables"

/* One row per tool: tools/list, tools/call's dispatch and its "Unknown
 * tool" error, and the tests' checks (the man page's entry included)
 * derive from mcp_tool_rows.  Adding a tool is a row, its handler and
 * its entry in pycell(1). */
struct mcp_tool_row {
	const char *name, *title;          /* its schemas: src/mcp/schemas/NAME.{input,output}.json */
	const char *description;           /* or, from the policy: */
	char *(*describe)(const struct policy *p);
	void (*shape)(json_t *tool, const struct policy *p);  /* NULL, or fits it to the policy */
	bool read_only, destructive, idempotent;
	bool (*open_world)(const struct policy *p);           /* NULL: closed */
	bool (*enabled)(const struct policy *p);              /* NULL: always */
	const char *off;                   /* why, when not enabled */
	/* tools/call with its arguments (NULL: none given) and progressToken */
	void (*call)(const struct mcp_req *r, const json_t *args, const json_t *progress_token);
};
extern const struct mcp_tool_row mcp_tool_rows[];
extern const size_t mcp_n_tool_rows;
/* The row named name (a JSON string, every byte compared), or NULL. */
const struct mcp_tool_row *mcp_tool_row(const json_t *name);
bool mcp_tool_enabled(const struct mcp_tool_row *t, const struct policy *p);
/* "a, b and c": the tools policy p enables (malloc'd). */
char *mcp_tool_names(const struct policy *p);
/* The tools policy p enables, in the table's order: a new reference, or NULL. */
json_t *mcp_tools_new(const struct policy *p);
/* The tool as a client of this protocol version knows it. */
json_t *mcp_tool_for(const json_t *tool, enum proto v);
/* Check run_python's arguments into c; 0, or -1 with why they are wrong. */
int mcp_run_python_args(struct mcp_server *s, const json_t *args, struct mcp_call *c, struct pc_err *err);
/* The tool schemas: src/mcp/schemas/TOOL.input.json and TOOL.output.json
 * for each row, as JSON text (schemas.c, made by make from that folder). */
struct mcp_schema {
	const char *name;             /* "run_python.input" */
	const char *text;
};
extern const struct mcp_schema mcp_schemas[];
extern const size_t mcp_n_schemas;
/* The text of tool's schema ("input" or "output"), or NULL. */
const char *mcp_schema_of(const char *tool, const char *which);


#endif
