#!/bin/sh
# deb_packages.sh SOURCE - the Debian packages, built and used as a user would:
# scripts/build-deb (what 'make deb' runs: dpkg-buildpackage, lintian without
# errors) into a directory of the test's own; apt installs the four packages;
# rk runs, its man pages and completion are where man and bash look; the C and
# C++ consumers (tests/install/) build against the system's librdmakit by
# pkg-config and by find_package with no prefix given, and print its version;
# in the sandbox (scripts/softroce), the C++ client's echo calls against the C
# server. The packages are purged again at the end, pass or fail.
#
# Exit 77 (skipped, saying why) where it cannot run without changing what the
# machine had: not root, no apt or dpkg, not a git checkout, or rdmakit's
# packages already installed.
set -eu
src=$(readlink -f "$1")
pkgs="librdmakit0 librdmakit-dev rdmakit-tools python3-rdmakit"
skip() {
	echo "SKIP: deb_packages: $*"
	exit 77
}
fail() {
	echo "deb_packages: $*" >&2
	exit 1
}
[ "$(id -u)" = 0 ] || skip "needs root to install packages"
command -v apt-get >/dev/null && command -v dpkg-buildpackage >/dev/null ||
	skip "no apt-get or dpkg-buildpackage: not a Debian system"
git -C "$src" rev-parse --git-dir >/dev/null 2>&1 || skip "$src is not a git checkout (make deb packs the files git tracks)"
for p in $pkgs; do
	! dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q ' installed$' ||
		skip "$p is installed already; this test would remove it"
done
for c in lintian dh git man; do
	command -v $c >/dev/null || fail "$c is missing: run scripts/deps"
done

w=$(mktemp -d "${TMPDIR:-/tmp}/rk-deb.XXXXXX")
installed=0
cleanup() {
	if [ $installed = 1 ]; then
		# shellcheck disable=SC2086
		DEBIAN_FRONTEND=noninteractive apt-get purge -y -q $pkgs >"$w/purge.log" 2>&1 ||
			{ cat "$w/purge.log" >&2; echo "deb_packages: purge failed" >&2; }
	fi
	rm -rf "$w"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
t0=$(date +%s)
step() { echo "deb_packages: [$(($(date +%s) - t0)) s] $*"; }

step "building the packages (scripts/build-deb)"
"$src/scripts/build-deb" "$w/deb" >"$w/build.log" 2>&1 || fail "build-deb: $(tail -30 "$w/build.log")"
grep -E '^[WE]: ' "$w/build.log" || true # lintian's warnings, for the log
for p in $pkgs; do
	ls "$w/deb/${p}_"*.deb >/dev/null 2>&1 || fail "no $p package built"
done

step "installing them with apt"
installed=1
debs=
for p in $pkgs; do debs="$debs $(ls "$w/deb/${p}_"*.deb)"; done # not the -dbgsym ones
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $debs \
	>"$w/install.log" 2>&1 || fail "apt-get install: $(tail -20 "$w/install.log")"
for p in $pkgs; do
	dpkg-query -W -f='${Status}\n' "$p" | grep -q ' installed$' || fail "$p is not installed"
done

version=$(cd "$src" && dpkg-parsechangelog -S Version)
out=$(/usr/bin/rk --version) || fail "rk --version failed"
[ "$out" = "rk ${version%%-*}" ] || fail "rk --version says '$out', the package is $version"
if grep -qs '^path-exclude=/usr/share/man' /etc/dpkg/dpkg.cfg.d/*; then
	# A minimal (container) image: dpkg is told not to unpack man pages.
	echo "deb_packages: dpkg excludes /usr/share/man here; checking the package's pages instead"
	dpkg-deb -c "$(ls "$w/deb/rdmakit-tools_"*.deb)" | grep -q ' ./usr/share/man/man1/rk-copy.1.gz$' ||
		fail "rdmakit-tools has no rk-copy.1.gz"
else
	page=$(man -w rk-copy) || fail "man -w rk-copy: no page"
	case $page in /usr/share/man/man1/rk-copy.1*) ;; *) fail "man -w rk-copy: $page" ;; esac
	man rk-copy 2>/dev/null | grep -q -- '--token-file' || fail "man rk-copy does not render its options"
fi
[ -f /usr/share/bash-completion/completions/rk ] || fail "no bash completion installed"
bash -c '. /usr/share/bash-completion/completions/rk && complete -p rk' >/dev/null ||
	fail "the bash completion does not register for rk"

# The system's library, and only it: pkg-config and CMake must not find an
# rdmakit that 'make install' may have put under /usr/local.
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
libdir=/usr/lib/$multiarch
PKG_CONFIG_LIBDIR=$libdir/pkgconfig:/usr/lib/pkgconfig:/usr/share/pkgconfig
export PKG_CONFIG_LIBDIR
[ "$(pkg-config --variable=libdir rdmakit)" = "$libdir" ] ||
	fail "pkg-config's rdmakit libdir is $(pkg-config --variable=libdir rdmakit), not $libdir"
uses_system_lib() { # BINARY: librdmakit.so.0 is the package's (/lib is /usr/lib on Debian 12)
	so=$(ldd "$1" | sed -n 's/.*librdmakit\.so\.0 => \([^ ]*\) .*/\1/p')
	[ -n "$so" ] && [ "$(readlink -f "$so")" = "$(readlink -f "$libdir/librdmakit.so.0")" ] ||
		fail "$1 does not load $libdir/librdmakit.so.0: $(ldd "$1" | grep rdmakit)"
}

