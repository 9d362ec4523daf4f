#!/bin/sh
# rk explain: every completion status and rdma_cm event the library knows
# is explained (by its name and by its number), and an unknown word gets the
# closest names and exit 1.
set -eu
rk=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$rk" explain --list >"$tmp/list"
wc_n=$(grep -c '^completion status	' "$tmp/list") || true
ev_n=$(grep -c '^rdma_cm event	' "$tmp/list") || true
# rdma-core's enums: 24 completion statuses (SUCCESS..TM_RNDV_INCOMPLETE), 16 events
[ "$wc_n" -eq 24 ] || fail "$wc_n completion statuses listed, want 24"
[ "$ev_n" -eq 16 ] || fail "$ev_n rdma_cm events listed, want 16"

grep -E '^(completion status|rdma_cm event|CM reject reason)	' "$tmp/list" |
while IFS='	' read -r kind code name; do
	"$rk" explain "$name" >"$tmp/out" || fail "rk explain $name failed"
	grep -q "^$name ($kind $code)" "$tmp/out" || fail "rk explain $name: wrong entry"
	grep -q 'usual causes' "$tmp/out" || fail "rk explain $name: no causes"
	grep -q 'fixes:' "$tmp/out" || fail "rk explain $name: no fixes"
	case $kind in
	completion*) word=status ;;
	rdma_cm*) word=event ;;
	*) word=reject ;;
	esac
	"$rk" explain $word "$code" >"$tmp/out2" || fail "rk explain $word $code failed"
	cmp -s "$tmp/out" "$tmp/out2" || fail "rk explain $word $code differs from $name"
done

"$rk" explain 12 | grep -q '^IBV_WC_RETRY_EXC_ERR' || fail "12 is not RETRY_EXC_ERR"
"$rk" explain 12 | grep -q '12 was read as a completion status.*errno 12 is ENOMEM (rk explain -12)' ||
	fail "rk explain 12 does not say how it read 12, nor offer errno 12"
# the library returns negative errnos: -12 is ENOMEM, with or without --
"$rk" explain -12 | grep -q '^ENOMEM (errno 12)' || fail "-12 is not ENOMEM"
"$rk" explain -- -12 | grep -q '^ENOMEM (errno 12)' || fail "-- -12 is not ENOMEM"
"$rk" explain transport retry counter exceeded | grep -q '^IBV_WC_RETRY_EXC_ERR' ||
	fail "the library's text does not find RETRY_EXC_ERR"
"$rk" explain ENOMEM reg_mr | grep -q 'ulimit -l' || fail "ENOMEM reg_mr: no memlock fix"
"$rk" explain reject 8 | grep -qi 'nobody listens' || fail "reject 8: not 'nobody listens'"

rc=0
"$rk" explain frobnicate >"$tmp/out" 2>"$tmp/err" || rc=$?
[ "$rc" -eq 1 ] || fail "unknown word: exit $rc, want 1"
grep -q 'closest known names:' "$tmp/err" || fail "unknown word: no suggestions"
"$rk" explain REJECTD 2>&1 | grep -q 'closest known names: REJECTED' ||
	fail "REJECTD does not suggest REJECTED first"
rc=0
"$rk" explain >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "no WHAT: exit $rc, want 2"
# a bad option: the command, the option, the usage line and where help is; not the whole help
rc=0
"$rk" explain --frobnicate >"$tmp/out" 2>"$tmp/err" || rc=$?
[ "$rc" -eq 2 ] || fail "bad option: exit $rc, want 2"
grep -q "^rk explain: unrecognized option '--frobnicate'" "$tmp/err" || fail "bad option: $(cat "$tmp/err")"
grep -q "try 'rk explain --help'" "$tmp/err" || fail "bad option: no pointer to --help"
[ "$(wc -l <"$tmp/err")" -le 5 ] || fail "bad option: $(wc -l <"$tmp/err") lines, want the usage only"
echo "rk explain: $wc_n statuses, $ev_n events and the reject reasons explained"
