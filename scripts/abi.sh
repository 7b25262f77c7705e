#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# abi.sh: the ABI of libechomq against the last release's record.
#
#   scripts/abi.sh check BUILD    compare BUILD/libechomq.so (built with
#                                 debug info) with abi/libechomq.abi:
#                                 exit 1 naming every change abidiff sees
#                                 in the exported functions, variables and
#                                 the types of include/echomq.h, but for
#                                 added functions (compatible, listed)
#   scripts/abi.sh record BUILD   write abi/libechomq.abi from BUILD: done
#                                 at a release, and in a commit that takes
#                                 reserved room or breaks the ABI with a
#                                 new SONAME, with a line in CHANGELOG.md
#
# Needs abidw and abidiff (Debian: abigail-tools; scripts/deps.sh installs
# it). The policy is stated at the top of include/echomq.h.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
record=$root/abi/libechomq.abi

usage() {
    sed -n '3,16p' "$0" >&2
    exit 2
}

[[ $# -eq 2 ]] || usage
lib=$2/libechomq.so
[[ -f $lib ]] || { echo "abi: $lib does not exist (build first)" >&2; exit 2; }
dump() {
    abidw --no-corpus-path --no-show-locs --headers-dir "$root/include" \
        --drop-private-types "$lib"
}

case $1 in
record)
    dump >"$record"
    echo "abi: recorded $(grep -c '<elf-symbol ' "$record") symbols in abi/libechomq.abi"
    ;;
check)
    [[ -f $record ]] || { echo "abi: no record abi/libechomq.abi" >&2; exit 1; }
    now=$(mktemp)
    trap 'rm -f "$now"' EXIT
    dump >"$now"
    set +e
    report=$(abidiff --no-show-locs --no-added-syms "$record" "$now")
    rc=$?
    added=$(abidiff --no-show-locs "$record" "$now" | sed -n "s/^  \[A\] //p")
    set -e
    if [[ $rc -ne 0 ]]; then
        echo "$report"
        echo "abi: libechomq differs from abi/libechomq.abi (abidiff exit $rc):" \
            "an ABI change must be recorded on purpose (scripts/abi.sh record," \
            "a CHANGELOG.md line; the policy is in include/echomq.h)" >&2
        exit 1
    fi
    if [[ -n $added ]]; then
        echo "abi: added since abi/libechomq.abi (compatible):"
        echo "$added"
    fi
    echo "abi: the exported symbols and types match abi/libechomq.abi"
    ;;
*)
    usage
    ;;
esac
