#!/usr/bin/env bash
# The long simulation: SEEDS seeds × STEPS steps (default 10,000 × 200) split over PROCESSES release
# processes (default 8), which overlap one another's waits (thread hand-offs); 2, 4 and 8 processes gave the
# same throughput on this 2-core machine. Power cuts are among the steps, in every mode, and so are passcode
# changes, wipes, quarantined inbox records, values at the inbox's size limit, reads checked against the model
# and another process's appends (the coverage lines, summed).
# No eatmydata: every file of a simulated device is written through the simulated disk, which records an
# fsync instead of making it (a power cut needs the record, not the disk), so fsync costs nothing here and a
# missing fsync is found. Prints each process's summary, then the sums. Exits 1 if any process found a violation.
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=${SEEDS:-10000} steps=${STEPS:-200} processes=${PROCESSES:-8}
swift build -c release --product protected-store
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
start=$(date +%s)
pids=()
for ((index = 0; index < processes; index++)); do
    first=$((1 + index * seeds / processes))
    count=$(((index + 1) * seeds / processes - index * seeds / processes))
    # No COLUMNS: the summary lines stay whole (simulate wraps them to COLUMNS), as the sums below read them.
    env -u COLUMNS .build/release/protected-store simulate --no-progress --seeds "$count" --start "$first" --steps "$steps" \
        --output "$PWD" >"$logs/$index.log" 2>&1 &
    pids+=($!)
done
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
elapsed=$(( $(date +%s) - start ))
cat "$logs"/*.log
# Sum the processes' "N power cuts: …" and "N seeds, M steps" lines, and the coverage lines ("passcodes: …",
# "wipes: …", …), which hold only counts: those are summed number by number, in their words.
cat "$logs"/*.log | awk -v elapsed="$elapsed" -v processes="$processes" '
    /^(passcodes|wipes|quarantine|inbox|values|faults|faulted|damage|damaged): / {
        n = split($0, w, " ")
        for (i = 1; i <= n; i++) if (match(w[i], /[0-9]+/)) total[$1, i] += substr(w[i], RSTART, RLENGTH)
        if (!($1 in line)) { order[++lines] = $1; line[$1] = $0 }
    }
    / power cuts: / { cuts += $1; lostSectors += $5; sectors += $7; lostEntries += $11; entries += $13
                      for (i = 1; i <= NF; i++) { if ($i == "acknowledged") checked += $(i - 1); if ($i == "integrity") checks += $(i - 1) } }
    / seeds, .* steps, / { runSeeds += $1; runSteps += $3 }
    END {
        printf "simulate-long: %d seeds, %d steps in %d processes, %d s (%d steps/s)\n", runSeeds, runSteps, processes, elapsed, runSteps / (elapsed > 0 ? elapsed : 1)
        printf "power cuts: %d; lost %d of %d unsynced sectors and %d of %d unsynced file creations/renames/removals; %d acknowledged values compared and %d integrity checks after them\n", cuts, lostSectors, sectors, lostEntries, entries, checked, checks
        for (k = 1; k <= lines; k++) {
            key = order[k]; n = split(line[key], w, " "); text = ""
            for (i = 1; i <= n; i++) {
                if (match(w[i], /[0-9]+/)) w[i] = substr(w[i], 1, RSTART - 1) total[key, i] substr(w[i], RSTART + RLENGTH)
                text = text (i > 1 ? " " : "") w[i]
            }
            print text
        }
    }'
exit $failed
