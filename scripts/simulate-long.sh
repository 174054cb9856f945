#!/usr/bin/env bash
# The long simulation: SEEDS seeds × STEPS steps (default 10,000 × 200) split over PROCESSES release
# processes (default 8), which overlap one another's waits (thread hand-offs, fsync); 2, 4 and 8 processes gave
# the same throughput on this 2-core machine (400 seeds: 16 s each).
# Runs under eatmydata when it is installed: fsync becomes a no-op. The simulator's `app crash` abandons a
# process, whose writes the page cache keeps; no step models a power loss, so fsync changes no outcome, only
# the time. (The SIGKILL tests in `make test` keep real fsync.) Exits 1 if any process found a violation.
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=${SEEDS:-10000} steps=${STEPS:-200} processes=${PROCESSES:-8}
swift build -c release --product protected-store
wrapper=()
command -v eatmydata >/dev/null && wrapper=(eatmydata)
start=$(date +%s)
pids=()
for ((index = 0; index < processes; index++)); do
    first=$((1 + index * seeds / processes))
    count=$(((index + 1) * seeds / processes - index * seeds / processes))
    "${wrapper[@]}" .build/release/protected-store simulate --seeds "$count" --start "$first" --steps "$steps" &
    pids+=($!)
done
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
echo "simulate-long: $seeds seeds × $steps steps in $processes processes${wrapper:+ under eatmydata}: $(( $(date +%s) - start )) s"
exit $failed
