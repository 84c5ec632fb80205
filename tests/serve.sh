#!/bin/sh
# tests/serve.sh: `PROG serve`, the OpenAI-compatible server, with curl. A
# tiny Hugging Face llama folder with a SentencePiece-style tokenizer.json
# and a ChatML chat template (tokenizer_config.json), built with --slots
# 3, serves on a free loopback port: /health, /v1/models; a completion
# not streamed and streamed (server-sent events ending in [DONE]), whose
# greedy text equals `generate`'s for the same prompt; a chat completion;
# 400 (malformed JSON, a field of the wrong type, max_tokens past the
# limit, a prompt past the context), 404, 401 without the bearer key, 413
# past the body limit; three clients at once all answered alike, and 503
# with Retry-After when slots and queue are full; a client that
# disconnects, streamed or not, frees its slot; the samplers and stop
# strings of a request give generate's text with the same options. The official `openai` npm client streams a
# chat when npm and the registry are reachable (else said, skipped).
set -u
cd "$(dirname "$0")/.." || exit 2
KILN=${KILN:-./kiln}
MKCKPT=${MKCKPT:-build/tests/mkckpt}
. tests/lib.sh
scratch serve
PID=
trap 'kill "$PID" 2>/dev/null; rm -rf "$T"' EXIT     # no server outlives the test

if ! command -v curl >/dev/null; then
    echo "skip  serve: curl is not installed"; exit 0
fi
"$MKCKPT" hf llama "$T/hf" >/dev/null || bad "mkckpt"
printf '{"chat_template": "{%% for message in messages %%}{{ %s + message[%s] + %s + message[%s] + %s }}{%% endfor %%}{%% if add_generation_prompt %%}{{ %s }}{%% endif %%}"}\n' \
    "'<|im_start|>'" "'role'" "'\\\\n'" "'content'" "'<|im_end|>\\\\n'" "'<|im_start|>assistant\\\\n'" \
    >"$T/hf/tokenizer_config.json"
run "build --slots 3" "$KILN" build "$T/hf" --slots 3 --max-seq 64 -o "$T/m"

# start ARGS...: the server on a free port, $URL and $PID set.
start() {
    rm -f "$T/serve.err"
    "$T/m" serve --port 0 "$@" 2>"$T/serve.err" &
    PID=$!
    i=0
    while [ $i -lt 100 ] && ! grep -q "listening on" "$T/serve.err" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
    URL=$(sed -n 's/.*listening on \(http[^ ]*\).*/\1/p' "$T/serve.err")
}
stop() { kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; cat "$T/serve.err" >>"$T/serve.log"; }

# code WANT WHAT CURL-ARGS...: the status is WANT.
code() {
    want=$1 what=$2
    shift 2
    got=$(curl -s -o "$T/body" -w '%{http_code}' "$@")
    if [ "$got" = "$want" ]; then ok "$what"; else bad "$what: status $got, want $want"; cat "$T/body"; fi
}
J='Content-Type: application/json'

start --max-tokens 32 --queue 0
[ -n "$URL" ] && ok "serve listens on loopback: $URL" || { bad "serve did not start"; cat "$T/serve.err"; exit 1; }
code 200 "GET /health" "$URL/health"
code 200 "GET /v1/models" "$URL/v1/models"
grep -q '"object": "list"' "$T/body" && ok "/v1/models lists the model" || bad "/v1/models"

P="the cat sat on the mat"
"$T/m" generate --prompt "$P" -n 12 --temperature 0 >"$T/gen" 2>/dev/null
"$T/m" generate --prompt "$P" -n 0 --temperature 0 >"$T/echo" 2>/dev/null
# the weights are random: the text may hold bytes that are no UTF-8, which
# the server sends as U+FFFD, one for each maximal ill-formed part (as
# Python decodes with errors="replace")
expect=$(python3 -c 'import sys; r=lambda f: open(f, encoding="utf-8", errors="replace").read().rstrip("\n"); g=r(sys.argv[1]); e=r(sys.argv[2]); print(g[len(e):] if g.startswith(e) else "PREFIX?")' "$T/gen" "$T/echo")
code 200 "POST /v1/completions" -H "$J" -d "{\"prompt\": \"$P\", \"max_tokens\": 12, \"temperature\": 0}" "$URL/v1/completions"
got=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["choices"][0]["text"])' "$T/body")
if [ "$got" = "$expect" ]; then ok "completion = generate's greedy text"; else bad "completion = generate's: got '$got', want '$expect'"; fi
curl -sN -H "$J" -d "{\"prompt\": \"$P\", \"max_tokens\": 12, \"temperature\": 0, \"stream\": true}" \
    "$URL/v1/completions" >"$T/sse"
