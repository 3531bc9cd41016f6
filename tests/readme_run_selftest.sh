#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# tests/readme_run.sh on small markdown files: which blocks run in which
# mode, files written, and a failing block or unknown directive failing.
set -eu
run=$(cd "$(dirname "$0")" && pwd)/readme_run.sh
dir=$(mktemp -d /tmp/pfreadmetest.XXXXXX)
trap 'rm -rf "$dir"' EXIT INT TERM
cd "$dir"
fail() { echo "readme_run_selftest: $*" >&2; exit 1; }
fence='```'

cat >doc.md <<EOF
Text.

${fence}sh
echo plain >>ran
${fence}

<!-- readme-run: skip, it would fail -->
${fence}sh
exit 1
${fence}

${fence}
not shell: never run
${fence}

<!-- readme-run: file hello.txt -->
${fence}text
hello
${fence}

<!-- readme-run: installed -->
${fence}sh
cat hello.txt >>ran
${fence}
EOF
"$run" doc.md >out 2>&1 || { cat out; fail "a clean file failed"; }
[ "$(cat ran)" = plain ] || fail "default mode ran: $(cat ran)"
grep -q '== doc.md: 1 block(s) ran' out || fail "no count line"
rm ran
"$run" --installed doc.md >out 2>&1 || { cat out; fail "--installed failed"; }
[ "$(cat ran)" = hello ] || fail "--installed ran: $(cat ran)"

printf '%ssh\ntrue\nfalse\necho after >ran2\n%s\n' "$fence" "$fence" >bad.md
if "$run" bad.md >out 2>&1; then fail "a failing block passed"; fi
[ ! -e ran2 ] || fail "a block went on after a failing command"
grep -q 'a block of bad.md failed' out || fail "no failure message: $(cat out)"

printf '<!-- readme-run: skip -->\n%ssh\ntrue\n%s\n' "$fence" "$fence" >dir.md
if "$run" dir.md >out 2>&1; then fail "a skip without a reason passed"; fi
grep -q 'dir.md:2: unknown directive "skip"' out || fail "wrong message: $(cat out)"

printf '%ssh\ntrue\n' "$fence" >open.md
if "$run" open.md >out 2>&1; then fail "an unclosed block passed"; fi
grep -q 'open.md:1: block not closed' out || fail "wrong message: $(cat out)"
printf '%sbash\ntrue\n%s\n' "$fence" "$fence" >bash.md
if "$run" bash.md >out 2>&1; then fail "a bash block passed"; fi
grep -q 'bash.md:1: a ```bash block would never run' out || fail "wrong message: $(cat out)"
echo "readme_run_selftest: ok"
