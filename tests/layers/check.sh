#!/bin/sh
# pycell: the layers of src/ (README, Layout).  Each folder is a layer and
# may include only headers of its own layer and of the layers below it:
#   base < config < jail < run < bridge < mcp < cli
# Prints every include that reaches up, and one closing line in pytest's
# words, "layers: N passed" or "layers: N failed, N passed" (a file passes
# when all its includes point down or sideways).
set -u
src=${1:-$(cd "$(dirname "$0")/../../src" && pwd)}
order="base config jail run bridge mcp cli"

rank() {
	i=0
	for l in $order; do
		[ "$l" = "$1" ] && { echo $i; return; }
		i=$((i + 1))
	done
	echo -1
}

pass=0 fail=0
for dir in "$src"/*/; do
	layer=$(basename "$dir")
	r=$(rank "$layer")
	if [ "$r" -lt 0 ]; then
		echo "layers: src/$layer is not a layer (known: $order)"
		fail=$((fail + 1))
		continue
	fi
	for f in "$dir"*.c "$dir"*.h; do
		[ -e "$f" ] || continue
		bad=$(sed -n 's/^#include "\([a-z_]*\)\/.*/\1 &/p' "$f" | while read -r to line; do
			t=$(rank "$to")
			if [ "$t" -lt 0 ] || [ "$t" -gt "$r" ]; then
				echo "src/$layer/$(basename "$f"): $line (a $to header: above $layer)"
			fi
		done)
		if [ -n "$bad" ]; then
			echo "$bad"
			fail=$((fail + 1))
		else
			pass=$((pass + 1))
		fi
	done
done
# Inside run/: run.c drives every spawner through spawner.h and names none
# of them; a spawner knows nothing of the run that uses it.
for f in "$src"/run/run.c "$src"/run/run.h "$src"/run/run_int.h "$src"/run/run_jail.c "$src"/run/env.c; do
	bad=$(grep -n '^#include "run/\(zygote\|spawn_[a-z]*\)\.h"' "$f")
	if [ -n "$bad" ]; then
		echo "src/run/$(basename "$f"): names a spawner: $bad"
		fail=$((fail + 1))
	fi
done
for f in "$src"/run/spawn_*.c "$src"/run/zygote.c "$src"/run/zygote.h "$src"/run/warm_req.c "$src"/run/spawner.h "$src"/run/program.h; do
	[ -e "$f" ] || continue
	bad=$(grep -n '^#include "run/run\.h"' "$f")
	if [ -n "$bad" ]; then
		echo "src/run/$(basename "$f"): a spawner includes run.h: $bad"
		fail=$((fail + 1))
	fi
done

# Inside jail/: the probe of what the host offers is a leaf, as crun's
# detection is: cgroup_probe.c calls nothing of cgroup.c (the runs), which
# calls down into it (cg_first_finish, cg_probe_free).
bad=""
for fn in $(sed -n 's/^[a-z].*[ *]\([a-z_0-9]*\)(.*/\1/p' "$src/jail/cgroup.c" | sort -u); do
	hit=$(grep -n "\b$fn(" "$src/jail/cgroup_probe.c" | head -1)
	[ -n "$hit" ] && bad="$bad $fn ($hit);"
done
if [ -n "$bad" ]; then
	echo "src/jail/cgroup_probe.c: calls cgroup.c's$bad"
	fail=$((fail + 1))
else
	pass=$((pass + 1))
fi

# Inside mcp/: the features (tasks, sessions, resources, subscriptions) own their state
# and hear of the server and of a call through mcp_features' rows and a
# call's host and sink, which calls.c offers.  No feature includes another's
# header or names another's functions, and calls.c includes none: a
# feature's header is for its own file and the tables that name its handlers
# (server.c's features, protocol.c's methods, tools.c's tools).
features="tasks sessions resources subscriptions"
for f in $features calls render; do
	file="$src/mcp/$f.c"
	[ -e "$file" ] || { echo "src/mcp/$f.c: missing (tests/layers knows the mcp features by name)"; fail=$((fail + 1)); continue; }
	bad=""
	for g in $features; do
		[ "$g" = "$f" ] && continue
		hit=$(grep -n "^#include \"mcp/$g\.h\"" "$file")
		[ -n "$hit" ] && bad="$bad includes mcp/$g.h ($hit);"
		for fn in $(sed -n 's/^[a-z].*[ *]\(mcp_[a-z_0-9]*\)(.*/\1/p; s/^const struct mcp_feature \(mcp_[a-z_]*\) .*/\1/p' "$src/mcp/$g.c" | sort -u); do
			hit=$(grep -n "\b$fn\b" "$file" | head -1)
			[ -n "$hit" ] && bad="$bad calls $g.c's $fn ($hit);"
		done
	done
	if [ -n "$bad" ]; then
		echo "src/mcp/$f.c: reaches another feature:$bad"
		fail=$((fail + 1))
	else
		pass=$((pass + 1))
	fi
done

# Rooms, not halls: no source file past 900 lines (schemas.c is made by make)
for f in "$src"/*/*.c "$src"/*/*.h; do
	case $f in */mcp/schemas.c) continue ;; esac
	n=$(wc -l <"$f")
	if [ "$n" -gt 900 ]; then
		echo "${f#"$src"/}: $n lines; a file here keeps to 900: give a concern of it a room of its own"
		fail=$((fail + 1))
	else
		pass=$((pass + 1))
	fi
done

if ls "$src"/*.c "$src"/*.h >/dev/null 2>&1; then
	echo "layers: files directly in src/ belong in a layer folder: $(ls "$src"/*.[ch])"
	fail=$((fail + 1))
fi
if [ "$fail" -eq 0 ]; then
	echo "layers: $pass passed"
else
	echo "layers: $fail failed, $pass passed"
fi
[ "$fail" -eq 0 ]
