/* pycell: the subcommands of the one binary. Each returns the exit status. */
#ifndef PYCELL_COMMANDS_H
#define PYCELL_COMMANDS_H

int cmd_run(int argc, char **argv);
int cmd_mcp(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
int cmd_policy_test(int argc, char **argv);

#endif
