#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The Python package's two installed ways in, each imported from a scratch
# directory by /usr/bin/python3 and run over data made by shardtool:
#   meson install of BUILD_DIR into a scratch DESTDIR (beside the C library);
#   pip install --no-build-isolation of the source tree (python3-mesonpy),
#   built in build-pip/ (kept, so that the next run is incremental).
# Usage: tests/python/install_check.sh [BUILD_DIR]   (default: build)
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$src/build}" && pwd)
py=/usr/bin/python3
scratch=$(mktemp -d /tmp/pfpyinstall.XXXXXX)
trap 'rm -rf "$scratch"' EXIT INT TERM
fail() { echo "python install_check: $*" >&2; exit 1; }

"$build/tools/shardtool" synth --kind tokens --records 600 --shards 2 --out "$scratch/data" \
    --seed 3 >/dev/null
cat >"$scratch/use.py" <<'PY'
import sys, podfeed
assert podfeed.__file__.startswith(sys.argv[2]), podfeed.__file__
with podfeed.Loader(sys.argv[1], {"tokens": ("int32", 16), "label": "int64"}, 50) as l:
    print(sum(b["tokens"].shape[1] for b in l), "records from", podfeed.__file__)
PY
check() { # name site-dir
    out=$(cd "$scratch" && PYTHONPATH=$2 $py use.py "$scratch/data" "$2") ||
        fail "$1: import or iteration failed"
    echo "python install_check: $1: $out"
    case $out in "600 records from $2"*) ;; *) fail "$1: expected 600 records from $2";; esac
}

meson install -C "$build" --no-rebuild --destdir "$scratch/root" >"$scratch/install.log" 2>&1 ||
    { cat "$scratch/install.log" >&2; fail "meson install failed"; }
init=$(find "$scratch/root" -path '*/podfeed/__init__.py' | head -n 1)
[ -n "$init" ] || fail "meson install put no podfeed package in $scratch/root"
ls "$(dirname "$init")"/_podfeed*.so >/dev/null || fail "meson install put no extension"
check "meson install" "$(dirname "$(dirname "$init")")"

# python3-mesonpy 0.12 reconfigures a given builddir, and fails on an empty one.
[ -f "$src/build-pip/build.ninja" ] ||
    meson setup "$src/build-pip" "$src" -Dtests=disabled >"$scratch/setup.log" 2>&1 ||
    { cat "$scratch/setup.log" >&2; fail "meson setup build-pip failed"; }
$py -m pip install --no-build-isolation --no-deps --no-index --target "$scratch/pip" \
    --config-settings=builddir="$src/build-pip" \
    --config-settings=setup-args=-Dtests=disabled "$src" >"$scratch/pip.log" 2>&1 ||
    { tail -n 40 "$scratch/pip.log" >&2; fail "pip install failed"; }
check "pip install" "$scratch/pip"
echo "python install_check: ok"
