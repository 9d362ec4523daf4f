#!/bin/sh
# test.sh BIN PORT [valgrind] - ex01_basic end to end on this host's RDMA
# device: server and client each print the other's exact message and exit 0.
# Also: bad arguments exit 2, and a client with no server behind the port is
# told why (REJECTED) instead of hanging.  Runs inside scripts/softroce.
set -eu
bin=$1 port=$2
addr=${RK_ADDR:?run me inside scripts/softroce}
vg=
if [ "${3:-}" = valgrind ]; then
	vg="valgrind -q --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,indirect"
	vg="$vg --suppressions=$(dirname "$0")/../valgrind.supp"
fi
dir=$(mktemp -d)
server=
trap '[ -z "$server" ] || kill $server 2>/dev/null; rm -rf "$dir"' EXIT
fail() {
	echo "ex01 test: $*" >&2
	for f in "$dir"/*.out; do echo "--- $f"; cat "$f"; done >&2
	exit 1
}

if [ -z "$vg" ]; then
	"$bin" --help | grep -q usage || fail "--help"
	rc=0; "$bin" -p 0 client "$addr" 2>"$dir/args.out" || rc=$?
	[ $rc = 2 ] && grep -q -- "--port" "$dir/args.out" || fail "bad --port: exit $rc"
	# Nobody listens on port+100: the client must say so and exit non-zero.
	rc=0; timeout 30 "$bin" -t 10 -p $((port + 100)) client "$addr" >"$dir/nolistener.out" 2>&1 || rc=$?
	[ $rc = 1 ] && grep -q "REJECTED" "$dir/nolistener.out" || fail "no listener: exit $rc"
fi

timeout 120 $vg "$bin" -t 60 -p "$port" -m "server says: 42 is the answer" server "$addr" \
	>"$dir/server.out" 2>&1 &
server=$!
i=0
until grep -q "listening" "$dir/server.out"; do
	kill -0 $server 2>/dev/null || fail "server died before listening"
	i=$((i + 1)); [ $i -le 600 ] || fail "server not listening after 60 s"
	sleep 0.1
done
rc=0; timeout 90 $vg "$bin" -t 60 -p "$port" -m "client says: hello, RDMA" client "$addr" \
	>"$dir/client.out" 2>&1 || rc=$?
[ $rc = 0 ] || fail "client exit $rc"
rc=0; wait $server || rc=$?
server=
[ $rc = 0 ] || fail "server exit $rc"
grep -qx 'received 24 bytes from the peer: "client says: hello, RDMA"' "$dir/server.out" ||
	fail "server did not print the client's message"
grep -qx 'received 29 bytes from the peer: "server says: 42 is the answer"' "$dir/client.out" ||
	fail "client did not print the server's message"
cat "$dir/server.out" "$dir/client.out"
echo "ex01 test: OK"
