#!/bin/sh
# tests/fp8.sh: FP8 checkpoints (docs/fp8.md), one line per check:
#   1. kiln check of folders mkckpt writes in each layout (Qwen3-FP8's
#      blocks of 128 x 128 with weight_scale_inv; compressed-tensors'
#      per-row and per-tensor weight_scale, bf16 scales, input_scale):
#      the cc build and the JIT against the reference on the dequantized
#      weights within 1e-4, the table saying how many are held as stored
#      (every linear: rows of 256 and 512, whole blocks of 128) and that
#      activations stay f32;
#   2. the program holds them so: f8_e4m3 buffers read by qgemm, the C
#      calling rt_gemm_f8_e4m3 on weights declared RT_F8_E4M3;
#   3. greedy decoding (cc build and kiln run) equals refgen's reference
#      on the dequantized weights, token for token;
#   4. --weight-dtype f8_e4m3 on an f32 folder (quantized at load);
#   5. bad input: a scale missing, of a wrong shape, an unsupported
#      quantization_config: one line naming it;
#   6. the published configs of Qwen3-30B-A3B-Instruct-2507-FP8 and
#      Meta-Llama-3.1-70B-Instruct-FP8 import and emit-c, no weights.
# KILN, MKCKPT and REFGEN name the binaries.
set -u
cd "$(dirname "$0")/.." || exit 2
KILN=${KILN:-./kiln}
MKCKPT=${MKCKPT:-build/tests/mkckpt}
REFGEN=${REFGEN:-build/tests/refgen}
. tests/lib.sh
scratch fp8

# 1. kiln check per layout; $2: "N of M" weights held f8_e4m3
held="held as f8_e4m3 as the file stores them (lossless); the kernels keep activations in f32"
check() {
    what=$1; count=$2; shift 2
    if "$KILN" check "$@" >"$T/out" 2>&1 && grep -q "weights: $count $held" "$T/out" &&
       grep -q "tolerance 0.0001" "$T/out"; then
        ok "$what"
    else
        bad "$what"; cat "$T/out"
    fi
}
"$MKCKPT" hf llama "$T/blk" --fp8 block --shape blocks >/dev/null
"$MKCKPT" hf llama "$T/ch" --fp8 channel --bf16 --shape blocks >/dev/null
"$MKCKPT" hf qwen3 "$T/pt" --fp8 tensor --shape blocks >/dev/null
"$MKCKPT" hf llama "$T/f32" --shape blocks >/dev/null
check "check: blocks of 128 x 128, weight_scale_inv (Qwen3-FP8's layout): 56 linears f8_e4m3" \
    "56 of 75" "$T/blk"
check "check: compressed-tensors per row, bf16 weight_scale, input_scale: 56 f8_e4m3" \
    "56 of 75" "$T/ch"
check "check: compressed-tensors per tensor (qwen3): 14 linears f8_e4m3" "14 of 24" "$T/pt"
grep -q '"model.layers.0.mlp.down_proj.weight_scale_inv":{"dtype":"F32","shape":\[2,4\]' \
    "$T/blk/model.safetensors" && grep -q '"quant_method": "fp8"' "$T/blk/config.json" &&
    ok "  mkckpt --fp8 block: down_proj [256, 512] has scales [2, 4]; quant_method fp8" ||
    bad "  mkckpt --fp8 block: down_proj's scales [2, 4]"

# 2. how the program holds them
"$KILN" dump "$T/blk" --after tile >"$T/tile.kir" 2>&1
"$KILN" emit-c "$T/blk" -o "$T/blk.c" >/dev/null 2>&1
if grep -q "buf b[0-9]* weight [0-9]* %[0-9]* : f32\[512,256\] f8_e4m3$" "$T/tile.kir" &&
   grep -q "call qgemm(" "$T/tile.kir" &&
   grep -q "rt_gemm_f8_e4m3(" "$T/blk.c" && grep -q "RT_F8_E4M3, rt_quantize" "$T/blk.c"; then
    ok "held as f8_e4m3 buffers, read by qgemm: rt_gemm_f8_e4m3 in the C"
