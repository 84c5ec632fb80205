#!/bin/sh
# tests/mpi.sh: programs of several MPI ranks (docs/distributed.md), run
# by Open MPI's mpirun on this machine (as root: its allow-run-as-root
# settings; more ranks than cores: --oversubscribe). $MKCKPT's llama and
# qwen2 (biases, a tied classifier) folders built with --ranks 2 give the
# one-rank program's greedy
# tokens and text (the prompt given on rank 0's standard input too), as
# does a Qwen3-MoE GGUF whose experts are split over the ranks (4 experts
# refused on 3 ranks), and `kiln check --ranks 2` agrees on the three; the one-rank program links no MPI; a program run on
# the wrong number of ranks, a model whose dimensions do not split, and a
# JIT run of several ranks are refused in one line; a rank that cannot
# read its weights, and a rank killed while the other waits for it, end
# the whole job within seconds with the rank named. Last, two ranks in two
# network namespaces joined by a veth pair (tests/mpi-netns.sh: Open MPI's
# TCP transport over it); where the kernel forbids namespaces that test
# says so on a "skip" line.
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

if ldd "$T/llama-1" | grep -q libmpi; then bad "the 1-rank program links MPI"; else
    ok "the 1-rank program links no MPI"; fi
ldd "$T/llama-2" | grep -q libmpi && ok "the 2-rank program links Open MPI" ||
    bad "the 2-rank program links Open MPI"

# ---- expert parallel: a Qwen3-MoE GGUF's stacked experts split over the ranks ----
"$MKCKPT" gguf qwen3_moe "$T/moe.gguf" >/dev/null || bad "mkckpt gguf qwen3_moe"
"$KILN" print "$T/moe.gguf" --ranks 2 --stop-after distribute >"$T/moe.ir" 2>"$T/err"
if [ "$(grep -c "split by experts (4 of them): rank 0 holds 0..1, rank 1 holds 2..3" "$T/moe.ir")" = 6 ] &&
    [ "$(grep -c "= moe .*ranks=2[,}]" "$T/moe.ir")" = 2 ] && grep -q "^  # 2 ranks: each holds" "$T/moe.ir"
then ok "qwen3_moe: 2 moe layers expert parallel, each rank holding 2 of 4 experts: $(grep "# 2 ranks" "$T/moe.ir" | sed 's/^ *# //')"
else bad "qwen3_moe: experts split in the distribution dump"; sed 's/^/      /' "$T/err"; fi
run "qwen3_moe: kiln build --ranks 2" "$KILN" build "$T/moe.gguf" --ranks 2 -o "$T/moe-2"
run "qwen3_moe: kiln build (1 rank)" "$KILN" build "$T/moe.gguf" -o "$T/moe-1"
# shellcheck disable=SC2086
"$T/moe-1" $GEN >"$T/moe-1.tok" 2>"$T/err"
# shellcheck disable=SC2086
timeout 60 $MPIRUN -np 2 "$T/moe-2" $GEN >"$T/moe-2.tok" 2>"$T/err" || sed 's/^/      /' "$T/err"
same "qwen3_moe: 2 ranks' greedy tokens (experts split) are 1 rank's" "$T/moe-2.tok" "$T/moe-1.tok"
"$KILN" build "$T/moe.gguf" --ranks 3 -o "$T/never" >"$T/out" 2>"$T/err"
st=$?
if [ "$st" = 1 ] && grep -q "ffn_out: the 4 experts do not split evenly over 3 ranks .*--ranks that split every sharded dimension: 1, 2" "$T/err" &&
    [ ! -e "$T/never" ]; then ok "qwen3_moe: --ranks 3 of 4 experts is refused, naming the experts and the rank counts that work"
else bad "qwen3_moe: --ranks 3 refused (exit $st)"; sed 's/^/      /' "$T/err"; fi

# ---- kiln check --ranks 2: the reference simulating the ranks, the cc build under mpirun ----
for type in llama qwen2 moe.gguf; do
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
