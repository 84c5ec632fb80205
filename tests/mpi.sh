#!/bin/sh
# tests/mpi.sh: programs of several MPI ranks (docs/distributed.md), run
# by Open MPI's mpirun on this machine (as root: its allow-run-as-root
# settings; more ranks than cores: --oversubscribe). $MKCKPT's llama and
# qwen2 (biases, a tied classifier) folders built with --ranks 2 give the
# one-rank program's greedy tokens and text (the prompt given on rank 0's
# standard input too), as does a Qwen3-MoE GGUF whose experts are split
# over the ranks (4 experts refused on 3 ranks), and Mixtral and
# Qwen3-MoE folders whose experts, one tensor each, are split alike, each
# rank reading only its own (its weights image the lighter by them; f32,
# and q8_0), gpt-oss folders (sinks split with the query heads, experts
# read through views split by experts; f32, bf16, MXFP4 as stored and held
# bf16), FP8 folders (block and per-row scales: each rank reads its part
# of the bytes and of the scales; rows of blocks that 2 ranks do not
# split refused at build), and
# `kiln check --ranks 2` agrees on the six. The 2-rank
# program prints the collectives and
# bytes per decode token, the dump's and the model's shape's. A llama2.c
# checkpoint, tied and untied, and a q8_0 GGUF have their embedding table
# split by vocabulary rows and give the one-rank tokens. The one-rank
# program links no MPI; a program run on the wrong number of ranks, a
# model whose dimensions do not split, and a JIT run of several ranks are
# refused in one line; a rank that cannot read its weights, and a rank
# killed while the other waits for it, end the whole job within seconds
# with the rank named. Last, two ranks in two network namespaces joined by
# a veth pair (tests/mpi-netns.sh: Open MPI's TCP transport over it);
# where the kernel forbids namespaces that test says so on a "skip" line.
set -u
cd "$(dirname "$0")/.." || exit 2
KILN=${KILN:-./kiln}
MKCKPT=${MKCKPT:-build/tests/mkckpt}
. tests/lib.sh
# Under sanitizers (make test-asan) Open MPI's own allocations, made in the
# plugins it loads and unloads, are reported as leaks with no stack to
# suppress them by: leak detection is off for these programs, whose
# memory errors ASan still checks.
case "${KILN_CFLAGS_EXTRA:-}" in
*-fsanitize*) ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"; export ASAN_OPTIONS ;;
esac
scratch mpi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN="mpirun --oversubscribe"

if ! command -v mpirun >/dev/null || ! command -v mpicc >/dev/null; then
    bad "Open MPI's mpirun and mpicc are missing (make deps)"
    exit 1
fi

GEN="generate --tokens 1,5,9,200 -n 24 --temperature 0"

# same WHAT A B: files A and B hold the same (non-empty) text
same() {
    if [ -s "$2" ] && cmp -s "$2" "$3"; then ok "$1: $(head -c 120 "$2")"; else
        bad "$1"; echo "      $(cat "$2" 2>/dev/null) vs $(cat "$3" 2>/dev/null)"; fi
}

# agree ID WHAT MODEL [BUILD OPTIONS]: MODEL built for 2 ranks and for 1
# ($T/ID-2, $T/ID-1) gives the same greedy tokens.
agree() {
    id=$1 what=$2 model=$3
    shift 3
    run "$what: kiln build --ranks 2" "$KILN" build "$model" --ranks 2 "$@" -o "$T/$id-2"
    run "$what: kiln build (1 rank)" "$KILN" build "$model" "$@" -o "$T/$id-1"
    # shellcheck disable=SC2086
    "$T/$id-1" $GEN >"$T/$id-1.tok" 2>"$T/err"
    # shellcheck disable=SC2086
    timeout 60 $MPIRUN -np 2 "$T/$id-2" $GEN >"$T/$id-2.tok" 2>"$T/err" || sed 's/^/      /' "$T/err"
    same "$what: 2 ranks' greedy tokens are 1 rank's" "$T/$id-2.tok" "$T/$id-1.tok"
}

