/* pycell: what a jail is given to run: python's argv, the environment it
 * starts with, and the program's files.  Below run.c and every spawner,
 * which all build a program the same way (the zygote sets up its
 * interpreter with the same environment a cold python gets). */
#ifndef PYCELL_PROGRAM_H
#define PYCELL_PROGRAM_H

#include <stdbool.h>
#include <stddef.h>

#include "config/policy.h"
#include "jail/jail.h"

enum run_mode {
	RUN_MODE_SCRIPT = 0,   /* python PROG ARGS..., like python3 FILE */
	RUN_MODE_CELL,         /* run the code like a notebook cell: globals from
	                          variables, the last expression's value returned */
};

/* What one program is: its mode, text, file name and arguments. */
struct program {
	enum run_mode mode;
	const char *code;             /* program text */
	size_t code_len;
	const char *prog_name;        /* file name shown in tracebacks; NULL: "main.py" */
	char *const *args;            /* sys.argv[1:], NULL-terminated or NULL */
	const char *variables_json;   /* RUN_MODE_CELL: JSON object of globals; NULL: {} */
	const char *files_json;       /* RUN_MODE_CELL: [{path, text|base64}] written to
	                                 /workspace before the code runs; NULL: none */
	bool outputs;                 /* RUN_MODE_CELL: send images and changed files back */
	bool ready;                   /* RUN_MODE_CELL, wasm: a jail made ahead, whose node
	                                 reads the cell from WASM_PROG_FD */
	const char *bare_runtime;     /* wasm, a bare jail (jail_spec.bare): NULL, or the
	                                 host's runtime dir, all node may read; the files
	                                 come from WASM_PROG_FD, /workspace is Pyodide's */
};

/* python [flags] /run/pycell/PROG ARGS... (a script) or python [flags] -c
 * "import pycell._cell ..." (a cell): a NULL-terminated, malloc'd vector of
 * malloc'd strings (program_strv_free). */
char **program_argv(const struct policy *p, const struct program *prog);
/* The threads a run's pools may start: the CPU limit rounded up (else
 * the CPUs this process may use), at most those CPUs and half the task
 * limit, at least 1. */
unsigned program_threads(const struct policy *p);
/* The environment a jailed program starts with: a fixed base, the
 * thread-pool variables (OMP_NUM_THREADS and the like) at
 * program_threads(), then the policy's, which win; with packages,
 * PYTHONPATH has JAIL_PACKAGES_DIR after the runtime. */
char **program_envp(const struct policy *p, bool packages);
/* The program's files in spec: main.py (or the script's name), and a
 * cell's variables.json, files.json (when it has files) and outputs (when
 * it sends them); *vars owns the variables' copy. */
void program_files(struct jail_spec *spec, const struct program *prog, char **vars);
void program_strv_free(char **v);

#endif
