#!/bin/sh
# test.sh BIN PORT [valgrind] - ex02_read_write in write mode (on PORT) and
# read mode (on PORT+1): each side must print the peer's exact message.  Also
# checks that bad arguments and a --mode mismatch end with a clear message.
# Runs inside scripts/softroce.
set -eu
bin=$1 port=$2
addr=${RK_ADDR:?run me inside scripts/softroce}
# With 'valgrind', one side of each pair runs under valgrind - the server in
# write mode, the client in read mode - so every line of the program is
# checked at half the cost of running both sides under it twice.
vg= svg= cvg=
if [ "${3:-}" = valgrind ]; then
	vg="valgrind -q --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,indirect"
	vg="$vg --suppressions=$(dirname "$0")/../valgrind.supp"
fi
dir=$(mktemp -d)
server=
trap '[ -z "$server" ] || kill $server 2>/dev/null; rm -rf "$dir"' EXIT
fail() {
	echo "ex02 test: $*" >&2
	for f in "$dir"/*.out; do echo "--- $f"; cat "$f"; done >&2
	exit 1
}

# run_pair PORT SERVER_MODE CLIENT_MODE NAME: server in the background, wait
# until it listens, then the client; exit statuses in $src and $crc.
run_pair() {
	[ "$2" = write ] && svg=$vg cvg= || svg= cvg=$vg
	timeout 120 $svg "$bin" -t 60 -p "$1" -M "$2" -m "server:$2:$4 <-- exact" server "$addr" \
		>"$dir/$4.server.out" 2>&1 &
	server=$!
	i=0
	until grep -q "listening" "$dir/$4.server.out"; do
		kill -0 $server 2>/dev/null || fail "$4: server died before listening"
		i=$((i + 1)); [ $i -le 600 ] || fail "$4: server not listening after 60 s"
		sleep 0.1
	done
	crc=0; timeout 90 $cvg "$bin" -t 60 -p "$1" -M "$3" -m "client:$3:$4 --> exact!" client \
		"$addr" >"$dir/$4.client.out" 2>&1 || crc=$?
	src=0; wait $server || src=$?
	server=
}

if [ -z "$vg" ]; then
	"$bin" --help | grep -q usage || fail "--help"
	rc=0; "$bin" -M copy client "$addr" 2>"$dir/args.out" || rc=$?
	[ $rc = 2 ] && grep -q -- "--mode" "$dir/args.out" || fail "bad --mode: exit $rc"
	run_pair $((port + 50)) write read mismatch
	[ $src = 1 ] && [ $crc = 1 ] || fail "mode mismatch: exits $src $crc"
	grep -q "same --mode" "$dir/mismatch.server.out" || fail "mismatch not explained"
fi

n=0
for mode in write read; do
	run_pair $((port + n)) $mode $mode $mode
	n=$((n + 1))
	[ $src = 0 ] && [ $crc = 0 ] || fail "$mode: exits server $src client $crc"
	cmsg="client:$mode:$mode --> exact!" smsg="server:$mode:$mode <-- exact"
	grep -qxF "peer's message ($mode, ${#cmsg} bytes): \"$cmsg\"" "$dir/$mode.server.out" ||
		fail "$mode: server did not print the client's message"
	grep -qxF "peer's message ($mode, ${#smsg} bytes): \"$smsg\"" "$dir/$mode.client.out" ||
		fail "$mode: client did not print the server's message"
	cat "$dir/$mode.server.out" "$dir/$mode.client.out"
done
echo "ex02 test: OK"
