/* pycell: the options of `pycell run` (a table for options.c) and the
 * policy values they override. */
#include "config.h"

#include <string.h>

#include "cli/run_opts.h"
#include "cli/options.h"

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
	"      --output-limit SIZE  bytes kept per stream (stdout, stderr): head and tail\n"
	"      --network MODE    none, or loopback (the jail's own; the default policy's)\n"
	"      --backend NAME    native (CPython), or wasm (Pyodide in Node, in the same jail;\n"
	"                        without namespaces where the host refuses them)\n"
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

#define RUN(field) offsetof(struct run_opts, field)
#define RUN_GIVEN(field) OPT_GIVEN(struct run_opts, field)

static const char *const network_modes[] = { "none", "loopback", NULL };
static const char *const backends[] = { "native", "wasm", NULL };

static const struct opt run_options[] = {
	{ OPT_ROW("help", 'h', OPT_HELP, RUN(help)) },
	{ OPT_ROW(NULL, 'c', OPT_PROGRAM, RUN(code)) },
	{ OPT_ROW("json", 0, OPT_FLAG, RUN(json)) },
	{ OPT_ROW("debug", 0, OPT_FLAG, RUN(debug)) },
	{ OPT_ROW("warm", 0, OPT_FLAG, RUN(warm)) },
	{ OPT_ROW("policy", 0, OPT_STRING, RUN(policy)) },
	{ OPT_ROW("config", 0, OPT_STRING, RUN(config)) },
	{ OPT_ROW("python", 0, OPT_PATH, RUN(python)) },
	{ OPT_ROW("stdin", 0, OPT_STRING, RUN(stdin_file)) },
	{ OPT_ROW("network", 0, OPT_CHOICE, RUN(network)), .choices = network_modes },
	{ OPT_ROW("backend", 0, OPT_CHOICE, RUN(backend)), .choices = backends },
	{ OPT_ROW("timeout", 0, OPT_DURATION, RUN(timeout_ms)), .given = RUN_GIVEN(has_timeout), .min = 1, .max = UINT64_MAX,
	  .range = "must be more than 0" },
	{ OPT_ROW("memory", 0, OPT_SIZE, RUN(memory_bytes)), .given = RUN_GIVEN(has_memory), .min = 16 << 20,
	  .max = UINT64_MAX, .range = "at least 16M is needed to start python" },
	/* the same range a policy file accepts */
	{ OPT_ROW("output-limit", 0, OPT_SIZE, RUN(output_bytes)), .given = RUN_GIVEN(has_output), .min = 1024,
	  .max = 1ULL << 30, .range = "expected a size from 1K to 1G" },
	{ OPT_ROW("cpu", 0, OPT_CORES, RUN(cpu_millis)), .given = RUN_GIVEN(has_cpu), .min = 1, .max = 1024000,
	  .range = "expected cores such as 0.5 or 2" },
	{ OPT_ROW("pids", 0, OPT_UINT, RUN(pids)), .given = RUN_GIVEN(has_pids), .min = 2, .max = 1 << 22,
	  .range = "at least 2 (init and python)" },
};

const struct opt_cmd cli_run_cmd = { "run", cli_run_usage, run_options, ARRAY_SIZE(run_options), true };

int cli_parse_run(int argc, char **argv, struct run_opts *o, struct pc_err *err)
{
	int i;
	memset(o, 0, sizeof(*o));
	i = opts_parse(&cli_run_cmd, argc, argv, o, err);
	if (i < 0 || o->help)
		return i < 0 ? -1 : 0;
	if (!o->code) {
		if (i >= argc)
			return pc_fail(err, EINVAL, "usage", "no program: give -c CODE, a FILE, or - for stdin");
		if (strcmp(argv[i], "-") == 0)
			o->from_stdin = true;
		else
			o->file = argv[i];
		i++;
	}
	o->args = argv + i;
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
		policy_set_network(p, strcmp(o->network, "loopback") == 0 ? NET_LOOPBACK : NET_NONE);
	if (o->python) {
		free(p->python);
		p->python = xstrdup(o->python);
	}
	if (o->backend && policy_set_backend(p, o->backend, err) < 0)
		return -1;
	if (o->python && policy_is_wasm(p))
		return pc_fail(err, EINVAL, "usage", "--python: the wasm backend runs Pyodide's own Python, "
			       "not an interpreter of the host");
	return 0;
}
