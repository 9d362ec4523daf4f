#!/bin/sh
# consumer.sh BUILD SOURCE unit|rdma - librdmakit as a dependency, used only
# through its installed files, from a prefix that is not the configured one.
#
# unit: 'cmake --install BUILD --prefix TMP'; then consumer.c (C11) and
#   consumer.cpp (C++17, -pedantic -Werror) built with pkg-config against
#   the shared library and against the static one, and with
#   find_package(rdmakit) (cmake-consumer/); each prints the library's
#   version. The SONAME is the ABI number; the static build needs no
#   librdmakit at run time; nothing names the configured prefix.
# rdma: the same install and pkg-config builds, then the C++ client's echo
#   calls against the C server, over the sandbox's device.
set -eu
build=$1 src=$2 mode=$3
w=$(mktemp -d "${TMPDIR:-/tmp}/rk-consumer.XXXXXX")
server=
trap '[ -z "$server" ] || kill "$server" 2>/dev/null; rm -rf "$w"' EXIT
fail() {
	echo "consumer ($mode): $*" >&2
	exit 1
}

prefix=$w/prefix
cmake --install "$build" --prefix "$prefix" >"$w/install.log" 2>&1 ||
	fail "install: $(tail -5 "$w/install.log")"
pc=$(find "$prefix" -name rdmakit.pc)
[ -n "$pc" ] || fail "no rdmakit.pc under $prefix"
PKG_CONFIG_PATH=$(dirname "$pc")
export PKG_CONFIG_PATH
flags=$(pkg-config --cflags --libs rdmakit) || fail "pkg-config rdmakit"
case $flags in
*"$prefix"*) ;;
*) fail "pkg-config does not point into the prefix installed to: $flags" ;;
esac
libdir=$(pkg-config --variable=libdir rdmakit)
so=$(readelf -d "$libdir/librdmakit.so" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$so" = librdmakit.so.0 ] || fail "SONAME '$so', not librdmakit.so.0"

src_c=$src/tests/install/consumer.c src_cpp=$src/tests/install/consumer.cpp
# A library built with the sanitizers (make asan) needs their runtime first in
# every program that loads it: its consumers are built with them too.
san=
if grep -q '^RK_SANITIZE:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
	san=-fsanitize=address,undefined
fi
flags="$san $flags"
# shellcheck disable=SC2086 # the flags are words
cc -std=c11 -Wall -Wextra -Werror "$src_c" $flags -o "$w/consumer_c" || fail "C build"
# shellcheck disable=SC2086
c++ -std=c++17 -Wall -Wextra -pedantic -Werror "$src_cpp" $flags -o "$w/consumer_cpp" ||
	fail "C++ build (extern \"C\" guards, headers valid C++17)"
LD_LIBRARY_PATH=$libdir "$w/consumer_c" version | grep -q "librdmakit [0-9]" || fail "C: version"
LD_LIBRARY_PATH=$libdir "$w/consumer_cpp" version | grep -q "librdmakit [0-9]" ||
	fail "C++: version"

if [ "$mode" = unit ]; then
	# Static: librdmakit.a, its private dependencies from Requires.private / Libs.private.
	# shellcheck disable=SC2046
	cc -std=c11 $san "$src_c" $(pkg-config --cflags rdmakit) "$libdir/librdmakit.a" \
		$(pkg-config --static --libs rdmakit | sed 's/-lrdmakit\b//') -o "$w/consumer_c_static" ||
		fail "static C build"
	! ldd "$w/consumer_c_static" | grep -q librdmakit || fail "the static build loads librdmakit"
	"$w/consumer_c_static" version | grep -q "librdmakit [0-9]" || fail "static: version"
	# CMake: find_package(rdmakit 0.1 CONFIG) from the prefix.
	cmake -S "$src/tests/install/cmake-consumer" -B "$w/cmake" -DCMAKE_PREFIX_PATH="$prefix" \
		-DCMAKE_C_FLAGS="$san" -DCMAKE_CXX_FLAGS="$san" >"$w/cmake.log" 2>&1 || fail "find_package: $(tail -5 "$w/cmake.log")"
	cmake --build "$w/cmake" >>"$w/cmake.log" 2>&1 || fail "CMake build: $(tail -5 "$w/cmake.log")"
	for p in consumer_c consumer_cpp consumer_c_static; do
		"$w/cmake/$p" version | grep -q "librdmakit [0-9]" || fail "CMake's $p: version"
	done
	! ldd "$w/cmake/consumer_c_static" | grep -q librdmakit ||
		fail "rdmakit::rdmakit_static loads librdmakit"
	echo "consumer (unit): pkg-config (shared, static, C, C++) and find_package from $prefix: ok"
	exit 0
fi

port=7650
LD_LIBRARY_PATH=$libdir "$w/consumer_c" serve "$RK_ADDR" $port 50 >"$w/server.log" 2>&1 &
server=$!
i=0
until grep -q listening "$w/server.log"; do
	i=$((i + 1))
	[ $i -lt 300 ] && kill -0 "$server" 2>/dev/null || fail "server: $(cat "$w/server.log")"
	sleep 0.1
done
LD_LIBRARY_PATH=$libdir timeout 120 "$w/consumer_cpp" call "$RK_ADDR" $port 50 ||
	fail "the C++ client's calls"
wait "$server" || fail "server: $(cat "$w/server.log")"
server=
grep -q "answered 50 calls" "$w/server.log" || fail "server: $(cat "$w/server.log")"
echo "consumer (rdma): C++ client, C server, 50 echo calls from the installed library: ok"
