#!/bin/sh
# tests/generate.sh: a decoder's shape variants and `generate`, through
# the cc build and `kiln run`. A tiny Hugging Face llama folder ($MKCKPT:
# vocab 320, KV cache of 64 rows, untied, so greedy tokens vary) is the
# model; $REFGEN decodes greedily through the reference interpreter, one
# token a call, which every build must equal token for token: built with
# prefill chunks of 6 (the chunks laid out from the prompt's end: prompts
# of one padded chunk and a decode step, of a decode step and whole
# chunks, of a padded chunk and whole chunks, and one that fills the cache;
# --prefill-min 2: a chunk for 2 tokens or more before the whole chunks),
# decode-only (--chunk 1), the default chunk
# (the cache's 64 rows) from the folder itself, and the JIT; a chunk of
# 128 with the rest's of 32 (four layouts); GPT-2, gemma, gemma2,
# gemma3_text, mistral, mixtral, phi3, qwen3 and qwen3_moe folders under
# the JIT too, and with their own
# tokenizer.json qwen3_moe, gpt2 (byte-level), llama and mistral
# (SentencePiece-style). Sampling is reproducible from its seed; the
# tokenizer path prints the prompt's text, from --prompt or --prompt-file.
# A program built from a folder opens its weights and tokenizer.json by
# default, and says so in one line when the folder has moved; a full KV
# cache is said; stdout's errors are (a full disk: exit 3), a closed pipe
# ends it quietly. --repeat generates again in the same process, alike.
# kiln bench's table and JSON. Misuse is refused with one line.
set -u
cd "$(dirname "$0")/.." || exit 2
KILN=${KILN:-./kiln}
MKCKPT=${MKCKPT:-build/tests/mkckpt}
REFGEN=${REFGEN:-build/tests/refgen}
. tests/lib.sh
scratch generate

mkdir "$T/hf"
run "mkckpt hf llama" "$MKCKPT" hf llama "$T/hf"
run "import hf" "$KILN" import hf "$T/hf" -o "$T/m.json"
W=$T/hf/model.safetensors
run "build --chunk 6 (decode and prefill variants)" "$KILN" build "$T/m.json" -o "$T/c6" --chunk 6 -v
grep -q "decoder variants: decode (1 token" "$T/err" && ok "  said: two variants" || bad "  said: two variants"
run "build --chunk 1 (decode only)" "$KILN" build "$T/m.json" -o "$T/c1" --chunk 1
run "emit-c --chunk 100 (past the cache)" "$KILN" emit-c "$T/m.json" -o "$T/c100.c" --chunk 100
grep -q "chunk 100 is more than the KV cache's 64 rows: prefill chunks of 64" "$T/err" &&
    ok "  said: chunks of the cache's 64 rows" || bad "  said: chunks of the cache's 64 rows"
run "build the folder (default chunk 64)" "$KILN" build "$T/hf" -o "$T/c64"
# A decoder's program carries the generation, GGUF and attention parts;
# an MLP block's carries none of them.
grep -q "Runtime parts: core gguf attn gen\." "$T/c100.c" && grep -q "^RT_API int rt_generate(" "$T/c100.c" &&
    ok "emit-c of a decoder: the runtime's core, gguf, attn and gen parts" ||
    bad "emit-c of a decoder: core, gguf, attn and gen parts"
"$KILN" emit-c examples/mlp.json -o "$T/mlp.c"
grep -q "Runtime parts: core\." "$T/mlp.c" &&
    ! grep -q "^RT_API int rt_generate(\|rt_tok_open(\|rt_gguf_open(\|rt_attn(" "$T/mlp.c" &&
    ok "emit-c of a block: the core part alone" || bad "emit-c of a block: the core part alone"

