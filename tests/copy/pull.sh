#!/bin/sh
# Pull: rk copy HOST:SRC DEST from an rk serve --read. A server without
# --read refuses with a message (exit 3); a 64 MiB file and a tree arrive
# identical (also over several lanes), placed by rsync's rules on this
# side, with a progress bar on a terminal; sources outside DIR ('..',
# absolute, through a symlink) are refused by name (exit 3) and symlinks
# inside a tree are skipped; hard-linked files are not served (refused by
# name, left out of a tree); an existing file is kept without --force;
# --resume after the client is killed goes on from the verified prefix; a
# pull whose server is killed and started again reconnects by itself and
# resumes; and a server that sends names outside DEST ('..', absolute, a
# sibling of DEST, through a symlink in DEST) gets them refused by name, with
# nothing written outside DEST; with a token, a pull needs the same token.
. "$(dirname "$0")/lib.sh"
port=7923
S=$W/served L=$W/local
mkdir -p "$S/tree/sub" "$L"
random "$S/big.bin" $((64 << 20))
random "$S/tree/a" 1000
random "$S/tree/sub/b" 300000
random "$S/tree/empty" 0
ln -s /etc/passwd "$S/tree/evil"
ln -s ../big.bin "$S/tree/inside"
ln -s /etc "$S/etc"
secret="outside-DIR-$$-not-for-the-client"
mkdir -p "$S/ltree"
echo "$secret" >"$W/secret"
ln "$W/secret" "$S/hl"
random "$S/ltree/ok" 1000
ln "$W/secret" "$S/ltree/hl"

pull_rc() { # WANT ARGS... - rk copy ARGS, fail unless it exits WANT; stderr in $W/err
	want=$1
	shift
	set +e
	"$RK" copy "$@" 2>"$W/err" >"$W/out"
	got=$?
	set -e
	[ "$got" = "$want" ] || fail "rk copy $*: exit $got, expected $want: $(cat "$W/err" "$W/out")"
}

# 1. Without --read the server refuses, and says how to allow it.
start_server $port "$S"
pull_rc 3 -q "$RK_ADDR:$port:big.bin" "$L/"
grep -q -- "--read" "$W/err" || fail "no word of --read: $(cat "$W/err")"
# somebody listens and said why: no hint that nobody listens, no errno text after the reason
grep -qi "nobody listens\|Connection refused" "$W/err" && fail "a hint contradicts the reason: $(cat "$W/err")"
stop_server

# 1b. With a token, a pull needs the same token: a wrong or missing one is refused.
printf 'sesame\n' >"$W/token"
printf 'open up\n' >"$W/bad"
start_server $port "$S" --read --token-file "$W/token"
pull_rc 3 -q "$RK_ADDR:$port:tree/a" "$L/tok"
grep -q "access token" "$W/err" || fail "missing token: $(cat "$W/err")"
pull_rc 3 -q --token-file "$W/bad" "$RK_ADDR:$port:tree/a" "$L/tok"
grep -q "access token" "$W/err" || fail "wrong token: $(cat "$W/err")"
[ ! -e "$L/tok" ] || fail "a refused pull wrote its file"
pull_rc 0 -q --token-file "$W/token" "$RK_ADDR:$port:tree/a" "$L/tok"
cmp "$S/tree/a" "$L/tok" || fail "tok differs"
stop_server

