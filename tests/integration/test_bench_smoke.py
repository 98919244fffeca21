"""The benchmark harness (tests/bench/bench.py) must not rot: a --quick run
with tiny workloads produces every table row with numbers, leaves no process
behind, and a missing tool is a clear error.  No timing is asserted."""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import DATADIR, PYCELL, REPO, check_no_leftovers, children_of, kill_tree

BENCH = REPO / "tests" / "bench" / "bench.py"
DATA = REPO / "tests" / "bench" / "data.py"
PY = "/usr/bin/python3"
NUM = r"-?\d+(?:\.\d+)?"

pytestmark = pytest.mark.usefixtures("reap_leftovers")

# The benchmark's tables are the normal build's: under the sanitizers a
# --quick run takes a minute more of CI's hour and drives only what the
# rest of the suite drives there (cold, warm, mcp, serve, sessions).
NOT_UNDER_SANITIZERS = pytest.mark.skipif(
    bool(os.environ.get("PYCELL_SANITIZERS")),
    reason="sanitizer build: the benchmark's tables are the normal build's (the first CI stage fills them)")


def bench(args, timeout=600, script=BENCH):
    env = dict(os.environ, PYCELL=PYCELL, PYCELL_DATADIR=DATADIR, PYTHONDONTWRITEBYTECODE="1")
    before = set(children_of(os.getpid()))
    proc = subprocess.Popen([PY, str(script), *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_tree(proc.pid)
        out, err = proc.communicate()
        raise AssertionError(f"{script.name} {args} did not finish in {timeout} s; "
                             f"stderr {err[-3000:]!r}")
    check_no_leftovers(before, script.name)
    return proc.returncode, out.decode(), err.decode()


def failed(script, rc, err):
    """An assertion message whose first lines are what the benchmark said
    went wrong (its lines that are not progress, a traceback's), then the
    end of its stderr: a record cut short keeps the cause."""
    lines = err.splitlines()
    said = [line for line in lines if not re.match(r"bench: (?!error)", line)]
    return f"{script} exit {rc}; said:\n" + "\n".join(said[-40:]) + "\nstderr's end:\n" + err[-3000:]


def table_rows(report, heading):
    """The body rows of the first table under the '## heading...' line, as
    lists of stripped cells."""
    lines = report.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("## " + heading)), None)
    assert start is not None, f"no section {heading!r} in the report:\n{report}"
    rows = []
    for line in lines[start + 1:]:
        if line.startswith("## "):
            break
        if line.startswith("|") and not line.startswith("|---"):
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    assert rows, f"section {heading!r} has no table:\n{report}"
    return rows[1:]  # without the header row


def assert_num(cell, what, suffix=""):
    assert re.fullmatch(NUM + re.escape(suffix), cell), f"{what}: {cell!r} is not a number"


