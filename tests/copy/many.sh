#!/bin/sh
# 32 clients at once with mixed sizes (empty, small, a few chunks, small
# trees), every file compared byte for byte; each also sends 512 KiB so
# that every session moves data for a while. All 32 start at once (the
# peak number of sessions at once is printed; a connect that times out
# while the server accepts the others is retried by rk copy itself), and
# the reconnects are counted. rk serve's peak fds and RSS,
# sampled while they run, stay within what its limits predict: fds under
# the fd limit it sized --max-open for, RSS under its idle size plus, per
# session, the ring the client asked for and the per-session buffers.
. "$(dirname "$0")/lib.sh"
port=7919
D=$W/dir
chunk=$((256 << 10)) depth=4 n_cl=32
start_server $port "$D" --max-clients $n_cl
lim=$(sed -n 's/.*(fd limit \([0-9]*\)).*/\1/p' "$W/server.1.log")
rss0=$(awk '/^VmRSS/ {print $2}' "/proc/$SERVER_PID/status")
fds0=$(ls "/proc/$SERVER_PID/fd" | wc -l)
for n in $(seq 1 $n_cl); do
	mkdir -p "$W/src$n/t"
	random "$W/src$n/t/big" $((512 << 10))
	case $((n % 4)) in
	0) random "$W/src$n/f" $((n * 37000)) ;;
	1) random "$W/src$n/f" $((3 * chunk + n)) ;;
	2)
		random "$W/src$n/f" 0
		for k in 1 2 3 4 5; do random "$W/src$n/t/s$k" $((k * n * 100)); done
		;;
	3)
		random "$W/src$n/f" $((n * 9000))
		random "$W/src$n/t/x" $((chunk + 1))
		;;
	esac
done
(
	peak=0 peakth=0
	while :; do
		c=$(ls "/proc/$SERVER_PID/fd" 2>/dev/null | wc -l)
		[ "$c" -le "$peak" ] || { peak=$c; echo "$peak" >"$W/peakfd"; }
		t=$(awk '/^Threads/ {print $2}' "/proc/$SERVER_PID/status")
		[ "$t" -le "$peakth" ] || { peakth=$t; echo "$peakth" >"$W/peakth"; }
		sleep 0.05
	done
) &
sampler=$!
pids=
for n in $(seq 1 $n_cl); do
	"$RK" copy -r --chunk $chunk --depth $depth "$W/src$n/f" "$W/src$n/t" \
		"$RK_ADDR:$port:c$n/" >"$W/c$n.out" 2>&1 &
	pids="$pids $!"
done
n=0
for p in $pids; do
	n=$((n + 1))
	wait "$p" || { kill $sampler; fail "client $n: $(cat "$W/c$n.out")"; }
done
kill $sampler
wait $sampler 2>/dev/null || true
for n in $(seq 1 $n_cl); do
	for x in $(cd "$W/src$n" && find . -type f); do
		cmp "$W/src$n/$x" "$D/c$n/$x" || fail "c$n/$x differs"
	done
done
hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$SERVER_PID/status")
peak=$(cat "$W/peakfd")
# Per session: the ring (depth slots of a 4 KiB header block and a chunk),
# receive and send buffers (72 + 68 blocks of 4 KiB), the hash buffer
# (1 MiB), the session's state and queues (1.5 MiB at most).
ring=$((depth * (4 + chunk / 1024)))
rss_max=$((rss0 + n_cl * (ring + 560 + 1024 + 1536)))
echo "sessions at once: up to $(($(cat "$W/peakth") - 1)) of $n_cl; clients that reconnected: $(grep -l "reconnecting" "$W"/c*.out 2>/dev/null | wc -l)"
echo "server fds: $fds0 idle, peak $peak while $n_cl clients ran (limit $lim)"
echo "server RSS: $rss0 KiB idle, peak $hwm KiB (predicted at most $rss_max KiB)"
[ "$peak" -le "$lim" ] || fail "peak fds $peak over the limit $lim"
[ "$hwm" -le "$rss_max" ] || fail "peak RSS $hwm KiB over the prediction $rss_max KiB"
echo "copy many: ok"
