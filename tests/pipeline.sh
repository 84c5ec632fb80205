#!/bin/sh
# tests/pipeline.sh: the pass pipeline keeps numbers right. For the two
# transformer examples and a model whose weights are stacked and computed
# on (hoist-weights): every loop-level stage within tolerance
# (check --bisect); each pass switched off in turn still correct; and the
# cc build bit-identical with 1 and 2 OpenMP threads. KILN names the binary
# (default ./kiln).
set -u
cd "$(dirname "$0")/.." || exit 2
KILN=${KILN:-./kiln}
T=$(mktemp -d "${TMPDIR:-/tmp}/kiln-pipeline-XXXXXX") || exit 3
trap 'rm -rf "$T"' EXIT
fails=0
ok() { echo "ok    $1"; }
bad() { echo "FAIL  $1"; sed 's/^/      /' "$T/log"; fails=$((fails + 1)); }

for m in examples/llama2-step.json examples/qwen3-moe-block.json tests/models/weights-only.json; do
    "$KILN" check "$m" --bisect >"$T/log" 2>&1 && ok "check --bisect $m" || bad "check --bisect $m"
    for p in simplify canonicalize-memrefs hoist-weights fuse tile parallelize plan-memory; do
        "$KILN" check "$m" --disable-pass "$p" --no-cc >"$T/log" 2>&1 &&
            ok "check $m --disable-pass $p" || bad "check $m --disable-pass $p"
    done
done

for m in examples/llama2-step.json examples/deepseek-r1-block.json; do
    "$KILN" build "$m" -o "$T/exe" >"$T/log" 2>&1 || { bad "build $m"; continue; }
    out=$(grep -o '"outputs": \[[^]]*' "$m" | sed 's/.*\["//; s/".*//')
    OMP_NUM_THREADS=1 "$T/exe" --seed 5 --output "$out=$T/t1.npy" >"$T/log" 2>&1 &&
        OMP_NUM_THREADS=2 "$T/exe" --seed 5 --output "$out=$T/t2.npy" >>"$T/log" 2>&1 &&
        cmp -s "$T/t1.npy" "$T/t2.npy" && ok "$m: 1 and 2 threads bit-identical" ||
        bad "$m: 1 and 2 threads bit-identical"
done
echo "$fails failed"
[ "$fails" = 0 ]
