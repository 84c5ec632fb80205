#!/bin/sh
# tests/gguf.sh: GGUF files as models, through the command line. For each
# architecture $MKCKPT writes a Hugging Face folder and the GGUF file
# llama.cpp's converter makes of it (tests/import/ckpt_gguf.c: the same
# random weights; q and k permuted for llama, Gemma's norms as 1 + w,
# experts stacked); `kiln check FILE.gguf` passes, and the GGUF's greedy
# tokens are the folder's, token for token: the layouts and conventions
# are read right (tests/unit/test_import_gguf.c compares their logits with
# the hand-written reference). Then: `kiln import gguf`, a built program
# that remembers its GGUF, quantized files whose blocks are held as stored
# (dump, check) and decode as the folder quantized at load, the same file
# held wider (--weight-dtype f32: its blocks widened), and bad files, one
# line each.
set -u
cd "$(dirname "$0")/.." || exit 2
KILN=${KILN:-./kiln}
MKCKPT=${MKCKPT:-build/tests/mkckpt}
. tests/lib.sh
scratch gguf

GEN="generate --tokens 1,5,9,13 -n 8 --temperature 0"

# same WHAT A B: files A and B hold the same (non-empty) tokens
same() {
    if [ -s "$2" ] && cmp -s "$2" "$3"; then ok "$1: $(cat "$2")"; else
        bad "$1"; echo "      $(cat "$2" 2>/dev/null) vs $(cat "$3" 2>/dev/null)"; fi
}

# greedy WHAT MODEL OUT [OPTION...]: MODEL's tokens into OUT
greedy() {
    what=$1 model=$2 out=$3
    shift 3
    # shellcheck disable=SC2086
    if ! "$KILN" run "$model" "$@" $GEN >"$out" 2>"$T/err"; then
        bad "$what"; sed 's/^/      /' "$T/err"; : >"$out"
    fi
}

# ---- every architecture, as the folder it came from ---------------------------------
# name, model_type, mkckpt options (the folder's and the file's)
while read -r name type opts; do
    d=$T/$name
    # shellcheck disable=SC2086
    run "$name: mkckpt hf and gguf $type $opts" sh -c "'$MKCKPT' hf $type '$d' $opts &&
        '$MKCKPT' gguf $type '$d.gguf' $opts"
    run "  check the GGUF" "$KILN" check "$d.gguf" --no-cc
    greedy "  the folder's tokens" "$d" "$d.hf.tok"
    greedy "  the GGUF's tokens" "$d.gguf" "$d.gguf.tok"
    same "  greedy: GGUF = folder" "$d.hf.tok" "$d.gguf.tok"
done <<EOF
llama llama
llama3 llama --llama3-rope
mistral mistral
mixtral mixtral
qwen2 qwen2 --untied
qwen3 qwen3 --untied
moe qwen3_moe
phi3 phi3
gemma gemma
gemma2 gemma2 --qpas 32
gemma3 gemma3_text --qpas 32
EOF

# ---- the graph alone, a build that remembers its GGUF ---------------------------------
d=$T/qwen3
run "import gguf -o" "$KILN" import gguf "$d.gguf" -o "$T/q3.json"
grep -q '"blk.1.attn_k_norm.weight"' "$T/q3.json" && ok "  ...llama.cpp's names" ||
    bad "  ...llama.cpp's names"
# shellcheck disable=SC2086
"$KILN" run "$T/q3.json" $GEN --weights "$d.gguf" >"$T/q3json.tok" 2>"$T/err" ||
    { bad "  run the graph with --weights FILE.gguf"; cat "$T/err"; }
same "  greedy: the graph with its GGUF = the GGUF" "$d.gguf.tok" "$T/q3json.tok"
run "build FILE.gguf" "$KILN" build "$d.gguf" -o "$T/q3exe"
# shellcheck disable=SC2086
"$T/q3exe" $GEN >"$T/q3exe.tok" 2>"$T/err" || { bad "  the program"; cat "$T/err"; }
same "  the program, its GGUF remembered: greedy = the GGUF" "$d.gguf.tok" "$T/q3exe.tok"
run "check FILE.gguf (reference, cc, JIT)" "$KILN" check "$T/mixtral.gguf"
refuse 1 "import gguf of a file without its architecture" "key 'general.architecture': missing" \
    sh -c "'$MKCKPT' gguf qwen3 '$T/noarch.gguf' --drop-key general.architecture &&
           '$KILN' import gguf '$T/noarch.gguf' -o '$T/never.json'"

