#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 60) on its corpus under Fuzz/Corpus/, prints each one's
# executions, and fails on the first crash, leak, timeout or sanitizer report (libFuzzer writes the input
# that caused it as Fuzz/crash-… and prints how to replay it).
#   Fuzz/run-all.sh [SECONDS]      from the top level; `make fuzz` / `make fuzz-smoke` call it.
set -euo pipefail
cd "$(dirname "$0")"
seconds=${1:-60}
targets=(FuzzKeybag FuzzStoreKeyFile FuzzInboxRecords FuzzScenarioLanguage FuzzAgentWire)
# FUZZ_OPTIMIZATION=-Onone (make fuzz-smoke) builds in 100 s where -O takes 400 s or more on two cores: a short run
# checks that every target builds and runs its corpus cleanly, at a fifth of -O's executions a second.
swift build -c release -Xswiftc "${FUZZ_OPTIMIZATION:--O}" -Xswiftc -sanitize=fuzzer,address -Xswiftc -use-ld=lld
for target in "${targets[@]}"; do
    mkdir -p "Corpus/$target"
    log=$(mktemp)
    if ! SWIFT_BACKTRACE=enable=no ".build/release/$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=1024 \
        -print_final_stats=1 "Corpus/$target" >"$log" 2>&1; then
        grep -a -E "ERROR|Fatal error|SUMMARY|Test unit written" "$log" >&2 || tail -20 "$log" >&2
        echo "fuzz: $target FAILED" >&2
        rm -f "$log"
        exit 1
    fi
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    corpus=$(find "Corpus/$target" -type f | wc -l)
    echo "fuzz: $target: $runs executions in ${seconds}s, 0 crashes (corpus: $corpus inputs)"
    rm -f "$log"
done