else
    bad "held as f8_e4m3 buffers, read by qgemm"; head -n 20 "$T/tile.kir"
fi

# 3. greedy decoding against the reference on the dequantized weights
for d in blk ch; do
    "$KILN" import hf "$T/$d" -o "$T/$d.json" 2>/dev/null
    if "$REFGEN" "$T/$d.json" "$T/$d/model.safetensors" --tokens 5,6,7,8,9 -n 16 >"$T/$d.want" \
           2>"$T/err" &&
       "$KILN" build "$T/$d" -o "$T/$d.exe" 2>"$T/err" &&
       "$T/$d.exe" generate --tokens 5,6,7,8,9 -n 16 --temperature 0 >"$T/$d.got" 2>"$T/err" &&
       cmp -s "$T/$d.want" "$T/$d.got"; then
        ok "$d: cc build greedy = reference on the dequantized weights (16 tokens)"
    else
        bad "$d: cc build greedy = reference on the dequantized weights"
        echo "      want: $(cat "$T/$d.want")"; echo "      got:  $(cat "$T/$d.got" 2>/dev/null)"
        tail -n 3 "$T/err"
    fi
    if "$KILN" run "$T/$d" generate --tokens 5,6,7,8,9 -n 16 --temperature 0 >"$T/$d.jit" \
           2>"$T/err" && cmp -s "$T/$d.want" "$T/$d.jit"; then
        ok "$d: kiln run greedy = reference on the dequantized weights"
    else
        bad "$d: kiln run greedy = reference"; tail -n 3 "$T/err"
    fi
done

# 4. quantized at load
if "$KILN" check "$T/f32" --weight-dtype f8_e4m3 >"$T/out" 2>&1 &&
   grep -q "held as f8_e4m3, quantized at load (lossy" "$T/out"; then
    ok "check --weight-dtype f8_e4m3 on an f32 folder: quantized at load"
else
    bad "check --weight-dtype f8_e4m3 on an f32 folder"; cat "$T/out"
fi

# 5. bad input: the file's header edited in place (same length: JSON
# whitespace pads a shorter name)
cp -r "$T/blk" "$T/noscale"
perl -0777 -pi -e 's/"(model\.layers\.0\.self_attn\.q_proj\.)weight_scale_inv"/"$1input_scale"     /' \
    "$T/noscale/model.safetensors"
refuse 1 "a scale missing: refused naming the weight" \
    "'model.layers.0.self_attn.q_proj.weight' is F8_E4M3 but its scale 'model.layers.0.self_attn.q_proj.weight_scale_inv' (or 'model.layers.0.self_attn.q_proj.weight_scale') is not in the file" \
    "$KILN" build "$T/noscale" -o "$T/never"
cp -r "$T/blk" "$T/shape"
perl -0777 -pi -e 's/("model\.layers\.0\.mlp\.down_proj\.weight_scale_inv":\{"dtype":"F32","shape":)\[2,4\]/$1\[4,2\]/' \
    "$T/shape/model.safetensors"
refuse 1 "a scale of a wrong shape: refused naming it" \
    "'model.layers.0.mlp.down_proj.weight_scale_inv': shape [4,2], for 'model.layers.0.mlp.down_proj.weight' [256,512] kiln reads [2,4] (blocks of 128 x 128), [256,1] (per row) or [1]" \
    "$KILN" run "$T/shape" generate --tokens 5 -n 1
mkdir "$T/cfg"
cp "$T/blk/config.json" "$T/cfg/config.json"
perl -0777 -pi -e 's/"weight_block_size": \[\s*128,\s*128\s*\]/"weight_block_size": [64, 64]/' \
    "$T/cfg/config.json"
refuse 1 "weight_block_size [64, 64]: refused by name" \
    "quantization_config.weight_block_size: [64, 64] not supported (kiln reads blocks of [128, 128])" \
    "$KILN" import hf "$T/cfg" -o "$T/never"
sed -i 's/"quant_method": "fp8"/"quant_method": "awq"/' "$T/cfg/config.json"
refuse 1 "quant_method awq: refused by name" \
    'quantization_config.quant_method: "awq" not supported' \
    "$KILN" import hf "$T/cfg" -o "$T/never"

