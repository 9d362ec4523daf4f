#!/bin/sh
# rk_device_open's choice (lib_device.c): the only device; then, with a
# second Soft-RoCE device on a dummy netdev, an error naming both unless a
# name, an address or the route to a peer decides. The second device is
# removed on the way out.
set -eu
bin=$1
"$bin" one
iface=rkdevtest0 dev=rkdevtest
cleanup() {
	rdma link delete "$dev" 2>/dev/null || true
	ip link del "$iface" 2>/dev/null || true
}
trap cleanup EXIT
modprobe dummy 2>/dev/null || true
ip link add "$iface" type dummy
ip addr add 10.78.0.1/24 dev "$iface"
ip link set "$iface" up
rdma link add "$dev" type rxe netdev "$iface"
i=0
until grep -q ACTIVE "/sys/class/infiniband/$dev/ports/1/state" 2>/dev/null; do
	i=$((i + 1))
	[ $i -lt 100 ] || { echo "device_choice: $dev did not become ACTIVE" >&2; exit 1; }
	sleep 0.1
done
"$bin" many "$RK_DEV" "$dev"
