"""matplotlib's font list, built once (src/run/fonts.c, runtime/pycell/_fonts.py):
pycell mcp builds it at start in a jail of its policy, into the cache
directory, and every run then finds it read-only at
/run/pycell/fonts, linked from /tmp/matplotlib, instead of scanning the
fonts itself.  Each test has a cache directory of its own."""

import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import PYCELL, RawMcp, pycell_env, run_json

pytest.importorskip("matplotlib", reason="python3-matplotlib is not installed: no font list to build")

LIST = "fontlist-v330.json"   # matplotlib 3.6's (Debian 12)

# In a run: what matplotlib makes of /tmp/matplotlib, as its own log says.
PROBE = r"""
import hashlib, json, logging, os
logging.basicConfig(level=logging.DEBUG, format="%(message)s", handlers=[logging.StreamHandler(open(os.devnull, "w"))])
seen = []
class Keep(logging.Handler):
    def emit(self, r):
        seen.append(r.getMessage())
logging.getLogger("matplotlib.font_manager").addHandler(Keep())
import matplotlib.font_manager as fm
d = "/tmp/matplotlib"
names = sorted(os.listdir(d)) if os.path.isdir(d) else None
out = {"names": names, "uid": os.stat(d).st_uid if names is not None else None,
       "log": [m for m in seen if "fontManager" in m]}
if names:
    p = os.path.join(d, names[0])
    out["link"] = os.readlink(p) if os.path.islink(p) else None
    out["sha"] = hashlib.sha256(open(p, "rb").read()).hexdigest()
    out["files"] = sorted(f["fname"] for f in json.load(open(p))["ttflist"])
    try:
        open(p, "a")
        out["write"] = "written"
    except OSError as e:
        out["write"] = e.errno
print(json.dumps(out))
"""


def cache_dir(host_tmp):
    """A cache of the test's own, where a jail's ids can reach what is
    bound from it (host_tmp is 0755; pytest's tmp_path is not)."""
    d = host_tmp / "cache"
    d.mkdir(mode=0o700)
    return d


def keys(cache):
    """The lists' directories in cache (a key's 32 hex digits: not a
    build's staging directory, KEY.build.PID.N)."""
    return sorted(p for p in glob.glob(f"{cache}/fonts/*") if re.fullmatch(r"[0-9a-f]{32}", os.path.basename(p)))


def watch_files(cache):
    """{path: inode} of the lists' records in cache."""
    return {p: os.stat(p).st_ino for k in keys(cache) for p in glob.glob(f"{k}/watch.json")}


def server(cache, *args):
    """pycell mcp ARGS with this cache (RawMcp takes os.environ)."""
    env_before = os.environ.get("PYCELL_CACHE_DIR")
    os.environ["PYCELL_CACHE_DIR"] = str(cache)
    try:
        return RawMcp(list(args))
    finally:
        if env_before is None:
            del os.environ["PYCELL_CACHE_DIR"]
        else:
            os.environ["PYCELL_CACHE_DIR"] = env_before


def build(cache, *args, expect=True, timeout=60):
    """Start pycell mcp -v ARGS with this cache; when a build is expected,
    wait for the list it puts in place (a record that was not there
    before), else give it a second to show that none starts; stop it; its
    log."""
    before = watch_files(cache)
    s = server(cache, "-v", *args)
    deadline = time.monotonic() + (timeout if expect else 1)
    while time.monotonic() < deadline and (watch_files(cache).items() <= before.items() if expect else True):
        time.sleep(0.1)
    return s.close().decode()


def probe(cache, *opts):
    res = run_json(PROBE, *opts, env={"PYCELL_CACHE_DIR": str(cache)})
    assert res["status"] == "ok", res
    return json.loads(res["stdout"])


def doctor_fonts(cache, *args):
    p = subprocess.run([PYCELL, "doctor", "--json", *args], capture_output=True, text=True, timeout=60,
                       env=pycell_env({"PYCELL_CACHE_DIR": str(cache)}))
    [c] = [c for c in json.loads(p.stdout)["checks"] if c["name"] == "fonts"]
    return c