# prompt NAME LENGTH N: the reference's greedy tokens, then every build's.
prompt() {
    name=$1 len=$2 n=$3
    P=$(seq -s, 7 $((len + 6)))
    if ! "$REFGEN" "$T/m.json" "$W" --tokens "$P" -n "$n" >"$T/$name.want" 2>"$T/err"; then
        bad "refgen $name"; cat "$T/err"; return
    fi
    for exe in c6 c1 c64; do
        same "$name: $exe greedy = reference ($(cat "$T/$name.want" | wc -w) tokens)" "$T/$name.want" \
            "$T/$exe" generate --tokens "$P" -n "$n" --temperature 0 --weights "$W" --prefill-min 2
    done
    same "$name: c64, prefill-min by costs, greedy = reference" "$T/$name.want" \
        "$T/c64" generate --tokens "$P" -n "$n" --temperature 0 --weights "$W"
    same "$name: kiln run --chunk 6 greedy = reference" "$T/$name.want" \
        "$KILN" run "$T/m.json" --chunk 6 generate --tokens "$P" -n "$n" --temperature 0 --weights "$W" \
        --prefill-min 2
}
prompt "1 token" 1 12
prompt "5 tokens (a chunk of 4 padded, a decode step)" 5 12
prompt "19 tokens (a decode step, 3 whole chunks)" 19 16
prompt "22 tokens (a chunk of 4 padded, 3 whole chunks)" 22 8
prompt "62 tokens (a chunk of 2 padded, 10 whole chunks; stops at 64)" 62 8

# A chunk of 128 tokens and, for the rest of a prompt, one of 32 (a KV
# cache of 192 rows): each layout of the two against the reference.
run "import hf --max-seq 192" "$KILN" import hf "$T/hf" --max-seq 192 -o "$T/m192.json"
run "build --chunk 128 (and the rest's of 32)" "$KILN" build "$T/m192.json" -o "$T/c128" \
    --chunk 128 -v
grep -q "prefill (128 tokens, [0-9]* kernels) and the prompt's rest (32 tokens" "$T/err" &&
    ok "  said: a chunk of 128 and the rest's of 32" ||
    bad "  said: a chunk of 128 and the rest's of 32"
rest() {
    name=$1 len=$2
    P=$(seq -s, 7 $((len + 6)))
    if ! "$REFGEN" "$T/m192.json" "$W" --tokens "$P" -n 6 >"$T/rest.want" 2>"$T/err"; then
        bad "refgen $name"; cat "$T/err"; return
    fi
    same "$name: greedy = reference" "$T/rest.want" \
        "$T/c128" generate --tokens "$P" -n 6 --temperature 0 --weights "$W" --prefill-min 2
}
rest "20 tokens (a rest's chunk padded, a decode step)" 20
rest "40 tokens (8 in a rest's chunk padded, a whole one)" 40
rest "128 tokens (a whole chunk)" 128
rest "165 tokens (5 in a rest's chunk padded, a whole one, a chunk)" 165
"$T/c128" generate --tokens "$(seq -s, 7 171)" -n 1 --temperature 0 --weights "$W" \
    --prefill-min 2 >/dev/null 2>"$T/err"
grep -q "prefill: 165 tokens in .* (chunks of 128 and 32)" "$T/err" &&
    ok "  said: chunks of 128 and 32" || { bad "  said: chunks of 128 and 32"; cat "$T/err"; }

# --repeat 3: the same generation three times in one process, each from
# an empty cache (sampled, so the seed restarts too): the reference's ids
# each time, and three rates lines; refused beside --sequences.
P=$(seq -s, 7 46)
"$REFGEN" "$T/m192.json" "$W" --tokens "$P" -n 6 >"$T/rest.want" 2>/dev/null
{ cat "$T/rest.want"; cat "$T/rest.want"; cat "$T/rest.want"; } >"$T/rep.want"
"$T/c128" generate --tokens "$P" -n 6 --temperature 0 --weights "$W" --prefill-min 2 \
    --repeat 3 >"$T/out" 2>"$T/err"
"$T/c128" generate --tokens "$P" -n 6 --weights "$W" --seed 5 >"$T/s1" 2>/dev/null
"$T/c128" generate --tokens "$P" -n 6 --weights "$W" --seed 5 --repeat 2 >"$T/s2" 2>/dev/null
if cmp -s "$T/out" "$T/rep.want" && [ "$(grep -c "prefill: 40 tokens in" "$T/err")" = 3 ] &&
   [ -s "$T/s1" ] && cat "$T/s1" "$T/s1" | cmp -s - "$T/s2"; then
    ok "generate --repeat 3: the reference's ids three times, three rates lines; sampled --repeat 2 twice alike"
