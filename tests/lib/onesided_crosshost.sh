#!/bin/sh
# One-sided batches across two hosts (scripts/softroce run --hosts 2), with
# netem dropping 1 % of the packets on both links: the owner of a segment
# on host B, the user on host A WRITEs (each batch notified) and READs it
# back over two lanes; every byte is checked on both sides.
set -eu
bin=$1
port=7523
[ -n "${RK_PEER_ADDR:-}" ] || { echo "onesided_crosshost: needs scripts/softroce run --hosts 2" >&2; exit 1; }
log=$(mktemp)
cleanup() {
	tc qdisc del dev "$RK_IFACE" root 2>/dev/null || true
	"$RK_SOFTROCE" peer -- sh -c 'tc qdisc del dev "$RK_IFACE" root 2>/dev/null || true' || true
	rm -f "$log"
}
trap cleanup EXIT
tc qdisc replace dev "$RK_IFACE" root netem loss 1%
"$RK_SOFTROCE" peer -- sh -c 'tc qdisc replace dev "$RK_IFACE" root netem loss 1%'
"$RK_SOFTROCE" peer -- "$bin" owner "$RK_PEER_ADDR" "$port" >"$log" 2>&1 &
owner=$!
i=0
until grep -q listening "$log"; do
	i=$((i + 1))
	[ $i -lt 300 ] || { echo "onesided_crosshost: owner on host B did not start" >&2; cat "$log"; exit 1; }
	sleep 0.1
done
"$bin" user "$RK_PEER_ADDR" "$port"
wait $owner
cat "$log"
grep -q "lib_onesided owner: ok" "$log"
