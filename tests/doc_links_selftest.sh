#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# tests/doc_links.py on small markdown files: links that resolve pass,
# a missing file, a missing anchor and an absolute path fail, each named;
# links in code are not links.
set -eu
check=$(cd "$(dirname "$0")" && pwd)/doc_links.py
dir=$(mktemp -d /tmp/pfdoclinks.XXXXXX)
trap 'rm -rf "$dir"' EXIT INT TERM
cd "$dir"
fail() { echo "doc_links_selftest: $*" >&2; exit 1; }
fence='```'

mkdir docs
cat >README.md <<EOF
# Title

See [the API](docs/api.md), [its errors](docs/api.md#the-error-contract),
[again](docs/api.md#errors-1 "a title"), [here](#a-section-code-bold--more), a
[directory](docs/), a [nested [bracket]](docs/api.md) and
[a site](https://example.com/x#y).

## A section: \`code\`, **bold** & more

[ref]: docs/api.md#the-error-contract
EOF
cat >docs/api.md <<EOF
# The API

## The error contract

## Errors

## Errors

In \`[code](missing.md)\` and a block, links are not links:

${fence}sh
[x](nowhere.md)
${fence}

Back to [the README](../README.md#a-section-code-bold--more).
EOF
"$check" README.md docs/api.md >out 2>&1 || { cat out; fail "good links failed"; }
grep -q 'links in 2 files resolve' out || fail "no summary line: $(cat out)"

printf 'A [gone](docs/gone.md) page.\n' >bad.md
if "$check" bad.md >out 2>&1; then fail "a missing file passed"; fi
grep -q "bad.md:1: link 'docs/gone.md': docs/gone.md does not exist" out ||
    fail "wrong message for a missing file: $(cat out)"

printf '# T\n\nSee [it](docs/api.md#the-eror-contract).\n' >anchor.md
if "$check" anchor.md >out 2>&1; then fail "a missing anchor passed"; fi
grep -q "anchor.md:3: link 'docs/api.md#the-eror-contract': docs/api.md has no heading #the-eror-contract" out ||
    fail "wrong message for a missing anchor: $(cat out)"

printf '# T\n\n[up](#t) and [down](#nothing-here)\n' >self.md
if "$check" self.md >out 2>&1; then fail "a missing anchor in the same file passed"; fi
grep -q "self.md:3: link '#nothing-here'" out || fail "wrong message for a local anchor: $(cat out)"

printf '[abs](/etc/passwd)\n' >abs.md
if "$check" abs.md >out 2>&1; then fail "an absolute path passed"; fi
grep -q "an absolute path" out || fail "wrong message for an absolute path: $(cat out)"

printf '[x](../README.md#title)\n' >docs/ref.md
printf '[y]: ../README.md#no-such\n' >>docs/ref.md
if "$check" docs/ref.md >out 2>&1; then fail "a broken reference definition passed"; fi
grep -q "docs/ref.md:2: link '../README.md#no-such'" out || fail "wrong message: $(cat out)"
grep -q "docs/ref.md:1:" out && fail "docs/ref.md:1 resolves, but was reported: $(cat out)"
echo "doc_links_selftest: ok"
