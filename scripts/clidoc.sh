#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# clidoc.sh [--check] [BUILD_DIR]: builds tools/gen_clidoc in BUILD_DIR
# (default build/gcc, configured if needed) and rewrites the generated
# regions of docs/CLI.md and docs/echomq.1 (the option tables, usage and synopsis
# blocks, between "clidoc md|man|usage|synopsis VERB" and "/clidoc"
# markers; the exporter's metrics table, "clidoc metrics exporter") from
# the CLI's verb tables (src/cli: cli_verb, cli_optdoc) and the exporter's
# list of metrics (cli_exporter_metrics). With --check it writes nothing and
# fails when a committed region differs from what the tables generate.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
check=0
if [[ "${1:-}" == "--check" ]]; then
    check=1
    shift
fi
build=${1:-$root/build/gcc}
docs=(docs/CLI.md docs/echomq.1)

if [[ ! -f "$build/CMakeCache.txt" ]]; then
    cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
log=$(mktemp)
out=$(mktemp)
trap 'rm -f "$log" "$out"' EXIT
if ! cmake --build "$build" --target gen_clidoc >"$log" 2>&1; then
    cat "$log" >&2
    echo "clidoc: building tools/gen_clidoc failed" >&2
    exit 1
fi

bad=0
for doc in "${docs[@]}"; do
    if ! "$build/gen_clidoc" "$root/$doc" >"$out"; then
        echo "clidoc: gen_clidoc failed on $doc" >&2
        exit 1
    fi
    if [[ $check -eq 1 ]]; then
        if ! diff -u "$root/$doc" "$out"; then
            echo "clidoc: the generated regions of $doc drifted from the CLI's tables (src/cli: cli_optdoc, cli_exporter_metrics); regenerate them with scripts/clidoc.sh and commit" >&2
            bad=1
        else
            echo "clidoc: $doc matches the CLI's tables ($(grep -cE 'clidoc (md|man|usage|synopsis|metrics) ' "$root/$doc") regions)"
        fi
    elif ! cmp -s "$root/$doc" "$out"; then
        cp "$out" "$root/$doc"
        echo "clidoc: wrote $doc"
    else
        echo "clidoc: $doc is up to date"
    fi
done
exit $bad
