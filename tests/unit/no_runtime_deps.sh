#!/bin/sh
# no_runtime_deps.sh RK - the rk users run for copy, bench, doctor and serve
# loads no MPI and no MUNGE library: a storage node without them must run it
# (rk matrix opens libmunge itself when it needs it; rk-matrix-mpi is the
# opt-in MPI build).
set -eu
libs=$(ldd "$1") || { echo "ldd $1 failed"; exit 1; }
bad=$(echo "$libs" | grep -Ei 'libmpi|open-rte|open-pal|libpmix|libmunge|libucx|libucp|libuct' || true)
if [ -n "$bad" ]; then
	echo "rk links what it must not:"
	echo "$bad"
	exit 1
fi
echo "rk: $(echo "$libs" | wc -l) libraries, no MPI, no MUNGE"
