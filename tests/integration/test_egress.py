"""Network egress by allowlist: `"network": {"egress": [...]}`.

The tests build their own small internet and touch nothing of the
machine's: a network namespace that stands in for the host (pycell runs
inside it: its veth pairs, addresses and routes are made there), and a
second one that plays the internet, joined by a veth, with addresses only
in 198.18.0.0/15 (the benchmarking range):

    host ns  vh 198.18.0.1/24, forwarding on; servers on 0.0.0.0:9090 and
             127.0.0.1:9091 (the host's own services)
    inet ns  vi 198.18.0.2/24 and 198.18.0.3/24 and 169.254.169.254/32;
             an HTTP server on 0.0.0.0:8080 (its body names the address it
             was reached at) and one on 8081
    pool     198.19.0.0/16: each egress run takes a /30 of it
    names    pycell.conf's network.hosts: index.test -> .2, other.test -> .3,
             multi.test -> .2 and .3

Every refused destination is asserted with its exact errno (EPERM: the
BPF filters' answer) and the result's counts are exact.
"""

import errno
import json
import os
import shutil
import signal
import subprocess
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from test_faults import needs_faults
from conftest import (DATADIR, EXIT_SETUP_FAILED, HOST_IS_ROOT, PYCELL, check_no_leftovers,
                      children_of, parse_result, reap_orphans)

pytestmark = pytest.mark.skipif(not HOST_IS_ROOT, reason="egress needs root: veth pairs, BPF "
                                "filters and the test's own network namespaces")

SERVER = r"""
import http.server, socketserver, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        a = self.connection.getsockname()
        body = f"{a[0]}:{a[1]}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
socketserver.TCPServer.allow_reuse_address = True
http.server.ThreadingHTTPServer((sys.argv[1], int(sys.argv[2])), H).serve_forever()
"""

CONF = {"network": {"pool": "198.19.0.0/16",
                    "hosts": {"index.test": "198.18.0.2", "other.test": "198.18.0.3",
                              "multi.test": ["198.18.0.2", "198.18.0.3"]}}}


class Net:
    def __init__(self, tmp):
        self.tmp = tmp
        self.procs = []
        self.host = self.spawn(["unshare", "-n", "sleep", "infinity"])
        self.inet = self.spawn(["unshare", "-n", "sleep", "infinity"])
        time.sleep(0.1)
        self.sh(self.host, f"ip link set lo up && ip link add vh type veth peer name vi netns {self.inet.pid} "
                           "&& ip addr add 198.18.0.1/24 dev vh && ip link set vh up "
                           "&& ip route add 169.254.169.254/32 via 198.18.0.2 "
                           "&& sysctl -qw net.ipv4.ip_forward=1")
        self.sh(self.inet, "ip link set lo up && ip addr add 198.18.0.2/24 dev vi "
                           "&& ip addr add 198.18.0.3/24 dev vi && ip addr add 169.254.169.254/32 dev vi "
                           "&& ip link set vi up && ip route add default via 198.18.0.1")
        server = tmp / "server.py"
        server.write_text(SERVER)
        for ns, addr, port in ((self.inet, "0.0.0.0", 8080), (self.inet, "0.0.0.0", 8081),
                               (self.host, "0.0.0.0", 9090), (self.host, "127.0.0.1", 9091)):
            self.spawn(self.enter(ns) + ["/usr/bin/python3", str(server), addr, str(port)])
        self.conf = tmp / "pycell.conf"
        self.conf.write_text(json.dumps(CONF))
        deadline = time.monotonic() + 10
        while self.sh(self.inet, "ss -ltn | grep -q ':8081 '", check=False).returncode != 0 or \
                self.sh(self.host, "ss -ltn | grep -q ':9091 '", check=False).returncode != 0:
            assert time.monotonic() < deadline, "the test's servers did not start"
            time.sleep(0.05)

    def spawn(self, argv):
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
        self.procs.append(p)
        return p

    @staticmethod
    def enter(ns):
        return ["nsenter", f"--net=/proc/{ns.pid}/ns/net"]

    def sh(self, ns, cmd, check=True):
        return subprocess.run(self.enter(ns) + ["sh", "-c", cmd], check=check, capture_output=True, text=True)

    def host_links(self, settle=10.0):
        """The host namespace's interfaces, once no run's pair is left: a
        pair goes with its jail's network namespace, which the kernel
        tears down after the jail (asynchronously)."""
        deadline = time.monotonic() + settle
        while True:
            out = self.sh(self.host, "ip -o link show").stdout
            links = sorted(line.split(":")[1].strip().split("@")[0] for line in out.splitlines())
            if not any(name.startswith("pcn") for name in links) or time.monotonic() > deadline:
                return links
            time.sleep(0.05)

    def pycell(self, args, input=None, timeout=60, user=None):
        argv = self.enter(self.host)
        if user is not None:
            argv += ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups"]
        argv += [PYCELL, *args]
        env = dict(os.environ, PYCELL_DATADIR=DATADIR)
        before = set(children_of(os.getpid()))
        p = subprocess.run(argv, input=input, capture_output=True, timeout=timeout, env=env)
        check_no_leftovers(before, f"pycell {args!r}")
        return p

    def close(self):
        for p in reversed(self.procs):
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()


