/* pycell: unit tests for the MCP tool definitions (src/mcp/tools.c) and
 * their schemas (the JSON files of src/mcp/schemas/, embedded at build
 * time). */
#include "config.h"

#include <string.h>

#include "base/util.h"
#include "cli/mcp_front.h"
#include "cli/options.h"
#include "config/policy.h"
#include "mcp/internal.h"
#include "mcp/render.h"
#include "mcp/tools.h"
#include "base/jsonrpc.h"
#include "unit.h"


/* The portable subset of JSON Schema that every client maps (the
 * Inspector's --strict, Gemini's function declarations): one type per
 * "type" (nullable as anyOf), no exclusiveMinimum/Maximum, and
 * additionalProperties only as false on a tool that takes no arguments
 * (strict-mode converters, OpenAI Agents', warn without it). */
static void check_portable(const char *file, const char *where, const json_t *v)
{
	const char *key;
	json_t *sub;
	size_t i;
	if (json_is_array(v)) {
		json_array_foreach ((json_t *)v, i, sub)
			check_portable(file, where, sub);
		return;
	}
	if (!json_is_object(v))
		return;
	json_object_foreach ((json_t *)v, key, sub) {
		ck_assert_msg(strcmp(key, "type") != 0 || json_is_string(sub), "%s: %s: a type array", file, where);
		ck_assert_msg(strcmp(key, "exclusiveMinimum") && strcmp(key, "exclusiveMaximum"),
			      "%s: %s: %s is not portable", file, where, key);
		ck_assert_msg(strcmp(key, "additionalProperties") ||
			      (json_is_false(sub) && json_object_size(json_object_get(v, "properties")) == 0),
			      "%s: %s: additionalProperties is not portable but as false where there are no properties",
			      file, where);
		if (strcmp(key, "enum") != 0 && strcmp(key, "required") != 0)
			check_portable(file, key, sub);
	}
}

/* Each schema is a JSON object schema in the portable subset; every
 * required key is a property, every property says its type (or its types,
 * anyOf) or what it is; and the embedded text is the file in the tree (a
 * stale schemas.c fails). */
START_TEST(test_schema_is_valid_and_embedded)
{
	const struct mcp_schema *sc = &mcp_schemas[_i];
	cleanup_free char *name = xasprintf("%s.json", sc->name);
	cleanup_free char *path = xasprintf("%s/src/mcp/schemas/%s", unit_srcdir(), name);
	cleanup_free char *file = NULL;
	json_error_t jerr;
	json_t *s = json_loads(sc->text, 0, &jerr), *props, *req, *v;
	const char *key;
	size_t i, len;
	bool owned = false;

	/* every schema is a tool's: TOOL.input or TOOL.output of a row */
	for (size_t k = 0; k < mcp_n_tool_rows; k++)
		owned |= mcp_schema_of(mcp_tool_rows[k].name, "input") == sc->text ||
			 mcp_schema_of(mcp_tool_rows[k].name, "output") == sc->text;
	ck_assert_msg(owned, "src/mcp/schemas/%s is no tool's: a row of mcp_tool_rows is named by what is before "
		      ".input.json or .output.json", name);

	ck_assert_msg(s != NULL, "%s: %s (line %d)", name, jerr.text, jerr.line);
	ck_assert_msg(read_file(path, 1 << 20, &file, &len) == 0, "read %s", path);
	ck_assert_msg(strcmp(file, sc->text) == 0, "%s: the embedded copy differs (make)", path);
	ck_assert_str_eq(json_string_value(json_object_get(s, "type")), "object");
	props = json_object_get(s, "properties");
	ck_assert_msg(json_is_object(props), "%s: no properties", name);
	json_object_foreach(props, key, v)
		ck_assert_msg(json_is_object(v) && (json_object_get(v, "type") || json_object_get(v, "anyOf") ||
						    json_object_get(v, "description")),
			      "%s: property %s says neither its type nor what it is", name, key);
	req = json_object_get(s, "required");
	json_array_foreach(req, i, v)
		ck_assert_msg(json_object_get(props, json_string_value(v)) != NULL,
			      "%s: required %s is not a property", name, json_string_value(v));
	check_portable(name, "the schema", s);
	json_decref(s);
}
END_TEST

