#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# check_maps.sh: the hand-written maps of the tree still match it. The
# words of a map (what a folder or a file is for) are prose; which
# folders and files it names, and in what order, are checked here.
#
#   check_maps.sh [--root ROOT] [BUILD]
#       README.md, the code block under "## Layout": every line that
#       starts in the first column names a path that exists; every folder
#       of src/ and of tests/, and every top-level folder (git's, else
#       the tree's, hidden ones aside), is named; the folders of src/
#       come in the order of cmake/layers.txt, bottom to top.
#       Each folder map (MAPS below: a header whose opening comment lists
#       the .c files of its folder, bottom to top, as lines " *   x.c ..."):
#       it names every .c file of the folder once and no other; a file
#       includes the folder's headers only of files named above it (and
#       its own); with BUILD (a build folder), also every symbol its
#       object uses from another object of the folder is defined by a
#       file named above it (nm, as scripts/check_layers.sh objects).
#   check_maps.sh --self-test
#       the checks on a tiny made-up tree: a clean one must pass; a
#       missing folder, a folder out of layer order, a path that does not
#       exist, a file missing from a folder map and a file that includes
#       (or, by its object, uses) one named below it must each fail
#
# Exit status 0 when every map matches, 1 with one line per mismatch on
# stderr (file:line: what).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)

# The folder maps: headers whose opening comment maps their folder.
readonly MAPS=(src/consumer/core.h)

