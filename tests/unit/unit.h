/* pycell: the C unit tests (Check).  One suite per file, each declared
 * here and added to the runner in test_main.c. */
#ifndef PYCELL_UNIT_H
#define PYCELL_UNIT_H

#include <check.h>

Suite *parse_suite(void);    /* test_parse.c: parse_size, parse_duration_ms */
Suite *policy_suite(void);   /* test_policy.c: policy files */
Suite *conf_suite(void);     /* test_conf.c: pycell.conf */
Suite *result_suite(void);   /* test_result.c */
Suite *cli_suite(void);      /* test_cli.c */
Suite *options_suite(void);  /* test_options.c */
Suite *seccomp_suite(void);  /* test_seccomp.c: seccomp filter, capabilities */
Suite *seccomp_bpf_suite(void);   /* test_seccomp_bpf.c: the BPF writer */
Suite *seccomp_cache_suite(void); /* test_seccomp_cache.c: the compiled-program cache */
Suite *mcp_suite(void);      /* test_mcp.c: tool definitions and schemas */
Suite *bridge_suite(void);   /* test_bridge.c: tool allowlist, SHA-256 */
Suite *warm_suite(void);     /* test_warm.c: the warm request carries every member of jail_spec */
Suite *state_suite(void);    /* test_state.c: the state directory of paused sessions */

/* The source tree ($PYCELL_SRCDIR, set by `make check`; else "."), for
 * tests that read shipped files such as policy/default.json. */
const char *unit_srcdir(void);
/* A fresh directory under $TMPDIR (or /tmp); removed by unit_rmtree. */
char *unit_mkdtemp(void);
void unit_rmtree(const char *dir);
/* Write `text` to dir/name; returns the malloc'd path. */
char *unit_write(const char *dir, const char *name, const char *text);

/* A member of a struct, as a table of its members names it. */
struct unit_span {
	size_t off, size, align;
	const char *name;
};
/* Every byte of struct `what` (its size and alignment) is in one of the n
 * spans or is the padding the compiler puts before a member; else the
 * test fails, naming the bytes and `table`.  Sorts spans. */
void unit_check_spans(const char *what, const char *table, struct unit_span *spans, size_t n, size_t size,
		      size_t align);

/* Skips (skip.c): unit_skip_init() before the run; a test that cannot run
 * here calls unit_skip("what: why") and returns; unit_report() prints the
 * reasons and "NAME: F failed, P passed, S skipped", and returns F. */
void unit_skip_init(void);
void unit_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int unit_report(const char *name, SRunner *sr);

#endif
