"""The README's demo (contrib/quickstart.sh demo) must stay true: its MCP
round trip script is run here against the built binary."""
import subprocess
import sys

from conftest import PYCELL, REPO, TOOLS, pycell_env


def test_mcp_roundtrip_script():
    out = subprocess.run([sys.executable, str(REPO / "contrib" / "mcp-roundtrip.py"), PYCELL],
                         env=pycell_env(), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "initialize: pycell 0.1.0, protocol 2025-11-25"
    assert lines[1] == "tools/list: " + ", ".join(TOOLS)
    assert lines[2].startswith("tools/call run_python: status ok, "
                               "stdout 'hello over MCP from pid 2\\n', return_value 45, ")
