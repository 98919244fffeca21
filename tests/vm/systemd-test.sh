#!/bin/sh
# pycell check-vm, systemd mode: run by pycell-vm-test.service under a real
# systemd (pid 1) with cgroup v2.  The shipped units (contrib/systemd/):
# socket activation, a call over HTTP, a memory bomb ends as memory_limit
# through the delegated subtree, `systemctl reload` keeps a running call
# and applies a new token, `systemctl restart` keeps a session (paused to
# the StateDirectory), `systemctl stop` leaves no run and no cgroup.
# Writes "PYCELL-VM-SUMMARY systemd: M failed, N passed" and
# "PYCELL-VM-EXIT <status>".
TREE=$1
BUILD=$2
pass=0
fail=0
ok() { echo "check-vm systemd: ok   $*"; pass=$((pass + 1)); }
bad() { echo "check-vm systemd: FAIL $*"; fail=$((fail + 1)); }
# expect WHAT CONDITION: CONDITION is shell code, run here (it may use the
# functions and variables of this script)
expect() { what=$1; shift; if eval "$*"; then ok "$what"; else bad "$what"; fi; }
sha() { printf %s "$1" | sha256sum | cut -d' ' -f1; }

tokens() {   # the token file of the names given (token "t<name>")
	{
		printf '{"tokens": ['
		sep=
		for n in "$@"; do printf '%s{"name": "%s", "sha256": "%s"}' "$sep" "$n" "$(sha "t$n")"; sep=", "; done
		printf ']}\n'
	} >/run/pycell-test/tokens.json.new
	chown pycell:pycell /run/pycell-test/tokens.json.new && chmod 600 /run/pycell-test/tokens.json.new &&
		mv /run/pycell-test/tokens.json.new /run/pycell-test/tokens.json
}

