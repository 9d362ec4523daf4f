#!/bin/sh
# Cross-host rdma_cm smoke test: server on host B, client on host A.
# Runs inside 'scripts/softroce run --hosts 2'.
set -eu
bin=$1
port=7480
[ -n "${RK_PEER_ADDR:-}" ] || { echo "crosshost-cm: needs scripts/softroce run --hosts 2" >&2; exit 1; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$RK_SOFTROCE" peer -- "$bin" server "$RK_PEER_ADDR" "$port" >"$log" 2>&1 &
server=$!
i=0
until grep -q listening "$log"; do
	i=$((i + 1))
	[ $i -lt 300 ] || { echo "crosshost-cm: server on host B did not start" >&2; cat "$log"; exit 1; }
	sleep 0.1
done
"$bin" client "$RK_PEER_ADDR" "$port"
wait $server
cat "$log"
grep -q "server received: hello from the client" "$log"