got=$(python3 -c '
import json,sys
t=""
lines=[l for l in open(sys.argv[1]).read().split("\n") if l.startswith("data: ")]
assert lines[-1]=="data: [DONE]", lines[-1]
for l in lines[:-1]:
    t+=json.loads(l[6:])["choices"][0]["text"]
print(t)' "$T/sse" 2>&1)
if [ "$got" = "$expect" ]; then ok "streamed completion = generate's, ends with [DONE]"; else bad "stream: got '$got', want '$expect'"; fi
code 200 "POST /v1/chat/completions" -H "$J" -d '{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}' "$URL/v1/chat/completions"
grep -q '"role": "assistant"' "$T/body" && ok "chat answers as the assistant" || bad "chat: $(cat "$T/body")"

# text TOOL FILE: the answer's text in a response (a whole one, or the
# events of a stream joined), then its finish reason, one per line
text() {
    python3 -c '
import json,sys
s=open(sys.argv[1]).read()
if s.startswith("data: "):
    cs=[json.loads(l[6:])["choices"][0] for l in s.split("\n") if l.startswith("data: {")]
    print("".join(c["text"] for c in cs)); print(cs[-1]["finish_reason"])
else:
    c=json.loads(s)["choices"][0]; print(c["text"]); print(c["finish_reason"])' "$1" 2>&1
}
# gentext ARGS...: generate's answer to $P with ARGS, as the server sends it
gentext() {
    "$T/m" generate --prompt "$P" -n 12 --temperature 0 "$@" >"$T/g2" 2>/dev/null
    python3 -c 'import sys; r=lambda f: open(f, encoding="utf-8", errors="replace").read().rstrip("\n"); g=r(sys.argv[1]); e=r(sys.argv[2]); print(g[len(e):] if g.startswith(e) else "PREFIX?")' "$T/g2" "$T/echo"
}
ref=$(gentext --presence-penalty 1.5 --frequency-penalty 0.5 --repeat-penalty 1.3)
code 200 "penalties in the request" -H "$J" -d "{\"prompt\": \"$P\", \"max_tokens\": 12, \"temperature\": 0, \"presence_penalty\": 1.5, \"frequency_penalty\": 0.5, \"repeat_penalty\": 1.3}" "$URL/v1/completions"
got=$(text "$T/body" | head -n 1)
[ "$got" = "$ref" ] && [ "$ref" != "$expect" ] && ok "penalties = generate's (and change the text)" ||
    bad "penalties: got '$got', want '$ref' (greedy '$expect')"
code 200 "top_k 1 at temperature 1" -H "$J" -d "{\"prompt\": \"$P\", \"max_tokens\": 12, \"top_k\": 1, \"seed\": 7}" "$URL/v1/completions"
got=$(text "$T/body" | head -n 1)
[ "$got" = "$expect" ] && ok "top_k 1 is greedy" || bad "top_k 1: got '$got', want '$expect'"
# a stop string: the first two ASCII characters in a row past the
# greedy text's first (the weights are random: the text is noise)
S=$(python3 -c '
import re,sys
m=re.search("[ !#-\\[\\]-~]{2}", sys.argv[1][1:])
print(m.group(0) if m else "")' "$expect")
if [ -n "$S" ]; then
    ref=$(gentext --stop "$S")
    code 200 "stop in the request" -H "$J" -d "{\"prompt\": \"$P\", \"max_tokens\": 12, \"temperature\": 0, \"stop\": [\"zzzz\", \"$S\"]}" "$URL/v1/completions"
    got=$(text "$T/body")
    [ "$got" = "$ref
stop" ] && [ "$ref" != "$expect" ] && ok "stop '$S': the text ends before it, finish stop, as generate --stop" ||
        bad "stop '$S': got '$got', want '$ref' and stop"
    curl -sN -H "$J" -d "{\"prompt\": \"$P\", \"max_tokens\": 12, \"temperature\": 0, \"stop\": \"$S\", \"stream\": true}" \
        "$URL/v1/completions" >"$T/sse"
    got=$(text "$T/sse")
    [ "$got" = "$ref
stop" ] && ok "stop '$S' streamed: nothing of it sent" || bad "stop streamed: got '$got', want '$ref'"
else
    bad "no word in the greedy text '$expect' to stop at"
fi

code 400 "malformed JSON: 400" -H "$J" -d '{"prompt": ' "$URL/v1/completions"
grep -q '"error": {"message"' "$T/body" && ok "an OpenAI error object" || bad "error object: $(cat "$T/body")"
code 400 "max_tokens a string: 400" -H "$J" -d '{"prompt": "a", "max_tokens": "5"}' "$URL/v1/completions"
code 400 "no prompt: 400" -H "$J" -d '{"max_tokens": 5}' "$URL/v1/completions"
code 400 "max_tokens past --max-tokens: 400" -H "$J" -d '{"prompt": "a", "max_tokens": 33}' "$URL/v1/completions"
code 400 "top_k -1: 400" -H "$J" -d '{"prompt": "a", "top_k": -1}' "$URL/v1/completions"
code 400 "min_p 2: 400" -H "$J" -d '{"prompt": "a", "min_p": 2}' "$URL/v1/completions"
code 400 "stop a number: 400" -H "$J" -d '{"prompt": "a", "stop": [1]}' "$URL/v1/completions"
code 400 "five stop strings: 400" -H "$J" -d '{"prompt": "a", "stop": ["a", "b", "c", "d", "e"]}' "$URL/v1/completions"
grep -q "'stop' must be a string or an array of at most 4" "$T/body" && ok "the message names 'stop'" || bad "stop's message: $(cat "$T/body")"
long=$(python3 -c 'print(" ".join(["cat"] * 200))')
code 400 "a prompt past the context: 400" -H "$J" -d "{\"prompt\": \"$long\"}" "$URL/v1/completions"
code 404 "an unknown path: 404" "$URL/v1/nothing"
python3 -c 'print("{\"prompt\": \"" + "a" * 1100000 + "\"}")' >"$T/big.json"
code 413 "a body past 1 MiB: 413" -H "$J" --data-binary "@$T/big.json" "$URL/v1/completions"

# three clients at once, greedy: all answered, all alike
pids=
for i in 1 2 3; do
    curl -s -H "$J" -d "{\"prompt\": \"$P\", \"max_tokens\": 20, \"temperature\": 0}" \
        "$URL/v1/completions" >"$T/c$i" &
    pids="$pids $!"
done
wait $pids
t1=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["choices"][0]["text"])' "$T/c1" 2>/dev/null)
n=0
for i in 1 2 3; do
    ti=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["choices"][0]["text"])' "$T/c$i" 2>/dev/null)
    [ -n "$ti" ] && [ "$ti" = "$t1" ] && n=$((n + 1))
done
[ "$n" = 3 ] && ok "three clients at once: all answered alike" || bad "three clients: $n of 3"

stop

# a load test: 6 clients for 6 s on 3 slots and a queue of 8 (none gets
# 503), streamed and not, every fifth leaving early: no request fails, and
# the server's resident memory grows by less than 4 MiB from a third of
# the time to the end (not under sanitizers: ASan keeps what is freed)
start --parallel 3 --queue 8
if python3 tests/gen/loadtest.py "$URL" "$PID" 6 6 >"$T/load" 2>&1; then
    ok "load test: $(head -n 1 "$T/load") (kB)"
else
    bad "load test"; cat "$T/load"
fi
set -- $(head -n 1 "$T/load")
case "${KILN_CFLAGS_EXTRA:-}" in
*-fsanitize*) ;;
*) [ "${8:-0}" -gt 0 ] && [ "$((${9:-0} - $8))" -lt 4096 ] &&
       ok "load test: memory flat (VmRSS $8 kB, then $9 kB)" ||
       bad "load test: memory grew: VmRSS ${8:-?} kB, then ${9:-?} kB" ;;
