#!/bin/sh
# tests/gptoss.sh: gpt-oss (model_type gpt_oss) from a Hugging Face folder,
# one line per check:
#   1. mkckpt hf gpt_oss (random weights, bf16/f32 experts) imports to a
#      graph with attention's sinks, rope's yarn scaling, a window on the
#      sliding layer only, and moe's biases and clamped_swiglu;
#   2. kiln check passes (reference vs cc build vs JIT), f32 and BF16;
#   3. greedy tokens equal the reference interpreter's (refgen) through
#      the JIT and a cc build, prefill chunks of 4 and decode steps past
#      the window of 4 rows;
#   4. bad input is one line: a missing tensor, a bad layer_types;
#   5. MXFP4 experts as the Hub's openai/gpt-oss-20b holds them (mkckpt
#      --mxfp4 blocks: NAME_blocks and NAME_scales, quantization_config
#      mxfp4) are held as mxfp4 as stored, read by qgemm (gate and up too,
#      views of every other row), and kiln check passes; greedy tokens
#      (cc, JIT, and held as f32: widened at load) equal the reference
#      interpreter's on the same model with its experts' values in the
#      bf16 checkpoints' form (mkckpt --mxfp4 values, f32); bad blocks or
#      scales (shape, dtype, blocks count) are one line naming the tensor;
#   6. gpt-oss-20b's and gpt-oss-120b's published configs (experts as
#      bf16 checkpoints hold them: quantization_config left out; 20b's
#      with it too) import and emit-c without weights.
# KILN, MKCKPT and REFGEN name the binaries.
set -u
cd "$(dirname "$0")/.." || exit 2
KILN=${KILN:-./kiln}
MKCKPT=${MKCKPT:-build/tests/mkckpt}
REFGEN=${REFGEN:-build/tests/refgen}
. tests/lib.sh
scratch gptoss

mkdir "$T/hf" "$T/bf16"
run "mkckpt hf gpt_oss" "$MKCKPT" hf gpt_oss "$T/hf"
run "import hf" "$KILN" import hf "$T/hf" -o "$T/m.json"
has() {
    grep -q -- "$2" "$T/m.json" && ok "graph: $1" || bad "graph: $1"
}
has "attention takes the sinks" '"inputs": \["layers.0.q_rot", "layers.0.k_all", "layers.0.v_all", "pos", "model.layers.0.self_attn.sinks"\], "attrs": {"window": 4}}'
has "layer 1 (full_attention) has no window" '"inputs": \["layers.1.q_rot", "layers.1.k_all", "layers.1.v_all", "pos", "model.layers.1.self_attn.sinks"\]}'
has "rope's yarn scaling" '"scaling": "yarn", "factor": 32, "original_max_position_embeddings": 64, "beta_fast": 32, "beta_slow": 1, "truncate": false'
has "moe with biases and the clamped SwiGLU" '"activation": "clamped_swiglu", "alpha": 1.702, "limit": 7}'
has "gate and up de-interleaved" '"name": "layers.0.experts.gate_slice", "op": "slice", "inputs": \["layers.0.experts.gate_up_pairs"\], "attrs": {"axis": 2, "start": 0, "end": 1}}'

run "kiln check (f32 experts)" "$KILN" check "$T/hf"
run "mkckpt hf gpt_oss --bf16" "$MKCKPT" hf gpt_oss "$T/bf16" --bf16
run "kiln check (BF16 folder)" "$KILN" check "$T/bf16"

W=$T/hf/model.safetensors
P=5,6,7,8,9,10,11,12,13,14,15
if "$REFGEN" "$T/m.json" "$W" --tokens $P -n 14 >"$T/want" 2>"$T/err"; then
    ok "refgen: $(wc -w <"$T/want") greedy tokens of the reference"
else
    bad "refgen"; cat "$T/err"
fi
same "kiln run --chunk 4 greedy = reference" "$T/want" \
    "$KILN" run "$T/hf" --chunk 4 generate --tokens $P -n 14 --temperature 0
run "build --chunk 4" "$KILN" build "$T/hf" -o "$T/exe" --chunk 4
same "cc build greedy = reference" "$T/want" \
    "$T/exe" generate --tokens $P -n 14 --temperature 0
run "build --chunk 1 (decode steps only)" "$KILN" build "$T/hf" -o "$T/exe1" --chunk 1
same "cc build, one token a call, greedy = reference" "$T/want" \
    "$T/exe1" generate --tokens $P -n 14 --temperature 0
"$T/exe" generate --prompt "the cat sat on the mat" -n 8 >"$T/out" 2>"$T/err" &&
    ok "generate --prompt: the folder's tokenizer" || { bad "generate --prompt"; cat "$T/err"; }

mkdir "$T/three"
"$MKCKPT" hf gpt_oss "$T/three" --config '"num_hidden_layers": 3, "layer_types": ["sliding_attention", "full_attention", "sliding_attention"]' >/dev/null 2>&1
refuse 1 "a tensor missing from the weights: one line naming it" \
    "model.layers.2." "$KILN" check "$T/three"
