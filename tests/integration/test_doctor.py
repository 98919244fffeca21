"""`pycell doctor`: every check is reported as ok/warn/fail with a fix for
each that is not ok, the JSON form agrees with the text and with what a
run reports, the exit status says whether runs can be jailed, and a broken
host (no user namespaces) is diagnosed with the right fix."""

import ctypes
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from conftest import HOST_IS_ROOT, PYCELL, pycell_env, run_json

CHECKS = ["user namespaces", "apparmor userns", "max user namespaces", "seccomp", "cgroup v2",
          "cgroup v1", "limits", "device filter", "egress", "python", "init", "wasm", "preload", "fonts", "state"]


def doctor(*args, prefix=(), timeout=60):
    p = subprocess.run([*prefix, PYCELL, "doctor", *args], env=pycell_env(), capture_output=True,
                       timeout=timeout)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def doctor_json(prefix=()):
    rc, out, err = doctor("--json", prefix=prefix)
    return rc, json.loads(out), err


def test_json_lists_every_check_with_a_fix_for_each_problem():
    rc, d, err = doctor_json()
    assert [c["name"] for c in d["checks"]] == CHECKS
    for c in d["checks"]:
        assert c["status"] in ("ok", "warn", "fail"), c
        assert c["detail"], c
        if c["status"] == "ok":
            assert c["fix"] is None, c
        else:
            assert c["fix"] and len(c["fix"]) > 20, c
    failed = [c["name"] for c in d["checks"] if c["status"] == "fail"]
    jail_needs = {"user namespaces", "seccomp"}
    assert d["jailable"] == (not jail_needs & set(failed))
    assert rc == (0 if d["jailable"] else 1)


def test_this_host_can_jail():
    """The development machine and the VM both can; a regression in a
    check (a false fail) shows up here."""
    rc, d, err = doctor_json()
    statuses = {c["name"]: c["status"] for c in d["checks"]}
    assert (rc, d["jailable"]) == (0, True), d["checks"]
    assert statuses["user namespaces"] == statuses["seccomp"] == "ok"


def test_text_matches_json():
    rc, out, err = doctor()
    _, d, _ = doctor_json()
    assert rc == 0
    for c in d["checks"]:
        line = re.search(rf"^  (ok|warn|fail)\s+{re.escape(c['name'])}\s+(.*)$", out, re.M)
        assert line, f"{c['name']!r} missing from:\n{out}"
        assert line.group(1) == c["status"]
        if c["fix"]:
            assert f"fix: {c['fix']}" in out
    assert out.rstrip().endswith("runs can be jailed on this host")


def test_limits_agree_with_a_run():
    _, d, _ = doctor_json()
    res = run_json("pass", "--memory", "64M", "--pids", "16", "--cpu", "0.5")
    by = {lim["name"]: lim["enforced_by"] for lim in res["limits"]}
    assert by["memory_bytes"] == d["cgroups"]["limits"]["memory"]
    assert by["pids"] == d["cgroups"]["limits"]["pids"]
    assert by["cpu_millis"] == d["cgroups"]["limits"]["cpu"]
    modes = set(d["cgroups"]["limits"].values())
    want = "cgroup1" if "cgroup1" in modes else "cgroup2" if "cgroup2" in modes else "none"
    assert d["cgroups"]["mode"] == want
    limits_check = [c for c in d["checks"] if c["name"] == "limits"][0]
    unenforced = {k for k, v in d["cgroups"]["limits"].items() if v in ("none", "rlimit")}
    assert (limits_check["status"] == "ok") == (not unenforced)
    assert bool(res["warnings"]) == bool({k for k, v in d["cgroups"]["limits"].items() if v == "none"})


def test_no_probe_cgroup_left_behind():
    _, d, _ = doctor_json()
    dirs = {v for v in d["cgroups"]["dirs"].values() if v}
    if d["cgroups"]["v2_parent"]:
        dirs.add(d["cgroups"]["v2_parent"])
    left = [os.path.join(p, e) for p in dirs for e in os.listdir(p) if e.startswith("pycell-probe-")]
    # a concurrent pycell may be probing right now: only dead owners count
    dead = [p for p in left if not os.path.exists(f"/proc/{p.rsplit('-', 1)[1]}")]
    assert dead == []


CLONE_NEWUSER = 0x10000000


