/* pycell: MCP: what a result looks like to the client: the readable
 * text block beside the structured content, tool errors, sandbox_info. */
#include "config.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/jsonrpc.h"
#include "config/json_check.h"
#include "config/policy_fields.h"
#include "config/result.h"
#include "jail/jail.h"
#include "mcp/internal.h"
#include "mcp/render.h"

struct sbuf {
	char *s;
	size_t len, cap;
};

static void sb_add(struct sbuf *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->len + n + 1)
			cap *= 2;
		b->s = xrealloc(b->s, cap);
		b->cap = cap;
	}
	memcpy(b->s + b->len, s, n);
	b->len += n;
	b->s[b->len] = '\0';
}

static void sb_addf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_addf(struct sbuf *b, const char *fmt, ...)
{
	char *s;
	int n;
	va_list ap;
	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	sb_add(b, s, (size_t)n);
	free(s);
}

static void sb_section(struct sbuf *b, const json_t *res, const char *stream)
{
	const json_t *text = json_object_get(res, stream);
	json_int_t dropped = json_integer_value(json_object_get(json_object_get(res, "dropped_bytes"), stream));
	bool truncated = json_is_true(json_object_get(json_object_get(res, "truncated"), stream));
	size_t n = json_string_length(text);
	if (!n && !truncated)
		return;
	if (truncated)
		sb_addf(b, "\n--- %s (truncated: %zu bytes kept, %lld dropped) ---\n", stream, n, (long long)dropped);
	else
		sb_addf(b, "\n--- %s ---\n", stream);
	sb_add(b, json_string_value(text), n);
	if (n && json_string_value(text)[n - 1] != '\n')
		sb_add(b, "\n", 1);
}

/* The images and files a run sent back, as the text block lists them. */
static void sb_outputs(struct sbuf *b, const json_t *res)
{
	const json_t *images = json_object_get(res, "images"), *files = json_object_get(res, "files");
	const json_t *output = json_object_get(json_object_get(res, "session"), "output"), *e;
	size_t i;
	if (json_array_size(images)) {
		sb_addf(b, "\n--- images (%zu, as image content) ---\n", json_array_size(images));
		json_array_foreach(images, i, e)
			sb_addf(b, "%s: %lld bytes of %s\n", json_string_value(json_object_get(e, "source")),
				(long long)json_integer_value(json_object_get(e, "bytes")),
				json_string_value(json_object_get(e, "mime_type")));
	}
	if (json_array_size(files)) {
		sb_addf(b, "\n--- files changed in /workspace ---\n");
		json_array_foreach(files, i, e) {
			const char *path = json_string_value(json_object_get(e, "path"));
			const char *uri = json_string_value(json_object_get(e, "uri"));
			if (json_is_true(json_object_get(e, "deleted"))) {
				sb_addf(b, "%s: deleted\n", path);
				continue;
			}
			sb_addf(b, "%s: %lld bytes, %s", path, (long long)json_integer_value(json_object_get(e, "size")),
				json_string_value(json_object_get(e, "mime_type")));
			if (uri)
				sb_addf(b, ", %s\n", uri);
			else
				sb_addf(b, ", not kept: past the bytes a call keeps\n");
		}
	}
	if (json_object_size(output) && (json_is_true(json_object_get(json_object_get(res, "truncated"), "stdout")) ||
					  json_is_true(json_object_get(json_object_get(res, "truncated"), "stderr")))) {
		const char *k;
		json_t *uri;
		sb_addf(b, "\n--- the cell's whole output ---\n");
		json_object_foreach((json_t *)output, k, uri)
			sb_addf(b, "%s: %s\n", k, json_string_value(uri));
	}
}

/* The readable text block of a run_python result: a JSON string, with
 * whatever bytes the streams hold (a NUL of the output included). */
json_t *mcp_result_text(const json_t *res, const struct run_result *r, const struct policy *p,
			uint64_t timeout_ms)
{
	struct sbuf b = { 0 };
	const json_t *rv = json_object_get(res, "return_value");
	double secs = (double)r->duration_ms / 1000;
	char mem[32];
	json_t *text;

	switch (r->status) {
	case RUN_OK:
		sb_addf(&b, "status: ok (exit code 0, %.3g s)\n", secs);
		break;
	case RUN_ERROR:
		if (r->signal)
			sb_addf(&b, "status: error: killed by signal %d (%s) after %.3g s\n", r->signal,
				sigabbrev_np(r->signal) ? sigabbrev_np(r->signal) : "?", secs);
		else
			sb_addf(&b, "status: error (exit code %d, %.3g s)\n", r->exit_code, secs);
		break;
	case RUN_TIMEOUT:
		sb_addf(&b, "status: timeout: killed at the time limit of %g s\n", (double)timeout_ms / 1000);
		break;
	case RUN_MEMORY_LIMIT:
		jc_format_size(mem, sizeof(mem), p->limits.memory_bytes);
		sb_addf(&b, "status: memory_limit: killed for using more than %s of memory\n", mem);
		break;
	case RUN_KILLED:
		sb_addf(&b, "status: killed: the run was stopped before it finished\n");
		break;
	case RUN_SETUP_FAILED:
		sb_addf(&b, "status: setup_failed: the sandbox could not be set up (%s: %s). This is a "
			"problem of the server, not of the code.\n", r->setup_error.step, r->setup_error.msg);
		break;
	default:
		sb_addf(&b, "status: %s\n", run_status_name(r->status));
		break;
	}
	sb_section(&b, res, "stdout");
	sb_section(&b, res, "stderr");
	if (rv && !json_is_null(rv)) {
		cleanup_free char *s = json_dumps(rv, JSON_ENCODE_ANY | JSON_COMPACT);
		sb_addf(&b, "\n--- return_value ---\n%s\n", s ? s : "?");
	}
	sb_outputs(&b, res);
	text = json_text(b.s, b.len);   /* valid UTF-8 but for what a setup error quotes */
	free(b.s);
	return text;
}

