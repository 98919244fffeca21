#!/bin/sh
# pycell: the node MCP suites where a run's start shows, again, against
# `pycell mcp --cold` and `pycell serve --cold` (every jail started anew;
# run.sh tests the default, warm starts).  The agent libraries and the conformance
# scenarios test what a client sees, so they run once, in run.sh.
# PYCELL_MCP_SKIP_COLD=1 skips it (CI's sanitizer pass: the cold MCP
# server runs under ASan there in run-warm.sh's test_mcp_raw.py).
here=$(cd "$(dirname "$0")" && pwd)
if [ "${PYCELL_MCP_SKIP_COLD:-}" = 1 ]; then
	echo "mcp: SKIP the node suites against --cold: PYCELL_MCP_SKIP_COLD=1 (test_mcp_raw.py in run-warm.sh tests pycell mcp --cold)"
	exit 77
fi
# The suites where how a run starts shows (its concurrency, output,
# cancellation, results, sessions and their pauses, tasks, the wasm
# backend's ready pools); the rest (schemas, the Inspector, protocol
# negotiation, resources, subscriptions, the HTTP transport's clients, the
# manifests, the fleet) test the MCP layer, which is the same for both and
# runs in run.sh.  PYCELL_MCP_TESTS names others.
: "${PYCELL_MCP_TESTS:=concurrency run_python sessions persist tasks wasm}"
PYCELL_MCP_FLAGS=--cold
PYCELL_MCP_SKIP_CONFORMANCE=1
export PYCELL_MCP_FLAGS PYCELL_MCP_SKIP_CONFORMANCE PYCELL_MCP_TESTS
exec sh "$here/run.sh" "$@"
