"""pycell's package install, run in a jail of its own (src/run/packages.c).

    _install.py INDEX_URL REQUIREMENT...

Installs the requirements from INDEX_URL with pip, in this process: wheels
only (--only-binary :all:, so no package's code runs: a package with no
wheel fails), into /pkg/site, bounded by the policy's allowlist
(/pkg/constraints.txt), with pip's report in /pkg/report.json and the
interpreter's tag in /pkg/abi.txt.  The jail's network reaches the index
and nothing else.  The supervisor trusts none of what this writes: it
reads the report as untrusted input and keeps the set only when every
package in it is allowed.
"""

import os
import sys
import sysconfig
import urllib.parse


def main():
    index, reqs = sys.argv[1], sys.argv[2:]
    with open("/pkg/abi.txt", "w") as f:
        f.write(f"{sys.implementation.cache_tag}-{sysconfig.get_platform()}{sys.abiflags}\n")
    args = ["install", "--target", "/pkg/site", "--index-url", index, "--only-binary", ":all:",
            "--no-cache-dir", "--disable-pip-version-check", "--no-input", "--progress-bar", "off",
            "--report", "/pkg/report.json", "--quiet", "--root-user-action", "ignore"]
    if os.path.getsize("/pkg/constraints.txt"):
        args += ["--constraint", "/pkg/constraints.txt"]
    if os.path.exists("/pkg/ca.pem"):
        args += ["--cert", "/pkg/ca.pem"]
    url = urllib.parse.urlsplit(index)
    if url.scheme == "http":
        # the admin named a plain-HTTP index in the policy: pip would
        # ignore it as an untrusted host
        args += ["--trusted-host", url.netloc]
    from pip._internal.cli.main import main as pip
    return pip(args + reqs)   # each a plain requirement: the policy checked its form


if __name__ == "__main__":
    sys.exit(main())
