#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# deps.sh: installs what echomq needs to build, test, fuzz and benchmark on
# Debian 12, and nothing that is already there. Idempotent: a second run
# installs nothing and does not touch the network. Runs as root, or through
# sudo otherwise. Used by scripts/demo.sh and scripts/test.sh.
set -euo pipefail

export DEBIAN_FRONTEND=noninteractive

# package:command pairs. A package counts as present when dpkg has it
# installed, or, for a package that provides a program, when that program
# is already on PATH (for example a cmake installed by other means).
# The command is "-" for libraries and runtimes.
readonly WANTED=(
    "make:make"
    "gcc:gcc"
    "g++:g++"
    "libc6-dev:-"
    "clang:clang"
    "clang-format:clang-format"
    "libclang-rt-14-dev:-"
    "cmake:cmake"
    "pkg-config:pkg-config"
    "libssl-dev:-"
    "openssl:openssl"
    "redis-server:redis-server"
    "redis-tools:redis-cli"
    "libhiredis-dev:-"
    "valgrind:valgrind"
    "libuv1-dev:-"
    "libevent-dev:-"
    "prometheus:prometheus"
    "tmux:tmux"
    "abigail-tools:abidiff"
    "dpkg-dev:dpkg-shlibdeps"
    "ccache:ccache"
)

have_package() {
    local status
    status=$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null) || return 1
    [[ "$status" == "installed" ]]
}

missing=()
for pair in "${WANTED[@]}"; do
    pkg=${pair%%:*}
    cmd=${pair#*:}
    if [[ "$cmd" != "-" ]] && command -v "$cmd" >/dev/null 2>&1; then
        continue
    fi
    if have_package "$pkg"; then
        continue
    fi
    missing+=("$pkg")
done

if [[ ${#missing[@]} -eq 0 ]]; then
    echo "deps: everything is already installed"
    exit 0
fi

if [[ $(id -u) -eq 0 ]]; then
    as_root=()
elif command -v sudo >/dev/null 2>&1; then
    as_root=(sudo --preserve-env=DEBIAN_FRONTEND)
else
    echo "deps: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
fi

echo "deps: installing ${missing[*]}"
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "deps: done"