# ---- the same tokens on 1 and 2 ranks ------------------------------------------
for type in llama qwen2; do
    "$MKCKPT" hf "$type" "$T/$type" >/dev/null || bad "mkckpt hf $type"
    run "$type: kiln build --ranks 2" "$KILN" build "$T/$type" --ranks 2 -o "$T/$type-2"
    run "$type: kiln build (1 rank)" "$KILN" build "$T/$type" -o "$T/$type-1"
    # shellcheck disable=SC2086
    "$T/$type-1" $GEN >"$T/$type-1.tok" 2>"$T/err"
    # shellcheck disable=SC2086
    $MPIRUN -np 2 "$T/$type-2" $GEN >"$T/$type-2.tok" 2>"$T/err" || sed 's/^/      /' "$T/err"
    same "$type: 2 ranks' greedy tokens are 1 rank's" "$T/$type-2.tok" "$T/$type-1.tok"
done
"$T/llama-1" generate --prompt "the cat sat on the mat" -n 16 --temperature 0 >"$T/text-1" 2>/dev/null
$MPIRUN -np 2 "$T/llama-2" generate --prompt "the cat sat on the mat" -n 16 --temperature 0 \
    >"$T/text-2" 2>"$T/err"
same "llama: 2 ranks' text, printed by rank 0 alone" "$T/text-2" "$T/text-1"
printf 'the cat sat on the mat\n' | timeout 60 $MPIRUN -np 2 "$T/llama-2" generate --prompt-file - -n 16 \
    --temperature 0 >"$T/text-stdin" 2>"$T/err"
same "llama: 2 ranks, the prompt on rank 0's standard input (broadcast)" "$T/text-stdin" "$T/text-1"
$MPIRUN -np 2 "$T/llama-2" generate --prompt "the cat sat on the mat" -n 16 --temperature 0 \
    >"$T/text-2" 2>"$T/err"
grep -q "rank 0: prefill:" "$T/err" && [ "$(grep -c "prefill:" "$T/err")" = 1 ] &&
    ok "  rank 0 alone reports the rates" || { bad "  rank 0 alone reports the rates"; cat "$T/err"; }

# ---- communication per token, counted by the program ------------------------------
# llama (untied, L layers of width D, vocabulary V): each decode token runs
# 2 L + 1 allreduces of 4 D bytes (after o, after down, the embedding's
# rows) and one allgather of the 4 V bytes of logits: what the dump says
# of a call of 1 token, and what the 2-rank program counts as it runs.
cfg() { sed -n "s/^ *\"$1\": \([0-9]*\),*$/\1/p" "$T/llama/config.json"; }
L=$(cfg num_hidden_layers) D=$(cfg hidden_size) V=$(cfg vocab_size)
want_b=$(((2 * L + 1) * 4 * D + 4 * V))
"$KILN" print "$T/llama" --ranks 2 --stop-after distribute >"$T/llama.ir" 2>"$T/err"
dump_b=$(sed -n 's/.*runs allreduce [0-9]* times (\([0-9]*\) bytes of results in all) and allgather [0-9]* times (\([0-9]*\) bytes).*/\1 + \2/p' "$T/llama.ir")
dump_b=$((${dump_b:-0}))
# shellcheck disable=SC2086
$MPIRUN -np 2 "$T/llama-2" $GEN >/dev/null 2>"$T/err"
got=$(sed -n 's/.*rank 0: collectives per decode token: \([0-9]*\) allreduce, \([0-9]*\) allgather, \([0-9]*\) bytes of results.*/\1 \2 \3/p' "$T/err")
if [ "$got" = "$((2 * L + 1)) 1 $want_b" ] && [ "$dump_b" = "$want_b" ]; then
    ok "llama: the program counts $got (allreduces, allgathers, bytes) a decode token: the dump's, (2 L + 1) 4 D + 4 V"
else bad "llama: collectives per decode token: '$got', dump $dump_b bytes, want $((2 * L + 1)) 1 $want_b"; sed 's/^/      /' "$T/err"; fi
# shellcheck disable=SC2086
$MPIRUN -np 2 "$T/llama-2" $GEN --json >/dev/null 2>"$T/err"
grep -q "\"collectives_per_token\": {\"allreduce\": $((2 * L + 1)), \"allgather\": 1, \"bytes\": $want_b, " "$T/err" &&
    ok "  and in generate --json's statistics" || { bad "  generate --json's collectives_per_token"; cat "$T/err"; }