@NOT_UNDER_SANITIZERS
def test_quick_run_fills_every_table(tmp_path):
    have_bwrap = shutil.which("bwrap") is not None
    mcp = ["pycell mcp", "pycell mcp cold", "pycell serve", "pycell serve cold"]
    runners = ["python3", "bwrap", "pycell run", *mcp]
    args = ["--quick", "--iterations", "2", "--cpu-ms", "5", "--output-bytes", "65536",
            "--debug-runs", "2", "--out", str(tmp_path / "report.md"),
            "--json", str(tmp_path / "report.json")]
    floor = Path(PYCELL).parent / "tests" / "bench" / "floor"
    if floor.exists():
        args += ["--floor", str(floor)]
    else:
        print(f"{floor} not built (make check builds it): benchmarking without the floor table")
    # the SDK client's table needs node and tests/mcp's packages, which
    # tests/mcp/run.sh installs after this suite: installed here the same way
    sdk = REPO / "tests" / "mcp" / "node_modules" / "@modelcontextprotocol" / "sdk"
    have_node = bool(shutil.which("node") and shutil.which("npm"))
    if not have_node:
        print("node/npm not installed: benchmarking without the SDK client (apt-get install nodejs npm)")
    elif not sdk.exists():
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=REPO / "tests" / "mcp",
                       check=True, capture_output=True, timeout=600)
    if not have_bwrap:
        # The harness is still checked; the bwrap runner needs the Debian package.
        print("bwrap not installed: benchmarking without it (apt-get install bubblewrap)")
        runners.remove("bwrap")
        args += ["--runners", "python3,pycell-run,pycell-mcp,pycell-serve"]
    rc, out, err = bench(args)
    assert rc == 0, failed("bench.py", rc, err)
    report = (tmp_path / "report.md").read_text()
    assert report.strip() == out.strip(), "--out differs from what was printed"
    res = json.loads((tmp_path / "report.json").read_text())
    assert res["runners"] == runners
    assert res["leftovers"] == []

    workloads = ['print("hello")', "import json, re, collections",
                 f"CPU loop f({res['cpu_n']})", "65536 bytes of output"]
    rows = table_rows(report, "Latency")
    assert [(r[0], r[1]) for r in rows] == [(w, r) for w in workloads for r in runners]
    for r in rows:
        assert r[2] == "2", f"iterations in {r}"
        for cell in r[3:6]:
            assert_num(cell, f"latency {r[:2]}")
        assert_num(r[6], f"ratio {r[:2]}", "x")

    rows = table_rows(report, "What HTTP adds")
    pairs = ["pycell serve - pycell mcp", "pycell serve cold - pycell mcp cold"]
    assert [(r[0], r[1]) for r in rows] == [(w, p) for w in workloads for p in pairs]
    for r in rows:
        assert r[2] == "2", f"pairs in {r}"
        assert len(r) == 9, r
        for cell in r[3:]:
            assert re.fullmatch(r"[+-]" + NUM, cell), f"difference {r}: {cell!r}"
    added = res["http_added"]["hello"]["pycell serve"]
    assert added["n"] == 2 and added["stdio"] == "pycell mcp" and added["outside"]["n"] == 2

    rows = table_rows(report, "Throughput")
    assert [r[0] for r in rows] == runners
    for r in rows:
        assert len(r) == 7, r
        for cell in r[1:4]:
            assert_num(cell, f"throughput {r[0]}")
        for cell in r[4:]:
            assert_num(cell, f"throughput ratio {r[0]}", "x")

    rows = table_rows(report, "Memory")
    expected = [("python3", "running jail (processes in its pid namespace)")]
    if have_bwrap:
        expected += [("bwrap", "running jail (processes in its pid namespace)"),
                     ("bwrap", "whole command (runner + jail)")]
    expected += [("pycell run", "running jail (processes in its pid namespace)"),
                 ("pycell run", "whole command (runner + jail)")]
    for name in mcp:
        expected += [
            (name, "supervisor idle after initialize"),
            (name, "processes below the idle supervisor after initialize (ready jails, zygote)"),
            (name, "running jail (processes in its pid namespace)"),
            (name, "supervisor idle after the benchmark runs"),
        ]
    assert [(r[0], r[1]) for r in rows] == expected
    for r in rows:
        for cell in r[2:5]:
            assert_num(cell, f"memory {r[:2]}")
        assert r[5] == "n/a" or re.fullmatch(NUM, r[5]), f"cgroup cell {r}"
        if r[1].startswith(("running jail", "supervisor idle")):
            assert int(r[2]) >= 1 and float(r[3]) > 0, f"no process measured: {r}"
    # bare python3 is one process; a pycell jail is its init and python.
    assert rows[0][2] == "1"
    for name in ("pycell run", *mcp):
        jail = next(r for r in rows if r[0] == name and r[1].startswith("running jail"))
        assert jail[2] == "2", f"{name} jail processes: {jail}"

    rows = table_rows(report, "Where `pycell run` spends its time")
    assert rows, "no step timings parsed from pycell run --debug"
    for r in rows:
        for cell in r[1:4]:
            assert_num(cell, f"step {r[0]}")

    if floor.exists():
        rows = table_rows(report, "The kernel's floor")
        assert rows[0][0] == "fork + exec /bin/true" and len(rows) == 12, rows
        for r in rows:
            if os.geteuid() == 0:   # every step can run: a number in each cell, no "failed"
                assert r[1] == "10" and all(re.fullmatch(r"[+-]?" + NUM, c) for c in r[2:]), r
            else:
                assert re.fullmatch(NUM, r[2]) or r[2].startswith(("failed: ", "skipped: ")), r

    if have_node:
        rows = table_rows(report, "Through the official SDK client")
        assert [r[0] for r in rows] == ["python3", "pycell mcp, v1 SDK client"], rows
        for r in rows:
            assert r[1] == "2", f"iterations in {r}"
            for cell in r[2:5]:
                assert_num(cell, f"SDK latency {r[0]}")
            assert_num(r[5], f"SDK ratio {r[0]}", "x")
    else:
        assert "The SDK client's table was left out: needs node" in report

    rows = table_rows(report, "CPU per run")
    # python3, the floor (when built), a fork of python3 (the runners
    # include warm ones), then the other runners in order
    refs = (["the kernel's floor (a jail)"] if floor.exists() else []) + ["a fork of python3 (no jail)"]
    names = runners[:1] + refs + runners[1:]
    assert [r[0] for r in rows] == names, rows
    warm = ("pycell mcp", "pycell serve")
    for r in rows:
        assert len(r) == 6, r
        assert_num(r[1], f"CPU per run {r[0]}")
        if r[0] in names[:1] + refs or not floor.exists():
            assert r[2:5] == ["", "", ""], r
        else:
            assert_num(r[2], f"CPU over the floor {r[0]}", "x")
            assert r[3] == ("floor + a fork" if r[0] in warm else "floor + python3"), r
            assert_num(r[4], f"CPU ratio {r[0]}", "x")
            # the reference is the floor and more: its ratio is the lower
            assert float(r[4][:-1]) < float(r[2][:-1]), r
    assert res["cpu_runs"] == 10 and set(res["cpu_per_run"]) == set(runners)
    assert 0 < res["fork_floor_cpu"] < 1, res["fork_floor_cpu"]

    # a cell of a live session and session_open, beside bare python3
    rows = table_rows(report, "Sessions")
    assert [r[0] for r in rows] == ["python3", f"{mcp[0]}: a cell in a live session", f"{mcp[0]}: session_open"]
    for r in rows:
        assert r[1] == "2", f"iterations in {r}"
        assert_num(r[2], f"sessions {r[0]}")
        assert_num(r[5], f"sessions ratio {r[0]}", "x")

    rows = table_rows(report, "Targets")
    # cold CLI against python3 and bwrap; per warm MCP runner: p50 on the
    # wire, 1 MiB of output, throughput at c=2; per MCP runner: idle RSS;
    # the SDK client's p50; per HTTP runner: what HTTP adds to the p50 of
    # its stdio twin; a session's cell against python3
    assert len(rows) == 1 + (1 if have_bwrap else 0) + 3 * len(warm) + len(mcp) + have_node + 2 + 1, rows
    for r in rows:
        assert re.fullmatch(NUM + r"(x| MiB| ms)", r[1]) or re.fullmatch(r"[+-]" + NUM + " ms", r[1]), \
            f"target value {r}"
        assert r[3] in ("yes", "no"), r


