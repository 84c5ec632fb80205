#!/bin/sh
# tests/names.sh: names are data, never code. A model whose inputs,
# weights, state, nodes and outputs carry hostile but valid names (comment
# ends, quotes, backslashes, trigraphs, #include, format directives, C
# keywords, main, '=', UTF-8, a call to system()) must
#   1. build with cc (-std=c11 -Wall -Wextra -Werror: trigraphs on) and run,
#      inputs and outputs named on the command line as NAME=FILE;
#   2. run under kiln run with the same results, and pass kiln check;
#   3. give C whose text outside string literals is exactly the text of the
#      same model with plain names n0, n1, ...: names live only inside
#      (escaped) string literals, never in code or comments;
# and a model name, which is a C identifier prefixing the C symbols, must
#   4. work when it is a C keyword or main, and be refused when its symbols
#      would clash with kiln's or the C library's: for every identifier
#      P_open, P_model, ... that the generated C declares or libc, libm and
#      libgomp export, kiln refuses P, or P is only declared and the C kiln
#      writes for model P compiles.
# KILN names the binary (default ./kiln).
set -u
cd "$(dirname "$0")/.." || exit 2
KILN=${KILN:-./kiln}
CC=${CC:-cc}
. tests/lib.sh
scratch names
# The model, with @N@ standing for name N of the list below (JSON-escaped,
# one per line): inputs 0-4, weights 5-7, state 8, nodes 9-17 and 20, topk
# outputs 18 and 19.
cat >"$T/model.tmpl" <<'EOF'
{"format": "kiln/1", "name": "@model@",
 "inputs": [{"name": "@0@", "shape": [2, 3]},
            {"name": "@1@", "shape": [3]},
            {"name": "@2@", "shape": [2], "dtype": "i32"},
            {"name": "@3@", "shape": [2], "dtype": "i32"},
            {"name": "@4@", "shape": [], "dtype": "i32"}],
 "weights": [{"name": "@5@", "shape": [3], "init": {"fill": 0.5}},
             {"name": "@6@", "shape": [2, 3], "init": {"random": {"seed": 3, "scale": 1}}},
             {"name": "@7@", "shape": [10, 3], "init": {"random": {"seed": 4, "scale": 1}}}],
 "state": [{"name": "@8@", "shape": [4, 1, 3]}],
 "nodes": [
  {"name": "@9@", "op": "add", "inputs": ["@0@", "@1@"]},
  {"name": "@10@", "op": "mul", "inputs": ["@9@", "@5@"]},
  {"name": "@11@", "op": "sub", "inputs": ["@10@", "@6@"]},
  {"name": "@12@", "op": "embedding", "inputs": ["@7@", "@2@"]},
  {"name": "@13@", "op": "embedding", "inputs": ["@7@", "@3@"]},
  {"name": "@14@", "op": "add", "inputs": ["@11@", "@12@"]},
  {"name": "@15@", "op": "reshape", "inputs": ["@14@"], "attrs": {"shape": [2, 1, 3]}},
  {"name": "@16@", "op": "cache_write", "inputs": ["@8@", "@15@", "@4@"]},
  {"name": "@17@", "op": "reduce_sum", "inputs": ["@16@"], "attrs": {"axes": [0, 1]}},
  {"op": "topk", "inputs": ["@14@"], "attrs": {"k": 2}, "outputs": ["@18@", "@19@"]},
  {"name": "@20@", "op": "tanh", "inputs": ["@13@"]}
 ],
 "outputs": ["@17@", "@18@", "@19@", "@20@", "@14@"]}