"$T/llama-1" $GEN --json >/dev/null 2>"$T/err"
grep -q collectives "$T/err" && bad "the 1-rank program reports collectives" ||
    ok "  the 1-rank program reports none"

# ---- the vocabulary split: a llama2.c checkpoint, tied and untied ------------------
for kind in shared unshared; do
    flag=; [ "$kind" = unshared ] && flag=--unshared
    # shellcheck disable=SC2086
    "$MKCKPT" llama2c "$T/l2c-$kind.bin" $flag >/dev/null || bad "mkckpt llama2c $flag"
    "$KILN" import llama2c "$T/l2c-$kind.bin" -o "$T/l2c-$kind.json" \
        --weights-out "$T/l2c-$kind.safetensors" >/dev/null 2>&1 || bad "import llama2c $kind"
    "$KILN" print "$T/l2c-$kind.json" --ranks 2 --stop-after distribute >"$T/l2c.ir" 2>"$T/err"
    if grep -q "# weight 'tok_embeddings.weight' split by rows (320 of them): rank 0 holds 0..159, rank 1 holds 160..319" "$T/l2c.ir" &&
        grep -q '"x0" = allreduce .*{ranks=2}' "$T/l2c.ir"; then
        ok "llama2c $kind: the embedding table split by vocabulary rows, its rows completed by an allreduce"
    else bad "llama2c $kind: the embedding's slices in the dump"; sed 's/^/      /' "$T/err"; fi
    for n in 1 2; do
        "$KILN" build "$T/l2c-$kind.json" --ranks $n -o "$T/l2c-$n" >/dev/null 2>"$T/err" ||
            { bad "llama2c $kind: build --ranks $n"; sed 's/^/      /' "$T/err"; }
    done
    # shellcheck disable=SC2086
    "$T/l2c-1" $GEN --weights "$T/l2c-$kind.safetensors" >"$T/l2c-1.tok" 2>"$T/err"
    # shellcheck disable=SC2086
    $MPIRUN -np 2 "$T/l2c-2" $GEN --weights "$T/l2c-$kind.safetensors" >"$T/l2c-2.tok" 2>"$T/err" ||
        sed 's/^/      /' "$T/err"
    same "llama2c $kind: 2 ranks' greedy tokens are 1 rank's" "$T/l2c-2.tok" "$T/l2c-1.tok"
    "$KILN" check "$T/l2c-$kind.json" --weights "$T/l2c-$kind.safetensors" --ranks 2 >"$T/check" 2>"$T/err"
    st=$?
    if [ "$st" = 0 ] && grep -q "^ok: every output within tolerance" "$T/check" &&
        grep -q "^logits: the greedy token of the 2-rank cc build is the one-rank graph's in 1 of 1 row" "$T/check"
    then ok "llama2c $kind: kiln check --ranks 2: $(grep "^logits  " "$T/check" | tr -s ' ')"
    else bad "llama2c $kind: kiln check --ranks 2 (exit $st)"; sed 's/^/      /' "$T/check" "$T/err"; fi
done

# ---- a q8_0 GGUF: each rank reads its quantized embedding rows -----------------------
"$MKCKPT" gguf llama "$T/q8.gguf" --type q8_0 --shape blocks >/dev/null || bad "mkckpt gguf llama q8_0"
"$KILN" print "$T/q8.gguf" --ranks 2 --stop-after distribute >"$T/q8.ir" 2>"$T/err"
grep -q '"token_embd.weight" : f32\[160,256\] shard(axis=0, of=320, ranks=2)' "$T/q8.ir" &&
    ok "q8_0 GGUF: token_embd split by vocabulary rows" || { bad "q8_0 GGUF: token_embd split"; sed 's/^/      /' "$T/err"; }
run "q8_0 GGUF: kiln build --ranks 2" "$KILN" build "$T/q8.gguf" --ranks 2 -o "$T/q8-2"
run "q8_0 GGUF: kiln build (1 rank)" "$KILN" build "$T/q8.gguf" -o "$T/q8-1"
# shellcheck disable=SC2086
"$T/q8-1" $GEN >"$T/q8-1.tok" 2>"$T/err"
# shellcheck disable=SC2086
$MPIRUN -np 2 "$T/q8-2" $GEN >"$T/q8-2.tok" 2>"$T/err" || sed 's/^/      /' "$T/err"
same "q8_0 GGUF: 2 ranks' greedy tokens are 1 rank's" "$T/q8-2.tok" "$T/q8-1.tok"

