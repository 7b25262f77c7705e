#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# check_tables.sh: every Markdown table of the documents renders whole,
# as GitHub's Markdown (GFM) reads it.
#
#   check_tables.sh [FILE...]   the tables of FILE... (default: README.md,
#                        CONTRIBUTING.md, CHANGELOG.md and docs/*.md);
#                        fails, naming file and line, on
#                        - a row whose cell count differs from its header's
#                          (a viewer drops the cells past the header's, or
#                          shows missing ones empty);
#                        - a delimiter row ("| --- | --- |") whose cell
#                          count differs from its header's (then it is no
#                          table at all);
#                        - a row outside any table: a "| ... |" line right
#                          after a blank line that follows a table (a blank
#                          line ends a table: it cut one in two), or with no
#                          header and delimiter row above it.
#                        Cells split at each "|" but an escaped "\|". A "|"
#                        inside a code span splits the cell too (GFM reads
#                        the row's cells before its code spans): such a row
#                        is reported with that reason; write \| there, which
#                        renders as "|" inside the span. Fenced code blocks
#                        are skipped; a table ends at a blank line or at
#                        the start of another block (HTML such as a
#                        generated region's closing comment, a heading, a
#                        quote, a fence, a list, a rule).
#   check_tables.sh --self-test  the check on made-up samples: a clean one
#                        must pass, and each kind of broken table must fail
#
# Exit status 0 when every table is whole, 1 with one line per problem on
# stderr; the last line on stdout counts the tables and rows read.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)