def net_fixture(prefix, setup=None):
    """The test's small internet, for a module: Net in a fresh directory,
    with setup(net) run on it; all of it gone afterwards."""
    if not shutil.which("ip") or not shutil.which("nsenter"):
        pytest.skip("needs iproute2's ip and util-linux's nsenter")
    tmp = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    tmp.chmod(0o755)
    n = Net(tmp)
    try:
        if setup:
            setup(n)
        yield n
    finally:
        n.close()
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def net():
    yield from net_fixture("pycell-egress-")


@pytest.fixture
def egress_policy(net):
    def write(dests, name="egress", **extra):
        path = net.tmp / f"{name}.json"
        path.write_text(json.dumps({"extends": "default", "network": {"egress": dests}, **extra}))
        path.chmod(0o644)
        return str(path)
    return write


def run(net, policy, code, *opts, user=None):
    args = ["run", "--json", "--config", str(net.conf), "--policy", policy, *opts, "-c", code]
    p = net.pycell(args, user=user)
    return parse_result(p.returncode, p.stdout, p.stderr, args)


# The jail's side: try each destination, print what happened, one per line.
PROBE = textwrap.dedent(r"""
    import errno, socket, urllib.request
    def gw():
        return open("/etc/resolv.conf").read().split()[1]
    def tcp(host, port):
        s = socket.socket()
        s.settimeout(5)
        try:
            s.connect((host, port))
            return "connected"
        except OSError as e:
            return errno.errorcode[e.errno]
        finally:
            s.close()
    def get(url):
        try:
            return urllib.request.urlopen(url, timeout=5).read().decode()
        except OSError as e:
            return f"{type(e).__name__}: {getattr(e, 'reason', e)}"
    def name(n):
        try:
            return socket.gethostbyname(n)
        except OSError as e:
            return type(e).__name__
""")


def lines(res):
    assert res["status"] == "ok", res
    return res["stdout"].splitlines()


def test_a_listed_name_is_reached_and_nothing_else(net, egress_policy):
    res = run(net, egress_policy(["index.test:8080"]), PROBE + textwrap.dedent("""
        print(get("http://index.test:8080/"))
        print(tcp("198.18.0.2", 8081))   # the listed host, another port
        print(tcp("198.18.0.3", 8080))   # another host, the listed port
        print(tcp("169.254.169.254", 8080))
        print(tcp(gw(), 9090))           # the host, through the jail's gateway
        print(tcp("198.18.0.1", 9090))   # the host's own address
        print(tcp("127.0.0.1", 9091))    # the jail's own loopback, not the host's
        print(name("other.test"))
    """))
    assert lines(res) == ["198.18.0.2:8080", "EPERM", "EPERM", "EPERM", "EPERM", "EPERM", "ECONNREFUSED",
                          "gaierror"]
    assert res["network"] == {"refused_connections": 5, "refused_dns_queries": 1}
    assert res.rc == 0


