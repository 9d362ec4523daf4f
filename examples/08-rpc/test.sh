#!/bin/sh
# ex08 test: RPC in the sandbox; every response is checked against its request
# by the program itself (it exits non-zero on a mismatch), here we check that
# it says so and that the table is sane. Example 09 (the same RPC on the
# library) prints the same and runs this same test on its own ports.
# Usage: test.sh BINARY [PORT DEAD_PORT NAME]   (RK_ADDR comes from scripts/softroce)
set -eu
bin=$1 port=${2:-7508} dead_port=${3:-7509} name=${4:-ex08}
iters=300
depth=4
: "${RK_ADDR:?run me inside scripts/softroce}"
out=$(mktemp)
trap 'rm -f "$out"' EXIT

"$bin" --help | grep -q -- --depth
if "$bin" --depth 65 "$RK_ADDR" 2>"$out"; then echo "--depth 65 accepted" >&2; exit 1; fi
grep -q -- --depth "$out"

"$bin" --port $port --iters $iters --depth $depth "$RK_ADDR" >"$out" 2>&1 || { cat "$out"; exit 1; }
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
# A client that dies mid-run: the server must notice through the CM channel
# (DISCONNECTED), well before its 15 s completion deadline.
srv=$(mktemp)
spid= cpid=
trap 'kill $spid $cpid 2>/dev/null || true; rm -f "$out" "$srv"' EXIT
"$bin" --server --port $dead_port "$RK_ADDR" >"$srv" 2>&1 &
spid=$!
i=0
until grep -q listening "$srv"; do
	i=$((i + 1)); [ $i -lt 100 ] || { cat "$srv"; echo "server did not start" >&2; exit 1; }
	sleep 0.1
done
"$bin" --client --port $dead_port --iters 1000000 --depth 1 "$RK_ADDR" >"$out" 2>&1 &
cpid=$!
sleep 2
kill -9 $cpid || { cat "$out"; echo "the client ended before it was killed" >&2; exit 1; }
wait $cpid 2>/dev/null || true
t0=$(date +%s)
i=0
while kill -0 $spid 2>/dev/null; do
	i=$((i + 1))
	[ $i -lt 50 ] || { kill $spid; echo "server still running 5 s after its client died" >&2; exit 1; }
	sleep 0.1
done
if wait $spid; then echo "server exited 0 after its client died" >&2; exit 1; fi
grep -q "peer went away" "$srv" || { cat "$srv"; exit 1; }
echo "server noticed the dead client after $(( $(date +%s) - t0 )) s: $(tail -1 "$srv")"
echo "$name: OK"
