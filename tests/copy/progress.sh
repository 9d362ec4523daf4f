#!/bin/sh
# progress.sh - what a user sees during and after a tree copy: with
# --progress (stderr not a terminal) plain progress lines give bytes done of
# the total in IEC units, files done of the total, a rate in the same unit
# family and an ETA; the summary line names no bits. Copied again without
# --force, every file is refused: a few are named, the rest counted, and
# one line counts them by reason and names --force and --resume; exit 3,
# and the summary does not call it a failure.
. "$(dirname "$0")/lib.sh"
port=7925
start_server $port "$W/dir"
mkdir -p "$W/tree/sub"
for i in 1 2 3 4 5 6; do random "$W/tree/f$i" 1500000; done
random "$W/tree/sub/a" 1000
random "$W/tree/sub/b" 0
"$RK" copy -r --progress "$W/tree" "$RK_ADDR:$port:" >"$W/out" 2>"$W/err" || fail "first copy: $(cat "$W/err")"
cat "$W/err" "$W/out"
grep -Eq '^\[[#-]+\] +[0-9]+% [0-9.]+ [KMG]?i?B / 8\.[0-9]+ MiB, [0-9]/8 files, [0-9.]+ [KMG]iB/s, ETA ' "$W/err" ||
	fail "no progress line with bytes, files, rate and ETA"
tail -1 "$W/err" | grep -q ' 100% .*, 8/8 files, ' || fail "the last progress line is not 8/8 files: $(tail -1 "$W/err")"
grep -q '^rk copy: 8 of 8 files copied (8\.[0-9]* MiB) in .* s, [0-9.]* [KMG]iB/s, verified xxh3-128$' "$W/out" ||
	fail "summary: $(cat "$W/out")"
grep -q 'b/s' "$W/out" "$W/err" && fail "a rate in bits beside sizes in bytes"
rc=0
"$RK" copy -r "$W/tree" "$RK_ADDR:$port:" >"$W/out2" 2>"$W/err2" || rc=$?
cat "$W/err2" "$W/out2"
[ $rc -eq 3 ] || fail "refused tree: exit $rc, want 3"
[ "$(grep -c ': destination exists' "$W/err2")" -eq 5 ] || fail "not 5 refusals named"
grep -q '^rk copy: \.\.\. and 3 more refused$' "$W/err2" || fail "the rest not counted"
grep -q '^rk copy: 8 files refused: 8 exist on the server (--force replaces them; --resume' "$W/err2" ||
	fail "no summary of the refusals naming --force and --resume"
grep -q 'FAILED' "$W/out2" && fail "a refusal summarized as FAILED"
echo "copy progress: ok"