else
    bad "generate --repeat"; cat "$T/out" "$T/err"
fi
refuse 2 "generate --repeat 0" "--repeat: bad value '0'" \
    "$T/c128" generate --tokens 7 --weights "$W" --repeat 0

# The other model types, under the JIT: 11 tokens in chunks of 4.
for type in gpt2 gemma gemma2 gemma3_text mistral mixtral phi3 qwen3 qwen3_moe; do
    mkdir "$T/$type"
    "$MKCKPT" hf $type "$T/$type" >/dev/null 2>&1 && "$KILN" import hf "$T/$type" -o "$T/$type.json" &&
        "$REFGEN" "$T/$type.json" "$T/$type/model.safetensors" --tokens 5,6,7,8,9,10,11,12,13,14,15 \
            -n 10 >"$T/$type.want" || bad "$type: mkckpt, import, refgen"
    same "$type: kiln run DIR --chunk 4 greedy = reference" "$T/$type.want" \
        "$KILN" run "$T/$type" --chunk 4 generate --tokens 5,6,7,8,9,10,11,12,13,14,15 -n 10 --temperature 0 \
        --prefill-min 2
done

# A sliding window of 5 rows (mistral's): 11 prompt tokens in chunks of 4,
# then 12 decode steps, each query seeing its last 5 rows, through the JIT
# and a cc build, equal to the reference.
mkdir "$T/window"
"$MKCKPT" hf mistral "$T/window" --config '"sliding_window": 5' >/dev/null 2>&1 &&
    "$KILN" import hf "$T/window" -o "$T/window.json" && grep -q '"window": 5' "$T/window.json" &&
    "$REFGEN" "$T/window.json" "$T/window/model.safetensors" --tokens 5,6,7,8,9,10,11,12,13,14,15 \
        -n 12 >"$T/window.want" || bad "window: mkckpt, import, refgen"
same "window: kiln run DIR --chunk 4 greedy = reference" "$T/window.want" \
    "$KILN" run "$T/window" --chunk 4 generate --tokens 5,6,7,8,9,10,11,12,13,14,15 -n 12 --temperature 0 \
    --prefill-min 2
run "window: build --chunk 4" "$KILN" build "$T/window" -o "$T/cw" --chunk 4
same "window: cc build greedy = reference" "$T/window.want" \
    "$T/cw" generate --tokens 5,6,7,8,9,10,11,12,13,14,15 -n 12 --temperature 0 \
    --weights "$T/window/model.safetensors" --prefill-min 2

# The same tokens through both flavours when sampling, and again.
P=3,1,4,1,5,9,2,6
"$T/c6" generate --tokens $P -n 20 --temperature 0.9 --topp 0.8 --seed 42 --weights "$W" >"$T/s.want" 2>/dev/null
same "sampled (seed 42): the same again" "$T/s.want" \
    "$T/c6" generate --tokens $P -n 20 --temperature 0.9 --topp 0.8 --seed 42 --weights "$W" --threads 1
same "sampled (seed 42): decode-only build the same" "$T/s.want" \
    "$T/c1" generate --tokens $P -n 20 --temperature 0.9 --topp 0.8 --seed 42 --weights "$W"
same "sampled (seed 42): kiln run the same" "$T/s.want" \
    "$KILN" run "$T/hf" --chunk 6 generate --tokens $P -n 20 --temperature 0.9 --topp 0.8 --seed 42
"$T/c6" generate --tokens $P -n 20 --temperature 0.9 --topp 0.8 --seed 43 --weights "$W" >"$T/s43" 2>/dev/null
cmp -s "$T/s.want" "$T/s43" && bad "sampled: another seed, other tokens" || ok "sampled: another seed, other tokens"
"$T/c6" generate --tokens $P -n 20 --temperature 1 --topp 0.9 --weights "$W" >"$T/out" 2>"$T/err"
grep -q "prefill: 8 tokens in .* tokens/s (chunks of 6); decode: 20 tokens in .* tokens/s" "$T/err" &&
    ok "tokens per second on stderr" || { bad "tokens per second on stderr"; cat "$T/err"; }

