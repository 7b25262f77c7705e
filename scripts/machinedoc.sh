#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# machinedoc.sh [--check] [BUILD_DIR]: builds tools/gen_machinedoc in
# BUILD_DIR (default build/gcc, configured if needed) and writes the table
# of the consumer session's states (src/consumer/machine.c) into
# docs/CONSUMER.md, between the lines "<!-- machine table: begin -->" and
# "<!-- machine table: end -->". With --check it writes nothing and fails
# when the committed table differs from what the library prints.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
check=0
if [[ "${1:-}" == "--check" ]]; then
    check=1
    shift
fi
build=${1:-$root/build/gcc}
doc=$root/docs/CONSUMER.md
begin='<!-- machine table: begin -->'
end='<!-- machine table: end -->'

if [[ ! -f "$build/CMakeCache.txt" ]]; then
    cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
log=$(mktemp)
table=$(mktemp)
out=$(mktemp)
trap 'rm -f "$log" "$table" "$out"' EXIT

if ! cmake --build "$build" --target gen_machinedoc >"$log" 2>&1; then
    cat "$log" >&2
    echo "machinedoc: building tools/gen_machinedoc failed" >&2
    exit 1
fi
"$build/gen_machinedoc" >"$table"
if [[ $(grep -cxF "$begin" "$doc") -ne 1 || $(grep -cxF "$end" "$doc") -ne 1 ]]; then
    echo "machinedoc: docs/CONSUMER.md needs one line '$begin' and one '$end'" >&2
    exit 1
fi
# The document with the lines between the markers replaced by the table.
awk -v begin="$begin" -v end="$end" -v table="$table" '
    $0 == begin { print; while ((getline line < table) > 0) print line; skip = 1; next }
    $0 == end { skip = 0 }
    !skip { print }' "$doc" >"$out"

if [[ $check -eq 1 ]]; then
    if ! diff -u "$doc" "$out"; then
        echo "machinedoc: docs/CONSUMER.md's machine table is stale; regenerate it with scripts/machinedoc.sh and commit it" >&2
        exit 1
    fi
    echo "machinedoc: docs/CONSUMER.md's machine table matches the library"
else
    cp "$out" "$doc"
    echo "machinedoc: wrote the machine table of $doc"
fi