def test_udp_fast_open_ipv6_raw_and_icmp_are_refused(net, egress_policy):
    res = run(net, egress_policy(["index.test:8080"]), PROBE + textwrap.dedent(r"""
        def attempt(fn):
            try:
                fn()
                return "ok"
            except OSError as e:
                return errno.errorcode[e.errno]
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        print(attempt(lambda: u.sendto(b"x", ("198.18.0.3", 53))))
        print(attempt(lambda: u.connect(("198.18.0.3", 53))))
        print(attempt(lambda: u.sendto(b"x", ("198.18.0.2", 8080))))   # the listed port, but by UDP: any protocol
        t = socket.socket()
        print(attempt(lambda: t.sendto(b"GET / HTTP/1.0\r\n\r\n", socket.MSG_FASTOPEN, ("198.18.0.3", 8080))))
        s6 = socket.socket(socket.AF_INET6)
        print(attempt(lambda: s6.connect(("::ffff:198.18.0.2", 8080))))
        print(attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)))
        print(attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP)))
        print(attempt(lambda: socket.create_connection((gw(), 53), timeout=3)))   # DNS to the gateway: UDP only
        # protocols the address hooks do not see (UDP-Lite's connect passed
        # them, and its datagrams went out unchecked): refused at creation
        print(attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM, 136)))    # UDP-Lite
        print(attempt(lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM, 136)))
        print(attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)))   # MPTCP
    """))
    # UDP to the listed host and port is allowed: a destination is an
    # address and a port, for TCP and UDP alike
    assert lines(res) == ["EPERM", "EPERM", "ok", "EPERM", "EPERM", "EPERM", "EACCES", "EPERM",
                          "EPERM", "EPERM", "EPERM"]
    # counted: the datagram, fast open, the IPv6 connect and TCP to the
    # gateway's port 53; a UDP connect() sends nothing and is not counted
    assert res["network"] == {"refused_connections": 4, "refused_dns_queries": 0}


def test_a_cidr_with_any_port_and_what_it_never_covers(net, egress_policy):
    res = run(net, egress_policy(["0.0.0.0/0:8080", "198.18.0.2:*"]), PROBE + textwrap.dedent("""
        print(get("http://198.18.0.3:8080/"))
        print(get("http://198.18.0.2:8081/"))
        print(tcp("169.254.169.254", 8080))   # link-local: only when listed literally
        print(tcp(gw(), 8080))                # the pool: never
        print(tcp("198.18.0.3", 8081))
    """))
    assert lines(res) == ["198.18.0.3:8080", "198.18.0.2:8081", "EPERM", "EPERM", "EPERM"]
    assert res["network"]["refused_connections"] == 3


def test_the_metadata_address_when_listed_literally(net, egress_policy):
    res = run(net, egress_policy(["169.254.169.254:8080"]), PROBE + textwrap.dedent("""
        print(get("http://169.254.169.254:8080/"))
        print(tcp("169.254.169.254", 8081))
    """))
    assert lines(res) == ["169.254.169.254:8080", "EPERM"]


