#!/bin/sh
# pycell: the pytest integration suite as one automake TESTS entry.
# Runs against $PYCELL (default <top>/pycell) with $PYCELL_DATADIR (default
# the source tree).  Extra arguments go to pytest after the suite directory
# (options such as -k uid or -x; a path is collected in addition).
# Set PYCELL_JUNIT=FILE to also write a JUnit XML report.
# Exit: 0 all passed (skips allowed, each printed with its reason),
# 1 a test failed, 99 (automake "hard error") when pytest is missing, was
# interrupted, hit an internal/usage error or collected no tests.
set -u

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
: "${PYCELL:=$top/pycell}"
: "${PYCELL_DATADIR:=$top}"
export PYCELL PYCELL_DATADIR
# The first python3 on PATH may be one without pytest; the jail's
# interpreter and the test runner are the system one.
py=${PYCELL_TEST_PYTHON:-/usr/bin/python3}

if ! "$py" -c 'import pytest' 2>/dev/null; then
	echo "integration: $py has no pytest (apt-get install python3-pytest)" >&2
	exit 99
fi

# A read-only source tree (make distcheck) must not break the run.
PYTHONDONTWRITEBYTECODE=1
export PYTHONDONTWRITEBYTECODE

# A test that hangs fails alone, with where it waited, instead of holding
# the suite (and CI's hour) until it is killed with no word of which
# (python3-pytest-timeout; the slowest test takes 30 s under ASan).
if "$py" -c 'import pytest_timeout' 2>/dev/null; then
	set -- --timeout="${PYCELL_TEST_TIMEOUT:-300}" "$@"
else
	echo "integration: $py has no pytest-timeout (apt-get install python3-pytest-timeout): a test that hangs holds the suite" >&2
fi

if [ -n "${PYCELL_JUNIT:-}" ]; then
	set -- --junitxml="$PYCELL_JUNIT" "$@"
fi

log=$(mktemp) || exit 99
rcfile=$(mktemp) || exit 99
trap 'rm -f "$log" "$rcfile"' EXIT

# POSIX sh has no pipefail: carry pytest's status out of the pipeline.
{
	# PYCELL_TEST_FILES: a subset (names in this directory), else all
	if [ -n "${PYCELL_TEST_FILES:-}" ]; then
		set -- $(for f in $PYCELL_TEST_FILES; do echo "$here/$f"; done) "$@"
	else
		set -- "$here" "$@"
	fi
	"$py" -m pytest -ra -p no:cacheprovider --rootdir="$here" "$@" 2>&1
	echo $? >"$rcfile"
} | tee "$log"
rc=$(cat "$rcfile")

# the line pytest ends with: between ='s, or bare under -q
summary=$(grep -E '^(=+ )?[0-9a-z ,]*(passed|failed|skipped|error|no tests ran|deselected).* in [0-9.]+s' "$log" |
	tail -n 1 | sed -e 's/^=* *//' -e 's/ *=*$//')
echo "${PYCELL_SUITE_NAME:-integration}: ${summary:-no pytest summary line} (pytest exit $rc)"

case $rc in
0) exit 0 ;;
1) exit 1 ;;
5)
	echo "integration: pytest collected no tests: that is a failure" >&2
	exit 99
	;;
*) exit 99 ;;
esac
