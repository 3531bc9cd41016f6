#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Fails when the shared library LIB needs MPI (a DT_NEEDED on libmpi or
# Open MPI's libopen-*): only podfeed's tools may link MPI.
set -eu
lib=${1:?usage: check_needed.sh LIBPODFEED.so}
needed=$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
# Not vacuous: an unreadable or empty dynamic section is a failure too.
echo "$needed" | grep -q '^libc\.so' || { echo "check_needed: $lib: no DT_NEEDED on libc (readelf -d failed?)" >&2; exit 1; }
if mpi=$(echo "$needed" | grep -E '^lib(mpi|open-rte|open-pal)'); then
    echo "check_needed: $lib needs MPI ($(echo $mpi)); only the tools may link it" >&2
    exit 1
fi
echo "check_needed: $lib needs $(echo $needed)"
