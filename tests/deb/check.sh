#!/usr/bin/env bash
# pycell: the Debian package, built, checked and used on this machine (as
# root; it installs and purges the package).  `make check-deb`; CI runs it.
#   1. dpkg-buildpackage -us -uc -b on a copy of the tree (its unit tests run)
#   2. lintian prints nothing (debian/pycell.lintian-overrides says why for each override)
#   3. dpkg -i: the files, the pycell user, /etc/pycell and its token file
#   4. pycell doctor, and an HTTP call to pycell serve run as the pycell user
#      from the installed files only, with the generated token
#   5. dpkg --purge leaves nothing of it (but the system user, as Debian does)
# Prints "deb: N passed, M failed" last.
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
SUITE=deb LOG=$top/tests/deb/deb.log
. "$top/tests/tools/checks.sh"
skip_unless_root "installing a package needs root"
if dpkg -s pycell >/dev/null 2>&1; then
	bad "pycell is installed already: this check would replace it (dpkg --purge pycell first)"; finish; exit
fi
need=()
for p in debhelper lintian; do dpkg -s "$p" >/dev/null 2>&1 || need+=("$p"); done
if [ ${#need[@]} -gt 0 ]; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null ||
		{ bad "apt-get install ${need[*]}"; finish; exit; }
fi

work=$(mktemp -d /tmp/pycell-deb.XXXXXX)
trap 'dpkg --purge pycell >/dev/null 2>&1; rm -rf "$work"' EXIT
mkdir "$work/pycell"
(cd "$top" && git ls-files -co --exclude-standard | tar -cf - -T -) | tar -xf - -C "$work/pycell"

echo "== build"
if (cd "$work/pycell" && dpkg-buildpackage -us -uc -b >"$work/build.log" 2>&1); then
	ok "dpkg-buildpackage -us -uc -b ($(grep -o 'unit: .*' "$work/build.log" | tail -n 1))"
else
	tail -n 40 "$work/build.log"; bad "dpkg-buildpackage -us -uc -b"; finish; exit
fi
deb=$(ls "$work"/pycell_*_*.deb | grep -v dbgsym)
# kept for make check-container (PYCELL_DEB), which CI runs next
rm -rf "$top/tests/deb/out" && mkdir -p "$top/tests/deb/out" && cp "$deb" "$top/tests/deb/out/"

echo "== lintian"
out=$(lintian -I "$work"/pycell_*.changes 2>&1 | grep -v '^running with root privileges')
if [ -z "$out" ]; then ok "lintian -I: nothing to say"; else echo "$out"; bad "lintian -I"; fi

echo "== install"
check "dpkg -i" dpkg -i "$deb" >/dev/null
for f in /usr/bin/pycell /usr/share/pycell/policy/default.json /usr/share/pycell/runtime/pycell/__init__.py \
	/usr/share/man/man1/pycell.1.gz /lib/systemd/system/pycell.service /lib/systemd/system/pycell.socket \
	/etc/pycell/pycell.conf /usr/libexec/pycell/pycell-init; do
	check "installed $f" test -f "$f"
done
check "the runtime is byte-compiled on install" test -d /usr/share/pycell/runtime/pycell/__pycache__
check "pycell.socket enabled the Debian way" test -L /etc/systemd/system/sockets.target.wants/pycell.socket
check "a pycell system user" sh -c 'id -u pycell >/dev/null && [ "$(id -u pycell)" -lt 1000 ]'
check "tokens.json: the pycell user's, 0600" sh -c '[ "$(stat -c %U:%a /etc/pycell/tokens.json)" = pycell:600 ]'
check "admin.token: root's, 0600" sh -c '[ "$(stat -c %U:%a /etc/pycell/admin.token)" = root:600 ]'
check "pycell doctor" sh -c 'cd / && env -u PYCELL_DATADIR /usr/bin/pycell doctor >/dev/null'
check "pycell doctor finds the installed pycell-init" sh -c 'cd / && env -u PYCELL_DATADIR /usr/bin/pycell doctor --json |
	python3 -c "import json, sys; c = [c for c in json.load(sys.stdin)[\"checks\"] if c[\"name\"] == \"init\"][0];
assert c[\"status\"] == \"ok\" and c[\"detail\"].startswith(\"/usr/libexec/pycell/pycell-init: \"), c"'

echo "== an HTTP call to the installed pycell serve"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
(cd / && exec env -u PYCELL_DATADIR runuser -u pycell -- /usr/bin/pycell serve --listen "127.0.0.1:$port" \
	>"$work/serve.log" 2>&1) &
spid=$!
for _ in $(seq 100); do grep -q "listening on" "$work/serve.log" 2>/dev/null && break; sleep 0.1; done
reply=$(curl -s -m 30 -X POST "http://127.0.0.1:$port/mcp" -H "Authorization: Bearer $(cat /etc/pycell/admin.token)" \
	-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
	-H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' -H 'Mcp-Name: run_python' \
	-d '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_python","arguments":{"code":"6*7"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}')
check "tools/call run_python answered ok, 42" python3 -c '
import json, sys
sc = json.loads(sys.argv[1])["result"]["structuredContent"]
sys.exit(0 if (sc["status"], sc["return_value"]) == ("ok", 42) else 1)' "$reply"
check "the audit record names the token" grep -q '"client":"admin","status":"ok"' "$work/serve.log"
# a session: the installed runtime has the session loop (it was once left out of make install).
# call TOOL ARGS [SESSION]: a cell names its session in Mcp-Param-Session, as the tool's
# inputSchema asks of a 2026-07-28 client (x-mcp-header)
call() {
	curl -s -m 30 -X POST "http://127.0.0.1:$port/mcp" -H "Authorization: Bearer $(cat /etc/pycell/admin.token)" \
		-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
		-H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' -H "Mcp-Name: $1" \
		${3:+-H "Mcp-Param-Session: $3"} \
		-d "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"$1\",\"arguments\":$2,\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\",\"io.modelcontextprotocol/clientCapabilities\":{}}}}"
}
sid=$(call session_open '{}' | python3 -c 'import json, sys; print(json.load(sys.stdin)["result"]["structuredContent"]["session_id"])')
call run_python "{\"session_id\":\"$sid\",\"code\":\"x = 6\"}" "$sid" >/dev/null
reply=$(call run_python "{\"session_id\":\"$sid\",\"code\":\"x * 7\"}" "$sid")
check "a session keeps its globals from one cell to the next" python3 -c '
import json, sys
sc = json.loads(sys.argv[1])["result"]["structuredContent"]
sys.exit(0 if (sc["status"], sc["return_value"], sc["session"]["cell"]) == ("ok", 42, 2) else 1)' "$reply"
pkill -TERM -P "$spid" 2>/dev/null; kill -TERM "$spid" 2>/dev/null; wait "$spid" 2>/dev/null

echo "== purge"
check "dpkg --purge" dpkg --purge pycell >/dev/null
for f in /usr/bin/pycell /usr/share/pycell /etc/pycell /lib/systemd/system/pycell.service \
	/etc/systemd/system/sockets.target.wants/pycell.socket /var/lib/systemd/deb-systemd-helper-enabled/pycell.socket; do
	check "gone: $f" test ! -e "$f"
done
finish
