#!/bin/sh
# rk serve refuses forged lane joins, old clients and a slot out of sequence
# (see copy_join.c), and still serves a real client afterwards.
. "$(dirname "$0")/lib.sh"
port=7916
start_server $port "$W/dir"
"$RK_BUILD/tests/copy/copy_join" "$RK_ADDR" $port || fail "copy_join"
random "$W/f" 100000
"$RK" copy -q --num-qp 2 "$W/f" "$RK_ADDR:$port:f" || fail "copy after the forged joins"
cmp "$W/f" "$W/dir/f" || fail "f differs"
grep -q "refused a lane for an unknown session" "$W/server.1.log" || fail "no log line for the forged lane"
grep -q "protocol error; connection closed" "$W/server.1.log" || fail "no log line for the bad sequence"
echo "copy join: ok"