# call TOKEN CODE OUT: POST a 2026-07-28 tools/call; OUT gets the body, and
# the HTTP status is printed
call() {
	body=$(python3 -c 'import json, sys; print(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
"params": {"name": "run_python", "arguments": {"code": sys.argv[1]}, "_meta": {
"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}}))' "$2")
	curl -s -m 300 -o "$3" -w '%{http_code}' -X POST http://127.0.0.1:8080/mcp -H "Authorization: Bearer t$1" \
		-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
		-H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' -H 'Mcp-Name: run_python' -d "$body"
}
# tool TOKEN NAME ARGS OUT: POST a 2026-07-28 tools/call of tool NAME with
# ARGS (JSON), a session_id in it mirrored in Mcp-Param-Session; OUT gets
# the body, and the HTTP status is printed
tool() {
	body=$(python3 -c 'import json, sys; print(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
"params": {"name": sys.argv[1], "arguments": json.loads(sys.argv[2]), "_meta": {
"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}}))' "$2" "$3")
	sid=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1]).get("session_id", ""))' "$3")
	curl -s -m 300 -o "$4" -w '%{http_code}' -X POST http://127.0.0.1:8080/mcp -H "Authorization: Bearer t$1" \
		-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
		-H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' -H "Mcp-Name: $2" \
		${sid:+-H "Mcp-Param-Session: $sid"} -d "$body"
}
# field FILE EXPR: a Python expression of sc (structuredContent)
field() {
	python3 -c 'import json, sys; sc = json.load(open(sys.argv[1]))["result"]["structuredContent"]; print(eval(sys.argv[2]))' \
		"$1" "$2" 2>/dev/null
}

mkdir -p /run/pycell-test
chown pycell:pycell /run/pycell-test
tokens a
# as the Debian package's: paused sessions in the unit's StateDirectory
printf '{"state_dir": "/var/lib/pycell"}\n' >/run/pycell-test/pycell.conf
chmod 644 /run/pycell-test/pycell.conf
echo "check-vm systemd: $(uname -r), cgroup2 $(cat /sys/fs/cgroup/cgroup.controllers)"
R=/run/pycell-test

systemctl start pycell.socket
expect "pycell.socket listening, pycell.service not started yet" \
	'[ "$(systemctl is-active pycell.socket)" = active ] && [ "$(systemctl is-active pycell.service)" = inactive ]'
st=$(call a '6*7' $R/r1.json)
expect "socket activation: the first call is answered (HTTP $st)" \
	'[ "$st" = 200 ] && [ "$(field $R/r1.json "sc[\"return_value\"]")" = 42 ]'
expect "pycell.service active (Type=notify: READY came)" '[ "$(systemctl is-active pycell.service)" = active ]'
status_text=$(systemctl show -p StatusText --value pycell.service)
expect "its status line: $status_text" 'case "$status_text" in "serving on http://127.0.0.1:8080/mcp"*) true ;; *) false ;; esac'
main=$(systemctl show -p MainPID --value pycell.service)
expect "it runs as the pycell user" '[ "$(ps -o user= -p "$main")" = pycell ]'

st=$(call a 'chunks = []
while True:
    chunks.append(bytearray(1 << 20))' $R/r2.json)
expect "a memory bomb ends as memory_limit (HTTP $st, $(field $R/r2.json 'sc["status"]'))" \
	'[ "$(field $R/r2.json "sc[\"status\"]")" = memory_limit ]'
expect "enforced by cgroup v2 in the delegated subtree" \
	'[ "$(field $R/r2.json "[l[\"enforced_by\"] for l in sc[\"limits\"] if l[\"name\"] == \"memory_bytes\"][0]")" = cgroup2 ]'

# a reload while a call runs: the call goes on, the new token is in force
(call a 'import time
time.sleep(6)
7' $R/r3.json >$R/r3.status) &
long=$!
sleep 3
tokens b
systemctl reload pycell.service
sleep 1
expect "after reload: the old token gets 401" '[ "$(call a 1 /dev/null)" = 401 ]'
expect "after reload: the new token is served" '[ "$(call b 1 /dev/null)" = 200 ]'
wait $long
expect "the call running across the reload ended ok" \
	'[ "$(cat $R/r3.status)" = 200 ] && [ "$(field $R/r3.json "sc[\"return_value\"]")" = 7 ]'
chmod 644 $R/tokens.json
systemctl reload pycell.service
sleep 1
expect "a bad token file is refused, with the reason in the journal; the service stays" \
	'[ "$(systemctl is-active pycell.service)" = active ] &&
	 journalctl -u pycell.service --no-pager -o cat | grep -q "reload refused, the configuration, policies and tokens in force stay"'

# a session outlives a restart of the service: paused at SIGTERM into
# /var/lib/pycell, resumed by its next cell (the token file made right
# again first: a server does not start on one others can read)
chmod 600 $R/tokens.json
systemctl reload pycell.service
sleep 1
st=$(tool b session_open '{}' $R/s1.json)
sid=$(field $R/s1.json 'sc["session_id"]')
st=$(tool b run_python "{\"session_id\": \"$sid\", \"code\": \"x = 6 * 7\"}" $R/s2.json)
expect "a session is opened and holds x (HTTP $st)" '[ "$st" = 200 ] && [ "$(field $R/s2.json "sc[\"status\"]")" = ok ]'
systemctl restart pycell.service
expect "systemctl restart: the session's snapshot is in the StateDirectory, the pycell user's, 0700" \
	'[ -f /var/lib/pycell/sessions/$sid.snap ] && [ "$(stat -c %U:%a /var/lib/pycell)" = pycell:700 ]'
st=$(tool b run_python "{\"session_id\": \"$sid\", \"code\": \"x\"}" $R/s3.json)
expect "after the restart its next cell has x (HTTP $st, resumed $(field $R/s3.json 'sc["session"].get("resumed")'))" \
	'[ "$(field $R/s3.json "sc[\"return_value\"]")" = 42 ] && [ "$(field $R/s3.json "sc[\"session\"][\"resumed\"]")" = True ]'
main=$(systemctl show -p MainPID --value pycell.service)

cg=/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/"$main"/cgroup)
expect "pycell moved itself into a leaf of its delegated cgroup ($cg)" \
	'case "$cg" in */pycell.service/pycell-supervisor) true ;; *) false ;; esac'
svc=${cg%/pycell-supervisor}
expect "the runs' audit records are journal entries with fields" \
	'journalctl -u pycell.service PYCELL_EVENT=run PYCELL_STATUS=memory_limit --no-pager -o cat | grep -q "\"client\":\"a\""'
systemctl stop pycell.service pycell.socket
expect "systemctl stop: no process of the pycell user left" '! pgrep -u pycell >/dev/null'
expect "systemctl stop: no cgroup left ($svc)" '[ ! -e "$svc" ]'

if [ "$fail" -gt 0 ]; then
	echo "check-vm systemd: the first result: $(field $R/r1.json 'sc' | cut -c1-1500)"
	echo "check-vm systemd: the journal of pycell.service, last lines:"
	journalctl -u pycell.service --no-pager -o cat | tail -n 30
fi
# the result straight to the console (the journal's copy may come late),
# then power off at once
{
	echo "PYCELL-VM-SUMMARY systemd: $fail failed, $pass passed"
	if [ "$fail" -eq 0 ]; then echo "PYCELL-VM-EXIT 0"; else echo "PYCELL-VM-EXIT 1"; fi
} >/dev/console
sync
sleep 1
echo o >/proc/sysrq-trigger
