/* pycell: unit tests for the option parser every subcommand uses
 * (src/cli/options.c), its tables against --help and the man pages, and
 * pc_err_wrap. */
#include "config.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cli/options.h"
#include "unit.h"

struct t_opts {
	bool help, flag, size_given;
	int count, set;
	const char *str, *choice, *prog;
	uint32_t n;
	uint64_t size, ms;
};

static const char *const colours[] = { "red", "green", "blue", NULL };

#define T(field) offsetof(struct t_opts, field)
static const struct opt t_rows[] = {
	{ OPT_ROW("help", 'h', OPT_HELP, T(help)) },
	{ OPT_ROW("flag", 'f', OPT_FLAG, T(flag)) },
	{ OPT_ROW("verbose", 'v', OPT_COUNT, T(count)) },
	{ OPT_ROW("on", 0, OPT_SET, T(set)), .set = 1 },
	{ OPT_ROW("off", 0, OPT_SET, T(set)), .set = -1 },
	{ OPT_ROW("name", 'n', OPT_STRING, T(str)) },
	{ OPT_ROW("colour", 0, OPT_CHOICE, T(choice)), .choices = colours },
	{ OPT_ROW("count", 0, OPT_UINT, T(n)), .min = 3, .max = 99, .range = "at least 3" },
	{ OPT_ROW("size", 0, OPT_SIZE, T(size)), .given = OPT_GIVEN(struct t_opts, size_given), .min = 1024,
	  .max = 1 << 20, .range = "expected a size from 1K to 1M" },
	{ OPT_ROW("wait", 0, OPT_DURATION, T(ms)), .min = 1, .max = 60000, .range = "expected 1ms to 1m" },
	{ OPT_ROW(NULL, 'c', OPT_PROGRAM, T(prog)) },
};
static const struct opt_cmd t_cmd = { "t", "", t_rows, ARRAY_SIZE(t_rows), true };
static const struct opt_cmd t_no_operands = { "t", "", t_rows, ARRAY_SIZE(t_rows), false };

#define ARGV(...) ((char *[]){ "t", __VA_ARGS__, NULL })
#define ARGC(v) ((int)(sizeof(v) / sizeof(v[0])) - 1)

static int parse(char **v, int argc, struct t_opts *o, struct pc_err *e)
{
	memset(o, 0, sizeof(*o));
	memset(e, 0, sizeof(*e));
	return opts_parse(&t_cmd, argc, v, o, e);
}

START_TEST(test_values_land_in_their_fields)
{
	char *v[] = { "t", "-vv", "--verbose", "--name=x y", "--colour", "blue", "--count", "7", "--size=2K",
		      "--wait", "1.5", "--off", "-f", "operand", "--flag", NULL };
	struct t_opts o;
	struct pc_err e;
	ck_assert_int_eq(parse(v, ARGC(v), &o, &e), 13);
	ck_assert_int_eq(o.count, 3);
	ck_assert_str_eq(o.str, "x y");
	ck_assert_str_eq(o.choice, "blue");
	ck_assert_uint_eq(o.n, 7);
	ck_assert_uint_eq(o.size, 2048);
	ck_assert(o.size_given);
	ck_assert_uint_eq(o.ms, 1500);
	ck_assert_int_eq(o.set, -1);
	ck_assert(o.flag);
	ck_assert(!o.help);
}
END_TEST

START_TEST(test_where_options_end)
{
	struct t_opts o;
	struct pc_err e;
	char **a = ARGV("-f", "--", "--flag");
	char **b = ARGV("-cprint(1)", "--flag");
	char **c = ARGV("-c", "x", "y");
	char **d = ARGV("--help", "--bogus");
	char **f = ARGV("-vnvalue", "-");
	ck_assert_int_eq(parse(a, 3, &o, &e), 3);
	ck_assert_int_eq(parse(b, 2, &o, &e), 2);
	ck_assert_str_eq(o.prog, "print(1)");
	ck_assert(!o.flag);
	ck_assert_int_eq(parse(c, 3, &o, &e), 3);
	ck_assert_str_eq(o.prog, "x");
	ck_assert_int_eq(parse(d, 2, &o, &e), 2);
	ck_assert(o.help);
	ck_assert_int_eq(parse(f, 2, &o, &e), 2);
	ck_assert_str_eq(o.str, "value");
	ck_assert_int_eq(o.count, 1);
	ck_assert(!o.size_given);
}
END_TEST