# layout_check ROOT: README.md's Layout block.
layout_check() {
    local root=$1 bad=0 readme=$1/README.md
    local -A level=() named=()
    local line n=0 word
    while IFS= read -r line; do
        line=${line%%#*}
        [[ -n ${line// /} ]] || continue
        for word in $line; do level[$word]=$n; done
        n=$((n + 1))
    done <"$root/cmake/layers.txt"

    local start
    start=$(grep -n '^## Layout' "$readme" | head -n 1 | cut -d: -f1)
    if [[ -z $start ]]; then
        echo "README.md: no \"## Layout\" section" >&2
        return 1
    fi
    local lineno=0 inblock=0 path last=-1 lastpath=
    while IFS= read -r line; do
        lineno=$((lineno + 1))
        ((lineno > start)) || continue
        if [[ $line == '```'* ]]; then
            ((inblock)) && break
            inblock=1
            continue
        fi
        ((inblock)) || continue
        [[ $line == [![:space:]]* ]] || continue
        path=${line%%[[:space:]]*}
        if [[ ! -e $root/$path ]]; then
            echo "README.md:$lineno: the Layout names $path, which does not exist" >&2
            bad=1
        fi
        named[${path%/}]=1
        if [[ $path =~ ^src/([^/]+)/$ && -n ${level[${BASH_REMATCH[1]}]:-} ]]; then
            n=${level[${BASH_REMATCH[1]}]}
            if ((n < last)); then
                echo "README.md:$lineno: the Layout names $path after $lastpath: cmake/layers.txt puts it below" >&2
                bad=1
            fi
            last=$n
            lastpath=$path
        fi
    done <"$readme"

    local -a want=()
    local d
    for d in "$root"/src/*/ "$root"/tests/*/; do
        [[ -d $d ]] && want+=("${d#"$root"/}")
    done
    if git -C "$root" rev-parse --show-toplevel >/dev/null 2>&1 &&
        [[ $(git -C "$root" rev-parse --show-toplevel) == "$root" ]]; then
        while IFS= read -r d; do
            [[ $d == .* ]] || want+=("$d/")
        done < <(git -C "$root" ls-files | grep / | cut -d/ -f1 | sort -u)
    else
        for d in "$root"/*/; do
            [[ -d $d && ${d%/} != "$root"/build* ]] && want+=("${d#"$root"/}")
        done
    fi
    local p found
    for d in "${want[@]}"; do
        found=0
        for p in "${!named[@]}"; do
            [[ $p/ == "$d"* ]] && found=1 && break
        done
        if ((!found)); then
            echo "README.md:$start: the Layout does not name $d" >&2
            bad=1
        fi
    done
    return $bad
}

# map_files HEADER: "lineno file" for each file the map in HEADER's
# opening comment names, in order.
map_files() {
    awk '!/SPDX-License-Identifier/ && /\*\// { exit }
         match($0, /^ \*   [a-z0-9_]+\.c( |$)/) {
             f = substr($0, 6); sub(/ .*/, "", f); print NR, f }' "$1"
}

# map_check ROOT HEADER [BUILD]: one folder map.
map_check() {
    local root=$1 map=$2 build=${3:-} bad=0
    local dir=${map%/*} lineno f
    local -A pos=() at=()
    local i=0
    while read -r lineno f; do
        if [[ -n ${pos[$f]:-} ]]; then
            echo "$map:$lineno: the map names $f twice" >&2
            bad=1
        elif [[ ! -f $root/$dir/$f ]]; then
            echo "$map:$lineno: the map names $f, which is not in $dir/" >&2
            bad=1
        fi
        pos[$f]=$i
        at[$f]=$lineno
        i=$((i + 1))
    done < <(map_files "$root/$map")
    if ((i == 0)); then
        echo "$map: no file map in its opening comment" >&2
        return 1
    fi
    local src base inc h
    for src in "$root/$dir"/*.c; do
        f=${src##*/}
        if [[ -z ${pos[$f]:-} ]]; then
            echo "$map: the map does not name $f (a file of $dir/)" >&2
            bad=1
            continue
        fi
        base=${f%.c}
        # Its own header's includes count as its own.
        for h in "$src" "$root/$dir/$base.h"; do
            [[ -f $h ]] || continue
            while IFS= read -r inc; do
                inc=${inc%.h}.c
                [[ $inc != "$f" && -n ${pos[$inc]:-} ]] || continue
                if ((pos[$inc] > pos[$f])); then
                    echo "$map:${at[$f]}: $f includes ${inc%.c}.h, but the map names $inc below it" >&2
                    bad=1
                fi
            done < <(sed -n 's/^#include "\([a-z0-9_]*\.h\)".*/\1/p' "$h")
        done
    done
    [[ -n $build ]] || return $bad

    # Symbols: who defines what, then who uses what.
    local objdir=$build/CMakeFiles/echomq_objects.dir/$dir o sym
    if ! compgen -G "$objdir/*.o" >/dev/null; then
        echo "$map: no objects of $dir/ under $build (build it first)" >&2
        return 1
    fi
    local -A def=()
    for o in "$objdir"/*.o; do
        f=${o##*/}
        f=${f%.o}
        while read -r sym; do def[$sym]=$f; done < <(nm --defined-only "$o" |
            awk '$2 ~ /^[TDBRVW]$/ { print $3 }')
    done
    local -A told=()
    for o in "$objdir"/*.o; do
        f=${o##*/}
        f=${f%.o}
        [[ -n ${pos[$f]:-} ]] || continue
        while read -r sym; do
            local by=${def[$sym]:-}
            [[ -n $by && $by != "$f" && -n ${pos[$by]:-} ]] || continue
            if ((pos[$by] > pos[$f])) && [[ -z ${told[$f $by]:-} ]]; then
                echo "$map:${at[$f]}: $f uses $sym of $by, but the map names $by below it" >&2
                told[$f $by]=1
                bad=1
            fi
        done < <(nm -u "$o" | awk '{ print $2 }')
    done
    return $bad
}

check_all() {
    local root=$1 build=${2:-} bad=0 map
    layout_check "$root" || bad=1
    for map in "${MAPS[@]}"; do
        map_check "$root" "$map" "$build" || bad=1
    done
    return $bad
}

# ---- self-test ------------------------------------------------------------