# With a tokenizer: llama2.c's tokenizer.bin, written by $REFGEN.
run "refgen tokenizer" "$REFGEN" tokenizer "$T/tok.bin" 320
"$T/c6" generate --tokenizer "$T/tok.bin" --prompt "the cat sat on the mat" -n 12 --temperature 0 \
    --weights "$W" >"$T/text" 2>"$T/err" && grep -q "^the cat sat on the mat" "$T/text" &&
    ok "tokenizer: the prompt's text, then the tokens'" || { bad "tokenizer: the prompt's text"; cat "$T/text" "$T/err"; }
same "tokenizer: kiln run prints the same" "$T/text" "$KILN" run "$T/m.json" generate \
    --tokenizer "$T/tok.bin" --prompt "the cat sat on the mat" -n 12 --temperature 0 --weights "$W"

# With a folder's own tokenizer.json (mkckpt writes one of the model's
# vocab: byte-level BPE, Qwen2's pre-tokenizer for qwen3_moe, GPT-2's):
# the cc build of the folder and kiln run print the same text.
run "build the qwen3_moe folder" "$KILN" build "$T/qwen3_moe" -o "$T/moe"
"$T/moe" generate --tokenizer "$T/qwen3_moe/tokenizer.json" --prompt "the cat sat on the mat" \
    --weights "$T/qwen3_moe/model.safetensors" \
    -n 12 --temperature 0 >"$T/text" 2>"$T/err" && grep -aq "^the cat sat on the mat" "$T/text" &&
    ok "qwen3_moe tokenizer.json: the prompt's text, then the tokens'" ||
    { bad "qwen3_moe tokenizer.json: the prompt's text"; cat "$T/text" "$T/err"; }
grep -q "prefill: 10 tokens" "$T/err" && ok "  the prompt is 10 tokens (no BOS)" || bad "  the prompt is 10 tokens"
same "  kiln run prints the same" "$T/text" "$KILN" run "$T/qwen3_moe" generate \
    --tokenizer "$T/qwen3_moe/tokenizer.json" --prompt "the cat sat on the mat" -n 12 --temperature 0
"$KILN" run "$T/gpt2" generate --tokenizer "$T/gpt2/tokenizer.json" --prompt "the cat sat" -n 8 \
    --temperature 0 >"$T/text" 2>"$T/err" && grep -aq "^the cat sat" "$T/text" &&
    ok "gpt2 tokenizer.json: the prompt's text, then the tokens'" ||
    { bad "gpt2 tokenizer.json: the prompt's text"; cat "$T/text" "$T/err"; }
# SentencePiece-style: llama's (Llama 2's normalizer), through the cc
# build and kiln run; mistral's (a Metaspace) under the JIT, which takes
# the folder's tokenizer.json for a --prompt by itself. BOS first.
"$T/c64" generate --tokenizer "$T/hf/tokenizer.json" --prompt "the cat sat on the mat" -n 12 \
    --temperature 0 --weights "$W" >"$T/text" 2>"$T/err" && grep -aq "^the cat sat on the mat" "$T/text" &&
    ok "llama tokenizer.json: the prompt's text, then the tokens'" ||
    { bad "llama tokenizer.json: the prompt's text"; cat "$T/text" "$T/err"; }
# BOS, then _t he _c at _s at _on _t he _m at: "_t" is merged before "th"
grep -q "prefill: 12 tokens" "$T/err" && ok "  the prompt is 12 tokens (BOS and 11)" ||
    { bad "  the prompt is 12 tokens"; cat "$T/err"; }
same "  kiln run prints the same" "$T/text" "$KILN" run "$T/hf" generate \
    --tokenizer "$T/hf/tokenizer.json" --prompt "the cat sat on the mat" -n 12 --temperature 0
"$KILN" run "$T/mistral" generate --prompt "The cat sat" \
    -n 8 --temperature 0 >"$T/text" 2>"$T/err" && grep -aq "^The cat sat" "$T/text" &&
    grep -q "prefill: 8 tokens" "$T/err" &&
    ok "mistral tokenizer.json: the prompt's text (BOS _ <0x54> he _c at _s at), then the tokens'" ||
    { bad "mistral tokenizer.json: the prompt's text"; cat "$T/text" "$T/err"; }
