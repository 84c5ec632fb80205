#!/bin/sh
# tests/target.sh: executables built to run elsewhere (kiln build --target,
# docs/program.md#where-a-program-runs), one line per check:
#   1. --target x86-64-v3 and x86-64-v2 builds of a tiny decoder give the
#      native build's greedy tokens here;
#   2. their machine code holds no AVX-512 register (zmm, in objdump -d),
#      and the v2 build no AVX one (ymm);
#   3. under qemu-x86_64 (Debian's qemu-user, `make deps`) with CPU models
#      that lack AVX-512 (Haswell) and AVX (Nehalem), they run and give the
#      same tokens: an instruction past the model dies there of SIGILL;
#   4. the native build, on a CPU with AVX-512, under the Haswell model
#      says in one line that the CPU lacks avx512f, exit 3, before
#      anything runs (said and skipped on a CPU without AVX-512);
#   5. a bad --target is a usage error naming the levels; kiln run takes
#      none (the JIT compiles for this machine).
# Under sanitizers (KILN_CFLAGS_EXTRA, make test-asan) only 5 runs.
# KILN and MKCKPT name the binaries.
set -u
cd "$(dirname "$0")/.." || exit 2
KILN=${KILN:-./kiln}
MKCKPT=${MKCKPT:-build/tests/mkckpt}
QEMU=${QEMU:-qemu-x86_64}
. tests/lib.sh
scratch target

mkdir "$T/hf"
"$MKCKPT" hf llama "$T/hf" >/dev/null 2>&1 || bad "mkckpt hf llama"

refuse 2 "--target x86-64-v5" "--target takes native, x86-64-v2, x86-64-v3 or x86-64-v4, got 'x86-64-v5'" \
    "$KILN" build "$T/hf" -o "$T/never" --target x86-64-v5
refuse 2 "kiln run --target" "kiln run's JIT compiles for this machine" "$KILN" run "$T/hf" --target x86-64-v3

# Under sanitizers (make test-asan) the builds would compile the runtime's
# parts twice more with them, and qemu-user cannot host ASan's shadow
# memory: the rest is make test's.
case "${KILN_CFLAGS_EXTRA:-}" in
*-fsanitize*)
    ok "builds for other CPUs: skipped under sanitizers (qemu-user cannot run ASan's programs)"
    [ "$fails" = 0 ] && echo "target: ok" || echo "target: $fails failed"
    exit $((fails != 0)) ;;
esac

P="--tokens 5,6,7,8,9 -n 12 --temperature 0 --threads 2"
run "build native" "$KILN" build "$T/hf" -o "$T/native"
"$T/native" generate $P >"$T/want" 2>"$T/err" || { bad "native generate"; cat "$T/err"; }

# target LEVEL QEMU_CPU WIDE: built for LEVEL, the native tokens here and
# under qemu's QEMU_CPU, and no register of WIDE ("zmm" or "[yz]mm").
target() {
    level=$1 cpu=$2 wide=$3
    run "build --target $level" "$KILN" build "$T/hf" -o "$T/$level" --target "$level"
    if "$T/$level" generate $P >"$T/$level.got" 2>"$T/err" && cmp -s "$T/want" "$T/$level.got"; then
        ok "$level: greedy tokens = the native build's"
    else
        bad "$level: greedy tokens = the native build's"; cat "$T/err"
    fi
    n=$(objdump -d "$T/$level" | grep -c "%$wide[0-9]")
    [ "$n" = 0 ] && ok "$level: no $wide register in its machine code" ||
        bad "$level: $n instructions use a $wide register"
    if ! command -v "$QEMU" >/dev/null; then
        bad "$level: $QEMU is missing (make deps installs qemu-user)"
    elif "$QEMU" -cpu "$cpu" "$T/$level" generate $P >"$T/$level.qemu" 2>"$T/err" &&
         cmp -s "$T/want" "$T/$level.qemu"; then
        ok "$level: under qemu -cpu $cpu, the same tokens"
    else
        bad "$level: under qemu -cpu $cpu"; grep -v "^qemu-x86_64: warning" "$T/err"
    fi
}
target x86-64-v3 Haswell zmm
target x86-64-v2 Nehalem "[yz]mm"

if ! grep -q "^flags.* avx512f" /proc/cpuinfo; then
    ok "native build under qemu: skipped, this CPU has no AVX-512 to lack"
elif command -v "$QEMU" >/dev/null; then
    "$QEMU" -cpu Haswell "$T/native" generate $P >"$T/out" 2>"$T/err"
    rc=$?
    grep -v "^qemu-x86_64: warning" "$T/err" >"$T/said"
    if [ $rc = 3 ] && [ "$(wc -l <"$T/said")" = 1 ] && [ ! -s "$T/out" ] &&
       grep -q "^native: this CPU lacks avx512f, which the program was compiled to use: build it on this machine, or with kiln build --target x86-64-v3" "$T/said"; then
        ok "native build under qemu -cpu Haswell: one line, the CPU lacks avx512f, exit 3"
    else
        bad "native build under qemu -cpu Haswell: exit $rc"; cat "$T/said"
    fi
fi


[ "$fails" = 0 ] && echo "target: ok" || echo "target: $fails failed"
[ "$fails" = 0 ]