def test_a_run_finds_the_list_built_at_start_and_cannot_change_it(host_tmp):
    cache = cache_dir(host_tmp)
    # before any server: no list, and a run scans the fonts itself
    first = probe(cache)
    assert first["names"] == [LIST] and first["link"] is None
    assert first["log"] == ["generated new fontManager"]
    c = doctor_fonts(cache)
    assert c["status"] == "warn" and "watch.json: none yet" in c["detail"], c
    assert c["fix"] == "start pycell mcp or pycell serve once: it builds the list at start"

    log = build(cache)
    assert "fonts: building matplotlib's font list for /usr/bin/python3 in the background" in log, log
    assert "fonts: matplotlib's font list for /usr/bin/python3 built in" in log, log
    [key] = keys(cache)
    assert glob.glob(f"{cache}/fonts/*") == [key]   # no build's directory left
    assert sorted(os.listdir(key)) == [LIST, "watch.json"]
    for name in (LIST, "watch.json"):
        st = os.stat(f"{key}/{name}")
        assert (st.st_uid, st.st_mode & 0o777) == (os.geteuid(), 0o644)
    assert os.stat(f"{cache}/fonts").st_mode & 0o777 == 0o711
    assert os.stat(cache).st_mode & 0o777 == 0o711
    watch = json.loads(Path(key, "watch.json").read_text())
    import matplotlib
    assert watch["matplotlib"] == matplotlib.__version__
    assert "/usr/share/fonts/truetype/dejavu" in watch["dirs"]
    want = hashlib.sha256(Path(key, LIST).read_bytes()).hexdigest()
    c = doctor_fonts(cache)
    assert (c["status"], c["detail"]) == ("ok", f"policy default: matplotlib's font list {key}/{LIST}, up to date")

    # cold, and from the zygote: the same bytes, read through the link,
    # and matplotlib uses them; the jail's user owns /tmp/matplotlib, and
    # cannot write the list
    for opts in ((), ("--warm",)):
        got = probe(cache, *opts)
        assert got["names"] == [LIST], (opts, got)
        assert got["link"] == f"/run/pycell/fonts/{LIST}"
        assert got["sha"] == want
        assert got["log"] == [f"Using fontManager instance from /tmp/matplotlib/{LIST}"], (opts, got)
        assert got["uid"] == 1000
        assert got["write"] in (13, 30), got   # EACCES (the supervisor's file), else EROFS

    # a second start finds it up to date: nothing is built
    again = build(cache, expect=False)
    assert "fonts: building" not in again, again
    assert keys(cache) == [key]

    # a session's cells: the same list, through the same link
    s = server(cache)
    try:
        sid = s.tool("session_open", {})["structuredContent"]["session_id"]
        sc = s.tool("run_python", {"session_id": sid, "code": PROBE})["structuredContent"]
        assert sc["status"] == "ok", sc
        got = json.loads(sc["stdout"])
        assert (got["link"], got["sha"], got["log"]) == (
            f"/run/pycell/fonts/{LIST}", want, [f"Using fontManager instance from /tmp/matplotlib/{LIST}"]), got
    finally:
        s.close()


def test_a_font_added_makes_the_list_stale(host_tmp, policy_file):
    """A directory of fonts the jail's fontconfig scans, bound by the policy
    over the host's lyx fonts: a font copied into it changes the directory,
    and the next start builds the list again, with the new font in it."""
    cache = cache_dir(host_tmp)
    fonts = host_tmp / "fonts"
    fonts.mkdir(mode=0o755)
    pol = policy_file({"filesystem": {"binds": [{"src": str(fonts), "dst": "/usr/share/fonts/truetype/lyx"}]}})
    build(cache, "--policy", pol)
    [key] = keys(cache)
    before = probe(cache, "--policy", pol)["files"]
    assert not [f for f in before if "/lyx/" in f]
    shutil.copy("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", fonts / "Added.ttf")
    os.chmod(fonts / "Added.ttf", 0o644)
    c = doctor_fonts(cache, "--policy", pol)
    assert c["status"] == "warn" and "/usr/share/fonts/truetype/lyx changed since it was built" in c["detail"], c
    log = build(cache, "--policy", pol)
    assert "/usr/share/fonts/truetype/lyx changed since it was built" in log, log
    assert keys(cache) == [key]
    after = probe(cache, "--policy", pol)["files"]
    assert sorted(after) == sorted(before + ["/usr/share/fonts/truetype/lyx/Added.ttf"])


def test_no_cache_no_list():
    got = probe("none")
    assert got["link"] is None and got["log"] == ["generated new fontManager"]
