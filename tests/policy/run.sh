#!/bin/sh
# pycell: `pycell policy-test` on every shipped policy (policy/*.json), as
# one automake TESTS entry.  Exit 0 when every probe of every policy is
# contained, 1 otherwise; 77 (skipped, reason printed) when this host cannot
# build a jail at all (no user namespaces: see `pycell doctor`).
set -u

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
: "${PYCELL:=$top/pycell}"
: "${PYCELL_DATADIR:=$top}"
export PYCELL_DATADIR

if ! "$PYCELL" run -c 'pass' >/dev/null 2>&1; then
	echo "policy: SKIP: pycell cannot start a jail on this host ($("$PYCELL" run -c pass 2>&1 | tail -n 1))"
	exit 77
fi

rc=0
for f in "$PYCELL_DATADIR"/policy/*.json; do
	name=$(basename "$f" .json)
	echo "# policy $name"
	"$PYCELL" policy-test --policy "$name"
	st=$?
	echo "# policy $name: exit $st"
	[ "$st" -eq 0 ] || rc=1
done
exit $rc
