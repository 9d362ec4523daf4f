#!/bin/sh
# rk matrix under real Slurm on the two sandbox hosts (scripts/softroce run
# --hosts 2): munged, slurmctld and slurmd on host A, munged and slurmd on
# host B, started here; srun -N 2 --ntasks-per-node 2 runs 4 ranks (2 a
# host), with --intra so that the two pairs on one host are the reference.
# Clean, every pair is measured and none flagged; then with netem delaying
# host B's RoCE traffic by 50 ms (Slurm's own stays undelayed), the four pairs that cross to B are flagged and
# retested alone ("slow link") and the two on one host are not.
#
# The thresholds leave room for the sandbox: a pair across the two guests
# takes up to 15x the latency of one inside a guest (rxe's loopback, 0.2-0.4
# ms), so --lat-mult 30; 50 ms more on B's side (25 ms on a half round
# trip) is 60x and more. --bw-frac 0.5
# (bandwidth across varies by 10 %). --poll event: each guest has one CPU
# for its two ranks, and two spinners on one CPU starve each other and the
# kernel's rxe work (round trips of a scheduler tick).
#
# The ranks prove themselves with MUNGE credentials (Slurm's own): in the
# clean run rank 3 starts 25 s late (python starts slowly in the guest),
# and meanwhile strangers knock at rank
# 0's rendezvous as rank 3 with a credential of another user (nobody) and
# one of this user naming another job: both are refused and logged, and
# the real rank 3 joins.
set -eu
RK=${RK_BUILD:?}/tools/rk/rk
[ -n "${RK_PEER_ADDR:-}" ] || { echo "matrix_slurm: needs scripts/softroce run --hosts 2" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
node="$here/matrix_slurm_node.sh"
# Shared by both hosts: the configuration, the key, the JSON documents. In
# the sandbox's job directory, which both guests mount uncached: the host's
# / is cached in each guest, and a file one guest has just written there
# can look short to the other (seen: host B's munged found the key "less
# than 32 bytes").
W=$(mktemp -d "${RK_PEER_DIR:?}/rkmxslurm.XXXXXX")
export SLURM_CONF="$W/slurm.conf"
peer() { "$RK_SOFTROCE" peer -- sh "$node" "$@"; }
cleanup() {
	sh "$node" stop || true
	# The delay must not outlive the test: later tests in this boot share
	# host B's link. A second try if the first did not reach B.
	peer stop || peer stop || true
	rm -rf "$W"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*" >&2
	sh "$node" logs >&2 || true
	peer logs >&2 || true
	exit 1
}

cat >"$W/slurm.conf" <<CONF
ClusterName=rkmatrix
SlurmctldHost=rk-a($RK_ADDR)
SlurmctldPort=16817
SlurmdPort=16818
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=/run/rkslurm/munge.sock
CredType=cred/munge
StateSaveLocation=/run/rkslurm/state
SlurmdSpoolDir=/run/rkslurm/spool
SlurmctldPidFile=/run/rkslurm/slurmctld.pid
SlurmdPidFile=/run/rkslurm/slurmd.pid
SlurmctldLogFile=/run/rkslurm/slurmctld.log
SlurmdLogFile=/run/rkslurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
NodeName=rk-a NodeAddr=$RK_ADDR CPUs=2 State=UNKNOWN
NodeName=rk-b NodeAddr=$RK_PEER_ADDR CPUs=2 State=UNKNOWN
PartitionName=rk Nodes=rk-a,rk-b Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
CONF
printf 'CgroupPlugin=cgroup/v2\nIgnoreSystemd=yes\n' >"$W/cgroup.conf"
{ cat /etc/hosts; printf '%s rk-a\n%s rk-b\n' "$RK_ADDR" "$RK_PEER_ADDR"; } >"$W/hosts"
head -c 1024 /dev/urandom >"$W/munge.key"
sh "$node" start "$W" rk-a ctld || fail "host A's daemons did not start"
peer start "$W" rk-b || fail "host B's daemons did not start"

i=0
until [ "$(sinfo -h -N -o '%N %T' 2>/dev/null | grep -c ' idle')" = 2 ]; do
	i=$((i + 1))
	[ $i -lt 120 ] || fail "the two nodes never became idle: $(sinfo -N 2>&1)"
	sleep 0.5
done
echo "matrix_slurm: nodes up: $(sinfo -h -N -o '%N %T' | tr '\n' ' ')"

# matrix NAME [LATE] - rk matrix over srun, 4 ranks (the guests have one CPU each: the nodes
# say 2, config_overrides); the JSON into $W/NAME.json, the output into $W/NAME.out. LATE:
# rank 3 starts that many seconds after the others.
matrix() {
	rc=0
	start=$(date +%s)
	RK_MATRIX_ADDR=$RK_ADDR timeout 300 srun -N 2 --ntasks-per-node 2 \
		sh -c '[ "$SLURM_PROCID" != 3 ] || sleep "$0"; exec "$@"' "${2:-0}" \
		"$RK" matrix --intra --munge-socket /run/rkslurm/munge.sock \
		--poll event --lat-mult 30 --bw-frac 0.5 --duration 1 --lat-duration 1 --watchdog 10 \
		--wait 60 --json="$W/$1.json" >"$W/$1.out" 2>&1 || rc=$?
	cat "$W/$1.out"
	echo "matrix_slurm: $1: exit $rc in $(($(date +%s) - start)) s"
	[ -f "$W/$1.json" ] || fail "$1: no JSON"
}
# strangers - while the clean run waits for rank 3: credentials of another user and of another
# job, each offered as rank 3.
strangers() {
	sock=/run/rkslurm/munge.sock
	setpriv --reuid=65534 --regid=65534 --clear-groups munge -S "$sock" \
		-s "rk-matrix 2 job=${1} step=0 rank=3 size=4 params=0" >"$W/other-user.cred"
	munge -S "$sock" -s "rk-matrix 2 job=999999 step=0 rank=3 size=4 params=0" \
		>"$W/other-job.cred"
	python3 "$here/matrix_stranger.py" "$RK_ADDR" 18590 3 4 munge "$W/other-user.cred" \
		"$W/other-job.cred" || fail "a stranger's credential was not refused"
}
matrix clean 25 &
mpid=$!
sleep 3
# Slurm's next job id: the clean run's (the one running now).
jobid=$(squeue -h -o %i | head -1)
strangers "${jobid:-1}"
wait $mpid || true
python3 "$here/matrix_check.py" "$W/clean.json" clean || fail "clean link"
grep -q 'refused .*as rank 3: not authenticated: MUNGE: a credential of uid 65534' "$W/clean.out" ||
	fail "another user's credential: not refused with its reason"
grep -q 'refused .*as rank 3: not authenticated: MUNGE: a credential for "rk-matrix 2 job=999999' \
	"$W/clean.out" || fail "another job's credential: not refused with its reason"
peer delay 50
matrix delayed
python3 "$here/matrix_check.py" "$W/delayed.json" delayed || fail "50 ms on host B"
echo "matrix_slurm: ok"
