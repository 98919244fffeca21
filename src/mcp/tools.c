/* pycell: MCP: the two tools, run_python and sandbox_info: their
 * definitions (the schemas are the JSON files of src/mcp/schemas/,
 * embedded at build time) and the checks of run_python's arguments. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "config/json_check.h"
#include "mcp/internal.h"

static bool policy_open_world(const struct policy *p)
{
	/* Loopback is the jail's own network namespace: nothing outside is
	 * reachable through it.  Allowed tool calls and egress do reach outside. */
	return p->n_tools_allow > 0 || p->network.mode == NET_EGRESS;
}

static json_t *run_python_tool(const struct policy *p)
{
	char mem[32], out[32], timeout[48] = "no time limit";
	json_t *input, *output, *tool;
	cleanup_free char *desc = NULL, *net = NULL;

	jc_format_size(mem, sizeof(mem), p->limits.memory_bytes);
	jc_format_size(out, sizeof(out), p->limits.output_bytes);
	if (p->limits.timeout_ms)
		snprintf(timeout, sizeof(timeout), "%g s wall clock", (double)p->limits.timeout_ms / 1000);
	if (p->network.mode == NET_EGRESS) {
		cleanup_free char *list = strv_join(p->network.egress, p->network.n_egress, ", ");
		net = xasprintf("network limited to the sandbox's own loopback and these destinations (HOST:PORT; "
				"names resolve only to them): %s", list);
	} else {
		net = xstrdup(p->network.mode == NET_NONE ? "no network access"
							   : "network limited to the sandbox's own loopback");
	}
	desc = xasprintf(
		"Run Python code in a fresh, isolated sandbox (CPython in a Linux jail) and get its output.\n\n"
		"Each call starts a new interpreter: nothing (variables, imports, files) persists between calls, "
		"so pass data in with `variables` and `files` and return what you need%s. The code runs like a "
		"notebook cell: "
		"statements run in order and the value of a final expression is returned as `return_value` (JSON "
		"when it can be serialised, else its repr); print() output is in stdout. An uncaught exception "
		"fails the call with the traceback in stderr.\n\n"
		"Limits: %s (`timeout_s` may lower it), %s of memory%s, %s of output per stream, %s. Writable: "
		"/tmp and the working directory /workspace, both empty at the start and discarded after. %s%s",
		p->sessions.max ? "; or open a session (session_open) and pass its session_id: its cells share "
				  "globals, imports and /workspace" : "",
		timeout, p->limits.memory_bytes ? mem : "no limit", "", out,
		net,
		p->packages.index ? "The standard library and the server's packages are available, and `packages` "
				    "installs more of those sandbox_info lists as installable (pip install itself does "
				    "not work)."
				  : "Only the Python standard library and packages installed on the server are "
				    "available; pip install does not work.",
		p->n_tools_allow ? "\n\nThe code may call the MCP tools this server allows: import pycell; "
				   "pycell.call_tool(\"server.tool\", {...}). sandbox_info lists them."
				 : "");

	input = json_loads(mcp_schema_run_python_input, 0, NULL);
	output = json_loads(mcp_schema_run_python_output, 0, NULL);
	if (!input || !output) {
		json_decref(input);
		json_decref(output);
		return NULL;
	}
	/* packages only where the policy names an index to install from */
	if (!p->packages.index)
		json_object_del(json_object_get(input, "properties"), "packages");
	/* the policy's limit is the most a call may ask for */
	if (p->limits.timeout_ms)
		json_object_set_new(json_object_get(json_object_get(input, "properties"), "timeout_s"),
				    "maximum", json_real((double)p->limits.timeout_ms / 1000));
	tool = json_pack("{s:s,s:s,s:s,s:o,s:o,s:{s:s,s:b,s:b,s:b,s:b}}",
		"name", "run_python",
		"title", "Run Python",
		"description", desc,
		"inputSchema", input,
		"outputSchema", output,
		"annotations", "title", "Run Python", "readOnlyHint", 0, "destructiveHint", 0,
			"idempotentHint", 0, "openWorldHint", policy_open_world(p));
	return tool;
}

