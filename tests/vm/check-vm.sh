#!/bin/sh
# pycell: `make check-vm` -- run the limit tests on cgroup v2 for real.
#
# Boots Debian's kernel under qemu (TCG: KVM is not assumed) as a microvm
# whose root file system is this machine's root, shared read-only over
# virtio-9p, so the VM sees the build tree and the host's python3.  In the
# VM, cgroup2 is mounted with memory, pids and cpu enabled for children of
# the root cgroup (what a systemd host with cgroup v2 gives a service), and
# the limit tests run there: tests/unit/test_cgroup and the pytest files in
# $PYCELL_VM_TESTS, then pycell's container image with a delegated cgroup
# (tests/vm/container.sh).  The VM's console is copied to stdout and to
# $PYCELL_VM_LOG.
#
# The kernel comes from the Debian package linux-image-amd64 depends on,
# fetched with `apt-get download` and unpacked with `dpkg-deb -x` (nothing
# is installed) into $PYCELL_VM_CACHE, once.
#
# Environment:
#   PYCELL_BUILDDIR    where pycell and tests/unit/test_cgroup were built
#                      (default: the source tree)
#   PYCELL_VM_CACHE    kernel cache (default ${XDG_CACHE_HOME:-~/.cache}/pycell-vm)
#   PYCELL_VM_KERNEL_DEB  use this linux-image-*.deb instead of downloading
#   PYCELL_VM_TESTS    pytest files or node ids, relative to tests/integration
#                      (default: test_limits.py, test_doctor.py, the two
#                      tests of sessions that share a memory cgroup and the
#                      one of a session's own cgroups)
#   PYCELL_VM_PYTEST_ARGS  extra pytest arguments (e.g. -k memory -x)
#   PYCELL_VM_TIMEOUT  seconds before the VM is killed (default 600; 300 in
#                      systemd mode; both VMs took 241 s in all in CI)
#   PYCELL_VM_BOOTS    boots in all when the VM gives no result (default 2)
#   PYCELL_VM_MEM, PYCELL_VM_SMP  guest memory (default 2G) and cpus (2)
#   PYCELL_VM_LOG      console log (default $PYCELL_BUILDDIR/tests/vm/check-vm.log)
#   PYCELL_VM_APPEND   kernel arguments instead of "quiet loglevel=3" (debugging)
#   PYCELL_VM_TSC_KHZ  the host's TSC rate (default: "cpu MHz" of /proc/cpuinfo)
#   PYCELL_VM_IMAGE    pycell's container image (default localhost/pycell:check,
#                      the one make check-container builds): in "tests" mode
#                      its file system is exported (podman export, cached
#                      in $PYCELL_VM_CACHE by image id) and run in the VM by
#                      tests/vm/container.sh; "none", or no podman or no such
#                      image: not run, saying why
#   PYCELL_VM_MODE     "tests" (default: the above) or "systemd": boot the
#                      host's systemd as the VM's pid 1 with contrib/systemd/'s
#                      units and run tests/vm/systemd-test.sh under it (log
#                      default: $PYCELL_BUILDDIR/tests/vm/check-vm-systemd.log)
#
# Exit: the tests' status (0 passed, 1 failed); 77 (skipped) when qemu or
# busybox-static is missing; 99 when the VM did not report a result.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
build=$(cd "${PYCELL_BUILDDIR:-$top}" && pwd)
cache=${PYCELL_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pycell-vm}
shared=test_sessions.py::test_sessions_that_share_a_memory_cgroup_are_each_held_to_their_limit
shared="$shared test_sessions.py::test_the_shared_memory_cgroup_bounds_the_sessions_together"
shared="$shared test_sessions.py::test_a_session_is_in_cgroups_of_its_own_with_the_device_filter"
tests=${PYCELL_VM_TESTS:-test_limits.py test_doctor.py $shared}
mode=${PYCELL_VM_MODE:-tests}
if [ "$mode" = systemd ]; then timeout_s=${PYCELL_VM_TIMEOUT:-300}; else timeout_s=${PYCELL_VM_TIMEOUT:-600}; fi
case $mode in
tests) log=${PYCELL_VM_LOG:-$build/tests/vm/check-vm.log} ;;
systemd) log=${PYCELL_VM_LOG:-$build/tests/vm/check-vm-systemd.log} ;;
*) echo "check-vm: PYCELL_VM_MODE=$mode: expected tests or systemd" >&2; exit 99 ;;
esac

say() { echo "check-vm: $*" >&2; }
skip() { say "SKIP: $*"; exit 77; }
hard() { say "ERROR: $*"; exit 99; }

