#!/usr/bin/env python3
"""What tests/container/check.sh changes in the shipped files before running
them here, and nothing else (each change says why):

  play.py compose COMPOSE.yaml
      not a change: exit 0 if compose.yaml's service has the settings the
      check's runs were made with (podman-compose 1.0.3 always attaches a
      bridge network, which this check does not make)
  play.py kube MANIFEST OUT N
      the manifest without its container port (podman 4.3 publishes a
      containerPort on the host, each replica on the same port, and refuses
      ports without a network), and its Deployment as replica N of three:
      named pycell-rN, one replica, its emptyDir volumes named run-rN and
      tmp-rN (podman 4.3 makes an emptyDir a named volume, which a
      Deployment's replicas would share: the token file of one replica's
      user namespace, unwritable by the next); the seccomp profile named by
      the pod annotation podman reads; its init container kept (each says
      why below); nothing else
"""
import re
import sys


def strip_block(text, head):
    """Remove the line `head` and the more-indented lines under it."""
    lines = text.splitlines(keepends=True)
    out, skip = [], None
    for ln in lines:
        if skip is not None:
            if ln.strip() and len(ln) - len(ln.lstrip()) > skip:
                continue
            skip = None
        if ln.rstrip("\n") == head:
            skip = len(ln) - len(ln.lstrip())
            continue
        out.append(ln)
    return "".join(out)


def compose(src):
    """compose.yaml's service holds exactly the settings the check ran with."""
    import yaml   # python3-yaml, which podman-compose depends on
    doc = yaml.safe_load(open(src))
    svc = doc["services"]["pycell"]
    want = {
        "image": "localhost/pycell:0.1.0",
        "build": {"context": ".", "dockerfile": "Containerfile"},
        "ports": ["127.0.0.1:8080:8080"],
        "security_opt": ["seccomp=seccomp.json", "systempaths=unconfined"],
        "cap_drop": ["ALL"],
        "read_only": True,
        "tmpfs": ["/tmp"],
        "secrets": ["pycell-tokens"],
    }
    for key, value in want.items():
        if svc.get(key) != value:
            print(f"    compose.yaml: services.pycell.{key} is {svc.get(key)!r}, expected {value!r}")
            return 1
    if doc["secrets"] != {"pycell-tokens": {"file": "./tokens.json"}}:
        print(f"    compose.yaml: secrets is {doc['secrets']!r}")
        return 1
    if set(svc["ulimits"]) != {"nofile", "nproc"} or svc["stop_grace_period"] != "45s":
        print("    compose.yaml: ulimits or stop_grace_period changed")
        return 1
    return 0


def kube(src, out, replica):
    text = open(src).read()
    new = strip_block(text, "          ports:")
    assert new != text, "the manifest has no container ports: block"
    # the probes name the port; without it they take its number
    new = re.sub(r"port: mcp\}", "port: 8080}", new)
    # one replica per play, each with volumes of its own
    n = f"r{replica}"
    for a, b in (("  replicas: 3\n", "  replicas: 1\n"),
                 ("kind: Deployment\nmetadata:\n  name: pycell\n", f"kind: Deployment\nmetadata:\n  name: pycell-{n}\n"),
                 ("{name: run, mountPath", f"{{name: run-{n}, mountPath"),
                 ("{name: tmp, mountPath", f"{{name: tmp-{n}, mountPath"),
                 ("        - name: run\n", f"        - name: run-{n}\n"),
                 ("        - name: tmp\n", f"        - name: tmp-{n}\n")):
        assert a in new, a
        new = new.replace(a, b)
    # podman 4.3 removes a "once" init container (its default) as soon as it
    # has waited for it, and at times before it has seen it stop ("failed to
    # remove once init container ... as it is running"); "always" keeps it,
    # and runs it at each start of the pod, as Kubernetes runs init containers
    a = f"kind: Deployment\nmetadata:\n  name: pycell-{n}\n"
    new = new.replace(a, a + "  annotations: {io.podman.annotations.init.container.type: always}\n")
    # podman 4.3 reads no securityContext.seccompProfile: the older pod
    # annotation names the same profile (a file directly in the profile root)
    a = "    metadata:\n      labels: {app: pycell}\n"
    assert a in new, a
    new = new.replace(a, a + "      annotations: {seccomp.security.alpha.kubernetes.io/pod: localhost/pycell.json}\n")
    open(out, "w").write(new)


if __name__ == "__main__":
    if sys.argv[1] == "compose":
        sys.exit(compose(sys.argv[2]))
    elif sys.argv[1] == "kube":
        kube(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        sys.exit(__doc__)
