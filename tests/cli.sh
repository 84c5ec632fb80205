#!/bin/sh
# tests/cli.sh: the command-line contract of kiln and of the programs it
# builds: exit statuses, one-line messages, nothing half-written. Data
# files (.npy, safetensors) are written here byte by byte with printf.
# KILN names the binary (default ./kiln).
set -u
cd "$(dirname "$0")/.." || exit 2
KILN=${KILN:-./kiln}
. tests/lib.sh
scratch cli
export XDG_CACHE_HOME="$T/cache"    # kiln's caches of this run only, never the user's

# expect STATUS DESCRIPTION COMMAND...: the exit status, and when it is not
# 0, exactly one line on stderr.
expect() {
    want=$1 what=$2
    shift 2
    "$@" >"$T/out" 2>"$T/err"
    got=$?
    lines=$(wc -l <"$T/err")
    if [ "$got" != "$want" ]; then
        bad "$what: exit $got, expected $want"; sed 's/^/      /' "$T/err"
    elif [ "$want" != 0 ] && [ "$lines" != 1 ]; then
        bad "$what: $lines lines on stderr, expected 1"; sed 's/^/      /' "$T/err"
    else
        ok "$what"
    fi
}

# stderr of the last expect contains a text
says() {
    if grep -qF -- "$1" "$T/err"; then ok "  says '$1'"; else bad "  says '$1'"; sed 's/^/      /' "$T/err"; fi
}

