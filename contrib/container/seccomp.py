#!/usr/bin/env python3
"""pycell: the seccomp profile a container runtime needs to let pycell make its jails.

Reads a runtime's default profile (the OCI/containers JSON format: podman's is
/usr/share/containers/seccomp.json, Docker's is moby's profiles/seccomp/default.json)
and writes it back with the system calls below allowed, and nothing else changed:

    python3 contrib/container/seccomp.py /usr/share/containers/seccomp.json > pycell-seccomp.json

Each addition is one rule of its own with a "comment" saying why. A name is
first taken out of every rule of the default that mentions it (the default's
refusals, such as podman's "sethostname unless CAP_SYS_ADMIN", would otherwise
win over the addition; its conditional allows, such as Docker's clone3, are
subsumed), so the output allows exactly these calls whatever the container's
capabilities. Every jail then installs its own, far stricter filter, which
refuses all of them to the code it runs (SECURITY.md).
"""
import json
import sys

# name -> why pycell needs it (src/jail/jail.c, src/jail/rootfs.c)
ADDITIONS = {
    "clone3": "a jail is one clone3 call into new user, mount, pid, network, IPC and UTS "
              "namespaces, with a pidfd (Docker's default answers ENOSYS without CAP_SYS_ADMIN)",
    "clone": "a warm jail's init is cloned by the zygote into the same namespaces with CLONE_VM, "
             "on a stack of its own, so that it holds nothing of the zygote (src/jail/small_init.c): "
             "by clone3, or by clone where clone3 is refused; Docker's default allows clone only "
             "without namespace flags, without CAP_SYS_ADMIN",
    "unshare": "the jail's cgroup namespace, made after it joins its cgroup; `pycell doctor`'s probe",
    "mount": "the jail's tmpfs root, its read-only binds of /usr and the runtime, its own /proc "
             "and /dev/pts, inside the jail's own mount namespace",
    "mount_setattr": "the binds made read-only, nosuid and nodev, recursively",
    "pivot_root": "into the jail's new root, so the container's root is no longer reachable",
    "umount2": "the container's root detached from the jail after pivot_root",
    "sethostname": "the jail's UTS namespace is named \"pycell\" (podman's default refuses it "
                   "without CAP_SYS_ADMIN)",
}


def without(rule, names):
    """The rule with the given names taken out, or None if none are left."""
    kept = [n for n in rule.get("names", []) if n not in names]
    if "name" in rule:   # the older one-name form
        return None if rule["name"] in names else rule
    if not kept:
        return None
    return dict(rule, names=kept)


def extend(profile):
    if not isinstance(profile.get("syscalls"), list):
        raise ValueError("not a seccomp profile: no \"syscalls\" list")
    names = set(ADDITIONS)
    rules = [r for r in (without(r, names) for r in profile["syscalls"]) if r is not None]
    for name, why in ADDITIONS.items():
        rules.append({"names": [name], "action": "SCMP_ACT_ALLOW", "args": [],
                      "comment": "pycell: " + why})
    return dict(profile, syscalls=rules)


def main(argv):
    if len(argv) != 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip(), file=sys.stderr if len(argv) != 2 else sys.stdout)
        return 0 if len(argv) == 2 else 2
    try:
        with open(argv[1]) as f:
            profile = json.load(f)
        out = extend(profile)
    except (OSError, ValueError) as e:
        print(f"seccomp.py: {argv[1]}: {e}", file=sys.stderr)
        return 1
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
