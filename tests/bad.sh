#!/bin/sh
# tests/bad.sh: the bad-input corpus under tests/bad/ (its README.md says
# how a case is laid out). Every case must get the contract of the README's
# "Exit status": the recorded exit status, exactly the recorded number of
# lines on stderr, the recorded first line, no crash (nor sanitizer
# report: the victim executable also runs as an ASan + UBSan build), and
# nothing written: the case's scratch directory, where an older output
# waits, is unchanged afterwards.
#   sh tests/bad.sh                 every case
#   sh tests/bad.sh CASE...         some cases (CASE: model/dup-name)
#   sh tests/bad.sh -u CASE...      rewrite their .expect files from what
#                                   kiln does now, for review in the diff
# KILN=build-x/kiln picks the kiln binary (default ./kiln).
set -u
cd "$(dirname "$0")/.." || exit 2
ROOT=$PWD
KILN=${KILN:-./kiln}
case $KILN in /*) ;; *) KILN=$ROOT/$KILN ;; esac
VICTIM=$ROOT/tests/bad/victim.json
T=$(mktemp -d "${TMPDIR:-/tmp}/kiln-bad-XXXXXX") || exit 3
trap 'rm -rf "$T"' EXIT
update=0
[ "${1:-}" = -u ] && { update=1; shift; }

# ---- helpers the case scripts use (tests/bad/README.md) ---------------------

# byte, le16, le32, le64 and safetensors: tests/lib.sh's
. tests/lib.sh
F1=1065353216                   # the bits of 1.0f

# words N [WORD]: N times WORD (default F1), one per line
words() { i=0; while [ "$i" -lt "$1" ]; do echo "${2:-$F1}"; i=$((i + 1)); done; }

# npy_raw FILE HEADER WORD...: a version 1.0 .npy file with this header
# text (padded as numpy pads it) and 32-bit little-endian words of data.
npy_raw() {
    f=$1 h=$2
    shift 2
    pad=$(((64 - (10 + ${#h} + 1) % 64) % 64))
    n=$((${#h} + pad + 1))
    { printf '\223NUMPY\001\000'; le16 "$n"; printf '%s' "$h"; printf "%${pad}s\n" ''
      for w; do le32 "$w"; done; } >"$f"
}

# npy FILE DESCR SHAPE WORD...: the header numpy writes for DESCR and SHAPE.
npy() {
    f=$1 d=$2 s=$3
    shift 3
    npy_raw "$f" "{'descr': '$d', 'fortran_order': False, 'shape': $s, }" "$@"
}

# gguf FILE KV...: a GGUF file (version 3) without tensors, with these KVs:
# KEY=s:TEXT a string, KEY=u:N a u32, KEY=f:BITS an f32 of these bits.
gguf() {
    f=$1
    shift
    { printf 'GGUF'; le32 3; le64 0; le64 $#
      for kv; do
          k=${kv%%=*} v=${kv#*=}
          le64 ${#k}; printf '%s' "$k"
          case $v in
          s:*) le32 8; le64 $((${#v} - 2)); printf '%s' "${v#s:}" ;;
          u:*) le32 4; le32 "${v#u:}" ;;
          f:*) le32 6; le32 "${v#f:}" ;;
          esac
      done; } >"$f"
}

# unwritable DIR: a directory where no file can be created, even by root
# (then a link to /sys); the case is skipped where neither works.
unwritable() {
    if [ "$(id -u)" != 0 ]; then
        mkdir "$1" && chmod 555 "$1"
    elif ! (: >/sys/kiln-probe) 2>&1 | grep -q 'Permission denied'; then
        echo "no unwritable directory for root here" >"$T/skip"
    else
        ln -s /sys "$1"
    fi
}

# What a case declares, recorded for the harness: `model TEXT` is the
# model file's text, `run ARG...` the victim executable's options, `kiln
# ARG...` a kiln command line (one argument per line: none holds a newline).
model() { printf '%s\n' "$1" >"$name.json"; }
run() { : >"$T/args"; [ $# = 0 ] || printf '%s\n' "$@" >"$T/args"; }
kiln() { run "$@"; }

# ---- checking one command against the case's .expect -------------------------

fails=0 checked=0
fail() { echo "FAIL  $case: $*"; fails=$((fails + 1)); }

# Every path under the scratch directory, and for all but directories
# (where a temporary may come and go) size and time of last change: any
# write shows (a checksum would cost seconds on the 256 MiB case).
snapshot() { (cd "$D" && find . -type d -printf 'd %p\n' -o -printf '%y %p %s %C@\n' | sort); }

# The .expect file: "exit S, N line(s)", the first line of stderr, and,
# when kiln check words it otherwise, "check: LINE".
read_expect() {
    exp=$ROOT/tests/bad/$case.expect
    want_status= want_lines= want_line= want_check=
    [ -f "$exp" ] || return 1
    want_status=$(sed -n '1s/^exit \([0-9]*\), .*/\1/p' "$exp")
    want_lines=$(sed -n '1s/^exit [0-9]*, \([0-9]*\) lines*$/\1/p' "$exp")
    want_line=$(sed -n 2p "$exp")
    want_check=$(sed -n '3s/^check: //p' "$exp")
    [ -n "$want_status" ] && [ -n "$want_lines" ]
}

