#!/bin/sh
# Kill and resume, over and over: each round starts a copy of a big file and
# a tree of small files with --resume, SIGKILLs the client or the server at
# a random moment, restarts the server if it was the one killed, and runs
# 'rk copy -r --resume' to completion - while the first client, when only
# the server died, is still reconnecting on its own (so two copies of the
# same files meet, and a session the server has not seen end yet may hold
# their locks). Every command runs under a timeout (the first client under a
# watchdog, so that the kill reaches rk itself). Checked each round: no
# hang; no file visible under its final name that differs from its source,
# before or after the resume; the resume exits 0 (never "busy" or
# "destination exists" for a file that is there and identical), and so does
# a first client that survived; the trees are identical, no temporary left.
#
# RK_SOAK_ROUNDS (default 4) rounds; RK_SOAK_MIB (default 48) MiB big file;
# RK_SOAK_SEED to replay the choices of a run.
. "$(dirname "$0")/lib.sh"
port=7937
rounds=${RK_SOAK_ROUNDS:-4}
mib=${RK_SOAK_MIB:-48}
seed=${RK_SOAK_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
echo "resume soak: $rounds rounds, $mib MiB + 200 files, seed $seed"
S=$W/src D=$W/dir
mkdir -p "$S/tree/a/b" "$S/tree/c"
random "$S/big.bin" $((mib << 20))
# One process writes the 200 small files (a fork per file is slow under emulation).
awk -v d="$S/tree" 'BEGIN {
	for (i = 0; i < 200; i++) {
		f = d "/" (i % 3 == 0 ? "a" : i % 3 == 1 ? "a/b" : "c") "/f" i ".txt"
		s = sprintf("file %d ", i)
		for (k = 0; k < (i * 37) % 3000; k++)
			s = s "y"
		print s > f
		close(f)
	}
}'
start_server $port "$D" --idle 20

# rnd N - R = the next pseudo-random number in 0..N-1 (from the seed: replayable).
rnd() {
	seed=$(((seed * 1103515245 + 12345) % 2147483648))
	R=$((seed / 256 % $1))
}

# now_ms - a clock in milliseconds.
now_ms() {
	echo $(($(date +%s%N) / 1000000))
}

# no_partial WHEN - every file under its final name is its source, byte for
# byte; missing files and temporaries are fine. One diff for the whole tree
# (a process per file is slow under emulation).
no_partial() {
	diff -rq "$S" "$D" >"$W/diff.out" 2>&1 || true
	if grep -v "^Only in $S\|^Only in $D[^:]*: \..*\.rkpart\$" "$W/diff.out" >"$W/bad.out"; then
		fail "$1: files visible that differ from their source: $(cat "$W/bad.out")"
	fi
}

# watchdog PID SECONDS - SIGKILL PID after SECONDS (and leave $W/hung) unless
# stop_dog comes first. Not timeout(1) for the first client: the kill of a
# round must reach rk itself, not a wrapper that would leave rk running.
watchdog() {
	rm -f "$W/hung"
	(
		sleep "$2" &
		s=$!
		trap 'kill $s 2>/dev/null; exit 0' TERM
		wait $s
		touch "$W/hung"
		kill -9 "$1" 2>/dev/null
	) >/dev/null 2>&1 &
	DOG=$!
}

stop_dog() {
	[ -n "$DOG" ] || return 0
	kill "$DOG" 2>/dev/null || true
	wait "$DOG" 2>/dev/null || true
	DOG=
}

# On the way out, a failed round's first client and its dog go too.
c= DOG=
trap '[ -z "$c" ] || kill -9 "$c" 2>/dev/null; stop_dog; cleanup' EXIT

# One full copy first: how long one takes here sets the range of the kill moments.
t0=$(now_ms)
timeout 120 "$RK" copy -q -r "$S/big.bin" "$S/tree" "$RK_ADDR:$port:" || fail "first full copy"
full=$(($(now_ms) - t0))
diff -r "$S" "$D" >/dev/null || fail "first full copy differs"
echo "a full copy takes $full ms"

for round in $(seq 1 "$rounds"); do
	rm -rf "${D:?}"/* "$D"/.[!.]*
	rnd 2
	lanes=$((1 + R))
	rnd $((full + 1))
	at=$R
	rnd 2
	who=client
	[ $R = 0 ] || who=server
	echo "round $round: --num-qp $lanes, kill -9 the $who after $at ms"
	t1=$(now_ms)
	"$RK" copy -q -r --resume --num-qp $lanes "$S/big.bin" "$S/tree" \
		"$RK_ADDR:$port:" >"$W/first.out" 2>&1 &
	c=$!
	watchdog $c 120
	sleep "$((at / 1000)).$(printf %03d $((at % 1000)))"
	if [ $who = client ]; then
		kill -9 $c 2>/dev/null || true
		wait $c 2>/dev/null || true
		stop_dog
		c=
	else
		kill -9 "$SERVER_PID"
		wait "$SERVER_PID" 2>/dev/null || true
		SERVER_PID=
		no_partial "round $round, server killed"
		start_server $port "$D" --idle 20
	fi
	no_partial "round $round, after the kill"
	t0=$(now_ms)
	set +e
	timeout 120 "$RK" copy -r --resume --num-qp $lanes "$S/big.bin" "$S/tree" \
		"$RK_ADDR:$port:" >"$W/resume.out" 2>&1
	rc=$?
	set -e
	echo "  resume: exit $rc in $(($(now_ms) - t0)) ms"
	[ $rc != 124 ] || fail "round $round: the resume hung (killed after 120 s)"
	[ $rc = 0 ] || fail "round $round: the resume exited $rc: $(cat "$W/resume.out")"
	if [ -n "$c" ]; then
		# The first client outlived the server: it reconnects and ends on its own.
		set +e
		wait $c
		rc=$?
		set -e
		stop_dog
		c=
		[ ! -e "$W/hung" ] || fail "round $round: the first client hung: $(cat "$W/first.out")"
		# Nobody listening at its very first connect is a wrong address to it (exit 4).
		[ $rc = 0 ] || { [ $rc = 4 ] && grep -q "cannot connect.*nobody listens" "$W/first.out"; } ||
			fail "round $round: the first client exited $rc: $(cat "$W/first.out")"
		echo "  first client: exit $rc"
	fi
	diff -r "$S" "$D" >/dev/null || fail "round $round: the trees differ after the resume"
	[ -z "$(find "$D" -name '*.rkpart')" ] || fail "round $round: temporaries left"
	tail -n 1 "$W/resume.out"
	echo "  round $round: $(($(now_ms) - t1)) ms"
done
kill -0 "$SERVER_PID" || fail "the server died"
echo "copy resume soak: ok ($rounds rounds)"
