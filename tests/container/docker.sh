# pycell's image under Docker (Debian's docker.io, 20.10), sourced by
# tests/container/check.sh after the podman checks: README's flags with the
# profile seccomp.py makes from Docker's own default (moby's
# profiles/seccomp/default.json, which Debian ships in
# golang-github-docker-docker-dev: downloaded and unpacked, not installed),
# each flag shown needed, doctor, runs cold and warm, pycell serve with an
# MCP call, and a stop that leaves nothing.
#
# The daemon is this check's own: its state and sockets under $work, no
# bridge, no firewall rule, no forwarding (every container has network
# "none"), its containers' cgroups below this process's own, and stopped at
# the end.  Nothing of the host's docker (if any) is used.

echo "== Docker"
dk=$work/docker
mkdir -p "$dk"
DOCKER=/usr/bin/docker
export DOCKER_HOST=unix://$dk/docker.sock
# the containers' cgroups: below this process's own (its memory cgroup's
# path, which is / in the other hierarchies here, so one path is a child of
# ours in each)
dk_cgroup=$(sed -n 's/^[0-9]*:memory://p' /proc/self/cgroup)/pycell-check-docker
dk_cgroup=/${dk_cgroup#/}
echo '{}' >"$dk/daemon.json"
# what dockerd and containerd's shims make outside their roots whatever
# they are told (the daemon's key, the plugins' and the shims' socket
# folders): removed after them where the host had none
dk_host_paths=
for f in /etc/docker/key.json /run/docker /run/containerd; do
	[ -e "$f" ] || dk_host_paths+=" $f"
done
setsid dockerd --config-file "$dk/daemon.json" --data-root "$dk/data" --exec-root "$dk/x" \
	-H "$DOCKER_HOST" --pidfile "$dk/dockerd.pid" \
	--bridge=none --iptables=false --ip6tables=false --ip-forward=false --ip-masq=false \
	--userland-proxy=false --cgroup-parent "$dk_cgroup" \
	--default-ulimit "nofile=$nofile:$nofile" --default-ulimit "nproc=$nproc:$nproc" \
	</dev/null >"$dk/dockerd.log" 2>&1 &
dk_pid=$!
for _ in $(seq 100); do $DOCKER version >/dev/null 2>&1 && break; sleep 0.3; done
check "dockerd (this check's own: no bridge, no iptables)" $DOCKER version -f '{{.Server.Version}}'
docker_stop() {
	[ -n "${dk_pid:-}" ] || return 0
	$DOCKER rm -f -t 0 pycell-check-docker >/dev/null 2>&1
	kill -TERM "$dk_pid" 2>/dev/null
	for _ in $(seq 100); do kill -0 "$dk_pid" 2>/dev/null || break; sleep 0.2; done
	kill -KILL "$dk_pid" 2>/dev/null
	dk_pid=
	for h in /sys/fs/cgroup/*/; do rmdir "$h${dk_cgroup#/}" 2>/dev/null; done
	for f in $dk_host_paths; do rm -rf "$f"; done
}

if podman save --format docker-archive "$IMAGE" 2>"$dk/save.log" | $DOCKER load -q >"$dk/load.log" 2>&1; then
	ok "the image into Docker (podman save | docker load)"
else
	cat "$dk/save.log" "$dk/load.log" | tail -n 5; bad "podman save | docker load"
fi
moby=./usr/share/gocode/src/github.com/docker/docker/profiles/seccomp/default.json
if (cd "$dk" && apt-get download -q golang-github-docker-docker-dev >"$dk/download.log" 2>&1) &&
	dpkg-deb --fsys-tarfile "$dk"/golang-github-docker-docker-dev_*.deb | tar -xO "$moby" >"$dk/moby.json"; then
	ok "Docker's default profile (moby's default.json, from golang-github-docker-docker-dev)"
else
	tail -n 5 "$dk/download.log"; bad "Docker's default profile"
fi
python3 "$top/contrib/container/seccomp.py" "$dk/moby.json" >"$dk/seccomp.json"
check "seccomp.py on Docker's default: its additions, nothing more" \
	python3 "$top/tests/container/seccomp_check.py" "$top/contrib/container/seccomp.py" "$dk/moby.json" "$dk/seccomp.json"

DSEC="--security-opt seccomp=$dk/seccomp.json"
DNET="--network none"
docker_run() { $DOCKER run $DNET "$@"; }
# Docker's default answers the jail's clone3 with ENOSYS (without CAP_SYS_ADMIN)
flag_checks docker_run "$DSEC" 'clone3 into new namespaces: .*Function not implemented' "clone3 answered ENOSYS"

docker_cli() { $DOCKER "$@"; }
serve_checks docker_cli pycell-check-docker "$DNET $DSEC" "$work/tokens-999.json"
check "and no cgroup of the container" sh -c \
	"[ -z \"\$(find /sys/fs/cgroup/*/${dk_cgroup#/} -mindepth 1 -type d 2>/dev/null)\" ]"
docker_stop
# the daemon's containerd ends after it: what is left after 10 s is shown
dk_left() { pgrep -af "$dk/"; grep " $dk/" /proc/self/mountinfo; }
for _ in $(seq 50); do [ -z "$(dk_left)" ] && break; sleep 0.2; done
check "the daemon stopped leaves no process and no mount of its own" test -z "$(dk_left | tee /dev/stderr)"
check "nor a file outside its folders" sh -c "for f in $dk_host_paths; do [ ! -e \$f ] || exit 1; done"
unset DOCKER_HOST
