#!/bin/sh
# tests/chat.sh: `EXE chat` and `kiln run DIR chat`, on a pseudo-terminal
# ($PTYRUN, tests/gen/ptyrun.c) and through pipes, with tiny Hugging Face
# folders ($MKCKPT; random weights, so answers are noise). A llama folder
# is given a tokenizer_config.json whose chat_template is ChatML's, which
# is recognised; a qwen2 folder without one is refused until
# --chat-template names a family. Checked: --system and two turns on a
# terminal, the second prefilling only what is new at the position after
# the first answer (--verbose says where); the first answer equals
# generate's greedy answer to the rendered prompt (llama2's template);
# the oldest turn dropped when the KV cache fills, said on stderr; Ctrl-C
# stops an answer (the qwen2 model answers line breaks greedily until its
# cache of 4096 rows is full) and the chat goes on; Ctrl-C at the prompt
# drops the line; Ctrl-D ends with status 0; misuse is one line.
set -u
cd "$(dirname "$0")/.." || exit 2
KILN=${KILN:-./kiln}
MKCKPT=${MKCKPT:-build/tests/mkckpt}
PTYRUN=${PTYRUN:-build/tests/ptyrun}
. tests/lib.sh
scratch chat

mkdir "$T/llama" "$T/qwen"
run "mkckpt hf llama, qwen2" sh -c "'$MKCKPT' hf llama '$T/llama' && '$MKCKPT' hf qwen2 '$T/qwen'"
# The ChatML template as OpenHermes-2.5-Mistral-7B's tokenizer_config.json has it.
cat >"$T/llama/tokenizer_config.json" <<'JSON'
{"add_bos_token": true, "chat_template": "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}", "eos_token": "</s>"}
JSON
run "build llama (KV cache of 256 rows)" "$KILN" build "$T/llama" --max-seq 256 -o "$T/l"
run "build qwen2 (KV cache of 4096 rows)" "$KILN" build "$T/qwen" --max-seq 4096 -o "$T/q"

# session NAME SCRIPT EXE ARGS...: the transcript in $T/NAME.out
session() {
    name=$1 script=$2
    shift 2
    printf '%b' "$script" >"$T/$name.script"
    PTYRUN_TIMEOUT=60 "$PTYRUN" "$T/$name.script" "$@" >"$T/$name.out" 2>&1
}
has() { # has WHAT FILE TEXT: FILE holds TEXT
    if grep -qF -- "$3" "$2"; then ok "$1"; else bad "$1: no '$3' in:"; sed 's/^/      /' "$2" | head -20; fi
}

# Two turns with a system message, on a terminal.
session two 'expect > \nsend hello there\\n\nexpect > \nsend who are you\\n\nexpect > \nsend \\x04\n' \
    "$T/l" chat --system "be brief" -n 12 --verbose
has "chat: a prompt, two answers, Ctrl-D ends with status 0" "$T/two.out" "[exit 0]"
p1=$(sed -n 's/.*prefilled \([0-9]*\) tokens at position 0; answered \([0-9]*\) tokens.*/\1 \2/p' "$T/two.out")
at2=$(sed -n 's/.*prefilled [0-9]* tokens at position \([1-9][0-9]*\);.*/\1/p' "$T/two.out")
set -- $p1
if [ $# = 2 ] && [ "$at2" = $(($1 + $2)) ]; then
    ok "chat: turn 2 prefills only what is new, at position $at2 (= $1 prompt + $2 answer tokens)"
else
    bad "chat: turn 2 prefills at the position after turn 1 (got '$p1', '$at2')"; sed 's/^/      /' "$T/two.out"
fi

# The first answer is generate's, greedily, to the same rendered text
# (llama2: "<s>" written by the template, BOS added by generate).
printf 'hi\n' | "$T/l" chat --chat-template llama2 --system "be brief" -n 10 --temperature 0 \
    >"$T/a1" 2>"$T/err"
"$T/l" generate --prompt "$(printf '[INST] <<SYS>>\nbe brief\n<</SYS>>\n\nhi [/INST]')" -n 10 \
    --temperature 0 >"$T/g1" 2>"$T/err"
a1=$(cat "$T/a1")
case "$(cat "$T/g1")" in
*"$a1") [ -n "$a1" ] && ok "chat's first answer = generate's on the rendered prompt (greedy)" ||
    bad "chat's first answer is empty" ;;
