#!/bin/sh
# Interruptions: kill -9 of the client mid-file leaves only the temporary,
# the server keeps serving; kill -9 of the server mid-file makes a client
# run with --retries 0 exit 4 within seconds. Each time --resume completes
# from the verified prefix and the final file is identical.
. "$(dirname "$0")/lib.sh"
port=7914
D=$W/dir
random "$W/big.bin" $((48 << 20))
start_server $port "$D"

# wait_tmp SIZE - until the temporary holds at least SIZE bytes.
wait_tmp() {
	i=0
	while :; do
		s=$(stat -c %s "$D/.big.bin.rkpart" 2>/dev/null || echo 0)
		[ "$s" -ge "$1" ] && return 0
		i=$((i + 1))
		[ $i -lt 600 ] || fail "transfer did not progress (temporary at $s bytes)"
		sleep 0.05
	done
}

# 1. The client dies.
"$RK" copy -q "$W/big.bin" "$RK_ADDR:$port:" &
c=$!
wait_tmp $((8 << 20))
kill -9 $c
wait $c 2>/dev/null || true
[ ! -e "$D/big.bin" ] || fail "final file visible after the client was killed"
[ -f "$D/.big.bin.rkpart" ] || fail "temporary removed"
kill -0 "$SERVER_PID" || fail "server died with its client"
"$RK" copy --resume "$W/big.bin" "$RK_ADDR:$port:" >"$W/out" || fail "resume after client kill"
cmp "$W/big.bin" "$D/big.bin" || fail "resumed file differs (client kill)"
[ ! -e "$D/.big.bin.rkpart" ] || fail "temporary left after resume"
server_log | grep -q "(resumed)" || fail "server did not resume from a prefix"

# 2. The server dies (without retries: the copy stops; loss.sh has the
# copy that reconnects by itself).
rm -f "$D/big.bin"
"$RK" copy -q --retries 0 "$W/big.bin" "$RK_ADDR:$port:" 2>"$W/err" &
c=$!
wait_tmp $((8 << 20))
kill -9 "$SERVER_PID"
t0=$(date +%s)
set +e
wait $c
rc=$?
set -e
t1=$(date +%s)
SERVER_PID=
[ $rc = 4 ] || fail "client exit $rc after server kill, expected 4: $(cat "$W/err")"
[ $((t1 - t0)) -le 15 ] || fail "client took $((t1 - t0)) s to notice the dead server"
cat "$W/err"
[ ! -e "$D/big.bin" ] || fail "final file visible after the server was killed"
start_server $port "$D"
"$RK" copy --resume "$W/big.bin" "$RK_ADDR:$port:" || fail "resume after server kill"
cmp "$W/big.bin" "$D/big.bin" || fail "resumed file differs (server kill)"
[ "$(server_log | grep -c '(resumed)')" = 2 ] || fail "second resume did not use the prefix"

# 3. --resume with the file already complete: up to date, nothing sent.
"$RK" copy --resume "$W/big.bin" "$RK_ADDR:$port:" >"$W/out" || fail "resume of a complete file"
grep -q "up to date" "$W/out" || fail "not reported up to date: $(cat "$W/out")"

# 4. A client back after a loss the server has not seen (its QP failed and
# its DREQ was lost too) names its previous session by the key WELCOME
# gave it; the server ends that session, so the files it held are not
# busy. A key the client made up ends nobody's session.
"$RK_BUILD/tests/copy/copy_abuse" replace "$RK_ADDR" $port held.bin >"$W/replace.out" 2>&1 ||
	fail "replace: $(cat "$W/replace.out")"
cat "$W/replace.out"
server_log | grep -q "replaced by a new connection of the same client" ||
	fail "the server did not log the replaced session"
echo "copy resume: ok"
