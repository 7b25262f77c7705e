#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# check_symbols.sh LIBECHOMQ.so: fails unless every symbol the shared
# library exports is part of the public API (emq_*). The sources are built
# with hidden visibility and only EMQ_EXPORT functions are visible, so an
# internal helper showing up here means a missing `static` or a visibility
# mistake. Linker-defined markers (_init, _fini, _edata, _end, __bss_start)
# and version nodes are not the library's own and are ignored.
set -euo pipefail

lib=${1:?usage: check_symbols.sh path/to/libechomq.so}
if [[ ! -f "$lib" ]]; then
    echo "check_symbols: $lib does not exist" >&2
    exit 1
fi

# "ADDR TYPE NAME" per line; absolute (A) entries are version nodes.
symbols=$(nm -D --defined-only "$lib" | awk '$2 != "A" { print $3 }' | sed 's/@.*//')
# emq__ names are the library's internal ones: never exported.
bad=$(grep -Ev '^(emq_[A-Za-z0-9][A-Za-z0-9_]*|_init|_fini|_edata|_end|__bss_start)$' <<<"$symbols" || true)
public=$(grep -c '^emq_' <<<"$symbols" || true)

if [[ -n "$bad" ]]; then
    echo "check_symbols: $lib exports symbols outside the emq_ API:" >&2
    while IFS= read -r s; do echo "  $s"; done <<<"$bad" >&2
    echo "check_symbols: make them static, or mark public API with EMQ_EXPORT in include/echomq.h" >&2
    exit 1
fi
if [[ "$public" -eq 0 ]]; then
    echo "check_symbols: $lib exports no emq_ symbol at all" >&2
    exit 1
fi
# Every function the header marks EMQ_EXPORT and the library defines is
# visible; report (without failing) the ones not implemented yet.
header=$(dirname "$0")/../include/echomq.h
declared=$(grep -o 'EMQ_EXPORT[^(]*(' "$header" | sed -n 's/.*[ *]\(emq_[A-Za-z0-9_]*\)($/\1/p' | sort -u)
missing=$(comm -23 <(echo "$declared") <(sort -u <<<"$symbols"))
echo "check_symbols: $public exported symbols, all emq_*"
if [[ -n "$missing" ]]; then
    echo "check_symbols: declared in echomq.h but not (yet) defined: $(echo "$missing" | tr '\n' ' ')"
fi
