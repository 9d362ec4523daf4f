#!/bin/sh
# rk copy --num-qp: a large file striped over 4 connections, a tree of
# small and medium files over 3 (slots arrive out of order across lanes and
# the server must put them back in sequence), and lanes joining a server
# that requires a token (they authenticate with the session key); the
# server killed under a two-lane copy, then --resume over two lanes. Every
# file byte for byte identical, one session per copy in the server's log.
. "$(dirname "$0")/lib.sh"
port=7915
D=$W/dir S=$W/src T=$W/src/tree
mkdir -p "$S" "$T/x/y"
random "$S/big" $((24 * 1048576 + 4097))
for i in 1 2 3 4 5 6; do
	random "$T/x/m$i" $((i * 70000 + 3))
done
random "$T/x/y/large" $((3 * 1048576 + 1))
awk -v d="$T/x/y" 'BEGIN {
	for (i = 0; i < 300; i++) {
		f = d "/s" i
		printf "small %d %*s\n", i, i % 50, "" > f
		close(f)
	}
}'
start_server $port "$D"
"$RK" copy --num-qp 4 --depth 12 "$S/big" "$RK_ADDR:$port:big" >"$W/out" || fail "copy --num-qp 4"
cat "$W/out"
cmp "$S/big" "$D/big" || fail "big differs"
"$RK" copy -r --num-qp 3 --chunk 256K "$T" "$RK_ADDR:$port:t" >"$W/out" || fail "copy -r --num-qp 3"
cat "$W/out"
diff -r "$T" "$D/t/tree" || fail "trees differ"
[ "$(grep -c ': connected' "$W/server.1.log")" = 2 ] ||
	fail "expected two sessions: $(cat "$W/server.1.log")"
expect_rc 2 "$RK" copy --num-qp 9 "$S/big" "$RK_ADDR:$port:nine"

# The server dies under a two-lane copy: without retries, exit 4 within
# seconds; --resume over two lanes continues from the verified prefix.
random "$S/r48" $((48 << 20))
"$RK" copy -q --retries 0 --num-qp 2 "$S/r48" "$RK_ADDR:$port:r48" 2>"$W/err" &
c=$!
i=0
until [ "$(stat -c %s "$D/.r48.rkpart" 2>/dev/null || echo 0)" -ge $((8 << 20)) ]; do
	i=$((i + 1))
	[ $i -lt 600 ] || fail "two-lane transfer did not progress"
	sleep 0.05
done
kill -9 "$SERVER_PID"
SERVER_PID=
set +e
wait $c
rc=$?
set -e
[ $rc = 4 ] || fail "client exit $rc after server kill, expected 4: $(cat "$W/err")"
[ ! -e "$D/r48" ] || fail "final file visible after the server was killed"
start_server $port "$D"
"$RK" copy -q --resume --num-qp 2 "$S/r48" "$RK_ADDR:$port:r48" || fail "two-lane resume"
cmp "$S/r48" "$D/r48" || fail "resumed r48 differs"
server_log | grep -q "r48 .*(resumed)" || fail "two-lane resume did not use the prefix"
stop_server

printf 'sesame\n' >"$W/token"
start_server $port "$D" --token-file "$W/token"
"$RK" copy -q --num-qp 2 --token-file "$W/token" "$S/big" "$RK_ADDR:$port:tok-big" ||
	fail "lanes with a token"
cmp "$S/big" "$D/tok-big" || fail "tok-big differs"
[ -z "$(find "$D" -name '*.rkpart')" ] || fail "temporaries left"
echo "copy stripe: ok"
