#!/usr/bin/env python3
"""seccomp.py's output is the runtime default with exactly its additions.

usage: seccomp_check.py SECCOMP_PY DEFAULT.json OUTPUT.json

Checks, on the runtime's real default and on a small profile shaped as
Docker's (the additions gated on CAP_SYS_ADMIN there, clone allowed only
without namespace flags, clone3 refused with ENOSYS): every addition is one unconditional allow rule with a comment; no
other rule names an addition; every other rule is the default's, in order;
the top-level keys are the default's.
"""
import importlib.util
import json
import sys


def load(path):
    spec = importlib.util.spec_from_file_location("seccomp", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def verify(default, out, additions):
    names = set(additions)
    assert {k: v for k, v in out.items() if k != "syscalls"} == \
        {k: v for k, v in default.items() if k != "syscalls"}, "top-level keys changed"
    added = [r for r in out["syscalls"] if r.get("comment", "").startswith("pycell: ")]
    assert sorted(n for r in added for n in r["names"]) == sorted(names), "additions differ"
    for r in added:
        assert r["action"] == "SCMP_ACT_ALLOW" and r["args"] == [] and len(r["names"]) == 1, r
        assert "includes" not in r and "excludes" not in r, r
    rest = [r for r in out["syscalls"] if r not in added]
    for r in rest:
        assert not names & set(r.get("names", [])), f"a default rule still names an addition: {r}"
    expect = []
    for r in default["syscalls"]:
        kept = [n for n in r["names"] if n not in names]
        if kept:
            expect.append(dict(r, names=kept))
    assert rest == expect, "a rule of the default was changed or dropped"


DOCKER_LIKE = {
    "defaultAction": "SCMP_ACT_ERRNO",
    "defaultErrnoRet": 1,
    "syscalls": [
        {"names": ["read", "write"], "action": "SCMP_ACT_ALLOW"},
        # CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
        {"names": ["clone"], "action": "SCMP_ACT_ALLOW",
         "args": [{"index": 0, "value": 2114060288, "op": "SCMP_CMP_MASKED_EQ"}],
         "excludes": {"caps": ["CAP_SYS_ADMIN"]}},
        {"names": ["mount", "umount2", "unshare", "setns", "pivot_root", "sethostname"],
         "action": "SCMP_ACT_ALLOW", "includes": {"caps": ["CAP_SYS_ADMIN"]}},
        {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38,
         "excludes": {"caps": ["CAP_SYS_ADMIN"]}},
    ],
}


def main(argv):
    mod = load(argv[1])
    with open(argv[2]) as f:
        default = json.load(f)
    with open(argv[3]) as f:
        out = json.load(f)
    verify(default, out, mod.ADDITIONS)
    docker = mod.extend(json.loads(json.dumps(DOCKER_LIKE)))
    verify(DOCKER_LIKE, docker, mod.ADDITIONS)
    # Docker's CAP_SYS_ADMIN rule keeps setns (not an addition) and loses the rest
    gated = [r for r in docker["syscalls"] if r.get("includes")]
    assert gated and gated[0]["names"] == ["setns"], gated
    assert not any(r["action"] == "SCMP_ACT_ERRNO" for r in docker["syscalls"]), "clone3's refusal stayed"
    assert not any(r.get("args") for r in docker["syscalls"]), "clone's condition on its flags stayed"
    print(f"    {len(mod.ADDITIONS)} additions: {', '.join(mod.ADDITIONS)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
