#!/bin/sh
# tests/quant.sh: quantized weights (--weight-dtype q8_0 ... q4_k_m, mxfp4,
# docs/quantized-weights.md), one line per check:
#   1. kiln check on examples with each type: the cc build and the JIT
#      against the reference run on the same dequantized weights, within
#      the type's default tolerance, the table saying they were quantized;
#   2. the program holds them so: q8_0 buffers in the loop IR, not
#      packed, read by qgemm calls, the kernels' bytes those of the
#      blocks; rt_gemm_q8_0 calls and element reads in the C, the weights
#      declared RT_Q8_0 and quantized by rt_quantize, the quantized part
#      carried only then; a weight read as [k, j] stays loops;
#   3. a type whose block does not divide a weight's rows falls back
#      (q4_k to q4_0, q6_k to q8_0), noted; q4_k_m mixes q4_k and q6_k as
#      llama.cpp's Q4_K_M does;
#   4. greedy decoding of a quantized build (cc and JIT) equals the
#      reference's on the same dequantized weights, token for token;
#   5. a bad --weight-dtype is a usage error.
# KILN, MKCKPT and REFGEN name the binaries.
set -u
cd "$(dirname "$0")/.." || exit 2
KILN=${KILN:-./kiln}
MKCKPT=${MKCKPT:-build/tests/mkckpt}
REFGEN=${REFGEN:-build/tests/refgen}
. tests/lib.sh
scratch quant

# check NAME MODEL ARGS...: kiln check passes and says the weights were quantized.
check() {
    what=$1; shift
    if "$KILN" check "$@" >"$T/out" 2>&1 && grep -q "quantized at load (lossy" "$T/out"; then
        ok "$what"
    else
        bad "$what"; cat "$T/out"
    fi
}

for t in q8_0 q4_0 q4_k q6_k mxfp4; do
    for e in mlp llama2-step qwen3-moe-block; do
        check "check $e --weight-dtype $t (cc and JIT)" "examples/$e.json" --weight-dtype $t
    done
done
check "check gpt2-block --weight-dtype q8_0: [k, j] weights read as loops" \
    examples/gpt2-block.json --weight-dtype q8_0

"$KILN" print examples/mlp.json --weight-dtype q8_0 >"$T/q8.kir" 2>&1
"$KILN" print examples/mlp.json >"$T/f32.kir" 2>&1
if grep -q "^  buf b[0-9]* weight 0 %[0-9]* : f32\[8960,1536\] q8_0$" "$T/q8.kir" &&
   grep -q "call qgemm(b[0-9]*\[.*\], b[0-9]*\[.*\], b1\[i[0-9]* \* [0-9]* +: [0-9]*, [^]]* +: [0-9]*\])" "$T/q8.kir" &&
   ! grep -q "q8_0\|qgemm" "$T/f32.kir"; then
    ok "print: the weights are q8_0 buffers as stored (not packed), read by qgemm calls"
else
    bad "print: the weights are q8_0 buffers as stored, read by qgemm calls"; cat "$T/q8.kir"
fi
# the gemm kernels' bytes: the weights' 34 bytes a block of 32 against 128
b32=$(grep -o "kernel k0 .*GFLOP, [0-9.]* MB" "$T/f32.kir" | sed 's/.*, \([0-9.]*\) MB/\1/')
bq=$(grep -o "kernel k0 .*GFLOP, [0-9.]* MB" "$T/q8.kir" | sed 's/.*, \([0-9.]*\) MB/\1/')
if [ -n "$b32" ] && [ -n "$bq" ] && awk "BEGIN { exit !($bq < 0.3 * $b32 && $bq > 0.2 * $b32) }"; then
    ok "print: k0 moves $bq MB with q8_0 weights, $b32 MB with f32"
else
    bad "print: k0's bytes with q8_0 weights ($bq MB) are not about 34/128 of f32's ($b32 MB)"
fi

if "$KILN" emit-c examples/llama2-step.json --weight-dtype q8_0 -o "$T/l.c" 2>"$T/err" &&
   grep -q "rt_gemm_q8_0(1, " "$T/l.c" && grep -q "rt_q8_0_at(b[0-9]*, " "$T/l.c" &&
   grep -q "RT_Q8_0, rt_quantize, 0, rt_dequantize, 0, 0, NULL}," "$T/l.c" && grep -q "Runtime parts: core attn quant pairs\." "$T/l.c" &&
   "$KILN" emit-c examples/llama2-step.json -o "$T/f.c" 2>"$T/err" &&
   grep -q "Runtime parts: core attn\." "$T/f.c" && ! grep -q "rt_q8_0_at" "$T/f.c"; then
    ok "emit-c: rt_gemm_q8_0 calls, element reads, RT_Q8_0 weights; the quant part only then"
else
    bad "emit-c: rt_gemm_q8_0 calls, element reads, RT_Q8_0 weights; the quant part only then"
    cat "$T/err"
fi

if "$KILN" emit-c examples/llama2-step.json --weight-dtype mxfp4 -o "$T/m.c" 2>"$T/err" &&
   grep -q "rt_gemm_mxfp4(1, " "$T/m.c" && grep -q "rt_mxfp4_at(b[0-9]*, " "$T/m.c" &&
   grep -q "RT_MXFP4, rt_quantize, 0, rt_dequantize, 0, 0, NULL}," "$T/m.c"; then
    ok "emit-c --weight-dtype mxfp4: rt_gemm_mxfp4 calls, element reads, RT_MXFP4 weights"
