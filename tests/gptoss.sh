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
#   4. bad input is one line: a missing tensor, a bad layer_types, MXFP4
#      experts (quantization_config, not held yet);
#   5. gpt-oss-20b's and gpt-oss-120b's published configs (experts as
#      bf16 checkpoints hold them: quantization_config left out) import and
#      emit-c without weights.
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
mkdir "$T/mx"
"$MKCKPT" hf gpt_oss "$T/mx" --config '"quantization_config": {"quant_method": "mxfp4"}' >/dev/null 2>&1
refuse 1 "MXFP4 experts (quantization_config): one line" \
    'config.json: quantization_config.quant_method: "mxfp4" not supported (kiln reads FP8 checkpoints: "fp8", "compressed-tensors"; or a GGUF file)' \
    "$KILN" build "$T/mx" -o "$T/never"

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

[ "$fails" = 0 ]
