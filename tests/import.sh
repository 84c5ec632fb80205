#!/bin/sh
# tests/import.sh: the importers through the command line. Checkpoints
# with random weights come from $MKCKPT (tests/import/mkckpt.c): llama2.c
# files (versions 0 and 1, and stories15M's shape) and Hugging Face
# folders (llama BF16 in shards, qwen2, GPT-2 as the Hub and as
# transformers name it, qwen3_moe). Each is imported and checked by
# `kiln check` with its own weights (reference vs JIT; vs the cc build too
# for one: cc builds take seconds, so two more are built and run);
# folders are given to build, run and check directly; refusals are one
# line, their status, nothing written. The logits' agreement with hand-written
# forward passes is tests/unit/test_import.c's.
#   --big: a stories110M-shaped checkpoint (440 MB) imported, built and
#          run instead (make test-import-big; not part of make test).
set -u
cd "$(dirname "$0")/.." || exit 2
KILN=${KILN:-./kiln}
MKCKPT=${MKCKPT:-build/tests/mkckpt}
. tests/lib.sh
scratch import

if [ "${1:-}" = --big ]; then
    run "mkckpt llama2c stories110M (440 MB)" "$MKCKPT" llama2c "$T/s110.bin" --shape stories110M
    run "import llama2c stories110M" "$KILN" import llama2c "$T/s110.bin" -o "$T/s110.json" \
        --weights-out "$T/s110.safetensors"
    rm -f "$T/s110.bin"
    run "  build" "$KILN" build "$T/s110.json" -o "$T/s110"
    run "  run 3 steps of decode" "$T/s110" --weights "$T/s110.safetensors" --repeat 3
    [ "$fails" = 0 ] && echo "import --big: ok" || echo "import --big: $fails failed"
    [ "$fails" = 0 ]
    exit
fi

# ---- llama2.c ------------------------------------------------------------------
for v in 0 1; do
    b=$T/v$v
    run "llama2.c version $v: mkckpt" "$MKCKPT" llama2c "$b.bin" --version "$v" --unshared
    run "  import llama2c" "$KILN" import llama2c "$b.bin" -o "$b.json" --weights-out "$b.safetensors"
done
run "  check with the converted weights (reference, cc, JIT)" "$KILN" check "$T/v0.json" \
    --weights "$T/v0.safetensors"
run "  check version 1's" "$KILN" check "$T/v1.json" --weights "$T/v1.safetensors" --no-cc
run "  import --tokens 4 --max-seq 16" "$KILN" import llama2c "$T/v0.bin" -o "$T/v0t4.json" \
    --tokens 4 --max-seq 16
run "  check" "$KILN" check "$T/v0t4.json" --weights "$T/v0.safetensors" --no-cc
run "  stdout without -o" "$KILN" import llama2c "$T/v1.bin"
grep -q '"outputs": \["logits"\]' "$T/out" && ok "  ...the graph" || bad "  ...the graph"

b=$T/s15
run "stories15M shape: mkckpt" "$MKCKPT" llama2c "$b.bin" --shape stories15M
run "  import" "$KILN" import llama2c "$b.bin" -o "$b.json" --weights-out "$b.safetensors"
run "  build" "$KILN" build "$b.json" -o "$b"
run "  run a decode step (seeded token and position)" "$b" --weights "$b.safetensors" --seed 5
grep -q "^logits f32\[1,32000\]" "$T/out" && ok "  ...logits f32[1,32000]" || bad "  ...logits f32[1,32000]"

refuse 1 "a truncated checkpoint" "bytes, but a version 0 checkpoint" \
    sh -c "head -c 1000 '$T/v0.bin' >'$T/cut.bin' && '$KILN' import llama2c '$T/cut.bin' \
           -o '$T/never.json' --weights-out '$T/never.safetensors'"
refuse 2 "--weights-out over the checkpoint" "would overwrite the checkpoint" \
    "$KILN" import llama2c "$T/v0.bin" --weights-out "$T/v0.bin"
refuse 3 "a missing checkpoint" "cannot read" "$KILN" import llama2c "$T/none.bin" -o "$T/never.json"

# ---- Hugging Face folders -----------------------------------------------------------
# name, model_type, mkckpt options
while read -r name type opts; do
    d=$T/$name
    # shellcheck disable=SC2086
    run "$name: mkckpt hf $type $opts" "$MKCKPT" hf "$type" "$d" $opts
    run "  import hf" "$KILN" import hf "$d" -o "$d.json"
    run "  check the folder (its own weights)" "$KILN" check "$d" --no-cc
