# lib.sh - shared helpers for the rk copy tests (sourced; POSIX sh).
# Needs RK_BUILD (set by ctest) and RK_ADDR (set by the sandbox).
set -eu
RK=${RK_BUILD:?}/tools/rk/rk
: "${RK_ADDR:?run inside scripts/softroce}"
W=$(mktemp -d "${TMPDIR:-/tmp}/rkcopy.XXXXXX")
SERVER_PID=

fail() {
	echo "FAIL: $*" >&2
	echo "--- server log" >&2
	server_log >&2
	exit 1
}

# start_server PORT DIR [ARGS...] - run rk serve in the background, wait until
# it listens. Each start logs to its own file; server.log is all of them.
NSTART=0
start_server() {
	port=$1 dir=$2
	shift 2
	mkdir -p "$dir"
	NSTART=$((NSTART + 1))
	log=$W/server.$NSTART.log
	"$RK" serve --dir "$dir" --addr "$RK_ADDR" --port "$port" "$@" >"$log" 2>&1 &
	SERVER_PID=$!
	i=0
	until grep -q "listening on .*:$port" "$log" 2>/dev/null; do
		i=$((i + 1))
		[ $i -lt 200 ] || fail "rk serve did not start"
		kill -0 "$SERVER_PID" 2>/dev/null || fail "rk serve exited"
		sleep 0.05
	done
}

# server_log - every server start's log so far, in order.
server_log() {
	cat "$W"/server.*.log 2>/dev/null
}

stop_server() {
	[ -n "$SERVER_PID" ] || return 0
	kill "$SERVER_PID" 2>/dev/null || true
	wait "$SERVER_PID" 2>/dev/null || true
	SERVER_PID=
}

cleanup() {
	stop_server
	rm -rf "$W"
}
trap cleanup EXIT

# expect_rc WANT CMD... - run CMD, fail unless it exits with WANT.
expect_rc() {
	want=$1
	shift
	set +e
	"$@"
	got=$?
	set -e
	[ "$got" = "$want" ] || fail "'$*' exited $got, expected $want"
}

# random FILE BYTES
random() {
	head -c "$2" /dev/urandom >"$1"
}
