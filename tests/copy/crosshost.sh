#!/bin/sh
# rk copy of 32 MiB of random data from host A to rk serve on host B
# (scripts/softroce run --hosts 2), then 16 MiB of it striped over two
# lanes (--num-qp 2); then the 32 MiB pulled back from host B (rk serve
# --read); both sides' SHA-256 must agree each time.
# Default chunk size (1 MiB) and depth.
set -eu
RK=${RK_BUILD:?}/tools/rk/rk
port=7915
[ -n "${RK_PEER_ADDR:-}" ] || { echo "crosshost: needs scripts/softroce run --hosts 2" >&2; exit 1; }
t=${TMPDIR:-/tmp}
src=$(mktemp "$t/rkcopy-src.XXXXXX")
log=$(mktemp "$t/rkcopy-log.XXXXXX")
json=$(mktemp "$t/rkcopy-json.XXXXXX")
trap 'rm -f "$src" "$src.32" "$src.back" "$log" "$json"' EXIT
head -c $((32 << 20)) /dev/urandom >"$src"
"$RK_SOFTROCE" peer -- sh -c "b=\${TMPDIR:-/tmp}; mkdir -p \$b/rkcopy-dst && echo \$\$ >\$b/rkcopy-srv.pid && exec timeout 500 $RK serve --dir \$b/rkcopy-dst --addr $RK_PEER_ADDR --port $port --idle 30 --read" >"$log" 2>&1 &
server=$!
i=0
until grep -q listening "$log"; do
	i=$((i + 1))
	[ $i -lt 300 ] || { echo "crosshost: rk serve on host B did not start" >&2; cat "$log"; exit 1; }
	sleep 0.1
done
"$RK" copy --json "$src" "$RK_PEER_ADDR:$port:big.bin" | tee "$json"
want=$(sha256sum "$src" | cut -d' ' -f1)
got=$("$RK_SOFTROCE" peer -- sh -c 'sha256sum "${TMPDIR:-/tmp}/rkcopy-dst/big.bin"' | cut -d' ' -f1)
head -c $((16 << 20)) "$src" >"$src.32"
"$RK" copy -q --num-qp 2 "$src.32" "$RK_PEER_ADDR:$port:lanes.bin" || { echo "crosshost: --num-qp 2 failed" >&2; exit 1; }
want2=$(sha256sum "$src.32" | cut -d' ' -f1)
got2=$("$RK_SOFTROCE" peer -- sh -c 'sha256sum "${TMPDIR:-/tmp}/rkcopy-dst/lanes.bin"' | cut -d' ' -f1)
rm -f "$src.32"
"$RK" copy -q "$RK_PEER_ADDR:$port:big.bin" "$src.back" || { echo "crosshost: pull failed" >&2; exit 1; }
got3=$(sha256sum "$src.back" | cut -d' ' -f1)
rm -f "$src.back"
"$RK_SOFTROCE" peer -- sh -c 'kill -TERM "$(cat "${TMPDIR:-/tmp}/rkcopy-srv.pid")"' || true
wait $server || true
cat "$log"
[ "$want" = "$got" ] || { echo "crosshost: hash mismatch: $want vs $got" >&2; exit 1; }
[ "$want2" = "$got2" ] || { echo "crosshost: --num-qp 2 hash mismatch: $want2 vs $got2" >&2; exit 1; }
[ "$want" = "$got3" ] || { echo "crosshost: pull hash mismatch: $want vs $got3" >&2; exit 1; }
grep -q '"exit_code":0' "$json"
echo "copy crosshost: ok"