esac
stop

# one slot and no queue, on a model slow enough (8 layers, 4096 positions)
# that a long request holds its slot for a while: a second request, sent
# once the first has streamed its first token, gets
# 503 with Retry-After; a streamed client that goes away frees the slot
"$MKCKPT" hf llama "$T/blk" --shape blocks >/dev/null || bad "mkckpt blocks"
run "build blocks --slots 2" "$KILN" build "$T/blk" --slots 2 --max-seq 4096 -o "$T/m"
start --parallel 1 --queue 0
# streamed, so that its first event says it holds the slot, with 499
# tokens still to come when the second request is sent
curl -sN -H "$J" -d '{"prompt": "a", "max_tokens": 500, "stream": true, "ignore_eos": true}' "$URL/v1/completions" \
    >"$T/long" 2>/dev/null &
long=$!
i=0
while ! grep -q "^data: " "$T/long" 2>/dev/null && [ $i -lt 400 ]; do
    sleep 0.05
    i=$((i + 1))
done
code 503 "a request past the slots and the queue: 503" -D "$T/h" -H "$J" -d '{"prompt": "a"}' "$URL/v1/completions"
grep -qi "^Retry-After: 1" "$T/h" && ok "503 with Retry-After" || bad "503 without Retry-After"
wait "$long"
curl -sN -m 0.3 -H "$J" -d '{"prompt": "a", "max_tokens": 4000, "stream": true, "ignore_eos": true}' "$URL/v1/completions" >/dev/null 2>&1
sleep 0.2
code 200 "a streamed client that disconnects frees its slot" -H "$J" -d '{"prompt": "a", "max_tokens": 4}' "$URL/v1/completions"
# (4000 tokens take seconds: its slot would still be held)
curl -s -m 0.3 -H "$J" -d '{"prompt": "a", "max_tokens": 4000, "ignore_eos": true}' "$URL/v1/completions" >/dev/null 2>&1
sleep 0.3
code 200 "a client that leaves before its whole text frees its slot" -H "$J" -d '{"prompt": "a", "max_tokens": 4}' "$URL/v1/completions"
stop

