#!/bin/sh
# tests/image.sh: prepared weights kept in an image and mapped
# (runtime/core/rt_image.c), one line per check: the first open of a
# weights file prepares and keeps the image, later opens map it with the
# same numbers; a changed weights file or another layout is another
# image; a truncated or damaged image is removed and prepared again; a
# cache that cannot be written (a file in the way, a full disk) leaves
# no temporary and the program runs on with its weights in memory; two
# programs preparing at once; a killed writer's temporary removed;
# KILN_WEIGHTS_CACHE=off; the JIT, which maps a build's image unless its
# open program rounds as only its compiler does.
# KILN and MKCKPT name the binaries.
set -u
cd "$(dirname "$0")/.." || exit 2
KILN=${KILN:-./kiln}
MKCKPT=${MKCKPT:-build/tests/mkckpt}
. tests/lib.sh
scratch image

W=$T/hf/model.safetensors
export KILN_WEIGHTS_CACHE="$T/wc"
mkdir "$T/hf"
run "mkckpt hf llama" "$MKCKPT" hf llama "$T/hf"
# (built without preparing: the first open below prepares)
run "build the folder" env KILN_WEIGHTS_CACHE=off "$KILN" build "$T/hf" -o "$T/exe"
run "build it with bf16 weights" env KILN_WEIGHTS_CACHE=off "$KILN" build "$T/hf" -o "$T/exe16" \
    --weight-dtype bf16

images() { ls "$KILN_WEIGHTS_CACHE" 2>/dev/null | grep -c '\.kwi$'; }
# gen NAME EXE [ENV...]: greedy tokens of a fixed prompt into $T/NAME.
gen() {
    name=$1 exe=$2
    shift 2
    before=$(stamp)
    env "$@" "$exe" generate --tokens 5,6,7 -n 12 --temperature 0 --weights "$W" >"$T/$name" 2>"$T/err"
}
# An image is written anew (a new file: another inode or time) or not; the note
# says so only for a slow first open.
stamp() { ls -i --full-time "$KILN_WEIGHTS_CACHE" 2>/dev/null | grep '\.kwi$' | sort; }
prepared() { [ "$(stamp)" != "$before" ]; }

gen first "$T/exe" && prepared && [ "$(images)" = 1 ] &&
    ok "the first open prepares the weights and keeps one image" ||
    { bad "the first open prepares the weights and keeps one image"; cat "$T/err"; }
gen second "$T/exe" && ! prepared && ! grep -q "note:" "$T/err" && cmp -s "$T/first" "$T/second" &&
    [ -s "$T/first" ] && ok "the next open maps it, says nothing, and generates the same tokens" ||
    { bad "the next open maps it, says nothing, and generates the same tokens"; cat "$T/err"; }
gen off "$T/exe" KILN_WEIGHTS_CACHE=off && ! prepared && ! grep -q "note:" "$T/err" &&
    cmp -s "$T/first" "$T/off" && [ "$(images)" = 1 ] &&
    ok "KILN_WEIGHTS_CACHE=off: prepared in memory, the same tokens, no image" ||
    bad "KILN_WEIGHTS_CACHE=off: prepared in memory, the same tokens, no image"
gen b1 "$T/exe16" && prepared && [ "$(images)" = 2 ] && gen b2 "$T/exe16" && cmp -s "$T/b1" "$T/b2" &&
    ok "another layout (bf16) is another image" || bad "another layout (bf16) is another image"

