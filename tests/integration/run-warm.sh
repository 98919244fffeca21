#!/bin/sh
# pycell: the jail, CLI, capability and seccomp tests again, with every jail
# cloned from a zygote (`pycell run --warm`): warm starts must give the same
# isolation as cold ones.  A run that falls back to cold fails its test.
here=$(cd "$(dirname "$0")" && pwd)
PYCELL_RUN_FLAGS=--warm
PYCELL_TEST_FILES="test_jail.py test_run_cli.py test_caps.py test_seccomp.py"
PYCELL_SUITE_NAME=integration-warm
export PYCELL_RUN_FLAGS PYCELL_TEST_FILES PYCELL_SUITE_NAME
exec sh "$here/run.sh" "$@"
