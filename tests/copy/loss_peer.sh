#!/bin/sh
# Host B's half of loss.sh (run there with "$RK_SOFTROCE" peer --).
#   loss_peer.sh serve PORT          rk serve on DIR (pid in $B/srv.pid)
#   loss_peer.sh bounce PORT NAME    once DIR/.NAME.rkpart holds 4 MiB, kill -9
#                                    the server, wait 3 s, serve again
#   loss_peer.sh loss PCT            netem loss PCT % on this host's link
#   loss_peer.sh sum NAME            sha256 of DIR/NAME
#   loss_peer.sh stop                end the server
set -eu
RK=${RK_BUILD:?}/tools/rk/rk
B=${TMPDIR:-/tmp}/rkloss
D=$B/dst
mkdir -p "$D"
serve() {
	echo $$ >"$B/srv.pid"
	exec "$RK" serve --dir "$D" --addr "$RK_ADDR" --port "$1" --idle 30
}
case $1 in
serve)
	serve "$2"
	;;
bounce)
	echo "loss_peer: watching $D/.$3.rkpart"
	i=0
	until [ "$(stat -c %s "$D/.$3.rkpart" 2>/dev/null || echo 0)" -ge $((4 << 20)) ]; do
		i=$((i + 1))
		[ $i -lt 1200 ] || { echo "loss_peer: no transfer to interrupt" >&2; exit 1; }
		sleep 0.05
	done
	kill -KILL "$(cat "$B/srv.pid")"
	echo "loss_peer: server killed at $(stat -c %s "$D/.$3.rkpart") bytes; back in 3 s"
	sleep 3
	serve "$2"
	;;
loss)
	tc qdisc replace dev "$RK_IFACE" root netem loss "$2%"
	;;
sum)
	sha256sum "$D/$2" | cut -d' ' -f1
	;;
stop)
	kill -TERM "$(cat "$B/srv.pid")" 2>/dev/null || true
	;;
esac
