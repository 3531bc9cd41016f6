#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Builds a small indexed dataset with $SHARDTOOL, runs $EMBED_EXAMPLE over
# it and checks what it prints: per-core shapes, one value, the metrics.
set -eu
: "${SHARDTOOL:?SHARDTOOL is not set (run through meson test)}"
: "${EMBED_EXAMPLE:?EMBED_EXAMPLE is not set (run through meson test)}"
dir=$(mktemp -d /tmp/pfembed.XXXXXX)
trap 'rm -rf "$dir"' EXIT INT TERM

"$SHARDTOOL" synth --kind tokens --records 1000 --shards 2 --out "$dir/raw" >/dev/null
"$SHARDTOOL" convert --shards 2 --out "$dir/z" "$dir/raw" >/dev/null
"$EMBED_EXAMPLE" 'tokens:int32[256],label:int64[1]' "$dir/z" >"$dir/out"
cat "$dir/out"

fail() { echo "run_embed_example: $*" >&2; exit 1; }
# 2 cores x 16 per-core batch = 32 a step: 1000 records give 31 steps.
grep -q '^core 0 tokens int32\[16\]\[256\] first [0-9]' "$dir/out" || fail "no core 0 tokens shape"
grep -q '^core 1 label int64\[16\]\[1\] first [0-7]$' "$dir/out" || fail "no core 1 label shape"
grep -q '^steps 31 records 992 dropped 8 read [1-9][0-9]* bytes$' "$dir/out" || fail "wrong metrics line"
# A bad spec fails with the loader's message and status 1.
if "$EMBED_EXAMPLE" 'tokens:int33[4]' "$dir/z" 2>"$dir/err"; then fail "a bad spec was accepted"; fi
grep -q 'embed_example: ' "$dir/err" || fail "no error message for a bad spec"