# A GGUF's blocks are read whole by each rank: ffn_down's rows of 96 (3
# blocks of 32) cannot split by columns over 2 ranks, refused at build.
"$MKCKPT" gguf llama "$T/q8t.gguf" --type q8_0 >/dev/null || bad "mkckpt gguf llama q8_0 (tiny)"
refuse 1 "q8_0 GGUF whose rows of 3 blocks split by columns: refused at build" \
    "the 3 blocks of 32 in a row of its q8_0 weight do not split evenly over 2 ranks" \
    "$KILN" build "$T/q8t.gguf" --ranks 2 -o "$T/never"

if ldd "$T/llama-1" | grep -q libmpi; then bad "the 1-rank program links MPI"; else
    ok "the 1-rank program links no MPI"; fi
ldd "$T/llama-2" | grep -q libmpi && ok "the 2-rank program links Open MPI" ||
    bad "the 2-rank program links Open MPI"

# ---- expert parallel: a Qwen3-MoE GGUF's stacked experts split over the ranks ----
"$MKCKPT" gguf qwen3_moe "$T/moe.gguf" >/dev/null || bad "mkckpt gguf qwen3_moe"
"$KILN" print "$T/moe.gguf" --ranks 2 --stop-after distribute >"$T/moe.ir" 2>"$T/err"
if [ "$(grep -c "# moe '[^']*': 4 experts over the ranks, 2 each: rank 0 holds experts 0..1, rank 1 holds 2..3 (3 weight tensors, [0-9]* bytes a rank)" "$T/moe.ir")" = 2 ] &&
    [ "$(grep -c "split by experts" "$T/moe.ir")" = 0 ] &&
    [ "$(grep -c "= moe .*ranks=2[,}]" "$T/moe.ir")" = 2 ] && grep -q "^  # 2 ranks: each holds" "$T/moe.ir"
then ok "qwen3_moe: 2 moe layers expert parallel, each rank holding 2 of 4 experts: $(grep "# 2 ranks" "$T/moe.ir" | sed 's/^ *# //')"
else bad "qwen3_moe: experts split in the distribution dump"; sed 's/^/      /' "$T/err"; fi
agree moe "qwen3_moe (experts split)" "$T/moe.gguf"
"$KILN" build "$T/moe.gguf" --ranks 3 -o "$T/never" >"$T/out" 2>"$T/err"
st=$?
if [ "$st" = 1 ] && grep -q "ffn_out: the 4 experts do not split evenly over 3 ranks .*--ranks that split every sharded dimension: 1, 2" "$T/err" &&
    [ ! -e "$T/never" ]; then ok "qwen3_moe: --ranks 3 of 4 experts is refused, naming the experts and the rank counts that work"
else bad "qwen3_moe: --ranks 3 refused (exit $st)"; sed 's/^/      /' "$T/err"; fi

# held IMAGE: the bytes of the buffers a weights image holds (its table:
# runtime/core/rt_image.c, n at 30, the key's length at 38, then the key
# and n entries {offset, bytes, check} of 8 bytes each)
u64() { od -A n -t u8 -j "$2" -N 8 "$1" | tr -d ' '; }
held() {
    n=$(u64 "$1" 30) k=$(u64 "$1" 38) s=0 i=0
    while [ "$i" -lt "$n" ]; do s=$((s + $(u64 "$1" $((46 + k + 24 * i + 8))))); i=$((i + 1)); done
    echo "$s"
}

