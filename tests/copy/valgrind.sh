#!/bin/sh
# rk serve and rk copy under valgrind: a 3 MiB + 5 byte file over two lanes
# (threads, the lane registry, the reorder window) and a small tree over
# one; both processes must end with no leak and no memory error. The
# server is stopped with SIGTERM, its normal way out.
. "$(dirname "$0")/lib.sh"
port=7920
vg="valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect"
vg="$vg --suppressions=$(dirname "$0")/../../examples/valgrind.supp"
S=$W/src
mkdir -p "$S/tree/sub" "$W/dir"
random "$S/big" $((3 * 1048576 + 5))
for i in 1 2 3 4 5; do random "$S/tree/sub/f$i" $((i * 1000)); done
$vg "$RK" serve --dir "$W/dir" --addr "$RK_ADDR" --port $port --idle 60 >"$W/server.1.log" 2>&1 &
SERVER_PID=$!
i=0
until grep -q "listening on" "$W/server.1.log" 2>/dev/null; do
	i=$((i + 1))
	[ $i -lt 600 ] || fail "rk serve did not start under valgrind"
	sleep 0.1
done
# --retries: under valgrind beside another test, the server may answer a
# connect later than its 5 s step (one run saw it), and a first connect is
# retried only when asked.
$vg "$RK" copy -q --retries 3 --num-qp 2 "$S/big" "$RK_ADDR:$port:big" || fail "copy --num-qp 2 under valgrind"
$vg "$RK" copy -q --retries 3 -r "$S/tree" "$RK_ADDR:$port:t" || fail "copy -r under valgrind"
cmp "$S/big" "$W/dir/big" || fail "big differs"
diff -r "$S/tree" "$W/dir/t/tree" || fail "trees differ"
kill -TERM "$SERVER_PID"
set +e
wait "$SERVER_PID"
rc=$?
set -e
SERVER_PID=
[ $rc = 0 ] || fail "rk serve under valgrind exited $rc"
echo "copy valgrind: ok"