start --api-key sekrit
code 401 "--api-key: no key: 401" "$URL/v1/models"
code 401 "--api-key: a wrong key: 401" -H "Authorization: Bearer nope" "$URL/v1/models"
code 200 "--api-key: the key" -H "Authorization: Bearer sekrit" "$URL/v1/models"
code 200 "--api-key: /health is open" "$URL/health"
stop

refuse 2 "serve on a program of one slot" "not built for serving" \
    sh -c "'$KILN' build '$T/hf' -o '$T/one' >/dev/null 2>&1 && '$T/one' serve"
refuse 2 "--parallel past the slots" "decodes 2 at once" "$T/m" serve --parallel 3
refuse 2 "--host not an address" "is not an IPv4 or IPv6 address" "$T/m" serve --host nowhere

# IPv6's loopback, where this machine has one (else said and skipped)
if [ -r /proc/net/if_inet6 ] && grep -q '^0\{31\}1 ' /proc/net/if_inet6; then
    start --host ::1
    case $URL in "http://[::1]:"[0-9]*) ok "--host ::1: listening on $URL" ;;
        *) bad "--host ::1: listening on '$URL'"; cat "$T/serve.err" ;; esac
    code 200 "--host ::1: GET /health over IPv6" -g "$URL/health"
    code 200 "--host ::1: GET /v1/models over IPv6" -g "$URL/v1/models"
    stop
else
    echo "skip  --host ::1: this machine has no IPv6 loopback"
fi

# the official openai client, from the npm registry into $T (not vendored)
if command -v npm >/dev/null && command -v node >/dev/null &&
    (cd "$T" && timeout 60 npm install --silent --no-audit --no-fund openai >/dev/null 2>&1); then
    start --chat-template chatml
    cat >"$T/client.mjs" <<'JS'
import OpenAI from "openai";
const client = new OpenAI({ baseURL: process.argv[2] + "/v1", apiKey: "none" });
const stream = await client.chat.completions.create({
  model: "llama", messages: [{ role: "user", content: "hello" }], max_tokens: 6, stream: true });
let n = 0;
for await (const chunk of stream) n++;
console.log("chunks " + n);
JS
    if (cd "$T" && node client.mjs "$URL") >"$T/node.out" 2>&1 && grep -q "^chunks [1-9]" "$T/node.out"; then
        ok "the openai npm client streams a chat"
    else
        bad "the openai npm client"; cat "$T/node.out"
    fi
    stop
else
    echo "skip  the openai npm client: npm, node or the npm registry is not reachable here"
fi

[ "$fails" = 0 ]
