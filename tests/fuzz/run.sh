#!/bin/sh
# pycell: build the libFuzzer targets with clang and run each for a while.
#   tests/fuzz/run.sh [SECONDS_EACH] [TARGET...]      (make fuzz FUZZ_SECONDS=N)
# Each target is fuzz_NAME.c here, linked with every source of src/ (built
# again with clang, ASan, UBSan and the fault sites); its seed corpus is
# corpus/NAME/ in the tree, and what it finds goes to a working corpus in
# the build dir.  Prints "fuzz NAME: N runs in S s, corpus C" per target and
# a closing "fuzz: P passed, F failed"; a crash leaves its input beside it.
# Needs: clang-14 (or $FUZZ_CC), Debian's libclang-rt-14-dev.
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=${PYCELL_BUILDDIR:-$src}
out="$build/tests/fuzz/build"
seconds=${1:-60}
[ $# -gt 0 ] && shift
targets=${*:-"tool mcp jsonrpc json_scan upstream policy conf http dns state"}
cc=${FUZZ_CC:-clang-14}
export PYCELL_DATADIR="${PYCELL_DATADIR:-$src}"

if ! command -v "$cc" >/dev/null; then
	echo "fuzz: SKIP: $cc is not installed (apt-get install clang-14 libclang-rt-14-dev)"
	echo "fuzz: 0 passed, 0 failed, 1 skipped"
	exit 0
fi
[ -f "$build/src/mcp/schemas.c" ] || { echo "fuzz: build pycell first (make)" >&2; exit 2; }
mkdir -p "$out/obj"
flags="-g -O1 -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
       -DPYCELL_FAULT_INJECTION=1 -DPYCELL_DATADIR=\"$src\" -DPYCELL_SYSCONFDIR=\"/etc/pycell\" -DPYCELL_LIBEXECDIR=\"$build\"
       -I$build -I$src/src -Wno-unused-command-line-argument"
# the dependencies' -I flags, as configure found them
flags="$flags $(sed -n -E 's/^(CAPNG|JANSSON|LIBBPF|LIBNL|SECCOMP|MHD)_CFLAGS = //p' "$build/Makefile" | tr '\n' ' ')"
libs=$(sed -n "s/^DEPS_LIBS = //p" "$build/Makefile")

# the library (not the programs: pycell's main, pycell-init's), once for
# all targets; an object is made again when its
# source, or any header (no dependency tracking here), is newer
newest_h=$(ls -t "$src"/src/*/*.h "$build/config.h" 2>/dev/null | head -n 1)
objs=
# (pycell-init's own sources are not pycell's: init_rt.c is its C library)
for f in $(cd "$src" && ls src/*/*.c | grep -v -e '^src/cli/main.c$' -e '^src/jail/init_main.c$' \
		-e '^src/jail/init_rt.c$' -e '^src/mcp/schemas.c$') src/mcp/schemas.c; do
	[ -f "$src/$f" ] && in="$src/$f" || in="$build/$f"
	o="$out/obj/$(echo "$f" | tr / _).o"
	if [ ! -f "$o" ] || [ "$in" -nt "$o" ] || [ "$newest_h" -nt "$o" ]; then
		# shellcheck disable=SC2086
		$cc $flags -c "$in" -o "$o" || { echo "fuzz: cannot compile $f" >&2; exit 2; }
	fi
	objs="$objs $o"
done

pass=0 fail=0
for t in $targets; do
	bin="$out/fuzz_$t"
	# a target that compiles a source of src/ into itself says so:
	# "/* fuzz: includes src/X/Y.c */"; its object is left out
	own=$(sed -n 's|^/\* fuzz: includes \(src/.*\.c\) \*/$|\1|p' "$here/fuzz_$t.c" | tr / _)
	link=$(for o in $objs; do case $o in */"$own.o") ;; *) echo "$o" ;; esac; done)
	# shellcheck disable=SC2086
	$cc $flags -fsanitize=fuzzer "$here/fuzz_$t.c" $link $libs -lm -o "$bin" ||
		{ echo "fuzz $t: FAIL: does not build"; fail=$((fail + 1)); continue; }
	work="$out/corpus-$t"
	mkdir -p "$work" "$out/crash-$t"
	log="$out/fuzz_$t.log"
	# -close_fd_mask=1: the targets print nothing; their stdout would be noise
	"$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -max_len=65536 \
		-artifact_prefix="$out/crash-$t/" -close_fd_mask=1 -print_final_stats=1 \
		"$work" "$here/corpus/$t" >"$log" 2>&1
	rc=$?
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	size=$(ls "$work" | wc -l)
	if [ $rc -eq 0 ]; then
		echo "fuzz $t: ${runs:-?} runs in $seconds s, corpus $size, no crash"
		pass=$((pass + 1))
	else
		echo "fuzz $t: FAIL (exit $rc): the input is in $out/crash-$t/"
		grep -E 'ERROR|SUMMARY|Assertion|abort|runtime error' "$log" | head -n 20
		fail=$((fail + 1))
	fi
done
echo "fuzz: $pass passed, $fail failed"
[ $fail -eq 0 ]
