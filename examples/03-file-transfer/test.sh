#!/bin/sh
# test.sh BIN PORT [valgrind] - ex03_file_transfer end to end in this host:
#   - five transfers of one random 64 MiB file, each stored byte-identical and
#     both sides printing the same xxh3 (ports PORT..PORT+4);
#   - a name with ../ refused, nothing written outside the directory;
#   - an existing file refused without -f, replaced with -f.
# With 'valgrind': one 3 MiB + 5 byte transfer (a short last chunk), both
# sides under valgrind, no leak and no error.  Runs inside scripts/softroce.
set -eu
bin=$1 port=$2
addr=${RK_ADDR:?run me inside scripts/softroce}
vg=
if [ "${3:-}" = valgrind ]; then
	vg="valgrind -q --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,indirect"
	vg="$vg --suppressions=$(dirname "$0")/../valgrind.supp"
fi
dir=$(mktemp -d)
mkdir "$dir/src" "$dir/dst" "$dir/log"
server=
trap '[ -z "$server" ] || kill $server 2>/dev/null; rm -rf "$dir"' EXIT
fail() {
	echo "ex03 test: $*" >&2
	for f in "$dir"/log/*; do echo "--- $f"; cat "$f"; done >&2
	exit 1
}

# transfer TAG PORT SERVER_OPTS FILE [CLIENT_OPTS...]: server in dst/ in the
# background, wait until it listens, run the client; exits in $src, $crc.
transfer() {
	tag=$1 p=$2 sopts=$3 file=$4
	shift 4
	(cd "$dir/dst" && exec timeout 200 $vg "$bin" -t 60 -p "$p" $sopts server "$addr") \
		>"$dir/log/$tag.server" 2>&1 &
	server=$!
	i=0
	until grep -q "listening" "$dir/log/$tag.server"; do
		kill -0 $server 2>/dev/null || fail "$tag: server died before listening"
		i=$((i + 1)); [ $i -le 600 ] || fail "$tag: server not listening after 60 s"
		sleep 0.1
	done
	crc=0; timeout 200 $vg "$bin" -t 60 -p "$p" "$@" client "$addr" "$file" \
		>"$dir/log/$tag.client" 2>&1 || crc=$?
	src=0; wait $server || src=$?
	server=
}

# check TAG FILE NAME: the stored copy is identical and both printed one hash.
check() {
	[ $src = 0 ] && [ $crc = 0 ] || fail "$1: exits server $src client $crc"
	cmp "$2" "$dir/dst/$3" || fail "$1: stored bytes differ"
	sh=$(sed -n 's/^received .* xxh3 \([0-9a-f]*\)$/\1/p' "$dir/log/$1.server")
	ch=$(sed -n 's/^sent .* xxh3 \([0-9a-f]*\)$/\1/p' "$dir/log/$1.client")
	[ -n "$sh" ] && [ "$sh" = "$ch" ] || fail "$1: hashes '$sh' and '$ch'"
	grep -h -e "^sent" "$dir/log/$1.client"
}

if [ -n "$vg" ]; then
	head -c $((3 * 1048576 + 5)) /dev/urandom >"$dir/src/small.bin"
	transfer vg "$port" "" "$dir/src/small.bin" -c 1M
	check vg "$dir/src/small.bin" small.bin
	echo "ex03 test (valgrind): OK"
	exit 0
fi

"$bin" --help | grep -q usage || fail "--help"
rc=0; "$bin" -c 16M client "$addr" x 2>"$dir/log/args" || rc=$?
[ $rc = 2 ] && grep -q -- "--chunk" "$dir/log/args" || fail "bad --chunk: exit $rc"

head -c $((64 * 1048576)) /dev/urandom >"$dir/src/data.bin"
for n in 1 2 3 4 5; do
	transfer "run$n" $((port + n - 1)) "" "$dir/src/data.bin" -n "copy$n.bin"
	check "run$n" "$dir/src/data.bin" "copy$n.bin"
	rm -f "$dir/dst/copy$n.bin"
done

# A hostile name: refused by the server, nothing created outside dst/.
head -c 1000 /dev/urandom >"$dir/src/small.bin"
transfer escape $((port + 5)) "" "$dir/src/small.bin" -n ../escaped.bin
[ $src = 1 ] && [ $crc = 1 ] || fail "../ name: exits server $src client $crc"
grep -q "refused file name '../escaped.bin'" "$dir/log/escape.server" || fail "no refusal (server)"
grep -q "server refused" "$dir/log/escape.client" || fail "no refusal (client)"
[ ! -e "$dir/escaped.bin" ] || fail "../escaped.bin was written"

# An existing file: refused without -f (and left alone), replaced with -f.
echo "keep me" >"$dir/dst/small.bin"
transfer exists $((port + 6)) "" "$dir/src/small.bin"
[ $src = 1 ] && [ $crc = 1 ] || fail "existing file: exits server $src client $crc"
grep -q "exists" "$dir/log/exists.client" || fail "no 'exists' refusal"
[ "$(cat "$dir/dst/small.bin")" = "keep me" ] || fail "existing file was touched"
transfer force $((port + 6)) "-f" "$dir/src/small.bin"
check force "$dir/src/small.bin" small.bin
echo "ex03 test: OK"
