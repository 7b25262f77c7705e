#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test.sh [STAGE...]: the whole echomq test suite, as CI runs it.
#
# Stages (give names to run only some; deps always runs, first and alone;
# the others run up to EMQ_STAGE_JOBS at once, see "the orchestrator"
# below, each waiting only for the stages it needs):
#   deps      scripts/deps.sh: install what is missing
#   house     the rules of the tree, before anything is built: every
#             source file carries its SPDX line; scripts/check_layers.sh
#             (layers of cmake/layers.txt) passes its self-test, no file of
#             src/ includes a header of a higher layer or a sibling, every
#             header compiles alone, the CLI includes only the public header;
#             every C/C++ file formatted as .clang-format says
#             (scripts/format.sh --check) and commit subjects of at most 72
#             characters (scripts/check_commits.sh); every Markdown table
#             renders whole (scripts/check_tables.sh) and the maps of the
#             README and src/consumer/core.h match the tree
#             (scripts/check_maps.sh); every function of echomq.h has a
#             C++ counterpart in echomq.hpp (scripts/check_hpp.sh)
#   gcc       gcc build with -Werror, the layer rule on its objects (nm:
#             scripts/check_layers.sh objects), then emq_tests
#   clang     clang build with -Werror, then the unit tests and a smoke
#   builds    the eight builds a packager may run, every target with
#             -Werror: gcc and clang, each Release, RelWithDebInfo, Debug
#             and MinSizeRel (RelWithDebInfo is the gcc and clang stages'
#             folder, not built twice); ccache when it is installed
#   sanitize  ASan+UBSan build (clang), then emq_tests
#   chaos     the soak (tests/soak: 5000000 entries through one consumer)
#             and the short chaos run (tests/chaos: 20000 jobs, 4 worker
#             processes + 1 in its own PID namespace, handlers up to 3 x
#             claim idle, retried jobs, every kind of fault, about 80 s);
#             see docs/RELIABILITY.md
#   valgrind  memcheck on the unit tests of the gcc build, and on the
#             integration tests of the consumer's core, the producer and
#             the admin verbs (VALGRIND_INTEG), EMQ_VALGRIND_JOBS at once
#   symbols   libechomq.so exports only emq_* (scripts/check_symbols.sh)
#   abi       the gcc build's exported symbols and public types match
#             abi/libechomq.abi, the last release's record (scripts/abi.sh,
#             abidiff)
#   install   cmake --install to a temporary prefix, then tests/install built
#             with find_package and with pkg-config, and run; no RUNPATH
#             installed; then the Debian packages (cpack -G DEB) installed
#             with apt-get (root or sudo), tests/install built against them
#             both ways, and the packages removed again
#   examples  every examples/*.c built by gcc and clang, compiled against
#             the installed copy (the event-loop ones with libuv and
#             libevent), every examples/*.cpp (echomq.hpp) built with g++
#             and clang++ against it, and roundtrip, topic_pipeline,
#             admin_tour, delayed_jobs, queue_features and each C++
#             example run on a private redis-server (the event-loop
#             examples run in the suite:
#             test_examples_loops.c)
#   docs      docs/CONFIGURATION.md equals what tools/gen_confdoc prints;
#             docs/CONSUMER.md's table of the session's states what
#             tools/gen_machinedoc prints (scripts/machinedoc.sh); the
#             option tables of docs/CLI.md and docs/echomq.1 equal
#             what tools/gen_clidoc prints from the CLI's (scripts/clidoc.sh)
#   matrix    scripts/servers.sh builds (once, cached by checksum) Redis
#             6.2.16, 7.2.6 and Valkey 8.0.1 from ../shared/servers; then the
#             gcc build's integration tests (library, CLI and cluster
#             tests; not the client-only files of MATRIX_SKIP) run against
#             each of them and against the
#             system redis-server (Debian: 7.0.15), each selected by
#             EMQ_SERVER_BIN_DIR, then a short chaos run (5000 jobs, every
#             kind of fault, about 40 s, workers with deliveries.exact 1:
#             no dead letter without max_deliveries handler calls) on
#             each, three servers at once
#             (EMQ_MATRIX_JOBS); per-server counts and
#             times are printed. When the gcc stage ran in the same
#             invocation, its run is the system server's tests (not
#             repeated). Then docs/COMPATIBILITY.md must match what the run
#             showed (scripts/compat.sh check; not with EMQ_MATRIX_SERVERS).
#             Skipped, saying why, when the sources are absent
#   fuzz      each tests/fuzz/fuzz_*.c for EMQ_FUZZ_SECONDS s (default: a
#             60 s budget shared by the targets, at least 15 s each)
#   bench     bench/*.c build (they are not run)
#   quick     not part of the whole run: the inner loop, the gcc build,
#             every unit test and the integration files of
#             tests/quick.list (under 3 minutes)
#
# Each stage's output is printed whole when it ends, with its duration;
# the first failing stage stops the others. The summary follows: each
# stage's start, end and seconds, the stages and emq_tests runs counted,
# and the very last line sums the emq_tests runs as "N passed, N failed".
#
# Environment: EMQ_MATRIX_SERVERS (names to run in the matrix stage, e.g.
# "redis-6.2.16 valkey-8.0.1"; default: every one), EMQ_MATRIX_JOBS (servers
# the matrix stage tests at once, default 3), EMQ_JOBS (parallel build jobs, default: the number of CPUs),
# EMQ_STAGE_JOBS (stages at once, default 4), EMQ_KEEP_GOING=1 (a failed
# stage does not stop the others), EMQ_TEST_JOBS (tests at once
# in each emq_tests run, default 6), EMQ_VALGRIND_JOBS (tests at once under
# memcheck, default 2),
# EMQ_FUZZ_SECONDS (seconds per fuzz target; default: 60 s shared),
# EMQ_CHAOS_SEED (default 6001: the seed of the chaos stage; any seed
# reproduces its own schedule), EMQ_CHAOS_TOLERATE_EXITS=1 (report worker
# crashes in the chaos stage without failing it), EMQ_CHAOS_ALLOW_UNKNOWN_CONF=1
# (let the chaos workers skip retry.backoff_ms with a warning when the
# library does not know it; without it such a library fails the stage).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# shellcheck source=scripts/redis.sh
. "$root/scripts/redis.sh"

