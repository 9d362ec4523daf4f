#!/bin/sh
# hostile.sh cross|rewrite - clients that attack rk serve through the ring
# (see copy_hostile.c): a write into another session's ring fails on the
# attacker's QP and the victim's file arrives as sent; a slot rewritten after
# posting is committed as hashed or refused, never verified otherwise. Then
# a real client is still served.
. "$(dirname "$0")/lib.sh"
mode=${1:?usage: hostile.sh cross|rewrite}
case $mode in
cross) port=7921 ;;
*) port=7922 ;;
esac
start_server $port "$W/dir"
"$RK_BUILD/tests/copy/copy_hostile" "$mode" "$RK_ADDR" $port "$W/dir" || fail "copy_hostile $mode"
if [ "$mode" = cross ]; then
	grep -q "victim.bin .*verified" "$W/server.1.log" || fail "victim.bin not logged as verified"
	! grep -q stolen "$W/server.1.log" || fail "the forged name reached the server"
	[ ! -e "$W/dir/stolen.bin" ] && [ ! -e "$W/dir/.stolen.bin.rkpart" ] || fail "stolen.bin exists"
fi
random "$W/f" 100000
"$RK" copy -q "$W/f" "$RK_ADDR:$port:f" || fail "copy after the attack"
cmp "$W/f" "$W/dir/f" || fail "f differs"
echo "copy hostile $mode: ok"
