#!/bin/sh
# test.sh BIN PORT HOSTILE|valgrind - ex10_kv_cache end to end on this
# host's RDMA device (ports PORT .. PORT + 7). The client checks every block
# it reads and exits non-zero on any mismatch; here we check that it says
# so, and:
#  - server and client in one run (windows where the device has them);
#  - a server with registrations (--mode mr) and two clients at once, each
#    with a descriptor of its own; either way the descriptor is refused on
#    the client's other lane;
#  - a server under attack (HOSTILE: tests/kv/kv_hostile): lane connects
#    that never end their handshake do not stall a client beside them; a
#    client gone silent after hello loses its lane when its lease runs out
#    (--lease 2), not while lookups renew it, and its lane cannot be said
#    bye for from another RPC connection; one address gets 4 lanes, no more;
#  - a bad --batch exits 2.
# With 'valgrind': one server and one client, both under valgrind, no leak
# and no error. Runs inside scripts/softroce.
set -eu
bin=$1 port=$2
addr=${RK_ADDR:?run me inside scripts/softroce}
vg=
hostile=$3
if [ "$3" = valgrind ]; then
	vg="valgrind -q --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,indirect"
	vg="$vg --suppressions=$(dirname "$0")/../valgrind.supp"
fi
dir=$(mktemp -d)
server=
c1=
c2=
stall=
trap 'kill $server $c1 $c2 $stall 2>/dev/null || true; rm -rf "$dir"' EXIT
fail() {
	echo "ex10 test: $*" >&2
	for f in "$dir"/*.out; do echo "--- $f"; cat "$f"; done >&2
	exit 1
}
# The client's lines for N keys over B blocks (kv_client.c).
client_ok() { # FILE KEYS BLOCKS
	grep -q "^hello: a ticket the server did not give out is refused$" "$1" &&
		grep -q "^hello: a descriptor of [0-9]* bytes, READ only, $3 blocks of 4096 bytes$" "$1" &&
		grep -q "^lookup: $2 keys in [0-9]* calls*: $3 present, $(($2 - $3)) absent$" "$1" &&
		grep -q "^read: $3 blocks in [0-9]* batch\(es\)* of up to [0-9]*, [0-9]* doorbells, all verified$" "$1" &&
		grep -q "^another lane: the same descriptor is refused by the server's NIC" "$1" &&
		grep -q "^write: refused before posting" "$1" &&
		grep -q "^after bye: the server's NIC refused the READ" "$1" &&
		grep -q "^client: .* every block checked: OK$" "$1"
}
start_server() { # PORT ARGS...
	p=$1; shift
	timeout 120 $vg "$bin" --server --port "$p" "$@" "$addr" >"$dir/server.out" 2>&1 &
	server=$!
	i=0
	until grep -q "listening" "$dir/server.out"; do
		kill -0 $server 2>/dev/null || fail "server died before listening"
		i=$((i + 1)); [ $i -le 600 ] || fail "server not listening after 60 s"
		sleep 0.1
	done
}
wait_server() {
	rc=0; wait $server || rc=$?
	server=
	[ $rc = 0 ] || fail "server exit $rc"
}

if [ -z "$vg" ]; then
	"$bin" --help | grep -q -- --batch || fail "--help"
	rc=0; "$bin" --batch 65 "$addr" 2>"$dir/args.out" || rc=$?
	[ $rc = 2 ] && grep -q -- "--batch" "$dir/args.out" || fail "--batch 65: exit $rc"

	# Both sides in one run: 300 keys over 256 blocks, 16 per batch.
	rc=0; timeout 60 "$bin" --port "$port" "$addr" >"$dir/pair.out" 2>&1 || rc=$?
	[ $rc = 0 ] || fail "pair: exit $rc"
	client_ok "$dir/pair.out" 300 256 || fail "pair: the client's lines"
	grep -q "^server: answered 5 calls for 1 client;" "$dir/pair.out" || fail "pair: server"

	# Registrations instead of windows, two clients at once, other sizes.
	start_server $((port + 2)) --mode mr --clients 2 --blocks 100
	grep -q "access by a registration per client" "$dir/server.out" || fail "--mode mr"
	client() { # N
		timeout 60 "$bin" --client --port $((port + 2)) --keys 130 --batch 7 "$addr" \
			>"$dir/client$1.out" 2>&1
	}
	client 1 &
	c1=$!
	client 2 &
	c2=$!
	rc=0; wait $c1 || rc=$?
	c1=
	[ $rc = 0 ] || fail "client 1 exit $rc"
	rc=0; wait $c2 || rc=$?
	c2=
	[ $rc = 0 ] || fail "client 2 exit $rc"
	wait_server
	for c in 1 2; do client_ok "$dir/client$c.out" 130 100 || fail "client $c: its lines"; done
	grep -q "^server: answered 8 calls for 2 clients;" "$dir/server.out" || fail "two clients: server"
	cat "$dir/pair.out" "$dir/server.out" "$dir/client1.out"

	# Under attack. Two lane connects that never end their handshake, then
	# a client beside them: served as usual (a server that waited for the
	# handshakes, 15 s each, would let its calls time out).
	hp=$((port + 6))
	start_server $hp --clients 0 --lease 2 --blocks 10
	"$hostile" stall 2 "$addr" $hp >"$dir/stall.out" 2>&1 &
	stall=$!
	i=0
	until grep -q "^stall: sent" "$dir/stall.out"; do
		kill -0 $stall 2>/dev/null || fail "stall died"
		i=$((i + 1)); [ $i -le 300 ] || fail "stall: not sent after 30 s"
		sleep 0.1
	done
	rc=0; timeout 60 "$bin" --client --port $hp --keys 10 "$addr" >"$dir/beside.out" 2>&1 || rc=$?
	[ $rc = 0 ] || fail "a client beside stalled connects: exit $rc"
	client_ok "$dir/beside.out" 10 10 || fail "beside: its lines"
	kill $stall; wait $stall 2>/dev/null || true; stall=
	# Silent after hello: the lease ends it (and lookups renew it).
	timeout 60 "$hostile" hold 2 "$addr" $hp >"$dir/hold.out" 2>&1 || fail "hold"
	# One address: KV_LANES_PER_ADDR (4) lanes, the fifth refused busy (so
	# the stalled connects' slots were freed too).
	timeout 60 "$hostile" flood "$addr" $hp >"$dir/flood.out" 2>&1 || fail "flood"
	grep -q "^flood: 4 lanes accepted, then refused busy$" "$dir/flood.out" || fail "flood: not 4"
	kill -TERM $server
	wait_server
	grep -q "lease expired" "$dir/server.out" || fail "hold: no lease expiry"
	cat "$dir/stall.out" "$dir/beside.out" "$dir/hold.out" "$dir/flood.out" "$dir/server.out"
else
	start_server "$port" --blocks 64
	rc=0; timeout 120 $vg "$bin" --client --port "$port" --keys 80 "$addr" \
		>"$dir/client.out" 2>&1 || rc=$?
	[ $rc = 0 ] || fail "client exit $rc"
	wait_server
	client_ok "$dir/client.out" 80 64 || fail "client: its lines"
	cat "$dir/server.out" "$dir/client.out"
fi
echo "ex10 test: OK"