# 6. the published configs (from the Hub's config.json files; Qwen's
# modules_to_not_convert abridged to its first entries)
mkdir "$T/q3fp8" "$T/l70fp8"
cat >"$T/q3fp8/config.json" <<'CFG'
{"architectures": ["Qwen3MoeForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
 "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151645, "head_dim": 128,
 "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
 "intermediate_size": 6144, "max_position_embeddings": 262144, "max_window_layers": 48,
 "mlp_only_layers": [], "model_type": "qwen3_moe", "moe_intermediate_size": 768,
 "norm_topk_prob": true, "num_attention_heads": 32, "num_experts": 128,
 "num_experts_per_tok": 8, "num_hidden_layers": 48, "num_key_value_heads": 4,
 "output_router_logits": false,
 "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
   "weight_block_size": [128, 128],
   "modules_to_not_convert": ["lm_head", "model.layers.0.mlp.gate", "model.layers.1.mlp.gate"]},
 "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 10000000,
 "router_aux_loss_coef": 0.001, "sliding_window": null, "tie_word_embeddings": false,
 "torch_dtype": "bfloat16", "transformers_version": "4.51.0", "use_cache": true,
 "use_sliding_window": false, "vocab_size": 151936}
CFG
cat >"$T/l70fp8/config.json" <<'CFG'
{"_name_or_path": "meta-llama/Meta-Llama-3.1-70B-Instruct", "architectures": ["LlamaForCausalLM"],
 "attention_bias": false, "attention_dropout": 0.0, "bos_token_id": 128000,
 "eos_token_id": [128001, 128008, 128009], "hidden_act": "silu", "hidden_size": 8192,
 "initializer_range": 0.02, "intermediate_size": 28672, "max_position_embeddings": 131072,
 "mlp_bias": false, "model_type": "llama", "num_attention_heads": 64, "num_hidden_layers": 80,
 "num_key_value_heads": 8, "pretraining_tp": 1,
 "quantization_config": {"config_groups": {"group_0": {
     "input_activations": {"actorder": null, "block_structure": null, "dynamic": false,
       "group_size": null, "num_bits": 8, "observer": "minmax", "observer_kwargs": {},
       "strategy": "tensor", "symmetric": true, "type": "float"},
     "output_activations": null, "targets": ["Linear"],
     "weights": {"actorder": null, "block_structure": null, "dynamic": false,
       "group_size": null, "num_bits": 8, "observer": "minmax", "observer_kwargs": {},
       "strategy": "channel", "symmetric": true, "type": "float"}}},
   "format": "float-quantized", "global_compression_ratio": 1.2405352996226195,
   "ignore": ["lm_head"], "kv_cache_scheme": null, "quant_method": "compressed-tensors",
   "quantization_status": "compressed"},
 "rms_norm_eps": 1e-05,
 "rope_scaling": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
 "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
 "transformers_version": "4.44.2", "use_cache": true, "vocab_size": 128256}
CFG
run "Qwen3-30B-A3B-Instruct-2507-FP8's config: import" \
    "$KILN" import hf "$T/q3fp8" -o "$T/q3fp8.json" --max-seq 256
run "  emit-c" timeout 300 "$KILN" emit-c "$T/q3fp8.json" -o "$T/q3fp8.c"
rm -f "$T/q3fp8.c" "$T/q3fp8.json"
run "Meta-Llama-3.1-70B-Instruct-FP8's config: import" \
    "$KILN" import hf "$T/l70fp8" -o "$T/l70fp8.json" --max-seq 256
run "  emit-c" timeout 300 "$KILN" emit-c "$T/l70fp8.json" -o "$T/l70fp8.c"
grep -q '"model.layers.79.mlp.down_proj.weight", "shape": \[8192, 28672\]' "$T/l70fp8.json" &&
    ok "  80 layers, down_proj [8192, 28672]" || bad "  80 layers, down_proj [8192, 28672]"
[ "$fails" = 0 ] && echo "fp8: ok" || echo "fp8: $fails failed"
[ "$fails" = 0 ]
