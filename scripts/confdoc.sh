#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# confdoc.sh [--check] [BUILD_DIR]: builds tools/gen_confdoc in BUILD_DIR
# (default build/gcc, configured if needed) and writes docs/CONFIGURATION.md
# from the library's property table. With --check it writes nothing and
# fails when the committed file differs from what the library generates.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
check=0
if [[ "${1:-}" == "--check" ]]; then
    check=1
    shift
fi
build=${1:-$root/build/gcc}
doc=$root/docs/CONFIGURATION.md

if [[ ! -f "$build/CMakeCache.txt" ]]; then
    cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
log=$(mktemp)
out=$(mktemp)
trap 'rm -f "$log" "$out"' EXIT

if ! cmake --build "$build" --target gen_confdoc >"$log" 2>&1; then
    # Tell a library without the property table apart from a real error.
    if cmake --build "$build" --target echomq_static >/dev/null 2>&1 &&
        ! nm --defined-only "$build/libechomq.a" 2>/dev/null |
            grep -q ' T emq_conf_property$'; then
        echo "confdoc: the library does not define emq_conf_property() yet" >&2
        echo "confdoc: (the configuration property table is not in the build)," >&2
        echo "confdoc: so docs/CONFIGURATION.md cannot be generated or checked" >&2
    else
        cat "$log" >&2
        echo "confdoc: building tools/gen_confdoc failed" >&2
    fi
    exit 1
fi
if ! "$build/gen_confdoc" >"$out"; then
    echo "confdoc: gen_confdoc failed" >&2
    exit 1
fi

if [[ $check -eq 1 ]]; then
    if [[ ! -f "$doc" ]]; then
        echo "confdoc: docs/CONFIGURATION.md is missing; create it with scripts/confdoc.sh" >&2
        exit 1
    fi
    if ! diff -u "$doc" "$out"; then
        echo "confdoc: docs/CONFIGURATION.md is stale; regenerate it with scripts/confdoc.sh and commit it" >&2
        exit 1
    fi
    echo "confdoc: docs/CONFIGURATION.md matches the library ($(grep -c '^| `' "$doc") properties)"
else
    cp "$out" "$doc"
    echo "confdoc: wrote $doc"
fi