def doctor_without_userns(*args):
    """Run `pycell doctor ARGS` in a fresh user namespace (root mapped to
    root, setgroups allowed) whose user.max_user_namespaces is 0: the sysctl
    is per namespace, so the host's stays untouched.  -> (rc, stdout)"""
    libc = ctypes.CDLL(None, use_errno=True)
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    out_r, out_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(ready_r)
            os.close(go_w)
            os.close(out_r)
            if libc.unshare(CLONE_NEWUSER) != 0:
                os._exit(120)
            os.write(ready_w, b"u")
            os.read(go_r, 1)
            with open("/proc/sys/user/max_user_namespaces", "w") as f:
                f.write("0")
            os.dup2(out_w, 1)
            os.execve(PYCELL, [PYCELL, "doctor", *args], pycell_env())
        finally:
            os._exit(121)
    os.close(ready_w)
    os.close(go_r)
    os.close(out_w)
    try:
        assert os.read(ready_r, 1) == b"u", "the child could not unshare its user namespace"
        for name, line in (("setgroups", "allow"), ("uid_map", "0 0 1"), ("gid_map", "0 0 1")):
            Path(f"/proc/{pid}/{name}").write_text(line)
        os.write(go_w, b"g")
        out = b""
        while chunk := os.read(out_r, 65536):
            out += chunk
    finally:
        for fd in (ready_r, go_w, out_r):
            os.close(fd)
        _, st = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(st), out.decode()


def test_no_user_namespaces_is_a_failure_with_the_fix():
    if os.geteuid() != 0:
        pytest.skip("needs root to write the test namespace's id maps")
    rc, out = doctor_without_userns("--json")
    d = json.loads(out)
    checks = {c["name"]: c for c in d["checks"]}
    assert checks["user namespaces"]["status"] == "fail"
    assert "No space left on device" in checks["user namespaces"]["detail"]
    assert "user.max_user_namespaces=" in checks["user namespaces"]["fix"]
    assert checks["max user namespaces"]["status"] == "fail"
    assert checks["seccomp"]["status"] == "ok"
    assert (rc, d["jailable"]) == (1, False)
    rc_text, text = doctor_without_userns()
    assert rc_text == 1
    assert "runs cannot be jailed on this host" in text


# Every subcommand reports a usage error the same way (src/cli/options.c):
# what is wrong, then where the help is.
@pytest.mark.parametrize("args,msg", [(["--bogus"], "unknown option --bogus"),
                                      (["extra"], "unexpected argument 'extra'"),
                                      (["--json=yes"], "option --json takes no value")])
def test_usage_errors(args, msg):
    rc, out, err = doctor(*args)
    assert (rc, out) == (2, "")
    assert err == f"pycell doctor: {msg}\nTry 'pycell doctor --help'.\n"


def test_help():
    rc, out, err = doctor("--help")
    assert rc == 0
    assert out.startswith("Usage: pycell doctor [--json]")


def test_wasm_says_what_it_runs_on():
    rc, d, err = doctor_json()
    wasm = {c["name"]: c for c in d["checks"]}["wasm"]
    if wasm["detail"] == "not built in: wasm policies are refused":   # a build without it
        assert (wasm["status"], wasm["fix"][:21]) == ("warn", "configure --with-wasm"), wasm
        return
    assert wasm["status"] == "ok", wasm
    assert wasm["detail"].startswith("Pyodide 314.0.7 in "), wasm
    assert wasm["detail"].endswith("from a memory snapshot, in the same jail as native runs"), wasm


def test_egress_is_ok_as_root_and_refused_otherwise():
    """Egress policies need root (veth pairs) and cgroup BPF: doctor says
    which, and that such policies are refused without them."""
    if not HOST_IS_ROOT:
        pytest.skip("needs root to compare root's answer with uid 65534's")
    _, d, _ = doctor_json()
    egress = {c["name"]: c for c in d["checks"]}["egress"]
    assert egress["status"] == "ok", egress
    assert egress["detail"].startswith("egress policies can run: veth pairs, socket-address filters below "), egress
    _, d, _ = doctor_json(prefix=["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"])
    egress = {c["name"]: c for c in d["checks"]}["egress"]
    assert egress["status"] == "warn", egress
    assert egress["detail"].endswith("egress policies are refused"), egress
    assert egress["fix"].startswith("run pycell as root"), egress


