# tests/lib.sh: what the shell tests share, sourced after they cd to the
# repository: a scratch directory, and one line per check.
#   scratch NAME        $T, a fresh directory removed on exit
#   ok WHAT, bad WHAT   "ok    WHAT" / "FAIL  WHAT" (bad counts $fails)
#   run WHAT CMD...     CMD succeeds (its stderr shown when not)
#   refuse STATUS WHAT TEXT CMD...
#                       CMD exits STATUS with one line on stderr holding
#                       TEXT, and leaves no $T/never* file
#   byte N, le16 N, le32 N, le64 N
#                       N as 1, 2, 4, 8 little-endian bytes
#   safetensors FILE HEADER-JSON WORD...
#                       a safetensors file, its data 32-bit words
fails=0

scratch() {
    T=$(mktemp -d "${TMPDIR:-/tmp}/kiln-$1-XXXXXX") || exit 3
    trap 'rm -rf "$T"' EXIT
}

ok() { echo "ok    $1"; }
bad() { echo "FAIL  $1"; fails=$((fails + 1)); }

run() {
    what=$1
    shift
    if "$@" >"$T/out" 2>"$T/err"; then ok "$what"; else bad "$what"; tail -n 20 "$T/err" | sed 's/^/      /'; fi
}

# same DESCRIPTION WANT-FILE COMMAND...: it succeeds and prints WANT-FILE
# (gguf.sh and mpi.sh define their own: two files alike).
same() {
    what=$1 want=$2
    shift 2
    if "$@" >"$T/got" 2>"$T/err" && cmp -s "$want" "$T/got"; then
        ok "$what"
    else
        bad "$what"; echo "      want: $(cat "$want")"; echo "      got:  $(cat "$T/got")"
        tail -n 5 "$T/err" | sed 's/^/      /'
    fi
}

refuse() {
    want=$1 what=$2 text=$3
    shift 3
    "$@" >"$T/out" 2>"$T/err"
    got=$?
    if [ "$got" != "$want" ] || [ "$(wc -l <"$T/err")" != 1 ] || ! grep -qF -- "$text" "$T/err" ||
        ls "$T"/never* >/dev/null 2>&1; then
        bad "$what: exit $got (want $want), wanted one line with: $text"; sed 's/^/      /' "$T/err"
    else
        ok "$what"
    fi
}

byte() { printf "\\$(printf %03o "$1")"; }
le16() { byte $(($1 & 255)); byte $((($1 >> 8) & 255)); }
le32() { le16 $(($1 & 65535)); le16 $((($1 >> 16) & 65535)); }
le64() { le32 $(($1 & 4294967295)); le32 $((($1 >> 32) & 4294967295)); }

safetensors() {
    f=$1 j=$2
    shift 2
    { le64 ${#j}; printf '%s' "$j"; for w; do le32 "$w"; done; } >"$f"
}
