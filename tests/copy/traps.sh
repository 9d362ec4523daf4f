#!/bin/sh
# Traps at the temporary name, the resume oracle, abandoned temporaries.
# - A hard link (or a symlink) planted at .NAME.rkpart to a file outside
#   DIR: an upload of NAME, plain or --resume, small or large, replaces the
#   name; the outside file keeps its content, mode and single link.
# - --resume of files the client does not hold (copy_abuse oracle): the
#   answer is "exists" or READY at 0, and no message carries the size or a
#   prefix hash of the server's file or temporary.
# - Temporaries older than --tmp-age go at start and while serving; fresh
#   ones stay.
. "$(dirname "$0")/lib.sh"
port=7918
D=$W/dir
H=$RK_BUILD/tests/copy/copy_abuse
mkdir -p "$D"
random "$D/.old.rkpart" 5000
touch -d "@$(($(date +%s) - 7200))" "$D/.old.rkpart"
random "$D/.fresh.rkpart" 5000
start_server $port "$D" --tmp-age 3600
[ ! -e "$D/.old.rkpart" ] || fail "an old temporary survived the start"
[ -e "$D/.fresh.rkpart" ] || fail "a fresh temporary was removed"
grep -q "removed 1 abandoned temporary" "$W/server.1.log" || fail "no log line for the sweep"

random "$W/outside" 200000
chmod 0600 "$W/outside"
cp -p "$W/outside" "$W/outside.orig"
check_outside() {
	cmp "$W/outside" "$W/outside.orig" || fail "the outside file changed ($1)"
	[ "$(stat -c %a "$W/outside")" = 600 ] || fail "the outside file's mode changed ($1)"
	[ "$(stat -c %h "$W/outside")" = 1 ] || fail "the outside file is still linked ($1)"
}
random "$W/small" 1000
random "$W/large" $((3 << 20))
chmod 0755 "$W/small" "$W/large"
for f in small large; do
	for how in hard sym; do
		for flag in "" --resume; do
			case $how in
			hard) ln "$W/outside" "$D/.$f.rkpart" ;;
			sym) ln -s "$W/outside" "$D/.$f.rkpart" ;;
			esac
			"$RK" copy -q $flag "$W/$f" "$RK_ADDR:$port:$f" ||
				fail "copy of $f over a planted $how link ${flag:-(plain)}"
			cmp "$W/$f" "$D/$f" || fail "$f differs ($how link ${flag:-plain})"
			check_outside "$f, $how link ${flag:-plain}"
			rm -f "$D/$f"
		done
	done
done
echo "planted links at the temporary name: replaced, the outside file untouched"

random "$D/secret" 300000
random "$D/.part.rkpart" $((3 * 65536 + 100))
cp "$D/.part.rkpart" "$W/part.orig"
for q in "secret 300000" "secret 299999" "secret 100" "part 300000" "part $((3 * 65536 + 100))"; do
	# shellcheck disable=SC2086
	"$H" oracle "$RK_ADDR" $port $q "$D/secret" "$W/part.orig" >"$W/oracle.out" 2>&1 ||
		fail "resume oracle ($q): $(cat "$W/oracle.out")"
	echo "resume of a file not held ($q): $(cat "$W/oracle.out")"
done
stop_server

start_server $port "$D" --tmp-age 4
random "$D/.late.rkpart" 100
touch -d "@$(($(date +%s) - 60))" "$D/.late.rkpart"
i=0
while [ -e "$D/.late.rkpart" ]; do
	i=$((i + 1))
	[ $i -lt 200 ] || fail "an old temporary survived while serving"
	sleep 0.05
done
echo "copy traps: ok"