# Damage: each is found at the next open, removed, and prepared again.
img=$(ls -t "$KILN_WEIGHTS_CACHE"/*.kwi | tail -n 1)     # the f32 program's
damaged() {
    what=$1
    gen after "$T/exe" && grep -Eq "note: weights image .*($2).*; preparing it again" "$T/err" &&
        prepared && cmp -s "$T/first" "$T/after" && gen again "$T/exe" && ! prepared &&
        ! grep -q "note:" "$T/err" &&
        ok "$what: refused, prepared again, the same tokens" ||
        { bad "$what: refused, prepared again, the same tokens"; cat "$T/err"; }
}
size=$(wc -c <"$img")
truncate -s $((size - 4096)) "$img"
damaged "a truncated image" "its size is not the size it was written with"
printf 'X' | dd of="$img" bs=1 seek=40 conv=notrunc 2>/dev/null
damaged "an image whose header is changed" "its table differs|its key differs|its header is damaged"
printf 'XXXX' | dd of="$img" bs=1 seek=$((size - 100)) conv=notrunc 2>/dev/null
damaged "an image whose last buffer's end is changed" "a buffer is damaged"
head -c 100 /dev/zero >"$img"
damaged "an image that is not one" "not a weights image of this kiln"

# A changed weights file is another key: its old image is never found.
touch -d '2001-01-01' "$W"
gen touched "$T/exe" && prepared && cmp -s "$T/first" "$T/touched" &&
    ok "a weights file changed (its time) is prepared again" || bad "a weights file changed (its time) is prepared again"

# Caches that cannot be written: the program runs on, nothing is left.
printf 'x' >"$T/plain"
gen nodir "$T/exe" KILN_WEIGHTS_CACHE="$T/plain/wc" && cmp -s "$T/first" "$T/nodir" &&
    grep -q "note: weights image not kept in $T/plain/wc" "$T/err" &&
    ok "a cache that cannot be made: said, the weights prepared in memory" ||
    { bad "a cache that cannot be made: said, the weights prepared in memory"; cat "$T/err"; }
mkdir "$T/full"
(trap '' XFSZ; ulimit -f 64; gen fulldisk "$T/exe" KILN_WEIGHTS_CACHE="$T/full")
cmp -s "$T/first" "$T/fulldisk" && grep -q "note: weights image not kept in $T/full (File too large)" "$T/err" &&
    [ -z "$(ls -A "$T/full")" ] &&
    ok "a full disk (a file size limit): said, no temporary left, the same tokens" ||
    { bad "a full disk (a file size limit): said, no temporary left, the same tokens"; cat "$T/err"; ls -A "$T/full"; }

# Two programs preparing one image at once: both run, one whole image.
KILN_WEIGHTS_CACHE="$T/two"; export KILN_WEIGHTS_CACHE
gen p1 "$T/exe" & gen p2 "$T/exe" 2>"$T/err2" & wait
cmp -s "$T/first" "$T/p1" && cmp -s "$T/first" "$T/p2" && [ "$(images)" = 1 ] &&
    [ "$(ls -A "$T/two" | wc -l)" = 1 ] && gen p3 "$T/exe" && ! prepared && ! grep -q "note:" "$T/err" &&
    ok "two programs preparing at once: the same tokens, one image, then mapped" ||
    bad "two programs preparing at once: the same tokens, one image, then mapped"

# A writer killed while it wrote left its temporary: the next write removes
# it (its process is gone), never a live process's. 2147483646 is past any
# pid_max, so no such process exists.
mkdir "$T/sweep"
printf 'partial' >"$T/sweep/.tmp-2147483646-0"
printf 'partial' >"$T/sweep/.tmp-$$-0"
gen swept "$T/exe" KILN_WEIGHTS_CACHE="$T/sweep" && cmp -s "$T/first" "$T/swept" &&
    [ ! -e "$T/sweep/.tmp-2147483646-0" ] && [ -e "$T/sweep/.tmp-$$-0" ] &&
    [ "$(ls "$T/sweep" | grep -c '\.kwi$')" = 1 ] &&
    ok "a killed writer's temporary is removed at the next write, a live one's kept" ||
    { bad "a killed writer's temporary is removed at the next write, a live one's kept"; ls -A "$T/sweep"; }

# The JIT prepares and maps as a build's program does.
KILN_WEIGHTS_CACHE="$T/jit"; export KILN_WEIGHTS_CACHE
"$KILN" run "$T/hf" generate --tokens 5,6,7 -n 12 --temperature 0 >"$T/j1" 2>"$T/err" &&
    [ "$(images)" = 1 ] && before=$(stamp) && "$KILN" run "$T/hf" generate --tokens 5,6,7 -n 12 --temperature 0 >"$T/j2" 2>"$T/err" &&
    ! grep -q "note:" "$T/err" && ! prepared && cmp -s "$T/j1" "$T/j2" && cmp -s "$T/first" "$T/j1" &&
    ok "kiln run: prepared once, then mapped, the cc build's tokens" ||
    { bad "kiln run: prepared once, then mapped, the cc build's tokens"; cat "$T/err"; }

# kiln build of a folder prepares the image ahead: the first run maps it.
KILN_WEIGHTS_CACHE="$T/pre"; export KILN_WEIGHTS_CACHE
run "kiln build of a folder" "$KILN" build "$T/hf" -o "$T/exe2"
[ "$(images)" = 1 ] && gen ahead "$T/exe2" && ! prepared && cmp -s "$T/first" "$T/ahead" &&
    ok "  prepared the weights' image ahead: the first run maps it" ||
    bad "  prepared the weights' image ahead: the first run maps it"
before=$(stamp)
"$KILN" run "$T/hf" generate --tokens 5,6,7 -n 12 --temperature 0 >"$T/j3" 2>"$T/err" &&
    [ "$(images)" = 1 ] && ! prepared && cmp -s "$T/first" "$T/j3" &&
    cmp -s "$T/pre/$(ls "$T/pre")" "$T/jit/$(ls "$T/jit")" &&
    ok "  kiln run maps the image the build prepared, which is the JIT's own byte for byte" ||
    { bad "  kiln run maps the image the build prepared, which is the JIT's own byte for byte"; cat "$T/err"; }
# A graph built with --weights prepares them too, and its program
# remembers them (an absolute path) as its default.
cp "$W" "$T/w.safetensors"
run "import the folder's graph" "$KILN" import hf "$T/hf" -o "$T/hf.json"
run "kiln build MODEL.json --weights FILE" "$KILN" build "$T/hf.json" --weights "$T/w.safetensors" \
    -o "$T/exe3"
before=$(stamp)
"$T/exe3" generate --tokens 5,6,7 -n 12 --temperature 0 >"$T/remembered" 2>"$T/err" &&
    [ "$(images)" = 2 ] && ! prepared && cmp -s "$T/first" "$T/remembered" &&
    ok "  its program runs on those weights without --weights, mapped" ||
    { bad "  its program runs on those weights without --weights, mapped"; cat "$T/err"; }
run "  --version" "$T/exe3" --version
grep -qx "weights: $(cd "$T" && pwd -P)/w.safetensors" "$T/out" &&
    ok "  --version names them" || { bad "  --version names them"; cat "$T/out"; }
mv "$T/w.safetensors" "$T/w2.safetensors"
refuse 3 "  moved: one line naming them" \
    "w.safetensors: cannot read the weights this program was built with (No such file or directory): was it moved or deleted? pass --weights FILE or DIR" \
    "$T/exe3" generate --tokens 5,6,7 -n 12
refuse 1 "kiln build --weights of a file that does not fit the model" "'lm_head.weight': not a weight" \
    "$KILN" build examples/mlp.json --weights "$W" -o "$T/mlpw"

# gemma2's open program adds 1 to each norm's weights: one operation an
# element, the same bytes from either compiler, one image. exp of a
# weight is libm's (or rt_vec's in the JIT): an image each.
KILN_WEIGHTS_CACHE="$T/gemma"; export KILN_WEIGHTS_CACHE
mkdir "$T/gemma2"
run "mkckpt hf gemma2" "$MKCKPT" hf gemma2 "$T/gemma2"
run "  kiln build --weight-dtype q4_k" "$KILN" build "$T/gemma2" --weight-dtype q4_k -o "$T/g2"
before=$(stamp)
"$KILN" run "$T/gemma2" --weight-dtype q4_k generate --tokens 5,6,7 -n 4 >"$T/out" 2>"$T/err" &&
    [ "$(images)" = 1 ] && ! prepared && ok "  kiln run maps the build's image" ||
    { bad "  kiln run maps the build's image"; cat "$T/err"; }
KILN_WEIGHTS_CACHE="$T/exp"; export KILN_WEIGHTS_CACHE
cat >"$T/exp.json" <<'EOF'
{"format": "kiln/1", "name": "expw",
 "inputs": [{"name": "x", "shape": [2, 4], "dtype": "f32"}],
 "weights": [{"name": "a", "shape": [4, 4]}],
 "nodes": [{"name": "e", "op": "exp", "inputs": ["a"]},
           {"name": "y", "op": "linear", "inputs": ["x", "e"]}],
 "outputs": ["y"]}
EOF
safetensors "$T/a.st" '{"a":{"dtype":"F32","shape":[4,4],"data_offsets":[0,64]}}' \
    $(i=0; while [ $i -lt 16 ]; do echo $((1065353216 + i * 99991)); i=$((i + 1)); done)
run "exp of a weight, at open: kiln build" "$KILN" build "$T/exp.json" --weights "$T/a.st" -o "$T/expw"
"$KILN" run "$T/exp.json" --weights "$T/a.st" >"$T/out" 2>"$T/err" && [ "$(images)" = 2 ] &&
    ok "  kiln run keeps an image of its own" || { bad "  kiln run keeps an image of its own"; cat "$T/err"; }

# Weights from inits: no file, no image.
KILN_WEIGHTS_CACHE="$T/init"; export KILN_WEIGHTS_CACHE
"$KILN" build examples/mlp.json -o "$T/mlp" 2>/dev/null && "$T/mlp" >/dev/null 2>"$T/err" &&
    [ ! -e "$T/init" ] && ok "weights from their inits: no image" || bad "weights from their inits: no image"

[ "$fails" = 0 ] && echo "image: ok" || echo "image: $fails failed"
[ "$fails" = 0 ]