# make_tree DIR: a clean tiny tree (layers a < b, a map of b/ in core.h).
make_tree() {
    local t=$1
    mkdir -p "$t/cmake" "$t/src/a" "$t/src/consumer" "$t/tests/unit" "$t/docs"
    printf 'a\nconsumer\n' >"$t/cmake/layers.txt"
    cat >"$t/README.md" <<'EOF'
# x

## Layout

```
src/a/        the bottom
src/consumer/ the top
              (a continuation)
tests/unit/   tests
docs/         documents
cmake/        the layers
```
EOF
    cat >"$t/src/consumer/core.h" <<'EOF'
/* core.h: the map.
 *
 *   core.c      the core
 *   upper.c     uses the core
 */
EOF
    printf '#include "core.h"\n' >"$t/src/consumer/core.c"
    printf '#include "core.h"\n' >"$t/src/consumer/upper.h"
    printf '#include "upper.h"\n#include "core.h"\n' >"$t/src/consumer/upper.c"
}

# expect NAME WANT(0|1) ROOT [BUILD]: one case.
expect() {
    local name=$1 want=$2 root=$3 build=${4:-} got=0
    check_all "$root" "$build" 2>"$root.err" || got=1
    if [[ $got -ne $want ]]; then
        echo "self-test: $name: exit $got, expected $want" >&2
        cat "$root.err" >&2
        return 1
    fi
    echo "self-test: $name: $( ((want)) && head -n 1 "$root.err" || echo passes)"
}

self_test() {
    local bad=0 t
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    make_tree "$tmp/clean"
    expect "clean tree" 0 "$tmp/clean" || bad=1

    t=$tmp/missing_folder
    make_tree "$t"
    mkdir -p "$t/tests/soak"
    expect "a folder the layout misses" 1 "$t" || bad=1

    t=$tmp/order
    make_tree "$t"
    sed -i '/^src\/a\//d; s|^tests/unit/|src/a/        the bottom\n&|' "$t/README.md"
    expect "src/ folders out of layer order" 1 "$t" || bad=1

    t=$tmp/gone
    make_tree "$t"
    sed -i 's|^docs/ |doc/  |' "$t/README.md"
    expect "a path that does not exist" 1 "$t" || bad=1

    t=$tmp/unmapped
    make_tree "$t"
    printf '#include "core.h"\n' >"$t/src/consumer/extra.c"
    expect "a file the folder map misses" 1 "$t" || bad=1

    t=$tmp/upward
    make_tree "$t"
    printf '#include "core.h"\n#include "upper.h"\n' >"$t/src/consumer/core.c"
    expect "a file including one mapped below it" 1 "$t" || bad=1

    if command -v "${CC:-cc}" >/dev/null && command -v nm >/dev/null; then
        t=$tmp/objects
        make_tree "$t"
        local objdir=$t/build/CMakeFiles/echomq_objects.dir/src/consumer
        mkdir -p "$objdir"
        printf 'int emq__upper(void) { return 1; }\n' |
            "${CC:-cc}" -x c -c -o "$objdir/upper.c.o" -
        printf 'int emq__upper(void);\nint emq__core(void) { return emq__upper(); }\n' |
            "${CC:-cc}" -x c -c -o "$objdir/core.c.o" -
        expect "an object using one mapped below it" 1 "$t" "$t/build" || bad=1
        printf 'int emq__core(void) { return 0; }\n' |
            "${CC:-cc}" -x c -c -o "$objdir/core.c.o" -
        expect "objects in map order" 0 "$t" "$t/build" || bad=1
    fi
    if ((bad)); then
        echo "self-test: FAILED" >&2
        return 1
    fi
    echo "self-test: all cases behaved"
}

root=$here build=
case ${1:-} in
--self-test)
    self_test
    exit
    ;;
esac
while (($#)); do
    case $1 in
    --root)
        root=$(cd "$2" && pwd)
        shift 2
        ;;
    -h | --help)
        sed -n '3,27p' "$0" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    *)
        build=$1
        shift
        ;;
    esac
done
if check_all "$root" "$build"; then
    echo "maps: README.md's Layout and ${#MAPS[@]} folder map(s) match the tree${build:+ (and the objects of $build)}"
else
    echo "maps: a map drifted from the tree (above); fix the map, not the tree, unless the tree is wrong" >&2
    exit 1
fi