def test_preload_names_what_a_policy_left_out(policy_file):
    """A policy's python.preload, imported by a zygote as a server's would
    be: ok when every module came, a warning naming each one left out and
    why, and a warning for a policy that does not load."""
    r = subprocess.run(["/usr/bin/python3", "-c", "import numpy, pandas, matplotlib"], capture_output=True)
    pol = policy_file({"python": {"preload": ["json", "no_such_module_pycell"]}})
    rc, out, err = doctor("--json", "--policy", pol)
    pre = {c["name"]: c for c in json.loads(out)["checks"]}["preload"]
    assert pre == {"name": "preload", "status": "warn",
                   "detail": "policy test: 1 of 2 modules imported; left out: no_such_module_pycell "
                             "(ModuleNotFoundError: No module named 'no_such_module_pycell')",
                   "fix": "install the modules left out, or take them out of python.preload"}, pre
    rc, out, err = doctor("--json", "--policy", "default")
    pre = {c["name"]: c for c in json.loads(out)["checks"]}["preload"]
    assert (pre["status"], pre["detail"]) == ("ok", "policy default preloads nothing"), pre
    rc, out, err = doctor("--json", "--config", "/nonexistent/pycell.conf")
    pre = {c["name"]: c for c in json.loads(out)["checks"]}["preload"]
    assert pre == {"name": "preload", "status": "warn",
                   "detail": "config /nonexistent/pycell.conf: cannot read: No such file or directory",
                   "fix": "fix the configuration (pycell.conf(5)), or name a policy with --policy"}, pre
    rc, out, err = doctor("--json", "--policy", "no-such-policy")
    pre = {c["name"]: c for c in json.loads(out)["checks"]}["preload"]
    assert (pre["status"], pre["detail"][:31]) == ("warn", 'policy "no-such-policy": not fo'), pre
    if r.returncode != 0:
        pytest.skip("the data stack is not installed for /usr/bin/python3: the data policy's check is not "
                    "made here")
    if os.environ.get("PYCELL_TEST_VM"):
        pytest.skip("the check-vm VM: the data policy's zygote imports pandas for half a minute of emulated "
                    "CPU there, and a preload does not depend on the cgroup version (the host's pass checks it)")
    rc, out, err = doctor("--json", "--policy", "data")
    pre = {c["name"]: c for c in json.loads(out)["checks"]}["preload"]
    assert (pre["status"], pre["detail"]) == ("ok", "policy data: all 3 modules imported by its zygote"), pre


def test_the_state_dir_as_the_server_would_find_it(tmp_path):
    """pycell.conf's state_dir: none, one not made yet (doctor makes
    nothing), one in use, and one others could write (a warning with the
    fix, as the server would refuse it)."""
    conf = tmp_path / "pycell.conf"

    def state(text):
        conf.write_text(text)
        rc, out, err = doctor("--json", "--config", str(conf))
        return {c["name"]: c for c in json.loads(out)["checks"]}["state"]
    assert state("{}") == {"name": "state", "status": "ok", "fix": None, "detail": "no state_dir: idle sessions "
                           "are closed, not paused, and tasks do not outlive the server"}
    d = tmp_path / "state"
    dill = subprocess.run(["/usr/bin/python3", "-c", "import dill"], capture_output=True).returncode == 0
    got = state(json.dumps({"state_dir": str(d)}))
    assert not d.exists()
    if dill:
        assert got == {"name": "state", "status": "ok", "fix": None, "detail": f"{d}: idle sessions pause there "
                       "(0 paused now; the server makes it)"}, got
    else:
        assert (got["status"], got["fix"]) == ("warn", "apt-get install python3-dill"), got
    (d / "sessions").mkdir(parents=True, mode=0o700)
    d.chmod(0o700)
    (d / "sessions" / "x.json").write_text(json.dumps({
        "version": 1, "id": "x", "scope": "serve", "owner": None, "policy": None, "opened_at": 0, "paused_at": 0,
        "idle_ms": 1000, "lived_ms": 0, "bytes": 0, "cells": 0, "not_kept": []}))
    if dill:
        assert state(json.dumps({"state_dir": str(d)}))["detail"] == f"{d}: idle sessions pause there (1 paused now)"
    d.chmod(0o775)
    got = state(json.dumps({"state_dir": str(d)}))
    assert got == {"name": "state", "status": "warn",
                   "detail": f"{d} is writable by its group or by others (mode 0775): another user could plant "
                             "or remove sessions there; chmod 0700 it: a server of this user with this "
                             "configuration does not start",
                   "fix": "make it the server's user's, mode 0700, and run doctor as that user (or fix state_dir "
                          "in pycell.conf(5))"}, got
