#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# check_hpp.sh: the C++ layer covers the C API. Every function that
# include/echomq.h exports (declared EMQ_EXPORT) is called by
# include/echomq.hpp ("emq_name(" outside a comment), so a function added
# to the C API without its C++ counterpart fails the house stage.
#
#   check_hpp.sh [--root ROOT]  the check on ROOT's include/ (default: this
#                        tree); a function listed in EXEMPT below (with
#                        the reason it has no counterpart) is skipped, and
#                        an EXEMPT entry that is not exported, or is
#                        called after all, fails as a stale entry
#   check_hpp.sh --self-test  the check on a made-up pair of headers: a
#                        covered one must pass; a function missing from
#                        the C++ header, or named there only in a comment,
#                        must fail
#
# Exit status 0 when every function has its counterpart, 1 with one line
# per missing function on stderr; the last line on stdout counts them.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)

# Functions of echomq.h that deliberately have no C++ counterpart: name,
# then why. None today.
declare -A EXEMPT=()

# uncomment FILE: FILE without its /* */ comments and // line comments
# (a "//" after a non-blank, as in "redis://", is kept); lines kept.
uncomment() {
    awk '
    {
        line = $0
        out = ""
        while (line != "") {
            if (in_c) {
                i = index(line, "*/")
                if (i == 0) { line = ""; break }
                line = substr(line, i + 2)
                in_c = 0
            } else {
                i = index(line, "/*")
                if (i == 0) { out = out line; line = "" }
                else {
                    out = out substr(line, 1, i - 1)
                    line = substr(line, i + 2)
                    in_c = 1
                }
            }
        }
        sub(/(^|[ \t])\/\/.*$/, "", out)
        print out
    }' "$1"
}

# exported HEADER: the names of its EMQ_EXPORT functions, sorted, once
# each (a declaration may span lines; preprocessor lines are skipped).
exported() {
    uncomment "$1" | grep -v '^[[:space:]]*#' | tr '\n' ' ' |
        grep -oE 'EMQ_EXPORT[^;(]*\(' |
        sed -E 's/[[:space:]]*\($//; s/.*[^A-Za-z0-9_]//' | sort -u
}

# check ROOT: the check itself.
check() {
    local root=$1 h=$1/include/echomq.h hpp=$1/include/echomq.hpp
    local name bad=0 n=0 called
    for f in "$h" "$hpp"; do
        [[ -f "$f" ]] || { echo "check_hpp: $f does not exist" >&2; return 1; }
    done
    local names
    names=$(exported "$h")
    if [[ -z "$names" ]]; then
        echo "check_hpp: $h declares no EMQ_EXPORT function" >&2
        return 1
    fi
    # Every call in the C++ header, "emq_name(" (spaces allowed).
    called=$(uncomment "$hpp" | grep -oE '\bemq_[A-Za-z0-9_]+[[:space:]]*\(' |
        sed -E 's/[[:space:]]*\($//' | sort -u)
    while IFS= read -r name; do
        n=$((n + 1))
        if [[ -n ${EXEMPT[$name]+set} ]]; then
            continue
        fi
        if ! grep -qx -- "$name" <<<"$called"; then
            echo "check_hpp: $name (include/echomq.h) has no counterpart in include/echomq.hpp" >&2
            bad=1
        fi
    done <<<"$names"
    for name in "${!EXEMPT[@]}"; do
        if ! grep -qx -- "$name" <<<"$names"; then
            echo "check_hpp: EXEMPT lists $name, which include/echomq.h does not export" >&2
            bad=1
        elif grep -qx -- "$name" <<<"$called"; then
            echo "check_hpp: EXEMPT lists $name, which include/echomq.hpp calls: drop the entry" >&2
            bad=1
        fi
    done
    if [[ $bad -ne 0 ]]; then
        echo "check_hpp: give each a counterpart in include/echomq.hpp (a method of its RAII class or a function of namespace echomq), or list it in EXEMPT of scripts/check_hpp.sh with the reason" >&2
        return 1
    fi
    echo "check_hpp: $((n - ${#EXEMPT[@]})) of the $n exported functions of include/echomq.h called by include/echomq.hpp, ${#EXEMPT[@]} exempt"
}

self_test() {
    local tmp rc=0
    tmp=$(mktemp -d)
    # shellcheck disable=SC2064
    trap "rm -rf '$tmp'" RETURN
    mkdir -p "$tmp/include"
    cat >"$tmp/include/echomq.h" <<'EOF'
#define EMQ_EXPORT __attribute__((visibility("default")))
/* A comment naming EMQ_EXPORT void emq_not_a_function(void); */
EMQ_EXPORT int emq_one(void);
EMQ_EXPORT emq_status emq_two(emq_conf_t *conf,
                              int x);
EMQ_EXPORT const char *emq_three(void);
EOF
    cat >"$tmp/include/echomq.hpp" <<'EOF'
inline int one() { return emq_one(); }
inline int two() { return emq_two (nullptr, 1); }
inline const char *three() { return emq_three(); } // "redis://x"
EOF
    check "$tmp" >/dev/null || { echo "self-test: a covered header failed" >&2; rc=1; }
    sed -i 's/return emq_three();/return nullptr;/' "$tmp/include/echomq.hpp"
    if check "$tmp" >/dev/null 2>&1; then
        echo "self-test: a missing counterpart passed" >&2
        rc=1
    fi
    sed -i 's|return nullptr; }|return nullptr; /* emq_three() */ }|' "$tmp/include/echomq.hpp"
    if check "$tmp" >/dev/null 2>&1; then
        echo "self-test: a counterpart in a comment only passed" >&2
        rc=1
    fi
    [[ $rc -eq 0 ]] && echo "check_hpp: self-test passed"
    return $rc
}

case ${1:-} in
--self-test) self_test ;;
--root) check "${2:?usage: check_hpp.sh [--root ROOT] | --self-test}" ;;
"") check "$here" ;;
-h | --help) sed -n '3,19s/^# \{0,1\}//p' "$0" ;;
*)
    echo "check_hpp.sh: unknown argument '$1'; usage: check_hpp.sh [--root ROOT] | --self-test" >&2
    exit 2
    ;;
esac