step "the Python package from the system's python3"
# Out of the tree (no PYTHONPATH), as a user imports it: the package's
# version, the library it loads is the system's, and no numpy at import.
(cd / && env -u PYTHONPATH /usr/bin/python3 -c '
import sys, rdmakit
assert "numpy" not in sys.modules, "numpy imported"
print(rdmakit.__file__, rdmakit.__version__, rdmakit.library_version())
') >"$w/python.log" 2>&1 || fail "import rdmakit: $(cat "$w/python.log")"
grep -q "^/usr/lib/python3/dist-packages/rdmakit/__init__.py ${version%%-*} ${version%%-*}$" \
	"$w/python.log" || fail "python3-rdmakit: $(cat "$w/python.log")"
uses_system_lib "$(ls /usr/lib/python3/dist-packages/rdmakit/_rk.*.so)"
! readelf -d /usr/lib/python3/dist-packages/rdmakit/_rk.*.so | grep -qE 'R(UN)?PATH' ||
	fail "the extension has an rpath"

step "building the consumers with pkg-config"
flags=$(pkg-config --cflags --libs rdmakit) || fail "pkg-config rdmakit"
# shellcheck disable=SC2086 # the flags are words
cc -std=c11 -Wall -Wextra -Werror "$src/tests/install/consumer.c" $flags -o "$w/consumer_c" ||
	fail "C build"
# shellcheck disable=SC2086
c++ -std=c++17 -Wall -Wextra -pedantic -Werror "$src/tests/install/consumer.cpp" $flags \
	-o "$w/consumer_cpp" || fail "C++ build"
for p in consumer_c consumer_cpp; do
	"$w/$p" version | grep -q "librdmakit ${version%%-*}" || fail "pkg-config's $p: version"
	uses_system_lib "$w/$p"
done

step "pip install ./python against the system's library (pkg-config), into a directory"
# What a user does without the Debian package: the extension is built from
# python/ against librdmakit-dev. Offline: setuptools and cffi are the system's.
/usr/bin/python3 -m pip install -q --no-build-isolation --no-deps --no-index \
	--target "$w/pip" "$src/python" >"$w/pip.log" 2>&1 || fail "pip install: $(tail -20 "$w/pip.log")"
(cd / && PYTHONPATH="$w/pip" /usr/bin/python3 -c 'import rdmakit; print(rdmakit.__file__)') \
	>"$w/pip-import.log" 2>&1 || fail "import of the pip-installed rdmakit: $(cat "$w/pip-import.log")"
grep -q "^$w/pip/rdmakit/__init__.py$" "$w/pip-import.log" ||
	fail "pip's rdmakit is not the one imported: $(cat "$w/pip-import.log")"
uses_system_lib "$(ls "$w"/pip/rdmakit/_rk.*.so)"

step "building the consumers with find_package (no prefix given)"
cmake -S "$src/tests/install/cmake-consumer" -B "$w/cmake" -DCMAKE_IGNORE_PREFIX_PATH=/usr/local \
	>"$w/cmake.log" 2>&1 || fail "find_package: $(tail -10 "$w/cmake.log")"
cmake --build "$w/cmake" >>"$w/cmake.log" 2>&1 || fail "CMake build: $(tail -10 "$w/cmake.log")"
grep -q "rdmakit_DIR:PATH=$libdir/cmake/rdmakit" "$w/cmake/CMakeCache.txt" ||
	fail "find_package found $(grep rdmakit_DIR "$w/cmake/CMakeCache.txt")"
for p in consumer_c consumer_cpp consumer_c_static; do
	"$w/cmake/$p" version | grep -q "librdmakit ${version%%-*}" || fail "CMake's $p: version"
done
uses_system_lib "$w/cmake/consumer_c"
! ldd "$w/cmake/consumer_c_static" | grep -q librdmakit || fail "rdmakit::rdmakit_static loads librdmakit"

step "the C++ client's echo calls against the C server, from the installed library, in the sandbox"
# The guest shares this host's files: the packages installed here are its too.
cat >"$w/echo.sh" <<'EOF2'
set -eu
"$1/consumer_c" serve "$RK_ADDR" 7652 30 >"$1/server.log" 2>&1 &
s=$!
i=0
until grep -q listening "$1/server.log"; do
	i=$((i + 1))
	[ $i -lt 300 ] && kill -0 $s 2>/dev/null || { cat "$1/server.log"; exit 1; }
	sleep 0.1
done
timeout 120 "$1/consumer_cpp" call "$RK_ADDR" 7652 30
wait $s
cat "$1/server.log"
EOF2
RK_SOFTROCE_QUIET=1 "$src/scripts/softroce" run --timeout 300 -- sh "$w/echo.sh" "$w/cmake" \
	>"$w/echo.log" 2>&1 || fail "echo in the sandbox: $(tail -20 "$w/echo.log")"
grep -q "answered 30 calls" "$w/echo.log" || fail "echo: $(tail -20 "$w/echo.log")"

step "purging the packages"
installed=0
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive apt-get purge -y -q $pkgs >"$w/purge.log" 2>&1 ||
	fail "apt-get purge: $(tail -10 "$w/purge.log")"
[ ! -e "$libdir/librdmakit.so.0" ] && [ ! -e /usr/bin/rk ] || fail "files left after the purge"
step "ok: built, lintian clean of errors, installed, used from C, C++, pkg-config, CMake and Python (package and pip), an echo RPC in the sandbox, purged"
