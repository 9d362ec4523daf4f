#!/bin/sh
# Exhaustion (see copy_abuse.c). With the fd limit at 1024, 16 sessions
# that each begin 200 files without sending them all get answers: READY,
# or refused with the named --max-open limit, never EMFILE. A 17th client
# is refused busy, and once they are gone a client works. A session that
# only posts empty slots is dropped at --idle.
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
echo "copy limits: ok"