# ---- quantized files: blocks held as stored ---------------------------------------------
d=$T/qwen3
run "qwen3 Q8_0: mkckpt gguf --type q8_0" "$MKCKPT" gguf qwen3 "$T/q8.gguf" --untied --type q8_0
run "  print" "$KILN" print "$T/q8.gguf"
n=$(grep -c "^  buf b[0-9]* weight [0-9]* %[0-9]* : f32\[[0-9,]*\] q8_0$" "$T/out")
[ "$n" = 16 ] && ok "  ...its 16 matrices are q8_0 buffers" || bad "  ...q8_0 buffers: $n, not 16"
run "  emit-c" "$KILN" emit-c "$T/q8.gguf" -o "$T/q8.c"
grep -q "Runtime parts: core gguf attn gen quant pairs\." "$T/q8.c" && grep -q "rt_gemm_q8_0(1, " "$T/q8.c" &&
    ok "  ...the quant part, rt_gemm_q8_0 calls" || bad "  ...the quant part, rt_gemm_q8_0 calls"
run "  check" "$KILN" check "$T/q8.gguf" --no-cc
grep -q "held as q8_0 as the file stores them (lossless)" "$T/out" &&
    ok "  ...held as the file stores them" || bad "  ...held as the file stores them"
greedy "  the folder quantized at load" "$d" "$T/q8hf.tok" --weight-dtype q8_0
greedy "  the GGUF" "$T/q8.gguf" "$T/q8.tok"
same "  greedy: Q8_0 GGUF = folder --weight-dtype q8_0" "$T/q8hf.tok" "$T/q8.tok"
greedy "  the GGUF held as f32 (blocks widened)" "$T/q8.gguf" "$T/q8f32.tok" --weight-dtype f32
[ -s "$T/q8f32.tok" ] && ok "  ...decodes: $(cat "$T/q8f32.tok")" || bad "  ...decodes"
run "  build --weight-dtype f32 (a program that widens the file's blocks)" \
    "$KILN" build "$T/q8.gguf" --weight-dtype f32 -o "$T/q8f32"
# shellcheck disable=SC2086
"$T/q8f32" $GEN >"$T/q8exe.tok" 2>"$T/err" || { bad "  the program"; cat "$T/err"; }
same "  greedy: the built program = kiln run" "$T/q8f32.tok" "$T/q8exe.tok"

b=$T/blocks
run "llama rows of 256, Q4_K: mkckpt" sh -c "'$MKCKPT' hf llama '$b' --shape blocks &&
    '$MKCKPT' gguf llama '$b.gguf' --shape blocks --type q4_k"
greedy "  the folder quantized at load" "$b" "$b.hf.tok" --weight-dtype q4_k
greedy "  the GGUF" "$b.gguf" "$b.tok"
same "  greedy: Q4_K GGUF = folder --weight-dtype q4_k" "$b.hf.tok" "$b.tok"

# ---- bad files ------------------------------------------------------------------------------
refuse 1 "an unknown architecture" "\"falcon\" not supported (kiln: llama, qwen2" \
    sh -c "'$MKCKPT' gguf llama '$T/b1.gguf' --arch falcon && '$KILN' build '$T/b1.gguf' -o '$T/never'"
refuse 1 "a missing key" "b2.gguf: key 'llama.attention.layer_norm_rms_epsilon': missing" \
    sh -c "'$MKCKPT' gguf llama '$T/b2.gguf' --drop-key llama.attention.layer_norm_rms_epsilon &&
           '$KILN' run '$T/b2.gguf'"
refuse 1 "a tensor of the wrong shape" \
    "b3.gguf: 'blk.1.ffn_down.weight': shape [64,48] in the file, the model declares [64,96]" \
    sh -c "'$MKCKPT' gguf llama '$T/b3.gguf' --reshape blk.1.ffn_down.weight=64,48 &&
           '$KILN' import gguf '$T/b3.gguf' -o '$T/never.json'"
refuse 1 "  ...and given as --weights" "'blk.1.ffn_down.weight': shape [64,48] in the file" \
    "$KILN" run "$T/llama.gguf" --weights "$T/b3.gguf"

# A program without the GGUF part (a block's) handed a GGUF: one line, exit 2.
run "a block's program (no GGUF part)" "$KILN" build examples/mlp.json -o "$T/mlp"
refuse 2 "  ...given a GGUF as --weights" \
    "llama.gguf: a GGUF file, which this program cannot read (it has no GGUF part)" \
    "$T/mlp" --weights "$T/llama.gguf"

[ "$fails" = 0 ] && echo "gguf: ok" || echo "gguf: $fails failed"
[ "$fails" = 0 ]
