#!/bin/sh
# rk serve as a service: --config with a flag over one key, --metrics-file
# parsed as Prometheus text and matching a known copy, SIGTERM during a
# copy (exit 0, no file half written, --resume completes after a restart),
# and bad configuration files refused at start with no listener.
. "$(dirname "$0")/lib.sh"
port=7961
D=$W/srv
M=$W/metrics/rk.prom
mkdir -p "$D" "$W/metrics"
cat >"$W/serve.conf" <<CONF
# as the unit would read it
dir = $D
addr = $RK_ADDR
port = 7960
max-clients = 4
idle = 30
tmp-age = 0
metrics-file = $M
CONF

# start_cfg - rk serve --config, the port given as a flag (it wins).
start_cfg() {
	NSTART=$((NSTART + 1))
	log=$W/server.$NSTART.log
	"$RK" serve --config "$W/serve.conf" --port $port >"$log" 2>&1 &
	SERVER_PID=$!
	i=0
	until grep -q "listening on .*:$port, writing into $D" "$log" 2>/dev/null; do
		i=$((i + 1))
		[ $i -lt 200 ] || fail "rk serve --config did not start"
		kill -0 "$SERVER_PID" 2>/dev/null || fail "rk serve --config exited"
		sleep 0.05
	done
}

# metric NAME - its value in the metrics file, parsed as Prometheus text.
metric() {
	# The Debian python3, which python3-prometheus-client is installed for.
	/usr/bin/python3 - "$M" "$1" <<'PY'
import sys
from prometheus_client.parser import text_string_to_metric_families
want = sys.argv[2]
for fam in text_string_to_metric_families(open(sys.argv[1]).read()):
    for s in fam.samples:
        name = s.name + ("{reason=\"%s\"}" % s.labels["reason"] if s.labels else "")
        if name == want:
            print(int(s.value))
            sys.exit(0)
sys.exit("no sample " + want)
PY
}

start_cfg
[ -f "$M" ] || fail "no metrics file at start"
[ "$(metric rk_serve_files_committed_total)" = 0 ] || fail "metrics at start not zero"

# 1. A known copy: 3 files, B bytes; the metrics say so within a period.
random "$W/a" 1000000
random "$W/b" 3000000
random "$W/c" 1
B=4000001
"$RK" copy -q "$W/a" "$W/b" "$W/c" "$RK_ADDR:$port:" || fail "copy"
for f in a b c; do cmp "$W/$f" "$D/$f" || fail "$f differs"; done
i=0
until [ "$(metric rk_serve_files_committed_total)" = 3 ]; do
	i=$((i + 1))
	[ $i -lt 100 ] || fail "metrics did not show 3 files within 20 s"
	sleep 0.2
done
[ "$(metric rk_serve_received_bytes_total)" = $B ] || fail "received bytes != $B"
[ "$(metric rk_serve_sessions_total)" = 1 ] || fail "sessions_total != 1"
[ "$(metric rk_serve_sessions_active)" = 0 ] || fail "sessions_active != 0"
[ "$(metric rk_serve_files_failed_total)" = 0 ] || fail "files failed"
ls "$W/metrics" | grep -qv '^rk.prom$' && fail "a metrics temporary left behind"

# 2. SIGTERM mid-file: exit 0, the temporary kept, nothing half committed.
random "$W/big.bin" $((48 << 20))
"$RK" copy -q --retries 0 "$W/big.bin" "$RK_ADDR:$port:" 2>"$W/client.err" &
c=$!
i=0
while [ "$(stat -c %s "$D/.big.bin.rkpart" 2>/dev/null || echo 0)" -lt $((8 << 20)) ]; do
	i=$((i + 1))
	[ $i -lt 600 ] || fail "transfer did not progress"
	sleep 0.05
done
kill -TERM "$SERVER_PID"
set +e
wait "$SERVER_PID"
rc=$?
set -e
SERVER_PID=
[ $rc = 0 ] || fail "rk serve exited $rc after SIGTERM"
wait $c 2>/dev/null && fail "client succeeded although the server stopped"
[ ! -e "$D/big.bin" ] || fail "big.bin visible after SIGTERM"
[ -f "$D/.big.bin.rkpart" ] || fail "temporary not kept for --resume"
server_log | grep -q "stopping" || fail "no stop line"
[ "$(metric 'rk_serve_session_failures_total{reason="shutdown"}')" = 1 ] ||
	fail "the session ended by SIGTERM not counted"
[ "$(metric rk_serve_sessions_active)" = 0 ] || fail "sessions active at exit"
[ "$(metric rk_serve_registered_bytes)" = 0 ] || fail "registered bytes at exit"

# 3. Restarted, --resume completes the file, identical.
start_cfg
"$RK" copy -q --resume "$W/big.bin" "$RK_ADDR:$port:" || fail "resume after SIGTERM"
cmp "$W/big.bin" "$D/big.bin" || fail "resumed file differs"
[ ! -e "$D/.big.bin.rkpart" ] || fail "temporary left after resume"
server_log | grep -q "(resumed)" || fail "not resumed from the verified prefix"
stop_server

# 4. Bad files: exit 2, FILE:LINE and the key named, no listener.
bad() {
	printf 'dir = %s\naddr = %s\n%b' "$D" "$RK_ADDR" "$1" >"$W/bad.conf"
	set +e
	"$RK" serve --config "$W/bad.conf" --port $port >"$W/bad.log" 2>&1
	rc=$?
	set -e
	[ $rc = 2 ] || fail "bad config ($2) exited $rc"
	grep -qF "$W/bad.conf:$2" "$W/bad.log" || fail "no '$2' in: $(cat "$W/bad.log")"
	grep -q "listening" "$W/bad.log" && fail "listened with a bad config"
	return 0
}
bad 'bogus = 1\n' "3: bogus: unknown key"
bad 'max-clients = many\n' "3: max-clients: bad value 'many'"
bad 'idle = 5\nidle = 6\n' "4: idle: given twice (first on line 3)"
bad "tmp-age = $(head -c 1100 /dev/zero | tr '\0' 1)\n" "3: tmp-age: line longer than 1024 bytes"
# A metrics file that cannot be written: refused at start, exit 1.
set +e
"$RK" serve --config "$W/serve.conf" --port $port --metrics-file /proc/rk/x.prom >"$W/bad.log" 2>&1
rc=$?
set -e
[ $rc = 1 ] && grep -q "metrics-file: /proc/rk/x.prom" "$W/bad.log" || fail "metrics file not refused"
echo "PASS service"
