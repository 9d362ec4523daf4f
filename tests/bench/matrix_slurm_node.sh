#!/bin/sh
# One sandbox host's part of matrix_slurm.sh: munge and the Slurm daemons,
# with their state in this guest's own /run (a tmpfs each: the two guests
# share the host's / over 9p, so nothing of a daemon may live there).
#   matrix_slurm_node.sh start DIR NODE [ctld]  munged, [slurmctld,] slurmd -N NODE
#                                               (DIR: slurm.conf and munge.key)
#   matrix_slurm_node.sh delay MS               netem delay on this host's RoCE traffic
#   matrix_slurm_node.sh stop                   end the daemons, clear the delay
#   matrix_slurm_node.sh logs                   the daemons' logs
set -eu
S=/run/rkslurm
case $1 in
start)
	dir=$2 node=$3
	mkdir -p "$S/state" "$S/spool"
	chmod 0755 "$S"
	install -m 0400 "$dir/munge.key" "$S/munge.key"
	# slurmd starts its cgroup plugin whatever ProctrackType says: give it this
	# guest's cgroup2 (cgroup.conf: cgroup/v2, no systemd in the guest).
	mountpoint -q /sys/fs/cgroup || mount -t cgroup2 none /sys/fs/cgroup
	# ... where it puts its scope under system.slice, with the controllers on.
	mkdir -p /sys/fs/cgroup/system.slice
	for cg in /sys/fs/cgroup /sys/fs/cgroup/system.slice; do
		for c in $(cat /sys/fs/cgroup/cgroup.controllers); do
			echo "+$c" >"$cg/cgroup.subtree_control" 2>/dev/null || true
		done
	done
	# Slurm and munge look their node names up: this guest's own /etc/hosts
	# (a bind mount in the guest; the file shared over 9p stays as it is).
	mountpoint -q /etc/hosts || mount --bind "$dir/hosts" /etc/hosts
	munged --force --key-file="$S/munge.key" --socket="$S/munge.sock" \
		--pid-file="$S/munged.pid" --log-file="$S/munged.log" --seed-file="$S/munged.seed"
	if [ "${4:-}" = ctld ]; then
		slurmctld -f "$dir/slurm.conf" -i
	fi
	slurmd -f "$dir/slurm.conf" -N "$node"
	echo "node $node: started"
	;;
delay)
	# Only RoCE v2 (UDP 4791) is delayed: the link under test. Slurm's and
	# MUNGE's TCP stay in the undelayed bands of a prio qdisc. With the delay
	# on everything, netem's queue (1000 packets by default) filled during
	# the bandwidth phase and dropped Slurm's messages to this host too: ranks
	# were lost and the job failed for a reason it was not testing.
	tc qdisc del dev "$RK_IFACE" root 2>/dev/null || true
	tc qdisc add dev "$RK_IFACE" root handle 1: prio
	tc qdisc add dev "$RK_IFACE" parent 1:3 handle 30: netem delay "${2}ms" limit 100000
	tc filter add dev "$RK_IFACE" parent 1: protocol ip prio 1 u32 \
		match ip protocol 17 0xff match ip dport 4791 0xffff flowid 1:3
	;;
stop)
	tc qdisc del dev "$RK_IFACE" root 2>/dev/null || true
	mountpoint -q /etc/hosts && umount /etc/hosts || true
	for d in slurmd slurmctld munged; do
		[ -f "$S/$d.pid" ] && kill "$(cat "$S/$d.pid")" 2>/dev/null || true
	done
	;;
logs)
	for f in "$S"/*.log; do
		[ -f "$f" ] && { echo "== $(hostname) $f"; tail -30 "$f"; }
	done
	;;
esac