"$KILN" run "$T/gemma" generate --prompt "The cat sat" -n 8 --temperature 0 >"$T/text" 2>"$T/err" &&
    grep -aq "^The cat sat" "$T/text" && grep -q "prefill: 7 tokens" "$T/err" &&
    ok "gemma tokenizer.json: the prompt's text (BOS <0x54> he _c at _s at: no _ first)" ||
    { bad "gemma tokenizer.json: the prompt's text"; cat "$T/text" "$T/err"; }

# A program built from a folder remembers its weights and tokenizer.json
# (absolute paths): c64 was built from $T/hf, and prints the same text
# without --weights and --tokenizer; --weights takes a folder too.
"$T/c64" generate --tokenizer "$T/hf/tokenizer.json" --prompt "the cat sat on the mat" -n 12 \
    --temperature 0 --weights "$W" >"$T/text" 2>/dev/null
same "a folder's build: its weights and tokenizer by default" "$T/text" \
    "$T/c64" generate --prompt "the cat sat on the mat" -n 12 --temperature 0
same "  --weights DIR: the folder's model.safetensors" "$T/text" "$T/c64" generate \
    --tokenizer "$T/hf/tokenizer.json" --prompt "the cat sat on the mat" -n 12 --temperature 0 \
    --weights "$T/hf/"
run "  --version" "$T/c64" --version
HF=$(cd "$T/hf" && pwd -P)
grep -q "^model 'llama', generated by kiln [0-9]" "$T/out" && grep -q "^built with: .*-O3" "$T/out" &&
    grep -qx "weights: $HF/model.safetensors" "$T/out" && grep -qx "tokenizer: $HF/tokenizer.json" "$T/out" &&
    ok "  says the model, kiln's version, the build flags and the folder's files" ||
    { bad "  says the model, kiln's version, the build flags and the folder's files"; cat "$T/out"; }
run "kiln run DIR --version" "$KILN" run "$T/hf" --version
grep -q "^built with: the JIT: libtcc" "$T/out" && ok "  says it is the JIT" || { bad "  says it is the JIT"; cat "$T/out"; }
"$KILN" emit-c "$T/hf" -o "$T/hf.c" 2>/dev/null
grep -A2 ', KILN_BUILD_FLAGS,$' "$T/hf.c" | sed 1d >"$T/files"
printf '    "%s",\n' "$HF/model.safetensors" "$HF/tokenizer.json" | cmp -s - "$T/files" &&
    grep -q '^#define KILN_BUILD_FLAGS "-O3' "$T/hf.c" &&
    ok "emit-c DIR: the folder's files and the default build flags in the descriptor" ||
    bad "emit-c DIR: the folder's files and the default build flags in the descriptor"
mkdir "$T/mv"
cp "$T/hf/config.json" "$T/hf/model.safetensors" "$T/hf/tokenizer.json" "$T/mv/"
run "build a folder that then moves" "$KILN" build "$T/mv" -o "$T/cmv" --chunk 1
same "  before it moves: its files" "$T/text" \
    "$T/cmv" generate --prompt "the cat sat on the mat" -n 12 --temperature 0
mv "$T/mv" "$T/moved"
refuse 3 "  moved: generate names the weights it remembers" \
    "$T/mv/model.safetensors: cannot read the weights this program was built with (No such file or directory): was it moved or deleted? pass --weights FILE or DIR" \
    "$T/cmv" generate --tokens 1,2 -n 2
refuse 3 "  moved: a run too" "$T/mv/model.safetensors: cannot read the weights" "$T/cmv"
refuse 3 "  moved: and the tokenizer" \
    "$T/mv/tokenizer.json: cannot read the tokenizer this program was built with (No such file or directory): was its folder moved or deleted? pass --tokenizer FILE" \
    "$T/cmv" generate --prompt "the cat" --weights "$T/moved"
same "  moved: --weights DIR and --tokenizer FILE" "$T/text" "$T/cmv" generate --weights "$T/moved" \
    --tokenizer "$T/moved/tokenizer.json" --prompt "the cat sat on the mat" -n 12 --temperature 0

# --prompt-file FILE, or - for stdin: the prompt less one final line break.
printf 'the cat sat on the mat\n' >"$T/prompt.txt"
same "--prompt-file: as --prompt" "$T/text" \
    "$T/c64" generate --prompt-file "$T/prompt.txt" -n 12 --temperature 0
