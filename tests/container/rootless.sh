# pycell's image under rootless podman, sourced by tests/container/check.sh
# after the rootful checks: a user of this check's own (pycell-rootless,
# its home and podman's storage under $work, a range of 65,536 subordinate
# ids, so the image's uid 999 is mapped), README's flags (the profile made
# from podman's default, as rootful), each flag shown needed, doctor, runs
# cold and warm, pycell serve with an MCP call, and a stop that leaves
# nothing.  The user, its ids and its processes are removed at the end.

echo "== rootless podman"
RL_USER=pycell-rootless
RL_SUBID=1073741824          # its subordinate ids: 2^30 .. 2^30+65535
rl=$work/rootless
mkdir -p "$rl"
if ! id "$RL_USER" >/dev/null 2>&1; then
	useradd --system --no-create-home --home-dir "$rl" --shell /usr/sbin/nologin "$RL_USER" ||
		{ bad "useradd $RL_USER"; return; }
fi
rl_added_user=1
for f in /etc/subuid /etc/subgid; do
	grep -q "^$RL_USER:" "$f" || echo "$RL_USER:$RL_SUBID:65536" >>"$f"
done
mkdir -p -m 0700 "$rl/run"
chown -R "$RL_USER:" "$rl"
cp "$work/containers.conf" "$rl/containers.conf" && chmod 0644 "$rl/containers.conf"
rlp() { runuser -u "$RL_USER" -- env -C "$rl" HOME="$rl" XDG_RUNTIME_DIR="$rl/run" \
	CONTAINERS_CONF="$rl/containers.conf" podman "$@"; }
rootless_stop() {
	[ -n "${rl_added_user:-}" ] || return 0
	rlp rm -a -f -t 0 >/dev/null 2>&1
	pkill -KILL -u "$RL_USER" 2>/dev/null
	for _ in $(seq 50); do pgrep -u "$RL_USER" >/dev/null || break; sleep 0.1; done
	userdel "$RL_USER" 2>/dev/null
	sed -i "/^$RL_USER:/d" /etc/subuid /etc/subgid
	rl_added_user=
}

podman save -q -o "$rl/image.tar" "$IMAGE" && chmod 0644 "$rl/image.tar"
rl_load() { rlp load -q -i "$rl/image.tar" >"$rl/load.log" 2>&1 || { tail -n 5 "$rl/load.log"; return 1; }; }
check "the image into the user's storage (podman save | podman load, rootless)" rl_load
rm -f "$rl/image.tar"
# the same profile as rootful, readable by the user
cp "$work/seccomp.json" "$rl/seccomp.json" && chmod 0644 "$rl/seccomp.json"
RSEC="--security-opt seccomp=$rl/seccomp.json"
rl_run() { rlp run "$@"; }
flag_checks rl_run "$RSEC" 'sethostname pycell: Operation not permitted' "sethostname refused"

# the token file as the container's uid 999 owns it: the user's subordinate
# id 998 (the container's uid 0 is the user itself, 1.. its range)
install -o $((RL_SUBID + 998)) -g $((RL_SUBID + 998)) -m 0600 "$work/tokens.json" "$rl/tokens-999.json"
serve_checks rlp pycell-check-rootless "$RSEC" "$rl/tokens-999.json"
rootless_stop
check "the user's processes, ids and account removed" sh -c \
	"! id '$RL_USER' >/dev/null 2>&1 && ! grep -q '^$RL_USER:' /etc/subuid /etc/subgid"