# npy FILE DESCR SHAPE WORD...: a version 1.0 .npy file; words are the
# 32-bit patterns of the elements (i32 values, or f32 bits).
npy() {
    f=$1 d=$2 s=$3
    shift 3
    h="{'descr': '$d', 'fortran_order': False, 'shape': $s, }"
    pad=$(( (64 - (10 + ${#h} + 1) % 64) % 64 ))
    n=$(( ${#h} + pad + 1 ))
    { printf '\223NUMPY\001\000'; byte $((n & 255)); byte $((n >> 8)); printf '%s' "$h"
      printf "%${pad}s" ''; printf '\n'; for w; do le32 "$w"; done; } >"$f"
}

F1=1065353216 F2=1073741824    # the bits of 1.0f and 2.0f

# ---- kiln itself ------------------------------------------------------------
expect 0 "kiln --help" "$KILN" --help
grep -q "exit status" "$T/out" && ok "  --help documents exit statuses" || bad "  --help documents exit statuses"
expect 0 "kiln --version" "$KILN" --version
expect 2 "kiln with no command" "$KILN"
expect 2 "kiln with an unknown command" "$KILN" frobnicate
expect 2 "kiln build without a model" "$KILN" build
expect 2 "kiln build with an unknown option" "$KILN" build examples/mlp.json --frob
expect 2 "kiln build -o without a path" "$KILN" build examples/mlp.json -o
expect 2 "kiln check --disable-pass lower" "$KILN" check examples/mlp.json --disable-pass lower
expect 3 "a model file that does not exist" "$KILN" emit-c "$T/missing.json"
says "missing.json"

printf '{"format": "kiln/1", "name": "m", "inputs": [{"name": "x", "shape": [2, 0]}],\n "nodes": [{"name": "y", "op": "relu", "inputs": ["nope"]}], "outputs": ["y"]}\n' >"$T/bad.json"
"$KILN" emit-c "$T/bad.json" -o "$T/bad.c" 2>"$T/err"
st=$?
[ "$st" = 1 ] && ok "an invalid model exits 1" || bad "an invalid model exits 1 (got $st)"
[ "$(wc -l <"$T/err")" = 2 ] && ok "  every problem reported, one line each" || bad "  every problem reported, one line each"
grep -q "^$T/bad.json: inputs\[0\].shape\[1\]: " "$T/err" && ok "  FILE: JSON-PATH: message" || bad "  FILE: JSON-PATH: message"
[ ! -e "$T/bad.c" ] && ok "  nothing written" || bad "  nothing written"

cp examples/mlp.json "$T/m.json"
expect 2 "-o naming the model file" "$KILN" emit-c "$T/m.json" -o "$T/m.json"
cmp -s examples/mlp.json "$T/m.json" && ok "  the model is intact" || bad "  the model is intact"
expect 3 "-o in a directory that does not exist" "$KILN" build examples/mlp.json -o "$T/no/such/dir/exe"
echo "old" >"$T/keep.c"
sed 's/2, 0/2, 3/' "$T/bad.json" >"$T/bad1.json"
expect 1 "a failed emit-c leaves an older file intact" "$KILN" emit-c "$T/bad1.json" -o "$T/keep.c"
[ "$(cat "$T/keep.c")" = old ] && ok "  older file intact" || bad "  older file intact"

# ---- the pass pipeline ----------------------------------------------------------
expect 0 "kiln passes" "$KILN" passes
for c in emit-c build run check print dump profile import opt passes bench machine; do
    expect 0 "kiln $c --help" "$KILN" $c --help
    head -1 "$T/out" | grep -q "^usage: kiln $c" && ok "  prints kiln $c's usage" || bad "  prints kiln $c's usage"
done
expect 0 "kiln build MODEL -o EXE --help" "$KILN" build examples/mlp.json -o "$T/never" --help
head -1 "$T/out" | grep -q "^usage: kiln build" && [ ! -e "$T/never" ] &&
    ok "  prints kiln build's usage, builds nothing" || bad "  prints kiln build's usage, builds nothing"
expect 0 "kiln help check" "$KILN" help check
grep -q "^CHECK OPTIONS:" "$T/out" && ! grep -q "^RUN OPTIONS" "$T/out" &&
    ok "  check's options, not run's" || bad "  check's options, not run's"
expect 2 "kiln help of no command" "$KILN" help frobnicate
expect 2 "--help of no command" "$KILN" frobnicate --help
MKCKPT=${MKCKPT:-build/tests/mkckpt}
REFGEN=${REFGEN:-build/tests/refgen}
for tool in "$MKCKPT" "$REFGEN"; do        # the test tools answer --help too
    name=$(basename "$tool")
    expect 0 "$name --help" "$tool" --help
    head -1 "$T/out" | grep -q "^usage: $name " && [ ! -s "$T/err" ] &&
        ok "  its usage on stdout" || bad "  its usage on stdout"
done
expect 0 "kiln dump --dump-dir" "$KILN" dump tests/models/linear.json --dump-dir "$T/dump"
n=$(ls "$T/dump" | wc -l)
[ "$n" = 11 ] && [ -f "$T/dump/00-frontend.kir" ] && [ -f "$T/dump/10-codegen.c" ] &&
    ok "  00-frontend.kir ... 10-codegen.c" || bad "  00-frontend.kir ... 10-codegen.c ($n files)"
expect 0 "kiln dump --after lower" "$KILN" dump tests/models/linear.json --after lower
grep -q "^prog linear" "$T/out" && ok "  prints the loop IR" || bad "  prints the loop IR"
# hoist-weights moves nothing in llama2-step, only its notes differ
expect 0 "kiln dump --after hoist-weights" "$KILN" dump examples/llama2-step.json --after hoist-weights
grep -q "after 05-hoist-weights (unchanged)" "$T/out" && ok "  says (unchanged)" || bad "  says (unchanged)"
expect 0 "kiln dump --after fuse" "$KILN" dump examples/llama2-step.json --after fuse
grep -q "after 06-fuse (changed)" "$T/out" && ok "  says (changed)" || bad "  says (changed)"
expect 1 "--max-memory below the plan's peak" "$KILN" build examples/mlp.json --max-memory 1000 -o "$T/never"
says "more than --max-memory 1000"
[ ! -e "$T/never" ] && ok "  nothing built" || bad "  nothing built"
for c in run profile; do        # every model command takes the pipeline's options
    expect 1 "kiln $c --max-memory below the plan's peak" "$KILN" $c examples/mlp.json --max-memory 1000
    says "more than --max-memory 1000"
    expect 0 "kiln $c --machine" "$KILN" $c examples/mlp.json --machine l1d=48K,l2=1M,l3=32M,vector=64,cores=2
done
expect 0 "check --bisect" "$KILN" check tests/models/norms.json --bisect
expect 1 "check --bisect names a broken pass" env KILN_TEST_BREAK=fuse "$KILN" check tests/models/norms.json --bisect
says "first pass off the reference: fuse: output 'bn' element [0,0,0,0]"

# ---- generated C: deterministic, self-contained, warning-free ---------------
for m in examples/*.json; do
    "$KILN" emit-c "$m" -o "$T/a.c" && "$KILN" emit-c "$m" -o "$T/b.c"
    cmp -s "$T/a.c" "$T/b.c" && ok "emit-c $m is deterministic" || bad "emit-c $m is deterministic"
    if cc -std=c11 -Wall -Wextra -Werror -fopenmp -fsyntax-only "$T/a.c" 2>"$T/err"; then
        ok "  compiles warning-free with -std=c11 -Wall -Wextra"
    else
        bad "  compiles warning-free with -std=c11 -Wall -Wextra"; head -5 "$T/err"
    fi
    # clang warns of a static function no kernel calls (gcc does not)
    if command -v clang-14 >/dev/null; then
        if clang-14 -std=c11 -Wall -Wextra -Werror -fopenmp -fsyntax-only "$T/a.c" 2>"$T/err"; then
            ok "  and with clang-14"
        else
            bad "  and with clang-14"; head -5 "$T/err"
        fi
    fi
done
# Some warnings come only from the optimiser (gcc 12's "iteration N invokes
# undefined behavior" in attention's loops, at -O2 and -O3): a decoder's
# file compiled as kiln build compiles it.
"$KILN" emit-c examples/llama2-step.json -o "$T/a.c"
if cc -std=c11 -Wall -Wextra -Werror -O3 -march=native -fopenmp -c -o "$T/a.o" "$T/a.c" 2>"$T/err"; then
    ok "emit-c llama2-step compiles warning-free at -O3 -march=native"
else
    bad "emit-c llama2-step compiles warning-free at -O3 -march=native"; head -5 "$T/err"
fi
# Kernels alike share a function: llama2-step's 6 layers have each kernel
# once, as sN(m, p), and each layer's kernel is a wrapper that fills p
# (the cache writes too, whose check messages name their layer).
"$KILN" emit-c examples/llama2-step.json -o "$T/l2.c"
n=$(grep -c '^static __attribute__((noinline)) int s[0-9]*(llama2_step_model \*m, void \*const \*p)' "$T/l2.c")
w=$(grep -c 'return s[0-9]*(m, p);' "$T/l2.c")
c=$(grep -A3 '^static int k[0-9]*(' "$T/l2.c" | grep -c "\"cache_write 'layers\.[0-5]\.")
[ "$n" -ge 4 ] && [ "$w" -ge $((5 * n)) ] && [ "$c" -ge 12 ] &&
    ok "emit-c llama2-step: $n shared kernel functions, $w wrappers, $c cache writes among them" ||
    bad "emit-c llama2-step: shared kernel functions ($n templates, $w wrappers, $c cache writes)"
# The JIT's C (what kiln run hands libtcc): its element-wise nests call rt_vec
"$KILN" emit-c examples/layernorm.json --jit -o "$T/jit.c" &&
    grep -q 'rt_vec(vc, vp, vs, vn);' "$T/jit.c" &&
    ok "emit-c --jit writes the JIT's C, nests through rt_vec" ||
    bad "emit-c --jit writes the JIT's C, nests through rt_vec"

# ---- a built executable -------------------------------------------------------
E=$T/emb
expect 0 "kiln build tests/models/embedding.json" "$KILN" build tests/models/embedding.json -o "$E"
npy "$T/ids.npy" '<i4' '(2, 3)' 0 1 2 9 8 7
expect 0 "run with --input and --output" "$E" --input "ids=$T/ids.npy" --output "e=$T/e.npy"
[ -s "$T/e.npy" ] && ok "  the output file is written" || bad "  the output file is written"
expect 0 "kiln run MODEL --help" "$KILN" run tests/models/embedding.json --help
grep -q "^usage: kiln run tests/models/embedding.json \[--weights" "$T/out" &&
    ok "  names kiln run and the model" || bad "  names kiln run and the model"
expect 0 "kiln run writes the same output" "$KILN" run tests/models/embedding.json --input "ids=$T/ids.npy" --output "e=$T/e_jit.npy"
cmp -s "$T/e.npy" "$T/e_jit.npy" && ok "  JIT and cc outputs are identical" || bad "  JIT and cc outputs are identical"

npy "$T/ids_bad.npy" '<i4' '(2, 3)' 0 1 2 10 8 7
cp "$T/e.npy" "$T/e_keep.npy"
expect 1 "an id out of range" "$E" --input "ids=$T/ids_bad.npy" --output "e=$T/e_keep.npy"
says "out of range"
cmp -s "$T/e.npy" "$T/e_keep.npy" && ok "  the older output stays intact" || bad "  the older output stays intact"
expect 1 "an id out of range under the JIT" "$KILN" run tests/models/embedding.json --input "ids=$T/ids_bad.npy"
says "out of range"
npy "$T/ids_neg.npy" '<i4' '(2, 3)' 0 -1 2 3 4 5
expect 1 "a negative id" "$E" --input "ids=$T/ids_neg.npy"
npy "$T/ids_shape.npy" '<i4' '(3,)' 0 1 2
expect 1 "an input of the wrong shape" "$E" --input "ids=$T/ids_shape.npy"
says "[2,3]"
npy "$T/ids_f32.npy" '<f4' '(2, 3)' 0 0 0 0 0 0
expect 1 "an input of the wrong dtype" "$E" --input "ids=$T/ids_f32.npy"
printf 'not a numpy file' >"$T/junk.npy"
expect 1 "an input that is not .npy" "$E" --input "ids=$T/junk.npy"
expect 3 "an input file that does not exist" "$E" --input "ids=$T/none.npy"
expect 2 "an unknown input name" "$E" --input "nope=$T/ids.npy"
expect 2 "--input without =" "$E" --input "$T/ids.npy"
expect 2 "an unknown option" "$E" --frob
expect 2 "--repeat 0" "$E" --repeat 0
expect 2 "--threads x" "$E" --threads x
expect 3 "--output in a missing directory" "$E" --input "ids=$T/ids.npy" --output "e=$T/no/dir/e.npy"
expect 0 "--help" "$E" --help
expect 0 "--repeat 3 --threads 2" "$E" --repeat 3 --threads 2
expect 0 "--version" "$E" --version
grep -q "^model 'embedding', generated by kiln [0-9]" "$T/out" && grep -q "^built with: .*-O3 -march=native -fopenmp" "$T/out" &&
    [ "$(wc -l <"$T/out")" = 2 ] && ok "  the model, kiln's version and the build flags" ||
    { bad "  the model, kiln's version and the build flags"; cat "$T/out"; }
expect 0 "kiln run MODEL --version" "$KILN" run tests/models/embedding.json --version
grep -q "^built with: the JIT: libtcc" "$T/out" && ok "  says it is the JIT" || bad "  says it is the JIT"
"$KILN" emit-c tests/models/embedding.json -o "$T/emb.c" &&
    cc -O0 -fopenmp '-DKILN_BUILD_FLAGS="cc -O0 by hand"' -o "$T/emb0" "$T/emb.c" -lm 2>"$T/err" &&
    "$T/emb0" --version >"$T/out" && grep -qx "built with: cc -O0 by hand" "$T/out" &&
    ok "  -DKILN_BUILD_FLAGS names the build" || { bad "  -DKILN_BUILD_FLAGS names the build"; cat "$T/err"; }
expect 2 "--version takes no value" "$E" --version=1

# weights files: the table is [10, 4]
safetensors "$T/w.st" '{"table":{"dtype":"F32","shape":[10,4],"data_offsets":[0,160]}}' \
    $(i=0; while [ $i -lt 40 ]; do echo $F1; i=$((i + 1)); done)
expect 0 "--weights with a good file" "$E" --weights "$T/w.st" --input "ids=$T/ids.npy" --output "e=$T/e1.npy"
npy "$T/ones.npy" '<f4' '(2, 3, 4)' $(i=0; while [ $i -lt 24 ]; do echo $F1; i=$((i + 1)); done)
cmp -s "$T/e1.npy" "$T/ones.npy" && ok "  the file's weights are used" || bad "  the file's weights are used"
mkdir "$T/wdir" && cp "$T/w.st" "$T/wdir/model.safetensors"
expect 0 "--weights DIR: the folder's model.safetensors" "$E" --weights "$T/wdir" --input "ids=$T/ids.npy" --output "e=$T/e2.npy"
cmp -s "$T/e2.npy" "$T/ones.npy" && ok "  the folder's weights are used" || bad "  the folder's weights are used"
expect 0 "kiln check --weights DIR" "$KILN" check tests/models/embedding.json --weights "$T/wdir" --no-cc
safetensors "$T/w_shape.st" '{"table":{"dtype":"F32","shape":[10,2],"data_offsets":[0,80]}}' \
    $(i=0; while [ $i -lt 20 ]; do echo $F2; i=$((i + 1)); done)
expect 1 "a weight of the wrong shape" "$E" --weights "$T/w_shape.st"
says "[10,4]"
safetensors "$T/w_extra.st" '{"other":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}' $F1
expect 1 "a weights file without the weight" "$E" --weights "$T/w_extra.st"
printf 'xx' >"$T/w_short.st"
expect 1 "a truncated weights file" "$E" --weights "$T/w_short.st"
expect 3 "a weights file that does not exist" "$E" --weights "$T/none.st"
expect 1 "the same through kiln run" "$KILN" run tests/models/embedding.json --weights "$T/w_shape.st"

# positions past a KV cache of 6 rows, T = 2: pos may be 0..4
K=$T/kv
"$KILN" build tests/models/kv-cache.json -o "$K" 2>/dev/null
npy "$T/pos4.npy" '<i4' '()' 4
npy "$T/pos5.npy" '<i4' '()' 5
expect 0 "pos + T = S is accepted" "$K" --input "pos=$T/pos4.npy"
expect 1 "pos + T > S is refused" "$K" --input "pos=$T/pos5.npy"
npy "$T/posneg.npy" '<i4' '()' -1
expect 1 "a negative pos is refused" "$K" --input "pos=$T/posneg.npy"

# ---- --lib: a library and a header, used from C ------------------------------
expect 0 "kiln build --lib" "$KILN" build tests/models/init-data.json --lib -o "$T/lib"
[ -f "$T/lib/libinit_data.so" ] && [ -f "$T/lib/libinit_data.a" ] && [ -f "$T/lib/init_data.h" ] &&
    ok "  .so, .a and .h written" || bad "  .so, .a and .h written"
cat >"$T/use.c" <<'EOF'
#include <stdio.h>
#include "init_data.h"
int main(void)
{
    init_data_model *m = init_data_open(NULL);
    if (!m || init_data_status(m)) return 1;
    float x[6] = {1, 1, 1, 2, 2, 2}, z[6];
    const void *in[] = {x};
    void *out[] = {z};
    if (init_data_run(m, in, out)) return 2;
    /* z = x * [1.5, -2, 0.25] + 0.75 */
    int ok = z[0] == 2.25f && z[1] == -1.25f && z[2] == 1.0f && z[5] == 1.25f;
    printf("%s %s\n", init_data_input_names[0], init_data_output_names[0]);
    init_data_close(m);
    return ok ? 0 : 3;
}
EOF
if cc -std=c11 -Wall -Wextra -Werror -I"$T/lib" -o "$T/use" "$T/use.c" "$T/lib/libinit_data.a" -fopenmp -lm 2>"$T/err" &&
    [ "$("$T/use")" = "x z" ]; then
    ok "  a C program links the .a and computes the right numbers"
else
    bad "  a C program links the .a and computes the right numbers"; cat "$T/err"
fi
# its pkg-config file: the .so through --cflags --libs, the .a through --static
if cp -r "$T/lib" "$T/moved" && PKG_CONFIG_PATH="$T/moved" pkg-config --exists init_data &&
   cc -std=c11 -Wall -Werror -o "$T/use2" "$T/use.c" \
       $(PKG_CONFIG_PATH="$T/moved" pkg-config --cflags --libs init_data) 2>"$T/err" &&
   [ "$(LD_LIBRARY_PATH="$T/moved" "$T/use2")" = "x z" ] &&
   cc -std=c11 -Wall -Werror -o "$T/use3" "$T/use.c" $(PKG_CONFIG_PATH="$T/moved" pkg-config \
       --cflags init_data) "$T/moved/libinit_data.a" \
       $(PKG_CONFIG_PATH="$T/moved" pkg-config --static --libs-only-other init_data) -lm 2>>"$T/err" &&
   [ "$("$T/use3")" = "x z" ]; then
    ok "  its init_data.pc, the folder moved: pkg-config links the .so and the .a"
else
    bad "  its init_data.pc: pkg-config links the .so and the .a"; cat "$T/err"
fi

# make install: kiln and its docs under DESTDIR/PREFIX; the installed kiln
# builds a model from elsewhere (its runtime is inside it); uninstall
# removes them.
if make -s --no-print-directory install DESTDIR="$T/root" PREFIX=/opt/k INSTALL_BIN="$KILN" \
       >"$T/out" 2>&1 && [ -x "$T/root/opt/k/bin/kiln" ] &&
   [ -f "$T/root/opt/k/share/doc/kiln/program.md" ] &&
   (r=$PWD && cd "$T" && ./root/opt/k/bin/kiln build "$r/examples/mlp.json" -o mlp-installed \
       >/dev/null 2>&1 && ./mlp-installed --repeat 1 >/dev/null 2>&1) &&
   make -s --no-print-directory uninstall DESTDIR="$T/root" PREFIX=/opt/k >>"$T/out" 2>&1 &&
   [ ! -e "$T/root/opt/k/bin/kiln" ] && [ ! -e "$T/root/opt/k/share/doc/kiln" ]; then
    ok "make install DESTDIR PREFIX: kiln and its docs; it builds from elsewhere; uninstall"
else
    bad "make install DESTDIR PREFIX"; cat "$T/out"; ls -R "$T/root" 2>&1 | head
fi

# dlopen, a run, dlclose at once while the pool's workers still spin in the
# library's code, twice: the .so must stay mapped (-z nodelete).
expect 0 "kiln build --lib of a model with parallel loops" \
    "$KILN" build examples/mlp.json --lib -o "$T/libmlp"
cat >"$T/dl.c" <<'EOF'
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>
typedef void *(*open_fn)(const char *);
typedef int (*run_fn)(void *, const void *const *, void *const *);
int main(int argc, char **argv)
{
    (void)argc;
    for (int round = 0; round < 2; round++) {
        void *h = dlopen(argv[1], RTLD_NOW);
        if (!h)
            return 1;
        open_fn op = (open_fn)dlsym(h, "mlp_block_open");
        run_fn run = (run_fn)dlsym(h, "mlp_block_run");
        float *x = calloc(40 * 1536, 4), *y = calloc(40 * 1536, 4);
        const void *in[] = {x};
        void *out[] = {y};
        void *m = op ? op(NULL) : NULL;
        if (!m || !run || run(m, in, out))
            return 2;
        dlclose(h);             /* the model left open: a test of the unload */
        free(x);
        free(y);
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
    return 0;
}
EOF
if cc -std=c11 -Wall -Wextra -Werror -o "$T/dl" "$T/dl.c" -ldl 2>"$T/err" &&
    OMP_NUM_THREADS=2 "$T/dl" "$T/libmlp/libmlp_block.so" 2>"$T/err"; then
    ok "  dlopen, run, dlclose at once, twice: no crash"
else
    bad "  dlopen, run, dlclose at once, twice: no crash"; cat "$T/err"
fi

# ---- the build cache ---------------------------------------------------------
# A fresh $XDG_CACHE_HOME: the user's cache is neither read nor written.
# Hits are told by the note on stderr, never by time.
hit() { grep -q "(cache hit)" "$T/err"; }
C=$XDG_CACHE_HOME/kiln/builds
rm -rf "$XDG_CACHE_HOME"
expect 0 "a first build misses the cache" "$KILN" build tests/models/linear.json -o "$T/lin1"
hit && bad "  no cache hit" || ok "  no cache hit"
# entries: the executable's, and the runtime's core part's object
says "building the runtime's core part"
[ "$(ls "$C" | wc -l)" = 2 ] && [ "$(ls "$C"/*/manifest | wc -l)" = 2 ] &&
    [ "$(ls "$C"/*/exe | wc -l)" = 1 ] && [ "$(ls "$C"/*/rt.o | wc -l)" = 1 ] &&
    ok "  two entries kept: the executable, the runtime's core" || bad "  two entries kept ($(ls "$C" | wc -l))"
expect 0 "the same build again is a hit" "$KILN" build tests/models/linear.json -o "$T/lin2"
says "(cache hit)"
cmp -s "$T/lin1" "$T/lin2" && [ -x "$T/lin2" ] && ok "  the same executable" || bad "  the same executable"
"$T/lin2" >"$T/out" 2>/dev/null && grep -q "^z f32\[2,3,4\]" "$T/out" && ok "  which runs" || bad "  which runs"
expect 0 "--no-cache builds anew" "$KILN" build tests/models/linear.json -o "$T/lin3" --no-cache
hit && bad "  no cache hit" || ok "  no cache hit"
sed 's/"seed": 103/"seed": 104/' tests/models/linear.json >"$T/lin-changed.json"
expect 0 "a changed model misses" "$KILN" build "$T/lin-changed.json" -o "$T/lin4"
hit && bad "  no cache hit" || ok "  no cache hit"
grep -q "runtime's core part" "$T/err" && bad "  the runtime's core part built again" ||
    ok "  the runtime's core part from the cache"
[ "$(ls "$C" | wc -l)" = 3 ] && ok "  a third entry kept" || bad "  a third entry kept ($(ls "$C" | wc -l))"
expect 0 "other flags miss" env KILN_CFLAGS_EXTRA=-DKILN_TEST_FLAG "$KILN" build tests/models/linear.json -o "$T/lin5"
hit && bad "  no cache hit" || ok "  no cache hit"
for f in "$C"/*/exe; do printf 'X' | dd of="$f" bs=1 seek=1000 conv=notrunc 2>/dev/null; done
expect 0 "a damaged entry is not used" "$KILN" build tests/models/linear.json -o "$T/lin6"
hit && bad "  no cache hit" || ok "  no cache hit"
says "removed a damaged entry"
"$T/lin6" >"$T/out6" 2>/dev/null && "$T/lin1" >"$T/out1" 2>/dev/null && cmp -s "$T/out1" "$T/out6" &&
    ok "  cc built it again" || bad "  cc built it again"
expect 0 "...and was replaced" "$KILN" build tests/models/linear.json -o "$T/lin7"
says "(cache hit)"
cmp -s "$T/lin6" "$T/lin7" && ok "  by the new build" || bad "  by the new build"
for f in "$C"/*/rt.o; do printf 'X' | dd of="$f" bs=1 seek=100 conv=notrunc 2>/dev/null; done
sed 's/"seed": 103/"seed": 105/' tests/models/linear.json >"$T/lin-r.json"
expect 0 "a damaged runtime object is not linked" "$KILN" build "$T/lin-r.json" -o "$T/linr"
says "removed a damaged entry"
says "building the runtime's core part"
"$T/linr" >"$T/outr" 2>/dev/null && grep -q "^z f32\[2,3,4\]" "$T/outr" && ok "  which runs" || bad "  which runs"
rm -f "$C"/*/manifest
expect 0 "an entry without its manifest is not used" "$KILN" build tests/models/linear.json -o "$T/lin8"
hit && bad "  no cache hit" || ok "  no cache hit"
"$KILN" build tests/models/init-data.json --lib -o "$T/lib2" 2>/dev/null
expect 0 "--lib is cached too" "$KILN" build tests/models/init-data.json --lib -o "$T/lib3"
says "(cache hit)"
cmp -s "$T/lib2/libinit_data.so" "$T/lib3/libinit_data.so" && cmp -s "$T/lib2/libinit_data.a" "$T/lib3/libinit_data.a" &&
    cmp -s "$T/lib/init_data.h" "$T/lib3/init_data.h" && ok "  the same .so, .a and .h" || bad "  the same .so, .a and .h"
echo "old" >"$T/keep.exe"
expect 1 "a failed build leaves the output alone" "$KILN" build "$T/bad1.json" -o "$T/keep.exe"
[ "$(cat "$T/keep.exe")" = old ] && ok "  older file intact" || bad "  older file intact"
printf 'not a directory' >"$T/plain"
expect 0 "an unusable cache does not stop a build" env XDG_CACHE_HOME="$T/plain" "$KILN" build tests/models/linear.json -o "$T/lin9"
says "kiln: cache: not kept"

# ---- profiles ---------------------------------------------------------------------
expect 0 "an executable's --profile" "$T/lin1" --repeat 3 --profile "$T/prof.jsonl"
n=$(wc -l <"$T/prof.jsonl")
[ "$n" -ge 1 ] && ! grep -qv '^{"name": "[a-z0-9_]*", "kernels": \["k[0-9]' "$T/prof.jsonl" &&
    ok "  one JSON line per kernel name" || bad "  one JSON line per kernel name"
grep -q '"calls": 3,' "$T/prof.jsonl" && ok "  every call counted" || bad "  every call counted"
grep -q '"peak_percent": null' "$T/prof.jsonl" && ok "  no percentages without kiln machine's figures" ||
    bad "  no percentages without kiln machine's figures"
says "percentages of peak are null"
expect 2 "--profile without a file" "$T/lin1" --profile
expect 3 "--profile into a missing directory" "$T/lin1" --profile "$T/no/dir/p.jsonl"
expect 0 "kiln run --profile" "$KILN" run tests/models/linear.json --repeat 2 --profile "$T/jit.jsonl"
grep -q '"calls": 2,' "$T/jit.jsonl" && [ "$(wc -l <"$T/jit.jsonl")" = "$n" ] && ok "  the same kernels" || bad "  the same kernels"
expect 0 "kiln profile" "$KILN" profile examples/deepseek-r1-block.json --repeat 2
says "kiln: cc: building"
head -1 "$T/out" | grep -q "^kiln profile: deepseek_r1_block, cc build, 2 runs" && ok "  the run" || bad "  the run"
grep -q "^gqa_prefill_causal_h12_kv2_d128 " "$T/out" && grep -q "^kernel .*GFLOP/s  %peak" "$T/out" &&
    ok "  a table of kernels" || bad "  a table of kernels"
sed -n '/^kernel/,$p' "$T/out" | awk 'NR > 2 && $4 > prev { exit 1 } NR > 1 { prev = $4 }' &&
    ok "  the slowest first" || bad "  the slowest first"
# the program's own message, after the build's progress (kiln profile's, as kiln build's)
"$KILN" profile tests/models/linear.json --frob >"$T/out" 2>"$T/err"
st=$?
[ "$st" = 2 ] && tail -n 1 "$T/err" | grep -q "^kiln: unknown option '--frob'" && ! grep -v "^kiln: built\|^kiln: cc: building\|^kiln: unknown option" "$T/err" &&
    ok "kiln profile with an unknown run option" || { bad "kiln profile with an unknown run option: exit $st"; sed 's/^/      /' "$T/err"; }
expect 2 "--no-cache is for builds" "$KILN" run tests/models/linear.json --no-cache
# kiln machine's figures, as if measured here: percentages in the build
mkdir -p "$XDG_CACHE_HOME/kiln"
cpu=$(sed -n 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -1 | tr -s ' \t' '  ' | sed 's/ *$//')
printf '{"cpu": "%s", "cores": %d, "date": "2026-01-01T00:00:00Z", "fma_peak_gflops": 100,
 "fma_peak_1core_gflops": 50, "read_gbs": 10, "read_bytes": 268435456, "method": 2}\n' "${cpu:-unknown}" "$(getconf _NPROCESSORS_ONLN)" \
    >"$XDG_CACHE_HOME/kiln/machine.json"
expect 0 "kiln build with kiln machine's figures" "$KILN" build tests/models/linear.json -o "$T/linm"
hit && bad "  no cache hit (other figures)" || ok "  no cache hit (other figures)"
"$T/linm" --profile "$T/m.jsonl" 2>/dev/null >/dev/null
grep -q '"peak_percent": [0-9]' "$T/m.jsonl" && ok "  percentages of peak" || bad "  percentages of peak"
expect 0 "kiln profile with kiln machine's figures" "$KILN" profile tests/models/linear.json -v
says "(cache hit)"
grep -q "fp32 FMA peak 100.0 GFLOP/s (50.0 on 1 core), read 10.0 GB/s" "$T/out" && ok "  says of what" || bad "  says of what"

# ---- what a program holds, against this machine's memory -------------------
# A weight of 2^40 floats (4 TiB) built in a few seconds, said to need more
# than this machine has; kiln itself holds none of it (at most 4 GB of
# address space, but under ASan, whose shadow needs far more).
printf '{"format": "kiln/1", "name": "huge", "inputs": [{"name": "x", "shape": [1, 1048576]}],
 "weights": [{"name": "w", "shape": [1048576, 1048576], "init": {"random": {"seed": 1, "scale": 0.5}}}],
 "nodes": [{"name": "y", "op": "linear", "inputs": ["x", "w"]}], "outputs": ["y"]}\n' >"$T/huge.json"
limit="ulimit -v 4000000;"
[ -n "${ASAN_OPTIONS:-}" ] && limit=""
expect 0 "a model bigger than this machine builds" sh -c "$limit"' exec "$0" build "$1" -o "$2"' \
    "$KILN" "$T/huge.json" "$T/huge"
says "kiln: note: huge needs 4398046511104 bytes once opened (weights 4398046511104, state 0, intermediates 0); this machine has "
[ -x "$T/huge" ] && ok "  the executable is built" || bad "  the executable is built"
expect 0 "a model that fits says nothing of memory" "$KILN" build tests/models/linear.json -o "$T/lin10"
grep -q "note:" "$T/err" && bad "  no note" || ok "  no note"

# ---- interrupted: Ctrl-C (SIGINT), SIGTERM -----------------------------------
# $T/slowcc is a compiler that takes its time: it writes its pid, then
# sleeps (answering --version at once, unless $T/slow-version exists).
# Interrupted while cc runs, kiln passes the signal on to it; interrupted
# while it computes itself (here: while `$CC --version` names the compiler
# for the cache key, no child of its own), it ends at once. Either way it
# dies of the signal (the shell's 130 or 143), says it was interrupted and
# blames no compiler, and leaves no temporary: none in its $TMPDIR (a
# build's scratch directory, kiln check's, kiln profile's) nor beside the
# output, and no compiler running.
cat >"$T/slowcc" <<EOF
#!/bin/sh
if [ "\$1" = --version ] && [ ! -e "$T/slow-version" ]; then echo "slowcc 1"; exit 0; fi
echo \$\$ >"$T/cc-pid"
exec sleep 30
EOF
chmod +x "$T/slowcc"
# running PID: the process runs (a zombie waits for whoever adopted it)
running() { [ -r "/proc/$1/stat" ] && ! sed 's/.*) //' "/proc/$1/stat" | grep -q '^[ZX]'; }
# interrupted SIG STATUS WHAT CMD...: CMD in the background (SIGINT not
# ignored, as it is in a script's background jobs), $TMPDIR $T/itmp, sent
# SIG once the compiler runs.
interrupted() {
    sig=$1 want=$2 what=$3
    shift 3
    rm -rf "$T/itmp" "$T/iout" "$T/cc-pid"
    mkdir "$T/itmp" "$T/iout"
    env --default-signal=INT CC="$T/slowcc" TMPDIR="$T/itmp" "$@" >"$T/out" 2>"$T/err" &
    pid=$!
    n=0
    while [ ! -s "$T/cc-pid" ] && [ $n -lt 600 ]; do sleep 0.1; n=$((n + 1)); done
    kill -"$sig" "$pid"
    wait "$pid"
    got=$?
    cc=$(cat "$T/cc-pid" 2>/dev/null)
    n=0
    while [ -n "$cc" ] && running "$cc" && [ $n -lt 30 ]; do sleep 0.1; n=$((n + 1)); done
    left="$(ls -A "$T/itmp")$(ls -A "$T/iout")"
    if [ "$got" = "$want" ] && grep -q "^kiln: interrupted (SIG$sig)$" "$T/err" &&
        ! grep -qi "compiler failed\|fail" "$T/err" && [ -z "$left" ]; then
        ok "$what"
    else
        bad "$what: exit $got (want $want); left: $left"; sed 's/^/      /' "$T/err"
    fi
    if [ -n "$cc" ] && running "$cc"; then
        kill "$cc"                              # `$CC --version`'s, not kiln's child
        [ -e "$T/slow-version" ] && ok "  (the compiler asked for its version, stopped here)" ||
            bad "  the compiler was left running"
    else
        ok "  no compiler left running"
    fi
}
interrupted INT 130 "Ctrl-C while kiln build's cc runs" "$KILN" build tests/models/linear.json -o "$T/iout/exe"
interrupted TERM 143 "SIGTERM while kiln build's cc runs" "$KILN" build tests/models/linear.json -o "$T/iout/exe"
interrupted INT 130 "Ctrl-C while kiln check's cc runs" "$KILN" check tests/models/linear.json
interrupted INT 130 "Ctrl-C while kiln profile's cc runs" "$KILN" profile tests/models/linear.json --no-cache
interrupted INT 130 "Ctrl-C while kiln build --lib's cc runs" "$KILN" build tests/models/linear.json --lib -o "$T/iout"
touch "$T/slow-version"
interrupted INT 130 "Ctrl-C while kiln build computes (no child of its own)" "$KILN" build tests/models/linear.json -o "$T/iout/exe"
rm -f "$T/slow-version"

echo "$fails failed"
[ "$fails" = 0 ]
