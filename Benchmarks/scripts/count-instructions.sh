#!/usr/bin/env bash
# Row 2 in instructions: each workload once under `valgrind --tool=callgrind`, encrypted (raw key) and
# unencrypted, counting only the measured function (set-up excluded). Instruction counts repeat exactly
# from run to run, so they settle ratios that the shared machine's wall clock leaves ±20 % apart.
#
#   scripts/count-instructions.sh [--page-size N] [--cache-kib N]     (from Benchmarks/)
# Prints a Markdown table: workload | encrypted | unencrypted | ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "count-instructions: valgrind is not installed (apt-get install valgrind)" >&2; exit 2; }
swift build -c release --product store-workload >&2
binary=.build/release/store-workload
output=$(mktemp -d)
trap 'rm -rf "$output"' EXIT

count() {
    valgrind --tool=callgrind --toggle-collect='*measure*' --callgrind-out-file="$output/out" "$binary" "$@" 2>&1 \
        | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}

echo "| workload (${*:-store defaults}) | encrypted (Ir) | unencrypted (Ir) | ratio |"
echo "|---|---:|---:|---:|"
for workload in insert scan-cold scan-warm point-reads; do
    encrypted=$(count "$workload" raw-key "$@")
    plain=$(count "$workload" unencrypted "$@")
    ratio=$(awk -v e="$encrypted" -v p="$plain" 'BEGIN { printf "%.3f", e / p }')
    echo "| $workload | $encrypted | $plain | $ratio× |"
done
