/* pycell: one binary, a few subcommands. */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "base/fault.h"
#include "base/log.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "config/result.h"
#include "jail/caps.h"
#include "jail/init_mem.h"
#include "jail/jail.h"
#include "run/zygote.h"

static const char usage[] =
	"Usage: pycell COMMAND [OPTION]...\n"
	"Run untrusted Python in a fresh Linux jail, from the command line or as an MCP server.\n"
	"\n"
	"Commands:\n"
	"  run          run a program in a jail (pycell run --help)\n"
	"  mcp          MCP server on stdin/stdout (pycell mcp --help)\n"
	"  serve        MCP server over Streamable HTTP (pycell serve --help)\n"
	"  doctor       check what this host supports and how to fix what it lacks\n"
	"  policy-test  prove a policy holds: run the escape probes (pycell policy-test --help)\n"
	"\n"
	"  -h, --help     show this help\n"
	"  -V, --version  show the version\n"
	"\n"
	"See pycell(1), pycell-policy(5).\n";

int main(int argc, char **argv)
{
	static const struct { const char *name; int (*fn)(int, char **); } cmds[] = {
		{ "run", cmd_run },
		{ "mcp", cmd_mcp },
		{ "serve", cmd_serve },
		{ "doctor", cmd_doctor },
		{ "policy-test", cmd_policy_test },
		{ "__zygote", cmd_zygote }, /* internal: warm starts, see zygote.h */
	};
	struct pc_err err = { 0 };

	jail_note_cmdline(argv);
	init_mem_note();
	fault_init();

	if (argc < 2) {
		fputs(usage, stderr);
		return EXIT_USAGE;
	}
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
		fputs(usage, stdout);
		return 0;
	}
	if (strcmp(argv[1], "-V") == 0 || strcmp(argv[1], "--version") == 0) {
		puts(PACKAGE_STRING);
		return 0;
	}
	/* A jail that stops reading its stdin must not kill the supervisor. */
	signal(SIGPIPE, SIG_IGN);
	for (size_t i = 0; i < ARRAY_SIZE(cmds); i++) {
		if (strcmp(argv[1], cmds[i].name) == 0) {
			if (caps_harden_supervisor(&err) < 0)
				return cli_setup_error(cmds[i].name, &err);
			return cmds[i].fn(argc - 1, argv + 1);
		}
	}
	fprintf(stderr, "pycell: unknown command '%s'\nTry 'pycell --help'.\n", argv[1]);
	return EXIT_USAGE;
}