/* A tool whose schemas are fixed (src/mcp/schemas/) and which reaches
 * nothing outside the server. */
static json_t *plain_tool(const char *name, const char *title, const char *desc, const char *in,
			  const char *out, bool read_only, bool destructive)
{
	json_t *input = json_loads(in, 0, NULL), *output = json_loads(out, 0, NULL);
	if (!input || !output) {
		json_decref(input);
		json_decref(output);
		return NULL;
	}
	return json_pack("{s:s,s:s,s:s,s:o,s:o,s:{s:s,s:b,s:b,s:b,s:b}}",
		"name", name, "title", title, "description", desc, "inputSchema", input, "outputSchema", output,
		"annotations", "title", title, "readOnlyHint", read_only, "destructiveHint", destructive,
			"idempotentHint", read_only, "openWorldHint", 0);
}

static json_t *sandbox_info_tool(void)
{
	return plain_tool("sandbox_info", "Sandbox info",
		"Describe the sandbox that run_python uses: the Python version, the backend, the policy "
		"name, the resource limits and the MCP tools the code may call.",
		mcp_schema_sandbox_info_input, mcp_schema_sandbox_info_output, true, false);
}

/* session_open, session_close, session_list, appended to tools */
static int add_session_tools(json_t *tools, const struct policy *p)
{
	char idle[32], life[32];
	cleanup_free char *open_desc = NULL;
	json_t *t[3];

	jc_format_duration(idle, sizeof(idle), p->sessions.idle_ms);
	jc_format_duration(life, sizeof(life), p->sessions.lifetime_ms);
	open_desc = xasprintf(
		"Open a session: one sandboxed Python interpreter kept alive across run_python calls that "
		"pass its session_id, like the cells of a notebook (globals, imports and the files in "
		"/workspace persist; each cell has its own output, result and timeout). A cell that runs out "
		"of time is interrupted (KeyboardInterrupt) and the session keeps its state; one that does "
		"not stop is killed with its session. A session is closed after %s without a cell, %s after "
		"it was opened, or by session_close; at most %u are open per client. Only this client can "
		"use its session_id.", idle, life, p->sessions.max_per_client);
	t[0] = plain_tool("session_open", "Open a Python session", open_desc, mcp_schema_session_open_input,
			    mcp_schema_session_open_output, false, false);
	t[1] = plain_tool("session_close", "Close a Python session",
			    "Close a session: its interpreter, processes and files are gone.",
			    mcp_schema_session_close_input, mcp_schema_session_close_output, false, true);
	t[2] = plain_tool("session_list", "List Python sessions",
			    "List this client's open sessions: id, cells run, whether one is running, age, idle "
			    "time and when it closes.",
			    mcp_schema_session_list_input, mcp_schema_session_list_output, true, false);
	for (int i = 0; i < 3; i++) {
		if (!t[i]) {
			for (int j = 0; j < 3; j++)
				json_decref(t[j]);
			return -1;
		}
	}
	if (!p->packages.index)
		json_object_del(json_object_get(json_object_get(t[0], "inputSchema"), "properties"), "packages");
	for (int i = 0; i < 3; i++)
		json_array_append_new(tools, t[i]);
	return 0;
}

json_t *mcp_tools_new(const struct policy *p)
{
	json_t *run = run_python_tool(p), *info = sandbox_info_tool(), *tools;
	if (!run || !info) {
		json_decref(run);
		json_decref(info);
		return NULL;
	}
	tools = json_pack("[o,o]", run, info);
	if (p->sessions.max && add_session_tools(tools, p) < 0) {
		json_decref(tools);
		return NULL;
	}
	return tools;
}