/* The tools as tools/list offers them, for the default policy. */
START_TEST(test_tools_of_the_default_policy)
{
	struct policy p;
	json_t *tools, *t;
	size_t i;
	policy_init_default(&p);
	tools = mcp_tools_new(&p);
	ck_assert_ptr_nonnull(tools);
	/* the default policy enables every row, listed in the table's order */
	ck_assert_uint_eq(json_array_size(tools), mcp_n_tool_rows);
	json_array_foreach(tools, i, t) {
		const struct mcp_tool_row *row = &mcp_tool_rows[i];
		json_t *ann = json_object_get(t, "annotations");
		ck_assert_str_eq(json_string_value(json_object_get(t, "name")), row->name);
		ck_assert_str_eq(json_string_value(json_object_get(t, "title")), row->title);
		ck_assert(json_is_true(json_object_get(ann, "readOnlyHint")) == row->read_only);
		ck_assert(json_is_true(json_object_get(ann, "destructiveHint")) == row->destructive);
		ck_assert(json_is_true(json_object_get(ann, "idempotentHint")) == row->idempotent);
		ck_assert_ptr_eq(mcp_tool_row(json_object_get(t, "name")), row);
		ck_assert(json_is_string(json_object_get(t, "description")));
		ck_assert(json_is_object(json_object_get(t, "inputSchema")));
		ck_assert(json_is_object(json_object_get(t, "outputSchema")));
		ck_assert(json_is_object(json_object_get(t, "annotations")));
	}
	/* the policy's 30 s is the most a call may ask for */
	t = json_object_get(json_object_get(json_object_get(json_array_get(tools, 0), "inputSchema"), "properties"),
			    "timeout_s");
	ck_assert(json_real_value(json_object_get(t, "maximum")) == 30.0);
	json_decref(tools);
	policy_free(&p);
}
END_TEST

/* sessions.max 0: no session tools */
START_TEST(test_no_session_tools_without_sessions)
{
	struct policy p;
	json_t *tools, *t;
	size_t k;
	char *names;
	policy_init_default(&p);
	p.sessions.max = 0;
	tools = mcp_tools_new(&p);
	/* the rows the policy enables, in order; the session tools are off */
	for (size_t i = 0; i < mcp_n_tool_rows; i++) {
		const struct mcp_tool_row *row = &mcp_tool_rows[i];
		bool listed = false;
		json_array_foreach(tools, k, t)
			listed |= json_str_eq(json_object_get(t, "name"), row->name);
		ck_assert_msg(listed == mcp_tool_enabled(row, &p), "%s: listed %d", row->name, listed);
		ck_assert(!strncmp(row->name, "session_", 8) ? !listed : listed);
	}
	names = mcp_tool_names(&p);
	ck_assert(strstr(names, "run_python") && strstr(names, " and ") && !strstr(names, "session_"));
	free(names);
	json_decref(tools);
	policy_free(&p);
}
END_TEST

/* JSON-RPC classification (src/base/jsonrpc.c): \u0000 loads, but a
 * method with one is invalid, and json_str_eq compares every byte. */
static const struct { const char *text; enum jsonrpc_kind kind; const char *why; } messages[] = {
	{ "{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"ping\"}", JSONRPC_REQUEST, NULL },
	{ "{\"jsonrpc\": \"2.0\", \"method\": \"x\", \"params\": {\"code\": \"a\\u0000b\"}}", JSONRPC_NOTIFICATION, NULL },
	{ "{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"ping\\u0000\"}", JSONRPC_INVALID,
	  "\"method\" must not contain \\u0000" },
	{ "{\"jsonrpc\": \"2.0\\u0000\", \"id\": 1, \"method\": \"ping\"}", JSONRPC_INVALID,
	  "\"jsonrpc\" must be \"2.0\"" },
};

START_TEST(test_jsonrpc_nul)
{
	json_t *err = NULL, *msg = jsonrpc_parse(messages[_i].text, strlen(messages[_i].text), &err);
	struct jsonrpc_msg m;
	ck_assert_msg(msg != NULL, "%s refused", messages[_i].text);
	jsonrpc_classify(msg, &m);
	ck_assert_int_eq(m.kind, messages[_i].kind);
	if (messages[_i].why)
		ck_assert_str_eq(m.why, messages[_i].why);
	json_decref(msg);
}
END_TEST

/* A raw NUL byte is not JSON: jansson alone would read "[1<NUL>]" as [1]
 * (fuzz_jsonrpc found its id finder and the parser disagreeing). */
START_TEST(test_jsonrpc_raw_nul_is_a_parse_error)
{
	static const char *const texts[] = { "[1\0]", "{\"jsonrpc\": \"2.0\", \"id\": {\"a\": 17\0}}",
					     "{\"a\": \"x\0y\"}", "\0" };
	static const size_t lens[] = { 4, 36, 12, 1 };
	for (size_t i = 0; i < ARRAY_SIZE(texts); i++) {
		json_t *err = NULL, *msg = jsonrpc_parse(texts[i], lens[i], &err);
		ck_assert_msg(msg == NULL, "text %zu was taken", i);
		ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(err, "error"), "code")), -32700);
		ck_assert_str_eq(json_string_value(json_object_get(json_object_get(json_object_get(err, "error"),
									       "data"), "detail")),
				 "a NUL byte (write \\u0000 in a string)");
		ck_assert_ptr_null(json_object_get(err, "id"));
		json_decref(err);
	}
}
END_TEST

