#!/bin/sh
# tests/weights16.sh: 16-bit weights (--weight-dtype,
# docs/16-bit-weights.md), one line per check:
#   1. kiln check --weight-dtype bf16 (and f16) on examples: the cc build
#      and the JIT against the reference run on the same rounded weights,
#      within the default tolerance, the table saying they were rounded;
#   2. the program holds them so: `bf16` buffers in the loop IR, the
#      kernels' bytes halved, rt_gemm_bf16 and widening loads in the C;
#   3. a Hugging Face folder with BF16 weights (mkckpt --bf16) checked
#      by default (auto: held as the file stores them, copied) and with
#      bf16 (the same), its dump showing bf16 buffers, and with f32
#      (widened);
#   4. bf16 pair products (--machine amx=1: AMX tiles or AVX512-BF16):
#      the gemms over bf16 weights are one call per block of rows, noted
#      in the dump; kiln check says they may round their rows and its
#      tolerance holds, and on a CPU with either its runs round (the pairs
#      part, carried with bf16 weights, ran); KILN_AMX=off computes them
#      exactly (1e-4 holds); with amx=0 nothing is noted;
#   5. a bad --weight-dtype is a usage error.
# KILN and MKCKPT name the binaries.
set -u
cd "$(dirname "$0")/.." || exit 2
KILN=${KILN:-./kiln}
MKCKPT=${MKCKPT:-build/tests/mkckpt}
. tests/lib.sh
scratch w16

# check NAME MODEL ARGS...: kiln check passes and says the weights were rounded.
check() {
    what=$1; shift
    if "$KILN" check "$@" >"$T/out" 2>&1 && grep -q "rounded at load (lossy" "$T/out"; then
        ok "$what"
    else
        bad "$what"; cat "$T/out"
    fi
}

for e in llama2-step mlp qwen3-moe-block gpt2-block; do
    check "check $e --weight-dtype bf16 (cc and JIT)" "examples/$e.json" --weight-dtype bf16
done
check "check llama2-step --weight-dtype f16 (cc and JIT)" examples/llama2-step.json --weight-dtype f16

"$KILN" print examples/mlp.json --weight-dtype bf16 >"$T/bf16.kir" 2>&1
"$KILN" print examples/mlp.json >"$T/f32.kir" 2>&1
if grep -q "^  buf b[0-9]* weight 0 %[0-9]* : f32\[[0-9,]*\] bf16 packed$" "$T/bf16.kir" &&
   ! grep -q bf16 "$T/f32.kir"; then
    ok "print: the weights are bf16 buffers, packed"
else
    bad "print: the weights are bf16 buffers, packed"; cat "$T/bf16.kir"
fi
# the gemm kernels' bytes: about half (weights dominate)
b32=$(grep -o "kernel k0 .*GFLOP, [0-9.]* MB" "$T/f32.kir" | sed 's/.*, \([0-9.]*\) MB/\1/')
b16=$(grep -o "kernel k0 .*GFLOP, [0-9.]* MB" "$T/bf16.kir" | sed 's/.*, \([0-9.]*\) MB/\1/')
if [ -n "$b32" ] && [ -n "$b16" ] && awk "BEGIN { exit !($b16 < 0.6 * $b32) }"; then
    ok "print: k0 moves $b16 MB with bf16 weights, $b32 MB with f32"
else
    bad "print: k0's bytes with bf16 weights ($b16 MB) are not about half of f32's ($b32 MB)"
fi

if "$KILN" emit-c examples/llama2-step.json --weight-dtype bf16 -o "$T/l.c" 2>"$T/err" &&
   grep -q "rt_gemm_bf16(" "$T/l.c" && grep -q "= rt_bf16_f32(b[0-9]*\[" "$T/l.c" &&
   grep -q "RT_BF16, NULL, [0-9]*, NULL, 0, 0, NULL}," "$T/l.c"; then
    ok "emit-c: rt_gemm_bf16 calls, widening loads, weights declared RT_BF16"
else
    bad "emit-c: rt_gemm_bf16 calls, widening loads, weights declared RT_BF16"; cat "$T/err"
fi

# copied NAME MODEL ARGS...: kiln check passes, its weights copied as stored.
copied() {
    what=$1; shift
    if "$KILN" check "$@" >"$T/out" 2>&1 && grep -q "as the file stores them (lossless)" "$T/out" &&
       ! grep -q "rounded" "$T/out"; then
        ok "$what"
    else
        bad "$what"; cat "$T/out"
    fi
}

