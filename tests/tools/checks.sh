# pycell: the counting of the root-run checks (tests/deb/check.sh,
# tests/container/check.sh), sourced after they set SUITE (the closing
# line's name) and LOG: every line goes to stdout and to LOG; ok/bad count,
# check runs a command and counts it; finish prints "SUITE: N passed, M
# failed" (which .ci/run reads) and fails if any did; skip_unless_root
# prints the reason and a closing line of zeros, and exits 0.
pass=0 fail=0
ok() { echo "  ok   $*"; pass=$((pass + 1)); }
bad() { echo "  FAIL $*"; fail=$((fail + 1)); }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }
finish() { echo "$SUITE: $pass passed, $fail failed"; [ "$fail" -eq 0 ]; }
skip_unless_root() {
	[ "$(id -u)" -eq 0 ] && return 0
	echo "$SUITE: SKIP: $*"; echo "$SUITE: 0 passed, 0 failed"; exit 0
}
exec > >(tee "$LOG") 2>&1