readonly ALL_STAGES=(deps house gcc clang builds sanitize chaos valgrind symbols abi install examples docs matrix fuzz bench)
# The stages a stage needs to have passed first, when they run in the same
# invocation. A stage that only needs the gcc build calls gcc_build_ready,
# which builds it under a lock, once, for whoever comes first.
declare -A STAGE_NEEDS=(
    [symbols]="clang"        # checks the clang library too
    [examples]="install clang" # the installed copy; the clang examples
    [matrix]="gcc"           # reuses the gcc stage's system-server run
)
# The order stages start in when they may: the long ones first, so that
# the short ones fill the gaps (docs/BUILDING.md has the figures).
readonly START_ORDER=(house gcc valgrind sanitize builds matrix chaos clang fuzz install examples symbols abi docs bench)
jobs=${EMQ_JOBS:-$(nproc 2>/dev/null || echo 2)}
stage_jobs=${EMQ_STAGE_JOBS:-4}
fuzz_seconds=${EMQ_FUZZ_SECONDS:-}
readonly FUZZ_BUDGET=60
build=$root/build
logs=$build/logs
state=${EMQ_TEST_STATE:-$build/state}

scratch=""
debs_installed=0

# ---- one stage, in a process of its own (test.sh --stage NAME) ----------

# The orchestrator below runs each stage as `test.sh --stage NAME` in a
# session of its own, its output to logs/stage-NAME.log. What a stage
# tells the orchestrator goes through files of $state: NAME.skipped (why),
# and counts (a line "LABEL PASSED FAILED" for each emq_tests run).
if [[ ${1:-} == --stage ]]; then
    stage_name=$2
    scratch=$(mktemp -d "${TMPDIR:-/tmp}/echomq-test-$stage_name.XXXXXX")
    stage_exit() {
        local rc=$?
        stop_private_redis
        [[ ${debs_installed:-0} -eq 0 ]] || remove_debs || true
        rm -rf "$scratch"
        exit "$rc"
    }
    trap stage_exit EXIT
    trap 'exit 143' TERM
    trap 'exit 130' INT
fi

skip_stage() {
    echo "$1" >"$state/$stage_name.skipped"
}

# configure DIR COMPILER [CMAKE ARGS...]
configure() {
    local dir=$1 cc=$2
    shift 2
    cmake -S "$root" -B "$dir" -DCMAKE_C_COMPILER="$cc" -DEMQ_WERROR=ON \
        "${ccache_launcher[@]}" "$@" \
        >"$logs/$(basename "$dir").configure.log" 2>&1 || {
        cat "$logs/$(basename "$dir").configure.log" >&2
        return 1
    }
}

compile() {
    local dir=$1
    shift
    if ! cmake --build "$dir" -j "$jobs" "$@" >"$logs/$(basename "$dir").build.log" 2>&1; then
        cat "$logs/$(basename "$dir").build.log" >&2
        echo "build in $dir failed" >&2
        return 1
    fi
    { grep -c "Building C object" "$logs/$(basename "$dir").build.log" || true; } |
        sed 's/^/compiled: /; s/$/ files/'
}

# ccache, when installed, for every build: a second run, or a fresh
# clone's, compiles only what changed. Paths are made relative to the
# clone and the build folder is not hashed, so clones share hits.
ccache_launcher=()
if command -v ccache >/dev/null 2>&1; then
    ccache_launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
    export CCACHE_BASEDIR=$root CCACHE_NOHASHDIR=1
fi

# run_tests LABEL COMMAND...: runs an emq_tests command, shows its output,
# and records its "N passed, N failed, N skipped" line for the totals.
run_tests() {
    local label=$1 rc=0 counts p f
    shift
    local log=$logs/$label.tests.log
    echo "\$ $*"
    "$@" 2>&1 | tee "$log" || rc=$?
    counts=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$log" | tail -n 1 || true)
    if [[ -n "$counts" ]]; then
        p=${counts%% passed*}
        f=${counts#*passed, }
        f=${f%% failed*}
        echo "$label $p $f" >>"$state/counts"
    elif [[ $rc -ne 0 ]]; then
        echo "$label 0 1" >>"$state/counts" # --no-fork ends at the first failure
    fi
    if [[ $rc -ne 0 ]]; then
        echo "$label: emq_tests failed (exit status $rc); log: $log" >&2
        return 1
    fi
    if [[ -z "$counts" ]]; then
        echo "$label: emq_tests printed no 'N passed, N failed, N skipped' line" >&2
        return 1
    fi
}

# ---- stages --------------------------------------------------------------

stage_deps() {
    ./scripts/deps.sh
}

# The gcc stage's run of every test on the system server stands for that
# server in the matrix stage: it leaves its counts line and its seconds in
# $state/gcc.system.
stage_gcc() {
    gcc_build_ready
    ./scripts/check_layers.sh objects "$build/gcc"
    local start=$SECONDS
    run_tests gcc "$build/gcc/emq_tests" -j "$test_jobs"
    if [[ -z "${EMQ_SERVER_BIN_DIR:-}" ]]; then
        { grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' \
            "$logs/gcc.tests.log" | tail -n 1 || true
          echo $((SECONDS - start)); } >"$state/gcc.system"
    fi
}

# The clang build must compile without a warning (-Werror). Its optimized
# binaries run the unit tests and a smoke of the producer and consumer
# against a real server; the whole suite runs clang-built in the sanitize
# stage (ASan + UBSan), so running it here again only cost CI time.
stage_clang() {
    clang_build_ready
    run_tests clang "$build/clang/emq_tests" -j "$test_jobs" unit/ \
        integ/test_producer.c integ/test_consumer.c integ/test_cli_produce.c
}

# The packager's builds: each configuration warning-free (-Werror), every
# target (the library, the CLI, tests, examples, chaos and soak).
readonly BUILD_TYPES=(Release RelWithDebInfo Debug MinSizeRel)
stage_builds() {
    local cc type dir start
    for cc in gcc clang; do
        for type in "${BUILD_TYPES[@]}"; do
            start=$SECONDS
            if [[ $type == RelWithDebInfo ]]; then
                # The gcc and clang stages' own build, built once.
                "${cc}_build_ready" | sed "s/^/$cc $type: /"
            else
                dir=$build/builds-$cc-$type
                configure "$dir" "$cc" -DCMAKE_BUILD_TYPE="$type"
                compile "$dir" | sed "s/^/$cc $type: /"
            fi
            echo "$cc $type: warning-free in $((SECONDS - start)) s"
        done
    done
}

stage_sanitize() {
    configure "$build/sanitize" clang -DCMAKE_BUILD_TYPE=Debug \
        -DEMQ_SANITIZE=address,undefined -DEMQ_POISON_BUFFERS=ON
    compile "$build/sanitize" --target emq_tests
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1 \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        run_tests sanitize "$build/sanitize/emq_tests" -j "$test_jobs"
}

# The short chaos run and the soak, on the gcc build. The chaos run keeps
# its folder (ledgers, worker logs, server log and AOF) under build/chaos/
# when it fails; it removes it after a pass.
stage_chaos() {
    gcc_build_ready
    local seed=${EMQ_CHAOS_SEED:-6001} tolerate=()
    if [[ ${EMQ_CHAOS_TOLERATE_EXITS:-0} == 1 ]]; then
        tolerate=(--tolerate-worker-exits) # see bug B1 in docs/RELIABILITY.md
    fi
    if [[ ${EMQ_CHAOS_ALLOW_UNKNOWN_CONF:-0} == 1 ]]; then
        tolerate+=(--allow-unknown-conf)
    fi
    echo "\$ soak --entries 5000000"
    "$build/gcc/soak" --entries 5000000 2>&1 | tee "$logs/soak.log"
    mkdir -p "$build/chaos"
    echo "\$ chaos --seed $seed --jobs 20000 --seconds 75 ... ${tolerate[*]}"
    "$build/gcc/chaos" --seed "$seed" --jobs 20000 --workers 4 \
        --pidns-workers 1 --seconds 75 --poison 8 --crash-jobs 2 \
        --max-deliveries 5 \
        --claim-idle 2000 --lease-ttl 5000 --handler-short-ms 4 \
        --handler-long-permille 2 --retry-permille 20 --retry-backoff 200 \
        --kills 4 --stops 2 --restarts 2 --drops 3 --stalls 2 --halfopens 2 \
        --stops-long 1 --intruders 2 --misconfs 1 --drain-seconds 60 \
        --tolerate unseen-dead \
        --dir "$build/chaos" "${tolerate[@]}" 2>&1 | tee "$logs/chaos.log"
}

# The gcc build (RelWithDebInfo, poisoned buffers, the benchmarks too)
# and the clang one (the same without the benchmarks): every stage that
# uses one calls its *_build_ready, which configures and builds it under a
# lock, so stages running at once build it once and never side by side.
readonly GCC_FLAGS=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DEMQ_BENCH=ON -DEMQ_POISON_BUFFERS=ON)
readonly CLANG_FLAGS=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DEMQ_POISON_BUFFERS=ON)
build_ready() {
    local name=$1 cc=$2
    shift 2
    with_build_lock "$name" configure "$build/$name" "$cc" "$@"
    with_build_lock "$name" compile "$build/$name"
}
# with_build_lock NAME COMMAND...: runs COMMAND holding build NAME's lock
# (anything that builds in build/NAME takes it).
with_build_lock() {
    local name=$1 lock rc=0
    shift
    mkdir -p "$build"
    exec {lock}>"$build/$name.lock"
    flock "$lock"
    "$@" || rc=$?
    exec {lock}>&-
    return $rc
}
gcc_build_ready() { build_ready gcc gcc "${GCC_FLAGS[@]}"; }
clang_build_ready() { build_ready clang clang "${CLANG_FLAGS[@]}"; }