qemu=$(command -v qemu-system-x86_64 || true)
[ -n "$qemu" ] || skip "qemu-system-x86_64 not found (apt-get install qemu-system-x86)"
busybox=
for b in /bin/busybox /usr/bin/busybox; do
	if [ -x "$b" ] && file_is_static=$(ldd "$b" 2>&1 || true) && \
	   echo "$file_is_static" | grep -q 'not a dynamic executable'; then
		busybox=$b
		break
	fi
done
[ -n "$busybox" ] || skip "a static busybox is needed for the initramfs (apt-get install busybox-static)"
[ "$mode" != systemd ] || [ -x /lib/systemd/systemd ] || skip "systemd mode: /lib/systemd/systemd is not installed (apt-get install systemd)"
[ "$(uname -m)" = x86_64 ] || skip "the VM harness boots an amd64 kernel; this is $(uname -m)"
[ -x "$build/pycell" ] || hard "$build/pycell is not built (make)"

# ------------------------------------------------------------ the kernel
mkdir -p "$cache"
deb=${PYCELL_VM_KERNEL_DEB:-}
if [ -z "$deb" ]; then
	pkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
	      sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*\)$/\1/p' | head -n 1)
	[ -n "$pkg" ] || hard "cannot tell which kernel linux-image-amd64 depends on (apt-get update?)"
	deb=$(find "$cache" -maxdepth 1 -name "${pkg}_*.deb" | head -n 1)
	if [ -z "$deb" ]; then
		say "downloading $pkg into $cache"
		(cd "$cache" && apt-get download "$pkg") >&2 || hard "apt-get download $pkg failed"
		deb=$(find "$cache" -maxdepth 1 -name "${pkg}_*.deb" | head -n 1)
	fi
fi
kroot=$cache/$(basename "$deb" .deb)
work=$(mktemp -d "${TMPDIR:-/tmp}/pycell-vm.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

# The modules for virtio-mmio and 9p, dependencies first (the package has no
# modules.dep: depmod runs at install time, and nothing is installed here).
module_file() {
	f=$(find "$moddir" -name "$1.ko" -o -name "$1.ko.xz" | head -n 1)
	[ -n "$f" ] || hard "module $1 not found in $moddir"
	case $f in
	*.xz) xz -dc "$f" >"$work/$1.ko" && echo "$work/$1.ko" ;;
	*) echo "$f" ;;
	esac
}
# (sh functions share variables: nothing set before the recursion is used after it)
loaded=
add_module() {
	case " $loaded " in *" $1 "*) return 0 ;; esac
	f=$(module_file "$1")
	for d in $(grep -a -o 'depends=[^[:cntrl:]]*' "$f" | head -n 1 | sed 's/^depends=//; s/,/ /g'); do
		add_module "$d"
	done
	f=$(module_file "$1")
	cp "$f" "$kroot.tmp/modules/$1.ko"
	echo "$1" >>"$kroot.tmp/modules/order"
	loaded="$loaded $1"
}

# Unpacked once; of the package's modules (most of its size) only those
# the initramfs needs are kept.
if [ ! -f "$kroot/modules/order" ]; then
	rm -rf "$kroot" "$kroot.tmp"
	dpkg-deb -x "$deb" "$kroot.tmp" || hard "dpkg-deb -x $deb failed"
	moddir=$(find "$kroot.tmp/lib/modules" -mindepth 1 -maxdepth 1 -type d | head -n 1)
	[ -n "$moddir" ] || hard "no kernel modules in $deb"
	mkdir "$kroot.tmp/modules"
	for m in virtio_mmio 9pnet_virtio 9p; do add_module "$m"; done
	rm -rf "$kroot.tmp/lib" "$kroot.tmp/usr"
	mv "$kroot.tmp" "$kroot"