/* The tool as a client of this protocol version knows it. */
json_t *mcp_tool_for(const json_t *tool, enum proto v)
{
	json_t *t = json_deep_copy(tool);
	if (!proto_is_modern(v)) {
		/* Mcp-Param-* headers came with 2026-07-28 */
		const char *key;
		json_t *p;
		json_object_foreach(json_object_get(json_object_get(t, "inputSchema"), "properties"), key, p)
			json_object_del(p, "x-mcp-header");
	}
	if (v < PROTO_2025_06_18) {
		json_object_del(t, "title");
		json_object_del(t, "outputSchema");
	}
	if (v < PROTO_2025_03_26)
		json_object_del(t, "annotations");
	return t;
}

/* ------------------------------------------------------------ arguments */

static bool is_identifier(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	if (!*p || (*p >= '0' && *p <= '9'))
		return false;
	for (; *p; p++) {
		/* bytes >= 0x80: non-ASCII identifiers; Python checks the rest */
		if (!(*p == '_' || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p >= 0x80))
			return false;
	}
	return true;
}

static const char *json_type_name(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT: return "an object";
	case JSON_ARRAY: return "an array";
	case JSON_STRING: return "a string";
	case JSON_INTEGER: return "an integer";
	case JSON_REAL: return "a number";
	case JSON_TRUE:
	case JSON_FALSE: return "a boolean";
	case JSON_NULL: return "null";
	default: return "something else";
	}
}

#define BAD_ARGS(...) pc_fail(err, EINVAL, "arguments", __VA_ARGS__)

static bool is_base64(const char *s, size_t len)
{
	size_t n = 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (ch == '\n' || ch == '\r' || ch == ' ')
			continue;
		if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
		      ch == '+' || ch == '/' || ch == '='))
			return false;
		if (ch == '=' && i + 3 < len && strspn(s + i, "=\r\n ") != len - i)
			return false;   /* padding only at the end */
		n++;
	}
	return n % 4 == 0;
}

/* run_python's "files": their JSON text for the jail into *out. */
static int check_files(const json_t *files, char **out, struct pc_err *err)
{
	size_t i, total = 0;
	json_t *f;
	if (!json_is_array(files))
		return BAD_ARGS("\"files\" must be an array of {\"path\": ..., \"text\" or \"base64\": ...}, "
			 "got %s", json_type_name(files));
	if (json_array_size(files) > FILES_MAX)
		return BAD_ARGS("\"files\" holds %zu files; at most %d may be given", json_array_size(files),
			 FILES_MAX);
	json_array_foreach(files, i, f) {
		json_t *path = json_object_get(f, "path"), *text = json_object_get(f, "text"),
		       *b64 = json_object_get(f, "base64");
		const char *why, *key;
		json_t *v;
		if (!json_is_object(f))
			return BAD_ARGS("files[%zu] must be an object, got %s", i, json_type_name(f));
		json_object_foreach(f, key, v)
			if (strcmp(key, "path") != 0 && strcmp(key, "text") != 0 && strcmp(key, "base64") != 0)
				return BAD_ARGS("files[%zu]: unknown key \"%.*s\"; a file has path and text or "
					 "base64", i, utf8_prefix(key, 64), key);
		if (!json_is_string(path))
			return BAD_ARGS("files[%zu]: \"path\" must be a string, got %s", i,
				 path ? json_type_name(path) : "nothing");
		if ((why = rel_path_problem(json_string_value(path), json_string_length(path), FILE_PATH_MAX)))
			return BAD_ARGS("files[%zu]: the path \"%.*s\" %s", i, utf8_prefix(json_string_value(path), 64),
				 json_string_value(path), why);
		if (!text == !b64)
			return BAD_ARGS("files[%zu] (%.*s): give exactly one of \"text\" and \"base64\"", i,
				 utf8_prefix(json_string_value(path), 64), json_string_value(path));
		v = text ? text : b64;
		if (!json_is_string(v))
			return BAD_ARGS("files[%zu] (%.*s): \"%s\" must be a string, got %s", i,
				 utf8_prefix(json_string_value(path), 64), json_string_value(path),
				 text ? "text" : "base64", json_type_name(v));
		if (b64 && !is_base64(json_string_value(b64), json_string_length(b64)))
			return BAD_ARGS("files[%zu] (%.*s): \"base64\" is not valid base64", i,
				 utf8_prefix(json_string_value(path), 64), json_string_value(path));
		total += json_string_length(v);
		if (total > FILES_MAX_BYTES)
			return BAD_ARGS("\"files\" hold more than %d MiB as sent (text, or base64); pass less, or "
				 "in several calls of a session", FILES_MAX_BYTES >> 20);
	}
	*out = json_dumps(files, JSON_COMPACT);
	return 0;
}

