#!/bin/sh
# rk copy -r: a tree with nested directories, empty files, an empty
# directory and 1,000 small files arrives identical (diff -r), in one
# session whose slots carry many files each. Then rsync's path rules: a
# trailing '/' copies the contents, one file onto a directory lands in it.
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

"$RK" copy -q -r "$T/a/" "$RK_ADDR:$port:contents" || fail "copy -r a/"
diff -r "$T/a" "$D/contents" || fail "a/: the contents should land in contents/"
"$RK" copy -q -r "$T/a/b" "$RK_ADDR:$port:itself" || fail "copy -r a/b"
diff -r "$T/a/b" "$D/itself/b" || fail "a/b: the directory should land in itself/b"
"$RK" copy -q "$T/a/top.bin" "$RK_ADDR:$port:dst" || fail "a file onto a directory"
cmp "$T/a/top.bin" "$D/dst/top.bin" || fail "a file onto the directory dst should land in it"
"$RK" copy -q "$T/a/top.bin" "$RK_ADDR:$port:renamed" || fail "a file onto a new name"
cmp "$T/a/top.bin" "$D/renamed" || fail "a file onto a new name should take that name"
"$RK" copy -q "$T/a/top.bin" "$RK_ADDR:$port:fresh/" || fail "a file onto dir/"
cmp "$T/a/top.bin" "$D/fresh/top.bin" || fail "a file onto fresh/ should land in it"
[ -z "$(find "$D" -name '*.rkpart')" ] || fail "temporaries left"
echo "path rules: ok"
