#!/bin/sh
# rk copy -r: a tree with nested directories, empty files, an empty
# directory and 1,000 small files arrives identical (diff -r), in one
# session whose slots carry many files each.
. "$(dirname "$0")/lib.sh"
port=7912
D=$W/dir T=$W/src/tree
mkdir -p "$T/a/b/c" "$T/empty-dir" "$T/many"
random "$T/a/top.bin" 300000
random "$T/a/b/mid.bin" 70000
random "$T/a/b/c/deep.bin" 1048577
: >"$T/a/b/c/empty"
: >"$T/empty-too"
# One process writes them all: a fork per file is slow under emulation.
awk -v d="$T/many" 'BEGIN {
	for (i = 0; i < 1000; i++) {
		f = d "/f" i ".txt"
		s = sprintf("file %d ", i)
		for (k = 0; k < i % 97; k++)
			s = s "x"
		print s > f
		close(f)
	}
}' 
start_server $port "$D"
"$RK" copy -r "$T" "$RK_ADDR:$port:dst" >"$W/out" || fail "copy -r"
cat "$W/out"
grep -q "1005 of 1005 files copied" "$W/out" || fail "summary: $(cat "$W/out")"
diff -r "$T" "$D/dst/tree" || fail "trees differ"
[ -d "$D/dst/tree/empty-dir" ] || fail "empty directory missing"
[ -z "$(find "$D" -name '*.rkpart')" ] || fail "temporaries left"
echo "copy tree: ok"
