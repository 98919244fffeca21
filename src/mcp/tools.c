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
	 * reachable through it.  Allowed tool calls do reach outside. */
	return p->n_tools_allow > 0;
}

static json_t *run_python_tool(const struct policy *p)
{
	char mem[32], out[32], timeout[48] = "no time limit";
	json_t *input, *output, *tool;
	cleanup_free char *desc = NULL;

	jc_format_size(mem, sizeof(mem), p->limits.memory_bytes);
	jc_format_size(out, sizeof(out), p->limits.output_bytes);
	if (p->limits.timeout_ms)
		snprintf(timeout, sizeof(timeout), "%g s wall clock", (double)p->limits.timeout_ms / 1000);
	desc = xasprintf(
		"Run Python code in a fresh, isolated sandbox (CPython in a Linux jail) and get its output.\n\n"
		"Each call starts a new interpreter: nothing (variables, imports, files) persists between calls, "
		"so pass data in with `variables` and return what you need. The code runs like a notebook cell: "
		"statements run in order and the value of a final expression is returned as `return_value` (JSON "
		"when it can be serialised, else its repr); print() output is in stdout. An uncaught exception "
		"fails the call with the traceback in stderr.\n\n"
		"Limits: %s (`timeout_s` may lower it), %s of memory%s, %s of output per stream, %s. Writable: "
		"/tmp and the working directory /workspace, both empty at the start and discarded after. Only the "
		"Python standard library and packages installed on the server are available; pip install does not "
		"work.%s",
		timeout, p->limits.memory_bytes ? mem : "no limit", "", out,
		p->network == NET_NONE ? "no network access" : "network limited to the sandbox's own loopback",
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

static json_t *sandbox_info_tool(void)
{
	json_t *input = json_loads(mcp_schema_sandbox_info_input, 0, NULL);
	json_t *output = json_loads(mcp_schema_sandbox_info_output, 0, NULL);
	if (!input || !output) {
		json_decref(input);
		json_decref(output);
		return NULL;
	}
	return json_pack("{s:s,s:s,s:s,s:o,s:o,s:{s:s,s:b,s:b,s:b,s:b}}",
		"name", "sandbox_info",
		"title", "Sandbox info",
		"description",
			"Describe the sandbox that run_python uses: the Python version, the backend, the policy "
			"name, the resource limits and the MCP tools the code may call.",
		"inputSchema", input,
		"outputSchema", output,
		"annotations", "title", "Sandbox info", "readOnlyHint", 1, "destructiveHint", 0,
			"idempotentHint", 1, "openWorldHint", 0);
}

json_t *mcp_tools_new(const struct policy *p)
{
	json_t *run = run_python_tool(p), *info = sandbox_info_tool();
	if (!run || !info) {
		json_decref(run);
		json_decref(info);
		return NULL;
	}
	return json_pack("[o,o]", run, info);
}

/* The tool as a client of this protocol version knows it. */
json_t *mcp_tool_for(const json_t *tool, enum proto v)
{
	json_t *t = json_deep_copy(tool);
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
		    strcmp(key, "timeout_s") != 0 && strcmp(key, RAW_VARIABLES_KEY) != 0) {
			return BAD_ARGS("unknown argument \"%.*s\"; run_python takes code, variables, "
				 "stdin and timeout_s", utf8_prefix(key, 64), key);
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

