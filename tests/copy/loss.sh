#!/bin/sh
# rk copy keeps going under loss (scripts/softroce run --hosts 2): 16 MiB
# with netem dropping 5 % of the packets on both hosts' links, then 1 %,
# must arrive identical (some 200 and 40 losses each way, every one an ACK
# timeout or a go-back-N for rxe; more data only makes the test longer and
# its time more variable),
# reconnecting by itself when the QP gives up; then,
# on a clean link, rk serve killed mid-transfer (64 MiB) and started again 3 s later:
# the copy reconnects, resumes and finishes on its own.
set -eu
RK=${RK_BUILD:?}/tools/rk/rk
[ -n "${RK_PEER_ADDR:-}" ] || { echo "loss: needs scripts/softroce run --hosts 2" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
port=7917
W=$(mktemp -d "${TMPDIR:-/tmp}/rkloss.XXXXXX")
peer() { "$RK_SOFTROCE" peer -- env RK_BUILD="$RK_BUILD" sh "$here/loss_peer.sh" "$@"; }
loss() {
	tc qdisc replace dev "$RK_IFACE" root netem loss "$1%"
	peer loss "$1"
}
cleanup() {
	tc qdisc del dev "$RK_IFACE" root 2>/dev/null || true
	peer stop || true
	wait || true
	rm -rf "$W"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*" >&2
	cat "$W"/srv.log "$W"/*.err >&2 || true
	exit 1
}
# wait_for WHAT - until host B's log says WHAT (a minute at most).
wait_for() {
	i=0
	until grep -q "$1" "$W/srv.log" 2>/dev/null; do
		i=$((i + 1))
		[ $i -lt 600 ] || fail "host B never said '$1'"
		sleep 0.1
	done
}
json_num() { sed -n "s/.*\"$2\":\([0-9.]*\).*/\1/p" "$1"; }

head -c $((16 << 20)) /dev/urandom >"$W/src"
want=$(sha256sum "$W/src" | cut -d' ' -f1)
peer serve $port >>"$W/srv.log" 2>&1 &
wait_for listening

# copy PCT NAME - 16 MiB at PCT % loss both ways; must arrive identical.
copy() {
	loss "$1"
	rc=0
	"$RK" copy --retries 10 --json "$W/src" "$RK_PEER_ADDR:$port:$2" >"$W/$2.json" 2>"$W/$2.err" || rc=$?
	cat "$W/$2.err"
	[ $rc -eq 0 ] || fail "$1 % loss: rk copy exited $rc: $(cat "$W/$2.json")"
	[ "$(peer sum "$2")" = "$want" ] || fail "$1 % loss: $2 differs"
	echo "loss: $1 % both ways: 16 MiB identical in $(json_num "$W/$2.json" seconds) s," \
		"$(json_num "$W/$2.json" reconnects) reconnects, ended at chunk" \
		"$(json_num "$W/$2.json" chunk) depth $(json_num "$W/$2.json" depth)"
}
copy 5 five.bin
copy 1 one.bin
loss 0

# rk serve killed -9 once 4 MiB are in, back 3 s later: the copy finishes by itself.
# 64 MiB: host B's watcher can lag the copy by tens of MiB (one CI run saw
# the kill land at 22 MiB); the copy must not finish before it.
head -c $((64 << 20)) /dev/urandom >"$W/src"
want=$(sha256sum "$W/src" | cut -d' ' -f1)
peer bounce $port bounce.bin >>"$W/srv.log" 2>&1 &
wait_for "loss_peer: watching"
"$RK" copy --retries 10 --json "$W/src" "$RK_PEER_ADDR:$port:bounce.bin" >"$W/bounce.json" 2>"$W/bounce.err" &
cpid=$!
rc=0
wait $cpid || rc=$?
cat "$W/bounce.err"
[ $rc -eq 0 ] || fail "after a server restart: rk copy exited $rc: $(cat "$W/bounce.json")"
grep -q "server killed" "$W/srv.log" || fail "the server was not killed"
[ "$(json_num "$W/bounce.json" reconnects)" -ge 1 ] || fail "no reconnect after the restart"
[ "$(peer sum bounce.bin)" = "$want" ] || fail "after a server restart: bounce.bin differs"
echo "loss: server killed and restarted: 64 MiB identical in" \
	"$(json_num "$W/bounce.json" seconds) s, $(json_num "$W/bounce.json" reconnects) reconnects"
cat "$W/srv.log"
echo "copy loss: ok"