# execute COMMAND...: runs it in the scratch directory; sets st, lines
# (of stderr) and first (its first line). Few processes: this runs a
# thousand times.
execute() {
    cd "$D" || exit 3
    "$@" >"$T/out" 2>"$T/err"
    st=$?
    cd "$ROOT" || exit 3
    lines=0 first=
    while IFS= read -r l; do
        [ "$lines" = 0 ] && first=$l
        lines=$((lines + 1))
    done <"$T/err"
}

# attempt WHAT PROG WANT COMMAND...: runs COMMAND in the scratch directory
# and checks it; a leading "PROG: " of stderr reads as "victim: ".
attempt() {
    what=$1 prog=$2 want=$3
    shift 3
    execute "$@"
    checked=$((checked + 1))
    case $first in "$prog: "*) first="victim: ${first#"$prog: "}" ;; esac
    problem=
    if [ "$st" -ge 128 ]; then
        problem="crashed (status $st)"
    elif [ "$st" != "$want_status" ]; then
        problem="exit $st, expected $want_status"
    elif [ "$lines" != "$want_lines" ]; then
        problem="$lines lines on stderr, expected $want_lines"
    elif [ "$first" != "$want" ]; then
        problem="said: $first
      expected: $want"
    elif ! snapshot | cmp -s - "$T/base"; then
        problem="wrote into its directory:
$(snapshot | diff "$T/base" - | sed 's/^/      /')"
    fi
    if [ -n "$problem" ]; then
        fail "$what: $problem"
        sed -n '1,5s/^/      | /p' "$T/err"
    fi
}

# record COMMAND...: runs COMMAND and writes the case's .expect from it.
record() {
    execute "$@"
    case $first in "$VICTIM_EXE: "*) first="victim: ${first#"$VICTIM_EXE: "}" ;; esac
    { echo "exit $st, $lines line$([ "$lines" = 1 ] || echo s)"; printf '%s\n' "$first"; } >"$exp"
    echo "wrote $exp"
}

# ---- the three kinds of case ----------------------------------------------------

# setup KIND: a fresh scratch directory $D holding what KIND's cases find
# there; then the case's script, if any, runs in it in a subshell (so it
# cannot touch this script's variables), and $T/args holds what it
# declared. 1 when the case is skipped or broken.
setup() {
    D=$T/case
    rm -rf "$D" "$T/args" "$T/skip"
    mkdir "$D" || exit 3
    exp=$ROOT/tests/bad/$case.expect
    src=$ROOT/tests/bad/$case
    case $1 in
    model) [ -f "$src.json" ] && cp "$src.json" "$D/$name.json"
           echo old >"$D/out.c"; echo old >"$D/out" ;;
    cli) cp "$VICTIM" "$D/m.json" ;;
    exe) cp "$T/w.st" "$D/w.st"; echo old >"$D/out.npy" ;;
    esac
    if [ -f "$src.sh" ]; then
        (cd "$D" && . "$src.sh") || { fail "its script failed"; return 1; }
    fi
    if [ -f "$T/skip" ]; then
        echo "skip  $case: $(cat "$T/skip")"
        return 1
    fi
    snapshot >"$T/base"
    [ "$update" = 1 ] && return 0
    read_expect || { fail "no valid $case.expect (sh tests/bad.sh -u $case)"; return 1; }
}

# 0 when the options are --weights FILE and --input NAME=FILE only, which
# kiln check takes as well.
check_takes() {
    while [ $# -gt 0 ]; do
        case $1 in
        --weights | --input) [ $# -ge 2 ] || return 1; shift 2 ;;
        *) return 1 ;;
        esac
    done
}

