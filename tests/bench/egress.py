#!/usr/bin/python3
"""What an egress allowlist costs a run, side by side.

    tests/bench/egress.py [--iterations N] [--tree DIR]     (as root)

In a network namespace of its own (standing in for the host: the runs'
veth pairs are made there, never in the machine's own), alternating every
iteration, it times bare /usr/bin/python3 -c 'print("hello")', `pycell run`
under the default policy (the jail's own loopback) and `pycell run` under
a policy with an egress list (a veth pair, five BPF programs and a DNS
responder made for the run).  Prints p50 and p90, each against python3,
and what egress adds to a run.  DIR is a built source tree (default: this
one).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CODE = 'print("hello")'


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--tree", default=str(Path(__file__).resolve().parents[2]))
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("egress.py: egress runs need root (veth pairs, BPF filters)")
    tree = Path(a.tree)
    tmp = Path(tempfile.mkdtemp(prefix="pycell-bench-egress-"))
    conf, policy = tmp / "pycell.conf", tmp / "egress.json"
    conf.write_text(json.dumps({"network": {"pool": "198.19.0.0/16"}}))
    policy.write_text(json.dumps({"extends": "default", "network": {"egress": ["198.18.0.2:443"]}}))
    ns = subprocess.Popen(["unshare", "-n", "sleep", "infinity"])
    time.sleep(0.1)
    enter = ["nsenter", f"--net=/proc/{ns.pid}/ns/net"]
    env = dict(os.environ, PYCELL_DATADIR=str(tree))
    runners = {
        "python3": enter + ["/usr/bin/python3", "-c", CODE],
        "pycell run (loopback)": enter + [str(tree / "pycell"), "run", "--config", str(conf), "-c", CODE],
        "pycell run (egress)": enter + [str(tree / "pycell"), "run", "--config", str(conf), "--policy", str(policy),
                                        "-c", CODE],
    }
    times = {k: [] for k in runners}
    try:
        subprocess.run(enter + ["ip", "link", "set", "lo", "up"], check=True)
        for i in range(a.iterations + 3):
            order = list(runners.items())
            order = order[i % 3:] + order[:i % 3]
            for name, argv in order:
                t0 = time.perf_counter()
                p = subprocess.run(argv, capture_output=True, env=env)
                dt = time.perf_counter() - t0
                if p.returncode != 0 or p.stdout != b"hello\n":
                    sys.exit(f"egress.py: {name} failed: {p.returncode} {p.stdout[:200]!r} {p.stderr[-500:]!r}")
                if i >= 3:   # the first rounds warm the caches
                    times[name].append(dt)
    finally:
        ns.kill()
        ns.wait()
        for f in (conf, policy):
            f.unlink()
        tmp.rmdir()
    base = statistics.median(times["python3"])
    print(f"{a.iterations} iterations, alternating; load average {os.getloadavg()[0]:.2f}")
    for name, t in times.items():
        p50, p90 = statistics.median(t), sorted(t)[int(len(t) * 0.9) - 1]
        print(f"{name:24s} p50 {p50 * 1000:6.1f} ms  p90 {p90 * 1000:6.1f} ms  {p50 / base:5.2f}x python3")
    added = statistics.median(times["pycell run (egress)"]) - statistics.median(times["pycell run (loopback)"])
    print(f"egress adds {added * 1000:.1f} ms a run (p50 against p50)")


if __name__ == "__main__":
    main()
