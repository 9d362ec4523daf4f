#!/bin/sh
# rk doctor in the sandbox guest, with every fault made for real and undone:
# a healthy host (all ✓, exit 0, the JSON parses), the locked-memory limit at
# 64 KiB, the rxe netdev DOWN, the netdev MTU at 1500, and no RDMA device at
# all (the rxe link removed). The guest is restored after each case. Last, rk
# doctor HOST against rk doctor --listen on this same host.
set -u
rk=$RK_BUILD/tools/rk/rk
dev=${RK_DEV:?} iface=${RK_IFACE:?}
tmp=$(mktemp -d)
mtu0=$(cat "/sys/class/net/$iface/mtu")
fails=0

fail() {
	echo "FAIL: $*" >&2
	fails=$((fails + 1))
}

# Faults need root on a throw-away guest or dummy netdev: never on real hardware.
case ${RK_SANDBOX:-} in
vm | host) ;;
*)
	echo "SKIP: faults are only made in the sandbox (RK_SANDBOX=vm|host)"
	exit 77
	;;
esac
[ "$(id -u)" = 0 ] || {
	echo "SKIP: needs root in the sandbox"
	exit 77
}

# port_active: wait (bounded) until the rxe port is ACTIVE again
port_active() {
	i=0
	while [ $i -lt 50 ]; do
		grep -qs ACTIVE /sys/class/infiniband/"$dev"/ports/1/state && return 0
		sleep 0.2
		i=$((i + 1))
	done
	return 1
}

