#!/bin/sh
# examples/demo.sh (make demo): kiln's main job on the shipped examples.
#   1. build a per-model executable with cc: one llama2.c stories15M decode step;
#   2. run it: seeded token and position, random weights from each weight's init;
#   3. JIT-compile another example in memory with libtcc and run it;
#   4. check that the reference, the cc build and the JIT agree.
set -eu
cd "$(dirname "$0")/.."
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
