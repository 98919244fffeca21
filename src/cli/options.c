/* pycell: the table-driven option parser of every subcommand (options.h). */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "cli/options.h"
#include "config/result.h"

#define FIELD(out, o, type) ((type *)(void *)((char *)(out) + (o)->off))

static int usage_fail(struct pc_err *err, const char *shown, const char *what, const char *arg)
{
	return pc_fail(err, EINVAL, "usage", "%s: %s, got \"%.*s\"", shown, what, utf8_prefix(arg, 200), arg);
}

/* "expected none or loopback" */
static void choices_text(char *buf, size_t len, const char *const *c)
{
	size_t n = 0, used;
	while (c[n])
		n++;
	used = (size_t)snprintf(buf, len, "expected ");
	for (size_t i = 0; i < n && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%s", i == 0 ? "" : i + 1 == n ? " or " : ", ",
					 c[i]);
}

/* Store one option's value (arg is NULL for options without one). */
static int store(const struct opt *o, const char *shown, const char *arg, void *out, struct pc_err *err)
{
	uint64_t v = 0;
	switch (o->kind) {
	case OPT_HELP:
	case OPT_FLAG:
		*FIELD(out, o, bool) = true;
		break;
	case OPT_SET:
		*FIELD(out, o, int) = o->set;
		break;
	case OPT_COUNT:
		(*FIELD(out, o, int))++;
		break;
	case OPT_PATH:
		if (arg[0] != '/')
			return usage_fail(err, shown, "expected an absolute path", arg);
		/* fall through */
	case OPT_STRING:
	case OPT_PROGRAM:
		*FIELD(out, o, const char *) = arg;
		break;
	case OPT_CHOICE: {
		char what[200];
		size_t i;
		for (i = 0; o->choices[i] && strcmp(o->choices[i], arg) != 0; i++)
			;
		if (!o->choices[i]) {
			choices_text(what, sizeof(what), o->choices);
			return usage_fail(err, shown, what, arg);
		}
		*FIELD(out, o, const char *) = o->choices[i];
		break;
	}
	case OPT_UINT: {
		unsigned long n;
		char what[80];
		if (arg[0] < '0' || arg[0] > '9')
			return usage_fail(err, shown, "expected a whole number", arg);
		if (parse_uint(arg, 1, (unsigned long)o->max, &n) < 0) {
			snprintf(what, sizeof(what), "expected a whole number from 1 to %llu",
				 (unsigned long long)o->max);
			return usage_fail(err, shown, what, arg);
		}
		if (n < o->min)
			return usage_fail(err, shown, o->range ? o->range : "too small", arg);
		*FIELD(out, o, uint32_t) = (uint32_t)n;
		break;
	}
	case OPT_SIZE:
	case OPT_DURATION:
		if ((o->kind == OPT_SIZE ? parse_size(arg, &v, err) : parse_duration_ms(arg, &v, err)) < 0) {
			snprintf(err->step, sizeof(err->step), "usage");
			return pc_err_wrap(err, "%s", shown);
		}
		if (v < o->min || v > o->max)
			return usage_fail(err, shown, o->range, arg);
		*FIELD(out, o, uint64_t) = v;
		break;
	case OPT_CORES:
		/* cores with up to 3 decimals: the syntax of seconds, no unit */
		if (strpbrk(arg, "mshin") || parse_duration_ms(arg, &v, NULL) < 0 || v < o->min || v > o->max)
			return usage_fail(err, shown, o->range, arg);
		*FIELD(out, o, uint32_t) = (uint32_t)v;
		break;
	default:
		return pc_fail(err, EINVAL, "usage", "%s: not a kind of option this parser knows", shown);
	}
	if (o->given)
		*(bool *)(void *)((char *)out + o->given - 1) = true;
	return 0;
}

static bool takes_value(const struct opt *o)
{
	return o->kind >= OPT_STRING;
}

static const struct opt *find_long(const struct opt_cmd *cmd, const char *name, size_t len)
{
	for (size_t i = 0; i < cmd->n; i++)
		if (cmd->opts[i].name && strlen(cmd->opts[i].name) == len && memcmp(cmd->opts[i].name, name, len) == 0)
			return &cmd->opts[i];
	return NULL;
}

static const struct opt *find_short(const struct opt_cmd *cmd, char c)
{
	for (size_t i = 0; i < cmd->n; i++)
		if (cmd->opts[i].letter && cmd->opts[i].letter == c)
			return &cmd->opts[i];
	return NULL;
}

int opts_parse(const struct opt_cmd *cmd, int argc, char **argv, void *out, struct pc_err *err)
{
	int i = 1;
	while (i < argc) {
		const char *a = argv[i], *val = NULL;
		const struct opt *o;
		char shown[80];

		if (strcmp(a, "--") == 0) {
			i++;
			break;
		}
		if (a[0] != '-' || a[1] == '\0')
			break; /* the first operand ("-" is one: stdin) */
		i++;
		if (a[1] == '-') {
			const char *eq = strchr(a + 2, '=');
			size_t len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
			o = find_long(cmd, a + 2, len);
			if (!o)
				return pc_fail(err, EINVAL, "usage", "unknown option %.*s", (int)(len + 2), a);
			snprintf(shown, sizeof(shown), "--%s", o->name);
			if (eq && !takes_value(o))
				return pc_fail(err, EINVAL, "usage", "option %s takes no value", shown);
			val = eq ? eq + 1 : NULL;
		} else {
			/* -x, -xVALUE, -x VALUE; flags grouped as -vv, the last
			 * of a group may take the rest as its value (-vnNAME) */
			const char *g = a + 1;
			for (;;) {
				o = find_short(cmd, *g);
				if (!o)
					return g == a + 1 ? pc_fail(err, EINVAL, "usage", "unknown option -%c", *g)
							  : pc_fail(err, EINVAL, "usage", "unknown option -%c in %s", *g, a);
				snprintf(shown, sizeof(shown), "-%c", *g);
				if (takes_value(o) || g[1] == '\0')
					break;
				if (store(o, shown, NULL, out, err) < 0)
					return -1;
				if (o->kind == OPT_HELP)
					return i;
				g++;
			}
			val = takes_value(o) && g[1] ? g + 1 : NULL;
		}
		if (takes_value(o) && !val) {
			if (i >= argc)
				return pc_fail(err, EINVAL, "usage", "option %s needs a value", shown);
			val = argv[i++];
		}
		if (store(o, shown, val, out, err) < 0)
			return -1;
		if (o->kind == OPT_HELP || o->kind == OPT_PROGRAM)
			return i;
	}
	if (!cmd->operands && i < argc)
		return pc_fail(err, EINVAL, "usage", "unexpected argument '%s'", argv[i]);
	return i;
}

int cli_usage_error(const char *cmd, const struct pc_err *err)
{
	fprintf(stderr, "pycell %s: %s\nTry 'pycell %s --help'.\n", cmd, err->msg, cmd);
	return EXIT_USAGE;
}

int cli_input_error(const char *cmd, const struct pc_err *err)
{
	fprintf(stderr, "pycell %s: %s\n", cmd, err->msg);
	return EXIT_USAGE;
}

int cli_setup_error(const char *cmd, const struct pc_err *err)
{
	if (err->step[0])
		fprintf(stderr, "pycell %s: %s: %s\n", cmd, err->step, err->msg);
	else
		fprintf(stderr, "pycell %s: %s\n", cmd, err->msg);
	return EXIT_SETUP_FAILED;
}