/* Check run_python's arguments into c; 0, or -1 with why they are wrong. */
int mcp_run_python_args(struct mcp_server *s, const json_t *args, struct mcp_call *c, struct pc_err *err)
{
	uint64_t max_ms = s->env->policy.limits.timeout_ms;
	const char *key;
	json_t *v;

	if (!json_is_object(args))
		return BAD_ARGS("arguments must be an object such as {\"code\": \"print(1)\"}, got %s",
			 args ? json_type_name(args) : "nothing");
	json_object_foreach((json_t *)args, key, v) {
		if (strcmp(key, "code") != 0 && strcmp(key, "variables") != 0 && strcmp(key, "stdin") != 0 &&
		    strcmp(key, "timeout_s") != 0 && strcmp(key, "files") != 0 &&
		    strcmp(key, "session_id") != 0 && strcmp(key, "max_output_bytes") != 0 &&
		    strcmp(key, "packages") != 0 && strcmp(key, RAW_VARIABLES_KEY) != 0) {
			return BAD_ARGS("unknown argument \"%.*s\"; run_python takes code, variables, "
				 "stdin, timeout_s, files, session_id, max_output_bytes and packages", utf8_prefix(key, 64),
				 key);
		}
	}
	v = json_object_get(args, "code");
	if (!v)
		return BAD_ARGS("missing the required argument \"code\" (the Python source to run)");
	if (!json_is_string(v))
		return BAD_ARGS("\"code\" must be a string of Python source, got %s", json_type_name(v));
	c->code_len = json_string_length(v);
	c->code = xmalloc(c->code_len + 1);
	memcpy(c->code, json_string_value(v), c->code_len + 1);

	v = json_object_get(args, "variables");
	if (v && !json_is_null(v)) {
		json_t *val, *raw;
		if (!json_is_object(v))
			return BAD_ARGS("\"variables\" must be an object mapping names to JSON values, "
				 "got %s", json_type_name(v));
		json_object_foreach(v, key, val) {
			if (!is_identifier(key))
				return BAD_ARGS("variables: \"%.*s\" is not a valid Python identifier",
					 utf8_prefix(key, 64), key);
		}
		raw = json_object_get(args, RAW_VARIABLES_KEY);
		c->variables_json = raw ? xstrdup(json_string_value(raw)) : json_dumps(v, JSON_COMPACT);
	}
	v = json_object_get(args, "stdin");
	if (v && !json_is_null(v)) {
		if (!json_is_string(v))
			return BAD_ARGS("\"stdin\" must be a string, got %s", json_type_name(v));
		c->stdin_len = json_string_length(v);
		c->stdin_data = xmalloc(c->stdin_len + 1);
		memcpy(c->stdin_data, json_string_value(v), c->stdin_len + 1);
	}
	v = json_object_get(args, "files");
	if (v && !json_is_null(v) && check_files(v, &c->files_json, err) < 0)
		return -1;
	v = json_object_get(args, "session_id");
	if (v && !json_is_null(v)) {
		if (!json_is_string(v))
			return BAD_ARGS("\"session_id\" must be a string, the handle session_open returned, got %s",
				 json_type_name(v));
		if (c->stdin_data)
			return BAD_ARGS("\"stdin\" cannot be given to a session's cell: pass the data as a "
				 "variable or a file");
		c->session_id = xstrdup(json_string_value(v));
	}
	v = json_object_get(args, "packages");
	if (v && !json_is_null(v)) {
		size_t i;
		json_t *e;
		struct pc_err why = { 0 };
		if (!json_is_array(v))
			return BAD_ARGS("\"packages\" must be an array of requirements such as [\"pandas==2.2.3\"], got %s",
				 json_type_name(v));
		if (c->session_id)
			return BAD_ARGS("\"packages\" cannot be given to a session's cell: a session's interpreter "
				 "has its packages from the start");
		if (json_array_size(v) > PACKAGES_MAX)
			return BAD_ARGS("\"packages\": %zu requirements, at most %d", json_array_size(v), PACKAGES_MAX);
		c->packages = xcalloc(json_array_size(v) + 1, sizeof(char *));
		json_array_foreach(v, i, e) {
			if (!json_is_string(e) || strlen(json_string_value(e)) != json_string_length(e))
				return BAD_ARGS("packages[%zu] must be a string such as \"pandas==2.2.3\", got %s", i,
					 json_type_name(e));
			c->packages[c->n_packages++] = xstrdup(json_string_value(e));
		}
		if (packages_check(&s->env->policy, c->packages, c->n_packages, &why) < 0)
			return BAD_ARGS("%s", why.msg);
	}
	v = json_object_get(args, "max_output_bytes");
	if (v && !json_is_null(v)) {
		uint64_t max = s->env->policy.limits.output_bytes;
		if (!json_is_integer(v) || json_integer_value(v) < OUTPUT_BYTES_MIN)
			return BAD_ARGS("\"max_output_bytes\" must be an integer of at least %d, got %s",
				 OUTPUT_BYTES_MIN, json_is_integer(v) ? "less" : json_type_name(v));
		if ((uint64_t)json_integer_value(v) > max)
			return BAD_ARGS("\"max_output_bytes\" %lld is above this server's limit of %llu: use "
				 "at most that or leave it out", (long long)json_integer_value(v),
				 (unsigned long long)max);
		c->output_bytes = (uint64_t)json_integer_value(v);
	}
	v = json_object_get(args, "timeout_s");
	if (v && !json_is_null(v)) {
		double t;
		if (!json_is_number(v))
			return BAD_ARGS("\"timeout_s\" must be a number of seconds, got %s", json_type_name(v));
		t = json_number_value(v);
		if (!(t > 0) || !isfinite(t))
			return BAD_ARGS("\"timeout_s\" must be greater than 0, got %g", t);
		if (max_ms && t * 1000 > (double)max_ms)
			return BAD_ARGS("\"timeout_s\" %g is above this server's limit of %g s: use at most %g "
				 "or leave it out", t, (double)max_ms / 1000, (double)max_ms / 1000);
		t = ceil(t * 1000);
		c->timeout_ms = t < 1 ? 1 : (uint64_t)t;
	}
	return 0;
}


