#!/usr/bin/env python3
"""MCP calls to pycell serve in containers that have no network but their own
loopback: each connection is made from a thread that has entered the
container's network namespace (setns), to 127.0.0.1:8080 there.

  mcpnet.py --pid PID --wait-ready
  mcpnet.py --pid PID --token FILE --expect-42 | --session
  mcpnet.py --pid PID --expect-401
  mcpnet.py --token FILE --fleet PID... [--calls N --remove CMD --remove-index I]

--fleet: every replica ready and naming itself in its session ids; then N
calls from 8 workers spread over the replicas; halfway, CMD removes replica
I (SIGTERM: it drains). A call a replica refuses before taking it (503 while
it drains, a connection refused or reset before the request was sent, its
process gone before the call reached it) is
sent to the next replica, as a Service does once the pod is gone; any other
failure (a connection cut after the request went out among them), or a call
taking no result, is lost. Exits 0 only if none is lost.
"""
import argparse
import ctypes
import http.client
import json
import os
import subprocess
import sys
import threading
import time

CLONE_NEWNET = 0x40000000
libc = ctypes.CDLL(None, use_errno=True)
PROTO = "2026-07-28"


class Refused(Exception):
    """The replica did not take the call (it may be retried elsewhere)."""


def enter(pid):
    """Move the calling thread into PID's network namespace; Refused when
    that process is gone (a replica removed: nothing was sent to it)."""
    try:
        fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
    except (FileNotFoundError, ProcessLookupError):
        raise Refused("gone")
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            e = ctypes.get_errno()
            raise OSError(e, f"setns into {pid}'s network: {os.strerror(e)}")
    finally:
        os.close(fd)


def post(body, token=None, name="run_python", session=None, timeout=60):
    """One request in the current thread's network namespace."""
    conn = http.client.HTTPConnection("127.0.0.1", 8080, timeout=timeout)
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": PROTO, "Mcp-Method": body["method"]}
    if body["method"] == "tools/call":
        headers["Mcp-Name"] = name
    if session:
        headers["Mcp-Param-Session"] = session
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        conn.request("POST", "/mcp", json.dumps(body), headers)
    except (ConnectionRefusedError, ConnectionResetError, BrokenPipeError) as e:
        raise Refused(f"connect/send: {e}")
    try:
        resp = conn.getresponse()
        data = resp.read()
    finally:
        conn.close()
    # a reset or no answer after the request went out is not a refusal: the
    # call may have run, its answer is lost (the caller counts it so)
    if resp.status == 503:
        raise Refused("503")
    return resp.status, data


def call(tool, args, token, session=None, rid=1):
    body = {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
            "params": {"name": tool, "arguments": args,
                       "_meta": {"io.modelcontextprotocol/protocolVersion": PROTO,
                                 "io.modelcontextprotocol/clientCapabilities": {}}}}
    status, data = post(body, token, tool, session)
    if status != 200:
        raise RuntimeError(f"HTTP {status}: {data[:200]!r}")
    text = data.decode()
    if text.startswith("event:") or text.startswith("data:"):
        text = [ln[5:] for ln in text.splitlines() if ln.startswith("data:")][-1]
    reply = json.loads(text)
    if "structuredContent" not in reply.get("result", {}):
        raise RuntimeError(f"{tool}: no structured result: {text[:300]}")
    return reply["result"]["structuredContent"]


def healthz():
    conn = http.client.HTTPConnection("127.0.0.1", 8080, timeout=5)
    try:
        conn.request("GET", "/healthz")
        return conn.getresponse().status
    except OSError:
        return None
    finally:
        conn.close()


def in_ns(pid, fn):
    """Run fn in a thread inside PID's network namespace; its value or exception."""
    box = {}

    def body():
        try:
            enter(pid)
            box["v"] = fn()
        except BaseException as e:  # handed to the caller
            box["e"] = e
    t = threading.Thread(target=body)
    t.start()
    t.join()
    if "e" in box:
        raise box["e"]
    return box["v"]


def wait_ready(pid, seconds=60):
    def loop():
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if healthz() == 200:
                return True
            time.sleep(0.2)
        return False
    return in_ns(pid, loop)


