/* pycell: command-line parsing for `pycell run`. */
#include "config.h"

#include <getopt.h>
#include <string.h>

#include "cli/cli.h"

const char cli_run_usage[] =
	"Usage: pycell run [OPTION]... (-c CODE | FILE | -) [ARG]...\n"
	"Run Python in a fresh jail. ARGs become sys.argv[1:]; `-` reads the program from stdin.\n"
	"\n"
	"  -c CODE               run CODE (the rest of the command line are ARGs)\n"
	"      --json            print the result object (JSON) instead of the program's output\n"
	"      --timeout SECONDS wall-clock limit (e.g. 10, 2.5, 500ms); overrides the policy\n"
	"      --memory SIZE     memory limit (e.g. 256M, 1G)\n"
	"      --cpu CORES       CPU share in cores (e.g. 0.5)\n"
	"      --pids N          maximum number of tasks\n"
	"      --output-limit SIZE  bytes kept per stream (stdout, stderr); the rest is dropped\n"
	"      --network MODE    none, or loopback (the jail's own; the default policy's)\n"
	"      --policy FILE|NAME  policy to run under (default: default)\n"
	"      --config FILE     configuration file (default /etc/pycell/pycell.conf)\n"
	"      --python PATH     interpreter inside the jail (default " DEFAULT_PYTHON ")\n"
	"      --stdin FILE      feed the program's stdin from FILE (`-`: pycell's stdin)\n"
	"      --warm            start the jail from a zygote, as `pycell mcp` does with warm\n"
	"                        starts on (same isolation; for testing and benchmarks)\n"
	"      --debug           log each setup step with its timing to stderr\n"
	"  -h, --help            show this help\n"
	"\n"
	"Exit status: the program's; 128+N if it was killed by signal N; 123 memory limit;\n"
	"124 timeout; 125 the jail could not be set up; 2 usage error.\n";

enum { O_JSON = 256, O_TIMEOUT, O_MEMORY, O_CPU, O_PIDS, O_OUTPUT, O_NETWORK, O_POLICY, O_CONFIG,
       O_PYTHON, O_STDIN, O_DEBUG, O_WARM };

