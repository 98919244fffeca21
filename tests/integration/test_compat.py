"""Python as people run it: ordinary standard-library programs behave the
same inside a jail of the default policy as under bare python3 on the host
(SECURITY.md, "What a jail changes for ordinary Python").

Each snippet prints what it observed, deterministically; the test runs it
with the jail's interpreter outside (a fresh directory as cwd, HOME and
TMPDIR, the jail's environment) and with `pycell run`, cold and warm, and
compares stdout and the exit status byte for byte.  DIFFERENCES lists what
differs by design, with the jail's answer asserted exactly."""

import os
import subprocess
import sys
import tempfile
import textwrap

import pytest

from conftest import RUN_FLAGS, pycell_run

PYTHON = "/usr/bin/python3"

SNIPPETS = {
    # ---------------------------------------------------------------- network
    "http-server-and-client": """
        import http.server, threading, urllib.request
        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                body = b"hello " + self.path.encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            def log_message(self, *a):
                pass
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        with urllib.request.urlopen(f"http://127.0.0.1:{srv.server_port}/x", timeout=5) as r:
            print(r.status, r.read())
        srv.shutdown()
    """,
    "asyncio-tcp-streams": """
        import asyncio
        async def main():
            async def echo(r, w):
                w.write((await r.readline()).upper())
                await w.drain()
                w.close()
            srv = await asyncio.start_server(echo, "127.0.0.1", 0)
            port = srv.sockets[0].getsockname()[1]
            r, w = await asyncio.open_connection("127.0.0.1", port)
            w.write(b"ping\\n")
            print(await r.readline())
            w.close()
            srv.close()
            await srv.wait_closed()
        asyncio.run(main())
    """,
    "ipv6-loopback": """
        import socket
        s = socket.create_server(("::1", 0), family=socket.AF_INET6)
        c = socket.create_connection(("::1", s.getsockname()[1]))
        a, _ = s.accept()
        c.sendall(b"six")
        print(a.recv(3))
    """,
    "udp-loopback": """
        import socket
        a = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        a.bind(("127.0.0.1", 0))
        b = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        b.sendto(b"datagram", a.getsockname())
        print(a.recvfrom(64)[0])
    """,
    "localhost-resolves": """
        import socket
        addrs = {ai[4][0] for ai in socket.getaddrinfo("localhost", 80, proto=socket.IPPROTO_TCP)}
        print("127.0.0.1" in addrs)
    """,
    "logging-socket-handler": """
        import logging, logging.handlers, pickle, socket, struct
        srv = socket.create_server(("127.0.0.1", 0))
        log = logging.getLogger("compat")
        log.addHandler(logging.handlers.SocketHandler("127.0.0.1", srv.getsockname()[1]))
        log.warning("over tcp %d", 42)
        conn, _ = srv.accept()
        n = struct.unpack(">L", conn.recv(4))[0]
        data = b""
        while len(data) < n:
            data += conn.recv(n - len(data))
        print(pickle.loads(data)["msg"])
    """,
    "xmlrpc-round-trip": """
        import threading, xmlrpc.client, xmlrpc.server
        srv = xmlrpc.server.SimpleXMLRPCServer(("127.0.0.1", 0), logRequests=False)
        srv.register_function(lambda a, b: a + b, "add")
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        print(xmlrpc.client.ServerProxy(f"http://127.0.0.1:{srv.server_address[1]}").add(2, 3))
        srv.shutdown()
    """,
    "smtplib-local-server": """
        import smtplib, socketserver, threading
        got = []
        class H(socketserver.StreamRequestHandler):
            def handle(self):
                self.wfile.write(b"220 local\\r\\n")
                while line := self.rfile.readline():
                    cmd = line.strip().upper()
                    if cmd == b"DATA":
                        self.wfile.write(b"354 go\\r\\n")
                        body = b""
                        while (l := self.rfile.readline()) != b".\\r\\n":
                            body += l
                        got.append(body)
                        self.wfile.write(b"250 ok\\r\\n")
                    elif cmd == b"QUIT":
                        self.wfile.write(b"221 bye\\r\\n")
                        return
                    else:
                        self.wfile.write(b"250 ok\\r\\n")
        srv = socketserver.TCPServer(("127.0.0.1", 0), H)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        with smtplib.SMTP("127.0.0.1", srv.server_address[1], timeout=5) as s:
            s.sendmail("a@example.org", ["b@example.org"], "Subject: hi\\r\\n\\r\\nbody")
        print(got[0].splitlines()[-1])
        srv.shutdown()
    """,
    "multiprocessing-tcp-manager": """
        from multiprocessing.managers import BaseManager
        class M(BaseManager):
            pass
        M.register("get", callable=lambda: {"answer": 42})
        if __name__ == "__main__":
            m = M(address=("127.0.0.1", 0), authkey=b"k")
            m.start()
            c = M(address=m.address, authkey=b"k")
            c.connect()
            print(c.get().get("answer"))
            m.shutdown()
    """,
    "unix-socket-in-tmp": """
        import os, socket, tempfile
        path = os.path.join(tempfile.mkdtemp(), "s")
        srv = socket.socket(socket.AF_UNIX)
        srv.bind(path)
        srv.listen()
        c = socket.socket(socket.AF_UNIX)
        c.connect(path)
        a, _ = srv.accept()
        c.sendall(b"unix")
        print(a.recv(4))
    """,
    # -------------------------------------------------------------- terminals
    "pty-fork": """
        import os, pty
        pid, fd = pty.fork()
        if pid == 0:
            print("child on a tty:", os.isatty(0), os.isatty(1), flush=True)
            os._exit(3)
        out = b""
        while True:
            try:
                chunk = os.read(fd, 1024)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        print(out, os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
    """,
    "openpty-termios": """
        import os, termios, tty
        m, s = os.openpty()
        tty.setraw(s)
        attrs = termios.tcgetattr(s)
        os.write(s, b"raw\\n")
        print(os.read(m, 16), bool(attrs[3] & termios.ECHO), os.ttyname(s).startswith("/dev/pts/"))
    """,
    "asyncio-pty-pipe": """
        import asyncio, os
        async def main():
            m, s = os.openpty()
            loop = asyncio.get_running_loop()
            r = asyncio.StreamReader()
            await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(r), os.fdopen(m, "rb", 0))
            os.write(s, b"through the pty\\n")
            print(await r.readline())
        asyncio.run(main())
    """,
    "subprocess-on-a-pty": """
        import os, pty, subprocess
        m, s = pty.openpty()
        p = subprocess.run(["/bin/sh", "-c", "test -t 0 && echo interactive"], stdin=s,
                           capture_output=True)
        print(p.stdout, p.returncode)
    """,
    "readline-imports": """
        import readline, rlcompleter
        readline.parse_and_bind("tab: complete")
        print(readline.get_completer_delims() != "")
    """,
    # ---------------------------------------------------------- Debian's site
    "sitecustomize": """
        import sitecustomize, importlib.util
        print(sitecustomize.__name__, importlib.util.find_spec("sitecustomize").origin)
    """,
    # every package of the standard library imported, as pydoc's scanner
    # does (not the site's: importing all of matplotlib, pandas and the
    # rest tests the memory limit, not the jail)
    "stdlib-walk": """
        import pkgutil, sys, sysconfig
        names = {m.name for m in pkgutil.iter_modules()}
        print({"json", "sqlite3", "sitecustomize"} <= names)
        for m in pkgutil.walk_packages([sysconfig.get_paths()["stdlib"]], onerror=lambda name: None):
            pass
        print("scanned")
    """,
    # ------------------------------------------------------------- files, fs
    "sparse-file-200MiB-in-tmp": """
        import os, resource, tempfile
        path = os.path.join(tempfile.gettempdir(), "sparse")
        with open(path, "wb") as f:
            f.seek(200 << 20)
            f.write(b"x")
        print(os.stat(path).st_size, resource.getrlimit(resource.RLIMIT_FSIZE))
        os.unlink(path)
    """,
    "sqlite3-in-workspace": """
        import sqlite3
        db = sqlite3.connect("data.db")
        db.execute("create table t (k text, v integer)")
        db.executemany("insert into t values (?, ?)", [("a", 1), ("b", 2), ("a", 3)])
        db.commit()
        print(db.execute("select k, sum(v) from t group by k order by k").fetchall())
    """,
    "flock-and-mmap": """
        import fcntl, mmap
        with open("f.bin", "w+b") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            f.write(b"\\0" * 4096)
            f.flush()
            m = mmap.mmap(f.fileno(), 4096)
            m[:5] = b"mmap!"
            m.flush()
            fcntl.flock(f, fcntl.LOCK_UN)
        print(open("f.bin", "rb").read(5))
    """,
    "tempfile-shutil": """
        import os, shutil, tempfile
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(os.path.join(d, "a/b"))
            open(os.path.join(d, "a/b/c.txt"), "w").write("c")
            shutil.copytree(os.path.join(d, "a"), os.path.join(d, "z"))
            print(sorted(os.path.relpath(os.path.join(r, f), d) for r, _, fs in os.walk(d) for f in fs))
            print(shutil.make_archive(os.path.join(d, "arc"), "zip", d, "a").endswith(".zip"))
    """,
    # ---------------------------------------------------------- processes
    "subprocess-pipeline": """
        import subprocess
        p1 = subprocess.Popen(["printf", "b\\\\na\\\\nb\\\\n"], stdout=subprocess.PIPE)
        p2 = subprocess.Popen(["sort"], stdin=p1.stdout, stdout=subprocess.PIPE)
        p3 = subprocess.Popen(["uniq", "-c"], stdin=p2.stdout, stdout=subprocess.PIPE)
        p1.stdout.close()
        p2.stdout.close()
        print(p3.communicate()[0].split())
    """,
    "shell-features": """
        import subprocess
        print(subprocess.run("x=$((6*7)); echo $x | tr 4 f", shell=True, capture_output=True).stdout)
    """,
    "multiprocessing-pool": """
        import multiprocessing as mp
        if __name__ == "__main__":
            with mp.Pool(2) as p:
                print(p.map(abs, [-1, -2, 3]))
            q = mp.Queue()
            pr = mp.Process(target=q.put, args=("via a queue",))
            pr.start()
            print(q.get(timeout=10))
            pr.join()
    """,
    "process-pool-executor": """
        from concurrent.futures import ProcessPoolExecutor
        if __name__ == "__main__":
            with ProcessPoolExecutor(2) as ex:
                print(sorted(ex.map(pow, [2, 3], [10, 2])))
    """,
    "fork-signal-alarm": """
        import os, signal, time
        pid = os.fork()
        if pid == 0:
            os._exit(7)
        print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
        fired = []
        signal.signal(signal.SIGALRM, lambda *a: fired.append(1))
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        time.sleep(0.5)
        print(fired)
    """,
    "threads-and-queue": """
        import queue, threading
        q = queue.Queue()
        ts = [threading.Thread(target=lambda i=i: q.put(i * i)) for i in range(8)]
        for t in ts: t.start()
        for t in ts: t.join()
        print(sorted(q.get() for _ in range(8)))
    """,
    # ------------------------------------------------- locale, time, misc
    "locale-and-encoding": """
        import locale, sys
        print(locale.setlocale(locale.LC_ALL, "C.UTF-8"), sys.getfilesystemencoding(),
              locale.getpreferredencoding(False), "é".encode())
    """,
    "time-zones": """
        import datetime, zoneinfo
        t = datetime.datetime(2026, 7, 1, 12, tzinfo=zoneinfo.ZoneInfo("Europe/Paris"))
        print(t.utcoffset(), t.astimezone(zoneinfo.ZoneInfo("America/New_York")).isoformat())
    """,
    "ssl-default-context": """
        import ssl
        ctx = ssl.create_default_context()
        print(ctx.verify_mode == ssl.CERT_REQUIRED, ssl.OPENSSL_VERSION.split()[0])
    """,
    "compression-and-hashes": """
        import bz2, hashlib, lzma, zlib
        d = b"pycell " * 1000
        print(all(m.decompress(m.compress(d)) == d for m in (bz2, lzma, zlib)),
              hashlib.sha256(d).hexdigest()[:16])
    """,
    "ctypes-libc": """
        import ctypes, ctypes.util
        print(ctypes.CDLL(ctypes.util.find_library("c")).abs(-5))
    """,
    "numpy": """
        import numpy as np
        print(np.arange(6).reshape(2, 3).sum(axis=0).tolist(), float(np.linalg.det(np.eye(3) * 2)))
    """,
}

