#!/bin/sh
# ex08 test: RPC in the sandbox; every response is checked against its request
# by the program itself (it exits non-zero on a mismatch), here we check that
# it says so and that the table is sane.
# Usage: test.sh BINARY   (RK_ADDR comes from scripts/softroce)
set -eu
bin=$1
iters=300
depth=4
: "${RK_ADDR:?run me inside scripts/softroce}"
out=$(mktemp)
trap 'rm -f "$out"' EXIT

"$bin" --help | grep -q -- --depth
if "$bin" --depth 65 "$RK_ADDR" 2>"$out"; then echo "--depth 65 accepted" >&2; exit 1; fi
grep -q -- --depth "$out"

"$bin" --port 7508 --iters $iters --depth $depth "$RK_ADDR" >"$out" 2>&1 || { cat "$out"; exit 1; }
cat "$out"
grep -q "^verified $((2 * iters)) responses" "$out"
grep -q "^server: answered $((2 * iters)) requests on one connection$" "$out"
# depth requests req/s avg_us p50_us p99_us
awk -v n=$iters -v d=$depth '
	$1 ~ /^[0-9]+$/ && NF == 6 {
		rows++; depths = depths " " $1
		if ($2 != n || !($3 > 0) || !($4 > 0) || !($5 > 0) || $6 < $5) bad = bad " depth" $1
	}
	END { if (rows != 2 || depths != " 1 " d || bad != "") { print "bad table:" bad depths; exit 1 } }
' "$out"
echo "ex08: OK"