*) bad "chat's first answer is not generate's"; od -c "$T/a1" | head -3; od -c "$T/g1" | tail -3 ;;
esac

# Turns until the 256 rows fill: the oldest are dropped, said, and the chat goes on.
printf 'the cat sat on the mat\nthe dog sat on the log\nthe hat sat on the cat\nand the bird\n' |
    "$T/l" chat -n 24 --verbose >"$T/full.out" 2>"$T/full.err"
echo "[exit $?]" >>"$T/full.err"
has "chat: a full KV cache drops the oldest turn" "$T/full.err" \
    "the KV cache is full (256 rows): dropped the oldest 1 turn; prefilling"
has "  and goes on: 4 answers, status 0" "$T/full.err" "[exit 0]"
[ "$(grep -c 'answered' "$T/full.err")" = 4 ] && ok "  4 answers" || bad "  4 answers"

# Ctrl-C while the answer is written stops it; the chat goes on.
session intr 'expect > \nsend hi\\n\nexpect \\r\\n\\r\\n\\r\\n\nsend \\x03\nexpect ended by Ctrl-C\nexpect > \nsend abc\\x03\nexpect > \nsend \\x04\n' \
    "$T/q" chat --chat-template chatml --temperature 0 --verbose
has "chat: Ctrl-C stops an answer" "$T/intr.out" "ended by Ctrl-C"
has "  and at the prompt drops the line; Ctrl-D: status 0" "$T/intr.out" "[exit 0]"
[ "$(grep -c 'answered' "$T/intr.out")" = 1 ] && ok "  one answer only" || bad "  one answer only"
! grep -q "KV cache is full" "$T/intr.out" && ok "  cut before the cache filled" ||
    bad "  cut before the cache filled"

# kiln run DIR chat: the JIT, the folder's tokenizer and template.
printf 'hello\n' | "$KILN" run "$T/llama" --max-seq 256 chat -n 4 --verbose >"$T/run.out" 2>"$T/run.err"
echo "[exit $?]" >>"$T/run.err"
has "kiln run DIR chat" "$T/run.err" "answered"
has "  status 0" "$T/run.err" "[exit 0]"

refuse 1 "no template: refused by name" \
    "the model's chat template is none of the families kiln renders" \
    sh -c "printf '{\"chat_template\": \"{{ messages }}\"}' >'$T/qwen/tokenizer_config.json' && '$T/q' chat </dev/null"
rm -f "$T/qwen/tokenizer_config.json"
refuse 1 "no tokenizer_config.json: --chat-template NAME asked for" \
    "the tokenizer has no chat template: give --chat-template NAME" "$T/q" chat
refuse 2 "--chat-template of no family" "--chat-template: unknown family 'vicuna'" \
    "$T/q" chat --chat-template vicuna
refuse 2 "unknown option" "unknown argument '--top-q'" "$T/q" chat --top-q 3
refuse 2 "bad value" "--temperature: bad value '-1'" "$T/q" chat --temperature -1
"$T/q" chat --help >"$T/help" && grep -q "^usage: .* chat " "$T/help" && ok "chat --help" ||
    bad "chat --help"
"$T/q" --help | grep -q " chat \[--tokenizer FILE\]" && ok "EXE --help names chat" ||
    bad "EXE --help names chat"

[ "$fails" = 0 ] && echo "chat: ok" || { echo "chat: $fails failed"; exit 1; }
