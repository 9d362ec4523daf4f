#!/bin/sh
# unreachable.sh - a first connect that finds no answer at all (an address
# in the sandbox's own subnet that no host has) fails after one connect
# deadline with exit 4 and says what it most likely means, as scp does for
# a wrong host; with --retries the same connect is retried (a server on its
# way up). Only inside the sandbox's guest: the address must belong to no one.
. "$(dirname "$0")/lib.sh"
[ "${RK_SANDBOX:-}" = vm ] || { echo "unreachable: only in the sandbox guest" >&2; exit 77; }
case $RK_ADDR in
*.*.*.*) nobody=${RK_ADDR%.*}.250 ;;
*) echo "unreachable: needs an IPv4 RK_ADDR" >&2; exit 77 ;;
esac
port=7924
random "$W/f" 1000
t0=$(date +%s)
rc=0
"$RK" copy "$W/f" "$nobody:$port:f" 2>"$W/err" >/dev/null || rc=$?
el=$(($(date +%s) - t0))
cat "$W/err"
[ $rc -eq 4 ] || fail "exit $rc, want 4"
grep -q "a first connect is not retried unless --retries is given" "$W/err" || fail "no word on retrying the first connect"
! grep -q "reconnecting" "$W/err" || fail "retried without --retries"
# One connect deadline (the library's, a few seconds) and nothing more.
[ $el -le 20 ] || fail "took $el s for one unanswered connect"
rc=0
"$RK" copy --retries 1 "$W/f" "$nobody:$port:f" 2>"$W/err2" >/dev/null || rc=$?
cat "$W/err2"
[ $rc -eq 4 ] || fail "--retries 1: exit $rc, want 4"
grep -q "reconnecting in .* (1 of 1" "$W/err2" || fail "--retries 1 did not retry the first connect"
echo "copy unreachable: ok (first connect given up after $el s)"
