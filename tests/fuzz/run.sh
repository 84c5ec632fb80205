#!/bin/sh
# tests/fuzz/run.sh SECONDS DIR NAME...: runs each libFuzzer harness
# DIR/fuzz_NAME for SECONDS, one after the other, and prints a line each:
# executions, and whether it crashed. Seeds come from tests/fuzz/corpus/NAME
# (and tests/bad/model for the model harness), read only; what the fuzzer
# finds new goes to DIR/corpus/NAME, crashing inputs to DIR/crashes/, the
# whole log to DIR/NAME.log. A harness with a dictionary tests/fuzz/NAME.dict
# uses it. Exit 1 when any harness crashed.
set -u
secs=$1 dir=$2
shift 2
cd "$(dirname "$0")/../.." || exit 2
crashed=0
for name; do
    bin=$dir/fuzz_$name log=$dir/$name.log
    mkdir -p "$dir/corpus/$name" "$dir/crashes"
    dict= more=
    [ -f "tests/fuzz/$name.dict" ] && dict=-dict=tests/fuzz/$name.dict
    # the bad-input corpus's models are seeds too (their .expect files
    # are refused at once)
    [ "$name" = model ] && [ -d tests/bad/model ] && more=tests/bad/model
    # -timeout: an input that runs 25 s is a hang; -rss_limit_mb bounds
    # memory (a malloc above it is reported too).
    "$bin" -max_total_time="$secs" -timeout=25 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$dir/crashes/$name-" $dict \
        "$dir/corpus/$name" "tests/fuzz/corpus/$name" $more >"$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    if [ "$rc" = 0 ]; then
        printf 'fuzz_%-12s %5s s %10s execs  ok\n' "$name" "$secs" "${execs:-?}"
    else
        crashed=1
        printf 'fuzz_%-12s %5s s %10s execs  CRASH (exit %s)\n' "$name" "$secs" \
            "${execs:-?}" "$rc"
        grep -E '^(==[0-9]+==ERROR|SUMMARY|fuzz:|kiln:|.*runtime error)' "$log" |
            head -n 5 | sed 's/^/    /'
        sed -n 's/^.*Test unit written to /    input: /p' "$log"
    fi
done
exit $crashed
