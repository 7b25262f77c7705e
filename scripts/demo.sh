#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# demo.sh: the main job in one command. Installs what is missing
# (scripts/deps.sh), builds libechomq and the echomq program, then runs
# `echomq demo`: a private redis-server in a temporary folder, 100,000
# jobs, 4 workers, one killed with SIGKILL half-way and recovered, poison
# jobs in the dead letters, and a summary that must report 0 lost. The
# demo stops its server and removes its folder itself, also on Ctrl-C.
# Arguments are passed to `echomq demo` (e.g. --jobs 20000).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

echo "== demo: dependencies"
./scripts/deps.sh

echo "== demo: build (build/demo)"
build=$root/build/demo
mkdir -p "$build"
if ! { cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DEMQ_TESTS=OFF -DEMQ_WERROR=OFF &&
    cmake --build "$build" -j "$(nproc)" --target echomq; } >"$build/build.log" 2>&1; then
    cat "$build/build.log" >&2
    echo "demo: the build failed (log: $build/build.log)" >&2
    exit 1
fi

echo "== demo: echomq demo $*"
exec "$build/echomq" demo "$@"