int mcp_check_param_headers(const struct mcp_server *s, const json_t *params,
			    char *(*header)(void *ctx, const char *name, size_t *len), void *ctx,
			    char *why, size_t why_size)
{
	const json_t *name = json_object_get(params, "name"), *args = json_object_get(params, "arguments");
	const json_t *tool = NULL, *t, *p;
	const char *key;
	size_t i;
	json_array_foreach(s->tools, i, t)
		if (json_equal(json_object_get(t, "name"), name))
			tool = t;
	json_object_foreach(json_object_get(json_object_get(tool, "inputSchema"), "properties"), key, p) {
		const char *h = json_string_value(json_object_get(p, "x-mcp-header"));
		const json_t *v = json_object_get(args, key);
		size_t len = 0;
		cleanup_free char *got = NULL;
		if (!h)
			continue;
		got = header(ctx, h, &len);
		/* none, or not a string: the argument check says what is wrong */
		if (!json_is_string(v) && !got)
			continue;
		if (!got) {
			snprintf(why, why_size, "Header mismatch: Mcp-Param-%s is missing; it carries the argument %s",
				 h, key);
			return -1;
		}
		/* the argument's own type is checked with the others */
		if (!json_is_string(v) || json_string_length(v) != len || memcmp(json_string_value(v), got, len)) {
			snprintf(why, why_size, "Header mismatch: Mcp-Param-%s does not match the argument %s", h, key);
			return -1;
		}
	}
	return 0;
}
