# SPDX-License-Identifier: BSD-3-Clause
# shellcheck shell=bash
# redis.sh: sourced by demo.sh and test.sh. Starts and stops a private
# redis-server that listens only on a unix socket in a folder of its own,
# keeps no data on disk, and is stopped by its pid (never by name).
#
#   start_private_redis DIR   sets EMQ_REDIS_PID, EMQ_REDIS_SOCK, EMQ_REDIS_URL
#   stop_private_redis        stops it (safe to call twice, or never started)
#
# The server: $EMQ_SERVER_BIN_DIR/redis-server (and redis-cli) when that is
# set (the same setting as the test fixture's), else redis-server on PATH.

EMQ_REDIS_PID=""
EMQ_REDIS_SOCK=""
EMQ_REDIS_URL=""

# redis_program NAME: the path to run for redis-server or redis-cli.
redis_program() {
    if [[ -n "${EMQ_SERVER_BIN_DIR:-}" ]]; then
        echo "$EMQ_SERVER_BIN_DIR/$1"
    else
        echo "$1"
    fi
}

start_private_redis() {
    local dir=$1 i
    EMQ_REDIS_SOCK=$dir/redis.sock
    local server cli
    server=$(redis_program redis-server)
    cli=$(redis_program redis-cli)
    "$server" --port 0 --unixsocket "$EMQ_REDIS_SOCK" --unixsocketperm 700 \
        --dir "$dir" --save "" --appendonly no --daemonize no \
        --logfile "$dir/redis.log" &
    EMQ_REDIS_PID=$!
    for ((i = 0; i < 100; i++)); do
        if ! kill -0 "$EMQ_REDIS_PID" 2>/dev/null; then
            echo "redis-server exited at start; its log:" >&2
            cat "$dir/redis.log" >&2 || true
            EMQ_REDIS_PID=""
            return 1
        fi
        if [[ -S "$EMQ_REDIS_SOCK" ]] &&
            [[ "$("$cli" -s "$EMQ_REDIS_SOCK" PING 2>/dev/null)" == "PONG" ]]; then
            EMQ_REDIS_URL=unix://$EMQ_REDIS_SOCK
            echo "redis-server $("$server" --version | sed -n 's/.*v=\([^ ]*\).*/\1/p') (pid $EMQ_REDIS_PID) on $EMQ_REDIS_URL"
            return 0
        fi
        sleep 0.1
    done
    echo "redis-server did not answer PING within 10 s" >&2
    stop_private_redis
    return 1
}

stop_private_redis() {
    if [[ -n "$EMQ_REDIS_PID" ]]; then
        kill "$EMQ_REDIS_PID" 2>/dev/null || true
        wait "$EMQ_REDIS_PID" 2>/dev/null || true
        EMQ_REDIS_PID=""
    fi
}