if "$MKCKPT" hf llama "$T/hf" --bf16 >"$T/out" 2>&1; then
    copied "a BF16 llama folder by default (auto): held bf16, copied" "$T/hf" --tolerance 1e-5
    copied "a BF16 llama folder, --weight-dtype bf16: the same" "$T/hf" --weight-dtype bf16 \
        --tolerance 1e-5
    if "$KILN" print "$T/hf" 2>&1 | grep -q "^  buf b[0-9]* weight [0-9]* %[0-9]* : f32\[[0-9,]*\] bf16"; then
        ok "a BF16 llama folder's program holds bf16 weight buffers"
    else
        bad "a BF16 llama folder's program holds bf16 weight buffers"
    fi
    if "$KILN" check "$T/hf" --weight-dtype f32 >"$T/out" 2>&1 && ! grep -q "held as" "$T/out"; then
        ok "a BF16 llama folder, --weight-dtype f32 (widened exactly)"
    else
        bad "a BF16 llama folder, --weight-dtype f32 (widened exactly)"; cat "$T/out"
    fi
else
    bad "mkckpt hf llama --bf16"; cat "$T/out"
fi

"$KILN" print examples/mlp.json --weight-dtype bf16 --machine amx=1 >"$T/amx.kir" 2>&1
"$KILN" print examples/mlp.json --weight-dtype bf16 --machine amx=0 >"$T/noamx.kir" 2>&1
if grep -q "calls of gemm on 40 x 32 blocks, AMX tiles or AVX512-BF16 where the program runs on them" "$T/amx.kir" &&
   ! grep -q "AMX" "$T/noamx.kir"; then
    ok "print --machine amx=1: the bf16 gemms are one call per block of 40 rows, on AMX tiles"
else
    bad "print --machine amx=1: the bf16 gemms are one call per block of 40 rows, on AMX tiles"
    grep "tile:" "$T/amx.kir"
fi
if "$KILN" check examples/mlp.json --weight-dtype bf16 --machine amx=1 >"$T/amx.out" 2>&1 &&
   grep -q "^gemms: 2 calls on bf16 weights of 16 rows or more, on AMX tiles or AVX512-BF16" \
       "$T/amx.out" && grep -q "tolerance 0.01 " "$T/amx.out"; then
    ok "check --machine amx=1: the table says the rows may be rounded; tolerance 1e-2 holds"
else
    bad "check --machine amx=1: the table says the rows may be rounded; tolerance 1e-2 holds"
    cat "$T/amx.out"
fi
# The pairs part is carried and installed: on a CPU with either, the cc
# build's and the JIT's rows are rounded to bf16, an error far above the
# exact sums' (about 1e-7 relative).
if grep -qw -e avx512_bf16 -e amx_bf16 /proc/cpuinfo; then
    if "$KILN" emit-c examples/mlp.json --weight-dtype bf16 | grep -q "Runtime parts: core pairs\." &&
       awk '$1 == "down" && $4 > 1e-4 && $6 > 1e-4 {n++} END {exit n != 1}' "$T/amx.out"; then
        ok "the pairs part: carried with bf16 weights, the cc and JIT runs on pair products"
    else
        bad "the pairs part: carried with bf16 weights, the cc and JIT runs on pair products"
        cat "$T/amx.out"
    fi
else
    echo "skip  the pairs part's run: this CPU has neither AVX512-BF16 nor AMX-BF16"
fi
if KILN_AMX=off "$KILN" check examples/mlp.json --weight-dtype bf16 --machine amx=1 \
       --tolerance 1e-4 >"$T/out" 2>&1; then
    ok "check --machine amx=1 with KILN_AMX=off: exact sums, 1e-4 holds"
else
    bad "check --machine amx=1 with KILN_AMX=off: exact sums, 1e-4 holds"; cat "$T/out"
fi

if "$KILN" build examples/mlp.json --weight-dtype f64 -o "$T/x" >"$T/out" 2>&1; then
    bad "--weight-dtype f64 accepted"
elif [ $? = 2 ] && grep -q "weight-dtype takes auto, f32, bf16, f16, q8_0" "$T/out" && [ ! -e "$T/x" ]; then
    ok "--weight-dtype f64: usage error, nothing written"
else
    bad "--weight-dtype f64: not a usage error"; cat "$T/out"
fi

[ "$fails" = 0 ] && echo "weights16: ok" || echo "weights16: $fails failed"
[ "$fails" = 0 ]
