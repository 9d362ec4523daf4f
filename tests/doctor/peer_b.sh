#!/bin/sh
# Host B's half of peer.sh (run there with "$RK_SOFTROCE" peer --), one or
# more actions in a row (each call to host B costs a second or more):
#   listen PORT    rk doctor --listen (pid in $B/lis.pid; stays in front)
#   mtu N          the RDMA netdev's MTU (rxe's active MTU follows it)
#   block          drop RoCE v2 (UDP 4791) coming in, at tc ingress
#   unblock        undo block
#   stop           end the listener
set -eu
RK=${RK_BUILD:?}/tools/rk/rk
B=${TMPDIR:-/tmp}/rkdoctor
mkdir -p "$B"
while [ $# -gt 0 ]; do
	case $1 in
	listen)
		echo $$ >"$B/lis.pid"
		exec "$RK" doctor --listen --addr "$RK_ADDR" --port "$2"
		;;
	mtu)
		ip link set "$RK_IFACE" mtu "$2"
		shift
		;;
	block)
		tc qdisc add dev "$RK_IFACE" ingress
		tc filter add dev "$RK_IFACE" parent ffff: protocol ip prio 1 u32 \
			match ip protocol 17 0xff match ip dport 4791 0xffff action drop
		;;
	unblock)
		tc qdisc del dev "$RK_IFACE" ingress 2>/dev/null || true
		;;
	stop)
		kill -TERM "$(cat "$B/lis.pid")" 2>/dev/null || true
		;;
	*)
		echo "peer_b.sh: unknown action $1" >&2
		exit 2
		;;
	esac
	shift
done
