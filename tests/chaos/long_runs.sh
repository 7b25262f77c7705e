#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# tests/chaos/long_runs.sh: N chaos seeds of J jobs each, one markdown table
# of verdicts (docs/RELIABILITY.md records such tables).
#
#   tests/chaos/long_runs.sh [-n N] [-j JOBS] [-s FIRST_SEED] [-p PARALLEL]
#                            [-b BUILD_DIR] [-o OUT.md] [-d PARENT]
#                            [-- extra chaos flags...]
#
# Defaults: 10 seeds from 3101, 100000 jobs, one run at a time, the chaos
# binary of build/gcc, the table to build/chaos-long/verdicts.md, run
# folders under build/chaos-long/. Extra flags after -- go to every run
# unchanged (for example --claim-idle 1000 --lease-ttl 4000). Every run's
# full output is kept in <out dir>/seed-<S>.log; a failed run keeps its run
# folder too (chaos keeps it). The table has one row per seed, taken from
# the "chaos summary:" line the checker prints; a run that printed none (a
# setup failure, exit 2) has a row saying so. Exit status: 0 when every seed
# passed, 1 otherwise.
#
# Runs take minutes each (100000 jobs: about 3 to 6 minutes with the
# default handler mix on 2 cores); -p 2 runs two at a time, which on a
# small machine also stresses the timing.
set -euo pipefail

n=10
jobs=100000
first=3101
parallel=1
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$root/build/gcc
out=$root/build/chaos-long/verdicts.md
parent=""
while getopts "n:j:s:p:b:o:d:h" o; do
    case $o in
    n) n=$OPTARG ;;
    j) jobs=$OPTARG ;;
    s) first=$OPTARG ;;
    p) parallel=$OPTARG ;;
    b) build=$OPTARG ;;
    o) out=$OPTARG ;;
    d) parent=$OPTARG ;;
    *) sed -n '2,22p' "$0"; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
extra=("$@")
chaos=$build/chaos
if [[ ! -x $chaos ]]; then
    echo "long_runs.sh: no $chaos; build it first (cmake --build $build --target chaos)" >&2
    exit 2
fi
outdir=$(dirname "$out")
mkdir -p "$outdir"
parent=${parent:-$outdir}
mkdir -p "$parent"

run_one() {
    local seed=$1 log=$outdir/seed-$1.log start=$SECONDS rc=0
    "$chaos" --seed "$seed" --jobs "$jobs" --dir "$parent" "${extra[@]}" \
        >"$log" 2>&1 || rc=$?
    echo "elapsed=$((SECONDS - start)) rc=$rc" >>"$log"
    echo "seed $seed: exit $rc after $((SECONDS - start)) s ($log)"
}

seeds=()
for ((i = 0; i < n; i++)); do seeds+=($((first + i))); done
running=0
for s in "${seeds[@]}"; do
    run_one "$s" &
    running=$((running + 1))
    if ((running >= parallel)); then
        wait -n || true
        running=$((running - 1))
    fi
done
wait || true

# One value of a "chaos summary:" line.
field() { tr ' ' '\n' <<<"$1" | sed -n "s/^$2=//p"; }

failed=0
{
    echo "Command: \`$(basename "$chaos") --seed S --jobs $jobs${extra[*]:+ ${extra[*]}}\`, $n seeds from $first, $parallel at a time; $(date -u +%Y-%m-%d), commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')."
    echo
    echo "| seed | jobs | lost | pending at end | healthy dead-lettered | poison dead-lettered | duplicates: jobs (extra calls) | explained: kill / stop / stop past lease / proxy / server / re-added / peer claim | UNEXPLAINED | unseen dead letters | dead letters missing fields | intended retries | early retries | intruders (bad, calls, fenced by a write outage) | workers died | seconds | verdict |"
    echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    for s in "${seeds[@]}"; do
        log=$outdir/seed-$s.log
        line=$(grep -m1 '^chaos summary:' "$log" 2>/dev/null || true)
        secs=$(sed -n 's/^elapsed=\([0-9]*\).*/\1/p' "$log" 2>/dev/null | tail -1)
        if [[ -z $line ]]; then
            failed=1
            why=$(grep -m1 -E 'cannot run|setup failure|refuses|usage' "$log" 2>/dev/null | tr '|' '/' || true)
            echo "| $s | $jobs | - | - | - | - | - | - | - | - | - | - | - | - | - | ${secs:--} | NO VERDICT: ${why:-see seed-$s.log} |"
            continue
        fi
        v=$(field "$line" verdict)
        [[ $v == PASS ]] || failed=1
        echo "| $s | $(field "$line" jobs) | $(field "$line" lost) | $(field "$line" pending) | $(field "$line" healthy_dead) | $(field "$line" poison_dead) | $(field "$line" dup_jobs) ($(field "$line" dup_calls)) | $(field "$line" kill) / $(field "$line" stop) / $(field "$line" stop_long) / $(field "$line" net) / $(field "$line" server) / $(field "$line" readded) / $(field "$line" peer) | $(field "$line" unexplained) | $(field "$line" unseen_dead) | $(field "$line" dead_fields_bad) | $(field "$line" intended) | $(field "$line" early_retries) | $(field "$line" intruders) ($(field "$line" intruder_bad), $(field "$line" intruder_calls), $(field "$line" intruder_fenced)) | $(field "$line" workers_died) | ${secs:--} | $v |"
    done
} >"$out"
cat "$out"
exit $failed
