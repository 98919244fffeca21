/* pycell: unit tests for `pycell run` option parsing (src/cli/cli.c). */
#include "config.h"

#include <string.h>

#include "cli/run_opts.h"
#include "unit.h"

#define ARGV(...) ((char *[]){ "run", __VA_ARGS__, NULL })

/* argc is counted: the arrays are NULL-terminated like a real argv */
static int parse(char **argv, int unused, struct run_opts *o, struct pc_err *e)
{
	int argc = 0;
	(void)unused;
	while (argv[argc])
		argc++;
	memset(e, 0, sizeof(*e));
	return cli_parse_run(argc, argv, o, e);
}

START_TEST(code_and_args)
{
	char **v = ARGV("--json", "--timeout", "2.5", "-c", "print(1)", "--json", "x");
	struct run_opts o;
	struct pc_err e;
	ck_assert_int_eq(parse(v, 7, &o, &e), 0);
	ck_assert(o.json);
	ck_assert(o.has_timeout);
	ck_assert_uint_eq(o.timeout_ms, 2500);
	ck_assert_str_eq(o.code, "print(1)");
	/* everything after -c CODE belongs to the program, like python3 -c */
	ck_assert_str_eq(o.args[0], "--json");
	ck_assert_str_eq(o.args[1], "x");
	ck_assert_ptr_null(o.args[2]);
}
END_TEST

START_TEST(file_and_dash)
{
	char **v = ARGV("--memory", "256M", "prog.py", "-v", "a");
	char **d = ARGV("--stdin", "in.txt", "-", "b");
	struct run_opts o;
	struct pc_err e;
	ck_assert_int_eq(parse(v, 5, &o, &e), 0);
	ck_assert_str_eq(o.file, "prog.py");
	ck_assert_uint_eq(o.memory_bytes, 256u << 20);
	ck_assert_str_eq(o.args[0], "-v");
	ck_assert_int_eq(parse(d, 4, &o, &e), 0);
	ck_assert(o.from_stdin);
	ck_assert_str_eq(o.stdin_file, "in.txt");
	ck_assert_str_eq(o.args[0], "b");
}
END_TEST

START_TEST(overrides_apply)
{
	char **v = ARGV("--cpu", "0.5", "--pids", "10", "--network", "loopback", "--output-limit", "2K",
			"--python", "/opt/py/bin/python3", "-c", "1");
	struct run_opts o;
	struct pc_err e;
	struct policy p;
	ck_assert_msg(parse(v, 12, &o, &e) == 0, "%s", e.msg);
	policy_init_default(&p);
	ck_assert_int_eq(cli_apply_overrides(&o, &p, &e), 0);
	ck_assert_uint_eq(p.limits.cpu_millis, 500);
	ck_assert_uint_eq(p.limits.pids, 10);
	ck_assert_uint_eq(p.limits.output_bytes, 2048);
	ck_assert_int_eq(p.network.mode, NET_LOOPBACK);
	ck_assert_str_eq(p.python, "/opt/py/bin/python3");
	policy_free(&p);
}
END_TEST

static const struct { const char *args[4]; const char *msg; } bad[] = {
	{ { "--timeout", "soon", "-c", "1" }, "--timeout: expected seconds such as 30, 2.5, 500ms or 2m, got \"soon\"" },
	{ { "--timeout", "0", "-c", "1" }, "--timeout: must be more than 0, got \"0\"" },
	{ { "--memory", "1M", "-c", "1" }, "--memory: at least 16M is needed to start python, got \"1M\"" },
	{ { "--memory", "lots", "-c", "1" }, "--memory: expected a size such as 4096, 64K, 512M or 2G, got \"lots\"" },
	{ { "--pids", "-3", "-c", "1" }, "--pids: expected a whole number, got \"-3\"" },
	{ { "--pids", "0", "-c", "1" }, "--pids: expected a whole number from 1 to 4194304, got \"0\"" },
	{ { "--pids", "1", "-c", "1" }, "--pids: at least 2 (init and python), got \"1\"" },
	{ { "--output-limit", "1000", "-c", "1" }, "--output-limit: expected a size from 1K to 1G, got \"1000\"" },
	{ { "--cpu", "2s", "-c", "1" }, "--cpu: expected cores such as 0.5 or 2, got \"2s\"" },
	{ { "--network", "host", "-c", "1" }, "--network: expected none or loopback, got \"host\"" },
	{ { "--python", "python3", "-c", "1" }, "--python: expected an absolute path, got \"python3\"" },
	{ { "--bogus", "-c", "1", NULL }, "unknown option --bogus" },
	{ { "--json", NULL }, "no program: give -c CODE, a FILE, or - for stdin" },
	{ { "--stdin", "-", "-", NULL }, "--stdin -: stdin already carries the program" },
	{ { "-c", NULL }, "option -c needs a value" },
};

START_TEST(usage_errors)
{
	char *v[6] = { "run" };
	int n = 1;
	struct run_opts o;
	struct pc_err e;
	for (int i = 0; i < 4 && bad[_i].args[i]; i++)
		v[n++] = (char *)bad[_i].args[i];
	v[n] = NULL;
	ck_assert_int_eq(parse(v, n, &o, &e), -1);
	ck_assert_str_eq(e.step, "usage");
	ck_assert_str_eq(e.msg, bad[_i].msg);
}
END_TEST

START_TEST(help)
{
	char **v = ARGV("--help");
	struct run_opts o;
	struct pc_err e;
	ck_assert_int_eq(parse(v, 2, &o, &e), 0);
	ck_assert(o.help);
	ck_assert_ptr_nonnull(strstr(cli_run_usage, "--output-limit SIZE"));
}
END_TEST

Suite *cli_suite(void)
{
	Suite *s = suite_create("cli");
	TCase *t = tcase_create("cli");
	tcase_add_test(t, code_and_args);
	tcase_add_test(t, file_and_dash);
	tcase_add_test(t, overrides_apply);
	tcase_add_loop_test(t, usage_errors, 0, (int)(sizeof(bad) / sizeof(bad[0])));
	tcase_add_test(t, help);
	suite_add_tcase(s, t);
	return s;
}
