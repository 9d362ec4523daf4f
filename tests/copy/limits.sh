#!/bin/sh
# Exhaustion (see copy_abuse.c). With the fd limit at 1024, 16 sessions
# that each begin 200 files without sending them all get answers: READY,
# or refused with the named --max-open limit, never EMFILE. A 17th client
# is refused busy, and once they are gone a client works. A session that
# only posts empty slots is dropped at --idle. Registered memory: without
# CAP_IPC_LOCK (as a user is) the ring is sized to fit the locked-memory
# limit, fewer sessions are admitted when even small rings do not fit, and
# a chunk larger than --max-ring is refused by name.
. "$(dirname "$0")/lib.sh"
port=7917
D=$W/dir
H=$RK_BUILD/tests/copy/copy_abuse
ulimit -n 1024
start_server $port "$D" --idle 300
grep -q "fd limit 1024)" "$W/server.1.log" || fail "fd limit is not 1024"
open=$(sed -n 's/.* \([0-9]*\) files open each.*/\1/p' "$W/server.1.log")
echo "16 sessions begin 200 files each (at most $open open per session)"
pids=
for i in $(seq 1 16); do
	"$H" open "$RK_ADDR" $port h$i 200 "$W/release" >"$W/h$i.out" 2>&1 &
	pids="$pids $!"
done
i=0
until [ "$(cat "$W"/h*.out | grep -c '^holding')" = 16 ]; do
	i=$((i + 1))
	[ $i -lt 300 ] || fail "the 16 sessions did not all get answers: $(cat "$W"/h*.out)"
	sleep 0.5
done
fds=$(ls /proc/$SERVER_PID/fd | wc -l)
echo "16 sessions hold $open files each at most; server fds $fds of 1024"
grep -h '^holding' "$W"/h*.out | sort | uniq -c
random "$W/small" 1000
set +e
"$RK" copy -q "$W/small" "$RK_ADDR:$port:small" 2>"$W/busy.err"
rc=$?
set -e
[ $rc = 3 ] && grep -q "busy" "$W/busy.err" || fail "17th client: exit $rc: $(cat "$W/busy.err")"
cat "$W/busy.err"
touch "$W/release"
n=0
for p in $pids; do
	n=$((n + 1))
	wait "$p" || fail "hostile session $n: $(cat "$W/h$n.out")"
done
i=0
until [ "$(grep -cE ': (done|client disconnected)$' "$W/server.1.log")" -ge 16 ]; do
	i=$((i + 1))
	[ $i -lt 120 ] || fail "the 16 sessions did not end"
	sleep 0.5
done
"$RK" copy -q "$W/small" "$RK_ADDR:$port:small" || fail "client after the 16 sessions"
cmp "$W/small" "$D/small" || fail "small differs"
! grep -qiE "too many open files|EMFILE" "$W/server.1.log" || fail "the server ran out of fds"
stop_server

# Empty slots every second do not keep a session alive.
start_server $port "$D" --idle 4
"$H" idle "$RK_ADDR" $port 1000 40 >"$W/idle.out" || fail "idle session: $(cat "$W/idle.out")"
cat "$W/idle.out"
s=$(sed -n 's/^dropped after \([0-9]*\).*/\1/p' "$W/idle.out")
[ "$s" -ge 3 ] || fail "dropped before the idle limit"
grep -q "less than 1 MiB written in 4 s" "$W/server.2.log" || fail "no idle log line"
stop_server

# Locked memory, as a user without CAP_IPC_LOCK meets it (the test runs as root).
nocap() { setpriv --bounding-set -ipc_lock --inh-caps -ipc_lock -- "$@"; }
random "$W/mid" 3000000
mkdir -p "$D/m"
(
	ulimit -l 65536
	nocap "$RK" serve --dir "$D/m" --addr "$RK_ADDR" --port $((port + 40)) --max-clients 4 \
		>"$W/memlock.log" 2>&1 &
	echo $! >"$W/memlock.pid"
	wait
) &
i=0
until grep -q "listening on" "$W/memlock.log" 2>/dev/null; do
	i=$((i + 1))
	[ $i -lt 200 ] || fail "rk serve under a 64 MiB locked-memory limit: $(cat "$W/memlock.log")"
	sleep 0.05
done
grep "limits:" "$W/memlock.log"
grep -q "locked-memory limit 65536 KiB" "$W/memlock.log" || fail "the limit is not named"
ring=$(sed -n 's/.*ring \([0-9.]*\) MiB each.*/\1/p' "$W/memlock.log")
awk -v r="$ring" 'BEGIN { exit !(r > 4 && r <= 16) }' || fail "ring $ring MiB for 4 sessions in 64 MiB"
nocap "$RK" copy -q "$W/mid" "$RK_ADDR:$((port + 40)):mid" || fail "copy under the limit"
cmp "$W/mid" "$D/m/mid" || fail "mid differs"
kill "$(cat "$W/memlock.pid")"
wait
(
	ulimit -l 8192
	nocap "$RK" serve --dir "$D/m" --addr "$RK_ADDR" --port $((port + 41)) >"$W/memlock2.log" 2>&1 &
	echo $! >"$W/memlock.pid"
	wait
) &
i=0
until grep -q "listening on" "$W/memlock2.log" 2>/dev/null; do
	i=$((i + 1))
	[ $i -lt 200 ] || fail "rk serve under an 8 MiB locked-memory limit: $(cat "$W/memlock2.log")"
	sleep 0.05
done
grep -E "warning: the locked-memory|limits:" "$W/memlock2.log"
grep -q "warning: the locked-memory limit (8192 KiB) fits 1 session of the 16 asked" "$W/memlock2.log" ||
	fail "no warning for 16 sessions in 8 MiB"
nocap "$RK" copy -q "$W/mid" "$RK_ADDR:$((port + 41)):mid2" || fail "copy with one session admitted"
cmp "$W/mid" "$D/m/mid2" || fail "mid2 differs"
kill "$(cat "$W/memlock.pid")"
wait
start_server $port "$D" --max-ring 1M
set +e
"$RK" copy -q "$W/mid" "$RK_ADDR:$port:mid3" 2>"$W/ring.err"
rc=$?
set -e
cat "$W/ring.err"
[ $rc = 3 ] && grep -q -- "--max-ring" "$W/ring.err" || fail "chunk over --max-ring: exit $rc"
"$RK" copy -q --chunk 256K "$W/mid" "$RK_ADDR:$port:mid3" || fail "a chunk that fits"
cmp "$W/mid" "$D/mid3" || fail "mid3 differs"
echo "copy limits: ok"
