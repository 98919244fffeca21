/* pycell: the options of `pycell run` (pure: no I/O). */
#ifndef PYCELL_RUN_OPTS_H
#define PYCELL_RUN_OPTS_H

#include <stdbool.h>
#include <stdint.h>

#include "base/util.h"
#include "config/policy.h"

struct run_opts {
	bool help, json, debug, warm;
	const char *policy;         /* --policy FILE|NAME */
	const char *config;         /* --config FILE */
	const char *python;         /* --python PATH */
	const char *stdin_file;     /* --stdin FILE ("-" = our stdin) */
	const char *backend;        /* --backend native|wasm */
	const char *network;        /* --network none|loopback */
	bool has_timeout, has_memory, has_output, has_cpu, has_pids;
	uint64_t timeout_ms, memory_bytes, output_bytes;
	uint32_t cpu_millis, pids;
	/* the program: exactly one of code, file, from_stdin */
	const char *code;
	const char *file;
	bool from_stdin;
	char **args;                /* sys.argv[1:], NULL-terminated (points into argv) */
};

/* Parse `pycell run` arguments (argv[0] = "run").  Returns 0, or -1 with a
 * message in err for a usage error. */
int cli_parse_run(int argc, char **argv, struct run_opts *o, struct pc_err *err);
/* Apply the options that override policy values. */
int cli_apply_overrides(const struct run_opts *o, struct policy *p, struct pc_err *err);
extern const char cli_run_usage[];

#endif