# The integration tests memcheck runs: the connection, the consumer's core
# (ownership included), the producer and the admin verbs against a real
# server. Left out (ASan and UBSan run them all): the CLI tests (the CLI
# runs as a child process, not under valgrind), TLS and the tests that
# start TLS servers (security, consumer_faults2's fixtures), the
# cluster tests (six servers each; CI time) and the Sentinel tests but
# four short ones (the Sentinel client's connects, outvoting and hold).
readonly VALGRIND_INTEG=(integ/test_consumer_counts integ/test_consumer_recover
    integ/test_consumer_poison integ/test_consumer_retry integ/test_consumer_door
    integ/test_consumer_ids integ/test_consumer.c integ/test_consumer_faults.c
    integ/test_consumer_identity integ/test_consumer_stop integ/test_consumer_load
    integ/test_ownership integ/test_conn.c integ/test_conn_faults integ/test_conn_cancel
    integ/test_route_loading integ/test_producer integ/test_admin
    integ/test_alloc_failure integ/test_consumer_poll.c integ/test_consumer_batch
    integ/test_consumer_connect integ/test_consumer_ahead
    integ/test_consumer_poll_reads integ/test_consumer_loop_reads
    sentinel_failover_begun sentinel_switch_while_connecting
    sentinel_stale_first sentinel_two_distinct)

stage_valgrind() {
    gcc_build_ready
    local vg=(valgrind -q --error-exitcode=1 --leak-check=full
        --errors-for-leak-kinds=definite,indirect,possible --track-origins=yes
        --suppressions="$root/tests/valgrind.supp")
    run_tests valgrind "${vg[@]}" "$build/gcc/emq_tests" --no-fork unit/
    # The integration tests as everywhere else, forked, valgrind_jobs at
    # once: a child forked without exec stays under memcheck, which checks
    # it at its exit and turns an error or a leak into exit status 1, its
    # test's failure, with the report in that test's output. Memcheck runs
    # code many times slower: every bound a test waits with is stretched
    # (tests/harness/test.h, emq_test_ms).
    EMQ_TEST_TIME_SCALE=4 run_tests valgrind-integ "${vg[@]}" \
        "$build/gcc/emq_tests" -j "$valgrind_jobs" "${VALGRIND_INTEG[@]}"
}

stage_symbols() {
    gcc_build_ready
    ./scripts/check_symbols.sh "$build/gcc/libechomq.so"
    if [[ -f "$build/clang/libechomq.so" ]]; then
        ./scripts/check_symbols.sh "$build/clang/libechomq.so"
    fi
}

stage_abi() {
    gcc_build_ready
    ./scripts/abi.sh check "$build/gcc"
}

