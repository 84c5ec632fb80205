#!/bin/sh
# examples/demo.sh (make demo): kiln's main job on the shipped examples,
# then on a Hugging Face folder.
#   1. build a per-model executable with cc: one llama2.c stories15M decode step;
#   2. run it: seeded token and position, random weights from each weight's init;
#   3. JIT-compile another example in memory with libtcc and run it;
#   4. check that the reference, the cc build and the JIT agree;
#   5. make a tiny Hugging Face llama folder with the test tools (mkckpt:
#      config.json, random weights, a tokenizer.json), build it into an
#      executable and generate text from a prompt with the folder's tokenizer;
#   6. generate the same under the JIT, from the folder alone.
# $MKCKPT names the test tool (default build/tests/mkckpt; `make demo` builds it).
set -eu
cd "$(dirname "$0")/.."
MKCKPT=${MKCKPT:-build/tests/mkckpt}
out=build/demo
mkdir -p "$out"
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }

echo "== 1. kiln build examples/llama2-step.json -o $out/llama2_step"
t=$(date +%s%N)
./kiln build examples/llama2-step.json -o "$out/llama2_step"
echo "   built in $(ms "$t") ms: $(du -h "$out/llama2_step" | cut -f1) executable"

echo "== 2. $out/llama2_step --seed 7 --repeat 20   (token and pos seeded; weights from init)"
t=$(date +%s%N)
"$out/llama2_step" --seed 7 --repeat 20
echo "   ran in $(ms "$t") ms, weight set-up included"

echo "== 3. kiln run examples/gpt2-block.json --verbose --repeat 3   (libtcc, in memory)"
t=$(date +%s%N)
./kiln run examples/gpt2-block.json --verbose --repeat 3
echo "   compiled and ran in $(ms "$t") ms"

echo "== 4. kiln check examples/llama2-step.json   (reference vs cc build vs JIT)"
t=$(date +%s%N)
./kiln check examples/llama2-step.json
echo "   checked in $(ms "$t") ms"

hf=$out/tiny-llama
echo "== 5. $MKCKPT hf llama $hf   (a Hugging Face folder: 2 layers, vocab 320, random weights)"
"$MKCKPT" hf llama "$hf"
echo "   $(ls "$hf" | tr '\n' ' ')"
echo "== 6. kiln build $hf -o $out/tiny   (the folder imported in memory, then cc)"
t=$(date +%s%N)
./kiln build "$hf" -o "$out/tiny"
echo "   built in $(ms "$t") ms"
gen="generate --prompt \"the cat sat on the mat\" -n 16 --temperature 0"
echo "== 7. $out/tiny $gen   (the folder's weights and tokenizer.json, remembered by the build)"
echo "   (the prompt's text, then the 16 greedy tokens'; the weights are random, so the tokens are noise)"
"$out/tiny" generate --prompt "the cat sat on the mat" -n 16 --temperature 0 2>"$out/tiny.err" ||
    { cat "$out/tiny.err" >&2; exit 1; }
sed 's/^/   /' "$out/tiny.err"
echo "== 8. kiln run $hf $gen   (the JIT; the folder's own weights and tokenizer.json)"
./kiln run "$hf" generate --prompt "the cat sat on the mat" -n 16 --temperature 0 2>"$out/tiny.err" ||
    { cat "$out/tiny.err" >&2; exit 1; }
sed 's/^/   /' "$out/tiny.err"
