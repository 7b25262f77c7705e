#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# check_commits.sh [BASE]: the subject of every commit after BASE (default:
# SUBJECTS_FROM below) up to HEAD is at most 72 characters, the detail in
# the body after a blank line (CONTRIBUTING.md, "Commits"). Exits 1 naming
# each commit whose subject is longer. The house stage of scripts/test.sh
# runs it.
#
# The history before SUBJECTS_FROM was written before the rule and is left
# as it is; the rule holds from the commit after it. Where that history is
# absent (not a git checkout, or a shallow clone without BASE) the check
# says so and passes: a shallow clone cannot tell which commits are new.
set -euo pipefail

# The last commit before the 72-character rule (main, 2026-12).
readonly SUBJECTS_FROM=128adbe470b912c473747c5f6dab5d8f13dac4ad
readonly MAX=72

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
base=${1:-$SUBJECTS_FROM}

if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    echo "check_commits.sh: not a git checkout; no commit to check"
    exit 0
fi
if ! git rev-parse --verify -q "$base^{commit}" >/dev/null; then
    if [[ $(git rev-parse --is-shallow-repository) == true ]]; then
        echo "check_commits.sh: shallow clone without $base; not checked" \
            "(git fetch --unshallow to check)"
        exit 0
    fi
    echo "check_commits.sh: $base is not a commit of this repository" >&2
    exit 2
fi

# %s is the first paragraph of the message joined into one line: a subject
# that runs on without a blank line before the body counts whole.
bad=0 n=0
while IFS= read -r line; do
    n=$((n + 1))
    hash=${line%% *}
    subject=${line#* }
    if [[ ${#subject} -gt $MAX ]]; then
        echo "check_commits.sh: commit $hash: subject of ${#subject} characters" \
            "(at most $MAX): $subject" >&2
        bad=$((bad + 1))
    fi
done < <(git log --format='%h %s' "$base..HEAD")

if [[ $bad -ne 0 ]]; then
    echo "check_commits.sh: $bad of $n commit(s) after ${base:0:7} have a subject" \
        "over $MAX characters. Write 'area: what changed' in at most $MAX," \
        "a blank line, then the detail (CONTRIBUTING.md); on an unpushed" \
        "branch, fix with git commit --amend or git rebase -i" >&2
    exit 1
fi
echo "check_commits.sh: $n commit(s) after ${base:0:7}, every subject at most $MAX characters"