# ---- expert parallel: a folder's experts, one tensor each, each rank reading its own ----
# Of the 4 experts' tensors of each projection rank r reads experts 2r and
# 2r + 1's (the weights' shard(tensors=[...]) in the .kir; the notes say
# it once a moe). Each rank's weights image (the weights it holds,
# prepared) holds the bytes the dump says a rank holds (and a few
# derived), less than the one-rank program's by more than the bytes of
# the experts' tensors it does not read (the notes' bytes a rank); the
# two ranks' images differ.
for type in mixtral qwen3_moe; do
    "$MKCKPT" hf "$type" "$T/$type" >/dev/null || bad "mkckpt hf $type"
    "$KILN" print "$T/$type" --ranks 2 --stop-after distribute >"$T/$type.ir" 2>"$T/err"
    if [ "$(grep -c "shard(tensors=\[\"[^\"]*experts\.0\.[^\"]*\", \"[^\"]*experts\.2\." "$T/$type.ir")" = 6 ] &&
        [ "$(grep -c "shard(tensors=\[\"[^\"]*experts\.1\.[^\"]*\", \"[^\"]*experts\.3\." "$T/$type.ir")" = 6 ] &&
        [ "$(grep -c "# moe '[^']*': 4 experts over the ranks, 2 each: rank 0 holds experts 0..1, rank 1 holds 2..3 (6 weight tensors" "$T/$type.ir")" = 2 ] &&
        [ "$(grep -c "weight %[0-9]* \"[^\"]*experts\.[23]\." "$T/$type.ir")" = 0 ] &&
        [ "$(grep -c "= moe .*ranks=2[,}]" "$T/$type.ir")" = 2 ]
    then ok "$type: 2 moe layers expert parallel, rank 0 reading experts 0, 1's tensors, rank 1 experts 2, 3's: $(grep "# 2 ranks" "$T/$type.ir" | sed 's/^ *# //')"
    else bad "$type: each rank's expert tensors in the distribution dump"; sed 's/^/      /' "$T/err"; fi
    run "$type: kiln build --ranks 2" "$KILN" build "$T/$type" --ranks 2 -o "$T/$type-2"
    run "$type: kiln build (1 rank)" "$KILN" build "$T/$type" -o "$T/$type-1"
    mkdir -p "$T/wc-$type-1" "$T/wc-$type-2"
    # shellcheck disable=SC2086
    KILN_WEIGHTS_CACHE="$T/wc-$type-1" "$T/$type-1" $GEN >"$T/$type-1.tok" 2>"$T/err"
    # shellcheck disable=SC2086
    KILN_WEIGHTS_CACHE="$T/wc-$type-2" timeout 60 $MPIRUN -np 2 -x KILN_WEIGHTS_CACHE "$T/$type-2" $GEN \
        >"$T/$type-2.tok" 2>"$T/err" || sed 's/^/      /' "$T/err"
    same "$type: 2 ranks' greedy tokens (experts of a tensor each split) are 1 rank's" "$T/$type-2.tok" "$T/$type-1.tok"
    unread=$(sed -n "s/.*experts over the ranks, .* weight tensors, \([0-9]*\) bytes a rank)$/\1/p" "$T/$type.ir" |
        awk '{ s += $1 } END { print s + 0 }')
    x=$(sed -n "s/^  # 2 ranks: each holds \([0-9]*\) weight bytes.*/\1/p" "$T/$type.ir")
    one=$(held "$T/wc-$type-1"/*.kwi)
    set -- "$T/wc-$type-2"/*.kwi
    h0=$(held "$1") h1=$(held "${2:-$1}")
    if [ "$#" = 2 ] && [ "$unread" -gt 0 ] && ! cmp -s "$1" "$2" && [ "$h0" -ge "$x" ] &&
        [ "$h0" -le $((x + 1024)) ] && [ "$h1" -ge "$x" ] && [ "$h1" -le $((x + 1024)) ] &&
        [ $((one - h0)) -ge "$unread" ] && [ $((one - h1)) -ge "$unread" ]
    then ok "$type: each rank's weights image holds $h0 and $h1 bytes (the dump's $x and its rank's derived), the 1-rank program's $one: lighter by more than the $unread bytes of the other rank's experts"
    else bad "$type: each rank's weights image holds its experts only ($one; $h0, $h1; $x; $unread)"; fi
done
"$KILN" build "$T/mixtral" --ranks 3 -o "$T/never" >"$T/out" 2>"$T/err"
st=$?
if [ "$st" = 1 ] && grep -q "ffn_out: the 4 experts do not split evenly over 3 ranks .*--ranks that split every sharded dimension: 1, 2" "$T/err" &&
    [ ! -e "$T/never" ]; then ok "mixtral: --ranks 3 of 4 experts of a tensor each is refused, naming the experts and the rank counts that work"
else bad "mixtral: --ranks 3 refused (exit $st)"; sed 's/^/      /' "$T/err"; fi
agree mixtral_q8 "mixtral q8_0" "$T/mixtral" --weight-dtype q8_0

# gpt-oss: attention's sinks (one logit a query head) split with the heads;
# the experts, which the moe reads through views of the stacked tensors
# (transposed, gate and up interleaved), split by experts.
"$MKCKPT" hf gpt_oss "$T/gpt_oss" >/dev/null || bad "mkckpt hf gpt_oss"
"$KILN" print "$T/gpt_oss" --ranks 2 --stop-after distribute >"$T/gpt_oss.ir" 2>"$T/err"
if [ "$(grep -c "weight %[0-9]* \"[^\"]*self_attn\.sinks\" : f32\[2\] shard(axis=0, of=4, ranks=2)" "$T/gpt_oss.ir")" = 2 ]
then ok "gpt_oss: each layer's 4 sinks split 2 a rank with the query heads"
else bad "gpt_oss: sinks split with the heads"; sed 's/^/      /' "$T/err"; fi
if [ "$(grep -c "weight %[0-9]* \"[^\"]*experts\.\(gate_up_proj\|down_proj\)\" : f32\[2,[0-9,]*\] shard(axis=0, of=4, ranks=2)" "$T/gpt_oss.ir")" = 4 ] &&
    [ "$(grep -c "# moe '[^']*': 4 experts over the ranks, 2 each: rank 0 holds experts 0..1, rank 1 holds 2..3 (4 weight tensors" "$T/gpt_oss.ir")" = 2 ] &&
    [ "$(grep -c "= moe .*ranks=2[,}]" "$T/gpt_oss.ir")" = 2 ]
then ok "gpt_oss: the experts' stacked tensors, read through views, split by experts: 2 moe layers expert parallel"
else bad "gpt_oss: experts split by experts"; sed 's/^/      /' "$T/err"; fi
agree gpt_oss "gpt_oss" "$T/gpt_oss"
"$MKCKPT" hf gpt_oss "$T/gpt_oss_b" --bf16 >/dev/null || bad "mkckpt hf gpt_oss --bf16"
agree gpt_oss_b "gpt_oss bf16 (experts split)" "$T/gpt_oss_b"
# MXFP4 experts (the Hub's _blocks and _scales) split by experts too: each
# rank holds its experts' blocks as stored (mxfp4 buffers of 2 experts).
"$MKCKPT" hf gpt_oss "$T/gpt_oss_mx" --mxfp4 blocks >/dev/null || bad "mkckpt hf gpt_oss --mxfp4 blocks"
"$KILN" print "$T/gpt_oss_mx" --ranks 2 --stop-after distribute >"$T/gpt_oss_mx.ir" 2>"$T/err"
"$KILN" print "$T/gpt_oss_mx" --ranks 2 --stop-after lower >"$T/gpt_oss_mx.lir" 2>>"$T/err"
if [ "$(grep -c "# moe '[^']*': 4 experts over the ranks, 2 each" "$T/gpt_oss_mx.ir")" = 2 ] &&
    [ "$(grep -c "buf b[0-9]* weight [0-9]* %[0-9]* : f32\[2,64,[0-9]*\] mxfp4$" "$T/gpt_oss_mx.lir")" = 4 ]
then ok "gpt_oss MXFP4: the experts' blocks split by experts, held mxfp4 (2 of 4 a rank)"
else bad "gpt_oss MXFP4: experts split by experts, held mxfp4"; sed 's/^/      /' "$T/err"; fi
agree gpt_oss_mx "gpt_oss MXFP4 (experts split)" "$T/gpt_oss_mx"
agree gpt_oss_mxb "gpt_oss MXFP4 held bf16 (experts split)" "$T/gpt_oss_mx" --weight-dtype bf16

# FP8 folders (rows of 256 and 512: 128 x 128 scale blocks [2, 2] and
# [2, 4], per-row scales) held as stored: q, k, v, gate, up split by rows,
# o and down by columns, each rank's part of the bytes and of the scales.
# Tokens alone would hardly see a scale read at the wrong place (a
# random model's scales are alike), so kiln check --weight-dtype f32
# compares the reference of each rank's widened part with the one-rank
# graph's on the whole: a reordered sum apart (under 1e-6).
for kind in block channel; do
    "$MKCKPT" hf llama "$T/fp8$kind" --fp8 $kind --shape blocks >/dev/null || bad "mkckpt hf llama --fp8 $kind"
    agree "fp8$kind" "FP8 $kind folder" "$T/fp8$kind"
done
"$KILN" print "$T/fp8block" --ranks 2 --stop-after lower >"$T/fp8.ir" 2>"$T/err"
if grep -q '"model.layers.0.self_attn.o_proj.weight" : f32\[256,128\] shard(axis=1, of=256, ranks=2)' "$T/fp8.ir" &&
    grep -q '"model.layers.0.mlp.up_proj.weight" : f32\[256,256\] shard(axis=0, of=512, ranks=2)' "$T/fp8.ir" &&
    [ "$(grep -c "buf b[0-9]* weight .* f8_e4m3$" "$T/fp8.ir")" = 56 ]
then ok "FP8 block folder: 56 weights split, each held f8_e4m3 as the file stores it"
else bad "FP8 block folder: weights split, held f8_e4m3"; sed 's/^/      /' "$T/err"; fi
"$KILN" check "$T/fp8block" --ranks 2 --weight-dtype f32 >"$T/check" 2>"$T/err"
st=$?
rel=$(awk '/^logits  /{print $NF}' "$T/check")
if [ "$st" = 0 ] && [ -n "$rel" ] && awk -v r="$rel" 'BEGIN{exit !(r < 1e-6)}'
then ok "FP8 block folder: kiln check --ranks 2 --weight-dtype f32: each rank's parts are the whole's ($rel)"
else bad "FP8 block folder: kiln check --ranks 2 --weight-dtype f32 (exit $st, 1-rank rel '$rel')"; sed 's/^/      /' "$T/check" "$T/err"; fi
refuse 2 "FP8 block folder: kiln check --ranks 2 of weights held f8_e4m3 says how to check it" \
    "weight 'model.layers.0.self_attn.q_proj.weight' is held as f8_e4m3 (check it with --weight-dtype f32)" \
    "$KILN" check "$T/fp8block" --ranks 2
# down_proj's rows of 384 (3 blocks of 128) cannot split by columns over
# 2 ranks held f8_e4m3: refused at build; held bf16 they split.
"$MKCKPT" hf llama "$T/fp8" --fp8 block --shape blocks384 >/dev/null || bad "mkckpt hf llama --fp8 block"
refuse 1 "FP8 folder whose rows of 3 blocks of 128 split by columns: refused at build" \
    "layers.0.ffn_out: the 3 blocks of 128 in a row of its f8_e4m3 weight do not split evenly over 2 ranks (and 1 more places); --ranks that split every sharded dimension: 1" \
    "$KILN" build "$T/fp8" --ranks 2 -o "$T/never"
agree fp8b "FP8 folder held bf16" "$T/fp8" --weight-dtype bf16

# ---- kiln check --ranks 2: the reference simulating the ranks, the cc build under mpirun ----
for type in llama qwen2 moe.gguf mixtral qwen3_moe gpt_oss; do
    "$KILN" check "$T/$type" --ranks 2 >"$T/check" 2>"$T/err"
    st=$?
    if [ "$st" = 0 ] && grep -q "^ok: every output within tolerance" "$T/check" &&
        grep -q "^logits  .* -          - " "$T/check" &&
        grep -q "^logits: the greedy token of the 2-rank cc build is the one-rank graph's in 1 of 1 row" "$T/check" &&
        grep -q "^2 ranks: the reference simulates them" "$T/check"
    then ok "$type: kiln check --ranks 2: $(grep "^logits  " "$T/check" | tr -s ' ')"
    else bad "$type: kiln check --ranks 2 (exit $st)"; sed 's/^/      /' "$T/check" "$T/err"; fi
done
PATH=/nonexistent "$KILN" check "$T/llama" --ranks 2 >"$T/out" 2>"$T/err"
st=$?
if [ "$st" = 3 ] && [ "$(wc -l <"$T/err")" = 1 ] &&
    grep -q "^kiln: a program of 2 ranks is checked under mpirun, which is not on PATH" "$T/err"
then ok "kiln check --ranks 2 without mpirun: one line, exit 3"
else bad "kiln check --ranks 2 without mpirun (exit $st)"; sed 's/^/      /' "$T/err"; fi
refuse 2 "kiln check --ranks 2 --bisect is refused" "runs one rank: drop --ranks" \
    "$KILN" check "$T/llama" --ranks 2 --bisect

# ---- refusals ---------------------------------------------------------------------
# shellcheck disable=SC2086
$MPIRUN -np 1 "$T/llama-2" $GEN >"$T/out" 2>"$T/err"
st=$?
if [ "$st" = 2 ] && [ "$(grep -c "llama-2" "$T/err")" = 1 ] &&
    grep -q "llama-2: built for 2 ranks, run on 1: run it as mpirun -np 2 " "$T/err"; then
    ok "run on 1 rank, built for 2: one line (and mpirun's banner), exit 2"
else bad "run on 1 rank, built for 2 (exit $st)"; sed 's/^/      /' "$T/err"; fi
"$KILN" build "$T/llama" --ranks 3 -o "$T/never" >"$T/out" 2>"$T/err"
st=$?
if [ "$st" = 1 ] && grep -q "do not split evenly over 3 ranks.*--ranks that split every sharded dimension: 1, 2" "$T/err" &&
    [ ! -e "$T/never" ]; then ok "--ranks 3 of a llama of 2 KV heads is refused, naming the rank counts that work"
else bad "--ranks 3 refused (exit $st)"; sed 's/^/      /' "$T/err"; fi
refuse 2 "kiln run --ranks 2 (the JIT) is refused" "runs under MPI, not in the JIT" \
    "$KILN" run "$T/llama" --ranks 2 $GEN

# ---- faults: a rank that fails or dies ends the job --------------------------------
t0=$(date +%s)
timeout 60 $MPIRUN -np 1 "$T/llama-2" $GEN : -np 1 "$T/llama-2" $GEN --weights "$T/none.safetensors" \
    >"$T/out" 2>"$T/err"
st=$? t1=$(date +%s)
if [ "$st" != 0 ] && [ "$st" != 124 ] && [ $((t1 - t0)) -le 20 ] &&
    grep -q "llama-2: rank 1: generate: .*none.safetensors: cannot open" "$T/err"; then
    ok "a rank that cannot read its weights ends the job in $((t1 - t0)) s, naming itself"
else bad "a rank that cannot read its weights (exit $st, $((t1 - t0)) s)"; sed 's/^/      /' "$T/err"; fi

# Rank 1 waits on its prompt (a FIFO nobody writes) while rank 0 prefills
# and waits in the first collective; rank 1 is killed.
mkfifo "$T/fifo"
$MPIRUN -np 1 "$T/llama-2" generate --prompt "the cat" -n 8 : \
    -np 1 "$T/llama-2" generate --prompt-file "$T/fifo" -n 8 >"$T/out" 2>"$T/err" &
job=$!
victim=
for _ in $(seq 100); do
    victim=$(pgrep -f -- "^$T/llama-2 generate --prompt-file $T/fifo" | head -1)
    [ -n "$victim" ] && break
    sleep 0.1
done
sleep 1
t0=$(date +%s)
[ -n "$victim" ] && kill -9 "$victim"
waited=0
while kill -0 "$job" 2>/dev/null && [ "$waited" -lt 30 ]; do sleep 1; waited=$((waited + 1)); done
if kill -0 "$job" 2>/dev/null; then
    bad "a killed rank: the job still runs after 30 s"; kill "$job"
else
    wait "$job"
    st=$? t1=$(date +%s)
    sleep 3
    left=$(pgrep -f -- "^$T/llama-2 " | wc -l)
    if [ -n "$victim" ] && [ "$st" != 0 ] && [ "$left" = 0 ] && [ $((t1 - t0)) -le 10 ] &&
        grep -q "process rank 1 .*exited on signal 9" "$T/err"; then
        ok "a killed rank ends the job in $((t1 - t0)) s, no rank left: $(grep "signal 9" "$T/err")"
    else bad "a killed rank (exit $st, pid '$victim', $left ranks left)"; sed 's/^/      /' "$T/err"; fi
fi

# ---- two network namespaces joined by a veth pair ------------------------------------
# shellcheck disable=SC2086
sh tests/mpi-netns.sh "$T/llama-2" "$T/llama-1.tok" $GEN || fails=$((fails + 1))

[ "$fails" = 0 ] && echo "mpi: ok" || echo "mpi: $fails failed"
[ "$fails" = 0 ]