START_TEST(test_json_str_eq_compares_every_byte)
{
	json_t *a = json_stringn("run_python\0x", 12), *b = json_string("run_python");
	ck_assert(!json_str_eq(a, "run_python"));
	ck_assert(json_str_eq(b, "run_python"));
	ck_assert(!json_str_eq(b, "run_pytho"));
	ck_assert(!json_str_eq(NULL, "x"));
	json_decref(a);
	json_decref(b);
}
END_TEST

/* Every row has its entry in pycell(1) (".TP" then ".B name", in pycell
 * mcp's section) and is named by the --help of both MCP commands. */
START_TEST(test_every_tool_is_in_the_man_page_and_help)
{
	const struct mcp_tool_row *row = &mcp_tool_rows[_i];
	char *path = xasprintf("%s/man/pycell.1", unit_srcdir()), *man = NULL, *entry, *mcp, *serve;
	cleanup_free char *mcp_help = front_help(cli_mcp_cmd.usage);
	cleanup_free char *serve_help = front_help(cli_serve_cmd.usage);
	size_t len;

	ck_assert_msg(read_file(path, 1 << 20, &man, &len) == 0, "read %s", path);
	mcp = strstr(man, ".SS \"pycell mcp");
	serve = strstr(man, ".SS \"pycell serve");
	ck_assert(mcp && serve);
	entry = xasprintf("\n.TP\n.B %s\n", row->name);
	ck_assert_msg(strstr(mcp, entry) && strstr(mcp, entry) < serve, "pycell(1) has no entry for the tool %s "
		      "in pycell mcp's list of tools", row->name);
	ck_assert_msg(strstr(mcp_help, row->name), "pycell mcp --help does not name %s", row->name);
	ck_assert_msg(strstr(serve_help, row->name), "pycell serve --help does not name %s", row->name);
	if (row->enabled)
		ck_assert_msg(strstr(mcp_help, row->off), "pycell mcp --help does not say when %s is off", row->name);
	ck_assert_msg(mcp_schema_of(row->name, "input") && mcp_schema_of(row->name, "output"),
		      "src/mcp/schemas/ lacks %s.input.json or %s.output.json", row->name, row->name);
	ck_assert_msg(row->call && (row->description || row->describe) && (!row->enabled || row->off),
		      "the row of %s lacks a handler, a description or why it may be off", row->name);
	free(entry);
	free(man);
	free(path);
}
END_TEST

/* pycell(1) lists the tools in the table's order and no other: the MCP
 * tests take what tools/list must show from it. */
START_TEST(test_the_man_page_lists_the_tools_in_order)
{
	char *path = xasprintf("%s/man/pycell.1", unit_srcdir()), *man = NULL, *p, *serve;
	size_t len, n = 0;

	ck_assert_msg(read_file(path, 1 << 20, &man, &len) == 0, "read %s", path);
	p = strstr(man, ".SS \"pycell mcp");
	serve = strstr(man, ".SS \"pycell serve");
	ck_assert(p && serve);
	while ((p = strstr(p, "\n.TP\n.B ")) && p < serve) {
		size_t k;
		p += strlen("\n.TP\n.B ");
		k = strspn(p, "abcdefghijklmnopqrstuvwxyz_");
		if (k == 0 || p[k] != '\n')
			continue;   /* an option's entry */
		ck_assert_msg(n < mcp_n_tool_rows, "pycell(1) lists a tool the table lacks: %.*s", (int)k, p);
		ck_assert_msg(strlen(mcp_tool_rows[n].name) == k && strncmp(p, mcp_tool_rows[n].name, k) == 0,
			      "pycell(1)'s tool %zu is %.*s; the table's is %s", n + 1, (int)k, p, mcp_tool_rows[n].name);
		n++;
	}
	ck_assert_uint_eq(n, mcp_n_tool_rows);
	free(man);
	free(path);
}
END_TEST

Suite *mcp_suite(void)
{
	Suite *s = suite_create("mcp");
	TCase *t = tcase_create("tools");
	tcase_add_loop_test(t, test_schema_is_valid_and_embedded, 0, (int)mcp_n_schemas);
	tcase_add_test(t, test_tools_of_the_default_policy);
	tcase_add_test(t, test_no_session_tools_without_sessions);
	tcase_add_loop_test(t, test_every_tool_is_in_the_man_page_and_help, 0, (int)mcp_n_tool_rows);
	tcase_add_test(t, test_the_man_page_lists_the_tools_in_order);
	tcase_add_loop_test(t, test_jsonrpc_nul, 0, (int)ARRAY_SIZE(messages));
	tcase_add_test(t, test_json_str_eq_compares_every_byte);
	tcase_add_test(t, test_jsonrpc_raw_nul_is_a_parse_error);
	suite_add_tcase(s, t);
	return s;
}
