/* pycell: one option parser for every subcommand, driven by a table.
 *
 * Each subcommand describes its options as rows (name, kind, where the
 * value goes, bounds) and its usage text; opts_parse() fills the
 * subcommand's struct and reports every mistake the same way: the option,
 * what was expected, what it got.  A unit test holds every row against the
 * usage text and the man page, so --help cannot forget an option. */
#ifndef PYCELL_OPTIONS_H
#define PYCELL_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/util.h"

enum opt_kind {
	OPT_HELP,      /* bool: -h/--help; parsing stops there */
	OPT_FLAG,      /* bool = true */
	OPT_SET,       /* int = .set (--warm 1, --cold -1) */
	OPT_COUNT,     /* int, one more each time (-v -v) */
	OPT_STRING,    /* const char * (points into argv) */
	OPT_PATH,      /* const char *, an absolute path */
	OPT_CHOICE,    /* const char *, one of .choices */
	OPT_UINT,      /* uint32_t: a whole number 1..max, then at least .min */
	OPT_SIZE,      /* uint64_t bytes, .min to .max */
	OPT_DURATION,  /* uint64_t milliseconds, .min to .max */
	OPT_CORES,     /* uint32_t thousandths of a core, .min to .max */
	OPT_PROGRAM,   /* const char *; the options end after it (run's -c CODE) */
};

struct opt {
	const char *name;      /* long name without "--", or NULL for a letter only */
	char letter;           /* short name, or 0 */
	enum opt_kind kind;
	size_t off;            /* offsetof the field in the subcommand's struct */
	size_t given;          /* OPT_GIVEN(field): a bool set when the option is given; 0 none */
	int set;               /* OPT_SET: the value stored */
	uint64_t min, max;     /* bounds of OPT_UINT, OPT_SIZE, OPT_DURATION, OPT_CORES */
	const char *range;     /* the error for a value out of bounds: "expected a size from 1K to 1G" */
	const char *const *choices; /* OPT_CHOICE, NULL-terminated */
};
#define OPT_GIVEN(type, field) (offsetof(type, field) + 1)
/* The four fields every row has; the others by name after it. */
#define OPT_ROW(nm, ch, k, offset) .name = (nm), .letter = (ch), .kind = (k), .off = (offset)

struct opt_cmd {
	const char *name;      /* "run": errors say "pycell run: ..." */
	const char *usage;     /* the --help text */
	const struct opt *opts;
	size_t n;
	bool operands;         /* takes arguments after its options (else one is an error) */
};

/* Parse argv[1..argc) (argv[0] is the subcommand's name) into out, which
 * the caller has initialised with its defaults.  Options end at the first
 * operand, at "--", or after an OPT_PROGRAM option (or OPT_HELP).  Returns
 * the index of the first operand (argc if none), or -1 with err (step
 * "usage") naming the option and what was expected, or the operand of a
 * command that takes none. */
int opts_parse(const struct opt_cmd *cmd, int argc, char **argv, void *out, struct pc_err *err);

/* The front ends' three ways to fail, written the same everywhere on
 * stderr, each returning the exit status:
 * - cli_usage_error: the command line is wrong: "pycell CMD: MESSAGE" and
 *   where help is; EXIT_USAGE.
 * - cli_input_error: an input named on it is (a configuration or policy
 *   file, the program): "pycell CMD: MESSAGE", the message naming the file
 *   and key; EXIT_USAGE.
 * - cli_setup_error: the host could not do it: "pycell CMD: STEP: MESSAGE";
 *   EXIT_SETUP_FAILED. */
int cli_usage_error(const char *cmd, const struct pc_err *err);
int cli_input_error(const char *cmd, const struct pc_err *err);
int cli_setup_error(const char *cmd, const struct pc_err *err);

/* Every subcommand's table, for the test that holds them against --help
 * and the man page. */
extern const struct opt_cmd cli_run_cmd, cli_mcp_cmd, cli_serve_cmd, cli_doctor_cmd, cli_policy_test_cmd;

#endif
