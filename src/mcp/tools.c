/* pycell: MCP: the table of tools (one row each: its name, schemas,
 * annotations, whether the policy enables it, and its handler; the schemas
 * are the JSON files of src/mcp/schemas/, embedded at build time), their
 * definitions as tools/list gives them, and the checks of run_python's
 * arguments. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/jsonrpc.h"
#include "config/json_check.h"
#include "mcp/internal.h"
#include "mcp/render.h"
#include "mcp/sessions.h"
#include "mcp/tools.h"

static bool policy_open_world(const struct policy *p)
{
	/* Loopback is the jail's own network namespace: nothing outside is
	 * reachable through it.  Allowed tool calls and egress do reach outside. */
	return p->n_tools_allow > 0 || p->network.mode == NET_EGRESS;
}

static char *run_python_description(const struct policy *p)
{
	char mem[32], out[32], timeout[48] = "no time limit";
	cleanup_free char *net = NULL, *modules = mcp_tools_modules_text(p), *tools = NULL;

	if (modules)
		tools = xasprintf("\n\nThe code may call the MCP tools this server allows, as Python functions in a "
				  "module per server (%s): `from pycell.tools import SERVER`, then "
				  "`SERVER.TOOL(arg=...)`, which returns the tool's result as Python values. "
				  "help(SERVER) lists its tools and their arguments; pycell.tools.search(\"words\") "
				  "finds tools by name and description; sandbox_info lists the servers.", modules);
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
	return xasprintf(
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
		tools ? tools : "");
}

/* packages only where the policy names an index to install from */
static void drop_packages_without_index(json_t *tool, const struct policy *p)
{
	if (!p->packages.index)
		json_object_del(json_object_get(json_object_get(tool, "inputSchema"), "properties"), "packages");
}

static void run_python_shape(json_t *tool, const struct policy *p)
{
	drop_packages_without_index(tool, p);
	/* the policy's limit is the most a call may ask for */
	if (p->limits.timeout_ms)
		json_object_set_new(json_object_get(json_object_get(json_object_get(tool, "inputSchema"), "properties"),
						    "timeout_s"),
				    "maximum", json_real((double)p->limits.timeout_ms / 1000));
}

static char *session_open_description(const struct policy *p)
{
	char idle[32], life[32];

	jc_format_duration(idle, sizeof(idle), p->sessions.idle_ms);
	jc_format_duration(life, sizeof(life), p->sessions.lifetime_ms);
	return xasprintf(
		"Open a session: one sandboxed Python interpreter kept alive across run_python calls that "
		"pass its session_id, like the cells of a notebook (globals, imports and the files in "
		"/workspace persist; each cell has its own output, result and timeout). A cell that runs out "
		"of time is interrupted (KeyboardInterrupt) and the session keeps its state; one that does "
		"not stop is killed with its session. After %s without a cell a session is paused if the "
		"server keeps state (its globals and /workspace saved, its memory freed; its next cell "
		"resumes it, even after the server restarted), else closed; it is closed once it has lived "
		"%s, or by session_close; at most %u are open per client. Only this client can use its "
		"session_id.", idle, life, p->sessions.max_per_client);
}

static bool sessions_on(const struct policy *p)
{
	return p->sessions.max > 0;
}

#define SESSIONS_OFF "sessions are off in this server's policy (sessions.max is 0)"

/* The tools, in the order tools/list gives them. */
const struct mcp_tool_row mcp_tool_rows[] = {
	{ .name = "run_python", .title = "Run Python",
	  .describe = run_python_description, .shape = run_python_shape, .open_world = policy_open_world,
	  .call = mcp_tool_run_python },
	{ .name = "sandbox_info", .title = "Sandbox info",
	  .description = "Describe the sandbox that run_python uses: the Python version, the backend, the "
			 "policy name, the resource limits and the MCP tools the code may call.",
	  .read_only = true, .idempotent = true, .call = mcp_tool_sandbox_info },
	{ .name = "session_open", .title = "Open a Python session",
	  .describe = session_open_description, .shape = drop_packages_without_index,
	  .enabled = sessions_on, .off = SESSIONS_OFF, .call = mcp_tool_session_open },
	{ .name = "session_close", .title = "Close a Python session",
	  .description = "Close a session, open or paused: its interpreter, processes and files are gone.",
	  .destructive = true, .enabled = sessions_on, .off = SESSIONS_OFF, .call = mcp_tool_session_close },
	{ .name = "session_list", .title = "List Python sessions",
	  .description = "List this client's sessions, open and paused: id, cells run, whether one is running, "
			 "whether it is paused, age, idle time and when it closes.",
	  .read_only = true, .idempotent = true, .enabled = sessions_on, .off = SESSIONS_OFF,
	  .call = mcp_tool_session_list },
	{ .name = "session_fork", .title = "Fork a Python session",
	  .description = "Copy a session (open or paused) into a new one with the same globals, imports and "
			 "/workspace files; both then run on apart. What cannot be copied (sockets, threads, "
			 "generators, open files, processes) is listed in the answer as not_kept. Returns the new "
			 "session_id.",
	  .enabled = sessions_on, .off = SESSIONS_OFF, .call = mcp_tool_session_fork },
};
const size_t mcp_n_tool_rows = ARRAY_SIZE(mcp_tool_rows);

