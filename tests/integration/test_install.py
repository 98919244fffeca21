"""`make install` installs the whole runtime: every module of
runtime/pycell/ that a jail imports (code mode and snapshots were once
left out, so the Debian package and the container had neither), and
every shipped policy."""

import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import PYCELL, REPO

BUILD = Path(PYCELL).resolve().parent


@pytest.mark.skipif(not (BUILD / "Makefile").exists() or not shutil.which("make"),
                    reason="no build tree with a Makefile beside the pycell under test")
def test_make_install_installs_every_runtime_module_and_policy(tmp_path):
    dest = tmp_path / "dest"
    res = subprocess.run(["make", "-C", str(BUILD), "install-data", f"DESTDIR={dest}", "prefix=/usr"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    share = dest / "usr" / "share" / "pycell"
    installed = sorted(p.name for p in (share / "runtime" / "pycell").glob("*.py"))
    assert installed == sorted(p.name for p in (REPO / "runtime" / "pycell").glob("*.py"))
    policies = sorted(p.name for p in (share / "policy").glob("*.json"))
    assert policies == sorted(p.name for p in (REPO / "policy").glob("*.json"))