start_server $port "$S" --read
grep -q "reads allowed" "$log" || fail "the server does not say it serves reads"
# 2. A 64 MiB file into a directory; one onto a new name; one with a progress bar.
"$RK" copy "$RK_ADDR:$port:big.bin" "$L/" >"$W/out" || fail "pull of big.bin: $(cat "$W/out")"
cmp "$S/big.bin" "$L/big.bin" || fail "big.bin differs"
grep -q "1 files received" "$W/out" || fail "summary: $(cat "$W/out")"
"$RK" copy -q "$RK_ADDR:$port:tree/a" "$L/renamed" || fail "pull onto a name"
cmp "$S/tree/a" "$L/renamed" || fail "renamed differs"
# One file onto an existing directory, no trailing '/': it lands inside (rsync's rule).
mkdir "$L/existing"
"$RK" copy -q "$RK_ADDR:$port:tree/a" "$L/existing" || fail "pull into an existing directory"
cmp "$S/tree/a" "$L/existing/a" || fail "existing/a differs"
# Over three lanes: the client connects two more with the session key, the server accepts them.
"$RK" copy -q --num-qp 3 "$RK_ADDR:$port:big.bin" "$L/q3.bin" || fail "pull --num-qp 3"
cmp "$S/big.bin" "$L/q3.bin" || fail "q3.bin differs"
server_log | grep -q "pull over 3 lanes" || fail "the server did not take three lanes"
"$RK" copy -q -r --num-qp 2 "$RK_ADDR:$port:tree" "$L/tq2" || fail "pull -r --num-qp 2"
for f in a sub/b empty; do
	cmp "$S/tree/$f" "$L/tq2/tree/$f" || fail "tq2/tree/$f differs"
done
# On a terminal (script gives the pull one) a progress bar shows, sized by the server's total.
script -qfec "$RK copy $RK_ADDR:$port:big.bin $L/tty.bin" /dev/null </dev/null >"$W/tty" ||
	fail "pull on a terminal: $(cat "$W/tty")"
cmp "$S/big.bin" "$L/tty.bin" || fail "tty.bin differs"
grep -aqE '\] +[0-9]{1,2}% .*ETA' "$W/tty" || fail "no progress bar short of 100%: $(cat -v "$W/tty")"
# 3. A tree: the directory itself, then its contents; symlinks skipped.
"$RK" copy -q -r "$RK_ADDR:$port:tree" "$L/t1" || fail "pull -r tree"
"$RK" copy -q -r --json "$RK_ADDR:$port:tree/" "$L/t2" >"$W/json" || fail "pull -r tree/"
for f in a sub/b empty; do
	cmp "$S/tree/$f" "$L/t1/tree/$f" || fail "t1/tree/$f differs"
	cmp "$S/tree/$f" "$L/t2/$f" || fail "t2/$f differs"
done
[ ! -e "$L/t1/tree/evil" ] && [ ! -e "$L/t1/tree/inside" ] || fail "a symlink was followed"
grep -q '"files_copied":3' "$W/json" || fail "json: $(cat "$W/json")"
# 4. Sources that leave DIR are refused by name.
for src in ../x /etc/passwd etc/passwd tree/evil tree/../../x; do
	pull_rc 3 -q "$RK_ADDR:$port:$src" "$L/"
	grep -qE "not a path under|symbolic link" "$W/err" || fail "$src: $(cat "$W/err")"
done
# 4b. A hard link in DIR to a file outside it (planted by a local user DIR is
# meant to confine): named, the pull is refused by name; inside a tree it is
# left out, the server says so, and nothing of the outside file arrives.
grep -rqs "$secret" "$L" && fail "the secret is under DEST before any pull"
pull_rc 3 -q "$RK_ADDR:$port:hl" "$L/"
grep -q "hard links" "$W/err" || fail "hard link: $(cat "$W/err")"
"$RK" copy -q -r "$RK_ADDR:$port:ltree" "$L/lt" || fail "pull -r ltree"
cmp "$S/ltree/ok" "$L/lt/ltree/ok" || fail "lt/ltree/ok differs"
[ ! -e "$L/hl" ] && [ ! -e "$L/lt/ltree/hl" ] || fail "a hard-linked file was served"
! grep -rqs "$secret" "$L" || fail "the outside file's bytes reached the client"
server_log | grep -q "left out 1 file(s) with more than one hard link (ltree/hl)" ||
	fail "the server does not name the hard link it left out: $(server_log | tail -3)"