else
    bad "emit-c --weight-dtype mxfp4: rt_gemm_mxfp4 calls, element reads, RT_MXFP4 weights"
    cat "$T/err"
fi

# 3. fallbacks and q4_k_m
"$KILN" dump examples/llama2-step.json --weight-dtype q4_k --after lower >"$T/fb.kir" 2>&1
if grep -q "lower: weight %[0-9]* held as q4_0, not q4_k: its rows of 288 are no multiple of q4_k's block of 256" "$T/fb.kir" &&
   grep -q " : f32\[[0-9]*,288\] q4_0$" "$T/fb.kir" && ! grep -q ",288\] q4_k$" "$T/fb.kir" &&
   grep -q " : f32\[288,768\] q4_k$" "$T/fb.kir"; then
    ok "q4_k on rows of 288: held as q4_0, noted; rows of 768 q4_k"
else
    bad "q4_k on rows of 288: held as q4_0, noted"; grep "lower:\|q4_" "$T/fb.kir" | head
fi

# A llama of 8 layers with rows of 256 (llama.cpp's more_bits picks
# layers 0, 3, 6, 7 of 8: i < 1, i >= 7, (i - 1) % 3 == 2).
# store KIR NAME: how weight NAME is held in the printed program KIR.
store() {
    id=$(grep -o "weight %[0-9]* \"$2\"" "$1" | head -1 | sed 's/weight \(%[0-9]*\) .*/\1/')
    s=$(grep "^  buf b[0-9]* weight [0-9]* $id : " "$1" | head -1 | awk '{print $NF}')
    case $s in f32*) echo f32 ;; *) echo "$s" ;; esac
}

mkdir "$T/hf" "$T/tmp"
"$MKCKPT" hf llama "$T/hf/k" --shape blocks >/dev/null 2>"$T/err" ||
    { bad "mkckpt a llama of 8 layers"; cat "$T/err"; }
"$KILN" print "$T/hf/k" --weight-dtype q4_k_m >"$T/km.kir" 2>&1
want=""
for l in 0 1 2 3 4 5 6 7; do
    case $l in 0|3|6|7) s=q6_k ;; *) s=q4_k ;; esac
    want="$want v$l=$s d$l=$s q$l=q4_k"
done
got=""
for l in 0 1 2 3 4 5 6 7; do
    for p in v:self_attn.v_proj d:mlp.down_proj q:self_attn.q_proj; do
        got="$got ${p%%:*}$l=$(store "$T/km.kir" "model.layers.$l.${p#*:}.weight")"
    done
done
if [ "$got" = "$want" ] &&
   [ "$(store "$T/km.kir" lm_head.weight)" = q6_k ]; then
    ok "q4_k_m: q6_k for lm_head and for v_proj and down_proj of layers 0, 3, 6, 7 of 8; q4_k else"
else
    bad "q4_k_m: the mix is not llama.cpp's Q4_K_M"; echo "      want:$want"; echo "      got: $got"
fi

# 4. greedy decoding against the reference on the dequantized weights
"$KILN" import hf "$T/hf/k" -o "$T/k.json" 2>/dev/null
W="$T/hf/k/model.safetensors"
for t in q8_0 q4_k_m; do
    if "$REFGEN" "$T/k.json" "$W" --tokens 5,6,7,8,9 -n 16 --weight-dtype $t >"$T/$t.want" 2>"$T/err" &&
       TMPDIR="$T/tmp" "$KILN" build "$T/hf/k" --weight-dtype $t -o "$T/k-$t" 2>"$T/err" &&
       "$T/k-$t" generate --tokens 5,6,7,8,9 -n 16 --temperature 0 >"$T/$t.got" 2>"$T/err" &&
       cmp -s "$T/$t.want" "$T/$t.got"; then
        ok "$t: cc build greedy = reference on the dequantized weights (16 tokens)"
    else
        bad "$t: cc build greedy = reference on the dequantized weights"
        echo "      want: $(cat "$T/$t.want")"; echo "      got:  $(cat "$T/$t.got" 2>/dev/null)"
        tail -n 3 "$T/err"
    fi
    if "$KILN" run "$T/hf/k" --weight-dtype $t generate --tokens 5,6,7,8,9 -n 16 --temperature 0 \
           >"$T/$t.jit" 2>"$T/err" && cmp -s "$T/$t.want" "$T/$t.jit"; then
        ok "$t: kiln run greedy = reference on the dequantized weights"
    else
        bad "$t: kiln run greedy = reference"; tail -n 3 "$T/err"
    fi
done
# the builds (the first of a run compiles the quantized part) leave
# nothing in their $TMPDIR, the part's rt_quant.c and .o included
if [ -z "$(ls -A "$T/tmp")" ]; then
    ok "kiln build with quantized weights leaves no temporary"
else
    bad "kiln build with quantized weights left temporaries:"; ls -AR "$T/tmp"
fi

# 5. misuse
"$KILN" check examples/mlp.json --weight-dtype q5_1 >"$T/out" 2>&1
rc=$?
if [ $rc -eq 2 ] && grep -q "q8_0, q4_0, q4_k, q6_k, q4_k_m, f8_e4m3 or mxfp4, got 'q5_1'" "$T/out"; then
    ok "--weight-dtype q5_1: a usage error naming the types"
else
    bad "--weight-dtype q5_1: exit $rc"; cat "$T/out"
fi
[ "$fails" = 0 ] && echo "quant: ok" || echo "quant: $fails failed"
[ "$fails" = 0 ]
