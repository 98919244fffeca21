#!/bin/sh
# pycell check-vm, systemd mode: pid 1 of the VM after guest.sh's tmpfs
# mounts.  Makes what a boot of the read-only host root under systemd needs
# writable (/var/lib, /var/log, /var/cache; a pycell user in a copy of
# /etc/passwd), installs contrib/systemd/'s units and the test's own in
# /run/systemd/system, and becomes systemd, which starts pycell-vm.target:
# tests/vm/systemd-test.sh, then power-off.
# Arguments: source tree, build tree.
TREE=$1
BUILD=$2

fail() {
	echo "check-vm systemd-boot: $*"
	echo "PYCELL-VM-EXIT 99"
	echo o >/proc/sysrq-trigger
	while :; do :; done
}

for d in /var/lib /var/log /var/cache; do
	mount -t tmpfs -o mode=0755 tmpfs "$d" || fail "tmpfs on $d"
done
# the service's user, as the Debian package makes it
cp /etc/passwd /run/passwd && cp /etc/group /run/group || fail "copy passwd"
grep -q '^pycell:' /run/passwd || echo 'pycell:x:990:990:pycell:/nonexistent:/usr/sbin/nologin' >>/run/passwd
grep -q '^pycell:' /run/group || echo 'pycell:x:990:' >>/run/group
mount --bind /run/passwd /etc/passwd && mount --bind /run/group /etc/group || fail "bind passwd"

u=/run/systemd/system
mkdir -p "$u/pycell.service.d" || fail "mkdir $u"
sed -e "s|@bindir@|$BUILD|g" -e "s|@sysconfdir@|/etc|g" "$TREE/contrib/systemd/pycell.service.in" >"$u/pycell.service" ||
	fail "pycell.service"
cp "$TREE/contrib/systemd/pycell.socket" "$u/" || fail "pycell.socket"
# The shipped units as they are, but for where this pycell and its token
# file are; a tree under /tmp (a CI clone) would be hidden by PrivateTmp.
private_tmp=yes
case "$TREE $BUILD" in */tmp/* | /tmp/*) private_tmp=no ;; esac
cat >"$u/pycell.service.d/check-vm.conf" <<EOF2
[Service]
Environment=PYCELL_DATADIR=$TREE
ExecStart=
ExecStart=$BUILD/pycell serve --config /run/pycell-test/pycell.conf --tokens /run/pycell-test/tokens.json -v
PrivateTmp=$private_tmp
EOF2
cat >"$u/pycell-vm-test.service" <<EOF2
[Unit]
Description=pycell check-vm: the systemd tests
After=basic.target
[Service]
Type=oneshot
ExecStart=/bin/sh $TREE/tests/vm/systemd-test.sh $TREE $BUILD
StandardOutput=journal+console
StandardError=journal+console
# systemd's own power-off waits on the 9p root it cannot unmount: the
# script ends the VM itself (sysrq), and this does if the script does not
ExecStopPost=/bin/sh -c 'echo o >/proc/sysrq-trigger'
EOF2
cat >"$u/pycell-vm.target" <<EOF2
[Unit]
Description=pycell check-vm
Requires=pycell-vm-test.service
After=pycell-vm-test.service
AllowIsolate=yes
EOF2
echo "check-vm: booting systemd ($(/lib/systemd/systemd --version | head -n 1))"
exec /lib/systemd/systemd --unit=pycell-vm.target --log-level=warning
