#!/bin/sh
# tests/run.sh: every test `make test` runs, with one line per test.
#   1. the cmocka unit tests given as arguments;
#   2. the command-line contract (tests/cli.sh), the bad-input corpus
#      (tests/bad.sh), hostile names (tests/names.sh), the pass pipeline's
#      numbers (tests/pipeline.sh), the golden pass tests (tests/golden.sh),
#      checkpoints imported (tests/import.sh, with $MKCKPT), a decoder's
#      shape variants and generation (tests/generate.sh, with $REFGEN),
#      16-bit weights (tests/weights16.sh, with $MKCKPT);
#   3. `kiln check` (reference vs cc build vs JIT) on every op model under
#      tests/models and every example, two at a time.
set -u
cd "$(dirname "$0")/.." || exit 2
failed=0
log=$(mktemp -d "${TMPDIR:-/tmp}/kiln-test-XXXXXX") || exit 3
trap 'rm -rf "$log"' EXIT
# kiln's caches (builds, kiln machine's figures) of this run only: the
# user's are neither read nor written, and no test depends on them.
export XDG_CACHE_HOME="$log/cache"

for t in "$@"; do
    name=$(basename "$t")
    if "$t" >"$log/$name.out" 2>&1; then
        echo "ok    unit $name ($(grep -c '\[       OK \]' "$log/$name.out") tests)"
    else
        echo "FAIL  unit $name"; cat "$log/$name.out"; failed=1
    fi
done

if sh tests/cli.sh >"$log/cli.out" 2>&1; then
    echo "ok    cli ($(grep -c '^ok' "$log/cli.out") checks)"
else
    echo "FAIL  cli"; cat "$log/cli.out"; failed=1
fi

if sh tests/bad.sh >"$log/bad.out" 2>&1; then
    echo "ok    bad ($(grep -c '^ok' "$log/bad.out") bad inputs, each one line and nothing written)"
else
    echo "FAIL  bad"; grep -v '^ok' "$log/bad.out"; failed=1
fi

if sh tests/names.sh >"$log/names.out" 2>&1; then
    echo "ok    names ($(grep -c '^ok' "$log/names.out") checks: hostile names are data, never code)"
else
    echo "FAIL  names"; cat "$log/names.out"; failed=1
fi

if sh tests/pipeline.sh >"$log/pipeline.out" 2>&1; then
    echo "ok    pipeline ($(grep -c '^ok' "$log/pipeline.out") checks: bisect, each pass off, threads)"
else
    echo "FAIL  pipeline"; cat "$log/pipeline.out"; failed=1
fi

if sh tests/golden.sh >"$log/golden.out" 2>&1; then
    echo "ok    golden ($(grep -c '^ok' "$log/golden.out") cases)"
else
    echo "FAIL  golden"; grep -v '^ok' "$log/golden.out"; failed=1
fi

if sh tests/import.sh >"$log/import.out" 2>&1; then
    echo "ok    import ($(grep -c '^ok' "$log/import.out") checks: checkpoints imported, checked, built, run, refused)"
else
    echo "FAIL  import"; grep -v '^ok' "$log/import.out"; failed=1
fi

if sh tests/generate.sh >"$log/generate.out" 2>&1; then
    echo "ok    generate ($(grep -c '^ok' "$log/generate.out") checks: prefill and decode variants, greedy = reference, sampling, tokenizer)"
else
    echo "FAIL  generate"; grep -v '^ok' "$log/generate.out"; failed=1
fi

if sh tests/weights16.sh >"$log/weights16.out" 2>&1; then
    echo "ok    weights16 ($(grep -c '^ok' "$log/weights16.out") checks: --weight-dtype bf16/f16 checked, held 16-bit, BF16 files copied)"
else
    echo "FAIL  weights16"; grep -v '^ok' "$log/weights16.out"; failed=1
fi

ls tests/models/*.json examples/*.json |
    xargs -P 2 -n 1 sh -c 'sh tests/check-one.sh "$0" "'"$log"'"' >"$log/checks" 2>&1 || failed=1
cat "$log/checks"

if [ "$failed" = 0 ]; then echo "all tests passed"; else echo "SOME TESTS FAILED"; fi
exit "$failed"