# check_files FILE...: the check itself (POSIX awk: mawk or gawk).
check_files() {
    awk '
    function blank(s) { return s ~ /^[ \t]*$/ }
    # The fence a line opens ("```", "~~~~"...), or "".
    function fence_of(s,    t) {
        t = s
        sub(/^ ? ? ?/, "", t)
        if (t !~ /^(```|~~~)/) return ""
        sub(/[^`~].*$/, "", t)
        return t
    }
    # cells(s, aware): the cell count of row s. aware: a "|" inside a code
    # span does not split, as its writer meant it (GFM splits there).
    function cells(s, aware,    n, i, c, len, run, j, k, found) {
        sub(/^[ \t]+/, "", s)
        sub(/[ \t]+$/, "", s)
        len = length(s)
        n = 1
        for (i = 1; i <= len; i++) {
            c = substr(s, i, 1)
            if (c == "\\") { i++; continue }
            if (c == "`" && aware) {
                run = 1
                while (substr(s, i + run, 1) == "`") run++
                found = 0 # the end of the closing run of as many backticks
                for (j = i + run; j <= len; j++) {
                    if (substr(s, j, 1) != "`") continue
                    k = 1
                    while (substr(s, j + k, 1) == "`") k++
                    if (k == run) { found = j + k - 1; break }
                    j += k - 1
                }
                i = found ? found : i + run - 1
                continue
            }
            if (c != "|" || i == 1 || i == len) continue
            n++
        }
        return n
    }
    function has_pipe(s,    t) {
        t = s
        gsub(/\\./, "", t)
        return index(t, "|") > 0
    }
    function is_delim(s,    t) {
        if (!has_pipe(s)) return 0
        t = s
        gsub(/[ \t]/, "", t)
        sub(/^\|/, "", t)
        sub(/\|$/, "", t)
        return t ~ /^:?-+:?(\|:?-+:?)*$/
    }
    function is_row(s) { return s ~ /^ ? ? ?\|/ }
    # 1 when s ends a table without being a row of it: a blank line, or
    # the start of another block (a fence, a quote, a heading, HTML such
    # as the <!-- /clidoc --> of a generated region, a rule, a list).
    function ends_table(s) {
        return blank(s) || fence_of(s) != "" ||
            s ~ /^ ? ? ?(>|#+( |$)|<[A-Za-z!\/?]|[-*+] |(\*[ \t]*){3,}$|(-[ \t]*){3,}$|(_[ \t]*){3,}$)/
    }
    function say(file, at, msg) {
        printf "%s:%d: %s\n", file, at, msg > "/dev/stderr"
        bad = 1
    }
    # row(file, at, s, head_n, head_at): one row of a table.
    function row(file, at, s, head_n, head_at,    n) {
        rows++
        n = cells(s, 0)
        if (n == head_n) return
        if (cells(s, 1) == head_n)
            say(file, at, "a row of " n " cells under a header of " head_n \
                " (line " head_at "): a \"|\" inside a code span splits " \
                "the cell in GitHub Markdown; write \\| there")
        else
            say(file, at, "a row of " n " cells under a header of " head_n \
                " (line " head_at ")")
    }
    function check(file, nl,    i, j, fence, f, head_n, head_at, last_end, n) {
        fence = ""
        last_end = -1
        for (i = 1; i <= nl; i++) {
            if (fence != "") {
                f = fence_of(L[i])
                if (f != "" && substr(f, 1, 1) == substr(fence, 1, 1) &&
                    length(f) >= length(fence) && L[i] ~ /^ ? ? ?(`+|~+)[ \t]*$/)
                    fence = ""
                continue
            }
            if ((f = fence_of(L[i])) != "") { fence = f; continue }
            if (!blank(L[i]) && has_pipe(L[i]) && i < nl && is_delim(L[i + 1])) {
                tables++
                head_n = cells(L[i], 0)
                head_at = i
                n = cells(L[i + 1], 0)
                if (n != head_n)
                    say(file, i + 1, "the delimiter row has " n " cells, " \
                        "its header (line " i ") " head_n ": this is no table")
                for (j = i + 2; j <= nl && !ends_table(L[j]); j++)
                    row(file, j, L[j], head_n, head_at)
                last_end = j - 1
                i = j - 1
                continue
            }
            if (!is_row(L[i])) continue
            if (i >= 2 && blank(L[i - 1]) && last_end == i - 2) {
                say(file, i, "a row outside any table: the blank line " \
                    (i - 1) " cuts the table at line " head_at " in two")
                # the rest of the cut part, read as rows of that table
                for (j = i; j <= nl && !ends_table(L[j]); j++)
                    row(file, j, L[j], head_n, head_at)
                last_end = j - 1
                i = j - 1
                continue
            }
            say(file, i, "a row outside any table (no header and " \
                "delimiter row above it)")
            for (j = i; j <= nl && !blank(L[j]); j++) ;
            i = j - 1
        }
    }
    FNR == 1 && NR > 1 { check(file, nl); nl = 0 }
    { file = FILENAME; L[++nl] = $0 }
    END {
        if (nl > 0) check(file, nl)
        printf "tables: %d tables, %d rows in %d files%s\n", tables, rows,
            ARGC - 1, bad ? ": some do not render whole (above)" : ", every row whole"
        exit bad
    }
    ' "$@"
}

# expect NAME WANT(0|1) TEXT: one sample.
expect() {
    local name=$1 want=$2 text=$3 got=0 f
    f=$tmp/$(echo "$name" | tr -c 'a-z0-9\n' '_').md
    printf '%s\n' "$text" >"$f"
    check_files "$f" >/dev/null 2>"$f.err" || got=1
    if [[ $got -ne $want ]]; then
        echo "self-test: $name: exit $got, expected $want" >&2
        cat "$f.err" >&2
        return 1
    fi
    if [[ $want -eq 1 ]]; then
        echo "self-test: $name: $(head -n 1 "$f.err" | sed "s|^$tmp/||")"
    else
        echo "self-test: $name: passes"
    fi
}

self_test() {
    local bad=0
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    expect "clean tables" 0 '# t

| a | b |
| --- | :---: |
| `x \| y` | plain \| escaped |
| `` a`b `` | [l](u) |
<!-- the end of a generated region -->

  | indented | in a list |
  | -------- | --------- |
  | one      | two       |

```
| a fenced | block | is | not | read |
|---|
```

a | b
--|--
1 | 2

Text with a | pipe that is no table.' || bad=1
    expect "a header of 4 over rows of 5" 1 '| p | d | r | w |
| --- | --- | --- | --- |
| `url` | x |  | conn | doc |' || bad=1
    expect "a row short of a cell" 1 '| a | b | c |
| --- | --- | --- |
| 1 | 2 |' || bad=1
    expect "a blank line cuts a table" 1 '| a | b |
| --- | --- |
| 1 | 2 |

| 3 | 4 |' || bad=1
    expect "a row with no table" 1 'Some text.

| 1 | 2 |' || bad=1
    expect "a delimiter row of another width" 1 '| a | b |
| --- | --- | --- |
| 1 | 2 |' || bad=1
    expect "a pipe inside a code span" 1 '| a | b |
| --- | --- |
| `x|y` | 2 |' || bad=1
    if ((bad)); then
        echo "self-test: FAILED" >&2
        return 1
    fi
    echo "self-test: all cases behaved"
}

if [[ ${1:-} == --self-test ]]; then
    self_test || exit 1
    exit 0
fi
if (($# == 0)); then
    cd "$root"
    set -- README.md CONTRIBUTING.md CHANGELOG.md docs/*.md
fi
check_files "$@"
