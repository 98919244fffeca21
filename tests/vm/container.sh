#!/bin/sh
# pycell check-vm: pycell's container image on cgroup v2, in the VM (run by
# guest.sh after the limit tests).  The image's file system comes from
# check-vm.sh (podman export of the image make check-container built), the
# VM's podman (the host's, over 9p) runs it with README's flags, runc, no
# network, a cgroup namespace of its own (podman's default on cgroup v2),
# and tests/vm/delegate-cgroup as the runtime's hooks: the container's
# cgroup mounted read-write and given to the container's user, as a runtime
# that delegates does.  Checks: pycell's doctor sees the delegated cgroup,
# a memory bomb ends as memory_limit enforced by cgroup2 (memory, pids and
# cpu all by cgroup2), without the delegation each limit is said not to be
# enforced, and nothing of the containers is left.
# Arguments: the source tree, the image's file system.  Prints
# "PYCELL-VM-SUMMARY container: N passed, M failed"; exit 0 if none failed.
TREE=$1
ROOTFS=$2
W=/tmp/pycell-ctr
pass=0 fail=0
ok() { echo "  ok   $*"; pass=$((pass + 1)); }
bad() { echo "  FAIL $*"; fail=$((fail + 1)); }
check() { what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; return 1; fi; }
done_() { echo "PYCELL-VM-SUMMARY container: $pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit $?; }

echo "== pycell's image on cgroup v2 (podman, runc, a delegating runtime's hooks)"
mkdir -p "$W/hooks.d" /var/lib/containers "$W/run" || { bad "the VM's podman folders"; done_; }
mount -t tmpfs -o mode=0700 tmpfs /var/lib/containers || { bad "tmpfs on /var/lib/containers"; done_; }
# the VM's kernel has no overlay module: vfs storage, which --rootfs does not use
cat >"$W/storage.conf" <<EOS
[storage]
driver = "vfs"
runroot = "$W/run"
graphroot = "/var/lib/containers/storage"
EOS
cat >"$W/containers.conf" <<EOS
[containers]
netns = "none"
cgroupns = "private"
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
hooks_dir = ["$W/hooks.d"]
EOS
for stage in precreate createRuntime; do
	printf '{"version": "1.0.0", "hook": {"path": "%s", "args": ["delegate-cgroup", "%s"]}, "when": {"annotations": {"pycell.check": "delegate"}}, "stages": ["%s"]}\n' \
		"$TREE/tests/vm/delegate-cgroup" "$stage" "$stage" >"$W/hooks.d/delegate-$stage.json"
done
export CONTAINERS_CONF="$W/containers.conf" CONTAINERS_STORAGE_CONF="$W/storage.conf"
python3 "$TREE/contrib/container/seccomp.py" /usr/share/containers/seccomp.json >"$W/seccomp.json" ||
	{ bad "seccomp.py"; done_; }
BOMB='chunks = []
while True:
    chunks.append(bytearray(1 << 20))'
# README's flags; --rootfs takes no image configuration: its user and
# environment are given as the Containerfile sets them
# (the hooks above are for a container with the annotation EXTRA gives)
ctr() { podman run --rm --user 999:999 --env PYCELL_CACHE_DIR=/tmp/pycell-cache \
	--security-opt seccomp="$W/seccomp.json" --security-opt systempaths=unconfined \
	--cap-drop ALL --read-only --tmpfs /tmp $EXTRA --rootfs "$ROOTFS" "$@"; }

EXTRA="--annotation pycell.check=delegate"
out=$(ctr /usr/bin/pycell doctor 2>&1); rc=$?
echo "$out" | grep -E '^ *(ok|warn|fail) +cgroup v2' | sed 's/^/    /'
check "delegated: pycell doctor says cgroup v2 serves memory, pids and cpu" \
	sh -c "[ $rc = 0 ] && echo \"\$1\" | grep -Eq '^ *ok +cgroup v2'" - "$out" ||
	echo "$out" | tail -n 20
ctr /usr/bin/pycell run --json --memory 48M -c "$BOMB" >"$W/bomb.json" 2>"$W/bomb.err"
check "delegated: a memory bomb ends as memory_limit, enforced by cgroup2 (and pids, cpu by it too)" python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
by = {l["name"]: l["enforced_by"] for l in r["limits"]}
print("    status", r["status"], "limits", by)
sys.exit(0 if r["status"] == "memory_limit" and by.get("memory_bytes") == "cgroup2"
         and by.get("pids") == "cgroup2" and by.get("cpu_millis") == "cgroup2" else 1)' "$W/bomb.json" ||
	tail -c 2000 "$W/bomb.err"
EXTRA=
ctr /usr/bin/pycell run --json -c 'print(1)' >"$W/plain.json" 2>"$W/plain.err" || tail -n 5 "$W/plain.err"
check "not delegated (the cgroup read-only, root's): the run says the memory limit is not enforced" python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
sys.exit(0 if r["status"] == "ok" and any("memory limit" in w and "not enforced" in w for w in r["warnings"]) else 1)' \
	"$W/plain.json"
check "no container and no container cgroup left" sh -c \
	'[ -z "$(podman ps -aq)" ] && [ -z "$(find /sys/fs/cgroup -mindepth 2 -name "libpod-*" 2>/dev/null)" ]'
done_
