#!/bin/sh
# rk doctor HOST against rk doctor --listen on host B (scripts/softroce run
# --hosts 2), every fault made for real and undone after its case:
#   nobody listening on B        -> named in under 5 s
#   a healthy pair               -> every step ✓ with a round-trip time, exit 0 (the JSON run)
#   B's netdev MTU 1500, A's 9000 -> the MTU mismatch and the path MTU (1024) named
#   B drops UDP 4791 coming in    -> the failing step named, "RoCE v2 traffic (UDP 4791)
#                                    blocked" among its causes, within its deadline
#   something else on the port    -> "not an rk doctor --listen" (or "not rk doctor")
set -eu
RK=${RK_BUILD:?}/tools/rk/rk
[ -n "${RK_PEER_ADDR:-}" ] || { echo "doctor peer: needs scripts/softroce run --hosts 2" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
port=18517
W=$(mktemp -d "${TMPDIR:-/tmp}/rkdoctor.XXXXXX")
peer() {
	echo "+ $(date +%T) host B: $*"
	"$RK_SOFTROCE" peer -- env RK_BUILD="$RK_BUILD" sh "$here/peer_b.sh" "$@"
}
restored= bench=
cleanup() {
	[ -z "$bench" ] || kill "$bench" 2>/dev/null || true
	[ -n "$restored" ] || peer unblock mtu 9000 stop || true
	wait || true
	rm -rf "$W"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*" >&2
	cat "$W"/lis.log >&2 || true
	exit 1
}
now_ms() { echo $(($(date +%s%N) / 1000000)); }
# doctor NAME ARGS... - rk doctor ARGS against B, output in $W/NAME, exit in $rc, time in $ms
doctor() {
	name=$1
	shift
	t0=$(now_ms)
	rc=0
	"$RK" doctor "$@" >"$W/$name" 2>&1 || rc=$?
	ms=$(($(now_ms) - t0))
	echo "--- $(date +%T) $name: exit $rc in $ms ms"
	cat "$W/$name"
}
has() { grep -q -- "$2" "$W/$1" || fail "$1: no '$2'"; }

# Nobody listening yet.
doctor absent "$RK_PEER_ADDR:$port"
[ $rc -eq 1 ] || fail "absent: exit $rc"
has absent "nobody listens on $RK_PEER_ADDR port $port"
[ $ms -lt 5000 ] || fail "absent: took $ms ms"

peer listen $port >>"$W/lis.log" 2>&1 &
i=0
until grep -q listening "$W/lis.log" 2>/dev/null; do
	i=$((i + 1))
	[ $i -lt 300 ] || fail "rk doctor --listen did not start"
	sleep 0.1
done

# A healthy pair: every step ✓, a round-trip time, exit 0, and the JSON says so (checked
# in the background: python3 starts slowly in the guest, the next case need not wait).
doctor healthy --json "$RK_PEER_ADDR:$port"
[ $rc -eq 0 ] || fail "healthy: exit $rc"
python3 - "$W/healthy" >"$W/healthy.check" 2>&1 <<'PY' &
import json, sys
d = json.load(open(sys.argv[1]))
assert d["ok"] and d["failures"] == 0, d["failures"]
assert not [c for c in d["checks"] if c["verdict"] == "fail"]
link = d["facts"]["link"]
assert link["passed"] == link["of"] == 8, link
assert [s["step"] for s in link["steps"]] == ["connect", "send out", "send in", "write out",
    "write in", "read out", "read in", "rtt"], link["steps"]
assert all(s["ok"] for s in link["steps"])
assert [s["text"] for s in link["steps"][1:7]] == ["4096 bytes verified"] * 6, link["steps"]
assert 0 < link["rtt_us_min"] <= link["rtt_us_median"] <= link["rtt_us_max"]
assert link["path_mtu"] == 4096, link
texts = [c["text"] for c in d["checks"] if c["check"] == "link"]
assert any(t.startswith("round trip (SEND 64 B and back, 16 times): min") for t in texts)
assert texts[-1].startswith("all 8 steps passed"), texts
peer = d["facts"]["peer"]
assert peer["active_mtu"] == 4096 and peer["gid_type"] == "RoCE v2", peer
assert d["facts"]["pair"]["mtu_both_take"] == 4096
PY
json_check=$!

# B's netdev MTU 1500 (active MTU 1024), A's 9000 (4096): the mismatch, and the path MTU
# rdma_cm picks (the connecting side's, 4096), at which B's sends are dropped.
peer mtu 1500
doctor mtu --timeout 2000 "$RK_PEER_ADDR:$port"
[ $rc -eq 1 ] || fail "mtu: exit $rc"
has mtu "MTU mismatch: active MTU 4096 here (netdev [a-z0-9]* MTU 9000), 1024 on $RK_PEER_ADDR"
has mtu "the path MTU is 4096 when this host connects and 1024 when $RK_PEER_ADDR does"
has mtu "fix: on $RK_PEER_ADDR: sudo ip link set [a-z0-9]* mtu 9000"
has mtu "rdma_cm connection to $RK_PEER_ADDR port [0-9]* in [0-9.]* ms, path MTU 4096"
has mtu "SEND 4 KiB, $RK_PEER_ADDR -> this host: failed at $RK_PEER_ADDR"
has mtu "path MTU 4096 is above the active MTU 1024 of $RK_PEER_ADDR"
has mtu "path MTU larger than a hop allows"

# B drops RoCE v2 coming in: the step that fails, its causes, within its deadline.
peer mtu 9000 block
doctor blocked --timeout 2000 "$RK_PEER_ADDR:$port"
peer unblock stop
restored=1
[ $rc -eq 1 ] || fail "blocked: exit $rc"
has blocked "rdma_cm connection to $RK_PEER_ADDR port [0-9]* failed at rdma_connect"
has blocked "RoCE v2 traffic (UDP 4791) blocked"
has blocked "never saw the connection request"
has blocked "stopped at step 1 of 8 (connect)"
[ $ms -lt 15000 ] || fail "blocked: took $ms ms with 2 s steps"

# Something else on the port (an rk bench server): the peer is not rk doctor.
"$RK" bench --port $port >"$W/bench.log" 2>&1 &
bench=$!
i=0
until grep -q waiting "$W/bench.log"; do
	i=$((i + 1))
	[ $i -lt 100 ] || fail "rk bench did not start: $(cat "$W/bench.log")"
	sleep 0.1
done
doctor other "$RK_ADDR:$port"
kill $bench 2>/dev/null || true
# rk bench closes a connection whose first bytes are not its own (and waits for the next).
has other "not an rk doctor --listen\|or not rk doctor"
wait $json_check || fail "healthy --json: wrong content: $(cat "$W/healthy.check")"
grep -q ": done$" "$W/lis.log" || fail "the listener never finished a session"
echo "doctor peer: ok"
