#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Installs a build into a scratch DESTDIR and, from a scratch directory,
# runs the README's `installed` blocks verbatim (tests/readme_run.sh): the
# C example compiled with `pkg-config --cflags --libs podfeed` and run on
# data made by the installed shardtool.  Checks what it printed, that it
# ran on the installed library, and that the library does not need MPI.
# Usage: tests/install_check.sh [BUILD_DIR]   (default: build)
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src/build}" && pwd)
scratch=$(mktemp -d /tmp/pfinstall.XXXXXX)
trap 'rm -rf "$scratch"' EXIT INT TERM
fail() { echo "install_check: $*" >&2; exit 1; }

root=$scratch/root
meson install -C "$build" --no-rebuild --destdir "$root" >"$scratch/install.log" 2>&1 ||
    { cat "$scratch/install.log" >&2; fail "meson install failed"; }
pc=$(find "$root" -name podfeed.pc)
lib=$(find "$root" -name libpodfeed.so)
bin=$(dirname "$(find "$root" -name shardtool)")
[ -n "$pc" ] && [ -n "$lib" ] && [ -d "$bin" ] ||
    fail "podfeed.pc, libpodfeed.so or shardtool is missing from the install"
"$src/tests/check_needed.sh" "$lib"

# What a user of another prefix sets (README, "From C"); the
# sysroot maps the .pc's /usr/local paths into the DESTDIR.
export PKG_CONFIG_PATH="$(dirname "$pc")" PKG_CONFIG_SYSROOT_DIR="$root"
export LD_LIBRARY_PATH="$(dirname "$lib")" PATH="$bin:$PATH"
echo "install_check: pkg-config --cflags --libs podfeed: $(pkg-config --cflags --libs podfeed)"
mkdir "$scratch/work"
cd "$scratch/work"
"$src/tests/readme_run.sh" --installed "$src/README.md" >"$scratch/out" 2>&1 ||
    { cat "$scratch/out" >&2; fail "a README block failed (above)"; }
cat "$scratch/out"

grep -qx '3 steps of 2 x 256 records' "$scratch/out" || fail "the example did not print '3 steps of 2 x 256 records'"
ldd ./example | grep -q "libpodfeed.so.0 => $root/" ||
    fail "the example did not load the installed libpodfeed.so: $(ldd ./example | grep podfeed)"
echo "install_check: ok"
