#!/bin/sh
# demo-copy.sh BUILD_DIR - rk copy in one minute: start rk serve on a scratch
# directory, copy a generated 64 MiB file and a small tree over RDMA, check
# every byte, print the throughput. Runs where an RDMA device is (inside
# scripts/softroce run, RK_ADDR set).
set -eu
build=${1:?usage: demo-copy.sh BUILD_DIR}
rk=$build/tools/rk/rk
addr=${RK_ADDR:?run inside scripts/softroce run (RK_ADDR is not set)}
port=${RK_DEMO_PORT:-7950}
w=$(mktemp -d "${TMPDIR:-/tmp}/rk-demo.XXXXXX")
server=
cleanup() {
	[ -z "$server" ] || { kill "$server" 2>/dev/null; wait "$server" 2>/dev/null || true; }
	rm -rf "$w"
}
trap cleanup EXIT INT TERM

echo "== generating a 64 MiB file and a small tree in $w/src"
mkdir -p "$w/src/tree/docs/notes" "$w/dst"
head -c $((64 << 20)) /dev/urandom >"$w/src/data.bin"
for i in 1 2 3 4 5 6 7 8; do
	head -c $((i * 1000)) /dev/urandom >"$w/src/tree/docs/part$i"
done
echo "hello from rk copy" >"$w/src/tree/docs/notes/readme.txt"
: >"$w/src/tree/empty"

echo "== rk serve --dir $w/dst --addr $addr --port $port"
"$rk" serve --dir "$w/dst" --addr "$addr" --port "$port" >"$w/serve.log" 2>&1 &
server=$!
i=0
until grep -q listening "$w/serve.log"; do
	i=$((i + 1))
	[ $i -lt 600 ] || { cat "$w/serve.log"; echo "demo: rk serve did not start" >&2; exit 1; }
	sleep 0.05
done

echo "== rk copy data.bin $addr:$port:incoming/"
"$rk" copy "$w/src/data.bin" "$addr:$port:incoming/"
echo "== rk copy -r tree $addr:$port:incoming/"
"$rk" copy -r "$w/src/tree" "$addr:$port:incoming/"

echo "== verifying byte for byte"
cmp "$w/src/data.bin" "$w/dst/incoming/data.bin"
diff -r "$w/src/tree" "$w/dst/incoming/tree"
echo "identical: data.bin and tree/ ($(find "$w/dst/incoming/tree" -type f | wc -l) files)"
echo "== server log"
cat "$w/serve.log"
