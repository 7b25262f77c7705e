#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# check_layers.sh: the layer rule of src/, from cmake/layers.txt (the one
# list of the layers, which CMakeLists.txt reads too).
#
#   check_layers.sh sources [ROOT]   before a build: every src/**/*.h
#                        compiles alone (and twice: its include guard), and
#                        no #include names a header of a higher layer or of
#                        a sibling ("../x/y.h" and "x/y.h" through the src/
#                        include path alike); the CLI includes only the
#                        public header (and tools/srvproc.h, libc only)
#   check_layers.sh objects BUILD    after a build, the rule itself: every
#                        emq_* symbol an object of layer L uses (nm -u) is
#                        defined by an object of L or of a lower level, not
#                        by a sibling; the CLI's objects use no emq__ symbol
#   check_layers.sh --self-test      both checks on a tiny made-up tree:
#                        a clean one must pass; a producer object calling
#                        an admin function, a base object calling up, a CLI
#                        object calling an internal function and a sideways
#                        include must each fail
#
# Exit status 0 when the rule holds, 1 with one line per violation on
# stderr. Environment: CC (default cc).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
layers_file=$here/cmake/layers.txt
cc=${CC:-cc}

declare -A level=() # layer folder -> its level (0 = bottom)

read_layers() {
    local line n=0 word
    while IFS= read -r line; do
        line=${line%%#*}
        [[ -n ${line// /} ]] || continue
        for word in $line; do
            level[$word]=$n
        done
        n=$((n + 1))
    done <"$layers_file"
}

# allowed FROM TO: may layer FROM use layer TO?
allowed() {
    local from=$1 to=$2
    [[ $from == "$to" ]] && return 0
    [[ -n ${level[$to]:-} && -n ${level[$from]:-} ]] || return 0
    [[ ${level[$to]} -lt ${level[$from]} ]]
}

# why FROM TO: the word for a use that is not allowed.
why() {
    if [[ ${level[$1]} -eq ${level[$2]} ]]; then
        echo "its sibling"
    else
        echo "the higher layer"
    fi
}

# check_includes ROOT: the include text of ROOT/src/*/*.[ch].
check_includes() {
    local root=$1 bad=0 f layer inc target
    for f in "$root"/src/*/*.[ch]; do
        [[ -f $f ]] || continue
        layer=$(basename "$(dirname "$f")")
        if [[ -z ${level[$layer]:-} ]]; then
            echo "layers: ${f#"$root"/} is in src/$layer, which cmake/layers.txt does not name" >&2
            bad=1
            continue
        fi
        while IFS= read -r inc; do
            if [[ $layer == cli ]]; then
                case $inc in
                cli.h | echomq.h | srvproc.h) ;;
                *)
                    echo "layers: ${f#"$root"/} (the CLI) includes \"$inc\": the CLI uses only the public header" >&2
                    bad=1
                    ;;
                esac
                continue
            fi
            case $inc in
            ../*/*) target=${inc#../} target=${target%%/*} ;;
            */*) target=${inc%%/*} ;;
            *) target=$layer ;;
            esac
            if [[ -n ${level[$target]:-} ]] && ! allowed "$layer" "$target"; then
                echo "layers: ${f#"$root"/} (layer $layer) includes \"$inc\", a header of $(why "$layer" "$target") $target" >&2
                bad=1
            fi
        done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
    done
    return $bad
}

# check_headers ROOT: each ROOT/src/*/*.h compiles alone, included twice.
check_headers() {
    local root=$1 bad=0 h out
    for h in "$root"/src/*/*.h; do
        [[ -f $h ]] || continue
        [[ $(basename "$(dirname "$h")") == cli ]] && continue # checked below
        if ! out=$(printf '#include "%s"\n#include "%s"\n' "$h" "$h" |
            "$cc" -std=c11 -fsyntax-only -Wall -Wextra -Werror -x c \
                -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE \
                -DEMQ_BUILDING_LIBRARY -DEMQ_HAVE_TLS=1 \
                -I "$root/include" -I "$root/src" - 2>&1); then
            echo "layers: ${h#"$root"/} does not compile alone and included twice (it must include what it uses, behind an include guard):" >&2
            echo "$out" | head -n 5 >&2
            bad=1
        fi
    done
    for h in "$root"/src/cli/*.h; do
        [[ -f $h ]] || continue
        if ! out=$(printf '#include "%s"\n#include "%s"\n' "$h" "$h" |
            "$cc" -std=c11 -fsyntax-only -Wall -Wextra -Werror -x c \
                -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE \
                -I "$root/include" -I "$root/tools" - 2>&1); then
            echo "layers: ${h#"$root"/} does not compile alone and included twice (it must include what it uses, behind an include guard):" >&2
            echo "$out" | head -n 5 >&2
            bad=1
        fi
    done
    return $bad
}

# check_objects OBJROOT...: each OBJROOT holds src/<layer>/*.o (a CMake
# target's object folder). Definitions are gathered over all of them.
check_objects() {
    local root levels="" l
    local -a objs=()
    for root in "$@"; do
        while IFS= read -r l; do
            objs+=("$l")
        done < <(find "$root/src" -name '*.o' 2>/dev/null | sort)
    done
    if [[ ${#objs[@]} -eq 0 ]]; then
        echo "layers: no object files under $*: build first" >&2
        return 1
    fi
    for l in "${!level[@]}"; do
        levels+="$l=${level[$l]} "
    done
    # One nm for the definitions, one for the uses; "D"/"U" lines to awk.
    {
        nm -A -g --defined-only "${objs[@]}" | awk '{ sub(/:.*/, "", $1) } $NF ~ /^emq_/ { print "D", $1, $NF }'
        nm -A -u "${objs[@]}" | awk '{ sub(/:.*/, "", $1) } $NF ~ /^emq_/ { print "U", $1, $NF }'
    } | awk -v levels="$levels" -v nobj="${#objs[@]}" '
        function layer_of(path,   n, parts) {
            n = split(path, parts, "/")
            return parts[n - 1]
        }
        function base_of(path,   n, parts) {
            n = split(path, parts, "/")
            return parts[n]
        }
        BEGIN {
            n = split(levels, pairs, " ")
            for (i = 1; i <= n; i++) {
                split(pairs[i], kv, "=")
                level[kv[1]] = kv[2]
            }
        }
        $1 == "D" { defined[$3] = layer_of($2); nsym++; next }
        $1 == "U" {
            from = layer_of($2); sym = $3
            if (!(from in level)) {
                printf "layers: %s is in src/%s, which cmake/layers.txt does not name\n", $2, from > "/dev/stderr"
                bad = 1; next
            }
            if (from == "cli") {
                if (sym ~ /^emq__/) {
                    printf "layers: %s (the CLI) uses the internal %s (of %s): the CLI uses only the public API\n", base_of($2), sym, (sym in defined) ? defined[sym] : "no object" > "/dev/stderr"
                    bad = 1
                }
                next
            }
            if (!(sym in defined)) next # outside the object set: the linker checks it
            to = defined[sym]
            if (to == from || level[to] < level[from]) next
            printf "layers: %s (layer %s) uses %s, defined by %s %s\n", base_of($2), from, sym, level[to] == level[from] ? "its sibling" : "the higher layer", to > "/dev/stderr"
            bad = 1
        }
        END {
            if (!bad)
                printf "layers: %d objects, %d emq_ symbols: every use goes down or stays in its layer\n", nobj, nsym
            exit bad
        }'
}

# self_test: a tree of three layers' worth of tiny sources, compiled.
self_test() {
    local t fails=0
    t=$(mktemp -d "${TMPDIR:-/tmp}/check_layers.XXXXXX")
    # shellcheck disable=SC2064
    trap "rm -rf '$t'" RETURN
    mkdir -p "$t/src/base" "$t/src/producer" "$t/src/admin" "$t/src/cli" "$t/include" \
        "$t/obj/src/base" "$t/obj/src/producer" "$t/obj/src/admin" "$t/obj/src/cli"
    cat >"$t/src/base/base.h" <<'EOF'
int emq__st_base(void);
EOF
    cat >"$t/src/base/base.c" <<'EOF'
#include "base.h"
int emq__st_base(void) { return 1; }
EOF
    cat >"$t/src/admin/admin.h" <<'EOF'
#include "../base/base.h"
int emq__st_admin(void);
EOF
    cat >"$t/src/admin/admin.c" <<'EOF'
#include "admin.h"
int emq__st_admin(void) { return emq__st_base() + 1; }
int emq_st_public(void);
int emq_st_public(void) { return 3; }
EOF
    cat >"$t/src/producer/producer.c" <<'EOF'
#include "../base/base.h"
int emq__st_producer(void);
int emq__st_producer(void) { return emq__st_base(); }
EOF
    cat >"$t/src/cli/main.c" <<'EOF'
int emq_st_public(void);
int main(void) { return emq_st_public(); }
EOF
    local c
    for c in base/base producer/producer admin/admin cli/main; do
        "$cc" -c -o "$t/obj/src/$c.c.o" "$t/src/$c.c"
    done

    expect() { # expect pass|fail WHAT COMMAND...
        local want=$1 what=$2 rc=0
        shift 2
        "$@" 2>"$t/err" >/dev/null || rc=$?
        if [[ $want == pass && $rc -ne 0 ]] || [[ $want == fail && $rc -eq 0 ]]; then
            echo "self-test: $what: expected to $want, did not" >&2
            cat "$t/err" >&2
            fails=$((fails + 1))
        else
            echo "self-test: ok, $what: ${want}ed$([[ $want == fail ]] && echo " ($(head -n 1 "$t/err"))")"
        fi
    }

    expect pass "a clean tree's includes" check_includes "$t"
    expect pass "a clean tree's objects" check_objects "$t/obj"

    # A producer object calling an admin function: siblings.
    cat >"$t/src/producer/sideways.c" <<'EOF'
int emq__st_admin(void);
int emq__st_sideways(void);
int emq__st_sideways(void) { return emq__st_admin(); }
EOF
    "$cc" -c -o "$t/obj/src/producer/sideways.c.o" "$t/src/producer/sideways.c"
    expect fail "a producer object calling an admin function" check_objects "$t/obj"
    rm "$t/obj/src/producer/sideways.c.o" "$t/src/producer/sideways.c"

    # A base object calling up.
    cat >"$t/src/base/up.c" <<'EOF'
int emq__st_producer(void);
int emq__st_up(void);
int emq__st_up(void) { return emq__st_producer(); }
EOF
    "$cc" -c -o "$t/obj/src/base/up.c.o" "$t/src/base/up.c"
    expect fail "a base object calling a producer function" check_objects "$t/obj"
    rm "$t/obj/src/base/up.c.o" "$t/src/base/up.c"

    # The CLI calling an internal function.
    cat >"$t/src/cli/inside.c" <<'EOF'
int emq__st_base(void);
int emq_st_cli(void);
int emq_st_cli(void) { return emq__st_base(); }
EOF
    "$cc" -c -o "$t/obj/src/cli/inside.c.o" "$t/src/cli/inside.c"
    expect fail "a CLI object calling an internal function" check_objects "$t/obj"
    rm "$t/obj/src/cli/inside.c.o" "$t/src/cli/inside.c"

    # Sideways includes, by "../" and through the src/ include path.
    echo '#include "../admin/admin.h"' >"$t/src/producer/inc1.c"
    expect fail "a producer file including ../admin/admin.h" check_includes "$t"
    rm "$t/src/producer/inc1.c"
    echo '#include "admin/admin.h"' >"$t/src/producer/inc2.c"
    expect fail "a producer file including admin/admin.h (src/ path)" check_includes "$t"
    rm "$t/src/producer/inc2.c"
    echo '#include "producer/producer.h"' >"$t/src/base/inc3.c"
    expect fail "a base file including a producer header" check_includes "$t"
    rm "$t/src/base/inc3.c"

    # A header that does not include what it uses.
    printf '#include "../base/base.h"\nint emq__st_h(size_t n);\n' >"$t/src/admin/lazy.h"
    expect fail "a header using size_t without <stddef.h>" check_headers "$t"
    printf '#include <stddef.h>\nstruct emq__st { size_t n; };\n' >"$t/src/admin/lazy.h"
    expect fail "a header without an include guard" check_headers "$t"
    printf '#ifndef LAZY_H\n#define LAZY_H\n#include <stddef.h>\nstruct emq__st { size_t n; };\n#endif\n' >"$t/src/admin/lazy.h"
    expect pass "a guarded header that includes what it uses" check_headers "$t"

    [[ $fails -eq 0 ]] && echo "self-test: all cases behaved"
    return $((fails > 0))
}

read_layers
case ${1:-} in
sources)
    root=${2:-$here}
    rc=0
    check_includes "$root" || rc=1
    check_headers "$root" || rc=1
    [[ $rc -eq 0 ]] && echo "layers: includes follow cmake/layers.txt; every header compiles alone"
    exit $rc
    ;;
objects)
    build=${2:?usage: check_layers.sh objects BUILD_DIR}
    check_objects "$build/CMakeFiles/echomq_objects.dir" "$build/CMakeFiles/echomq.dir"
    ;;
--self-test)
    self_test
    ;;
*)
    echo "usage: check_layers.sh sources [ROOT] | objects BUILD_DIR | --self-test" >&2
    exit 2
    ;;
esac
