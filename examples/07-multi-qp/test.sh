#!/bin/sh
# ex07 test: the bandwidth table for 1, 2, 4, 8 QPs in the sandbox.  The
# program reads every remote region back with RDMA READ and compares it with
# what it wrote; here we check it says so and that the table is complete.
# Usage: test.sh BINARY   (RK_ADDR comes from scripts/softroce)
set -eu
bin=$1
: "${RK_ADDR:?run me inside scripts/softroce}"
out=$(mktemp)
trap 'rm -f "$out"' EXIT

"$bin" --help | grep -q -- --num-qp
if "$bin" --num-qp 17 "$RK_ADDR" 2>"$out"; then echo "--num-qp 17 accepted" >&2; exit 1; fi
grep -q -- --num-qp "$out"

"$bin" --port 7507 --num-qp 8 --batch 4 --size 16K --iters 128 "$RK_ADDR" >"$out" 2>&1 ||
	{ cat "$out"; exit 1; }
cat "$out"
grep -q "^verified 16 remote regions by RDMA READ$" "$out"
grep -q "^server: 16 connections served$" "$out"
# qps batch size writes shared_cq_Gb/s cq_per_qp_Gb/s
awk '
	$1 ~ /^[0-9]+$/ && NF == 6 {
		qps = qps " " $1
		# writes: 128 rounded up to whole batches on every QP
		if ($2 != 4 || $3 != 16384 || $4 < 128 || $4 % ($1 * 4) || !($5 > 0) || !($6 > 0))
			bad = bad " qps=" $1
	}
	END { if (qps != " 1 2 4 8" || bad != "") { print "bad table:" bad " rows:" qps; exit 1 } }
' "$out"
echo "ex07: OK"
