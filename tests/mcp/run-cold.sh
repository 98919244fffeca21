#!/bin/sh
# pycell: the node MCP suites again against `pycell mcp --cold` and
# `pycell serve --cold` (every jail started anew; run.sh tests the
# default, warm starts).  The agent libraries and the conformance
# scenarios test what a client sees, so they run once, in run.sh.
here=$(cd "$(dirname "$0")" && pwd)
PYCELL_MCP_FLAGS=--cold
PYCELL_MCP_SKIP_CONFORMANCE=1
export PYCELL_MCP_FLAGS PYCELL_MCP_SKIP_CONFORMANCE
exec sh "$here/run.sh" "$@"