def test_missing_pycell_binary_is_a_clear_error(tmp_path):
    missing = tmp_path / "no-pycell"
    rc, out, err = bench(["--quick", "--pycell", str(missing)], timeout=60)
    assert rc == 2, f"exit {rc}; stderr {err!r}"
    assert f"pycell binary not found or not executable: {missing}" in err
    assert out == ""


def test_missing_bwrap_is_a_clear_error(tmp_path):
    missing = tmp_path / "no-bwrap"
    rc, out, err = bench(["--quick", "--bwrap", str(missing)], timeout=60)
    assert rc == 2, f"exit {rc}; stderr {err!r}"
    assert f"bwrap not found ({missing})" in err
    assert "apt-get install bubblewrap" in err
    assert out == ""


def test_missing_floor_binary_is_a_clear_error_before_any_run(tmp_path):
    # its table comes last: a path that is not there must not cost the runs before it
    missing = tmp_path / "no-floor"
    rc, out, err = bench(["--quick", "--floor", str(missing)], timeout=60)
    assert rc == 2, f"exit {rc}; stderr {err!r}"
    assert f"--floor: {missing}: not found or not executable (build it: make tests/bench/floor)" in err
    assert "latency" not in err, err
    assert out == ""


@NOT_UNDER_SANITIZERS
def test_wasm_bench_fills_its_table(tmp_path):
    """tests/bench/wasm.py, two iterations: every row has numbers, the
    report file is written, nothing is left behind."""
    rc, out, err = pycell_run_quiet(["run", "--backend", "wasm", "-c", "pass"])
    if rc != 0:
        pytest.skip("the wasm backend is not usable here: " + err)
    env = dict(os.environ, PYCELL=PYCELL, PYCELL_DATADIR=DATADIR, PYTHONDONTWRITEBYTECODE="1")
    before = set(children_of(os.getpid()))
    scratch = {d for d in os.listdir("/tmp") if d.startswith("pycell-bench-wasm-")}
    out_file = tmp_path / "wasm.md"
    p = subprocess.run([PY, str(REPO / "tests" / "bench" / "wasm.py"), "--iterations", "2", "--pace", "0.5",
                        "--out", str(out_file)], env=env, capture_output=True, timeout=300)
    check_no_leftovers(before, "wasm.py")
    # the policies of its MCP servers went with them
    assert {d for d in os.listdir("/tmp") if d.startswith("pycell-bench-wasm-")} == scratch
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    rows = [line for line in out_file.read_text().splitlines() if line.startswith("| ") and "---" not in line]
    names = [r.split(" | ")[0][2:] for r in rows[1:]]
    assert names == ["python3", "pycell run (native)", "pycell run --backend wasm", "node + Pyodide, no jail",
                     "pycell mcp, native", "pycell mcp --backend wasm"], rows
    for r in rows[1:]:
        assert re.fullmatch(r"\| .+ \| %s \| %s \| %sx \|" % (NUM, NUM, NUM), r), r