same "--prompt-file -: stdin" "$T/text" \
    sh -c '"$1" generate --prompt-file - -n 12 --temperature 0 <"$2"' sh "$T/c64" "$T/prompt.txt"
same "  kiln run DIR --prompt-file: the folder's tokenizer" "$T/text" \
    "$KILN" run "$T/hf" generate --prompt-file "$T/prompt.txt" -n 12 --temperature 0
refuse 3 "--prompt-file: a file that is not there" "$T/none.txt: cannot open: No such file or directory" \
    "$T/c64" generate --prompt-file "$T/none.txt"
printf 'the\0cat' >"$T/nul.txt"
refuse 1 "--prompt-file: a NUL byte" "$T/nul.txt: byte 3 is NUL: a prompt is text" \
    "$T/c64" generate --prompt-file "$T/nul.txt"
printf 'the \377 cat' >"$T/latin.txt"
refuse 1 "--prompt-file: not UTF-8, named" "$T/latin.txt: the text is not valid UTF-8 at byte 4" \
    "$T/c64" generate --prompt-file "$T/latin.txt"
refuse 2 "--prompt and --prompt-file" "give --prompt TEXT or --prompt-file FILE, not both" \
    "$T/c64" generate --prompt-file "$T/prompt.txt" --prompt "x"
refuse 2 "--prompt-file without a tokenizer" "--prompt-file needs --tokenizer FILE" \
    "$T/c6" generate --prompt-file "$T/prompt.txt" --weights "$W"

# A full KV cache is said; as many tokens as asked for are not.
"$T/c6" generate --tokens "$(seq -s, 7 68)" -n 8 --temperature 0 --weights "$W" >"$T/out" 2>"$T/err"
grep -q "generate: stopped after 3 of 8 tokens: the KV cache holds 64 positions (--max-seq at import)" "$T/err" &&
    [ "$(wc -w <"$T/out")" = 3 ] && ok "a full KV cache is said on stderr" ||
    { bad "a full KV cache is said on stderr"; cat "$T/err"; }
"$KILN" run "$T/hf" generate --tokens "$(seq -s, 7 68)" -n 8 --temperature 0 >"$T/out" 2>"$T/err"
grep -q "stopped after 3 of 8 tokens" "$T/err" && ok "  by kiln run too" || { bad "  by kiln run too"; cat "$T/err"; }
"$T/c6" generate --tokens "$(seq -s, 7 68)" -n 3 --temperature 0 --weights "$W" >"$T/out" 2>"$T/err"
grep -q "stopped" "$T/err" && bad "  not when -n tokens were drawn" || ok "  not when -n tokens were drawn"

# Writes to stdout are checked: a full disk is one line, exit 3; a reader
# that has gone ends generation quietly: SIGPIPE, as for cat, or where it
# is ignored, exit 0.
for how in cc jit; do
    prog="$T/c64" && [ $how = jit ] && prog="$KILN run $T/hf"
    $prog generate --prompt "the cat" -n 4 >/dev/full 2>"$T/err"
    st=$?
    [ "$st" = 3 ] && [ "$(wc -l <"$T/err")" = 1 ] &&
        grep -q "generate: cannot write to stdout: No space left on device" "$T/err" &&
        ok "$how: stdout on a full disk: exit 3, one line" ||
        { bad "$how: stdout on a full disk: exit $st, one line"; cat "$T/err"; }
    # the reader exits at once; the writer starts after it has
    (trap '' PIPE; { sleep 0.5; $prog generate --tokens 1,2 -n 40 2>"$T/err"; echo $? >"$T/st"; } | true)
    [ "$(cat "$T/st")" = 0 ] && [ ! -s "$T/err" ] &&
        ok "$how: a closed pipe, SIGPIPE ignored: exit 0, nothing said" ||
        { bad "$how: a closed pipe, SIGPIPE ignored: exit $(cat "$T/st"), nothing said"; cat "$T/err"; }
