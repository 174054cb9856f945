#!/usr/bin/env bash
# Section 8: the example app's simulation, `notes simulate`, in a debug build (as an app's tests run it), timed.
# It runs the app as it ships over every seed, then finds and shrinks each planted bug, as `make example` does.
#
#   Benchmarks/scripts/app-simulation.sh [--seeds N] [--steps N] [--concurrent-seeds N] [--no-build]
#       (from the repository's root; 200 seeds of 200 steps, one seed per processor at once, by default)
# Prints a Markdown row: seeds | steps | seeds at once | the passing seeds' seconds | total seconds | load average.
set -euo pipefail
cd "$(dirname "$0")/../.."
seeds=200
steps=200
concurrent=$(nproc)
build=yes
while [ $# -gt 0 ]; do
    case "$1" in
        --seeds) seeds=$2; shift 2 ;;
        --steps) steps=$2; shift 2 ;;
        --concurrent-seeds) concurrent=$2; shift 2 ;;
        --no-build) build=no; shift ;;
        *) echo "app-simulation: unknown option $1" >&2; exit 2 ;;
    esac
done
scratch="$PWD/.build-examples"
if [ "$build" = yes ]; then
    swift build --package-path Examples/Notes --scratch-path "$scratch" >&2
fi
load=$(cut -d' ' -f1-3 /proc/loadavg)
output=$(mktemp)
trap 'rm -f "$output"' EXIT
started=$(date +%s.%N)
# The library logs each I/O error the simulation plants (on standard error): kept out of the table, shown on failure.
if ! "$scratch/debug/notes" simulate --seeds "$seeds" --steps "$steps" --concurrent-seeds "$concurrent" > "$output" 2>&1; then
    tail -20 "$output" >&2
    exit 1
fi
ended=$(date +%s.%N)
# "every seed passed (12345.6 ms)": the app as it ships, over every seed.
passed=$(sed -n 's/.*every seed passed (\([0-9.]*\) ms).*/\1/p' "$output")
total=$(awk -v a="$started" -v b="$ended" 'BEGIN { printf "%.1f", b - a }')
echo "| seeds | steps | seeds at once | every seed passed | total (with the planted bugs) | load average before |"
echo "|---:|---:|---:|---:|---:|---|"
echo "| $seeds | $steps | $concurrent | $(awk -v ms="$passed" 'BEGIN { printf "%.1f s", ms / 1000 }') | $total s | $load |"