def test_the_responder_answers_only_the_listed_names(net, egress_policy):
    res = run(net, egress_policy(["multi.test:8080", "Index.Test:8081"]), PROBE + textwrap.dedent(r"""
        import struct
        def q(qname, qtype, raw=None):
            body = raw if raw is not None else b"".join(bytes([len(l)]) + l.encode() for l in qname.split("."))
            m = struct.pack(">HHHHHH", 0x4242, 0x0100, 1, 0, 0, 0) + body + b"\0" + struct.pack(">HH", qtype, 1)
            u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            u.settimeout(3)
            u.sendto(m, (gw(), 53))
            r = u.recv(600)
            n = struct.unpack(">H", r[6:8])[0]
            addrs = [socket.inet_ntoa(r[i + 12:i + 16]) for i in range(len(m), len(r), 16)]
            return f"id={struct.unpack('>H', r[:2])[0]:#x} rcode={r[3] & 15} an={n} {sorted(addrs)}"
        print(q("multi.test", 1))
        print(q("MULTI.test", 1))
        print(q("index.test", 1))
        print(q("multi.test", 28))            # AAAA: the name exists, no IPv6 address
        print(q("multi.test", 16))            # TXT: no data
        print(q("other.test", 1))             # in network.hosts, not in the policy
        print(q("secret.exfil.example", 16))
        print(q("x" * 63 + ".exfil.example", 1))
        print(q("", 1, raw=b"\x0amulti.test"))   # one label holding a dot
        print(sorted(socket.gethostbyname_ex("multi.test")[2]))
    """))
    assert lines(res) == [
        "id=0x4242 rcode=0 an=2 ['198.18.0.2', '198.18.0.3']",
        "id=0x4242 rcode=0 an=2 ['198.18.0.2', '198.18.0.3']",
        "id=0x4242 rcode=0 an=1 ['198.18.0.2']",
        "id=0x4242 rcode=0 an=0 []",
        "id=0x4242 rcode=0 an=0 []",
        "id=0x4242 rcode=3 an=0 []",
        "id=0x4242 rcode=3 an=0 []",
        "id=0x4242 rcode=3 an=0 []",
        "id=0x4242 rcode=3 an=0 []",
        "['198.18.0.2', '198.18.0.3']",
    ]
    assert res["network"] == {"refused_connections": 0, "refused_dns_queries": 4}


def test_runs_leave_no_veth_and_reuse_nothing(net, egress_policy):
    policy = egress_policy(["index.test:8080"])
    gateways = set()
    for _ in range(4):
        res = run(net, policy, "print(open('/etc/resolv.conf').read().split()[1])")
        gateways.add(res["stdout"].strip())
        assert res["network"] == {"refused_connections": 0, "refused_dns_queries": 0}
    assert len(gateways) == 4, gateways   # each run its own /30
    for g in gateways:
        assert g.startswith("198.19."), g
    assert net.host_links() == ["lo", "vh"]


def test_refused_policies_say_why(net, egress_policy):
    res = run(net, egress_policy(["198.19.7.0/24:80"]), "print(1)")
    assert (res["status"], res.rc) == ("setup_failed", EXIT_SETUP_FAILED)
    assert res["setup_error"]["step"] == "egress"
    assert res["setup_error"]["message"] == ('egress destination "198.19.7.0/24:80" is inside the pool of the '
                                             "egress runs' own addresses (network.pool 198.19.0.0/16 in "
                                             "pycell.conf), which no run may reach")
    res = run(net, egress_policy(["nosuch.invalid:80"]), "print(1)")
    assert res["status"] == "setup_failed"
    assert res["setup_error"]["message"].startswith('egress destination "nosuch.invalid" does not resolve: ')
    assert net.host_links() == ["lo", "vh"]


def test_without_privilege_an_egress_policy_is_refused_never_widened(net, egress_policy):
    """As any uid but root, runs get no cgroup v2 directory of their own
    here (none is delegated), which is where the filters would attach:
    the policy is refused when it is loaded, and nothing runs."""
    policy = egress_policy(["index.test:8080"])
    p = net.pycell(["run", "--json", "--config", str(net.conf), "--policy", policy, "-c", "print(1)"], user=65534)
    assert (p.returncode, p.stdout) == (EXIT_SETUP_FAILED, b"")
    assert p.stderr.decode().startswith(
        "pycell run: egress: policy egress: an egress network needs a cgroup v2 directory for each run, where "
        "its BPF filters attach; this host gives runs none ("), p.stderr
    p = net.pycell(["policy-test", "--config", str(net.conf), "--policy", policy], user=65534)
    assert (p.returncode, p.stdout) == (EXIT_SETUP_FAILED, b"")
    assert b"an egress network needs a cgroup v2 directory" in p.stderr


