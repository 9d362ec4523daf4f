#!/bin/sh
# Eight rk copy clients at once against one rk serve, each with a 4 MiB file
# and a few small ones; every file arrives intact.
. "$(dirname "$0")/lib.sh"
port=7913
D=$W/dir
start_server $port "$D"
n=0
while [ $n -lt 8 ]; do
	mkdir -p "$W/src$n/small"
	random "$W/src$n/big.bin" $((4 << 20))
	for k in 1 2 3; do random "$W/src$n/small/s$k" $((k * 1000 + n)); done
	n=$((n + 1))
done
pids=
n=0
while [ $n -lt 8 ]; do
	"$RK" copy -q -r --chunk 256K "$W/src$n/big.bin" "$W/src$n/small" "$RK_ADDR:$port:c$n/" &
	pids="$pids $!"
	n=$((n + 1))
done
for p in $pids; do
	wait "$p" || fail "a client failed"
done
n=0
while [ $n -lt 8 ]; do
	cmp "$W/src$n/big.bin" "$D/c$n/big.bin" || fail "c$n/big.bin differs"
	diff -r "$W/src$n/small" "$D/c$n/small" || fail "c$n/small differs"
	n=$((n + 1))
done
[ "$(server_log | grep -c 'connected$')" = 8 ] || fail "expected 8 sessions"
echo "copy clients: ok"
