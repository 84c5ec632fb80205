#!/bin/sh
# tests/fuzz/seeds.sh: (re)writes the generated seed corpora under
# tests/fuzz/corpus/. Files named regress-* are inputs that once crashed a
# harness; they are kept as they are. Needs a built kiln ($KILN, ./kiln).
#   model/        the examples and the test models
#   kir/          stages 00 (graph), 02 (lowered), 07 (planned) of every
#                 test model, as `kiln dump` writes them, and the input IR
#                 of every golden pass test
#   safetensors/  small valid files for the harness's weight table (F32,
#                 F16, BF16, metadata, escapes, scalars, empty tensors,
#                 MXFP4 blocks and scales)
#   npy/          small valid files of versions 1.0, 2.0 and 3.0
#   quant/        a block of each quantized type (a type byte, then the
#                 block), one with an inf scale, and f32 values
#   gguf/         the files tests/unit/test_gguf.c reads back (its built
#                 binary, $TEST_GGUF or build/tests/test_gguf, writes them)
#   tokenizer/gguf-*  the GGUF tokenizers tests/unit/test_tok_gguf.c reads
#                 ($TEST_TOK_GGUF or build/tests/test_tok_gguf writes them);
#                 the other tokenizer seeds are kept as they are
# Binary files are written byte by byte with printf, as tests/cli.sh does.
set -eu
cd "$(dirname "$0")/../.."
KILN=${KILN:-./kiln}
C=tests/fuzz/corpus
mkdir -p $C/model $C/kir $C/safetensors $C/npy $C/quant $C/gguf
for d in model kir safetensors npy quant gguf; do
    find $C/$d -type f ! -name 'regress-*' -exec rm -f {} +
done
find $C/tokenizer -type f -name 'gguf-*' -exec rm -f {} +

# ---- model -------------------------------------------------------------------
for f in examples/*.json tests/models/*.json; do
    cp "$f" $C/model/
done

# ---- kir -----------------------------------------------------------------------
T=$(mktemp -d "${TMPDIR:-/tmp}/kiln-seeds-XXXXXX")
trap 'rm -rf "$T"' EXIT
for f in tests/models/*.json; do
    n=$(basename "$f" .json)
    "$KILN" dump "$f" --dump-dir "$T/$n" >/dev/null
    for s in 00-frontend 03-lower 09-plan-memory; do
        cp "$T/$n/$s.kir" "$C/kir/$n-$s.kir"
    done
done
for f in tests/passes/*/*.kir; do
    p=$(basename "$(dirname "$f")")
    sed -n '/^# >>> input/,/^# >>> expect/p' "$f" | sed '1d;$d' >"$C/kir/golden-$p-$(basename "$f")"
done
# a distributed graph's leaves: a part of a tensor, a tensor per rank
cat >"$C/kir/shard.kir" <<'EOF'
graph t
  weight %0 "w" : f32[2,3] shard(axis=0, of=4, ranks=2)
  weight %1 "e.0" : f32[2] shard(tensors=["e.0", "e.1"])
  output %0
  output %1
EOF

# ---- binary helpers ------------------------------------------------------------
byte() { printf "\\$(printf %03o "$1")"; }
le16() { byte $(($1 & 255)); byte $(($1 >> 8 & 255)); }
le32() { le16 $(($1 & 65535)); le16 $(($1 >> 16 & 65535)); }
le64() { le32 "$1"; le32 0; }
# words N: N little-endian 32-bit words 0x3f800000 + i (1.0f and up)
words() { i=0; while [ $i -lt "$1" ]; do le32 $((0x3f800000 + i * 4096)); i=$((i + 1)); done; }
# halves N: N 16-bit words (F16 or BF16 bit patterns)
halves() { i=0; while [ $i -lt "$1" ]; do le16 $((0x3c00 + i * 64)); i=$((i + 1)); done; }