pull_rc 3 -q "$RK_ADDR:$port:missing" "$L/"
pull_rc 3 -q "$RK_ADDR:$port:tree" "$L/"
grep -q -- "-r" "$W/err" || fail "a directory without -r: $(cat "$W/err")"
# 5. An existing file is kept without --force, replaced with it.
printf 'mine' >"$L/keep"
pull_rc 1 -q "$RK_ADDR:$port:tree/a" "$L/keep"
[ "$(cat "$L/keep")" = mine ] || fail "an existing file was overwritten"
"$RK" copy -q --force "$RK_ADDR:$port:tree/a" "$L/keep" || fail "--force"
cmp "$S/tree/a" "$L/keep" || fail "keep differs after --force"
wait_size() { # FILE SIZE - until FILE holds at least SIZE bytes
	i=0
	until [ "$(stat -c %s "$1" 2>/dev/null || echo 0)" -ge "$2" ]; do
		i=$((i + 1))
		[ $i -lt 600 ] || fail "the pull did not progress"
		sleep 0.05
	done
}
# 6. The client killed mid-file: --resume goes on from the verified prefix.
mkdir -p "$L/r"
"$RK" copy -q "$RK_ADDR:$port:big.bin" "$L/r/" &
c=$!
wait_size "$L/r/.big.bin.rkpart" $((8 << 20))
kill -9 $c
wait $c 2>/dev/null || true
[ ! -e "$L/r/big.bin" ] || fail "final file visible after the client was killed"
"$RK" copy --resume "$RK_ADDR:$port:big.bin" "$L/r/" >"$W/out" || fail "pull --resume: $(cat "$W/out")"
cmp "$S/big.bin" "$L/r/big.bin" || fail "resumed big.bin differs"
grep -q "(resumed)" "$W/out" || fail "not resumed from a prefix: $(cat "$W/out")"
"$RK" copy --resume "$RK_ADDR:$port:big.bin" "$L/r/" >"$W/out" || fail "pull --resume again"
grep -q "up to date" "$W/out" || fail "not up to date: $(cat "$W/out")"
# 6b. The server killed mid-file and started again: the pull reconnects and resumes.
mkdir -p "$L/k"
"$RK" copy "$RK_ADDR:$port:big.bin" "$L/k/" >"$W/out" 2>"$W/err" &
c=$!
wait_size "$L/k/.big.bin.rkpart" $((8 << 20))
kill -9 "$SERVER_PID"
wait "$SERVER_PID" 2>/dev/null || true
start_server $port "$S" --read
wait $c || fail "pull across a server restart: $(cat "$W/err" "$W/out")"
cmp "$S/big.bin" "$L/k/big.bin" || fail "big.bin differs after the reconnect"
grep -q "reconnecting in" "$W/err" || fail "no word of the reconnect: $(cat "$W/err")"
grep -q "(resumed)" "$W/out" || fail "not resumed from a prefix: $(cat "$W/out")"
grep -qE "[0-9]+ reconnects?" "$W/out" || fail "summary: $(cat "$W/out")"
stop_server

# 7. A hostile server: names outside DEST ('..', absolute, a sibling of DEST,
# through a symlink that DEST holds). The client refuses each name, says so,
# and writes nothing outside DEST.
said_refused() { # what the -q client said on stderr: the refusal, and no hostile name
	grep -q "FAILED.*destination path refused" "$W/err" ||
		fail "$1: no refusal on stderr: $(cat "$W/err" "$W/out")"
}
mkdir -p "$L/h" "$W/outside"
ln -s "$W/outside" "$L/h/lnk"
for evil in ../escape /tmp/rkpull-abs sibling lnk/x; do
	export RK_COPY_TEST_UNCHECKED_NAMES=1 RK_SERVE_TEST_PULL_DEST="$evil"
	start_server $port "$S" --read
	unset RK_COPY_TEST_UNCHECKED_NAMES RK_SERVE_TEST_PULL_DEST
	if [ "$evil" != lnk/x ]; then
		pull_rc 1 -q "$RK_ADDR:$port:tree/a" "$L/h/dest"
		said_refused "$evil"
	fi
	# Into a directory DEST, a sibling of it is beneath it: only the others are out.
	if [ "$evil" != sibling ]; then
		pull_rc 1 -q -r "$RK_ADDR:$port:tree" "$L/h/"
		said_refused "$evil"
	fi
	stop_server
	[ ! -e "$L/escape" ] && [ ! -e "$W/escape" ] && [ ! -e /tmp/rkpull-abs ] &&
		[ ! -e "$L/h/sibling" ] && [ ! -e "$L/h/dest" ] &&
		[ -z "$(ls -A "$W/outside")" ] || fail "$evil: written outside DEST"
done
echo "copy pull: ok"
