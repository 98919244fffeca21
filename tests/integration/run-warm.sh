#!/bin/sh
# pycell: the suites again with the other way of starting a jail.  The
# jail, CLI, capability and seccomp tests with every jail cloned from a
# zygote (`pycell run --warm`): warm starts must give the same isolation
# as cold ones, and a run that falls back to cold fails its test.  And the
# MCP protocol tests against `pycell mcp --cold`, since servers start warm
# by default.
here=$(cd "$(dirname "$0")" && pwd)
PYCELL_RUN_FLAGS=--warm
PYCELL_MCP_FLAGS=--cold
PYCELL_TEST_FILES="test_jail.py test_run_cli.py test_caps.py test_seccomp.py test_mcp_raw.py"
PYCELL_SUITE_NAME=integration-warm
export PYCELL_RUN_FLAGS PYCELL_MCP_FLAGS PYCELL_TEST_FILES PYCELL_SUITE_NAME
exec sh "$here/run.sh" "$@"
