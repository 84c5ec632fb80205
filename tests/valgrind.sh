#!/bin/sh
# tests/valgrind.sh: kiln under valgrind's memcheck. It checks the binary
# users run (an ordinary build: valgrind cannot run an ASan one) and sees
# what ASan does not, reads of uninitialised memory. `kiln emit-c` on
# every example, `kiln build` (and --lib; each again from the cache),
# profile, dump, opt, print, a JIT run on two threads (and one with
# --profile), check, and the paths of a bad model, a usage error and a
# missing file: each must end with its usual status and no memcheck
# error or leak (--error-exitcode=99 keeps the two apart).
# tests/valgrind.supp lets libgomp's parked worker threads pass. KILN
# names the binary (default ./kiln). `make test-asan` runs this.
set -u
cd "$(dirname "$0")/.." || exit 2
KILN=${KILN:-./kiln}
T=$(mktemp -d "${TMPDIR:-/tmp}/kiln-valgrind-XXXXXX") || exit 3
trap 'rm -rf "$T"' EXIT
export XDG_CACHE_HOME="$T/cache"    # never the user's build cache
fails=0

# vg STATUS WHAT ARG...: `kiln ARG...` under memcheck exits STATUS.
vg() {
    want=$1 what=$2
    shift 2
    valgrind -q --error-exitcode=99 --leak-check=full --suppressions=tests/valgrind.supp \
        "$KILN" "$@" >"$T/out" 2>"$T/err"
    got=$?
    if [ "$got" = "$want" ]; then
        echo "ok    valgrind kiln $what"
    else
        echo "FAIL  valgrind kiln $what: exit $got, expected $want"
        sed 's/^/      /' "$T/err"
        fails=$((fails + 1))
    fi
}

for m in examples/*.json; do
    vg 0 "emit-c $m" emit-c "$m" -o "$T/model.c"
done
vg 0 "build examples/mlp.json" build examples/mlp.json -o "$T/mlp"
vg 0 "build examples/mlp.json again (from the cache)" build examples/mlp.json -o "$T/mlp"
vg 0 "build --lib tests/models/init-data.json" build tests/models/init-data.json --lib -o "$T/lib"
vg 0 "build --lib again (from the cache)" build tests/models/init-data.json --lib -o "$T/lib"
vg 0 "profile tests/models/linear.json" profile tests/models/linear.json --repeat 2
vg 0 "dump examples/llama2-step.json" dump examples/llama2-step.json --dump-dir "$T/dump"
vg 0 "opt 06-fuse.kir" opt "$T/dump/06-fuse.kir" --passes tile,parallelize,plan-memory
vg 0 "print examples/gpt2-block.json" print examples/gpt2-block.json
vg 0 "run examples/layernorm.json --threads 2" run examples/layernorm.json --threads 2
vg 0 "run --profile" run examples/layernorm.json --repeat 2 --profile "$T/profile.jsonl"
vg 0 "check examples/layernorm.json" check examples/layernorm.json
cat >"$T/bad.json" <<'EOF'
{"format": "kiln/1", "name": "m",
 "nodes": [{"name": "y", "op": "relu", "inputs": ["x"]}], "outputs": ["y"]}
EOF
vg 1 "emit-c of a bad model" emit-c "$T/bad.json"
vg 2 "build with an unknown option" build examples/mlp.json --frob
vg 3 "emit-c of a missing file" emit-c "$T/missing.json"

echo "$fails failed"
[ "$fails" = 0 ]
