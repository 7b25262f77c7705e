#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# format.sh [--check] [FILE...]: the C and C++ files of the tree in the
# style of .clang-format.
#
#   scripts/format.sh            formats every C/C++ file of the tree in place
#   scripts/format.sh FILE...    formats those files in place
#   scripts/format.sh --check    changes nothing; exits 1 naming each file
#                                whose formatting differs (the house stage
#                                of scripts/test.sh runs this)
#
# The files are those git tracks with the suffixes .c .h .cc .cpp .hpp
# (outside a git checkout: those under src include tests tools bench
# examples). clang-format's output differs between major versions, so the
# tree has one: CLANG_FORMAT_MAJOR (in this script), the one Debian 12
# ships (package clang-format, installed by scripts/deps.sh). The program
# is $CLANG_FORMAT if set, else clang-format-<major>, else clang-format.
set -euo pipefail

readonly CLANG_FORMAT_MAJOR=14

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

check=0
if [[ ${1:-} == --check ]]; then
    check=1
    shift
fi
case ${1:-} in
-h | --help)
    sed -n '3,17s/^# \{0,1\}//p' "$0"
    exit 0
    ;;
-*)
    echo "format.sh: unknown option '$1'; usage: scripts/format.sh [--check] [FILE...]" >&2
    exit 2
    ;;
esac

cf=${CLANG_FORMAT:-}
if [[ -z $cf ]]; then
    cf=clang-format-$CLANG_FORMAT_MAJOR
    command -v "$cf" >/dev/null 2>&1 || cf=clang-format
fi
if ! command -v "$cf" >/dev/null 2>&1; then
    echo "format.sh: $cf not found; install clang-format $CLANG_FORMAT_MAJOR" \
        "(Debian 12: apt-get install clang-format, or scripts/deps.sh)" >&2
    exit 2
fi
version=$("$cf" --version | head -n 1)
major=$(sed -n 's/.*clang-format version \([0-9]*\).*/\1/p' <<<"$version")
if [[ $major != "$CLANG_FORMAT_MAJOR" ]]; then
    echo "format.sh: $cf is version ${major:-unknown} ($version);" \
        "the tree is formatted by clang-format $CLANG_FORMAT_MAJOR, whose" \
        "output other versions do not reproduce: install" \
        "clang-format-$CLANG_FORMAT_MAJOR or set CLANG_FORMAT to it" >&2
    exit 2
fi

files=("$@")
# Only C and C++: clang-format would rewrite a Markdown or man page as
# if it were code (docs/CLI.md was once mangled so).
for f in "${files[@]}"; do
    case $f in
    *.c | *.h | *.cc | *.cpp | *.hpp) ;;
    *)
        echo "format.sh: $f is not a C or C++ file (.c .h .cc .cpp .hpp); nothing was formatted" >&2
        exit 2
        ;;
    esac
done
if [[ ${#files[@]} -eq 0 ]]; then
    if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        mapfile -t files < <(git ls-files -- '*.c' '*.h' '*.cc' '*.cpp' '*.hpp')
    else
        mapfile -t files < <(find src include tests tools bench examples \
            -type f \( -name '*.c' -o -name '*.h' -o -name '*.cc' \
            -o -name '*.cpp' -o -name '*.hpp' \) | sort)
    fi
fi
style=--style=file:$root/.clang-format

if [[ $check -eq 0 ]]; then
    printf '%s\0' "${files[@]}" | xargs -0 -n 32 "$cf" "$style" -i
    echo "format.sh: formatted ${#files[@]} files"
    exit 0
fi

# --dry-run --Werror reports each place to change as
# "FILE:LINE:COL: error: code should be clang-formatted"; any other
# failure (an unreadable file, a bad .clang-format) is shown as it is.
rc=0
report=$(printf '%s\0' "${files[@]}" |
    xargs -0 -n 32 "$cf" "$style" --dry-run --Werror --ferror-limit=0 2>&1) || rc=$?
places=$(sed -n 's/^\(.*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' <<<"$report")
if [[ $rc -ne 0 && -z $places ]]; then
    echo "$report" >&2
    echo "format.sh: $cf failed (exit status $rc)" >&2
    exit 2
fi
bad=()
while read -r n f; do
    [[ -n $f ]] || continue
    if [[ $n -eq 1 ]]; then
        echo "format.sh: $f is not formatted (1 place differs)" >&2
    else
        echo "format.sh: $f is not formatted ($n places differ)" >&2
    fi
    bad+=("$f")
done < <(sort <<<"$places" | uniq -c)
if [[ ${#bad[@]} -ne 0 ]]; then
    echo "format.sh: ${#bad[@]} of ${#files[@]} files differ from .clang-format." \
        "Fix: scripts/format.sh ${bad[*]:0:3}${bad[3]:+ ...} (or scripts/format.sh" \
        "for the whole tree); see the changes first with:" \
        "$cf FILE | diff -u FILE -" >&2
    exit 1
fi
echo "format.sh: ${#files[@]} files formatted as .clang-format says ($cf $major)"