static const struct option run_options[] = {
	{ "json", no_argument, NULL, O_JSON },
	{ "timeout", required_argument, NULL, O_TIMEOUT },
	{ "memory", required_argument, NULL, O_MEMORY },
	{ "cpu", required_argument, NULL, O_CPU },
	{ "pids", required_argument, NULL, O_PIDS },
	{ "output-limit", required_argument, NULL, O_OUTPUT },
	{ "network", required_argument, NULL, O_NETWORK },
	{ "policy", required_argument, NULL, O_POLICY },
	{ "config", required_argument, NULL, O_CONFIG },
	{ "python", required_argument, NULL, O_PYTHON },
	{ "stdin", required_argument, NULL, O_STDIN },
	{ "debug", no_argument, NULL, O_DEBUG },
	{ "warm", no_argument, NULL, O_WARM },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static int parse_count(const char *opt, const char *s, uint32_t max, uint32_t *out, struct pc_err *err)
{
	unsigned long v;
	if (*s < '0' || *s > '9')
		return pc_fail(err, EINVAL, "usage", "%s: expected a whole number, got \"%s\"", opt, s);
	if (parse_uint(s, 1, max, &v) < 0)
		return pc_fail(err, EINVAL, "usage", "%s: expected a whole number from 1 to %u, got \"%s\"",
			       opt, max, s);
	*out = (uint32_t)v;
	return 0;
}

int cli_parse_run(int argc, char **argv, struct run_opts *o, struct pc_err *err)
{
	const char *why;
	int c;
	memset(o, 0, sizeof(*o));
	optind = 1;
	opterr = 0;
	/* '+': stop at the first non-option, which is FILE or - (like python) */
	while ((c = getopt_long(argc, argv, "+:hc:", run_options, NULL)) != -1) {
		const char *arg = optarg;
		switch (c) {
		case 'h': o->help = true; return 0;
		case 'c':
			o->code = arg;
			goto program_done;
		case O_JSON: o->json = true; break;
		case O_DEBUG: o->debug = true; break;
		case O_WARM: o->warm = true; break;
		case O_POLICY: o->policy = arg; break;
		case O_CONFIG: o->config = arg; break;
		case O_PYTHON:
			if (arg[0] != '/')
				return pc_fail(err, EINVAL, "usage", "--python: expected an absolute path, got \"%s\"", arg);
			o->python = arg;
			break;
		case O_STDIN: o->stdin_file = arg; break;
		case O_NETWORK:
			if (strcmp(arg, "none") && strcmp(arg, "loopback"))
				return pc_fail(err, EINVAL, "usage", "--network: expected none or loopback, got \"%s\"", arg);
			o->network = arg;
			break;
		case O_TIMEOUT:
			if (parse_duration_ms(arg, &o->timeout_ms, &why) < 0)
				return pc_fail(err, EINVAL, "usage", "--timeout: %s, got \"%s\"", why, arg);
			if (o->timeout_ms == 0)
				return pc_fail(err, EINVAL, "usage", "--timeout: must be more than 0, got \"%s\"", arg);
			o->has_timeout = true;
			break;
		case O_MEMORY:
			if (parse_size(arg, &o->memory_bytes, &why) < 0)
				return pc_fail(err, EINVAL, "usage", "--memory: %s, got \"%s\"", why, arg);
			if (o->memory_bytes < (16 << 20))
				return pc_fail(err, EINVAL, "usage", "--memory: at least 16M is needed to start python, got \"%s\"", arg);
			o->has_memory = true;
			break;
		case O_OUTPUT:
			if (parse_size(arg, &o->output_bytes, &why) < 0)
				return pc_fail(err, EINVAL, "usage", "--output-limit: %s, got \"%s\"", why, arg);
			/* the same range a policy file accepts */
			if (o->output_bytes < 1024 || o->output_bytes > (1ULL << 30))
				return pc_fail(err, EINVAL, "usage", "--output-limit: expected a size from 1K to 1G, got \"%s\"", arg);
			o->has_output = true;
			break;
		case O_CPU: {
			uint64_t ms;
			/* cores with up to 3 decimals, parsed as a duration in seconds */
			if (parse_duration_ms(arg, &ms, &why) < 0 || strpbrk(arg, "mshin") || ms == 0 || ms > 1024000)
				return pc_fail(err, EINVAL, "usage", "--cpu: expected cores such as 0.5 or 2, got \"%s\"", arg);
			o->cpu_millis = (uint32_t)ms;
			o->has_cpu = true;
			break;
		}
		case O_PIDS:
			if (parse_count("--pids", arg, 1 << 22, &o->pids, err) < 0)
				return -1;
			if (o->pids < 2)
				return pc_fail(err, EINVAL, "usage", "--pids: at least 2 (init and python), got \"%s\"", arg);
			o->has_pids = true;
			break;
		case ':':
			return pc_fail(err, EINVAL, "usage", "option %s needs a value", argv[optind - 1]);
		case '?':
		default:
			return pc_fail(err, EINVAL, "usage", "unknown option %s", argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return pc_fail(err, EINVAL, "usage", "no program: give -c CODE, a FILE, or - for stdin");
	if (strcmp(argv[optind], "-") == 0)
		o->from_stdin = true;
	else
		o->file = argv[optind];
	optind++;
program_done:
	o->args = argv + optind;
	if (o->from_stdin && o->stdin_file && strcmp(o->stdin_file, "-") == 0)
		return pc_fail(err, EINVAL, "usage", "--stdin -: stdin already carries the program");
	return 0;
}

int cli_apply_overrides(const struct run_opts *o, struct policy *p, struct pc_err *err)
{
	if (o->has_timeout)
		p->limits.timeout_ms = o->timeout_ms;
	if (o->has_memory)
		p->limits.memory_bytes = o->memory_bytes;
	if (o->has_output)
		p->limits.output_bytes = o->output_bytes;
	if (o->has_cpu)
		p->limits.cpu_millis = o->cpu_millis;
	if (o->has_pids)
		p->limits.pids = o->pids;
	if (o->network)
		p->network = strcmp(o->network, "loopback") == 0 ? NET_LOOPBACK : NET_NONE;
	if (o->python) {
		free(p->python);
		p->python = xstrdup(o->python);
	}
	(void)err;
	return 0;
}
