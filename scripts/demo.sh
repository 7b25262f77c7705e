#!/usr/bin/env bash
# demo.sh: the main job in one command. Installs what is missing
# (scripts/deps.sh), builds libechomq and examples/roundtrip.c, starts a
# private redis-server on a unix socket in a temporary folder, and runs the
# example against it: PING, XADD a job, XRANGE it back, printed. The server
# and the folder are removed on exit, also when a step fails.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# shellcheck source=scripts/redis.sh
. "$root/scripts/redis.sh"

echo "== demo: dependencies"
./scripts/deps.sh

echo "== demo: build (build/demo)"
build=$root/build/demo
mkdir -p "$build"
if ! { cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DEMQ_TESTS=OFF -DEMQ_WERROR=OFF &&
    cmake --build "$build" -j "$(nproc)" --target example_roundtrip; } >"$build/build.log" 2>&1; then
    cat "$build/build.log" >&2
    echo "demo: the build failed (log: $build/build.log)" >&2
    exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/echomq-demo.XXXXXX")
cleanup() {
    stop_private_redis
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "== demo: private redis-server"
start_private_redis "$tmp"

echo "== demo: examples/roundtrip.c"
"$build/example_roundtrip" "$EMQ_REDIS_URL" "demo:jobs"

echo "== demo: what the server holds now"
redis-cli -s "$EMQ_REDIS_SOCK" XRANGE demo:jobs - +
echo "== demo: ok"