done <<EOF
llama llama --bf16 --shards 3
qwen2 qwen2
gpt2hub gpt2
gpt2tf gpt2 --transformers-names --untied --shards 2
moe qwen3_moe --bf16
qwen3 qwen3 --untied
mistral mistral
mixtral mixtral --bf16
phi3 phi3 --bf16 --shards 2
gemma gemma --untied
gemma2 gemma2 --bf16
gemma3 gemma3_text
EOF
ls "$T/llama/model.safetensors.index.json" >/dev/null 2>&1 && ok "  llama: shards and an index" ||
    bad "  llama: shards and an index"
run "qwen2: check --tokens 4 --max-seq 32" "$KILN" check "$T/qwen2" --tokens 4 --max-seq 32 --no-cc
run "llama: build the folder" "$KILN" build "$T/llama" -o "$T/l"
run "  run it with the index of its shards" "$T/l" --weights "$T/llama/model.safetensors.index.json" \
    --seed 2
run "qwen2: run the folder (JIT)" "$KILN" run "$T/qwen2" --seed 2
run "moe: run the folder --tokens 3" "$KILN" run "$T/moe" --tokens 3 --seed 2

# A folder's weights are checked against its config before it is compiled,
# cached build or not: a file cut short, a tensor of the wrong shape (the
# header's [64,96] made [96,64]: the same bytes), a tensor the config
# declares and the file lacks (a third layer), one the file holds and the
# config does not (lm_head, tied) each fail emit-c, build, run and check
# with the tensor named, and nothing written.
w=$T/wgood
"$MKCKPT" hf llama "$w" >/dev/null
run "weights checked: build a good folder (fills the build cache)" "$KILN" build "$w" -o "$T/wexe"
cp -r "$w" "$T/wcut" && cp -r "$w" "$T/wshape"
head -c 300000 "$w/model.safetensors" >"$T/wcut/model.safetensors"
f=$T/wshape/model.safetensors p='"model.layers.1.mlp.down_proj.weight":{"dtype":"F32","shape":'
at=$(grep -boa "$p" "$f" | cut -d: -f1)
printf '[96,64]' | dd of="$f" bs=1 seek=$((at + ${#p})) conv=notrunc 2>/dev/null
"$MKCKPT" hf llama "$T/wmissing" --config '"num_hidden_layers": 3' >/dev/null
"$MKCKPT" hf llama "$T/wextra" --config '"tie_word_embeddings": true' >/dev/null
while read -r bad said; do
    for cmd in emit-c build run check; do
        case $cmd in emit-c | build) o="-o $T/never" ;; *) o= ;; esac
        # shellcheck disable=SC2086
        refuse 1 "  $bad: $cmd refused" "kiln: $T/w$bad/model.safetensors: $said" \
            "$KILN" "$cmd" "$T/w$bad" $o
    done
done <<EOF
cut 'model.layers.1.mlp.up_proj.weight': data_offsets [279552, 304128] are not inside the data section of 297896 bytes
shape 'model.layers.1.mlp.down_proj.weight': shape [96,64] in the file, the model declares [64,96]
missing weight 'model.layers.2.input_layernorm.weight' is not in the file and has no init
extra 'lm_head.weight': not a weight of the model
EOF
run "  print does not read a folder's weights" "$KILN" print "$T/wcut"

# Qwen3-0.6B's config.json as the Hub has it (no weights): imported, and
# the graph's names and shapes are the checkpoint's.
mkdir "$T/q06"
cat >"$T/q06/config.json" <<'CFG'
{"architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
 "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
 "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
 "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
 "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
 "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
 "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
 "use_cache": true, "use_sliding_window": false, "vocab_size": 151936}
CFG
run "Qwen3-0.6B's config: import" "$KILN" import hf "$T/q06" -o "$T/q06.json" --max-seq 256
grep -q '"model.layers.27.self_attn.k_norm.weight".*128' "$T/q06.json" &&
    grep -q '"model.layers.0.self_attn.q_proj.weight".*\[ *2048, *1024 *\]' "$T/q06.json" &&
    ok "  28 layers, q/k norms of head_dim 128, q_proj [2048, 1024]" ||
    bad "  28 layers, q/k norms of head_dim 128, q_proj [2048, 1024]"
rm -f "$T/q06.json"

# Qwen3-30B-A3B's config.json (48 layers of 128 experts, no weights): the
# graph has 18432 expert copies; import and the whole pipeline must get
# through it (canonicalize-memrefs and hoist-weights once asked every
# kernel about every copy: over 10 minutes; about 3 s now).
mkdir "$T/q3big"
cat >"$T/q3big/config.json" <<'CFG'
{"architectures": ["Qwen3MoeForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
 "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151645, "head_dim": 128,
 "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
 "intermediate_size": 6144, "max_position_embeddings": 40960, "max_window_layers": 48,
 "mlp_only_layers": [], "model_type": "qwen3_moe", "moe_intermediate_size": 768,
 "norm_topk_prob": true, "num_attention_heads": 32, "num_experts": 128,
 "num_experts_per_tok": 8, "num_hidden_layers": 48, "num_key_value_heads": 4,
 "output_router_logits": false, "rms_norm_eps": 1e-06, "rope_scaling": null,
 "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001, "sliding_window": null,
 "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
 "use_cache": true, "use_sliding_window": false, "vocab_size": 151936}
CFG
run "Qwen3-30B-A3B's config: import" "$KILN" import hf "$T/q3big" -o "$T/q3big.json" --max-seq 256
run "  emit-c (decode and prefill variants; 18432 expert copies in the open program)" \
    timeout 300 "$KILN" emit-c "$T/q3big.json" -o "$T/q3big.c"
grep -q "^static const struct kiln_call kiln_open_calls\[18432\]" "$T/q3big.c" &&
    grep -q "^    {NULL, s[0-9]*, 2, 36862},   /\* o18431 " "$T/q3big.c" &&
    ok "  o0-o18431 copy the experts at open, rows of a call table" ||
    bad "  o0-o18431 copy the experts at open, rows of a call table"
rm -f "$T/q3big.c" "$T/q3big.json"

"$MKCKPT" hf llama "$T/scaled" --config '"rope_scaling": {"type": "linear", "factor": 2.0}'
refuse 1 "linear rope_scaling refused by name" \
    'config.json: rope_scaling.type: only "default", "llama3" and "yarn" are supported, got "linear"' \
    "$KILN" import hf "$T/scaled" -o "$T/never.json"
refuse 1 "  ...by build of the folder too" 'rope_scaling.type: only "default", "llama3" and "yarn"' \
    "$KILN" build "$T/scaled" -o "$T/never"

# Mistral-7B-v0.1's config.json (no weights): its sliding window of 4096
# is full attention over a KV cache of 2048 rows (the default S), and the
# attention's window over 8192 rows.
mkdir "$T/m7"
cat >"$T/m7/config.json" <<'CFG'
{"architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2,
 "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
 "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mistral",
 "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
 "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096,
 "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.34.0.dev0",
 "use_cache": true, "vocab_size": 32000}
CFG
run "Mistral-7B-v0.1's config: import" "$KILN" import hf "$T/m7" -o "$T/m7.json"
grep -q '"layers.31.k_cache", "shape": \[2048, 8, 128\]' "$T/m7.json" &&
    ok "  32 layers, a KV cache of 2048 rows of 8 heads of 128" ||
    bad "  32 layers, a KV cache of 2048 rows of 8 heads of 128"
rm -f "$T/m7.json"
run "  --max-seq 8192: its window at work" "$KILN" import hf "$T/m7" --max-seq 8192 -o "$T/m7.json"
grep -q '"layers.31.att", "op": "attention", .*"attrs": {"window": 4096}' "$T/m7.json" &&
    ok "  every layer attends in a window of 4096 rows" ||
    bad "  every layer attends in a window of 4096 rows"
rm -f "$T/m7.json"

# Phi-3-mini-4k-instruct's config.json (no weights): its sliding window of
# 2047 is at work over the default KV cache (2048 rows), not over 2047; q, k, v
# come out of one qkv_proj, gate and up out of one gate_up_proj.
mkdir "$T/phi"
cat >"$T/phi/config.json" <<'CFG'
{"_name_or_path": "Phi-3-mini-4k-instruct", "architectures": ["Phi3ForCausalLM"],
 "attention_bias": false, "attention_dropout": 0.0,
 "auto_map": {"AutoConfig": "configuration_phi3.Phi3Config",
              "AutoModelForCausalLM": "modeling_phi3.Phi3ForCausalLM"},
 "bos_token_id": 1, "embd_pdrop": 0.0, "eos_token_id": 32000, "hidden_act": "silu",
 "hidden_size": 3072, "initializer_range": 0.02, "intermediate_size": 8192,
 "max_position_embeddings": 4096, "model_type": "phi3", "num_attention_heads": 32,
 "num_hidden_layers": 32, "num_key_value_heads": 32, "original_max_position_embeddings": 4096,
 "pad_token_id": 32000, "resid_pdrop": 0.0, "rms_norm_eps": 1e-05, "rope_scaling": null,
 "rope_theta": 10000.0, "sliding_window": 2047, "tie_word_embeddings": false,
 "torch_dtype": "bfloat16", "transformers_version": "4.40.2", "use_cache": true,
 "vocab_size": 32064}
CFG
run "Phi-3-mini-4k's config: import" "$KILN" import hf "$T/phi" -o "$T/phi.json"
grep -q '"layers.0.att", "op": "attention", .*"attrs": {"window": 2047}' "$T/phi.json" &&
    ok "  its window of 2047 rows, over the default 2048" ||
    bad "  its window of 2047 rows, over the default 2048"
run "  import --max-seq 2047: no window at work" "$KILN" import hf "$T/phi" --max-seq 2047 \
    -o "$T/phi.json"
! grep -q '"window"' "$T/phi.json" &&
grep -q '"model.layers.31.self_attn.qkv_proj.weight", "shape": \[9216, 3072\]' "$T/phi.json" &&
    grep -q '"model.layers.31.mlp.gate_up_proj.weight", "shape": \[16384, 3072\]' "$T/phi.json" &&
    ok "  layer 31's qkv_proj [9216, 3072] and gate_up_proj [16384, 3072]" ||
    bad "  layer 31's qkv_proj [9216, 3072] and gate_up_proj [16384, 3072]"
rm -f "$T/phi.json"

# Mixtral-8x7B-v0.1's config.json (no weights): 8 experts in each of 32
# layers, under block_sparse_moe's names, through the whole pipeline.
mkdir "$T/mx"
cat >"$T/mx/config.json" <<'CFG'
{"architectures": ["MixtralForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1,
 "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
 "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mixtral",
 "num_attention_heads": 32, "num_experts_per_tok": 2, "num_hidden_layers": 32,
 "num_key_value_heads": 8, "num_local_experts": 8, "output_router_logits": false,
 "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.02,
 "sliding_window": null, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
 "transformers_version": "4.36.0.dev0", "use_cache": true, "vocab_size": 32000}
CFG
run "Mixtral-8x7B's config: import" "$KILN" import hf "$T/mx" -o "$T/mx.json" --max-seq 256
grep -q '"model.layers.31.block_sparse_moe.experts.7.w2.weight", "shape": \[4096, 14336\]' \
    "$T/mx.json" && ok "  the experts' w2 of layer 31, [4096, 14336]" ||
    bad "  the experts' w2 of layer 31, [4096, 14336]"
run "  emit-c" timeout 300 "$KILN" emit-c "$T/mx.json" -o "$T/mx.c"
rm -f "$T/mx.json" "$T/mx.c"

# Llama-3.2-1B's config.json (no weights): its llama3 rope_scaling becomes
# the rope nodes' attributes.
mkdir "$T/l32"
cat >"$T/l32/config.json" <<'CFG'
{"architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
 "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu",
 "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192,
 "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
 "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
 "pretraining_tp": 1, "rms_norm_eps": 1e-05,
 "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                  "original_max_position_embeddings": 8192, "rope_type": "llama3"},
 "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
 "transformers_version": "4.45.0.dev0", "use_cache": true, "vocab_size": 128256}
CFG
run "Llama-3.2-1B's config: import" "$KILN" import hf "$T/l32" -o "$T/l32.json" --max-seq 256
grep -q '"scaling": "llama3", "factor": 32, "low_freq_factor": 1, "high_freq_factor": 4, "original_max_position_embeddings": 8192' \
    "$T/l32.json" && ok "  its rope nodes scale as Llama 3.1" || bad "  its rope nodes scale as Llama 3.1"
rm -f "$T/l32.json"

# Gemma-2B's config.json (no weights): tied, the embeddings times
# sqrt(2048) as an f32, norms by 1 + w (computed at open), and its
# hidden_activation null is transformers' gelu_pytorch_tanh; "gelu" is erf.
mkdir "$T/gem"
cat >"$T/gem/config.json" <<'CFG'
{"architectures": ["GemmaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
 "bos_token_id": 2, "eos_token_id": 1, "head_dim": 256, "hidden_act": "gelu",
 "hidden_activation": null, "hidden_size": 2048, "initializer_range": 0.02,
 "intermediate_size": 16384, "max_position_embeddings": 8192, "model_type": "gemma",
 "num_attention_heads": 8, "num_hidden_layers": 18, "num_key_value_heads": 1,
 "pad_token_id": 0, "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 10000.0,
 "torch_dtype": "bfloat16", "transformers_version": "4.38.0.dev0", "use_cache": true,
 "vocab_size": 256000}
CFG
run "Gemma-2B's config: import" "$KILN" import hf "$T/gem" -o "$T/gem.json" --max-seq 256
grep -q '"x0_scaled", "op": "mul", "inputs": \["x0", 45.25483322143555\]' "$T/gem.json" &&
    grep -q '"layers.17.h2_scale", "op": "add", "inputs": \["model.layers.17.post_attention_layernorm.weight", 1\]' "$T/gem.json" &&
    grep -q '"layers.17.gate_act", "op": "gelu", "inputs": \["layers.17.gate"\], "attrs": {"approximate": "tanh"}' "$T/gem.json" &&
    ! grep -q lm_head "$T/gem.json" && ok "  scaled embeddings, 1 + w norms, a gelu (tanh) gate, tied" ||
    bad "  scaled embeddings, 1 + w norms, a gelu (tanh) gate, tied"
sed 's/"hidden_activation": null/"hidden_activation": "gelu"/' "$T/gem/config.json" >"$T/gem/c" &&
    mv "$T/gem/c" "$T/gem/config.json"
"$KILN" import hf "$T/gem" -o "$T/gem.json" --max-seq 256 &&
    grep -q '"layers.17.gate_act", "op": "gelu", "inputs": \["layers.17.gate"\], "attrs": {"approximate": "none"}' "$T/gem.json" &&
    ok "  hidden_activation \"gelu\": the erf gelu" || bad "  hidden_activation \"gelu\": the erf gelu"
rm -f "$T/gem.json"

# Gemma-2-2B's config.json (no weights): the scores scaled by
# query_pre_attn_scalar^-1/2 and capped at 50, the logits at 30; norms
# after attention and around the MLP; its sliding window of 4096 is all of
# the default cache's 2048 rows, and at work on every other layer over 8192.
mkdir "$T/gem2"
cat >"$T/gem2/config.json" <<'CFG'
{"architectures": ["Gemma2ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
 "attn_logit_softcapping": 50.0, "bos_token_id": 2, "cache_implementation": "hybrid",
 "eos_token_id": 1, "final_logit_softcapping": 30.0, "head_dim": 256,
 "hidden_act": "gelu_pytorch_tanh", "hidden_activation": "gelu_pytorch_tanh",
 "hidden_size": 2304, "initializer_range": 0.02, "intermediate_size": 9216,
 "max_position_embeddings": 8192, "model_type": "gemma2", "num_attention_heads": 8,
 "num_hidden_layers": 26, "num_key_value_heads": 4, "pad_token_id": 0,
 "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_theta": 10000.0,
 "sliding_window": 4096, "torch_dtype": "float32", "transformers_version": "4.42.4",
 "use_cache": true, "vocab_size": 256000}
CFG
run "Gemma-2-2B's config: import" "$KILN" import hf "$T/gem2" -o "$T/gem2.json"
grep -q '"attrs": {"scale": 0.0625, "softcap": 50}' "$T/gem2.json" &&
    grep -q '"logits", "op": "mul", "inputs": \["logits_tanh", 30\]' "$T/gem2.json" &&
    grep -q '"model.layers.25.post_feedforward_layernorm.weight"' "$T/gem2.json" &&
    ok "  capped scores (scale 1/16) and logits, norms around the MLP" ||
    bad "  capped scores (scale 1/16) and logits, norms around the MLP"
rm -f "$T/gem2.json"
run "  --max-seq 8192: its window at work" "$KILN" import hf "$T/gem2" --max-seq 8192 \
    -o "$T/gem2.json"
grep -q '"layers.24.att", "op": "attention", .*"attrs": {"scale": 0.0625, "softcap": 50, "window": 4096}' \
    "$T/gem2.json" && grep -q '"layers.25.att", "op": "attention", .*"attrs": {"scale": 0.0625, "softcap": 50}' \
    "$T/gem2.json" && ok "  layers 0, 2, ... in a window of 4096 rows, 1, 3, ... not" ||
    bad "  layers 0, 2, ... in a window of 4096 rows, 1, 3, ... not"
rm -f "$T/gem2.json"

# Gemma-3-1B's config.json (no weights): five sliding layers in six, in a
# window of 512 rows with rope at 10000, every sixth global at 1e6; no caps.
mkdir "$T/gem3"
cat >"$T/gem3/config.json" <<'CFG'
{"architectures": ["Gemma3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
 "attn_logit_softcapping": null, "bos_token_id": 2, "cache_implementation": "hybrid",
 "eos_token_id": [1, 106], "final_logit_softcapping": null, "head_dim": 256,
 "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 1152, "initializer_range": 0.02,
 "intermediate_size": 6912, "max_position_embeddings": 32768, "model_type": "gemma3_text",
 "num_attention_heads": 4, "num_hidden_layers": 26, "num_key_value_heads": 1,
 "pad_token_id": 0, "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06,
 "rope_local_base_freq": 10000, "rope_scaling": null, "rope_theta": 1000000,
 "sliding_window": 512, "sliding_window_pattern": 6, "torch_dtype": "bfloat16",
 "transformers_version": "4.50.0.dev0", "use_cache": true, "vocab_size": 262144}
CFG
run "Gemma-3-1B's config: import" "$KILN" import hf "$T/gem3" -o "$T/gem3.json"
grep -q '"layers.4.att", "op": "attention", .*"attrs": {"scale": 0.0625, "window": 512}' "$T/gem3.json" &&
    grep -q '"layers.5.att", "op": "attention", .*"attrs": {"scale": 0.0625}' "$T/gem3.json" &&
    grep -q '"layers.4.q_rot", "op": "rope", .*"attrs": {"theta": 10000, ' "$T/gem3.json" &&
    grep -q '"layers.5.q_rot", "op": "rope", .*"attrs": {"theta": 1000000, ' "$T/gem3.json" &&
    grep -q '"model.layers.25.self_attn.k_norm.weight"' "$T/gem3.json" &&
    ok "  layer 4 in a window of 512 rows at theta 1e4, layer 5 global at 1e6, q/k norms" ||
    bad "  layer 4 in a window of 512 rows at theta 1e4, layer 5 global at 1e6, q/k norms"
rm -f "$T/gem3.json"

# SmolLM2-135M's config.json (no weights): nanotron's is_llama_config and
# rope_interleaved (false) taken; tied, 3 kv heads of 64.
mkdir "$T/smol"
cat >"$T/smol/config.json" <<'CFG'
{"architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
 "bos_token_id": 0, "eos_token_id": 0, "head_dim": 64, "hidden_act": "silu",
 "hidden_size": 576, "initializer_range": 0.041666666666666664, "intermediate_size": 1536,
 "is_llama_config": true, "max_position_embeddings": 8192, "mlp_bias": false,
 "model_type": "llama", "num_attention_heads": 9, "num_hidden_layers": 30,
 "num_key_value_heads": 3, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
 "rope_interleaved": false, "rope_scaling": null, "rope_theta": 100000,
 "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.42.3",
 "use_cache": true, "vocab_size": 49152}
CFG
run "SmolLM2-135M's config: import" "$KILN" import hf "$T/smol" -o "$T/smol.json"
grep -q '"model.layers.29.self_attn.k_proj.weight", "shape": \[192, 576\]' "$T/smol.json" &&
    ! grep -q lm_head "$T/smol.json" && ok "  30 layers, k_proj [192, 576], tied" ||
    bad "  30 layers, k_proj [192, 576], tied"
rm -f "$T/smol.json"
"$MKCKPT" hf llama "$T/deep" --config '"num_hidden_layers": 2000000000'
refuse 1 "a graph that cannot fit refused by name" \
    "config.json: num_hidden_layers: 2000000000 is more than kiln's 1024 layers" \
    "$KILN" import hf "$T/deep" -o "$T/never.json"
# Values of the wrong kind where an object or a list is read: one line,
# never a crash (fuzz_hf found the first; the second is the same fault).
"$MKCKPT" hf gpt_oss "$T/kinds" --config '"layer_types": "sliding_attention"' >/dev/null
refuse 1 "layer_types not a list: one line" \
    'config.json: layer_types: must be a list of 2 layer kinds, got "sliding_attention"' \
    "$KILN" import hf "$T/kinds" -o "$T/never.json"
"$MKCKPT" hf llama "$T/groups" --config '"quantization_config": {"quant_method": "compressed-tensors", "format": "float-quantized"}'
refuse 1 "compressed-tensors without config_groups: one line" \
    'config.json: quantization_config.config_groups: must be an object of groups, got nothing' \
    "$KILN" import hf "$T/groups" -o "$T/never.json"
"$MKCKPT" hf qwen2 "$T/window" \
    --config '"use_sliding_window": true, "sliding_window": 16, "max_window_layers": 1'
run "qwen2 with use_sliding_window: import" "$KILN" import hf "$T/window" -o "$T/window.json"
grep -q '"layers.1.att", "op": "attention", .*"attrs": {"window": 16}' "$T/window.json" &&
    ! grep -q '"layers.0.att", "op": "attention", .*"window"' "$T/window.json" &&
    ok "  layer 1 (from max_window_layers) in a window of 16 rows, layer 0 not" ||
    bad "  layer 1 (from max_window_layers) in a window of 16 rows, layer 0 not"
refuse 2 "--tokens with a model file" "apply to a model folder" \
    "$KILN" build "$T/v0.json" --tokens 4 -o "$T/never"
refuse 1 "--tokens past --max-seq" "--tokens 9 is more than the 8 rows of the KV cache" \
    "$KILN" import hf "$T/qwen2" --tokens 9 --max-seq 8 -o "$T/never.json"
refuse 1 "gpt2: --max-seq past n_positions" "--max-seq 65 is more than the model's 64 learned positions" \
    "$KILN" import hf "$T/gpt2hub" --max-seq 65 -o "$T/never.json"
refuse 3 "import hf of a file" "not a directory" "$KILN" import hf "$T/v0.bin" -o "$T/never.json"

# ---- big shapes, written tensor by tensor --------------------------------------
# TinyLlama-1.1B's and Llama-3.1-8B's shapes (llama only) with their
# published configs, seen without their gigabytes (--no-weights: the
# tensors listed, config.json and tokenizer.json written, the tokenizer
# read back by kiln's reader), imported; --stream writes a llama's files
# byte for byte as from memory; the shapes refused for other model types.
mk_refuses() {
    what=$1 text=$2
    shift 2
    "$MKCKPT" "$@" >"$T/out" 2>"$T/err"
    got=$?
    if [ "$got" = 2 ] && head -n 1 "$T/err" | grep -qxF -- "mkckpt: $text" &&
        ! ls "$T"/never* >/dev/null 2>&1; then
        ok "$what"
    else
        bad "$what: exit $got (want 2), wanted first: mkckpt: $text"; sed 's/^/      /' "$T/err"
    fi
}
has() {     # has WHAT FILE LINE...: each LINE is a whole line of FILE
    what=$1 file=$2 miss=
    shift 2
    for line; do grep -qxF -- "$line" "$file" || miss=$line; done
    if [ -z "$miss" ]; then ok "$what"; else bad "$what: no line: $miss"; fi
}
run "tinyllama: mkckpt --no-weights" "$MKCKPT" hf llama "$T/tl" --shape tinyllama --no-weights
has "  the tensors, 4.4 GB of f32 in one file, and the tokenizer as kiln reads it" "$T/out" \
    "model.embed_tokens.weight F32 [32000, 2048] model.safetensors" \
    "model.layers.21.self_attn.k_proj.weight F32 [256, 2048] model.safetensors" \
    "model.layers.21.mlp.down_proj.weight F32 [2048, 5632] model.safetensors" \
    "lm_head.weight F32 [32000, 2048] model.safetensors" \
    "201 tensors, 4400193536 bytes in 1 file" \
    'tokenizer.json: 32000 tokens, BOS 1, EOS 2; "the cat sat" is 1 286 288 293 292 296 292'
has "  TinyLlama-1.1B-Chat-v1.0's config.json (torch_dtype as stored)" "$T/tl/config.json" \
    '  "num_hidden_layers": 22,' '  "num_key_value_heads": 4,' '  "rms_norm_eps": 1e-05,' \
    '  "rope_theta": 10000.0,' '  "torch_dtype": "float32",' '  "transformers_version": "4.35.0",'
ls "$T/tl" | tr '\n' ' ' | grep -qx "config.json tokenizer.json " && ok "  no weights written" ||
    bad "  no weights written"
run "  import hf" "$KILN" import hf "$T/tl" -o "$T/tl.json"
grep -q '"model.layers.21.mlp.down_proj.weight", "shape": \[2048, 5632\]' "$T/tl.json" &&
    ok "  22 layers, down_proj [2048, 5632]" || bad "  22 layers, down_proj [2048, 5632]"
run "llama3-8b: mkckpt --bf16 --no-weights" "$MKCKPT" hf llama "$T/l3" --shape llama3-8b --bf16 \
    --no-weights
has "  16 GB of bf16 in the Hub's 4 shards, Llama 3's tokenizer as kiln reads it" "$T/out" \
    "model.embed_tokens.weight BF16 [128256, 4096] model-00001-of-00004.safetensors" \
    "model.layers.8.mlp.down_proj.weight BF16 [4096, 14336] model-00001-of-00004.safetensors" \
    "model.layers.9.self_attn.q_proj.weight BF16 [4096, 4096] model-00002-of-00004.safetensors" \
    "model.layers.31.mlp.down_proj.weight BF16 [4096, 14336] model-00004-of-00004.safetensors" \
    "lm_head.weight BF16 [128256, 4096] model-00004-of-00004.safetensors" \
    "291 tensors, 16060522496 bytes in 4 files" \
    'tokenizer.json: 128256 tokens, BOS 128000, EOS 128001; "the cat sat" is 128000 260 265 268'
has "  Llama-3.1-8B's config.json" "$T/l3/config.json" '  "max_position_embeddings": 131072,' \
    '    "original_max_position_embeddings": 8192,' '  "rope_theta": 500000.0,' \
    '  "torch_dtype": "bfloat16",' '  "vocab_size": 128256'
run "  import hf --max-seq 512" "$KILN" import hf "$T/l3" -o "$T/l3.json" --max-seq 512
grep -q '"scaling": "llama3", "factor": 8, .*"original_max_position_embeddings": 8192' "$T/l3.json" &&
    grep -q '"lm_head.weight", "shape": \[128256, 4096\]' "$T/l3.json" &&
    ok "  llama3 rope scaling, lm_head [128256, 4096]" || bad "  llama3 rope scaling, lm_head [128256, 4096]"
rm -f "$T/tl.json" "$T/l3.json"
for o in "--untied --seed 7" "--bf16 --shards 3"; do   # the index aside: its total_size
    # shellcheck disable=SC2086
    "$MKCKPT" hf llama "$T/mem" $o && "$MKCKPT" hf llama "$T/str" $o --stream
    same=$([ "$(ls "$T/mem")" = "$(ls "$T/str")" ] && echo yes)
    for f in "$T/mem"/*.safetensors "$T/mem/config.json" "$T/mem/tokenizer.json"; do
        cmp -s "$f" "$T/str/${f##*/}" || same=
    done
    [ "$same" ] && ok "llama $o --stream: the files from memory, byte for byte" ||
        bad "llama $o --stream: the files from memory, byte for byte"
    rm -rf "$T/mem" "$T/str"
done
"$MKCKPT" --help >"$T/out" 2>&1 && grep -q "tinyllama|llama3-8b" "$T/out" &&
    ok "mkckpt --help names the big shapes" || bad "mkckpt --help names the big shapes"
mk_refuses "tinyllama: llama's only" "unknown shape or model type" hf qwen2 "$T/never" --shape tinyllama
mk_refuses "llama3-8b: not a llama2.c shape" "unknown shape or model type" \
    llama2c "$T/never.bin" --shape llama3-8b
mk_refuses "--no-weights: llama folders only" "--stream and --no-weights write llama folders only" \
    hf qwen3_moe "$T/never" --no-weights

if [ "$fails" = 0 ]; then echo "import: all ok"; else echo "import: $fails failed"; fi
[ "$fails" = 0 ]
