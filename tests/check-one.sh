#!/bin/sh
# tests/check-one.sh MODEL LOGDIR: `kiln check MODEL`, one line of result;
# the whole output when it fails. KILN names the binary (default ./kiln).
KILN=${KILN:-./kiln}
out="$2/$(echo "$1" | tr '/' '_').out"
start=$(date +%s%N)
if "$KILN" check "$1" >"$out" 2>&1; then
    echo "ok    check $1 ($(( ($(date +%s%N) - start) / 1000000 )) ms)"
else
    echo "FAIL  check $1"; sed 's/^/      /' "$out"; exit 1
fi