done
{ sleep 0.5; "$T/c64" generate --tokens 1,2 -n 40 2>"$T/err"; echo $? >"$T/st"; } | true
[ "$(cat "$T/st")" = 141 ] && [ ! -s "$T/err" ] && ok "a closed pipe: SIGPIPE, nothing said" ||
    { bad "a closed pipe: exit $(cat "$T/st") (want 141), nothing said"; cat "$T/err"; }
{ "$T/c64" generate --prompt "the cat sat on the mat" -n 40 2>"$T/err"; echo $? >"$T/st"; } | head -c 10 >"$T/out"
case $(cat "$T/st") in 0|141) st=ok ;; *) st=bad ;; esac
[ "$st" = ok ] && [ "$(wc -c <"$T/out")" = 10 ] && ! grep -qv "prefill: " "$T/err" &&
    ok "| head -c 10: quiet" || { bad "| head -c 10: exit $(cat "$T/st"), quiet"; cat "$T/err"; }

refuse 2 "no prompt" "give --tokens IDS" "$T/c6" generate -n 3 --weights "$W"
refuse 2 "unknown option" "unknown argument '--bogus'" "$T/c6" generate --tokens 1 --bogus
refuse 2 "bad temperature" "--temperature: bad value '-1'" "$T/c6" generate --tokens 1 --temperature -1
refuse 1 "a token past the vocabulary" "not a list of ids in [0, 320)" "$T/c6" generate --tokens 1,320 --weights "$W"
refuse 1 "a prompt past the cache" "more than the cache's 64 rows" \
    "$T/c6" generate --tokens "$(seq -s, 1 65)" --weights "$W"
refuse 1 "not a decoder" "is not a decoder" "$KILN" run examples/mlp.json generate --tokens 1
run "generate --help" "$T/c6" generate --help
grep -q "^usage: .*generate (--tokens" "$T/out" && grep -q -- "--topp P" "$T/out" &&
    ok "  prints generate's usage on stdout" || bad "  prints generate's usage on stdout"

# Profiles: generate --profile times the prefill variant's kernels (NAME@6)
# and the decode step's; kiln profile of a decoder runs generate so.
run "generate --profile" "$T/c6" generate --tokens 5,6,7,8,9,10,11,12,13,14 -n 4 --temperature 0 \
    --weights "$W" --profile "$T/gen.jsonl"
grep -q '"name": "gqa_prefill[a-z0-9_]*@6", "kernels": \[[^]]*\], "calls": [1-9]' "$T/gen.jsonl" &&
   grep -q '"name": "gqa_decode[a-z0-9_]*", "kernels": \[[^]]*\], "calls": [1-9]' "$T/gen.jsonl" &&
    ok "  prefill (@6) and decode kernels timed" || { bad "  prefill (@6) and decode kernels timed"; head -3 "$T/gen.jsonl"; }
# Attention counts what it computed, not every row against the cache's 64
# (4 FLOPs a key, head dimension and query head: 4 x 16 x 4 = 256 a key):
# 7 tokens are a decode step at 0 (1 key), a chunk at 1-6 (2 + ... + 7 =
# 27 keys: 6912), then decode steps at 7, 8, 9 (8, 9, 10 keys), 4 steps
# of 7 keys on average (1792); the bound would be 98304 and 16384.
run "generate --profile: attention's FLOPs" "$T/c6" generate --tokens 5,6,7,8,9,10,11 -n 4 \
    --temperature 0 --weights "$W" --profile "$T/att.jsonl"
grep -q '"name": "gqa_prefill[a-z0-9_]*@6", "kernels": \[[^]]*\], "calls": 2, [^}]*"flops": 6912,' "$T/att.jsonl" &&
   grep -q '"name": "gqa_decode[a-z0-9_]*", "kernels": \[[^]]*\], "calls": 8, [^}]*"flops": 1792,' "$T/att.jsonl" &&
    ok "  the keys each row saw: 6912 a prefill call, 1792 a decode step" ||
    { bad "  the keys each row saw: 6912 a prefill call, 1792 a decode step"; grep gqa "$T/att.jsonl"; }
