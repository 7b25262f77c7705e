#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# servers.sh: builds the Redis/Valkey servers of the compatibility matrix
# from their release sources, once, into a cache keyed by checksum.
#
#   ./scripts/servers.sh            build what is missing, list what is there
#
# Sources: $EMQ_SERVER_SOURCES, else <repo>/../shared/servers (the tarballs
# *.tar.gz and their SHA256SUMS). SHA256SUMS is checked first; a mismatch,
# or a tarball SHA256SUMS does not list, is an error (exit 1).
#
# Cache: $EMQ_SERVER_CACHE, else ~/.cache/echomq/servers. Each tarball is
# built into <cache>/<name>-<sha256 of the tarball>/bin, so a second run
# builds nothing, and changed sources get a folder of their own. The build
# is `make -j2 MALLOC=libc BUILD_TLS=yes` (EMQ_SERVER_JOBS overrides the 2)
# in a scratch folder under the cache; only a complete build is moved into
# place. Valkey's valkey-server and valkey-cli also get the names
# redis-server and redis-cli (symlinks), so one fixture setting,
# EMQ_SERVER_BIN_DIR=<that bin folder>, runs any of them the same way.
#
# Output, on stdout, one line per server: "<name> <bin folder>", e.g.
#   redis-6.2.16 /root/.cache/echomq/servers/redis-6.2.16-2f1e.../bin
# Progress and reasons go to stderr. When the sources are absent it says so
# in one line and exits 0 with nothing listed. Debian's own redis-server
# (/usr/bin) is not listed here: scripts/test.sh adds it to the matrix.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
sources=${EMQ_SERVER_SOURCES:-$root/../shared/servers}
cache=${EMQ_SERVER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/echomq/servers}
jobs=${EMQ_SERVER_JOBS:-2}

shopt -s nullglob
tarballs=("$sources"/*.tar.gz)
shopt -u nullglob
if [[ ! -d "$sources" || ${#tarballs[@]} -eq 0 ]]; then
    echo "servers: no server sources at $sources (set EMQ_SERVER_SOURCES); nothing built, the matrix has only the system redis-server" >&2
    exit 0
fi
if [[ ! -f "$sources/SHA256SUMS" ]]; then
    echo "servers: $sources has tarballs but no SHA256SUMS; refusing to build unverified sources" >&2
    exit 1
fi

# 1. Verify every tarball against SHA256SUMS before anything is unpacked.
for t in "${tarballs[@]}"; do
    f=$(basename "$t")
    if ! awk -v f="$f" '$2 == f || $2 == "*" f { found = 1 } END { exit !found }' \
        "$sources/SHA256SUMS"; then
        echo "servers: $f is not listed in $sources/SHA256SUMS" >&2
        exit 1
    fi
done
if ! (cd "$sources" && sha256sum --quiet -c SHA256SUMS) >&2; then
    echo "servers: checksum mismatch in $sources (sha256sum -c SHA256SUMS)" >&2
    exit 1
fi

mkdir -p "$cache"
# One build at a time per cache, also across engineers sharing it.
exec 9>"$cache/.lock"
flock 9

scratch=""
cleanup() {
    if [[ -n "$scratch" ]]; then
        rm -rf "$scratch"
    fi
}
trap cleanup EXIT

# build NAME TARBALL DEST: unpack, make, and install bin/ into DEST.
build() {
    local name=$1 tarball=$2 dest=$3 start=$SECONDS
    scratch=$(mktemp -d "$cache/.build-$name.XXXXXX")
    echo "servers: building $name (make -j$jobs MALLOC=libc BUILD_TLS=yes); log: $dest.log" >&2
    tar xzf "$tarball" -C "$scratch"
    local src=$scratch/$name
    if [[ ! -d "$src" ]]; then
        echo "servers: $tarball does not unpack to $name/" >&2
        return 1
    fi
    if ! make -C "$src" -j"$jobs" MALLOC=libc BUILD_TLS=yes >"$scratch/build.log" 2>&1; then
        tail -n 40 "$scratch/build.log" >&2
        cp "$scratch/build.log" "$dest.log" || true
        echo "servers: building $name failed; log: $dest.log" >&2
        return 1
    fi
    local out=$scratch/out
    mkdir -p "$out/bin"
    local prog
    if [[ -x "$src/src/valkey-server" ]]; then
        for prog in valkey-server valkey-cli; do
            cp "$src/src/$prog" "$out/bin/$prog"
        done
        ln -s valkey-server "$out/bin/redis-server"
        ln -s valkey-cli "$out/bin/redis-cli"
    else
        for prog in redis-server redis-cli; do
            cp "$src/src/$prog" "$out/bin/$prog"
        done
    fi
    "$out/bin/redis-server" --version >"$out/VERSION"
    cp "$scratch/build.log" "$out/build.log"
    mv "$out" "$dest"
    cp "$dest/build.log" "$dest.log"
    rm -rf "$scratch"
    scratch=""
    echo "servers: built $name in $((SECONDS - start)) s: $(cat "$dest/VERSION")" >&2
}

for t in "${tarballs[@]}"; do
    name=$(basename "$t" .tar.gz)
    sha=$(awk -v f="$(basename "$t")" '$2 == f || $2 == "*" f { print $1; exit }' \
        "$sources/SHA256SUMS")
    dest=$cache/$name-$sha
    if [[ ! -x "$dest/bin/redis-server" || ! -x "$dest/bin/redis-cli" ]]; then
        rm -rf "$dest"
        build "$name" "$t" "$dest"
    fi
    echo "$name $dest/bin"
done