fi
vmlinuz=$(find "$kroot/boot" -name 'vmlinuz-*' | head -n 1)
[ -n "$vmlinuz" ] || hard "no kernel image in $deb"
kver=${vmlinuz##*/vmlinuz-}

# ------------------------------------------------------------ the initramfs
stage=$work/initramfs
mkdir -p "$stage/bin" "$stage/dev" "$stage/proc" "$stage/sys" "$stage/newroot" "$stage/modules"
cp "$busybox" "$stage/bin/busybox"
cp "$here/init.sh" "$stage/init"
chmod 755 "$stage/init"
cp "$kroot/modules/"* "$stage/modules/"
mknod "$stage/dev/console" c 5 1 2>/dev/null || true

# ------------------------------------------------------------ the image
rootfs=
image=${PYCELL_VM_IMAGE:-localhost/pycell:check}
if [ "$mode" != tests ] || [ "$image" = none ]; then
	:
elif ! command -v podman >/dev/null 2>&1 || ! id=$(podman image inspect -f '{{.Id}}' "$image" 2>/dev/null); then
	say "SKIP: the container on cgroup v2: no image $image (make check-container builds it)"
else
	rootfs=$cache/rootfs-$id
	if [ ! -d "$rootfs" ]; then
		rm -rf "$cache"/rootfs-*
		cid=$(podman create -q --entrypoint /bin/true "$image") || hard "podman create $image failed"
		mkdir "$rootfs.tmp"
		podman export "$cid" | tar -C "$rootfs.tmp" -xf - || { podman rm -f "$cid" >/dev/null; hard "podman export $image failed"; }
		podman rm -f "$cid" >/dev/null
		# what podman run --rootfs makes in the root unless it is there
		# (it is read-only in the VM)
		[ -e "$rootfs.tmp/etc/mtab" ] || [ -L "$rootfs.tmp/etc/mtab" ] || ln -s ../proc/self/mounts "$rootfs.tmp/etc/mtab"
		for f in etc/hosts etc/hostname etc/resolv.conf run/.containerenv; do
			[ -e "$rootfs.tmp/$f" ] || : >"$rootfs.tmp/$f"
		done
		mv "$rootfs.tmp" "$rootfs"
	fi
	say "the container on cgroup v2: $image's file system, $rootfs"
fi

cat >"$stage/vm.conf" <<EOF
TREE='$top'
BUILD='$build'
TESTS='$tests'
PYTEST_ARGS='${PYCELL_VM_PYTEST_ARGS:-}'
MODE='$mode'
ROOTFS='$rootfs'
EOF
(cd "$stage" && find . | "$busybox" cpio -o -H newc -R 0:0 2>/dev/null) | gzip -1 >"$work/initrd.gz"

# ------------------------------------------------------------ boot
# microvm has no HPET or ACPI PM timer, and under a loaded TCG host the
# kernel's PIT calibration of the TSC fails and boot hangs.  TCG's guest
# TSC runs at the host's rate, so tell the kernel that rate.
tsc_khz=${PYCELL_VM_TSC_KHZ:-$(awk -F: '/^cpu MHz/ { printf "%d", $2 * 1000; exit }' /proc/cpuinfo 2>/dev/null)}
[ -n "$tsc_khz" ] && [ "$tsc_khz" -gt 0 ] || tsc_khz=2000000
mkdir -p "$(dirname "$log")"
say "booting Linux $kver (qemu TCG, microvm, host / over virtio-9p read-only); log: $log"
# POSIX sh has no pipefail: carry qemu's status out of the pipeline
boot() {
{
# (set -e would end this group at a nonzero status, before it is written)
qs=0
timeout -k 10 "$timeout_s" "$qemu" \
	-machine microvm,acpi=on,rtc=on,pit=on,pic=on -accel tcg,thread=multi -cpu max \
	-smp "${PYCELL_VM_SMP:-2}" -m "${PYCELL_VM_MEM:-2G}" \
	-no-user-config -nodefaults -display none -no-reboot \
	-serial stdio -monitor none \
	-kernel "$vmlinuz" -initrd "$work/initrd.gz" \
	-append "console=ttyS0 panic=-1 reboot=t tsc_early_khz=$tsc_khz tsc=reliable ${PYCELL_VM_APPEND:-quiet loglevel=3}" \
	-fsdev local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap \
	-device virtio-9p-device,fsdev=hostroot,mount_tag=hostroot \
	</dev/null 2>&1 || qs=$?
echo "$qs" >"$work/qrc"
} | tee "$log"
}

# A guest under software emulation on a loaded host can stop dead (seen
# once in CI: no output at all for 15 minutes, mid-boot of a unit).  A VM
# that gave no result at all is booted again, up to PYCELL_VM_BOOTS times
# in all, saying so; a result, whatever it is, is final.
boots=${PYCELL_VM_BOOTS:-2}
attempt=1
while :; do
	rm -f "$work/qrc"
	boot
	qrc=$(cat "$work/qrc" 2>/dev/null || echo "none")
	rc=$(sed -n 's/^PYCELL-VM-EXIT \([0-9][0-9]*\).*/\1/p' "$log" | tail -n 1)
	[ -n "$rc" ] && break
	if [ "$qrc" = 124 ]; then
		why="the VM did not finish within ${timeout_s}s"
	else
		why="the VM ended without a result (qemu/timeout status $qrc)"
	fi
	cp "$log" "$log.boot$attempt"
	[ "$attempt" -lt "$boots" ] || hard "$why (boot $attempt of $boots; the console: $log.boot*)"
	say "$why; its console is in $log.boot$attempt; booting it again ($((attempt + 1)) of $boots)"
	attempt=$((attempt + 1))
done
say "$(grep '^PYCELL-VM-SUMMARY' "$log" | sed 's/^PYCELL-VM-SUMMARY //' | tr '\n' ';')"
say "tests in the VM exited $rc"
exit "$rc"
