#!/bin/sh
# tests/run.sh: every test `make test` runs, with one line per test.
#   1. the cmocka unit tests given as arguments;
#   2. the command-line contract (tests/cli.sh), the bad-input corpus
#      (tests/bad.sh), hostile names (tests/names.sh), the pass pipeline's
#      numbers (tests/pipeline.sh), the golden pass tests (tests/golden.sh),
#      checkpoints imported (tests/import.sh, with $MKCKPT), a decoder's
#      shape variants and generation (tests/generate.sh, with $REFGEN),
#      16-bit weights (tests/weights16.sh, with $MKCKPT), the prepared
#      weights' image (tests/image.sh, with $MKCKPT), quantized weights
#      (tests/quant.sh, with $MKCKPT and $REFGEN), GGUF files as models
#      (tests/gguf.sh, with $MKCKPT), executables built to run elsewhere
#      (tests/target.sh, with $MKCKPT and qemu-user), the samplers on the
#      command line (tests/sample.sh, with $MKCKPT), slotted decoders and
#      batched decode (tests/batch.sh, with $MKCKPT), chat on a
#      pseudo-terminal (tests/chat.sh, with $MKCKPT and $PTYRUN), the
#      OpenAI-compatible server with curl (tests/serve.sh, with $MKCKPT; the
#      openai npm client when reachable), programs of several MPI ranks
#      under mpirun (tests/mpi.sh, with $MKCKPT), FP8 checkpoints
#      (tests/fp8.sh, with $MKCKPT and $REFGEN), gpt-oss (tests/gptoss.sh,
#      with $MKCKPT and $REFGEN);
#      the suites run two at a time;
#   3. `kiln check` (reference vs cc build vs JIT) on every op model under
#      tests/models and every example, two at a time.
set -u
cd "$(dirname "$0")/.." || exit 2
failed=0
log=$(mktemp -d "${TMPDIR:-/tmp}/kiln-test-XXXXXX") || exit 3
trap 'rm -rf "$log"' EXIT
# kiln's caches (builds, kiln machine's figures) of this run only: the
# user's are neither read nor written, and no test depends on them.
export XDG_CACHE_HOME="$log/cache"

for t in "$@"; do
    name=$(basename "$t")
    if "$t" >"$log/$name.out" 2>&1; then
        echo "ok    unit $name ($(grep -c '\[       OK \]' "$log/$name.out") tests)"
    else
        echo "FAIL  unit $name"; cat "$log/$name.out"; failed=1
    fi
done

# The suites run two at a time (they are mostly single-threaded cc and kiln
# runs), the longest first; each leaves NAME.out and NAME.rc ("STATUS
# SECONDS") in $log, and their lines are printed below in a fixed order.
echo quant target mpi cli fp8 bad serve import weights16 generate batch gptoss pipeline gguf \
     image chat names sample golden | tr ' ' '\n' |
    xargs -P 2 -n 1 sh -c 't0=$(date +%s); sh "tests/$0.sh" >"'"$log"'/$0.out" 2>&1
        echo "$? $(($(date +%s) - t0))" >"'"$log"'/$0.rc"'

# suite NAME SHOW TEXT: tests/NAME.sh's result, a line "ok    NAME (N TEXT;
# S s)"; when it failed, its whole log (SHOW = all) or the lines that are
# not ok.
suite() {
    name=$1 show=$2 text=$3
    if ! read -r rc secs <"$log/$name.rc" 2>/dev/null; then
        echo "FAIL  $name: not run (missing from the list above)"; failed=1; return
    fi
    if [ "$rc" = 0 ]; then
        echo "ok    $name ($(grep -c '^ok' "$log/$name.out") $text; $secs s)"
        grep '^skip' "$log/$name.out"           # what a suite could not test here, said
    else
        echo "FAIL  $name"
        if [ "$show" = all ]; then cat "$log/$name.out"; else grep -v '^ok' "$log/$name.out"; fi
        failed=1
    fi
}

suite cli all "checks"
suite bad fails "bad inputs, each one line and nothing written"
suite names all "checks: hostile names are data, never code"
suite pipeline all "checks: bisect, each pass off, threads"
suite golden fails "cases"
suite import fails "checks: checkpoints imported, checked, built, run, refused"
suite generate fails "checks: prefill and decode variants, greedy = reference, sampling, tokenizer"
suite weights16 fails "checks: --weight-dtype bf16/f16 checked, held 16-bit, BF16 files copied"
suite image fails "checks: weights prepared once, kept in an image, mapped; its faults"
suite quant fails "checks: --weight-dtype q8_0 ... q4_k_m checked, held as blocks, decoded as the reference"
suite gguf fails "checks: GGUF files checked, decoded as their folders, blocks held as stored; bad files"
suite target fails "checks: --target builds run under qemu without AVX-512, native ones say what the CPU lacks"
suite sample fails "checks: top-k 1 is greedy, seeds, penalties, stop strings, --json"
suite batch fails "checks: slotted decoders checked, batched decode = one sequence at a time"
suite chat fails "checks: chat on a terminal, the KV cache kept, turns dropped, Ctrl-C, templates"
suite serve fails "checks: the server with curl: completions = generate, streams, errors, busy, keys"
suite mpi fails "checks: 2 ranks under mpirun = 1 rank, experts and vocabulary split, FP8 and MXFP4 weights split, collectives per token, check --ranks 2, a prompt on stdin, refusals, a failed or killed rank ends the job"
suite fp8 fails "checks: FP8 folders checked, held as e4m3 blocks, decoded as the reference; bad scales; published configs"
suite gptoss fails "checks: gpt-oss folders checked, greedy = reference, bad input, published configs"

ls tests/models/*.json examples/*.json |
    xargs -P 2 -n 1 sh -c 'sh tests/check-one.sh "$0" "'"$log"'"' >"$log/checks" 2>&1 || failed=1
cat "$log/checks"

if [ "$failed" = 0 ]; then echo "all tests passed"; else echo "SOME TESTS FAILED"; fi
exit "$failed"
