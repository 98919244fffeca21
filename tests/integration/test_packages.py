"""Packages on request: run_python's `packages`, installed by pycell in a
jail of its own (egress: the index only; wheels only) into a cache that
runs bind read-only.

The index is the test's own: a PEP 503 simple index of wheels built here
from tiny local packages (`pip wheel`, offline), served in the test's
"internet" namespace (test_egress.py's Net) at index.test:8088:

    tinylib 1.0, 2.0   pure wheels; the policy allows tinylib>=1,<2
    withdep 1.0        needs tinylib (allowed)
    badparent 1.0      needs forbidden (a wheel the policy does not allow)
    needsdist 1.0      needs sdistonly, which the index has only as an sdist
    forbidden 1.0
"""

import hashlib
import json
import os
import subprocess
import tarfile
import textwrap
import time

import pytest

from conftest import HOST_IS_ROOT, RawMcp
from test_egress import CONF, net_fixture

pytestmark = pytest.mark.skipif(not HOST_IS_ROOT, reason="package installs run in an egress jail, which "
                                "needs root (veth pairs, BPF filters, the test's own namespaces)")

INDEX = "http://index.test:8088/simple/"
OTHER_INDEX = "http://index.test:8088/other/simple/"


def build_wheel(src, name, version, requires=(), body=""):
    pkg = src / f"{name}-{version}"
    (pkg / name).mkdir(parents=True)
    (pkg / name / "__init__.py").write_text(f'__version__ = "{version}"\n{body}')
    deps = "".join(f'"{r}", ' for r in requires)
    (pkg / "pyproject.toml").write_text(textwrap.dedent(f"""
        [build-system]
        requires = ["setuptools"]
        build-backend = "setuptools.build_meta"
        [project]
        name = "{name}"
        version = "{version}"
        dependencies = [{deps}]
        [tool.setuptools]
        packages = ["{name}"]
    """))
    return pkg