run "kiln profile of a decoder" "$KILN" profile "$T/hf"
grep -q "^kiln profile: llama, cc build, generate on [0-9]* threads: 1 prefill calls (the kernels @) .* ms in the kernels, 16 decode steps" "$T/out" &&
   grep -q "^gqa_prefill_[a-z0-9_]*@64 " "$T/out" && grep -q "^gqa_decode_[a-z0-9_]* " "$T/out" &&
    ok "  generate's prefill (48 ids: a chunk of 47, its last a decode step) and 16 tokens: both variants' kernels" ||
    { bad "  generate's prefill and decode kernels"; cat "$T/out"; }

# Fewer tokens before a prompt's whole chunks than a chunk is worth
# (--prefill-min's default, from the kernels' costs, said by --help) go
# through decode steps; that many take a chunk. A prompt shorter than a
# chunk has all but its last token before them.
R=$("$T/c64" generate --help | sed -n 's/.*a padded chunk (default \([0-9]*\):$/\1/p')
chunk_calls() { # chunk_calls LEN: prefill calls of a LEN-token prompt
    "$T/c64" generate --tokens "$(seq -s, 7 $(($1 + 6)))" -n 1 --temperature 0 --weights "$W" \
        --profile "$T/pm.jsonl" >/dev/null 2>&1 &&
        sed -n 's/.*"name": "embedding_[a-z0-9_]*@64", "kernels": \[[^]]*\], "calls": \([0-9]*\).*/\1/p' \
            "$T/pm.jsonl"
}
if [ -n "$R" ] && [ "$R" -ge 2 ] && [ "$R" -le 63 ] &&
   [ "$(chunk_calls "$R")" = 0 ] && [ "$(chunk_calls $((R + 1)))" = 1 ]; then
    ok "--prefill-min's default ($R, by the kernels' costs): a prompt of $R tokens by decode steps, of $((R + 1)) a chunk and a step"
else
    bad "--prefill-min's default ('$R'): $R tokens made $(chunk_calls "$R") chunk calls"
fi

# kiln bench MODEL -p P -n N: llama-bench's pp and tg tests of the
# folder's program, a table and JSON; nothing left in its TMPDIR.
mkdir "$T/btmp"
if TMPDIR="$T/btmp" "$KILN" bench "$T/hf" -p 16 -n 8 -r 2 --threads 1 --json "$T/b.json" \
       >"$T/out" 2>"$T/err" &&
   grep -q "^kiln bench: $T/hf, weights as stored (--weight-dtype auto), 1 threads$" "$T/out" &&
   grep -q "^pp16  *[0-9][0-9.]* ± *[0-9.]* *2$" "$T/out" &&
   grep -q "^tg8  *[0-9][0-9.]* ± *[0-9.]* *2$" "$T/out" &&
   grep -q "^pp16-cold  *[0-9][0-9.]* ± *[0-9.]* *2$" "$T/out" &&
   grep -q '"threads": 1,' "$T/b.json" && grep -q '"test": "pp16",' "$T/b.json" &&
   grep -q '"test": "tg8",' "$T/b.json" && grep -q '"test": "pp16-cold",' "$T/b.json" &&
   [ "$(grep -c '"runs": 2,' "$T/b.json")" = 3 ] &&
   [ "$(grep -c '"tokens_per_s": [1-9]' "$T/b.json")" = 3 ] &&
   [ -z "$(ls -A "$T/btmp")" ]; then
    ok "kiln bench DIR -p 16 -n 8 -r 2: pp16, tg8 and pp16-cold, 2 runs each, table and JSON"
else
    bad "kiln bench DIR -p 16 -n 8 -r 2"; cat "$T/out" "$T/err"; ls -A "$T/btmp"
fi
refuse 2 "generate --repeat with --sequences" "--repeat is for one sequence, not --sequences" \
    "$T/c64" generate --tokens 7,8 --repeat 2 --sequences 2
refuse 2 "kiln bench of a graph with -p: not a decoder" "is not a decoder" \
    "$KILN" bench examples/mlp.json -p 4
refuse 2 "kiln bench -p past the KV cache" "-p 100 and -n 64 need 101 and 66 of the KV cache's 64 rows" \
    "$KILN" bench "$T/hf" -p 100
refuse 2 "kiln bench -r 0" "-r takes a number of runs from 1 to 100, got '0'" "$KILN" bench "$T/hf" -r 0

[ "$fails" = 0 ] && echo "generate: ok" || echo "generate: $fails failed"
[ "$fails" = 0 ]