def test_bad_egress_lists_are_refused_at_load(net, egress_policy):
    for dests, msg in (
            ([], "network.egress: empty: give at least one destination, or use \"none\""),
            (["index.test"], 'network.egress[0]: "index.test": no port: write HOST:PORT, or HOST:* for any port'),
            (["[::1]:80"], 'network.egress[0]: "[::1]:80": IPv6 destinations are not supported'),
            (["10.0.0.1/8:80"], 'network.egress[0]: "10.0.0.1/8:80": the address has bits set past its prefix'),
            (["1.2.3.256:80"], 'network.egress[0]: "1.2.3.256:80": not an IPv4 address'),
            (["a..b:80"], 'network.egress[0]: "a..b:80": not a host name'),
            (["x.test:0"], 'network.egress[0]: "x.test:0": the port is not a number from 1 to 65535'),
            (["x.test:80", "x.test:80"], 'network.egress[1]: "x.test:80" is listed twice')):
        res = net.pycell(["run", "--config", str(net.conf), "--policy", egress_policy(dests), "-c", "1"])
        assert res.returncode == 2, (dests, res.stderr)
        assert msg in res.stderr.decode(), (dests, res.stderr)


def test_mcp_server_runs_egress_cold_and_reports_the_counts(net, egress_policy):
    policy = egress_policy(["index.test:8080"])
    msgs = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "run_python", "arguments": {"code": PROBE + "print(get('http://index.test:8080/'))\n"
                                                                        "print(tcp('198.18.0.3', 8080))"}}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "sandbox_info", "arguments": {}}},
    ]
    argv = net.enter(net.host) + [PYCELL, "mcp", "--config", str(net.conf), "--policy", policy]
    before = set(children_of(os.getpid()))
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=dict(os.environ, PYCELL_DATADIR=DATADIR))
    out = {}
    try:
        for m in msgs:
            p.stdin.write(json.dumps(m).encode() + b"\n")
            p.stdin.flush()
            while "id" in m and m["id"] not in out:
                line = p.stdout.readline()
                assert line, p.stderr.read()
                reply = json.loads(line)
                if "id" in reply:
                    out[reply["id"]] = reply
    finally:
        p.stdin.close()
        stderr = p.stderr.read()
        assert p.wait(timeout=30) == 0, stderr
    check_no_leftovers(before, "pycell mcp")
    sc = out[2]["result"]["structuredContent"]
    assert (sc["status"], sc["stdout"]) == ("ok", "198.18.0.2:8080\nEPERM\n")
    assert sc["network"] == {"refused_connections": 1, "refused_dns_queries": 0}
    assert b"runs of an egress policy start cold" in stderr
    info = out[3]["result"]["structuredContent"]
    assert info["network"] == {"egress": ["index.test:8080"]}


def test_policy_test_holds_an_egress_policy(net, egress_policy):
    p = net.pycell(["policy-test", "--config", str(net.conf), "--policy", egress_policy(["index.test:8080"]),
                    "--only", "network", "--format", "json"])
    doc = json.loads(p.stdout)
    got = {f'{x["category"]}/{x["name"]}': x["status"] for x in doc["probes"]}
    for name in ("egress-unlisted-tcp", "egress-unlisted-udp", "egress-ipv6", "egress-metadata",
                 "egress-gateway", "egress-dns", "egress-raw-icmp", "interfaces"):
        assert got[f"network/{name}"] == "contained", (name, doc)
    assert p.returncode == 0, p.stderr


@needs_faults
def test_policy_test_fails_when_the_filters_are_left_out(net, egress_policy):
    """A deliberately weakened jail (the egress_bpf fault site attaches no
    filter): the probes must catch it."""
    argv = ["policy-test", "--config", str(net.conf), "--policy", egress_policy(["index.test:8080"]),
            "--only", "network", "--format", "json"]
    env_argv = net.enter(net.host) + ["env", "PYCELL_FAULT=egress_bpf", f"PYCELL_DATADIR={DATADIR}", PYCELL, *argv]
    before = set(children_of(os.getpid()))
    p = subprocess.run(env_argv, capture_output=True, timeout=120)
    reap_orphans(before)
    doc = json.loads(p.stdout)
    got = {x["name"]: x["status"] for x in doc["probes"]}
    assert p.returncode == 1, p.stderr
    for name in ("egress-unlisted-tcp", "egress-unlisted-udp", "egress-ipv6", "egress-metadata", "egress-gateway"):
        assert got[name] == "escaped", (name, doc)


