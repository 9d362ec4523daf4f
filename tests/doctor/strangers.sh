#!/bin/sh
# rk doctor --listen among strangers (one host, RK_ADDR).
# With --token-file, while 16 idle connections, a slow one, garbage, a hello with
# a wrong token, one without, a huge frame and a hello cut short by its sender's
# close keep coming back (more than the 16 it keeps waiting):
#   - rk doctor with the token passes every step, in about its usual time
#   - a wrong token and a missing one are refused, saying so
#   - no stranger gets any of the host's facts; those that do not speak rk
#     doctor's frames get nothing at all, the others only why they are refused
#   - the listener logs every kind of refusal, and lets each go within 2 s
# Without --token-file, an rk doctor client that says hello and then stalls:
#   - another client is told "busy" at once
#   - once the stalled one is gone, a client with a token passes, told that
#     the listener checks no token
set -eu
RK=${RK_BUILD:?}/tools/rk/rk
here=$(cd "$(dirname "$0")" && pwd)
addr=${RK_ADDR:?}
port=18519
W=$(mktemp -d "${TMPDIR:-/tmp}/rkstrangers.XXXXXX")
lis= str= hold=
cleanup() {
	touch "$W/str/stop" "$W/hold/stop" 2>/dev/null || true
	[ -z "$lis" ] || kill "$lis" 2>/dev/null || true
	[ -z "$str" ] || kill "$str" 2>/dev/null || true
	[ -z "$hold" ] || kill "$hold" 2>/dev/null || true
	wait || true
	rm -rf "$W"
}
trap cleanup EXIT
mkdir -p "$W/str" "$W/hold"
fail() {
	echo "FAIL: $*" >&2
	for f in "$W"/lis*.log; do
		echo "--- $f" >&2
		cat "$f" >&2
	done
	exit 1
}
now_ms() { echo $(($(date +%s%N) / 1000000)); }
# doctor NAME ARGS... - rk doctor ARGS, output in $W/NAME, exit in $rc, time in $ms
doctor() {
	name=$1
	shift
	t0=$(now_ms)
	rc=0
	"$RK" doctor "$@" >"$W/$name" 2>&1 || rc=$?
	ms=$(($(now_ms) - t0))
	echo "--- $(date +%T) $name: exit $rc in $ms ms"
	cat "$W/$name"
}
has() { grep -q -- "$2" "$W/$1" || fail "$1: no '$2'"; }
# listen LOG ARGS... - rk doctor --listen in the background, started
listen() {
	log=$1
	shift
	"$RK" doctor --listen --addr "$addr" --port $port "$@" 2>"$W/$log" &
	lis=$!
	i=0
	until grep -q listening "$W/$log" 2>/dev/null; do
		i=$((i + 1))
		[ $i -lt 300 ] || fail "rk doctor --listen did not start"
		sleep 0.1
	done
}
# ready FILE - wait until FILE says ready
ready() {
	i=0
	until grep -q ready "$1" 2>/dev/null; do
		i=$((i + 1))
		[ $i -lt 300 ] || fail "$1: not ready"
		sleep 0.1
	done
}

printf 'the token of this test\n' >"$W/tok"
printf 'not that token\n' >"$W/bad"

# Alone first: the usual time of a passing run here.
listen lis.log --token-file "$W/tok"
doctor alone --token-file "$W/tok" "$addr:$port"
[ $rc -eq 0 ] || fail "alone: exit $rc"
alone_ms=$ms

python3 "$here/strangers.py" "$addr" $port "$W/str" 120 >"$W/str.out" &
str=$!
# the stalled client of the last part, started now (python starts slowly in the guest)
python3 "$here/strangers.py" hold "$addr" $port "$W/hold" 120 >"$W/hold.out" &
hold=$!
ready "$W/str.out"
sleep 1 # every kind has been read and judged once, the idle ones wait

# With the token, among strangers: every step passes, about as fast.
doctor ok --token-file "$W/tok" "$addr:$port"
[ $rc -eq 0 ] || fail "ok: exit $rc"
has ok "all 8 steps passed"
[ $ms -lt $((alone_ms * 3 + 5000)) ] || fail "ok: $ms ms among strangers, $alone_ms alone"
# the host's facts reached the client (so their absence below means something)
host=$(uname -n)
kernel=$(uname -r)
has ok "($host, $addr): rk doctor --listen"
has ok "rk doctor --listen, rk [^,]*, kernel $kernel,"