# ---- safetensors: u64 header length, JSON header, data -------------------------
# st FILE HEADER DATA-COMMAND...
st() {
    f=$1 j=$2
    shift 2
    { le64 ${#j}; printf '%s' "$j"; "$@"; } >"$C/safetensors/$f"
}
# t NAME DTYPE SHAPE BEGIN END: one tensor entry of a header
t() { printf '"%s":{"dtype":"%s","shape":[%s],"data_offsets":[%s,%s]}' "$@"; }
st all.safetensors "{$(t w F32 2,3 0 24),$(t b F32 3 24 36),$(t s F32 '' 36 40),\
$(t d F32 1,2,2 40 56),$(t emb.weight F32 4,2 56 88)}" words 22
st required.safetensors "{$(t emb.weight F32 4,2 24 56),$(t w F32 2,3 0 24)}" words 14
st half.safetensors "{\"__metadata__\":{\"format\":\"pt\"},$(t w F16 2,3 0 12),\
$(t emb.weight BF16 4,2 12 28)}" halves 14
st empty.safetensors '{}'
# MXFP4: x [2, 32] as x_blocks and x_scales (U8; scales 127 and 129)
mx_data() { words 22; le16 $((0x817f)); }
st mxfp4.safetensors "{$(t emb.weight F32 4,2 24 56),$(t w F32 2,3 0 24),\
$(t x_blocks U8 2,1,16 56 88),$(t x_scales U8 2,1 88 90)}" mx_data
# whitespace everywhere, keys in another order, escapes, an empty tensor
st spaced.safetensors ' { "__metadata__" : { "k\u00e9\/" : "line\nbreak \ud83d\ude00" } ,
 "w" : { "shape" : [ 2 , 3 ] , "data_offsets" : [ 0 , 24 ] , "dtype" : "F32" } ,
 '"$(t emb.weight F32 4,2 24 56), $(t zero F32 0,5 56 56)"' }   ' words 14

# ---- npy: magic, version, header length, dict, data ------------------------------
# npy FILE VERSION DICT DATA-COMMAND...: the header padded to 64 bytes as numpy does
npy() {
    f=$1 v=$2 h=$3
    shift 3
    lb=$([ "$v" = 1 ] && echo 2 || echo 4)
    pad=$(( (64 - (8 + lb + ${#h} + 1) % 64) % 64 ))
    n=$(( ${#h} + pad + 1 ))
    { printf '\223NUMPY'; byte "$v"; byte 0
      if [ "$lb" = 2 ]; then le16 $n; else le32 $n; fi
      printf '%s' "$h"; printf "%${pad}s" ''; printf '\n'; "$@"; } >"$C/npy/$f"
}
npy x.npy 1 "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" words 6
npy ids.npy 1 "{'descr': '<i4', 'fortran_order': False, 'shape': (4,), }" words 4
npy pos.npy 1 "{'descr': '<i4', 'fortran_order': False, 'shape': (), }" words 1
npy h-v2.npy 2 "{'shape': (1, 2, 1, 2), 'descr': '<f4', 'fortran_order': False}" words 4
npy x-v3.npy 3 "{\"fortran_order\":False,\"descr\":\"<f4\",\"shape\":(2,3,)}" words 6
npy empty.npy 1 "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3), }" true
npy rank6.npy 1 "{'descr': '<i4', 'fortran_order': False, 'shape': (1, 1, 2, 1, 1, 1), }" words 2

# ---- quant: a type byte (0 q8_0, 1 q4_0, 2 q4_k, 3 q6_k), then blocks --------------
# bytes N FIRST STEP: N bytes FIRST, FIRST + STEP, ... (mod 256)
bytes() { i=0; while [ $i -lt "$1" ]; do byte $((($2 + i * $3) & 255)); i=$((i + 1)); done; }
{ byte 0; le16 0x3800; bytes 32 0 7; } >$C/quant/q8_0.bin                 # d 0.5
{ byte 1; le16 0xb800; bytes 16 0 17; } >$C/quant/q4_0.bin                # d -0.5
{ byte 2; le16 0x1400; le16 0x1c00; bytes 12 0x41 37; bytes 128 0 29; } >$C/quant/q4_k.bin
{ byte 2; le16 0x1400; le16 0x7c00; bytes 140 3 5; } >$C/quant/q4_k-inf-dmin.bin
{ byte 3; bytes 192 0 13; bytes 16 0x80 9; le16 0x9400; } >$C/quant/q6_k.bin   # d -2^-10
{ byte 2; words 256; } >$C/quant/q4_k-floats.bin

# ---- gguf: a hand-written file, and the writer's of every KV and tensor type ----
KILN_GGUF_SEEDS=$C/gguf "${TEST_GGUF:-build/tests/test_gguf}" >/dev/null

# ---- tokenizer: GGUF tokenizers, SentencePiece's and byte-level -------------------
KILN_TOK_SEEDS=$C/tokenizer "${TEST_TOK_GGUF:-build/tests/test_tok_gguf}" >/dev/null