# The install stage's prefix; the examples stage compiles against it when
# the install stage passed in this invocation ($state/install.prefix).
prefix=""
stage_install() {
    gcc_build_ready
    prefix=$build/prefix
    rm -rf "$prefix"
    cmake --install "$build/gcc" --prefix "$prefix" >"$logs/install.log"
    sed 's/^--/  /' "$logs/install.log"
    local libdir=$prefix/lib f
    for f in include/echomq.h include/echomq.hpp lib/libechomq.a lib/libechomq.so \
        lib/pkgconfig/echomq.pc lib/cmake/echomq/echomqConfig.cmake \
        lib/cmake/echomq/echomqConfigVersion.cmake lib/cmake/echomq/echomqTargets.cmake \
        bin/echomq share/man/man1/echomq.1 share/doc/echomq/LICENSE \
        share/doc/echomq/CHANGELOG.md share/doc/echomq/CLI.md; do
        [[ -e "$prefix/$f" ]] || { echo "install: $f is missing" >&2; return 1; }
    done
    echo "installed to $prefix"
    # Debian policy: an installed program finds its libraries where the
    # system looks, not through a RUNPATH or RPATH of its own.
    if readelf -d "$prefix/bin/echomq" "$prefix"/lib/libechomq.so.* | grep -E 'R(UN)?PATH'; then
        echo "install: an installed binary carries a RUNPATH or RPATH" >&2
        return 1
    fi
    LD_LIBRARY_PATH=$libdir "$prefix/bin/echomq" --version
    # The man page is what `man echomq` shows from the installed tree.
    if command -v man >/dev/null 2>&1; then
        MANPATH=$prefix/share/man man -P cat echomq 2>/dev/null | grep -q "echomq exporter\|exporter" ||
            { echo "install: 'man echomq' does not show the installed page" >&2; return 1; }
        echo "man echomq: the installed page"
    fi

    local out=$build/consumer
    rm -rf "$out"
    echo "-- find_package(echomq): tests/install"
    cmake -S "$root/tests/install" -B "$out" -DCMAKE_C_COMPILER=gcc \
        -DCMAKE_PREFIX_PATH="$prefix" >"$logs/consumer.configure.log" 2>&1 ||
        { cat "$logs/consumer.configure.log" >&2; return 1; }
    cmake --build "$out" >"$logs/consumer.build.log" 2>&1 ||
        { cat "$logs/consumer.build.log" >&2; return 1; }
    LD_LIBRARY_PATH=$libdir "$out/consumer_shared"
    "$out/consumer_static"

    echo "-- pkg-config echomq: $(PKG_CONFIG_PATH=$libdir/pkgconfig pkg-config --cflags --libs echomq)"
    # Word splitting of the pkg-config output is intended here.
    # shellcheck disable=SC2046
    cc -std=c11 -Wall -Wextra -Werror -o "$out/consumer_pc" "$root/tests/install/consumer.c" \
        $(PKG_CONFIG_PATH=$libdir/pkgconfig pkg-config --cflags --libs echomq)
    LD_LIBRARY_PATH=$libdir "$out/consumer_pc"
    # The static archive with what `pkg-config --static` says it needs.
    local static_libs
    static_libs=$(PKG_CONFIG_PATH=$libdir/pkgconfig pkg-config --static --libs echomq)
    static_libs=${static_libs/-lechomq/$libdir/libechomq.a}
    echo "-- pkg-config --static: $static_libs"
    # shellcheck disable=SC2046,SC2086
    cc -std=c11 -Wall -Wextra -Werror -o "$out/consumer_pc_static" "$root/tests/install/consumer.c" \
        $(PKG_CONFIG_PATH=$libdir/pkgconfig pkg-config --cflags echomq) $static_libs
    "$out/consumer_pc_static"
    if ldd "$out/consumer_pc_static" | grep -q libechomq; then
        echo "install: consumer_pc_static is not linked statically" >&2
        return 1
    fi
    install_debs
    echo "$prefix" >"$state/install.prefix"
}

