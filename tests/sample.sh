#!/bin/sh
# tests/sample.sh: the samplers on `generate`'s command line, on a tiny
# Hugging Face llama folder ($MKCKPT; random weights, its own
# tokenizer.json): --top-k 1 is greedy whatever the seed; a seed
# reproduces its text and another seed changes it; --repeat-penalty and
# --presence-penalty change the greedy text (which repeats "sat");
# --stop ends the output right before the stop string's first place in
# the greedy text (one taken from inside it, spanning tokens), and a stop
# string never drawn changes nothing; --json prints the statistics as one
# JSON object on stderr; `chat` takes the same options; bad values are
# one line. (The unit test tests/unit/test_sample.c checks the sampler's
# arithmetic on fixed logits.)
set -u
cd "$(dirname "$0")/.." || exit 2
KILN=${KILN:-./kiln}
MKCKPT=${MKCKPT:-build/tests/mkckpt}
. tests/lib.sh
scratch sample

mkdir "$T/hf"
run "mkckpt hf llama" "$MKCKPT" hf llama "$T/hf"
run "build" "$KILN" build "$T/hf" -o "$T/m"
P="the cat sat"
gen() { "$T/m" generate --prompt "$P" -n 24 "$@" 2>"$T/err"; }

greedy=$(gen --temperature 0)
[ "$(gen --top-k 1 --seed 3)" = "$greedy" ] && [ "$(gen --top-k 1 --seed 9 --top-p 1)" = "$greedy" ] &&
    ok "--top-k 1 = --temperature 0 (seeds 3, 9)" || bad "--top-k 1 = greedy"
a=$(gen --seed 5 --top-k 40 --min-p 0.01)
[ "$a" = "$(gen --seed 5 --top-k 40 --min-p 0.01)" ] && ok "a seed reproduces" || bad "a seed reproduces"
[ "$a" != "$(gen --seed 6 --top-k 40 --min-p 0.01)" ] && ok "another seed differs" ||
    bad "another seed differs"
[ "$(gen --temperature 0 --repeat-penalty 1.5)" != "$greedy" ] &&
    ok "--repeat-penalty changes the greedy text" || bad "--repeat-penalty changes the greedy text"
[ "$(gen --temperature 0 --presence-penalty 2 --repeat-last-n -1)" != "$greedy" ] &&
    ok "--presence-penalty changes the greedy text" || bad "--presence-penalty changes the greedy text"

# A stop string from inside the greedy answer (after the prompt's text).
answer=${greedy#"$P"}
stop=$(printf '%s' "$answer" | cut -c 5-8)
got=$(gen --temperature 0 --stop "$stop" --json)
want=$P${answer%%"$stop"*}
if [ -n "$stop" ] && [ "$got" = "$want" ] && grep -q '"finish": "stop"' "$T/err"; then
    ok "--stop '$stop': the output ends before it, finish \"stop\""
else
    bad "--stop '$stop'"; echo "      want: $want"; echo "      got:  $got"; cat "$T/err"
fi
[ "$(gen --temperature 0 --stop 'zzzqqq' --stop 'never')" = "$greedy" ] &&
    ok "--stop never drawn: the whole text" || bad "--stop never drawn: the whole text"
gen --temperature 0 --json >/dev/null
if [ "$(wc -l <"$T/err")" = 1 ] && grep -q '^{"prompt_tokens": [0-9]*, "tokens": 24, "finish": "length", "prefill_ms": ' "$T/err" &&
    grep -q '"decode_tokens_per_s": [0-9.]*, "decode_steps": 23, "threads": [0-9]*, ' "$T/err"; then
    ok "--json: one JSON line of statistics"
else
    bad "--json"; cat "$T/err"
fi
printf 'hi\n' | "$T/m" chat --chat-template chatml -n 4 --top-k 5 --min-p 0.1 --repeat-penalty 1.1 \
    >/dev/null 2>"$T/err" && ok "chat takes the samplers" || { bad "chat takes the samplers"; cat "$T/err"; }

refuse 2 "--top-k -1" "--top-k: bad value '-1'" "$T/m" generate --prompt x --top-k -1
refuse 2 "--min-p 2" "--min-p: bad value '2'" "$T/m" generate --prompt x --min-p 2
refuse 2 "--repeat-penalty 0" "--repeat-penalty: bad value '0'" "$T/m" generate --prompt x --repeat-penalty 0
refuse 2 "--stop with --tokens" "--stop is for a text prompt" "$T/m" generate --tokens 1,2 --stop x
refuse 2 "chat --top-p 2" "--top-p: bad value '2'" "$T/m" chat --top-p 2

[ "$fails" = 0 ] && echo "sample: ok" || { echo "sample: $fails failed"; exit 1; }
