#!/bin/sh
# pycell check-vm: pid 1 of the VM, on the host's root (read-only 9p).
# Writable tmpfs where tests write, cgroup2 with memory, pids and cpu
# enabled for children of the root cgroup, then the limit tests.  Ends with
# the line "PYCELL-VM-EXIT <status>" that check-vm.sh reads, and powers off.
# Arguments: source tree, build tree, pytest files, extra pytest arguments,
# the mode: "systemd" hands over to tests/vm/systemd-boot.sh once the
# tmpfs mounts are made, and the file system of pycell's container image
# (tests/vm/container.sh runs it after the tests; none: not run).
TREE=$1
BUILD=$2
TESTS=$3
ARGS=$4
MODE=${5:-tests}
ROOTFS=${6:-}
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/tmp TMPDIR=/tmp LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1

finish() {
	echo "PYCELL-VM-EXIT $1"
	sync
	# power off now.  Shut-down takes the 9p root away, so no external
	# command (sleep) can run meanwhile: wait with shell builtins, else
	# init would exit first and panic.  Should the power-off fail, the
	# host's timeout ends qemu.
	echo o >/proc/sysrq-trigger
	while :; do :; done
}

# A source or build tree below one of the directories the tmpfs mounts
# cover (a CI clone in /tmp, say) is kept visible: bind it aside first and
# back on top after.
stash=0
for p in "$TREE" "$BUILD"; do
	case $p in
	/tmp/* | /var/tmp/* | /run/*)
		mkdir -p "/dev/.pycell-stash$stash" && mount --bind "$p" "/dev/.pycell-stash$stash" || finish 99
		stash=$((stash + 1)) ;;
	esac
done
for d in /tmp /var/tmp /run; do
	mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$d" || finish 99
done
i=0
for p in "$TREE" "$BUILD"; do
	case $p in
	/tmp/* | /var/tmp/* | /run/*)
		mkdir -p "$p" && mount --bind "/dev/.pycell-stash$i" "$p" || finish 99
		i=$((i + 1)) ;;
	esac
done
mkdir -p /dev/shm && mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /dev/shm
[ "$MODE" = systemd ] && exec /bin/sh "$TREE/tests/vm/systemd-boot.sh" "$TREE" "$BUILD"
mount -t cgroup2 cgroup2 /sys/fs/cgroup || finish 99
# What a cgroup v2 host with delegation gives: the controllers enabled for
# children of the root cgroup, where pytest and pycell run.
echo "+memory +pids +cpu" >/sys/fs/cgroup/cgroup.subtree_control || finish 99
hostname pycell-vm 2>/dev/null
ip link set lo up 2>/dev/null

echo "check-vm: Linux $(uname -r), cgroup2 controllers: $(cat /sys/fs/cgroup/cgroup.subtree_control)"
cd /tmp || finish 99
PYCELL=$BUILD/pycell
PYCELL_DATADIR=$TREE
PYCELL_SRCDIR=$TREE
# the tests that do less in the VM (TCG runs python at a third to a tenth
# of the host's speed) read it: test_limits.py, test_doctor.py
PYCELL_TEST_VM=1
export PYCELL PYCELL_DATADIR PYCELL_SRCDIR PYCELL_TEST_VM
"$PYCELL" doctor

rc=0
if [ -x "$BUILD/tests/unit/test_cgroup" ]; then
	CK_VERBOSITY=verbose "$BUILD/tests/unit/test_cgroup" >/tmp/unit.log 2>&1
	urc=$?
	# its closing line once, in the summary: "cgroup: F failed, P passed, S skipped"
	grep -v '^cgroup: [0-9]* failed' /tmp/unit.log
	sed -n 's/^cgroup: \([0-9]* failed\)/PYCELL-VM-SUMMARY unit test_cgroup: \1/p' /tmp/unit.log
	echo "PYCELL-VM-SUMMARY unit test_cgroup exit $urc"
	[ $urc -eq 0 ] || [ $urc -eq 77 ] || rc=1
else
	echo "PYCELL-VM-SUMMARY unit test_cgroup not built (make tests/unit/test_cgroup)"
fi

files=
for t in $TESTS; do
	files="$files $TREE/tests/integration/$t"
done
# shellcheck disable=SC2086  # word splitting of the file list and args is wanted
/usr/bin/python3 -m pytest -ra -p no:cacheprovider --color=no --durations=8 --rootdir="$TREE/tests/integration" \
	-o cache_dir=/tmp/pytest-cache --basetemp=/tmp/pytest $files $ARGS
prc=$?
echo "PYCELL-VM-SUMMARY pytest exit $prc"
[ $prc -eq 0 ] || rc=1
if [ -n "$ROOTFS" ]; then
	sh "$TREE/tests/vm/container.sh" "$TREE" "$ROOTFS" || rc=1
fi
finish $rc