EOF
# Names 2 and 3 are x=1 and x: --input x=1=FILE must bind x=1.
cat >"$T/hostile.txt" <<'EOF'
*/
\"
x=1
x
%s%n
\\
??/
ünïcödé ✓ 中文
#include <stdio.h>
int
return
main
a=b
/* */
'
/*
)}; exit(1); {(
??=define
\\n
%d%p
\"); system(\"rm -rf /\"); (\"
EOF
i=0
while [ "$i" -le 20 ]; do echo "n$i"; i=$((i + 1)); done >"$T/plain.txt"

# fill NAMES MODEL-NAME OUT: the model with those names.
fill() {
    awk -v model="$2" '
        NR == FNR { name[FNR - 1] = $0; next }
        {
            out = ""; line = $0
            while ((i = index(line, "@")) > 0) {
                rest = substr(line, i + 1); j = index(rest, "@"); key = substr(rest, 1, j - 1)
                out = out substr(line, 1, i - 1) (key == "model" ? model : name[key])
                line = substr(rest, j + 1)
            }
            print out line
        }' "$1" "$T/model.tmpl" >"$3"
}

# strip FILE: the C text with every string and character literal emptied
# ("" and ''); comments stay (a quote inside one is no literal).
strip() {
    awk 'BEGIN { RS = "\001" }
    {
        n = length($0); st = 0      # 0 code, 1 "...", 2 '...', 3 /*...*/, 4 //...
        for (i = 1; i <= n; i++) {
            c = substr($0, i, 1)
            if (st == 0) {
                two = substr($0, i, 2)
                if (two == "/*" || two == "//") { st = two == "/*" ? 3 : 4; printf "%s", two; i++; continue }
                if (c == "\"") st = 1
                else if (c == "'\''") st = 2
                printf "%s", c
            } else if (st == 1 || st == 2) {
                if (c == "\\") { i++; continue }
                if (c == (st == 1 ? "\"" : "'\''")) { printf "%s", c; st = 0 }
            } else {
                if (st == 3 && substr($0, i, 2) == "*/") { printf "*/"; i++; st = 0; continue }
                if (st == 4 && c == "\n") st = 0
                printf "%s", c
            }
        }
    }' "$1"
}