bool mcp_tool_enabled(const struct mcp_tool_row *t, const struct policy *p)
{
	return !t->enabled || t->enabled(p);
}

const struct mcp_tool_row *mcp_tool_row(const json_t *name)
{
	for (size_t i = 0; i < mcp_n_tool_rows; i++)
		if (json_str_eq(name, mcp_tool_rows[i].name))
			return &mcp_tool_rows[i];
	return NULL;
}

/* "a, b and c" of n names. */
static char *and_list(const char **names, size_t n)
{
	char *all, *out;
	if (n == 1)
		return xstrdup(names[0]);
	all = strv_join((char **)names, n - 1, ", ");
	out = xasprintf("%s and %s", all, names[n - 1]);
	free(all);
	return out;
}

char *mcp_tool_names(const struct policy *p)
{
	const char *names[ARRAY_SIZE(mcp_tool_rows)];
	size_t n = 0;

	for (size_t i = 0; i < mcp_n_tool_rows; i++)
		if (mcp_tool_enabled(&mcp_tool_rows[i], p))
			names[n++] = mcp_tool_rows[i].name;
	return and_list(names, n);
}

/* text's words as lines of at most width columns, onto out. */
static void wrap_onto(char **out, const char *text, size_t width)
{
	size_t col = 0;
	char *next;
	cleanup_free char *copy = xstrdup(text);
	for (char *save = NULL, *w = strtok_r(copy, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
		size_t n = strlen(w);
		if (col && col + 1 + n > width) {
			next = xasprintf("%s\n%s", *out, w);
			col = n;
		} else {
			next = xasprintf("%s%s%s", *out, col ? " " : "", w);
			col += (col ? 1 : 0) + n;
		}
		free(*out);
		*out = next;
	}
	next = xasprintf("%s\n", *out);
	free(*out);
	*out = next;
}

char *mcp_tools_help(void)
{
	const char *names[ARRAY_SIZE(mcp_tool_rows)];
	char *out = xstrdup(""), *list, *text;

	for (size_t i = 0; i < mcp_n_tool_rows; i++)
		names[i] = mcp_tool_rows[i].name;
	list = and_list(names, mcp_n_tool_rows);
	text = xasprintf("Tools: %s.", list);
	wrap_onto(&out, text, 88);
	free(list);
	free(text);
	/* then, for each reason a tool may be off, the tools it turns off */
	for (size_t i = 0; i < mcp_n_tool_rows; i++) {
		const char *off = mcp_tool_rows[i].off;
		size_t n = 0;
		bool first = true;
		if (!off)
			continue;
		for (size_t k = 0; k < i; k++)
			first = first && !(mcp_tool_rows[k].off && strcmp(mcp_tool_rows[k].off, off) == 0);
		if (!first)
			continue;
		for (size_t k = i; k < mcp_n_tool_rows; k++)
			if (mcp_tool_rows[k].off && strcmp(mcp_tool_rows[k].off, off) == 0)
				names[n++] = mcp_tool_rows[k].name;
		list = and_list(names, n);
		text = xasprintf("Not listed when %s: %s.", off, list);
		wrap_onto(&out, text, 88);
		free(list);
		free(text);
	}
	return out;
}

const char *mcp_schema_of(const char *tool, const char *which)
{
	size_t n = strlen(tool);
	for (size_t i = 0; i < mcp_n_schemas; i++)
		if (strncmp(mcp_schemas[i].name, tool, n) == 0 && mcp_schemas[i].name[n] == '.' &&
		    strcmp(mcp_schemas[i].name + n + 1, which) == 0)
			return mcp_schemas[i].text;
	return NULL;
}

static json_t *schema_of(const char *tool, const char *which)
{
	const char *text = mcp_schema_of(tool, which);
	return text ? json_loads(text, 0, NULL) : NULL;
}

/* A row's definition, for policy p. */
static json_t *tool_of(const struct mcp_tool_row *t, const struct policy *p)
{
	json_t *input = schema_of(t->name, "input"), *output = schema_of(t->name, "output"), *tool;
	cleanup_free char *desc = t->describe ? t->describe(p) : xstrdup(t->description);

	if (!input || !output) {
		json_decref(input);
		json_decref(output);
		return NULL;
	}
	tool = json_pack("{s:s,s:s,s:s,s:o,s:o,s:{s:s,s:b,s:b,s:b,s:b}}",
		"name", t->name, "title", t->title, "description", desc, "inputSchema", input,
		"outputSchema", output,
		"annotations", "title", t->title, "readOnlyHint", t->read_only, "destructiveHint", t->destructive,
			"idempotentHint", t->idempotent, "openWorldHint", t->open_world ? t->open_world(p) : false);
	if (tool && t->shape)
		t->shape(tool, p);
	return tool;
}

json_t *mcp_tools_new(const struct policy *p)
{
	json_t *tools = json_array();
	for (size_t i = 0; i < mcp_n_tool_rows; i++) {
		json_t *t;
		if (!mcp_tool_enabled(&mcp_tool_rows[i], p))
			continue;
		if (!(t = tool_of(&mcp_tool_rows[i], p))) {
			json_decref(tools);
			return NULL;
		}
		json_array_append_new(tools, t);
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
