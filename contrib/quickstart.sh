#!/usr/bin/env bash
# pycell quickstart for a fresh Debian 12 machine (run as root, or with sudo).
#   contrib/quickstart.sh demo   install, build, run a jailed hello world and an MCP round trip
#   contrib/quickstart.sh test   install, build, run the whole test suite (make check)
#   contrib/quickstart.sh deps   only install the build and test dependencies
set -euo pipefail
cd "$(dirname "$0")/.."

need_root() {
	if [ "$(id -u)" -ne 0 ]; then
		if command -v sudo >/dev/null; then SUDO=sudo; else
			echo "quickstart: installing packages needs root (or sudo)" >&2; exit 1; fi
	else SUDO=; fi
}

deps() {
	need_root
	local pkgs=(build-essential autoconf automake libtool pkg-config
		libseccomp-dev libcap-ng-dev libnl-3-dev libnl-route-3-dev libjansson-dev libbpf-dev libmicrohttpd-dev libsystemd-dev check
		systemd haproxy curl procps python3 libpython3-dev python3-pytest python3-pytest-timeout python3-numpy python3-pandas python3-matplotlib python3-dill python3-pil python3-pip python3-setuptools python3-wheel iproute2 util-linux bubblewrap busybox-static
		qemu-system-x86 cpio gcovr clang-14 libclang-rt-14-dev)
	command -v node >/dev/null && command -v npm >/dev/null || pkgs+=(nodejs npm)
	export DEBIAN_FRONTEND=noninteractive
	$SUDO apt-get update -qq
	$SUDO apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
}

build() {
	# the WASM backend's pinned Pyodide (configure finds it there)
	if [ ! -f runtime/wasm/node_modules/pyodide/pyodide.asm.wasm ] && command -v npm >/dev/null; then
		npm ci --prefix runtime/wasm --no-audit --no-fund >/dev/null 2>&1 ||
			echo "quickstart: npm ci --prefix runtime/wasm failed: pycell is built without the wasm backend" >&2
	fi
	[ -x configure ] || autoreconf -fi >/dev/null
	[ -f Makefile ] || ./configure --enable-werror ${CONFIGURE_FLAGS:-} >/dev/null
	make -j"$(nproc)" >/dev/null
}

case "${1:-demo}" in
deps) deps ;;
demo)
	deps; build
	echo '$ pycell run -c '\''print("hello from the jail")'\'''
	PYCELL_DATADIR="$PWD" ./pycell run -c 'import os; print("hello from the jail: pid", os.getpid(), "uid", os.getuid())'
	echo '$ pycell mcp    (an MCP round trip: initialize, tools/list, tools/call run_python)'
	PYCELL_DATADIR="$PWD" python3 contrib/mcp-roundtrip.py ./pycell
	;;
test)
	deps; build
	make check
	;;
*) echo "usage: $0 demo|test|deps" >&2; exit 2 ;;
esac
