"""`pycell policy-test` (issue 6): every shipped policy holds, and the suite
can fail: deliberately weakened policies make exactly the matching probes
report `escaped` and the exit status non-zero."""

import json

import pytest

from conftest import DATADIR, pycell_run

SHIPPED = ["default", "strict", "loopback", "data"]
CATEGORIES = ["filesystem", "devices", "procfs", "network", "ipc", "identity", "kernel",
              "leaks", "bridge", "resources"]


def policy_test(*args, timeout=180):
    """Run `pycell policy-test --format json ARGS`; (exit status, {category/name: probe})."""
    rc, out, err = pycell_run(["policy-test", "--format", "json", *args], timeout=timeout)
    try:
        doc = json.loads(out)
    except ValueError as e:
        raise AssertionError(f"policy-test printed no JSON ({e}): exit {rc} stdout {out[:500]!r} "
                             f"stderr {err[-2000:]!r}")
    probes = {f"{p['category']}/{p['name']}": p for p in doc["probes"]}
    assert doc["passed"] + doc["failed"] == len(doc["probes"])
    return rc, probes, doc


def not_contained(probes):
    return {k: f"{p['status']}: {p['reason']}" for k, p in probes.items() if p["status"] != "contained"}


@pytest.mark.parametrize("policy", SHIPPED)
def test_shipped_policy_holds(policy):
    rc, probes, doc = policy_test("--policy", policy)
    assert not_contained(probes) == {}
    assert rc == 0
    assert doc["failed"] == 0 and doc["policy"] == policy
    assert {k.split("/")[0] for k in probes} == set(CATEGORIES)
    # the bombs ran and the supervisor outlived them
    for bomb in ("fork-bomb", "thread-bomb", "memory-bomb", "tmp-fill", "fd-exhaustion",
                 "output-flood", "cpu-spin", "supervisor-alive"):
        assert probes[f"resources/{bomb}"]["status"] == "contained"


def test_tap_output_and_closing_line():
    rc, out, _ = pycell_run(["policy-test", "--only", "identity,leaks"], timeout=60)
    lines = out.decode().splitlines()
    assert rc == 0
    assert lines[0] == "TAP version 13"
    plan = [ln for ln in lines if ln.startswith("1..")]
    results = [ln for ln in lines if ln.startswith(("ok ", "not ok "))]
    assert plan == [f"1..{len(results)}"] and len(results) == 8
    assert all(ln.startswith("ok ") and ": contained # " in ln for ln in results)
    assert lines[-1] == f"# {len(results)} passed, 0 failed"


def test_host_etc_bound_into_the_jail_is_an_escape(policy_file):
    weak = policy_file({"filesystem": {"binds": [{"src": "/etc", "dst": "/host-etc"}]}},
                       name="weak-etc")
    rc, probes, doc = policy_test("--policy", weak, "--only", "filesystem")
    assert rc == 1
    assert probes["filesystem/host-files-by-inode"]["status"] == "escaped"
    assert "/host-etc is host /etc" in probes["filesystem/host-files-by-inode"]["reason"]
    assert set(not_contained(probes)) == {"filesystem/host-files-by-inode"}


def test_allowing_a_denied_syscall_is_an_escape(policy_file):
    weak = policy_file({"seccomp": {"rules": [{"syscall": "unshare", "action": "allow"}]}},
                       name="weak-unshare")
    rc, probes, _ = policy_test("--policy", weak, "--only", "kernel")
    assert rc == 1
    assert probes["kernel/denied-syscalls"]["status"] == "escaped"
    assert "unshare=EINVAL" in probes["kernel/denied-syscalls"]["reason"]
    assert probes["kernel/nested-user-namespace"]["status"] == "escaped"
    assert probes["kernel/tiocsti"]["status"] == "contained"


def test_allowing_tiocsti_is_an_escape(policy_file):
    weak = policy_file({"seccomp": {"rules": [{"syscall": "ioctl", "action": "allow"}]}},
                       name="weak-ioctl")
    rc, probes, _ = policy_test("--policy", weak, "--only", "kernel")
    assert rc == 1
    assert probes["kernel/tiocsti"]["status"] == "escaped"
    assert "ioctl TIOCSTI|high bits=ENOTTY" in probes["kernel/tiocsti"]["reason"]


def test_a_writable_bind_of_the_canary_dir_is_found(policy_file):
    """Binding the host /tmp (where the suite plants its canary) exposes it."""
    weak = policy_file({"filesystem": {"binds": [{"src": "/tmp", "dst": "/host-tmp"}]}},
                       name="weak-tmp")
    rc, probes, _ = policy_test("--policy", weak, "--only", "filesystem")
    assert rc == 1
    reason = probes["filesystem/host-files-by-inode"]["reason"]
    assert probes["filesystem/host-files-by-inode"]["status"] == "escaped"
    assert "/host-tmp is host /tmp" in reason


def test_usage_errors():
    rc, _, err = pycell_run(["policy-test", "--only", "bogus"], timeout=30)
    assert rc == 2 and b"unknown category 'bogus'" in err
    rc, _, err = pycell_run(["policy-test", "--format", "xml"], timeout=30)
    assert rc == 2
    rc, out, _ = pycell_run(["policy-test", "--list"], timeout=30)
    assert rc == 0 and out.decode().split() == CATEGORIES


def test_canaries_are_removed():
    import glob

    def ipc_rows():
        return {f: len(open(f"/proc/sysvipc/{f}").read().splitlines()) for f in ("shm", "msg", "sem")}

    before = set(glob.glob("/tmp/pycell-canary-*")), ipc_rows(), set(glob.glob("/dev/mqueue/*"))
    rc, _, _ = policy_test("--only", "ipc")
    assert rc == 0
    after = set(glob.glob("/tmp/pycell-canary-*")), ipc_rows(), set(glob.glob("/dev/mqueue/*"))
    assert after == before