# The Debian packages of the gcc build, installed as a user would (apt-get
# install ./*.deb), tests/install built against them with find_package and
# pkg-config from the system's own paths, then removed (remove_debs, also
# on failure) so the machine is left as found.
debs=()
debs_installed=0
install_lock= # the descriptor of the packages' lock while held
as_root=()
install_debs() {
    if [[ $(id -u) -ne 0 ]]; then
        command -v sudo >/dev/null 2>&1 || {
            echo "install: installing the .deb packages needs root or sudo" >&2
            return 1
        }
        as_root=(sudo --preserve-env=DEBIAN_FRONTEND)
    fi
    local p dir=$scratch/debs out=$build/consumer-deb pkgbuild=$build/deb
    # Packages are built as a packager builds them: installed under /usr,
    # so the library goes to the multiarch folder (GNUInstallDirs).
    local multiarch listing
    multiarch=$(gcc -print-multiarch)
    configure "$pkgbuild" gcc -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=/usr \
        -DEMQ_TESTS=OFF -DEMQ_EXAMPLES=OFF -DEMQ_BENCH=OFF
    compile "$pkgbuild"
    (cd "$pkgbuild" && cpack -G DEB -B "$dir" >"$logs/cpack.log" 2>&1) ||
        { cat "$logs/cpack.log" >&2; return 1; }
    # The packages are the machine's, not this run's: two runs of this
    # script side by side (CI runs on one machine) take turns from here to
    # remove_debs, or the second would find the first's installed.
    exec {install_lock}>"${TMPDIR:-/tmp}/echomq-install-debs.lock"
    flock -w 1200 "$install_lock" || {
        echo "install: another run kept the packages' lock for 20 minutes" >&2
        return 1
    }
    for p in "$dir"/*.deb; do
        debs+=("$(dpkg-deb -f "$p" Package)")
        echo "-- $(basename "$p") (Depends: $(dpkg-deb -f "$p" Depends))"
        listing=$(dpkg-deb -c "$p")
        awk '$6 !~ /\/$/ {print "     " $6 ($8 ? " -> " $8 : "")}' <<<"$listing"
        grep -q "usr/share/doc/${debs[-1]}/copyright\$" <<<"$listing" ||
            { echo "install: ${debs[-1]} has no usr/share/doc/${debs[-1]}/copyright" >&2; return 1; }
        if grep -E ' \./usr/lib/[^/]+\.(so|a)' <<<"$listing"; then
            echo "install: ${debs[-1]} puts a library outside usr/lib/$multiarch" >&2
            return 1
        fi
        if dpkg-query -W -f='${db:Status-Status}' "${debs[-1]}" 2>/dev/null | grep -qx installed; then
            echo "install: ${debs[-1]} is installed already; this stage installs and removes its own: remove it first (apt-get remove ${debs[-1]})" >&2
            return 1
        fi
    done
    debs_installed=1
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends "$dir"/*.deb >"$logs/apt-install.log" 2>&1 ||
        { cat "$logs/apt-install.log" >&2; return 1; }
    echo "installed: $(dpkg-query -W -f='${Package} ${Version}  ' "${debs[@]}")"
    echo "$(command -v echomq): $(echomq --version)"
    if command -v man >/dev/null 2>&1; then
        man -P cat echomq 2>/dev/null | grep -q exporter ||
            { echo "install: 'man echomq' does not show the packaged page" >&2; return 1; }
    fi
    rm -rf "$out"
    cmake -S "$root/tests/install" -B "$out" -DCMAKE_C_COMPILER=gcc \
        >"$logs/consumer-deb.configure.log" 2>&1 ||
        { cat "$logs/consumer-deb.configure.log" >&2; return 1; }
    cmake --build "$out" >"$logs/consumer-deb.build.log" 2>&1 ||
        { cat "$logs/consumer-deb.build.log" >&2; return 1; }
    "$out/consumer_shared"
    "$out/consumer_static"
    # shellcheck disable=SC2046
    cc -std=c11 -Wall -Wextra -Werror -o "$out/consumer_pc" "$root/tests/install/consumer.c" \
        $(pkg-config --cflags --libs echomq)
    "$out/consumer_pc"
    echo "tests/install: built against the packages with find_package and pkg-config, and ran"
    remove_debs
}

remove_debs() {
    [[ $debs_installed -eq 1 ]] || return 0
    debs_installed=0
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq "${debs[@]}" \
        >"$logs/apt-remove.log" 2>&1 || { cat "$logs/apt-remove.log" >&2; return 1; }
    echo "removed: ${debs[*]}"
    if [[ -n ${install_lock:-} ]]; then
        exec {install_lock}>&- # the next run's turn
        install_lock=
    fi
}

stage_examples() {
    local src name dir n=0 cxx_examples=()
    [[ -f "$state/install.prefix" ]] && prefix=$(cat "$state/install.prefix")
    shopt -s nullglob
    local sources=("$root"/examples/*.c)
    shopt -u nullglob
    if [[ ${#sources[@]} -eq 0 ]]; then
        echo "examples: there is no examples/*.c" >&2
        return 1
    fi
    for dir in gcc clang; do
        [[ -d "$build/$dir" ]] || continue
        for src in "${sources[@]}"; do
            name=$(basename "$src" .c)
            [[ -x "$build/$dir/example_$name" ]] ||
                { echo "examples: $dir build has no example_$name" >&2; return 1; }
        done
    done
    if [[ -n "$prefix" ]]; then
        # Against the installed copy: the examples need nothing but echomq.h.
        local loop_lib
        for src in "${sources[@]}"; do
            name=$(basename "$src" .c)
            # The event-loop examples also need their loop's library.
            case $name in
                uv_worker) loop_lib=libuv ;;
                event_worker) loop_lib=libevent ;;
                *) loop_lib= ;;
            esac
            # shellcheck disable=SC2046,SC2086
            cc -std=c11 -Wall -Wextra -Werror -pthread -o "$scratch/$name" "$src" \
                $(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags --libs echomq $loop_lib)
            n=$((n + 1))
        done
        echo "compiled $n example(s) against the installed libechomq"
        # The C++ header: every examples/*.cpp with g++ and clang++ (C++17,
        # pedantic) against the same copy; the g++ builds run below.
        local cxx
        for src in "$root"/examples/*.cpp; do
            name=$(basename "$src" .cpp)
            for cxx in g++ clang++; do
                command -v "$cxx" >/dev/null || continue
                # shellcheck disable=SC2046
                "$cxx" -std=c++17 -Wall -Wextra -Werror -pedantic -pthread \
                    -o "$scratch/$name.$cxx" "$src" \
                    $(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags --libs echomq) \
                    -Wl,-rpath,"$prefix/lib"
            done
            mv "$scratch/$name.g++" "$scratch/$name"
            cxx_examples+=("$name")
        done
        echo "compiled ${cxx_examples[*]} with g++ and clang++ against the installed echomq.hpp"
    fi
    [[ -x "$build/gcc/example_roundtrip" ]] || return 0
    mkdir -p "$scratch/redis"
    start_private_redis "$scratch/redis"
    "$build/gcc/example_roundtrip" "$EMQ_REDIS_URL" "ci-roundtrip"
    "$build/gcc/example_topic_pipeline" "$EMQ_REDIS_URL" "ci-topic" >"$logs/topic_pipeline.log" ||
        { cat "$logs/topic_pipeline.log" >&2; return 1; }
    head -n 2 "$logs/topic_pipeline.log"
    "$build/gcc/example_admin_tour" "$EMQ_REDIS_URL" "ci-admin-tour" >"$logs/admin_tour.log" ||
        { cat "$logs/admin_tour.log" >&2; return 1; }
    grep -E '^(produced|consumed|requeued|trimmed)' "$logs/admin_tour.log"
    "$build/gcc/example_delayed_jobs" "$EMQ_REDIS_URL" "ci-delayed" >"$logs/delayed_jobs.log" ||
        { cat "$logs/delayed_jobs.log" >&2; return 1; }
    grep -E '^(cancelled|handled)' "$logs/delayed_jobs.log"
    "$build/gcc/example_queue_features" "$EMQ_REDIS_URL" "ci-features" >"$logs/queue_features.log" ||
        { cat "$logs/queue_features.log" >&2; return 1; }
    grep -E '^(cancelled|held|handled)' "$logs/queue_features.log"
    for name in "${cxx_examples[@]}"; do
        "$scratch/$name" "$EMQ_REDIS_URL" "ci:$name"
    done
    stop_private_redis
}

stage_house() {
    local bad=0 f
    while IFS= read -r f; do
        if ! head -n 3 "$f" | grep -q 'SPDX-License-Identifier: BSD-3-Clause'; then
            echo "house: $f has no SPDX-License-Identifier line" >&2
            bad=1
        fi
    done < <(git ls-files -- '*.c' '*.h' '*.hpp' '*.cc' '*.sh' '.ci/run' \
        'CMakeLists.txt' '*.cmake.in' '*.pc.in' 'docs/*.1' 'cmake/layers.txt')
    ./scripts/check_layers.sh --self-test >"$logs/check_layers.log" 2>&1 ||
        { cat "$logs/check_layers.log" >&2; bad=1; }
    tail -n 1 "$logs/check_layers.log"
    ./scripts/check_layers.sh sources || bad=1
    # Every Markdown table renders whole; the maps of README and
    # src/consumer/core.h name what the tree holds (docs/BUILDING.md).
    ./scripts/check_tables.sh --self-test >/dev/null || bad=1
    ./scripts/check_tables.sh || bad=1
    ./scripts/check_maps.sh --self-test >/dev/null || bad=1
    ./scripts/check_maps.sh || bad=1
    # Every function of echomq.h has its C++ counterpart in echomq.hpp.
    ./scripts/check_hpp.sh --self-test >/dev/null || bad=1
    ./scripts/check_hpp.sh || bad=1
    ./scripts/format.sh --check || bad=1
    ./scripts/check_commits.sh || bad=1
    return $bad
}

stage_docs() {
    gcc_build_ready
    with_build_lock gcc ./scripts/confdoc.sh --check "$build/gcc"
    with_build_lock gcc ./scripts/machinedoc.sh --check "$build/gcc"
    with_build_lock gcc ./scripts/clidoc.sh --check "$build/gcc"
    ./scripts/check_maps.sh "$build/gcc" # core.h's map against the objects
}

# The compatibility matrix: emq_tests integ/ once per server, each through
# the fixture's one setting, EMQ_SERVER_BIN_DIR. Every server runs even
# when an earlier one fails; the stage fails at the end if any did.
# Integration test files the matrix leaves out: they test the client only
# (fake peers, the event-loop examples, URL redaction and terminal
# escaping, the CLI's pull-mode plumbing, flag parsing and -X, the CLI's
# produce time bounds, the exporter's HTTP and Prometheus, top's terminal,
# the JSON and --format envelope of entry lines, signal handling, help
# against the option tables,
# allocation failures), so another server adds
# nothing; the gcc, clang and sanitize stages run them. WAIT and WAITAOF
# per server are the library's tests (test_producer_shared).
readonly MATRIX_SKIP=(test_conn_hostile test_examples_loops test_cli_secrets
    test_cli_consume_core test_alloc_failure test_cli_flags
    test_cli_produce_durable test_cli_exporter test_cli_escape test_cli_top
    test_cli_envelope test_cli_signals test_cli_doc)

# matrix_server NAME DIR REUSE FILES...: one server's part of the matrix
# stage (a job of its own): the integration tests against it (REUSE 1:
# the gcc stage's run on the system server stands for them), then the
# short chaos run (every kind of fault, 5000 jobs, about 40 s). Writes
# logs/matrix-NAME.{tests,chaos}.log and .seconds; exits non-zero when
# either failed.
matrix_server() {
    local name=$1 dir=$2 reuse=$3 rc=0 chaos_rc=0 start=$SECONDS
    shift 3
    local log=$logs/matrix-$name.tests.log
    rm -f "$logs/matrix-$name.reused"
    if [[ $reuse -eq 1 ]]; then
        cp "$logs/gcc.tests.log" "$log"
        touch "$logs/matrix-$name.reused"
    else
        EMQ_SERVER_BIN_DIR=$dir "$build/gcc/emq_tests" -j "$test_jobs" "$@" >"$log" 2>&1 || rc=$?
    fi
    rm -rf "$build/chaos-$name"
    mkdir -p "$build/chaos-$name"
    EMQ_SERVER_BIN_DIR=$dir "$build/gcc/chaos" --seed "${EMQ_CHAOS_SEED:-6001}" \
        --jobs 5000 --workers 3 --pidns-workers 1 --seconds 30 --poison 4 \
        --max-deliveries 5 --claim-idle 2000 --lease-ttl 5000 \
        --handler-short-ms 4 --handler-long-permille 2 --retry-permille 20 \
        --retry-backoff 200 --kills 2 --stops 1 --restarts 1 --drops 1 \
        --stalls 1 --halfopens 1 --stops-long 1 --intruders 1 --misconfs 1 \
        --drain-seconds 45 --exact \
        --dir "$build/chaos-$name" \
        >"$logs/matrix-$name.chaos.log" 2>&1 || chaos_rc=$?
    echo $((SECONDS - start)) >"$logs/matrix-$name.seconds"
    local counts
    counts=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$log" | tail -n 1 || true)
    echo "-- $name done in $((SECONDS - start)) s: ${counts:-no count (exit $rc)}; chaos exit $chaos_rc (logs $log, $logs/matrix-$name.chaos.log)"
    [[ $rc -eq 0 && -n "$counts" && $chaos_rc -eq 0 ]]
}

stage_matrix() {
    gcc_build_ready
    local gcc_system_counts=""
    [[ -f "$state/gcc.system" ]] && gcc_system_counts=$(head -n 1 "$state/gcc.system")
    local matrix_files=() f base
    for f in "$root"/tests/integ/test_*.c; do
        base=$(basename "$f" .c)
        [[ " ${MATRIX_SKIP[*]} " == *" $base "* ]] && continue
        matrix_files+=("integ/$base.c")
    done
    local listing
    listing=$(./scripts/servers.sh) || { echo "matrix: scripts/servers.sh failed" >&2; return 1; }
    if [[ -z "$listing" ]]; then
        skip_stage "no server sources (../shared/servers or EMQ_SERVER_SOURCES): only the system redis-server, which the gcc stage already ran"
        return 0
    fi
    local names=() dirs=() name dir sys
    sys=$(command -v redis-server || true)
    if [[ -n "$sys" ]]; then
        sys=$(cd "$(dirname "$sys")" && pwd -P)
        name=redis-$("$sys/redis-server" --version | sed -n 's/.*v=\([^ ]*\).*/\1/p')
        names+=("$name")
        dirs+=("$sys")
    fi
    while read -r name dir; do
        names+=("$name")
        dirs+=("$dir")
    done <<<"$listing"
    # Each server's part runs as a job of its own, at most matrix_jobs at
    # once (the tests wait on servers far more than they compute, and each
    # uses servers of its own on free ports), its output in its logs.
    local i ran=() pids=() names_run=()
    local matrix_jobs=${EMQ_MATRIX_JOBS:-3}
    for i in "${!names[@]}"; do
        name=${names[$i]}
        dir=${dirs[$i]}
        if [[ -n "${EMQ_MATRIX_SERVERS:-}" && " $EMQ_MATRIX_SERVERS " != *" $name "* ]]; then
            continue
        fi
        ran+=("$name")
        local reuse=0
        [[ $i -eq 0 && -n "$sys" && -n "$gcc_system_counts" ]] && reuse=1
        echo "-- $name: $("$dir/redis-server" --version) (EMQ_SERVER_BIN_DIR=$dir)"
        while (($(jobs -rp | wc -l) >= matrix_jobs)); do
            wait -n || true
        done
        matrix_server "$name" "$dir" "$reuse" "${matrix_files[@]}" &
        pids+=($!)
        names_run+=("$name")
    done
    local k rc results=() failed=() counts p f verdict
    for k in "${!pids[@]}"; do
        name=${names_run[$k]}
        rc=0
        wait "${pids[$k]}" || rc=$?
        counts=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' \
            "$logs/matrix-$name.tests.log" | tail -n 1 || true)
        if [[ -n "$counts" && ! -f "$logs/matrix-$name.reused" ]]; then
            p=${counts%% passed*}
            f=${counts#*passed, }
            f=${f%% failed*}
            echo "matrix-$name $p $f" >>"$state/counts"
        fi
        [[ -f "$logs/matrix-$name.reused" ]] && counts="$gcc_system_counts (the gcc stage)"
        verdict=$(grep -m1 '^chaos summary:' "$logs/matrix-$name.chaos.log" |
            sed -n 's/.* verdict=\([A-Z]*\).*/\1/p' || true)
        results+=("$(printf '%-14s %-40s chaos %-4s %4ss' "$name" "${counts:-no count}" \
            "${verdict:-?}" "$(cat "$logs/matrix-$name.seconds" 2>/dev/null || echo '?')")")
        if [[ $rc -ne 0 ]]; then
            failed+=("$name")
        fi
    done
    echo
    echo "-- matrix results"
    local line
    for line in "${results[@]}"; do
        echo "   $line"
    done
    # What failed, again after the table: a reader who sees only the end of
    # this output still sees why.
    for name in "${failed[@]}"; do
        # Each failure with the lines it printed before it (the output
        # went to the log, the jobs running at once).
        grep -E -B 12 '^FAIL ' "$logs/matrix-$name.tests.log" | grep -v '^echomq: ' |
            sed "s/^/   $name: /" || true
        grep -q -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' \
            "$logs/matrix-$name.tests.log" ||
            tail -n 30 "$logs/matrix-$name.tests.log" | sed "s/^/   $name: /"
        if ! grep -q '^chaos summary: .* verdict=PASS' "$logs/matrix-$name.chaos.log"; then
            # The checker's findings, then its verdict.
            { awk '/^chaos verdict/ { exit } { print }' "$logs/matrix-$name.chaos.log" |
                grep -v '^chaos' | tail -n 20
              sed -n '/^chaos verdict/,/^  violations/p' "$logs/matrix-$name.chaos.log"; } |
                sed "s/^/   $name chaos: /"
            grep -q '^chaos verdict' "$logs/matrix-$name.chaos.log" ||
                tail -n 30 "$logs/matrix-$name.chaos.log" | sed "s/^/   $name chaos: /"
        fi
    done
    if [[ ${#failed[@]} -gt 0 ]]; then
        echo "matrix: failures on ${failed[*]}; logs: $logs/matrix-<server>.tests.log" >&2
        return 1
    fi
    # docs/COMPATIBILITY.md says what this run showed: checked when every
    # server ran (a subset cannot speak for the others).
    if [[ -z "${EMQ_MATRIX_SERVERS:-}" ]]; then
        "$root/scripts/compat.sh" check "$logs" "${ran[@]}"
    else
        echo "matrix: EMQ_MATRIX_SERVERS is set: docs/COMPATIBILITY.md not checked"
    fi
}

stage_fuzz() {
    shopt -s nullglob
    local sources=("$root"/tests/fuzz/fuzz_*.c)
    shopt -u nullglob
    if [[ ${#sources[@]} -eq 0 ]]; then
        skip_stage "no tests/fuzz/fuzz_*.c exists yet, so there is nothing to fuzz"
        return 0
    fi
    local dir=$build/fuzz src name corpus work artifacts rc
    if [[ -z "$fuzz_seconds" ]]; then
        # The stage's time stays bounded however many targets there are.
        fuzz_seconds=$((FUZZ_BUDGET / ${#sources[@]}))
        if ((fuzz_seconds < 15)); then
            fuzz_seconds=15
        fi
    fi
    configure "$dir" clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEMQ_FUZZ=ON \
        -DEMQ_TESTS=OFF -DEMQ_EXAMPLES=OFF -DEMQ_TOOLS=OFF
    local targets=()
    for src in "${sources[@]}"; do
        targets+=(--target "$(basename "$src" .c)")
    done
    compile "$dir" "${targets[@]}"
    for src in "${sources[@]}"; do
        name=$(basename "$src" .c)
        corpus=$root/tests/fuzz/corpus/${name#fuzz_}
        work=$scratch/fuzz/$name/corpus
        artifacts=$scratch/fuzz/$name/artifacts
        mkdir -p "$work" "$artifacts"
        if [[ -d "$corpus" ]]; then
            cp -R "$corpus/." "$work/"
        else
            echo "fuzz: $name has no seed corpus at tests/fuzz/corpus/${name#fuzz_}/"
        fi
        echo "-- $name: ${fuzz_seconds} s on a copy of $(find "$work" -type f | wc -l) seed input(s)"
        rc=0
        ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
            "$dir/$name" -max_total_time="$fuzz_seconds" -timeout=10 -rss_limit_mb=2048 \
            -print_final_stats=1 -artifact_prefix="$artifacts/" "$work" \
            >"$logs/$name.fuzz.log" 2>&1 || rc=$?
        grep -E '^(#[0-9]+ *DONE|stat::number_of_executed_units|stat::peak_rss_mb|Done [0-9]+ runs)' \
            "$logs/$name.fuzz.log" || tail -n 3 "$logs/$name.fuzz.log"
        if [[ $rc -ne 0 ]] || [[ -n "$(ls -A "$artifacts")" ]]; then
            tail -n 60 "$logs/$name.fuzz.log" >&2
            mkdir -p "$build/fuzz-artifacts"
            cp -R "$artifacts/." "$build/fuzz-artifacts/" 2>/dev/null || true
            echo "fuzz: $name found a failure (exit status $rc); inputs kept in build/fuzz-artifacts/, log: $logs/$name.fuzz.log" >&2
            return 1
        fi
    done
}

stage_bench() {
    shopt -s nullglob
    local sources=("$root"/bench/*.c)
    shopt -u nullglob
    gcc_build_ready # the gcc build has EMQ_BENCH=ON
    if [[ ${#sources[@]} -eq 0 ]]; then
        echo "bench: there is no bench/*.c yet: nothing to build"
        return 0
    fi
    local src name
    for src in "${sources[@]}"; do
        name=$(basename "$src" .c)
        name=bench_${name#bench_}
        [[ -x "$build/gcc/$name" ]] || { echo "bench: $name was not built" >&2; return 1; }
    done
    echo "built ${#sources[@]} benchmark(s) (not run)"
}

# The inner loop (not part of the whole run, which runs all of it): the
# gcc build, the unit tests and the integration tests of tests/quick.list.
stage_quick() {
    gcc_build_ready
    local files=() line
    while read -r line; do
        [[ -z "$line" || $line == \#* ]] || files+=("$line")
    done <"$root/tests/quick.list"
    run_tests quick "$build/gcc/emq_tests" -j "$test_jobs" unit/ "${files[@]}"
}

declare -A STAGE_WHAT=(
    [deps]="install missing dependencies (scripts/deps.sh)"
    [house]="SPDX lines, the layer rule on includes and headers (scripts/check_layers.sh), echomq.hpp covers echomq.h (scripts/check_hpp.sh), format, commit subjects"
    [gcc]="gcc build (-Werror) + emq_tests"
    [clang]="clang build (-Werror) + unit tests and a smoke"
    [builds]="gcc and clang x Release, RelWithDebInfo, Debug, MinSizeRel (-Werror)"
    [sanitize]="ASan+UBSan build (clang) + emq_tests"
    [chaos]="chaos run (short) + soak: nothing lost under faults, flat memory"
    [valgrind]="valgrind memcheck: the unit tests and the core's integration tests"
    [symbols]="libechomq.so exports only emq_*"
    [abi]="the ABI matches abi/libechomq.abi (abidiff)"
    [install]="cmake --install + consumer via find_package and pkg-config"
    [examples]="examples compile, roundtrip against a private redis-server"
    [docs]="docs/CONFIGURATION.md, docs/CLI.md and docs/echomq.1 are up to date"
    [matrix]="server matrix: emq_tests integ/ and a short chaos run on Redis 6.2, 7.0, 7.2 and Valkey 8; docs/COMPATIBILITY.md checked"
    [fuzz]="fuzz targets (${fuzz_seconds:+$fuzz_seconds s each}${fuzz_seconds:-$FUZZ_BUDGET s shared})"
    [bench]="benchmarks build (not run)"
    [quick]="the inner loop: gcc build, unit tests and tests/quick.list"
)

# Tests at once in each emq_tests run (the runner's -j), and in the
# valgrind stage, whose tests compute far more than they wait.
test_jobs=${EMQ_TEST_JOBS:-6}
valgrind_jobs=${EMQ_VALGRIND_JOBS:-2}

mkdir -p "$logs"

# A stage on its own: the orchestrator's child.
if [[ ${1:-} == --stage ]]; then
    "stage_$stage_name"
    exit 0
fi

selected=("$@")
for s in "${selected[@]}"; do
    if [[ " ${ALL_STAGES[*]} quick " != *" $s "* ]]; then
        echo "test.sh: unknown stage '$s'; stages: ${ALL_STAGES[*]} (and quick)" >&2
        exit 2
    fi
done
want() {
    [[ ${#selected[@]} -eq 0 && $1 != quick ]] || [[ " ${selected[*]} " == *" $1 "* ]]
}

rm -rf "$state"
mkdir -p "$state"
export EMQ_TEST_STATE=$state
run_start=$SECONDS
declare -A stage_pid=() stage_start=() stage_result=() stage_secs=()
order=() # the stages of this run, in the order they started
failed_stage=""

# start_stage NAME: runs it as `test.sh --stage NAME` in a session of its
# own (setsid: a failure elsewhere ends it and all it started with one
# signal), its output to logs/stage-NAME.log.
start_stage() {
    local name=$1
    echo "==== [$name] started at $((SECONDS - run_start)) s: ${STAGE_WHAT[$name]}"
    stage_start[$name]=$SECONDS
    setsid "$root/scripts/test.sh" --stage "$name" >"$logs/stage-$name.log" 2>&1 &
    stage_pid[$name]=$!
    order+=("$name")
}

# end_stage NAME RC: prints its output and result.
end_stage() {
    local name=$1 rc=$2 result=ok
    stage_secs[$name]=$((SECONDS - ${stage_start[$name]}))
    [[ $rc -eq 0 ]] || result=FAILED
    [[ $rc -eq 0 && -f "$state/$name.skipped" ]] && result=skipped
    stage_result[$name]=$result
    unset "stage_pid[$name]"
    echo
    echo "==== [$name] ${STAGE_WHAT[$name]}"
    cat "$logs/stage-$name.log"
    [[ $result != skipped ]] || echo "---- [$name] SKIPPED: $(cat "$state/$name.skipped")"
    echo "---- [$name] $result in ${stage_secs[$name]} s"
    if [[ $result == FAILED && -z $failed_stage ]]; then
        failed_stage=$name
        echo "!!! stage '$name' FAILED after ${stage_secs[$name]} s (exit status $rc); log: $logs/stage-$name.log"
    fi
}

# stop_stages: ends every stage still running (TERM to its session, then
# KILL), as the first failure or an interrupt does.
stop_stages() {
    local name pid i
    for name in "${!stage_pid[@]}"; do
        kill -TERM -- "-${stage_pid[$name]}" 2>/dev/null || true
    done
    for ((i = 0; i < 100; i++)); do
        local alive=0
        for name in "${!stage_pid[@]}"; do
            kill -0 "${stage_pid[$name]}" 2>/dev/null && alive=1
        done
        [[ $alive -eq 1 ]] || break
        sleep 0.1
    done
    for name in "${!stage_pid[@]}"; do
        pid=${stage_pid[$name]}
        kill -KILL -- "-$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        stage_secs[$name]=$((SECONDS - ${stage_start[$name]}))
        stage_result[$name]=stopped
        unset "stage_pid[$name]"
    done
}

finish() {
    local rc=$?
    trap - EXIT
    stop_stages
    [[ -z $failed_stage ]] || rc=1
    local p=0 f=0 label tp tf runs=0
    if [[ -f "$state/counts" ]]; then
        while read -r label tp tf; do
            p=$((p + tp))
            f=$((f + tf))
            runs=$((runs + 1))
        done <"$state/counts"
    fi
    echo
    echo "==== summary ($((SECONDS - run_start)) s wall, stages up to $stage_jobs at once, tests up to $test_jobs at once)"
    printf '  %-9s %-8s %7s %7s %7s\n' stage result start end seconds
    local name ran=0
    for name in "${order[@]}"; do
        local st=$((${stage_start[$name]} - run_start))
        printf '  %-9s %-8s %6ds %6ds %6ds\n' "$name" "${stage_result[$name]:-?}" \
            "$st" $((st + ${stage_secs[$name]:-0})) "${stage_secs[$name]:-0}"
        [[ ${stage_result[$name]:-} == ok ]] && ran=$((ran + 1))
    done
    [[ $rc -eq 0 ]] && echo "all stages passed"
    echo "$ran stages passed of ${#order[@]} run; $runs emq_tests runs"
    echo "$p passed, $f failed"
    exit "$rc"
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# deps first and alone: every other stage needs what it installs.
start_stage deps
wait "${stage_pid[deps]}" && rc=0 || rc=$?
end_stage deps "$rc"
[[ -z $failed_stage ]] || exit 1

pending=()
for s in "${START_ORDER[@]}" quick; do
    want "$s" && pending+=("$s")
done

# ready NAME: 0 when every stage it needs has passed or is not in this run.
ready() {
    local need
    for need in ${STAGE_NEEDS[$1]:-}; do
        want "$need" || continue
        [[ ${stage_result[$need]:-} == ok || ${stage_result[$need]:-} == skipped ]] || return 1
    done
}

# EMQ_KEEP_GOING=1: a failed stage does not stop the others, and every
# stage that does not need it still runs (to see every failure of a run).
keep_going=${EMQ_KEEP_GOING:-0}
while [[ ${#pending[@]} -gt 0 || ${#stage_pid[@]} -gt 0 ]]; do
    if [[ -z $failed_stage || $keep_going == 1 ]]; then
        left=()
        for s in "${pending[@]}"; do
            if [[ ${#stage_pid[@]} -lt $stage_jobs ]] && ready "$s"; then
                start_stage "$s"
            else
                left+=("$s")
            fi
        done
        pending=("${left[@]}")
    else
        pending=()
        stop_stages
        break
    fi
    [[ ${#stage_pid[@]} -gt 0 ]] || break
    done_pid=""
    wait -n -p done_pid "${stage_pid[@]}" && rc=0 || rc=$?
    for s in "${!stage_pid[@]}"; do
        if [[ ${stage_pid[$s]} == "$done_pid" ]]; then
            end_stage "$s" "$rc"
        fi
    done
done
if [[ ${#pending[@]} -gt 0 && ( -z $failed_stage || $keep_going == 1 ) ]]; then
    echo "test.sh: stages ${pending[*]} could not start (what they need did not pass)" >&2
    exit 1
fi