# A wrong token and none: refused, saying why.
doctor wrong --token-file "$W/bad" "$addr:$port"
[ $rc -eq 1 ] || fail "wrong: exit $rc"
has wrong "refused the test: wrong token: --token-file must hold the token"
doctor none "$addr:$port"
[ $rc -eq 1 ] || fail "none: exit $rc"
has none "refused the test: this rk doctor --listen requires a token"
doctor nofile --token-file "$W/absent" "$addr:$port"
[ $rc -eq 2 ] || fail "nofile: exit $rc"
has nofile "rk doctor: token: .*absent: No such file"

echo "--- $(date +%T) strangers stop"
touch "$W/str/stop"
wait $str
str=
cat "$W/str/report"
# None of the strangers got a byte of the host's facts; the silent ones got nothing.
for k in idle slow garbage wrong none huge cut; do
	! grep -qF -e "$host" -e "$kernel" -e '"facts"' -e '"welcome"' "$W/str/$k" ||
		fail "stranger $k got facts: $(cat "$W/str/$k")"
done
for k in idle garbage cut; do
	[ ! -s "$W/str/$k" ] || fail "stranger $k got an answer: $(cat "$W/str/$k")"
done
grep -q '"t":"error","text":"no whole hello within 2000 ms' "$W/str/slow" || fail "slow: not told"
grep -q '"t":"error","text":"wrong token' "$W/str/wrong" || fail "wrong: not told"
grep -q '"t":"error","text":"this rk doctor --listen requires a token' "$W/str/none" ||
	fail "none: not told"
grep -q '"t":"error","text":"a first message of 1073741824 bytes' "$W/str/huge" ||
	fail "huge: not told"
# every kind let go, the silent and the slow within DOC_HELLO_MS (2 s; room for a slow guest)
while read -r k _ n _ held; do
	[ "$n" -ge 1 ] || fail "stranger $k: never let go"
	[ "$held" -lt 6000 ] || fail "stranger $k: held $held ms"
done <"$W/str/report"
# ... and the listener said why, for every kind.
for why in "refused: not rk doctor: it sent \"GET / HT\"" \
	"refused: wrong token" "refused: this rk doctor --listen requires a token" \
	"refused: a first message of 1073741824 bytes" \
	"refused: closed after 19 bytes, before its hello" \
	"refused: no whole hello within 2000 ms (0 bytes came)" \
	"refused: no whole hello within 2000 ms ([0-9]* bytes came)" \
	"refused: dropped: 16 connections waiting for their hello" \
	"rk doctor client with the token, its test begins"; do
	grep -q "$why" "$W/lis.log" || fail "the listener did not log '$why'"
done
kill $lis
wait $lis || true
lis=
echo "--- $(date +%T) without a token"

# No token at the listener: any rk doctor client. One that says hello and stalls holds
# the test (up to the listener's --timeout for its facts); another is told so at once.
listen lis2.log --timeout 4000ms
touch "$W/hold/go"
ready "$W/hold.out"
echo "--- $(date +%T) the stalled client is there"
i=0
until grep -q "its test begins" "$W/lis2.log"; do
	i=$((i + 1))
	[ $i -lt 100 ] || fail "the stalled client was not admitted"
	sleep 0.1
done
doctor busy "$addr:$port"
[ $rc -eq 1 ] || fail "busy: exit $rc"
has busy "refused the test: busy with another peer's test (for [0-9]* s at most): try again"
[ $ms -lt 10000 ] || fail "busy: took $ms ms to say so"
touch "$W/hold/stop"
wait $hold
hold=
grep -q '"t":"welcome","checked":0' "$W/hold/holder" || fail "holder: no welcome"
! grep -qF -e "$host" -e "$kernel" "$W/hold/holder" || fail "holder: facts without its own"
i=0
until grep -q "no facts after the welcome" "$W/lis2.log"; do
	i=$((i + 1))
	[ $i -lt 100 ] || fail "the stalled client's test did not end"
	sleep 0.1
done
doctor open --token-file "$W/tok" "$addr:$port"
[ $rc -eq 0 ] || fail "open: exit $rc"
has open "all 8 steps passed"
has open "! token .*does not check tokens (no --token-file there)"
echo "rk doctor among strangers: ok"