# model/NAME.json or model/NAME.sh (which writes NAME.json): a model that
# breaks docs/model-format.md, through emit-c, build, run and check alike.
model_case() {
    name=${case#model/}
    setup model || return
    if [ "$update" = 1 ]; then
        record "$KILN" emit-c "$name.json" -o out.c
        return
    fi
    attempt emit-c "" "$want_line" "$KILN" emit-c "$name.json" -o out.c
    attempt build "" "$want_line" "$KILN" build "$name.json" -o out
    attempt run "" "$want_line" "$KILN" run "$name.json"
    attempt check "" "$want_line" "$KILN" check "$name.json"
}

# cli/NAME.sh: a kiln command line (`kiln ...`) in a directory holding the
# victim model as m.json.
cli_case() {
    setup cli || return
    set --
    while IFS= read -r a; do set -- "$@" "$a"; done <"$T/args"
    if [ "$update" = 1 ]; then
        record "$KILN" "$@"
        return
    fi
    attempt kiln "" "$want_line" "$KILN" "$@"
}

# weights/, npy/, exe/NAME.sh: files for the victim executable and its
# options (`run ...`), in a directory holding good weights as w.st and an
# older output as out.npy, which the executable is asked to overwrite
# (unless the case says where outputs go); through the built executable,
# its ASan build, kiln run, and kiln check when it takes the options.
exe_case() {
    setup exe || return
    set --
    while IFS= read -r a; do set -- "$@" "$a"; done <"$T/args"
    out="--output y=out.npy"
    case " $* " in *" --output"*) out= ;; esac
    if [ "$update" = 1 ]; then
        record "$VICTIM_EXE" $out "$@"
        if check_takes "$@"; then
            (cd "$D" && "$KILN" check "$VICTIM" --no-cc "$@") 2>"$T/cerr" >/dev/null
            cline=$(head -n 1 "$T/cerr")
            [ "$cline" = "kiln: ${first#victim: }" ] || printf 'check: %s\n' "$cline" >>"$exp"
        fi
        return
    fi
    attempt exe "$VICTIM_EXE" "$want_line" "$VICTIM_EXE" $out "$@"
    attempt asan "$ASAN_EXE" "$want_line" "$ASAN_EXE" $out "$@"
    attempt "kiln run" kiln "$want_line" "$KILN" run "$VICTIM" $out "$@"
    if check_takes "$@"; then
        want=${want_check:-"kiln: ${want_line#victim: }"}
        attempt "kiln check" "" "$want" "$KILN" check "$VICTIM" --no-cc "$@"
    fi
}

# ---- the victim: one small model, built once -----------------------------------

B=$T/bin
mkdir -p "$B/asan"
VICTIM_EXE=$B/victim ASAN_EXE=$B/asan/victim
if ! "$KILN" build "$VICTIM" -o "$VICTIM_EXE" 2>"$T/err"; then
    echo "FAIL  cannot build tests/bad/victim.json"; cat "$T/err"; exit 1
fi
if ! { "$KILN" emit-c "$VICTIM" -o "$B/victim.c" &&
       ${CC:-cc} -std=c11 -g -O1 -fopenmp -fsanitize=address,undefined -fno-sanitize-recover=all \
           -fno-omit-frame-pointer -o "$ASAN_EXE" "$B/victim.c" -lm; } 2>"$T/err"; then
    echo "FAIL  cannot build tests/bad/victim.json with -fsanitize=address,undefined"
    cat "$T/err"; exit 1
fi
# a sanitizer's report must not pass for an expected exit status of 1
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1:exitcode=99"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}print_stacktrace=1:exitcode=99"
# good weights: w is [8, 8] and has no init
(cd "$T" && safetensors w.st '{"w":{"dtype":"F32","shape":[8,8],"data_offsets":[0,256]}}' \
    $(words 64))

if [ $# = 0 ]; then
    set -- $(cd tests/bad && ls */*.json */*.sh | sed 's/\.[a-z]*$//' | sort -u)
fi
for case; do
    case=${case%.expect}
    case=${case%.json}
    case=${case%.sh}
    case=${case#tests/bad/}
    before=$fails
    case $case in
    model/*) model_case ;;
    cli/*) cli_case ;;
    weights/* | npy/* | exe/*) exe_case ;;
    *) fail "not a case (model/, cli/, weights/, npy/ or exe/)" ;;
    esac
    [ "$update" = 0 ] && [ "$fails" = "$before" ] && [ ! -f "$T/skip" ] && echo "ok    $case"
done
[ "$update" = 1 ] && exit 0
echo "$# cases, $checked commands, $fails failed"
[ "$fails" = 0 ]