# doctor NAME [ULIMIT [CAPS]]: run rk doctor (under that locked-memory limit, with
# CAP_IPC_LOCK only if CAPS is "keep"), its output in $tmp/NAME, its exit in $rc
doctor() {
	rc=0
	if [ $# -gt 2 ]; then
		(ulimit -l "$2" && exec "$rk" doctor) >"$tmp/$1" 2>&1 || rc=$?
	elif [ $# -gt 1 ]; then
		# root pins past the limit with CAP_IPC_LOCK: drop it, as a user has none
		setpriv --inh-caps=-ipc_lock --bounding-set=-ipc_lock sh -c \
			'ulimit -l "$1" && exec "$2" doctor' sh "$2" "$rk" >"$tmp/$1" 2>&1 || rc=$?
	else
		"$rk" doctor >"$tmp/$1" 2>&1 || rc=$?
	fi
	echo "--- rk doctor: $1 (exit $rc)"
	cat "$tmp/$1"
}

healthy() {
	doctor "$1"
	[ "$rc" -eq 0 ] || fail "$1: exit $rc, want 0"
	if grep -E '^(✗|!|-) ' "$tmp/$1"; then fail "$1: not all ✓"; fi
	grep -q "^✓ device .*$dev" "$tmp/$1" || fail "$1: no ✓ for $dev"
	grep -q '^✓ device .*Soft-RoCE' "$tmp/$1" || fail "$1: Soft-RoCE not named"
	for c in devnode modules port netdev mtu gid memlock rdma_cm mw; do
		grep -q "^✓ $c " "$tmp/$1" || fail "$1: no ✓ $c line"
	done
}

# 1. healthy, and the JSON says the same
healthy healthy
rc=0
"$rk" doctor --json >"$tmp/json" || rc=$?
[ "$rc" -eq 0 ] || fail "--json: exit $rc"
python3 - "$tmp/json" "$dev" <<'PY' || fail "--json: wrong content"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["ok"] is True and d["failures"] == 0, d
assert all(c["verdict"] == "ok" for c in d["checks"]), d["checks"]
assert any(x["name"] == sys.argv[2] and x["soft_roce"] for x in d["facts"]["devices"])
assert d["facts"]["memlock"]["soft"] == -1
assert any(p["active_mtu"] == 4096 for p in d["facts"]["ports"])
assert any(g["type"] == "RoCE v2" for p in d["facts"]["gids"].values() for g in p["table"])
PY

# 2. locked-memory limit 64 KiB
doctor memlock 64
[ "$rc" -eq 1 ] || fail "memlock: exit $rc, want 1"
grep -q '^✗ memlock .*64 KiB' "$tmp/memlock" || fail "memlock: no ✗ naming 64 KiB"
grep -A1 '^✗ memlock' "$tmp/memlock" | grep -q 'fix: .*memlock' || fail "memlock: no fix"

# 2b. the same limit for root, which has CAP_IPC_LOCK: works, but fragile
doctor memlock_root 64 keep
[ "$rc" -eq 0 ] || fail "memlock_root: exit $rc, want 0"
grep -q '^! memlock .*64 KiB.*CAP_IPC_LOCK' "$tmp/memlock_root" || fail "memlock_root: no ! naming CAP_IPC_LOCK"

# 3. the rxe netdev DOWN (IPv6 addresses kept across it, or later tests lose theirs)
keep=/proc/sys/net/ipv6/conf/$iface/keep_addr_on_down
keep0=$(cat "$keep" 2>/dev/null || echo 0)
echo 1 >"$keep" 2>/dev/null || true
ip link set "$iface" down
doctor down
ip link set "$iface" up
echo "$keep0" >"$keep" 2>/dev/null || true
port_active || fail "down: the port did not come back"
if [ -n "${RK_ADDR6:-}" ] && ! ip -6 addr show dev "$iface" | grep -q "$RK_ADDR6/"; then
	ip -6 addr add "$RK_ADDR6/64" dev "$iface" nodad
fi
[ "$rc" -eq 1 ] || fail "down: exit $rc, want 1"
grep -q "^✗ port .*$dev port 1: state .*DOWN" "$tmp/down" || fail "down: no ✗ port state"
grep -A1 '^✗ port' "$tmp/down" | grep -q "fix: .*ip link set $iface up" || fail "down: no fix"

# 4. netdev MTU 1500: active MTU 1024, the next step named
ip link set "$iface" mtu 1500
doctor mtu
ip link set "$iface" mtu "$mtu0"
[ "$rc" -eq 0 ] || fail "mtu: exit $rc, want 0 (a ! only)"
grep -q '^! mtu .*active MTU 1024 of max 4096.*MTU 1500' "$tmp/mtu" || fail "mtu: no ! mtu"
grep -A1 '^! mtu' "$tmp/mtu" | grep -q "fix: .*mtu 2200 (gives RDMA MTU 2048; 4200 for 4096)" ||
	fail "mtu: the next step is not named"

# 5. no RDMA device
rdma link delete "$dev"
doctor nodev
rdma link add "$dev" type rxe netdev "$iface"
port_active || fail "nodev: the device did not come back"
[ "$rc" -eq 1 ] || fail "nodev: exit $rc, want 1"
grep -q '^✗ device .*no RDMA device' "$tmp/nodev" || fail "nodev: no ✗ device"
grep -A1 '^✗ device' "$tmp/nodev" | grep -q 'fix: .*modprobe rdma_rxe && .*rdma link add' ||
	fail "nodev: no Soft-RoCE fix"

# restored: healthy again
healthy restored

# 6. both ends of rk doctor HOST on this one host (rxe to itself): every step passes
"$rk" doctor --listen --once --addr "$RK_ADDR" --port 18518 2>"$tmp/listen" &
lis=$!
i=0
until grep -q listening "$tmp/listen" 2>/dev/null || [ $i -ge 100 ]; do
	i=$((i + 1))
	sleep 0.1
done
rc=0
"$rk" doctor "$RK_ADDR:18518" >"$tmp/self" 2>&1 || rc=$?
wait $lis || fail "self: the listener exited $?"
[ "$rc" -eq 0 ] || fail "self: exit $rc, want 0"
grep -q '^✓ link .*all 8 steps passed' "$tmp/self" || fail "self: not every step passed"
[ "$rc" -eq 0 ] || cat "$tmp/self" "$tmp/listen"
rm -rf "$tmp"
[ $fails -eq 0 ] && echo "rk doctor: all cases pass"
exit $((fails > 0))
