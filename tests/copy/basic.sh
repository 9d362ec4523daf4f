#!/bin/sh
# rk copy: edge sizes (0, 1, chunk-1, chunk+1 bytes) and the largest chunk, byte-for-byte identical,
# the summary line and --json; --force; the refusals: an existing file,
# '..', an absolute path and a symlink escaping DIR (sent past the client's
# own check, so the server must refuse them), and a wrong access token.
. "$(dirname "$0")/lib.sh"
port=7911
D=$W/dir S=$W/src
mkdir -p "$S"
chunk=65536
random "$S/zero" 0
random "$S/one" 1
random "$S/chunk-1" $((chunk - 1))
random "$S/chunk+1" $((chunk + 1))
random "$S/multi" $((5 * chunk + 123))
start_server $port "$D"

"$RK" copy --chunk $chunk "$S/zero" "$S/one" "$S/chunk-1" "$S/chunk+1" "$S/multi" \
	"$RK_ADDR:$port:edge/" >"$W/out" || fail "copy of edge sizes"
grep -q "5 of 5 files copied" "$W/out" || fail "summary line: $(cat "$W/out")"
for f in zero one chunk-1 chunk+1 multi; do
	cmp "$S/$f" "$D/edge/$f" || fail "$f differs"
done
# Nothing but the final files: no temporaries left behind.
[ "$(ls -A "$D/edge" | wc -l)" = 5 ] || fail "extra files in $D/edge: $(ls -A "$D/edge")"

# The largest chunk: a slot's records and its data in one 8 MiB work request.
random "$S/big" $((9 * 1048576))
"$RK" copy -q --chunk 8188K "$S/big" "$RK_ADDR:$port:big.bin" || fail "copy with --chunk 8188K"
cmp "$S/big" "$D/big.bin" || fail "big.bin differs"
expect_rc 2 "$RK" copy -q --chunk 8M "$S/big" "$RK_ADDR:$port:big2.bin"

# A single file to an explicit name, default chunk; --json summary.
"$RK" copy --json "$S/multi" "$RK_ADDR:$port:renamed.bin" >"$W/json" || fail "copy to a name"
cmp "$S/multi" "$D/renamed.bin" || fail "renamed.bin differs"
grep -q '"files_copied":1' "$W/json" || fail "json: $(cat "$W/json")"
grep -q '"exit_code":0' "$W/json" || fail "json: $(cat "$W/json")"

# Existing file: refused (exit 3), untouched; --force overwrites.
random "$S/other" 1000
expect_rc 3 "$RK" copy -q "$S/other" "$RK_ADDR:$port:renamed.bin"
cmp "$S/multi" "$D/renamed.bin" || fail "existing file was modified"
"$RK" copy -q --force "$S/other" "$RK_ADDR:$port:renamed.bin" || fail "--force"
cmp "$S/other" "$D/renamed.bin" || fail "--force did not overwrite"

# Hostile names, refused by the client itself (usage error) ...
expect_rc 2 "$RK" copy -q "$S/one" "$RK_ADDR:$port:../escape"
# ... and, sent anyway, by the server (exit 3), with nothing written outside DIR.
mkdir -p "$W/outside"
ln -s "$W/outside" "$D/link"
export RK_COPY_TEST_UNCHECKED_NAMES=1
expect_rc 3 "$RK" copy -q "$S/one" "$RK_ADDR:$port:../escape"
expect_rc 3 "$RK" copy -q "$S/one" "$RK_ADDR:$port:a/../../escape"
expect_rc 3 "$RK" copy -q "$S/one" "$RK_ADDR:$port:$W/outside/abs"
expect_rc 3 "$RK" copy -q "$S/one" "$RK_ADDR:$port:link/through-symlink"
expect_rc 3 "$RK" copy -q "$S/one" "$RK_ADDR:$port:link/"
unset RK_COPY_TEST_UNCHECKED_NAMES
[ -z "$(ls -A "$W/outside")" ] || fail "something was written outside DIR: $(ls -A "$W/outside")"
[ ! -e "$W/escape" ] || fail "../escape was created"
stop_server

# Access token: right one works, wrong and missing ones are refused before any data.
printf 'sesame\n' >"$W/token"
printf 'wrong\n' >"$W/bad"
start_server $((port)) "$D" --token-file "$W/token"
"$RK" copy -q --token-file "$W/token" "$S/one" "$RK_ADDR:$port:tok/one" || fail "right token"
cmp "$S/one" "$D/tok/one" || fail "tok/one differs"
expect_rc 3 "$RK" copy --token-file "$W/bad" "$S/one" "$RK_ADDR:$port:tok/two" 2>"$W/err"
grep -q "access token" "$W/err" || fail "wrong token message: $(cat "$W/err")"
expect_rc 3 "$RK" copy -q "$S/one" "$RK_ADDR:$port:tok/three"
[ ! -e "$D/tok/two" ] && [ ! -e "$D/tok/three" ] || fail "refused client wrote a file"
echo "copy basic: ok"