static const struct { const char *argv[3]; const char *msg; } bad[] = {
	{ { "--bogus" }, "unknown option --bogus" },
	{ { "--bogus=1" }, "unknown option --bogus" },
	{ { "-x" }, "unknown option -x" },
	{ { "-vx" }, "unknown option -x in -vx" },
	{ { "-vn" }, "option -n needs a value" },
	{ { "--flag=yes" }, "option --flag takes no value" },
	{ { "--name" }, "option --name needs a value" },
	{ { "-n" }, "option -n needs a value" },
	{ { "--colour", "pink" }, "--colour: expected red, green or blue, got \"pink\"" },
	{ { "--count", "x" }, "--count: expected a whole number, got \"x\"" },
	{ { "--count", "0" }, "--count: expected a whole number from 1 to 99, got \"0\"" },
	{ { "--count", "100" }, "--count: expected a whole number from 1 to 99, got \"100\"" },
	{ { "--count", "2" }, "--count: at least 3, got \"2\"" },
	{ { "--size", "lots" }, "--size: expected a size such as 4096, 64K, 512M or 2G, got \"lots\"" },
	{ { "--size", "1000" }, "--size: expected a size from 1K to 1M, got \"1000\"" },
	{ { "--size=2M" }, "--size: expected a size from 1K to 1M, got \"2M\"" },
	{ { "--wait", "1d" }, "--wait: unknown unit (use ms, s, m or h), got \"1d\"" },
	{ { "--wait", "0" }, "--wait: expected 1ms to 1m, got \"0\"" },
};

START_TEST(test_each_mistake_names_the_option_and_what_it_got)
{
	char *v[4] = { "t" };
	struct t_opts o;
	struct pc_err e;
	int n = 1;
	for (int k = 0; k < 3 && bad[_i].argv[k]; k++)
		v[n++] = (char *)bad[_i].argv[k];
	v[n] = NULL;
	o.size_given = false;
	ck_assert_int_eq(parse(v, n, &o, &e), -1);
	ck_assert_str_eq(e.msg, bad[_i].msg);
	ck_assert_str_eq(e.step, "usage");
	ck_assert_int_eq(e.errnum, EINVAL);
	ck_assert(!o.size_given);
}
END_TEST

/* The section of a man page that documents one command: from its heading
 * to the next one, with roff's \- as -. */
static char *man_section(const char *page, const char *heading)
{
	char *path = xasprintf("%s/man/%s", unit_srcdir(), page), *text = NULL, *out, *w;
	const char *s, *e;
	size_t len;
	ck_assert_msg(read_file(path, 1 << 20, &text, &len) == 0, "read %s", path);
	s = strstr(text, heading);
	ck_assert_msg(s != NULL, "%s has no heading %s", path, heading);
	e = strstr(s + strlen(heading), "\n.S");
	len = e ? (size_t)(e - s) : strlen(s);
	out = w = xmalloc(len + 1);
	for (size_t i = 0; i < len; i++)
		if (!(s[i] == '\\' && s[i + 1] == '-'))
			*w++ = s[i];
	*w = '\0';
	free(text);
	free(path);
	return out;
}

/* "--name" as a whole word of text */
static bool mentions(const char *text, const char *opt)
{
	size_t n = strlen(opt);
	for (const char *p = strstr(text, opt); p; p = strstr(p + 1, opt)) {
		char after = p[n];
		if ((p == text || p[-1] != '-') && !(after == '-' || (after >= 'a' && after <= 'z')))
			return true;
	}
	return false;
}

static const struct { const struct opt_cmd *cmd; const char *page, *heading; } documented[] = {
	{ &cli_run_cmd, "pycell.1", ".SS \"pycell run" },
	{ &cli_mcp_cmd, "pycell.1", ".SS \"pycell mcp" },
	{ &cli_serve_cmd, "pycell.1", ".SS \"pycell serve" },
	{ &cli_doctor_cmd, "pycell.1", ".SS \"pycell doctor" },
	{ &cli_policy_test_cmd, "pycell-policy-test.8", ".SH OPTIONS" },
};

