/* pycell: the tool bridge's allowlist matching and the audit log's SHA-256. */
#include "config.h"

#include <string.h>

#include "base/sha256.h"
#include "bridge/audit.h"
#include "bridge/bridge.h"
#include "unit.h"

static bool allowed(const struct policy *p, const char *name, size_t len)
{
	return bridge_name_allowed(p, name, len);
}
#define ALLOWED(p, s) allowed(p, s, sizeof(s) - 1)

START_TEST(test_exact_names_and_patterns)
{
	char *allow[] = { "memory.read_graph", "fs.*" };
	struct policy p = { .tools_allow = allow, .n_tools_allow = 2 };

	ck_assert(ALLOWED(&p, "memory.read_graph"));
	ck_assert(ALLOWED(&p, "fs.read_text_file"));
	ck_assert(ALLOWED(&p, "fs.x"));
	ck_assert(ALLOWED(&p, "fs.a.b"));
	/* case, white space, NUL, prefixes, look-alikes */
	ck_assert(!ALLOWED(&p, "Memory.read_graph"));
	ck_assert(!ALLOWED(&p, "memory.READ_GRAPH"));
	ck_assert(!ALLOWED(&p, "memory.read_graph "));
	ck_assert(!ALLOWED(&p, " memory.read_graph"));
	ck_assert(!ALLOWED(&p, "memory.read_graph\n"));
	ck_assert(!ALLOWED(&p, "memory.read_graph\0"));
	ck_assert(!ALLOWED(&p, "memory.read_grap"));
	ck_assert(!ALLOWED(&p, "memory.read_graphs"));
	ck_assert(!ALLOWED(&p, "memory.*"));
	ck_assert(!ALLOWED(&p, "memory"));
	ck_assert(!ALLOWED(&p, "m\xd0\xb5mory.read_graph"));  /* Cyrillic e */
	ck_assert(!ALLOWED(&p, "fs."));
	ck_assert(!ALLOWED(&p, "fs"));
	ck_assert(!ALLOWED(&p, "FS.read_text_file"));
	ck_assert(!ALLOWED(&p, "fsx.read_text_file"));
	ck_assert(!ALLOWED(&p, "f.s.read"));
	ck_assert(!ALLOWED(&p, "fs\0.read_text_file"));
	ck_assert(!ALLOWED(&p, "fs.read\0"));
	ck_assert(!ALLOWED(&p, "xfs.read"));
	ck_assert(!ALLOWED(&p, ""));
	ck_assert(!ALLOWED(&p, "*"));
	/* the length given is what counts, not a NUL in the buffer */
	ck_assert(!allowed(&p, "memory.read_graph", 6));
	ck_assert(!allowed(&p, "fs.read_text_file", 3));
}
END_TEST

START_TEST(test_nothing_allowed_by_default)
{
	struct policy p = { 0 };
	ck_assert(!ALLOWED(&p, "memory.read_graph"));
	ck_assert(!ALLOWED(&p, ""));
}
END_TEST

START_TEST(test_sha256_vectors)
{
	/* FIPS 180-4 examples, and lengths around the padding boundary */
	static const struct { const char *in; const char *hex; } v[] = {
		{ "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" },
		{ "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" },
		{ "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
		  "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1" },
		{ "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
		  "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1" },
	};
	char out[65];
	char *million = xmalloc(1000000);
	for (size_t i = 0; i < ARRAY_SIZE(v); i++) {
		sha256_hex(v[i].in, strlen(v[i].in), out);
		ck_assert_str_eq(out, v[i].hex);
	}
	memset(million, 'a', 1000000);
	sha256_hex(million, 1000000, out);
	ck_assert_str_eq(out, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
	free(million);
}
END_TEST

Suite *bridge_suite(void)
{
	Suite *s = suite_create("bridge");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_exact_names_and_patterns);
	tcase_add_test(tc, test_nothing_allowed_by_default);
	tcase_add_test(tc, test_sha256_vectors);
	suite_add_tcase(s, tc);
	return s;
}
