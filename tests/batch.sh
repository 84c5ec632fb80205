#!/bin/sh
# tests/batch.sh: slotted decoders (kiln import/build --slots N) and their
# batched decode. kiln check compares the reference, the cc build and the
# JIT of slotted llama, qwen2, gpt2, mistral (a sliding window) and
# gpt_oss (sinks, a window) folders at 1 and 5 tokens a call, each row its
# own random slot and position. A
# program built with --slots 4 (prefill chunks of 6) decodes K = 2, 3, 4
# sequences together (`generate --sequences K`, sequence k from the prompt
# less its last k tokens, so that rows of one batch call sit at different
# positions; K = 3 pads the batch): each sequence's greedy tokens equal a
# run of its prompt alone, and the slotted program's one sequence equals
# the unslotted build's; under the JIT too. Misuse is refused in one line.
set -u
cd "$(dirname "$0")/.." || exit 2
KILN=${KILN:-./kiln}
MKCKPT=${MKCKPT:-build/tests/mkckpt}
. tests/lib.sh
scratch batch

for type in llama qwen2 gpt2 mistral gpt_oss; do
    "$MKCKPT" hf "$type" "$T/$type" >/dev/null || bad "mkckpt $type"
    for t in 1 5; do
        run "$type: kiln check --slots 3 --tokens $t" "$KILN" check "$T/$type" --slots 3 \
            --tokens "$t" --seed 5
    done
done

run "build --slots 4 --chunk 6" "$KILN" build "$T/llama" --slots 4 --chunk 6 -o "$T/slots"
run "build unslotted" "$KILN" build "$T/llama" --chunk 6 -o "$T/plain"
P=3,14,15,92,65,35,89,79,32,38
"$T/plain" generate --tokens "$P" -n 20 --temperature 0 >"$T/plain.out" 2>/dev/null
"$T/slots" generate --tokens "$P" -n 20 --temperature 0 >"$T/one.out" 2>"$T/err"
if [ -s "$T/plain.out" ] && cmp -s "$T/plain.out" "$T/one.out"; then
    ok "one sequence: slotted = unslotted"
else
    bad "one sequence: slotted = unslotted"; cat "$T/plain.out" "$T/one.out" "$T/err"
fi
: >"$T/want"
for k in 0 1 2 3; do
    p=$(echo "$P" | cut -d, -f1-$((10 - k)))
    "$T/plain" generate --tokens "$p" -n 20 --temperature 0 >>"$T/want" 2>/dev/null
done
for K in 2 3 4; do
    "$T/slots" generate --tokens "$P" -n 20 --temperature 0 --sequences "$K" >"$T/got" 2>"$T/err"
    head -n "$K" "$T/want" >"$T/wantK"
    if cmp -s "$T/wantK" "$T/got" && grep -q "$K sequences" "$T/err"; then
        ok "--sequences $K: each = its prompt alone"
    else
        bad "--sequences $K: each = its prompt alone"; cat "$T/wantK" "$T/got" "$T/err"
    fi
done
"$KILN" run "$T/llama" --slots 4 --chunk 6 generate --tokens "$P" -n 20 --temperature 0 \
    --sequences 4 >"$T/got" 2>"$T/err"
if cmp -s "$T/want" "$T/got"; then ok "JIT --sequences 4"; else bad "JIT --sequences 4"; cat "$T/err"; fi
"$T/slots" generate --prompt "the cat sat" -n 6 --temperature 0 --sequences 2 >"$T/got" 2>"$T/err"
if [ "$(wc -l <"$T/got")" = 2 ] && grep -q "^the cat" "$T/got"; then
    ok "--sequences with a tokenizer: a line a sequence"
else
    bad "--sequences with a tokenizer: a line a sequence"; cat "$T/got" "$T/err"
fi

refuse 2 "more sequences than slots" "decodes 4 at once" \
    "$T/slots" generate --tokens "$P" --sequences 5
refuse 2 "--sequences on an unslotted program" "decodes 1 at once" \
    "$T/plain" generate --tokens "$P" --sequences 2
refuse 2 "more sequences than prompt tokens" "one for each sequence" \
    "$T/slots" generate --tokens 3,4 --sequences 3
refuse 2 "--slots on a JSON graph" "--slots apply to a model folder" \
    "$KILN" build tests/models/linear.json --slots 2 -o "$T/never"
refuse 2 "--slots 0" "--slots takes a count" "$KILN" import hf "$T/llama" --slots 0

[ "$fails" = 0 ]