json_t *mcp_tool_result(enum proto v, json_t *text, json_t *structured, bool is_error)
{
	json_t *r = json_pack("{s:[{s:s,s:o}],s:b}", "content", "type", "text", "text", text, "isError", is_error);
	if (structured && v >= PROTO_2025_06_18)
		json_object_set(r, "structuredContent", structured);
	json_decref(structured);
	return r;
}

json_t *mcp_tool_error(enum proto v, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	utf8_trim_tail(buf);
	return mcp_tool_result(v, json_string(buf), NULL, true);
}

/* The module a server's tools are in a jail (pycell.tools.NAME), as
 * runtime/pycell/_codemode.py's py_name makes it from the first n bytes
 * of server: "-" (any character not in an identifier) to "_", "_" before
 * a leading digit, "_" after a keyword. */
static char *mcp_tools_module(const char *server, size_t n)
{
	static const char *const keywords[] = {
		"False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
		"def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import", "in",
		"is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while", "with", "yield",
	};
	bool digit = n == 0 || (server[0] >= '0' && server[0] <= '9');
	char *m = xmalloc(n + 3), *o = m;
	if (digit)
		*o++ = '_';
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)server[i];
		*o++ = (c < 128 && (isalnum(c) || c == '_')) ? (char)c : '_';
	}
	*o = '\0';
	for (size_t i = 0; i < ARRAY_SIZE(keywords); i++)
		if (strcmp(m, keywords[i]) == 0) {
			*o++ = '_';
			*o = '\0';
		}
	return m;
}

char *mcp_tools_modules_text(const struct policy *p)
{
	char *out = NULL;
	for (size_t i = 0; i < p->n_tools_allow; i++) {
		const char *pat = p->tools_allow[i];
		size_t n = strcspn(pat, ".");
		bool seen = false;
		for (size_t j = 0; j < i; j++)
			seen |= strncmp(p->tools_allow[j], pat, n + 1) == 0;
		if (!seen) {
			cleanup_free char *m = mcp_tools_module(pat, n);
			char *more = xasprintf("%s%s%s", out ? out : "", out ? ", " : "", m);
			free(out);
			out = more;
		}
	}
	return out;
}

/* sandbox_info's servers: each with its module and how many of its tools
 * the code may call, from the tools list (names SERVER.TOOL) */
static json_t *servers_of(const json_t *tools)
{
	json_t *out = json_array(), *t, *row;
	size_t i, j;
	json_array_foreach (tools, i, t) {
		const char *name = json_string_value(json_object_get(t, "name"));
		size_t n = name ? strcspn(name, ".") : 0;
		bool found = false;
		if (!name || !name[n])
			continue;
		json_array_foreach (out, j, row) {
			const char *s = json_string_value(json_object_get(row, "name"));
			if (strlen(s) == n && strncmp(s, name, n) == 0) {
				json_object_set_new(row, "tools",
						    json_integer(json_integer_value(json_object_get(row, "tools")) + 1));
				found = true;
				break;
			}
		}
		if (!found) {
			cleanup_free char *s = strndup(name, n);
			cleanup_free char *m = mcp_tools_module(name, n);
			json_array_append_new(out, json_pack("{s:s,s:s,s:i}", "name", s, "module", m, "tools", 1));
		}
	}
	return out;
}

json_t *mcp_sandbox_info(struct mcp_server *s)
{
	const struct policy *p = &s->env->policy;
	json_t *pj = policy_to_json(p);
	json_t *tools;
	json_t *info;
	if (s->cfg.jail_tools) {
		tools = s->cfg.jail_tools(s->cfg.tool_ctx, p);
	} else {
		tools = json_array();
		for (size_t i = 0; i < p->n_tools_allow; i++)
			json_array_append_new(tools, json_pack("{s:s}", "pattern", p->tools_allow[i]));
	}
	info = json_pack("{s:s?,s:s?,s:s,s:s,s:O,s:O,s:o,s:I,s:I,s:s}",
		"python_version", s->python_version,
		"python_implementation", s->python_impl,
		"backend", p->backend ? p->backend : "native",
		"policy", p->name ? p->name : "default",
		"limits", json_object_get(pj, "limits"),
		"network", json_object_get(pj, "network"),
		"tools", tools ? tools : json_array(),
		"tool_budget", (json_int_t)p->tools_budget,
		"max_concurrent_runs", (json_int_t)s->cfg.max_runs,
		"pycell_version", PACKAGE_VERSION);
	json_decref(pj);
	/* a wasm server's runs go bare where the host refuses namespaces */
	json_object_set_new(info, "layers", result_layers_json(jail_layers(
		policy_is_wasm(p), policy_is_wasm(p) && jail_namespaces_refused(NULL))));
	json_object_set_new(info, "servers", servers_of(json_object_get(info, "tools")));
	json_object_set_new(info, "preload", run_env_preload(s->env));
	json_object_set_new(info, "packages", s->packages ? json_incref(s->packages) : json_array());
	if (p->packages.index)
		json_object_set_new(info, "installable", json_pack("{s:s,s:o}", "index", p->packages.index, "allow",
								   pv_strv_json(p->packages.allow, p->packages.n_allow)));
	return info;
}

json_t *mcp_structured_result(enum proto v, json_t *st)
{
	cleanup_free char *text = json_dumps(st, JSON_INDENT(2));
	return mcp_tool_result(v, json_string(text ? text : "{}"), st, false);
}
