#!/usr/bin/env python3
"""The peer benchmark: ProtectedStore against GRDB, the same workloads, side by side (BENCHMARKS.md, section 7).

    scripts/peers.py [--no-build] [--rounds N (20)] [--workloads a,b] [--dir DIR] [--out results/peers.json]

Builds the two release binaries one after the other (2 cores: never two builds at once) — `peer-workloads`
of this package (ProtectedStore over SQLCipher) and `grdb-workloads` of Peers/ (GRDB over the system's
SQLite; a package of its own because both libraries export sqlite3_*) — unless --no-build says they are
built. Checks that both sides' writers run with the same settings (WAL, synchronous FULL, 4 KiB pages, 32 MiB cache),
then runs every workload in rounds, each run a new process, the two sides interleaved and the order flipped
every round (ours, grdb, grdb, ours, ...) so neither always runs first; each pair starts once the shared
machine is quiet (other processes below --quiet-below of the CPUs, waiting at most --quiet-timeout s). Writes the medians as
{"<workload>": {"ours": x, "grdb": y, "unit": "s|ms|MiB", ...}} with the verdict's ratio — the median of the
round-by-round ratios ours ÷ GRDB, each round's two runs made one after the other — its min–max and p25–p75, the
ratio of the medians beside it, the target, whether it is met and every run, and prints a Markdown table.
Only the standard library is used.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCHMARKS = os.path.dirname(HERE)
PEERS = os.path.join(BENCHMARKS, "Peers")
SCRATCH = ".build-peers"
OURS = os.path.join(BENCHMARKS, SCRATCH, "release", "peer-workloads")
GRDB = os.path.join(PEERS, SCRATCH, "release", "grdb-workloads")

# Targets: ratio = ours ÷ grdb, the median of the round-by-round ratios (issue 17's six, issue 27's seven).
# ABSOLUTE_LIMIT: ours' own figure must also stay at or under it.
TARGETS = {
    "insert_100k": 0.85,
    "warm_scan_100k": 0.80,
    "point_read_10k": 1.10,
    "durable_write_1row": 1.30,
    "read_p99_during_write": 1.00,
    "reopen_cold_scan_100k": 1.40,
    "durable_write_database": 1.20,
    "durable_write_coordinator": 1.20,
    "durable_write_coordinator_awaited": None,
    "main_actor_read_10k": 1.20,
    "main_actor_read_10k_awaited": None,
    "open_new_store": 1.50,
    "peak_rss_100k": 1.20,
    "first_read_during_write": None,
    "read_p99_during_two_writes": None,
}
# None: issue 27 sets only an absolute limit for these two; the ratio is shown, not judged.
ABSOLUTE_LIMIT = {"read_p99_during_write": 1.0, "first_read_during_write": 1.0, "read_p99_during_two_writes": 5.0}  # ms
WORKLOADS = list(TARGETS)
SETTINGS = ["journal_mode", "synchronous", "page_size", "cache_size"]


def build():
    for folder, product in [(BENCHMARKS, "peer-workloads"), (PEERS, "grdb-workloads")]:
        print(f"building {product} (release) in {os.path.relpath(folder)}", file=sys.stderr)
        subprocess.run(
            ["swift", "build", "-c", "release", "--product", product, "--scratch-path", SCRATCH],
            cwd=folder, check=True)


def busy_fraction(seconds=0.5):
    """How busy the machine's CPUs were over the next `seconds` (0 idle .. 1 every core busy), from /proc/stat."""
    def sample():
        with open("/proc/stat", encoding="ascii") as stat:
            fields = [int(v) for v in stat.readline().split()[1:]]
        idle = fields[3] + fields[4]  # idle + iowait
        return sum(fields), idle
    total0, idle0 = sample()
    time.sleep(seconds)
    total1, idle1 = sample()
    return 1 - (idle1 - idle0) / max(total1 - total0, 1)


def wait_for_quiet(threshold, timeout):
    """Waits until other processes leave the CPUs nearly idle (this script runs nothing meanwhile), for at
    most `timeout` seconds. Returns whether the machine was quiet, and the busy fraction last seen."""
    deadline = time.monotonic() + timeout
    while True:
        busy = busy_fraction()
        if busy <= threshold:
            return True, busy
        if time.monotonic() >= deadline:
            return False, busy
        time.sleep(2)


def run(binary, workload, directory):
    """One run, one process: the JSON line it printed."""
    command = [binary, workload] + (["--dir", directory] if directory else [])
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr}")
    line = done.stdout.strip().splitlines()[-1]
    result = json.loads(line)
    if result["workload"] != workload:
        sys.exit(f"{binary} answered for {result['workload']}, not {workload}")
    return result


def check_settings(directory):
    ours, grdb = run(OURS, "settings", directory), run(GRDB, "settings", directory)
    for key in SETTINGS:
        if ours[key] != grdb[key]:
            sys.exit(f"settings differ: {key} is {ours[key]} on ours, {grdb[key]} on GRDB")
    print(
        "settings, both sides: " + ", ".join(f"{key} {ours[key]}" for key in SETTINGS)
        + f"; ours SQLCipher {ours['cipher_version']} (SQLite {ours['sqlite_version']}), "
        f"GRDB over SQLite {grdb['sqlite_version']}", file=sys.stderr)


def significant(value):
    return float(f"{value:.4g}")


def medians(results):
    """The median of the value and of every numeric extra, over the runs of one side."""
    keys = [key for key, value in results[0].items()
            if isinstance(value, (int, float)) and key not in ("value", "checksum")]
    return statistics.median(r["value"] for r in results), {
        key: significant(statistics.median(r[key] for r in results)) for key in keys}