def pycell_run_quiet(args):
    p = subprocess.run([PYCELL, *args], env=dict(os.environ, PYCELL_DATADIR=DATADIR), capture_output=True,
                       timeout=120)
    return p.returncode, p.stdout.decode(), p.stderr.decode().strip()


@NOT_UNDER_SANITIZERS
def test_data_density_over_two_servers():
    """data.py's session table, its sessions spread over two servers and the
    pandas cell in one of them: every session asked opened, a number in
    every cell, the servers' descriptors per session counted."""
    if subprocess.run([PY, "-c", "import numpy, pandas, matplotlib"], capture_output=True).returncode:
        pytest.skip("the data stack is not installed for /usr/bin/python3 (python3-pandas, python3-matplotlib)")
    before = {d for d in os.listdir("/tmp") if d.startswith("pycell-bench-data-")}
    rc, out, err = bench(["--quick", "--phases", "density", "--policies", "default", "--servers", "2",
                          "--pandas-sessions", "1"], script=DATA)
    assert rc == 0, err[-3000:]
    # its scratch directory (the sessions' policies) is gone with it
    assert {d for d in os.listdir("/tmp") if d.startswith("pycell-bench-data-")} == before
    rows = [line for line in out.splitlines() if line.startswith("| default |")]
    assert len(rows) == 1, out
    cells = [c.strip() for c in rows[0].strip().strip("|").split("|")]
    assert len(cells) == 8 and cells[1] == "10", cells
    for c in cells[2:6]:
        assert re.fullmatch(NUM + " MiB", c), cells
    assert re.fullmatch(NUM, cells[6]) and float(cells[6]) >= 7, cells
    assert re.fullmatch(NUM + " s", cells[7]), cells
    assert "stopped at" not in out, out