# Writes the little-endian i32 words as a .npy of the given shape.
npy_i32() {
    f=$1 s=$2
    shift 2
    h="{'descr': '<i4', 'fortran_order': False, 'shape': $s, }"
    pad=$(((64 - (10 + ${#h} + 1) % 64) % 64))
    n=$((${#h} + pad + 1))
    { printf '\223NUMPY\001\000'; byte $((n & 255)); byte $((n >> 8)); printf '%s' "$h"
      printf "%${pad}s\n" ''; for w; do le32 "$w"; done; } >"$f"
}

# ---- 1. cc, with hostile names -------------------------------------------------
fill "$T/hostile.txt" main "$T/h.json"
fill "$T/plain.txt" main "$T/p.json"
npy_i32 "$T/ids.npy" '(2,)' 9 0
npy_i32 "$T/pos.npy" '()' 2
# run_with TAG COMMAND...: COMMAND with inputs and outputs named on the
# command line (outputs to TAG-*.npy).
run_with() {
    tag=$1
    shift
    "$@" --input "x=1=$T/ids.npy" --input "%s%n=$T/pos.npy" \
        --output "??=define=$T/$tag-sum.npy" --output "\\n=$T/$tag-values.npy" \
        --output "%d%p=$T/$tag-indices.npy" \
        --output "\"); system(\"rm -rf /\"); (\"=$T/$tag-tanh.npy" --output "'=$T/$tag-add.npy"
}

if "$KILN" emit-c "$T/h.json" -o "$T/h.c" 2>"$T/err" &&
    $CC -std=c11 -Wall -Wextra -Werror -fopenmp -O1 -o "$T/h" "$T/h.c" -lm 2>>"$T/err"; then
    ok "hostile names: emit-c, and cc -std=c11 -Wall -Wextra -Werror"
else
    bad "hostile names: emit-c, and cc -std=c11 -Wall -Wextra -Werror"; head -5 "$T/err"
fi
if run_with cc "$T/h" >"$T/out" 2>"$T/err"; then
    ok "  runs, inputs and outputs named NAME=FILE"
else
    bad "  runs, inputs and outputs named NAME=FILE"; head -5 "$T/err"
fi
ls "$T"/cc-*.npy 2>/dev/null | wc -l | grep -qx 5 && ok "  five outputs written" || bad "  five outputs written"
grep -q "input 'x' not given" "$T/err" && ! grep -q "input 'x=1' not given" "$T/err" &&
    ok "  --input x=1=FILE binds x=1, not x" || bad "  --input x=1=FILE binds x=1, not x"

# ---- 2. kiln run and kiln check -------------------------------------------------
if run_with jit "$KILN" run "$T/h.json" >"$T/out" 2>"$T/err"; then
    ok "kiln run"
else
    bad "kiln run"; head -5 "$T/err"
fi
same=1
for o in sum values indices tanh add; do
    cmp -s "$T/cc-$o.npy" "$T/jit-$o.npy" || same=0
done
[ "$same" = 1 ] && ok "  the same five outputs as the cc build" || bad "  the same five outputs as the cc build"
if "$KILN" check "$T/h.json" --input "x=1=$T/ids.npy" --input "%s%n=$T/pos.npy" >"$T/out" 2>"$T/err"; then
    ok "kiln check"
else
    bad "kiln check"; cat "$T/out"; head -5 "$T/err"
fi

# ---- 3. names only inside string literals ----------------------------------------
"$KILN" emit-c "$T/p.json" -o "$T/p.c"
strip "$T/h.c" >"$T/h.stripped"
strip "$T/p.c" >"$T/p.stripped"
if cmp -s "$T/h.stripped" "$T/p.stripped"; then
    ok "the C outside string literals is the same as with plain names"
else
    bad "the C outside string literals is the same as with plain names"
    diff "$T/p.stripped" "$T/h.stripped" | head -10
fi
grep -c '"' "$T/h.stripped" | grep -qv '^0$' && ok "  (the literals were found and emptied)" ||
    bad "  (the literals were found and emptied)"

# ---- 4. model names -----------------------------------------------------------------
for name in int return static main; do
    fill "$T/plain.txt" "$name" "$T/k.json"
    if "$KILN" emit-c "$T/k.json" -o "$T/k.c" 2>"$T/err" &&
        $CC -std=c11 -Wall -Wextra -Werror -fopenmp -fsyntax-only "$T/k.c" 2>>"$T/err"; then
        ok "model name $name"
    else
        bad "model name $name"; head -3 "$T/err"
    fi
done
suffixes='model|open|status|error|run|reset|close|input_names|output_names'
words() { grep -oE "\\b[A-Za-z_][A-Za-z0-9_]*_($suffixes)\\b" | sed -E "s/_($suffixes)\$//" | sort -u; }
for lib in libc.so.6 libm.so.6 libgomp.so.1; do
    nm -D --defined-only "$($CC -print-file-name=$lib)" 2>/dev/null
done | words >"$T/exported"
$CC -E -fopenmp "$T/p.c" | words | grep -vx main >"$T/declared"
[ -s "$T/exported" ] && ok "the C library's names found ($(wc -l <"$T/exported"))" ||
    bad "the C library's names found (nm -D on libc.so.6)"
for p in $(sort -u "$T/exported" "$T/declared"); do
    fill "$T/plain.txt" "$p" "$T/k.json"
    if "$KILN" emit-c "$T/k.json" -o "$T/k.c" 2>"$T/err"; then
        if grep -qx "$p" "$T/exported"; then
            bad "model name $p is accepted: ${p}_... would replace the C library's"
        elif ! $CC -std=c11 -fopenmp -fsyntax-only "$T/k.c" 2>"$T/err"; then
            bad "model name $p is accepted but its C does not compile"; head -3 "$T/err"
        else
            ok "model name $p compiles"
        fi
    elif grep -q "name \"$p\" is reserved" "$T/err"; then
        ok "model name $p is refused as reserved"
    else
        bad "model name $p: unexpected refusal"; head -3 "$T/err"
    fi
done

echo "$fails failed"
[ "$fails" = 0 ]
