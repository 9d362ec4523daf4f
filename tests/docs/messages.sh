#!/bin/sh
# rk's messages for mistakes made on this host, no RDMA device needed: a bad
# option gets the command, the option, its usage lines and where the help is
# (not the whole help); a local device problem is told as one, once, with
# exit 1 and a pointer to rk doctor; a name that does not resolve says so
# without a second errno.
set -eu
rk=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
unset RK_DEV
echo data >"$tmp/f"

# run EXPECTED_EXIT CMD...: stdout+stderr in $tmp/out
run() {
	want=$1
	shift
	rc=0
	"$rk" "$@" >"$tmp/out" 2>&1 || rc=$?
	[ "$rc" -eq "$want" ] || fail "rk $*: exit $rc, want $want: $(cat "$tmp/out")"
}

for cmd in copy serve bench matrix doctor explain; do
	run 2 "$cmd" --no-such-option
	grep -q "^rk $cmd: unrecognized option '--no-such-option'" "$tmp/out" ||
		fail "rk $cmd: bad option not named: $(cat "$tmp/out")"
	grep -q "^usage: " "$tmp/out" || fail "rk $cmd: no usage line"
	grep -q "try 'rk $cmd --help'" "$tmp/out" || fail "rk $cmd: no pointer to --help"
	[ "$(wc -l <"$tmp/out")" -le 7 ] || fail "rk $cmd: $(wc -l <"$tmp/out") lines for a bad option"
done
run 2 copy --chunk
grep -q "^rk copy: option '--chunk' needs a value" "$tmp/out" || fail "missing value: $(cat "$tmp/out")"
run 2 bench -s
grep -q "^rk bench: option '-s' needs a value" "$tmp/out" || fail "missing value: $(cat "$tmp/out")"
run 2 serve
grep -q "^rk serve: --dir is required" "$tmp/out" || fail "rk serve without --dir: $(cat "$tmp/out")"

# A device this host does not have: a local problem, exit 1, one line, rk doctor named.
run 1 copy --dev no_such_dev0 "$tmp/f" 127.0.0.1:x
[ "$(wc -l <"$tmp/out")" -eq 1 ] || fail "no device (push): $(cat "$tmp/out")"
grep -q "^rk copy: this host's RDMA device: .*'rk doctor'" "$tmp/out" ||
	fail "no device (push): $(cat "$tmp/out")"
run 1 copy --dev no_such_dev0 127.0.0.1:x "$tmp/back"
grep -q "^rk copy: this host's RDMA device: .*'rk doctor'" "$tmp/out" ||
	fail "no device (pull): $(cat "$tmp/out")"

# A name that does not resolve: the resolver's words, no errno after them.
run 4 copy "$tmp/f" nohost.invalid:x
grep -q "'nohost.invalid': Name or service not known" "$tmp/out" || fail "bad name: $(cat "$tmp/out")"
grep -q "Invalid argument" "$tmp/out" && fail "bad name: a second errno: $(cat "$tmp/out")"
# user@host (the scp habit): the user part skipped with a note, the host looked up alone.
run 4 copy "$tmp/f" alice@nohost.invalid:x
grep -q "^rk copy: note: 'alice@' ignored" "$tmp/out" || fail "user@host: no note: $(cat "$tmp/out")"
grep -q "'nohost.invalid': Name or service not known" "$tmp/out" || fail "user@host: $(cat "$tmp/out")"
# --plot without gnuplot: said before the run, which goes on (rank 0 alone here, on
# loopback; rank 1 never comes and --wait 1 ends it).
rc=0
PATH=/nonexistent SLURM_PROCID=0 SLURM_NTASKS=2 "$rk" matrix --plot "$tmp/m.png" --no-auth \
	--wait 1 --rendezvous 127.0.0.1:18599 >"$tmp/out" 2>&1 || rc=$?
head -3 "$tmp/out" | grep -q "^rk matrix: --plot: gnuplot is not installed on this host" ||
	fail "matrix --plot without gnuplot: not said at the start: $(cat "$tmp/out")"
# An old spelling is warned of by rank 0 only: every rank parses the same command line.
for rank in 0 1; do
	SLURM_PROCID=$rank SLURM_NTASKS=2 "$rk" matrix --no-auth --wait 1 --json "$tmp/m.json" \
		--rendezvous 127.0.0.1:18598 >"$tmp/out" 2>&1 || true
	n=$(grep -c "^rk matrix: warning: '--json FILE' is deprecated" "$tmp/out" || true)
	[ "$n" -eq $((1 - rank)) ] || fail "matrix rank $rank: $n deprecation lines: $(cat "$tmp/out")"
done
# rk bench --plot without gnuplot: refused before connecting (exit 2).
rc=0
PATH=/nonexistent "$rk" bench --plot "$tmp/b.png" 127.0.0.1 >"$tmp/out" 2>&1 || rc=$?
[ $rc -eq 2 ] && grep -q "^rk bench: --plot needs gnuplot" "$tmp/out" ||
	fail "bench --plot without gnuplot: exit $rc: $(cat "$tmp/out")"
# A kernel modprobe has no rdma_rxe for (this build machine's): the doctor
# does not say 'modprobe rdma_rxe', it names what works (the sandbox).
deps=/lib/modules/$(uname -r)/modules.dep
if [ ! -e /sys/module/rdma_rxe ] && ! grep -qs '/rdma_rxe.ko' "$deps" &&
	[ -z "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
	"$rk" doctor >"$tmp/out" 2>&1 || true
	grep -A1 '^✗ device' "$tmp/out" | grep -q "fix: .*scripts/softroce run" ||
		fail "doctor without rdma_rxe: $(cat "$tmp/out")"
	grep -q 'modprobe rdma_rxe' "$tmp/out" && fail "doctor offers modprobe rdma_rxe where it cannot work"
fi
echo "rk: messages for bad options, a missing device and a bad name are right"