mkdir "$T/kinds"
"$MKCKPT" hf gpt_oss "$T/kinds" --config '"layer_types": ["sliding_attention", "local"]' >/dev/null 2>&1
refuse 1 "a bad layer_types: one line" \
    'config.json: layer_types[1]: must be "full_attention" or "sliding_attention", got "local"' \
    "$KILN" import hf "$T/kinds" -o "$T/never.json"

# MXFP4 experts: the Hub's layout, against the same model's values.
mkdir "$T/mx" "$T/mxv"
run "mkckpt hf gpt_oss --mxfp4 blocks" "$MKCKPT" hf gpt_oss "$T/mx" --mxfp4 blocks
run "mkckpt hf gpt_oss --mxfp4 values" "$MKCKPT" hf gpt_oss "$T/mxv" --mxfp4 values
run "import hf (MXFP4)" "$KILN" import hf "$T/mx" -o "$T/mx.json"
grep -q '"name": "model.layers.0.mlp.experts.gate_up_proj", "shape": \[4, 64, 64\]}' "$T/mx.json" &&
    grep -q '"name": "model.layers.0.mlp.experts.down_proj", "shape": \[4, 64, 32\]}' "$T/mx.json" &&
    ! grep -q 'experts.gate_up_t' "$T/mx.json" &&
    ok "graph: MXFP4 experts declared [E, out, in], not turned" || bad "graph: MXFP4 experts' shapes"
if "$KILN" check "$T/mx" >"$T/out" 2>"$T/err" &&
   grep -q "4 of 37 held as mxfp4 as the file stores them (lossless)" "$T/out"; then
    ok "kiln check (MXFP4 experts held as stored)"
else
    bad "kiln check (MXFP4)"; cat "$T/out" "$T/err"
fi
"$KILN" dump "$T/mx" --after tile >"$T/tile" 2>&1
if grep -q "weight 13 %15 : f32\[4,64,64\] mxfp4" "$T/tile" &&
   grep -q "f32\[4,32,64\] strides \[4096,128,1\] offset 64 of b15" "$T/tile" &&
   [ "$(grep -c 'call qgemm' "$T/tile")" = 6 ]; then
    ok "gate, up and down read by qgemm as stored (views of every other row for gate and up)"
else
    bad "qgemm on the MXFP4 experts"; grep -i "qgemm\|kept as loops\|mxfp4" "$T/tile" | head
fi
if "$KILN" import hf "$T/mxv" -o "$T/mxv.json" 2>"$T/err" &&
   "$REFGEN" "$T/mxv.json" "$T/mxv/model.safetensors" --tokens $P -n 14 >"$T/mxwant" 2>"$T/err"; then
    ok "refgen on the experts' MXFP4 values (f32): $(wc -w <"$T/mxwant") greedy tokens"
else
    bad "refgen (MXFP4 values)"; cat "$T/err"
fi
same "MXFP4: kiln run --chunk 4 greedy = reference on the values" "$T/mxwant" \
    "$KILN" run "$T/mx" --chunk 4 generate --tokens $P -n 14 --temperature 0
run "build MXFP4 --chunk 4" "$KILN" build "$T/mx" -o "$T/mxexe" --chunk 4
same "MXFP4: cc build greedy = reference on the values" "$T/mxwant" \
    "$T/mxexe" generate --tokens $P -n 14 --temperature 0
same "MXFP4 held as f32 (--weight-dtype f32: widened at load) greedy = reference" "$T/mxwant" \
    "$KILN" run "$T/mx" --weight-dtype f32 --chunk 4 generate --tokens $P -n 14 --temperature 0
# bad files: the header's text edited in place (sed script), the
# header's and the data's lengths kept
bad_mx() {
    what=$1 script=$2 text=$3
    rm -rf "$T/mxbad"
    cp -r "$T/mx" "$T/mxbad"
    LC_ALL=C sed -i "$script" "$T/mxbad/model.safetensors"
    refuse 1 "$what: one line naming the tensor" "$text" "$KILN" check "$T/mxbad"
}
S=model.layers.0.mlp.experts.down_proj
B="\"${S}_blocks\":{\"dtype\":" C="\"${S}_scales\":{\"dtype\":"
bad_mx "MXFP4 scales of a wrong shape" "s/$C\"U8\",\"shape\":\\[4,64,1\\]/$C\"U8\",\"shape\":[4,32,2]/" \
    "'${S}_scales': U8 [4,32,2], for '${S}_blocks' [4,64,1,16] kiln reads [4,64,1] (U8)"
bad_mx "MXFP4 scales of a wrong dtype" "s/$C\"U8\",\"shape\":\\[4,64,1\\]/$C\"F16\",\"shape\":[128,1]/" \
    "'${S}_scales': not U8 [128,1], for '${S}_blocks' [4,64,1,16] kiln reads [4,64,1] (U8)"