START_TEST(test_every_option_is_in_help_and_the_man_page)
{
	const struct opt_cmd *c = documented[_i].cmd;
	char *man = man_section(documented[_i].page, documented[_i].heading);
	for (size_t k = 0; k < c->n; k++) {
		const struct opt *o = &c->opts[k];
		char longopt[64], shortopt[4];
		snprintf(longopt, sizeof(longopt), "--%s", o->name ? o->name : "");
		snprintf(shortopt, sizeof(shortopt), "-%c", o->letter);
		if (o->name) {
			ck_assert_msg(mentions(c->usage, longopt), "pycell %s --help lacks %s", c->name, longopt);
			ck_assert_msg(mentions(man, longopt), "%s (%s) lacks %s", documented[_i].page,
				      documented[_i].heading, longopt);
		}
		if (o->letter) {
			ck_assert_msg(mentions(c->usage, shortopt), "pycell %s --help lacks %s", c->name, shortopt);
			/* a help option need not be in the page: pycell(1) says it once */
			if (o->kind != OPT_HELP)
				ck_assert_msg(mentions(man, shortopt), "%s (%s) lacks %s", documented[_i].page,
					      documented[_i].heading, shortopt);
		}
	}
	free(man);
}
END_TEST

START_TEST(test_a_command_without_operands_refuses_one)
{
	struct t_opts o = { 0 };
	struct pc_err e = { 0 };
	char **a = ARGV("-f", "extra");
	char **b = ARGV("--", "-f");
	char **c = ARGV("-h", "extra");
	ck_assert_int_eq(opts_parse(&t_no_operands, 3, a, &o, &e), -1);
	ck_assert_str_eq(e.msg, "unexpected argument 'extra'");
	ck_assert_int_eq(opts_parse(&t_no_operands, 3, b, &o, &e), -1);
	ck_assert_str_eq(e.msg, "unexpected argument '-f'");
	ck_assert_int_eq(opts_parse(&t_no_operands, 3, c, &o, &e), 2);   /* help wins */
	ck_assert(o.help);
}
END_TEST

START_TEST(test_wrap_puts_context_first_and_keeps_the_rest)
{
	struct pc_err e;
	char big[600];
	pc_fail(&e, ENOENT, "policy", "limits.memory: expected a size");
	ck_assert_int_eq(pc_err_wrap(&e, "policy %s", "strict.json"), -1);
	ck_assert_int_eq(errno, ENOENT);
	ck_assert_str_eq(e.msg, "policy strict.json: limits.memory: expected a size");
	ck_assert_str_eq(e.step, "policy");
	ck_assert_int_eq(e.errnum, ENOENT);
	/* a long context is cut, at a character boundary, never overflowing */
	memset(big, 'a', sizeof(big));
	memcpy(big + 478, "\xc3\xa9\xc3\xa9", 4);
	big[sizeof(big) - 1] = '\0';
	pc_fail(&e, EINVAL, "x", "tail");
	pc_err_wrap(&e, "%s", big);
	ck_assert_uint_eq(strlen(e.msg), 478);
	ck_assert_int_eq(pc_err_wrap(NULL, "nothing"), -1);
}
END_TEST

Suite *options_suite(void)
{
	Suite *s = suite_create("options");
	TCase *t = tcase_create("options");
	tcase_add_test(t, test_values_land_in_their_fields);
	tcase_add_test(t, test_where_options_end);
	tcase_add_loop_test(t, test_each_mistake_names_the_option_and_what_it_got, 0, ARRAY_SIZE(bad));
	tcase_add_loop_test(t, test_every_option_is_in_help_and_the_man_page, 0, ARRAY_SIZE(documented));
	tcase_add_test(t, test_a_command_without_operands_refuses_one);
	tcase_add_test(t, test_wrap_puts_context_first_and_keeps_the_rest);
	suite_add_tcase(s, t);
	return s;
}
