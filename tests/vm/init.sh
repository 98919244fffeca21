#!/bin/busybox sh
# shellcheck shell=dash
# pycell check-vm: /init of the initramfs.  Loads the virtio-mmio and 9p
# modules, mounts the host's root (read-only, tag "hostroot") with fresh
# proc, sys, dev and tmpfs mounts on top, and switches to it to run
# tests/vm/guest.sh as pid 1.
/bin/busybox --install -s /bin
export PATH=/bin

mount -t devtmpfs devtmpfs /dev
exec </dev/console >/dev/console 2>&1
mount -t proc proc /proc
mount -t sysfs sysfs /sys

fail() {
	echo "check-vm init: $*"
	echo "PYCELL-VM-EXIT 99"
	poweroff -f
	exit 1
}

while read -r m; do
	insmod "/modules/$m.ko" || fail "insmod $m"
done </modules/order
# shellcheck source=/dev/null  # written by check-vm.sh
. /vm.conf

# virtio-mmio devices are found through ACPI as the module loads; give the
# 9p transport a moment to register its tag.
i=0
until mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144,cache=loose hostroot /newroot 2>/dev/null; do
	i=$((i + 1))
	[ $i -lt 50 ] || fail "cannot mount the host root over virtio-9p"
	sleep 0.1
done
[ -f "/newroot$TREE/tests/vm/guest.sh" ] || fail "the build tree $TREE is not visible in the VM"

mount -t proc proc /newroot/proc
mount -t sysfs sysfs /newroot/sys
mount -t devtmpfs devtmpfs /newroot/dev
umount /proc /sys
umount -l /dev
exec switch_root /newroot /bin/sh "$TREE/tests/vm/guest.sh" "$TREE" "$BUILD" "$TESTS" "$PYTEST_ARGS" "$MODE" "$ROOTFS"