def summarize(workload, ours_runs, grdb_runs):
    ours, ours_extras = medians(ours_runs)
    grdb, grdb_extras = medians(grdb_runs)
    # The headline: each round's two runs were made one after the other, so their ratio cancels most of the
    # shared machine's drift; the verdict is the median of those ratios (with their min–max), not the ratio of
    # two medians taken minutes apart.
    paired = sorted(o["value"] / g["value"] for o, g in zip(ours_runs, grdb_runs))
    ratio = statistics.median(paired)
    quartiles = statistics.quantiles(paired, n=4)
    target = TARGETS[workload]
    met = target is None or ratio <= target
    texts = [] if target is None else [f"≤{target:.2f}×"]
    if workload in ABSOLUTE_LIMIT:
        met = met and ours <= ABSOLUTE_LIMIT[workload]
        texts.append(f"≤{ABSOLUTE_LIMIT[workload]:g} {ours_runs[0]['unit']}")
    target_text = " and ".join(texts)
    return {
        "ours": significant(ours),
        "grdb": significant(grdb),
        "unit": ours_runs[0]["unit"],
        "ratio": round(ratio, 3),
        "ratio_min_max": [round(paired[0], 3), round(paired[-1], 3)],
        "ratio_of_medians": round(ours / grdb, 3),
        "target": target_text,
        "met": met,
        "paired_ratio_p25_p75": [round(quartiles[0], 3), round(quartiles[2], 3)],
        "rounds": len(ours_runs),
        "runs": {"ours": [significant(r["value"]) for r in ours_runs],
                 "grdb": [significant(r["value"]) for r in grdb_runs]},
        "extras": {"ours": ours_extras, "grdb": grdb_extras},
    }


def table(summary):
    lines = [
        "| workload | ours | GRDB | ours ÷ GRDB, median of rounds | min–max | p25–p75 | target | met? |",
        "|---|---:|---:|---:|---:|---:|---|---|"]
    for workload, row in summary.items():
        unit = row["unit"]
        low, high = row["paired_ratio_p25_p75"]
        least, most = row["ratio_min_max"]
        lines.append(
            f"| `{workload}` | {row['ours']:g} {unit} | {row['grdb']:g} {unit} | {row['ratio']:.2f}× | "
            f"{least:.2f}–{most:.2f}× | {low:.2f}–{high:.2f}× | {row['target']} | {'yes' if row['met'] else '**no**'} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--no-build", action="store_true", help="use the release binaries already built")
    parser.add_argument("--rounds", type=int, default=20, help="runs of each workload on each side (at least 5)")
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated, in this order")
    parser.add_argument("--dir", default=None, help="where the stores are made (default: the temporary directory)")
    parser.add_argument("--out", default=os.path.join(BENCHMARKS, "results", "peers.json"))
    parser.add_argument("--quiet-below", type=float, default=0.15,
                        help="start each pair of runs once other processes keep the CPUs below this busy fraction")
    parser.add_argument("--quiet-timeout", type=float, default=120,
                        help="seconds to wait for that before measuring anyway (counted in rounds_started_busy)")
    arguments = parser.parse_args()
    if arguments.rounds < 5:
        parser.error("--rounds must be at least 5: the medians need them")
    workloads = [w for w in arguments.workloads.split(",") if w]
    for workload in workloads:
        if workload not in TARGETS:
            parser.error(f"unknown workload {workload}; known: {', '.join(WORKLOADS)}")

    if not arguments.no_build:
        build()
    for binary in (OURS, GRDB):
        if not os.access(binary, os.X_OK):
            sys.exit(f"{binary} is missing: run without --no-build")
    check_settings(arguments.dir)

    runs = {workload: {"ours": [], "grdb": []} for workload in workloads}
    noisy = {workload: 0 for workload in workloads}
    for round_index in range(arguments.rounds):
        sides = [("ours", OURS), ("grdb", GRDB)]
        if round_index % 2:
            sides.reverse()
        for workload in workloads:
            # The machine is shared (other builds and tests run on it): each pair starts once it is quiet.
            quiet, busy = wait_for_quiet(arguments.quiet_below, arguments.quiet_timeout)
            if not quiet:
                noisy[workload] += 1
                print(f"round {round_index + 1} {workload}: still {busy:.0%} busy after "
                      f"{arguments.quiet_timeout:g} s, measuring anyway", file=sys.stderr)
            for side, binary in sides:
                result = run(binary, workload, arguments.dir)
                runs[workload][side].append(result)
                print(f"round {round_index + 1}/{arguments.rounds} {workload} {side}: "
                      f"{result['value']:.6g} {result['unit']}", file=sys.stderr)

    summary = {workload: summarize(workload, runs[workload]["ours"], runs[workload]["grdb"])
               for workload in workloads}
    for workload in workloads:
        summary[workload]["rounds_started_busy"] = noisy[workload]
    os.makedirs(os.path.dirname(os.path.abspath(arguments.out)), exist_ok=True)
    with open(arguments.out, "w", encoding="utf-8") as out:
        text = json.dumps(summary, indent=2, ensure_ascii=False)
        # Lists of numbers on one line each: the file stays readable with every run in it.
        text = re.sub(r"\[\s+([-0-9.e,\s]+?)\s+\]", lambda m: "[" + ", ".join(m.group(1).split()).replace(",,", ",") + "]", text)
        out.write(text + "\n")
    print(table(summary))


if __name__ == "__main__":
    main()