def test_the_audit_log_counts_what_was_refused(net, egress_policy):
    log = net.tmp / "audit.jsonl"
    conf = net.tmp / "audit.conf"
    conf.write_text(json.dumps({**CONF, "audit_log": str(log)}))
    args = ["run", "--json", "--config", str(conf), "--policy", egress_policy(["index.test:8080"]),
            "-c", PROBE + "print(tcp('198.18.0.3', 8080), name('evil.test'))"]
    p = net.pycell(args)
    res = parse_result(p.returncode, p.stdout, p.stderr, args)
    assert res["stdout"] == "EPERM gaierror\n"
    recs = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["event"] for r in recs] == ["run"]
    assert recs[0]["network"] == {"refused_connections": 1, "refused_dns_queries": 1}
    assert recs[0]["network"] == res["network"]


@needs_faults
def test_a_veth_that_cannot_be_made_fails_the_run_alone(net, egress_policy):
    argv = net.enter(net.host) + ["env", "PYCELL_FAULT=veth", f"PYCELL_DATADIR={DATADIR}", PYCELL, "run", "--json",
                                  "--config", str(net.conf), "--policy", egress_policy(["index.test:8080"]),
                                  "-c", "print(1)"]
    before = set(children_of(os.getpid()))
    p = subprocess.run(argv, capture_output=True, timeout=60)
    check_no_leftovers(before, "pycell run")
    res = parse_result(p.returncode, p.stdout, p.stderr, argv)
    assert (res["status"], res.rc) == ("setup_failed", EXIT_SETUP_FAILED)
    assert res["setup_error"] == {"step": "net", "errno": errno.EPERM, "errno_name": "EPERM",
                                  "message": "create a veth pair: Operation not permitted (injected fault)"}
    assert net.host_links() == ["lo", "vh"]


def test_a_session_keeps_its_network_and_counts_per_cell(net, egress_policy):
    policy = egress_policy(["index.test:8080"], name="sessions", sessions={"max": 2})
    argv = net.enter(net.host) + [PYCELL, "mcp", "--config", str(net.conf), "--policy", policy]
    before = set(children_of(os.getpid()))
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         env=dict(os.environ, PYCELL_DATADIR=DATADIR))

    def call(i, method, params=None):
        p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params or {}}).encode() + b"\n")
        p.stdin.flush()
        while True:
            line = p.stdout.readline()
            assert line, "the server ended"
            m = json.loads(line)
            if m.get("id") == i:
                return m["result"]
    try:
        call(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                               "clientInfo": {"name": "t", "version": "1"}})
        sid = call(2, "tools/call", {"name": "session_open", "arguments": {}})["structuredContent"]["session_id"]
        cells = [PROBE + "body = get('http://index.test:8080/')\nprint(body, tcp('198.18.0.3', 8080), name('x.test'))",
                 "print(body, tcp('198.18.0.2', 8080))"]
        got = [call(3 + i, "tools/call", {"name": "run_python", "arguments": {"code": c, "session_id": sid}})
               ["structuredContent"] for i, c in enumerate(cells)]
    finally:
        p.stdin.close()
        assert p.wait(timeout=30) == 0
    check_no_leftovers(before, "pycell mcp")
    assert [(g["status"], g["stdout"]) for g in got] == [("ok", "198.18.0.2:8080 EPERM gaierror\n"),
                                                         ("ok", "198.18.0.2:8080 connected\n")]
    assert [g["network"] for g in got] == [{"refused_connections": 1, "refused_dns_queries": 1},
                                           {"refused_connections": 0, "refused_dns_queries": 0}]
    assert net.host_links() == ["lo", "vh"]
