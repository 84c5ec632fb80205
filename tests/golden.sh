#!/bin/sh
# tests/golden.sh: golden pass tests (ir/KIR.md, "Golden pass tests").
#
# A case is one file, tests/passes/PASS/CASE.kir:
#     # passes: lower               the passes to run, comma-separated
#     # what the case shows         (any further '#' lines: description)
#     # >>> input
#     graph ...                     the IR the passes start from
#     # >>> expect
#     graph ...                     what `kiln opt INPUT --passes lower` prints
#
#   sh tests/golden.sh                  run every case
#   sh tests/golden.sh fuse lower/mlp   the cases of a pass folder, or one case
#   sh tests/golden.sh -u lower/mlp     rewrite the expect section from what
#                                       kiln prints now (review it in git diff)
# `make golden` and `make golden UPDATE=lower/mlp` call it. kiln opt reads
# the case file without its expect section, so line numbers in its
# messages are the case file's. KILN names the binary (default ./kiln).
# One line per case, "ok" or "FAIL" with a unified diff; exit status 1
# when a case failed, 2 for a bad argument.
set -u
cd "$(dirname "$0")/.." || exit 2
KILN=${KILN:-./kiln}
case $KILN in /*) ;; *) KILN=$PWD/$KILN ;; esac
update=0
if [ "${1:-}" = -u ]; then update=1; shift; fi
T=$(mktemp -d "${TMPDIR:-/tmp}/kiln-golden-XXXXXX") || exit 3
trap 'rm -rf "$T"' EXIT

# The case files named by the arguments (every case without any).
cases() {
    if [ $# = 0 ]; then
        find tests/passes -name '*.kir' | sort
        return
    fi
    for a; do
        a=${a%/}
        if [ -d "tests/passes/$a" ]; then
            find "tests/passes/$a" -name '*.kir' | sort
        elif [ -f "tests/passes/$a.kir" ]; then
            echo "tests/passes/$a.kir"
        else
            echo "golden: no case or pass folder tests/passes/$a" >&2
            return 2
        fi
    done
}

# run FILE NAME: kiln opt on the case's input; its output in $T/NAME.got.
run() {
    passes=$(sed -n 's/^# passes: *//p' "$1" | head -n 1)
    mkdir -p "$T/$(dirname "$2")"
    sed '/^# >>> expect$/,$d' "$1" >"$T/$2.kir"
    sed '1,/^# >>> expect$/d' "$1" >"$T/$2.want"
    (cd "$T" && "$KILN" opt "$2.kir" --passes "$passes") >"$T/$2.got" 2>"$T/$2.err"
}

list=$(cases "$@") || exit 2
failed=0 count=0
for f in $list; do
    name=${f#tests/passes/}
    name=${name%.kir}
    count=$((count + 1))
    if ! grep -q '^# passes:' "$f" || ! grep -q '^# >>> input$' "$f" ||
       ! grep -q '^# >>> expect$' "$f"; then
        echo "FAIL  $name: needs '# passes:', '# >>> input' and '# >>> expect' lines"
        failed=1
    elif ! run "$f" "$name"; then
        echo "FAIL  $name: kiln opt failed"; sed 's/^/      /' "$T/$name.err"; failed=1
    elif [ "$update" = 1 ]; then
        { sed -n '1,/^# >>> expect$/p' "$f"; cat "$T/$name.got"; } >"$T/new" &&
            cp "$T/new" "$f" && echo "updated $name"
    elif cmp -s "$T/$name.want" "$T/$name.got"; then
        echo "ok    $name"
    else
        echo "FAIL  $name"
        diff -u --label "$name (expected)" --label "$name (got)" "$T/$name.want" "$T/$name.got"
        failed=1
    fi
done
[ "$count" = 0 ] && echo "golden: no cases under tests/passes" >&2
exit "$failed"
