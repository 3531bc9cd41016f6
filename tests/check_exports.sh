#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The shared library exports exactly the API: the functions its installed
# headers declare with PF_API, the names its version script lists, and the
# dynamic symbols it defines are one and the same set.
#   check_exports.sh LIBRARY VERSION_SCRIPT HEADER...
set -eu

lib=$1
map=$2
shift 2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# PF_API declarations, also when they span several lines.
cat "$@" | tr '\n' ' ' | grep -oE 'PF_API[^;(]*\(' |
	grep -oE 'pf_[A-Za-z0-9_]+[[:space:]]*\($' | tr -d '( ' |
	sort > "$tmp/declared"
# The global names of the version script (comments dropped).
sed -e 's|/\*.*\*/||' "$map" |
	awk '/^[[:space:]]*global:/ { on = 1; next }
	     /^[[:space:]]*local:/ { on = 0 }
	     /^[[:space:]]*}/ { on = 0 }
	     on { gsub(/[[:space:];]/, ""); if ($0 != "") print }' |
	sort > "$tmp/mapped"
# What the library defines: functions (T), anything else but the version
# node itself (an absolute symbol named after the node) is reported too.
nm -D --defined-only "$lib" > "$tmp/nm"
# name@@NODE is a function's current version; name@NODE (one @) an old
# version kept for the programs linked with it, which no header declares
# any more (the sized ABI's compat entries): it must still be in the map.
awk '$2 == "T" && $3 !~ /[^@]@[^@]/ { sub(/@.*/, "", $3); print $3 }' "$tmp/nm" | sort > "$tmp/exported"
awk '$2 == "T" && $3 ~ /[^@]@[^@]/ { sub(/@.*/, "", $3); print $3 }' "$tmp/nm" | sort > "$tmp/compat"
awk '$2 != "T" && !($2 == "A" && $3 ~ /^PODFEED_/) { print $2, $3 }' "$tmp/nm" > "$tmp/other"

status=0
if [ ! -s "$tmp/declared" ]; then
	echo "no PF_API declaration found in: $*" >&2
	exit 1
fi
report() {
	# report WHAT LEFT RIGHT: names in LEFT that RIGHT lacks.
	comm -23 "$2" "$3" > "$tmp/diff"
	if [ -s "$tmp/diff" ]; then
		echo "$1:" >&2
		sed 's/^/  /' "$tmp/diff" >&2
		status=1
	fi
}
report "exported by $lib but declared PF_API in no public header" "$tmp/exported" "$tmp/declared"
report "declared PF_API but not exported by $lib" "$tmp/declared" "$tmp/exported"
report "declared PF_API but missing from $map" "$tmp/declared" "$tmp/mapped"
sort -u "$tmp/declared" "$tmp/compat" > "$tmp/known"
report "in $map but declared PF_API in no public header (nor an old version kept)" "$tmp/mapped" "$tmp/known"
report "an old version kept but missing from $map" "$tmp/compat" "$tmp/mapped"
if [ -s "$tmp/other" ]; then
	echo "$lib exports symbols that are not API functions:" >&2
	sed 's/^/  /' "$tmp/other" >&2
	status=1
fi
[ $status -ne 0 ] || echo "$(wc -l < "$tmp/exported") functions exported, each declared PF_API and in $map; $(wc -l < "$tmp/compat") old versions kept"
exit $status