def fleet(pids, token, calls, remove, remove_index):
    names = []
    for pid in pids:
        if not wait_ready(pid):
            print(f"    replica {pid}: not ready", file=sys.stderr)
            return 1
        sid = in_ns(pid, lambda: call("session_open", {}, token)["session_id"])
        in_ns(pid, lambda: call("session_close", {"session_id": sid}, token, sid))
        names.append(sid.split(".")[0])
    print(f"    replicas: {names}")
    if not all(n.startswith("pycell-") for n in names) or len(set(names)) != len(pids):
        print("    session ids do not name distinct pods", file=sys.stderr)
        return 1
    if not calls:
        return 0
    lock = threading.Lock()
    state = {"next": 0, "done": 0, "retried": 0, "why": {}, "lost": []}
    per = [0] * len(pids)

    def worker():
        # each attempt runs in a thread of its own inside its replica's
        # network namespace (in_ns), so a worker moves between replicas
        while True:
            with lock:
                n = state["next"]
                if n >= calls:
                    return
                state["next"] += 1
            for attempt in range(len(pids) * 3):
                i = (n + attempt) % len(pids)
                try:
                    sc = in_ns(pids[i], lambda: call("run_python", {"code": f"{n} * 2"}, token, rid=n))
                except Refused as e:
                    why = str(e).split(":")[0]
                    with lock:
                        state["retried"] += 1
                        state["why"][why] = state["why"].get(why, 0) + 1
                    time.sleep(0.05)
                    continue
                except Exception as e:
                    with lock:
                        state["lost"].append(f"call {n} on replica {i}: {e}")
                    break
                with lock:
                    if sc.get("status") == "ok" and sc.get("return_value") == n * 2:
                        state["done"] += 1
                        per[i] += 1
                    else:
                        state["lost"].append(f"call {n} on replica {i}: {sc.get('status')} {sc.get('error')}")
                break
            else:
                with lock:
                    state["lost"].append(f"call {n}: every replica refused it")

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    removed = None
    if remove:
        # halfway (or when the workers have stopped, having lost calls)
        while any(t.is_alive() for t in threads):
            with lock:
                if state["done"] >= calls // 2:
                    break
            time.sleep(0.05)
        t0, at = time.monotonic(), state["done"]
        removed = subprocess.run(remove, shell=True, capture_output=True, text=True)
        print(f"    removed replica {remove_index} ({remove!r}: exit {removed.returncode}, "
              f"{time.monotonic() - t0:.1f} s) after {at} calls")
    for t in threads:
        t.join()
    print(f"    {state['done']} of {calls} calls ok; per replica {per}; "
          f"{state['retried']} refused and sent on {state['why']}; lost {len(state['lost'])}")
    for line in state["lost"][:10]:
        print("    lost:", line)
    ok = state["done"] == calls and not state["lost"]
    if remove and per[remove_index] == 0:
        print("    the removed replica served no call", file=sys.stderr)
        ok = False
    # the removal itself: the command succeeded and the replica's process is gone
    if removed is not None and (removed.returncode != 0 or os.path.exists(f"/proc/{pids[remove_index]}")):
        print(f"    the replica was not removed: {removed.stderr.strip()[:300]}", file=sys.stderr)
        ok = False
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pid", type=int)
    ap.add_argument("--token")
    ap.add_argument("--wait-ready", action="store_true")
    ap.add_argument("--expect-42", action="store_true")
    ap.add_argument("--expect-401", action="store_true")
    ap.add_argument("--session", action="store_true")
    ap.add_argument("--fleet", type=int, nargs="+")
    ap.add_argument("--calls", type=int, default=0)
    ap.add_argument("--remove")
    ap.add_argument("--remove-index", type=int, default=0)
    a = ap.parse_args()
    token = open(a.token).read().strip() if a.token else None
    if a.fleet:
        return fleet(a.fleet, token, a.calls, a.remove, a.remove_index)
    if a.wait_ready:
        return 0 if wait_ready(a.pid) else 1
    if a.expect_401:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list",
                "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": PROTO}}}
        status, _ = in_ns(a.pid, lambda: post(body))
        print(f"    HTTP {status}")
        return 0 if status == 401 else 1
    if a.expect_42:
        sc = in_ns(a.pid, lambda: call("run_python", {"code": "6*7"}, token))
        print(f"    {sc['status']} {sc.get('return_value')!r}")
        return 0 if (sc["status"], sc.get("return_value")) == ("ok", 42) else 1
    if a.session:
        def cells():
            sid = call("session_open", {}, token)["session_id"]
            call("run_python", {"session_id": sid, "code": "x = 6"}, token, sid)
            sc = call("run_python", {"session_id": sid, "code": "x * 7"}, token, sid)
            call("session_close", {"session_id": sid}, token, sid)
            return sc
        sc = in_ns(a.pid, cells)
        print(f"    {sc['status']} {sc.get('return_value')!r} cell {sc['session']['cell']}")
        return 0 if (sc["status"], sc.get("return_value"), sc["session"]["cell"]) == ("ok", 42, 2) else 1
    ap.error("nothing to do")
    return 2


if __name__ == "__main__":
    sys.exit(main())
