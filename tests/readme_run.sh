#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Runs the shell blocks of markdown files verbatim, so the text cannot
# drift from what works.  Usage:
#   tests/readme_run.sh [--installed] FILE.md...
# Every ```sh block runs (```bash, ```shell, ```console are refused, as
# they would never run), in file order, as one `sh -e` script per file in
# the current directory (tools/test runs it from the top of the tree with
# build/tools first on PATH), unless the line right before its fence is
#   <!-- readme-run: skip, REASON -->       never run (say why)
#   <!-- readme-run: installed -->          run only with --installed
#   <!-- readme-run: file NAME -->          (any block) with --installed,
#                                           written to NAME first
# --installed runs the `installed` blocks instead, against an installed
# podfeed (tests/install_check.sh sets PATH, PKG_CONFIG_PATH, ...).
set -eu
mode=default
if [ "${1:-}" = --installed ]; then mode=installed; shift; fi
[ $# -gt 0 ] || { echo "usage: readme_run.sh [--installed] FILE.md..." >&2; exit 2; }

script=$(mktemp /tmp/pfreadme.XXXXXX)
trap 'rm -f "$script"' EXIT INT TERM
for md in "$@"; do
    [ -f "$md" ] || { echo "readme_run: $md: no such file" >&2; exit 2; }
    awk -v mode="$mode" -v md="$md" '
    function fail(msg) { printf "readme_run: %s:%d: %s\n", md, NR, msg > "/dev/stderr"; bad = 1; exit 1 }
    !inblock && /^```/ {
        lang = substr($0, 4); inblock = 1; start = NR; body = ""
        if (lang ~ /^(bash|shell|console|zsh)$/)
            fail("a ```" lang " block would never run: write ```sh (run with sh -e)")
        dir = ""
        if (prev ~ /^<!-- readme-run:/) {
            dir = prev
            sub(/^<!-- readme-run: */, "", dir); sub(/ *-->$/, "", dir)
            if (dir !~ /^skip, ./ && dir != "installed" && dir !~ /^file [^ ]+$/)
                fail("unknown directive \"" dir "\" (skip, REASON | installed | file NAME)")
        }
        prev = $0; next
    }
    inblock && /^```$/ {
        inblock = 0; prev = $0
        if (dir ~ /^file /) {
            if (mode == "installed") {
                name = substr(dir, 6)
                printf "cat >%s <<\047PF_README_EOF\047\n%sPF_README_EOF\n", name, body
            }
        } else if (lang == "sh" && dir !~ /^skip/ &&
                   ((mode == "installed") == (dir == "installed"))) {
            printf "echo \"== %s:%d\"\n%s", md, start, body
            ran++
        }
        next
    }
    inblock { body = body $0 "\n"; next }
    { prev = $0 }
    END {
        if (bad) exit 1
        if (inblock) { NR = start; fail("block not closed") }
        printf "echo \"== %s: %d block(s) ran\"\n", md, ran
    }' "$md" >"$script"
    sh -e "$script" || { echo "readme_run: a block of $md failed" >&2; exit 1; }
done
