"""The systemd units of contrib/systemd/: what systemd itself says of them
(systemd-analyze verify, and its offline security review), and that make
fills in the paths.  They are booted under a real systemd in the VM
(make check-vm: tests/vm/systemd-test.sh); here they are checked as files."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import PYCELL, REPO

ANALYZE = shutil.which("systemd-analyze")
BUILT = Path(PYCELL).resolve().parent / "contrib" / "systemd" / "pycell.service"
SOCKET = REPO / "contrib" / "systemd" / "pycell.socket"

pytestmark = pytest.mark.skipif(not ANALYZE, reason="systemd-analyze is not installed (Debian: systemd)")


def units(tmp_path):
    """The built units, ExecStart pointed at the binary under test (verify
    checks that it is executable)."""
    text = BUILT.read_text()
    m = re.search(r"^ExecStart=(\S+)/pycell serve$", text, re.M)
    assert m, "ExecStart is not BINDIR/pycell serve"
    assert "@" not in text, "a path was left unfilled"
    svc = tmp_path / "pycell.service"
    svc.write_text(text.replace(m.group(0), f"ExecStart={Path(PYCELL).resolve()} serve"))
    sock = tmp_path / "pycell.socket"
    sock.write_text(SOCKET.read_text())
    return svc, sock


def test_systemd_verifies_the_units(tmp_path):
    svc, sock = units(tmp_path)
    p = subprocess.run([ANALYZE, "verify", "--man=no", str(svc), str(sock)], capture_output=True, text=True,
                       timeout=60)
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")


def test_the_service_is_what_pycell_serve_needs(tmp_path):
    svc, _ = units(tmp_path)
    text = svc.read_text()
    for line in ["Type=notify", "NotifyAccess=main", "WatchdogSec=30s", "Delegate=yes", "KillMode=mixed",
                 "CapabilityBoundingSet=", "NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes",
                 "PrivateTmp=yes", "User=pycell", "ExecReload=/bin/kill -HUP $MAINPID"]:
        assert re.search(rf"^{re.escape(line)}$", text, re.M), line
    # systemd waits longer than the drain (30 s) before it kills
    assert int(re.search(r"^TimeoutStopSec=(\d+)s$", text, re.M).group(1)) > 30


def test_the_offline_security_review(tmp_path):
    svc, _ = units(tmp_path)
    p = subprocess.run([ANALYZE, "security", "--offline=true", "--no-pager", str(svc)], capture_output=True,
                       text=True, timeout=60)
    m = re.search(r"Overall exposure level for pycell.service: (\d+\.\d+)", p.stdout)
    assert m, p.stdout + p.stderr
    print(f"systemd-analyze security: {m.group(1)}")
    assert float(m.group(1)) <= 5.0
