#!/bin/sh
# pycell: the node MCP suites again against `pycell mcp --warm` (jails cloned
# from a zygote).  The conformance scenarios do not run code, so they run
# once, in run.sh.
here=$(cd "$(dirname "$0")" && pwd)
PYCELL_MCP_FLAGS=--warm
PYCELL_MCP_SKIP_CONFORMANCE=1
export PYCELL_MCP_FLAGS PYCELL_MCP_SKIP_CONFORMANCE
exec sh "$here/run.sh" "$@"
