#!/bin/sh
# ex06 test: registration per request versus pool slots, in the sandbox.  The
# server checks every remote write landed in the slot it granted (and that
# nothing else in the pool changed); here we check it says so, and the table.
# Usage: test.sh BINARY   (RK_ADDR comes from scripts/softroce)
set -eu
bin=$1
iters=150
: "${RK_ADDR:?run me inside scripts/softroce}"
out=$(mktemp)
trap 'rm -f "$out"' EXIT

"$bin" --help | grep -q -- --slots
if "$bin" --size 12 "$RK_ADDR" 2>"$out"; then echo "--size 12 accepted" >&2; exit 1; fi
grep -q -- --size "$out"

# 8 slots: 150 requests go round the pool many times.
"$bin" --port 7506 --iters $iters --slots 8 "$RK_ADDR" >"$out" 2>&1 || { cat "$out"; exit 1; }
cat "$out"
grep -q "^server: $((2 * iters)) requests served; pool clean" "$out"
# mode requests alloc+free_p50_us request_p50_us verified
awk -v n=$iters '
	/^reg_mr\/request / || /^pool slot / {
		rows++
		if ($(NF-3) != n || !($(NF-2) > 0) || !($(NF-1) > 0) || $NF != n) bad = bad " " $1
	}
	END { if (rows != 2 || bad != "") { print "bad table:" bad " rows=" rows; exit 1 } }
' "$out"
echo "ex06: OK"