# What differs by design: the jail's answer, asserted exactly, and why
# (SECURITY.md lists the same).
DIFFERENCES = {
    "user-name": ("import getpass; print(getpass.getuser())", "pycell\n",
                  "the jail runs as its own user (policy identity.uid), named pycell"),
    "open-files-limit": ("import resource; print(resource.getrlimit(resource.RLIMIT_NOFILE))",
                         "(256, 256)\n", "the policy's limits.open_files (RLIMIT_NOFILE)"),
    "hostname": ("import socket; print(socket.gethostname())", "pycell\n",
                 "the jail has its own UTS namespace (policy identity.hostname)"),
}

START = [pytest.param((), id="cold"), pytest.param(("--warm",), id="warm")]


def outside(code, tmp_path):
    """The snippet under the jail's interpreter on the host, with the jail's
    environment (its paths replaced by fresh host directories)."""
    home = tmp_path / "home"
    tmp = tmp_path / "tmp"
    home.mkdir()
    tmp.mkdir()
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "TMPDIR": str(tmp),
           "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
    p = subprocess.run([PYTHON, "-c", code], cwd=home, env=env, capture_output=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def inside(code, start):
    return pycell_run(["run", *start, "-c", code], timeout=60)


def need_numpy(name):
    if name == "numpy" and subprocess.run([PYTHON, "-c", "import numpy"]).returncode != 0:
        pytest.skip(f"{PYTHON} has no numpy here (apt-get install python3-numpy)")


@pytest.mark.parametrize("start", START)
@pytest.mark.parametrize("name", sorted(SNIPPETS))
def test_the_same_inside_and_outside(name, start, tmp_path):
    need_numpy(name)
    code = textwrap.dedent(SNIPPETS[name])
    rc_out, out_out, err_out = outside(code, tmp_path)
    assert rc_out == 0, f"{name} fails on the host itself: {err_out.decode()[-2000:]}"
    rc_in, out_in, err_in = inside(code, start)
    assert (rc_in, out_in) == (rc_out, out_out), (
        f"{name}: jail exit {rc_in} stdout {out_in!r} stderr {err_in.decode()[-2000:]}; "
        f"host exit {rc_out} stdout {out_out!r}")


@pytest.mark.parametrize("start", START)
@pytest.mark.parametrize("name", sorted(DIFFERENCES))
def test_the_listed_differences(name, start):
    code, want, _why = DIFFERENCES[name]
    rc, out, err = inside(code, start)
    assert (rc, out.decode()) == (0, want), err.decode()[-2000:]
