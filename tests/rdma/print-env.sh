#!/bin/sh
# Print the RDMA environment the rdma tests run in: kernel, device, port
# state, active MTU and the GIDs in use.  Fails when there is no active port.
set -u
echo "kernel:  $(uname -r)"
echo "sandbox: ${RK_SANDBOX:-none}  device: ${RK_DEV:-?}  netdev: ${RK_IFACE:-?}  addr: ${RK_ADDR:-?} ${RK_ADDR6:-}"
ibv_devinfo -d "${RK_DEV:-}" -v 2>/dev/null | grep -E 'hca_id|state:|active_mtu|link_layer|GID\[' | sed 's/^[[:space:]]*/  /'
ibv_devinfo -d "${RK_DEV:-}" | grep -q PORT_ACTIVE
