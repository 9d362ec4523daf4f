#!/bin/sh
# test.sh BIN PORT - ex04_qp_state_machine on this host's RDMA device:
#   - a normal run: every transition printed, messages both ways, exit 0;
#   - --wrong-psn on the client: both sides end (within the 30 s deadline
#     given by 'timeout') with exit 1 and their explanation, no hang.
# Runs inside scripts/softroce.
set -eu
bin=$1 port=$2
addr=${RK_ADDR:?run me inside scripts/softroce}
dir=$(mktemp -d)
server=
trap '[ -z "$server" ] || kill $server 2>/dev/null; rm -rf "$dir"' EXIT
fail() {
	echo "ex04 test: $*" >&2
	for f in "$dir"/*.out; do echo "--- $f"; cat "$f"; done >&2
	exit 1
}

# run_pair TAG PORT [CLIENT_OPTS...]: exits in $src and $crc.
run_pair() {
	tag=$1 p=$2
	shift 2
	timeout 30 "$bin" -d "$RK_DEV" -p "$p" server "$addr" >"$dir/$tag.server.out" 2>&1 &
	server=$!
	i=0
	until grep -q "listening" "$dir/$tag.server.out"; do
		kill -0 $server 2>/dev/null || fail "$tag: server died before listening"
		i=$((i + 1)); [ $i -le 300 ] || fail "$tag: server not listening after 30 s"
		sleep 0.1
	done
	crc=0; timeout 30 "$bin" -d "$RK_DEV" -p "$p" "$@" client "$addr" \
		>"$dir/$tag.client.out" 2>&1 || crc=$?
	src=0; wait $server || src=$?
	server=
}

"$bin" --help | grep -q usage || fail "--help"
rc=0; "$bin" -g x client "$addr" 2>"$dir/args.out" || rc=$?
[ $rc = 2 ] && grep -q -- "--gid-index" "$dir/args.out" || fail "bad --gid-index: exit $rc"

run_pair ok "$port"
[ $src = 0 ] && [ $crc = 0 ] || fail "normal run: exits server $src client $crc"
for side in server client; do
	f="$dir/ok.$side.out"
	for step in "RESET -> INIT" "INIT -> RTR" "RTR -> RTS" "is now RTS" "GID\[" "$side: OK"; do
		grep -q "$step" "$f" || fail "$side did not print '$step'"
	done
done
grep -qx 'received: "hello from the client"' "$dir/ok.server.out" || fail "server: no message"
grep -qx 'received: "hello from the server"' "$dir/ok.client.out" || fail "client: no message"
cat "$dir/ok.server.out" "$dir/ok.client.out"

run_pair psn $((port + 1)) --wrong-psn
[ $crc = 1 ] && [ $src = 1 ] || fail "--wrong-psn: exits server $src client $crc (124: hung)"
grep -q "transport retry counter exceeded" "$dir/psn.client.out" || fail "client: no status"
grep -q "^explanation: we told the peer our first PSN" "$dir/psn.client.out" ||
	fail "client: no explanation"
grep -q "^explanation: the peer ran with --wrong-psn" "$dir/psn.server.out" ||
	fail "server: no explanation"
cat "$dir/psn.server.out" "$dir/psn.client.out"
echo "ex04 test: OK"