def make_index(root, only=None):
    """The index's wheels and its PEP 503 pages below root; only: those
    wheels (name, version, requires, body) instead of the test's set."""
    src, dist = root / "src", root / "dist"
    src.mkdir(parents=True)
    dist.mkdir()
    if only is not None:
        pkgs = [build_wheel(src, *w) for w in only]
    else:
        pkgs = [build_wheel(src, "tinylib", "1.0"), build_wheel(src, "tinylib", "2.0"),
                build_wheel(src, "withdep", "1.0", ["tinylib"]),
                build_wheel(src, "badparent", "1.0", ["forbidden"]),
                build_wheel(src, "needsdist", "1.0", ["sdistonly"]),
                build_wheel(src, "forbidden", "1.0")]
    have = [subprocess.run(["/usr/bin/python3", *a], capture_output=True).returncode
            for a in (["-c", "import setuptools, wheel"], ["-m", "pip", "--version"])]
    if have != [0, 0]:
        pytest.skip("building the test's wheels offline needs python3-pip, python3-setuptools and python3-wheel")
    for pkg in pkgs:
        p = subprocess.run(["/usr/bin/python3", "-m", "pip", "wheel", "--no-build-isolation", "--no-deps",
                            "--no-index", "--quiet", "-w", str(dist), str(pkg)], capture_output=True, text=True,
                           env=dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1"))
        assert p.returncode == 0, f"pip wheel {pkg.name}: {p.stderr[-1000:]}"
    # sdistonly: a source distribution only (its setup.py would say if it ever ran)
    if only is None:
        sd = src / "sdistonly-1.0"
        sd.mkdir()
        (sd / "setup.py").write_text("raise SystemExit('pycell test: a build step ran')\n")
        (sd / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: sdistonly\nVersion: 1.0\n")
        with tarfile.open(dist / "sdistonly-1.0.tar.gz", "w:gz") as t:
            t.add(sd, arcname="sdistonly-1.0")
    files = {}
    for f in sorted(dist.iterdir()):
        name = f.name.split("-")[0].replace("_", "-")
        files.setdefault(name, []).append(f)
    simple = root / "simple"
    for name, fs in files.items():
        d = simple / name
        d.mkdir(parents=True)
        links = "".join(f'<a href="../../dist/{f.name}#sha256={hashlib.sha256(f.read_bytes()).hexdigest()}">'
                        f'{f.name}</a>\n' for f in fs)
        (d / "index.html").write_text(f"<!DOCTYPE html><html><body>\n{links}</body></html>\n")
    return sorted(files)


def serve_index(n):
    """The index in the test's internet, and a configuration and a policy
    that use it."""
    idx = n.tmp / "index"
    idx.mkdir()
    n.names = make_index(idx)
    # another index on the same server (OTHER_INDEX): its own tinylib 1.0
    make_index(idx / "other", only=[("tinylib", "1.0", (), "PLANTED = True\n")])
    n.spawn(n.enter(n.inet) + ["/usr/bin/python3", "-m", "http.server", "--bind", "0.0.0.0",
                               "--directory", str(idx), "8088"])
    deadline = time.monotonic() + 10
    while n.sh(n.inet, "ss -ltn | grep -q ':8088 '", check=False).returncode != 0:
        assert time.monotonic() < deadline, "the index did not start"
        time.sleep(0.05)
    n.cache = n.tmp / "cache"
    n.conf.write_text(json.dumps({**CONF, "packages": {"cache": str(n.cache)}}))
    n.policy = n.tmp / "pkgs.json"
    n.policy.write_text(json.dumps({"extends": "default", "packages": {
        "index": INDEX, "allow": ["tinylib>=1,<2", "withdep", "badparent", "needsdist", "sdistonly"]}}))
    n.policy.chmod(0o644)


@pytest.fixture(scope="module")
def net():
    yield from net_fixture("pycell-packages-", serve_index)


class Mcp(RawMcp):
    """pycell mcp in the test's host namespace."""

    def __init__(self, net, policy, conf=None):
        super().__init__(["--config", str(conf or net.conf), "--policy", str(policy)], prefix=net.enter(net.host))

    def run(self, code, packages=None):
        args = {"code": code}
        if packages is not None:
            args["packages"] = packages
        t0 = time.monotonic()
        res = self.call("tools/call", {"name": "run_python", "arguments": args})
        res["elapsed"] = time.monotonic() - t0
        return res


@pytest.fixture
def mcp(net):
    m = Mcp(net, net.policy)
    yield m
    m.close()


def listing(d):
    return sorted(p.name for p in d.iterdir()) if d.exists() else []


def test_an_allowed_package_is_installed_then_comes_from_the_cache(net, mcp):
    code = "import tinylib; print(tinylib.__version__, tinylib.__file__)"
    first = mcp.run(code, ["tinylib"])
    sc = first["structuredContent"]
    # the policy's bound <2 chose 1.0 though the index has 2.0
    assert (sc["status"], sc["stdout"]) == ("ok", "1.0 /run/pycell/packages/tinylib/__init__.py\n"), json.dumps(sc.get("setup_error"))
    sets = listing(net.cache / "sets")
    assert len(sets) == 1 and len(listing(net.cache / "requests")) == 1
    assert listing(net.cache / "staging") == []
    used = (net.cache / "sets" / sets[0]).stat().st_mtime_ns
    time.sleep(0.05)
    second = mcp.run(code, ["TinyLib"])   # the same request, as PEP 503 normalises it
    assert second["structuredContent"]["stdout"] == "1.0 /run/pycell/packages/tinylib/__init__.py\n"
    # from the cache: no install ran (no new set, request or staging), the set was used again
    assert listing(net.cache / "sets") == sets and len(listing(net.cache / "requests")) == 1
    assert (net.cache / "sets" / sets[0]).stat().st_mtime_ns > used
    print(f"install and run: {first['elapsed']:.3f} s; from the cache: {second['elapsed']:.3f} s")
    assert second["elapsed"] < first["elapsed"]


def test_a_dependency_comes_along_when_allowed(net, mcp):
    res = mcp.run("import withdep, tinylib; print(withdep.__version__, tinylib.__version__)", ["withdep"])
    assert res["structuredContent"]["stdout"] == "1.0 1.0\n", res


def test_the_run_cannot_write_its_packages(net, mcp):
    res = mcp.run(textwrap.dedent("""
        import errno, tinylib, os
        for path in ("/run/pycell/packages/tinylib/__init__.py", "/run/pycell/packages/planted.py"):
            try:
                open(path, "a").write("x")
                print("written", path)
            except OSError as e:
                print(errno.errorcode[e.errno])
    """), ["tinylib"])
    assert res["structuredContent"]["stdout"] == "EROFS\nEROFS\n", res
    for f in (net.cache / "sets").rglob("*"):
        assert f.stat().st_uid != 0 or f.is_dir(), f   # the install jail's files, not root's
        assert not f.stat().st_mode & 0o022, f           # and nobody else may write them


def test_refusals_name_the_package_and_why(net, mcp):
    res = mcp.run("1", ["forbidden"])
    assert res["isError"] is True
    assert res["content"][0]["text"] == ('Invalid arguments for run_python: packages[0] "forbidden": forbidden is '
                                         "not among the packages the policy allows (sandbox_info lists them)")
    res = mcp.run("1", ["tinylib[extra]"])
    assert res["content"][0]["text"].startswith('Invalid arguments for run_python: packages[0] "tinylib[extra]": '
                                                "after the name: version specifiers")
    before = listing(net.cache / "sets")
    # a dependency the policy does not allow: installed in staging, checked, nothing kept
    sc = mcp.run("1", ["badparent"])["structuredContent"]
    assert sc["status"] == "setup_failed"
    assert sc["setup_error"]["step"] == "packages"
    assert sc["setup_error"]["message"] == ("forbidden 1.0, which the request needs, is not among the packages "
                                            "the policy allows: nothing was kept")
    # a dependency with no wheel: pip refuses it, no build step runs
    sc = mcp.run("1", ["needsdist"])["structuredContent"]
    assert sc["status"] == "setup_failed"
    msg = sc["setup_error"]["message"]
    assert msg.startswith(f"installing needsdist from {INDEX}: pip failed: ERROR: "), msg
    assert "No matching distribution found for sdistonly" in msg, msg
    assert "a build step ran" not in msg
    # a version the index does not have
    sc = mcp.run("1", ["tinylib==1.5"])["structuredContent"]
    assert sc["setup_error"]["message"].startswith(f"installing tinylib==1.5 from {INDEX}: pip failed: ERROR: "
                                                   "Cannot install tinylib==1.5"), sc["setup_error"]
    assert listing(net.cache / "sets") == before
    assert listing(net.cache / "staging") == []


def test_sandbox_info_lists_what_may_be_installed(net, mcp):
    info = mcp.call("tools/call", {"name": "sandbox_info", "arguments": {}})["structuredContent"]
    assert info["installable"] == {"index": INDEX, "allow": ["tinylib>=1,<2", "withdep", "badparent",
                                                             "needsdist", "sdistonly"]}


def test_a_policy_without_an_index_installs_nothing(net):
    m = Mcp(net, "default")
    try:
        res = m.run("1", ["tinylib"])
        assert res["content"][0]["text"] == ('Invalid arguments for run_python: the policy "default" installs no '
                                             "packages (it names no packages.index)")
        info = m.call("tools/call", {"name": "sandbox_info", "arguments": {}})["structuredContent"]
        assert "installable" not in info
    finally:
        m.close()


def test_a_session_cell_takes_no_packages(net, mcp):
    res = mcp.call("tools/call", {"name": "run_python",
                                  "arguments": {"code": "1", "session_id": "x", "packages": ["tinylib"]}})
    assert res["content"][0]["text"] == ("Invalid arguments for run_python: \"packages\" cannot be given to a "
                                         "session's cell: a session's interpreter has its packages from the start")


def test_a_session_has_its_packages_from_the_start(net):
    policy = net.tmp / "pkgs-sessions.json"
    policy.write_text(json.dumps({**json.loads(net.policy.read_text()), "sessions": {"max": 2}}))
    policy.chmod(0o644)
    m = Mcp(net, policy)
    try:
        opened = m.call("tools/call", {"name": "session_open", "arguments": {"packages": ["withdep"]}})
        sid = opened["structuredContent"]["session_id"]
        cells = [m.call("tools/call", {"name": "run_python", "arguments": {"code": c, "session_id": sid}})
                 ["structuredContent"] for c in ("import withdep, tinylib", "print(withdep.__version__, tinylib.__file__)")]
        assert [c["status"] for c in cells] == ["ok", "ok"]
        assert cells[1]["stdout"] == "1.0 /run/pycell/packages/tinylib/__init__.py\n"
        bad = m.call("tools/call", {"name": "session_open", "arguments": {"packages": ["needsdist"]}})
        assert bad["isError"] is True
        assert bad["content"][0]["text"].startswith(
            f"The session could not be opened: packages: installing needsdist from {INDEX}: pip failed: ERROR: ")
        refused = m.call("tools/call", {"name": "session_open", "arguments": {"packages": ["forbidden"]}})
        assert refused["content"][0]["text"] == ('Invalid arguments for session_open: packages[0] "forbidden": '
                                                 "forbidden is not among the packages the policy allows "
                                                 "(sandbox_info lists them)")
    finally:
        m.close()


def test_the_cache_keeps_to_its_size_least_recently_used_first(net):
    cache = net.tmp / "small-cache"
    conf = net.tmp / "small.conf"
    conf.write_text(json.dumps({**CONF, "packages": {"cache": str(cache), "cache_max": "1K"}}))
    m = Mcp(net, net.policy, conf)
    try:
        assert m.run("import tinylib", ["tinylib"])["structuredContent"]["status"] == "ok"
        first = listing(cache / "sets")
        assert len(first) == 1
        # a second set passes the size: the first, no run holding it, goes; the new one stays
        assert m.run("import withdep", ["withdep"])["structuredContent"]["status"] == "ok"
        second = listing(cache / "sets")
        assert len(second) == 1 and second != first
        # the first request again: its set is gone, so it is installed again (the same key)
        assert m.run("import tinylib", ["tinylib"])["structuredContent"]["status"] == "ok"
        assert listing(cache / "sets") == first
        assert oct((cache).stat().st_mode & 0o777) == "0o711"
    finally:
        m.close()


def test_an_interpreter_the_policy_binds_installs_too(net):
    """The install jail keeps the policy's binds: an interpreter that is
    there only through one (a venv under /opt, say) installs and runs."""
    policy = net.tmp / "pkgs-bound.json"
    policy.write_text(json.dumps({**json.loads(net.policy.read_text()),
                                  "filesystem": {"binds": [{"src": "/usr/bin", "dst": "/opt/pybin"}]},
                                  "python": {"interpreter": "/opt/pybin/python3"}}))
    policy.chmod(0o644)
    m = Mcp(net, policy)
    try:
        sc = m.run("import sys, tinylib; print(sys.executable, tinylib.__version__)", ["tinylib"])["structuredContent"]
        assert (sc["status"], sc["stdout"]) == ("ok", "/opt/pybin/python3 1.0\n"), sc.get("setup_error")
    finally:
        m.close()


def test_one_index_never_supplies_another_policys_packages(net, mcp):
    """The same name and version from two indexes are two sets: a policy
    whose index serves its own tinylib 1.0 gets that one, and the other
    policy still gets its index's (the set key holds the index, its CA
    bundle and the wheels' digests)."""
    code = "import tinylib; print(tinylib.__version__, getattr(tinylib, 'PLANTED', False))"
    assert mcp.run(code, ["tinylib==1.0"])["structuredContent"]["stdout"] == "1.0 False\n"
    sets = listing(net.cache / "sets")
    other = net.tmp / "pkgs-other.json"
    other.write_text(json.dumps({"extends": "default", "packages": {"index": OTHER_INDEX, "allow": ["tinylib"]}}))
    other.chmod(0o644)
    m = Mcp(net, other)
    try:
        sc = m.run(code, ["tinylib==1.0"])["structuredContent"]
        assert (sc["status"], sc["stdout"]) == ("ok", "1.0 True\n"), sc
        # its own set, beside the first index's
        assert len(listing(net.cache / "sets")) == len(sets) + 1
    finally:
        m.close()
    # and the first policy's runs still get their index's tinylib
    assert mcp.run(code, ["tinylib==1.0"])["structuredContent"]["stdout"] == "1.0 False\n"
    # a fresh cache, the other index first: the first policy is not handed its set either
    conf = net.tmp / "fresh.conf"
    cache = net.tmp / "fresh-cache"
    conf.write_text(json.dumps({**CONF, "packages": {"cache": str(cache)}}))
    for policy, want in ((other, "1.0 True\n"), (net.policy, "1.0 False\n")):
        m = Mcp(net, policy, conf)
        try:
            sc = m.run(code, ["tinylib==1.0"])["structuredContent"]
            assert (sc["status"], sc["stdout"]) == ("ok", want), sc
        finally:
            m.close()
    assert len(listing(cache / "sets")) == 2