bad_mx "MXFP4 blocks of a wrong dtype" "s/$B\"U8\",\"shape\":\\[4,64,1,16\\]/$B\"F16\",\"shape\":[4,64,1,8]/" \
    "'${S}_blocks': not U8 [4,64,1,8], kiln reads MXFP4 blocks as U8 [..., cols / 32, 16]"
bad_mx "MXFP4 blocks not of 16 bytes" "s/$B\"U8\",\"shape\":\\[4,64,1,16\\]/$B\"U8\",\"shape\":[4,128,1,8]/" \
    "'${S}_blocks': U8 [4,128,1,8], kiln reads MXFP4 blocks as U8 [..., cols / 32, 16]"
bad_mx "MXFP4 blocks that do not count the weight's inputs" \
    "s/$B\"U8\",\"shape\":\\[4,64,1,16\\]/$B\"U8\",\"shape\":[4,32,2,16]/; s/$C\"U8\",\"shape\":\\[4,64,1\\]/$C\"U8\",\"shape\":[4,32,2]/" \
    "'${S}': shape [4,32,64] in the file, the model declares [4,64,32]"

# The published configs (openai/gpt-oss-20b, -120b), quantization_config
# left out as the bf16 conversions of them have it: no weights, import
# and emit-c.
oss_config() {
    layers=$1 experts=$2
    printf '{"architectures": ["GptOssForCausalLM"], "attention_bias": true, "attention_dropout": 0.0, '
    printf '"eos_token_id": 200002, "experts_per_token": 4, "head_dim": 64, "hidden_act": "silu", '
    printf '"hidden_size": 2880, "initial_context_length": 4096, "initializer_range": 0.02, '
    printf '"intermediate_size": 2880, "layer_types": ['
    l=0
    while [ $l -lt "$layers" ]; do
        [ $l -gt 0 ] && printf ', '
        [ $((l % 2)) = 0 ] && printf '"sliding_attention"' || printf '"full_attention"'
        l=$((l + 1))
    done
    printf '], "max_position_embeddings": 131072, "model_type": "gpt_oss", '
    printf '"num_attention_heads": 64, "num_experts_per_tok": 4, "num_hidden_layers": %d, ' "$layers"
    printf '"num_key_value_heads": 8, "num_local_experts": %d, "output_router_logits": false, ' "$experts"
    printf '"pad_token_id": 199999, "rms_norm_eps": 1e-05, "rope_scaling": {"beta_fast": 32.0, '
    printf '"beta_slow": 1.0, "factor": 32.0, "original_max_position_embeddings": 4096, '
    printf '"rope_type": "yarn", "truncate": false}, "rope_theta": 150000, '
    printf '"router_aux_loss_coef": 0.9, "sliding_window": 128, "swiglu_limit": 7.0, '
    printf '"tie_word_embeddings": false, "transformers_version": "4.55.0.dev0", '
    printf '"use_cache": true, "vocab_size": 201088}\n'
}
for m in "20b 24 32" "120b 36 128"; do
    set -- $m
    mkdir "$T/oss$1"
    oss_config "$2" "$3" >"$T/oss$1/config.json"
    if "$KILN" import hf "$T/oss$1" -o "$T/oss$1.json" 2>"$T/err" &&
       grep -q '"window": 128' "$T/oss$1.json" &&
       grep -q '"original_max_position_embeddings": 4096, "beta_fast": 32' "$T/oss$1.json" &&
       "$KILN" emit-c "$T/oss$1.json" -o "$T/oss$1.c" 2>>"$T/err"; then
        ok "gpt-oss-$1's config ($2 layers, $3 experts): import and emit-c, no weights"
    else
        bad "gpt-oss-$1's config: import and emit-c"; tail -n 5 "$T/err"
    fi
    rm -f "$T/oss$1.c" "$T/oss$1.json"
done
# gpt-oss-20b's config as the Hub has it: with its quantization_config
mkdir "$T/oss20mx"
oss_config 24 32 | sed 's/"use_cache": true/"quantization_config": {"modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"], "quant_method": "mxfp4"}, "use_cache": true/' >"$T/oss20mx/config.json"
if "$KILN" import hf "$T/oss20mx" -o "$T/oss20mx.json" 2>"$T/err" &&
   grep -q '"name": "model.layers.23.mlp.experts.gate_up_proj", "shape": \[32, 5760, 2880\]}' "$T/oss20mx.json" &&
   "$KILN" emit-c "$T/oss20mx.json" -o "$T/oss20mx.c" 2>>"$T/err"; then
    ok "gpt-oss-20b's config with its quantization_config (mxfp4): import and emit-c, no weights"
else
    bad "gpt-oss-20b's config (mxfp4)"; tail -n 5 "$T/err"
fi
rm -f "$T/oss20mx.c" "$T/oss20mx.json"

[ "$fails" = 0 ]