@NOT_UNDER_SANITIZERS
def test_data_cells_beside_python3_the_floor_and_a_fork():
    """data.py's cells table: per workload, bare python3, the floor, the
    code's first run in a fork (no jail; none for the session's cell, which
    runs in its session's long-lived process), each server's time and ratio,
    and the data policy's time over the fork's."""
    if subprocess.run([PY, "-c", "import numpy, pandas, matplotlib"], capture_output=True).returncode:
        pytest.skip("the data stack is not installed for /usr/bin/python3 (python3-pandas, python3-matplotlib)")
    rc, out, err = bench(["--quick", "--phases", "latency"], script=DATA)
    assert rc == 0, err[-3000:]
    rows = [line for line in out.splitlines() if line.startswith("| a ")]
    assert [r.split("|")[1].strip() for r in rows] == [
        "a pandas groupby (20,000 rows)", "a numpy matmul (200 x 200)",
        "a matplotlib figure as PNG (an image in the result)",
        "a session cell reusing its DataFrame (groupby)"], out
    for row in rows:
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        assert len(cells) == 9, cells
        session = cells[0].startswith("a session")
        for c in cells[1:3] + cells[4:5] + cells[6:7]:
            assert re.fullmatch(NUM + " ms", c) and float(c[:-3]) > 0, cells
        assert re.fullmatch(NUM + "x", cells[5]) and re.fullmatch(NUM + "x", cells[7]), cells
        if session:
            assert cells[3] == "-" and cells[8] == "-", cells
        else:
            assert re.fullmatch(NUM + " ms", cells[3]) and float(cells[3][:-3]) > 0, cells
            assert re.fullmatch(NUM + "x", cells[8]), cells
            # the fork's first run pays what the floor's warm one does not
            assert float(cells[3][:-3]) > float(cells[2][:-3]), cells
            ratio = float(cells[6][:-3]) / float(cells[3][:-3])
            assert abs(float(cells[8][:-1]) - ratio) < 0.01 + 0.01 * ratio, cells


@NOT_UNDER_SANITIZERS
def test_data_cpu_beside_a_fork_and_the_floor():
    """data.py's CPU table: per policy, a warm print's CPU and wall, a fork of
    python3 with the policy's python.preload imported (the data stack's
    costs more than nothing's: its parent holds more), the jail's floor when
    it is built, and the ratios to the floor and to the floor and the fork."""
    if subprocess.run([PY, "-c", "import numpy, pandas, matplotlib"], capture_output=True).returncode:
        pytest.skip("the data stack is not installed for /usr/bin/python3 (python3-pandas, python3-matplotlib)")
    floor = Path(PYCELL).parent / "tests" / "bench" / "floor"
    rc, out, err = bench(["--quick", "--phases", "cpu", "--policies", "default,data"], script=DATA)
    assert rc == 0, err[-3000:]
    rows = {}
    for line in out.splitlines():
        if line.startswith(("| default |", "| data |")):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            rows[cells[0]] = cells
    assert set(rows) == {"default", "data"}, out
    ms = lambda c: float(c[:-3])  # noqa: E731
    for pol, c in rows.items():
        assert len(c) == 7, c
        for cell in c[1:4]:
            assert re.fullmatch(NUM + " ms", cell) and ms(cell) > 0, c
        if floor.exists() and os.geteuid() == 0:
            assert re.fullmatch(NUM + " ms", c[4]), c
            assert re.fullmatch(NUM + "x", c[5]) and re.fullmatch(NUM + "x", c[6]), c
            assert float(c[6][:-1]) < float(c[5][:-1]), c
        else:
            assert c[4:] == ["-", "-", "-"], c
            assert "The jail's floor was not measured: " in out, out
    # numpy, pandas and matplotlib make a parent of some 100 MB to copy
    assert ms(rows["data"][3]) > ms(rows["default"][3]), rows
