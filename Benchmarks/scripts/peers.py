#!/usr/bin/env python3
"""The peer benchmark: ProtectedStore against GRDB, the same workloads, side by side (BENCHMARKS.md, section 7).

    scripts/peers.py [--no-build] [--rounds N] [--workloads a,b] [--dir DIR] [--out results/peers.json]

Builds the two release binaries one after the other (2 cores: never two builds at once) — `peer-workloads`
of this package (ProtectedStore over SQLCipher) and `grdb-workloads` of Peers/ (GRDB over the system's
SQLite; a package of its own because both libraries export sqlite3_*) — unless --no-build says they are
built. Checks that both sides run with the same settings (WAL, synchronous FULL, 4 KiB pages, 32 MiB cache),
then runs every workload in rounds, each run a new process, the two sides interleaved and the order flipped
every round (ours, grdb, grdb, ours, ...) so neither always runs first. Writes the medians as
{"<workload>": {"ours": x, "grdb": y, "unit": "s|ms", ...}} and prints a Markdown table.
Only the standard library is used.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BENCHMARKS = os.path.dirname(HERE)
PEERS = os.path.join(BENCHMARKS, "Peers")
SCRATCH = ".build-peers"
OURS = os.path.join(BENCHMARKS, SCRATCH, "release", "peer-workloads")
GRDB = os.path.join(PEERS, SCRATCH, "release", "grdb-workloads")

# Issue 17's targets: ratio = ours ÷ grdb, of the medians. read_p99_during_write also needs ≤ 1 ms itself.
TARGETS = {
    "insert_100k": 0.85,
    "warm_scan_100k": 0.80,
    "point_read_10k": 1.10,
    "durable_write_1row": 1.30,
    "read_p99_during_write": 1.00,
    "reopen_cold_scan_100k": 1.40,
}
ABSOLUTE_LIMIT = {"read_p99_during_write": 1.0}  # ms
WORKLOADS = list(TARGETS)
SETTINGS = ["journal_mode", "synchronous", "page_size", "cache_size"]


def build():
    for folder, product in [(BENCHMARKS, "peer-workloads"), (PEERS, "grdb-workloads")]:
        print(f"building {product} (release) in {os.path.relpath(folder)}", file=sys.stderr)
        subprocess.run(
            ["swift", "build", "-c", "release", "--product", product, "--scratch-path", SCRATCH],
            cwd=folder, check=True)


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
    ratio = ours / grdb
    target = TARGETS[workload]
    met = ratio <= target
    target_text = f"≤{target:.2f}×"
    if workload in ABSOLUTE_LIMIT:
        met = met and ours <= ABSOLUTE_LIMIT[workload]
        target_text += f" and ≤{ABSOLUTE_LIMIT[workload]:g} {ours_runs[0]['unit']}"
    return {
        "ours": significant(ours),
        "grdb": significant(grdb),
        "unit": ours_runs[0]["unit"],
        "ratio": round(ratio, 3),
        "target": target_text,
        "met": met,
        "rounds": len(ours_runs),
        "runs": {"ours": [significant(r["value"]) for r in ours_runs],
                 "grdb": [significant(r["value"]) for r in grdb_runs]},
        "extras": {"ours": ours_extras, "grdb": grdb_extras},
    }


def table(summary):
    lines = ["| workload | ours | GRDB | ratio (ours ÷ GRDB) | target | met? |", "|---|---:|---:|---:|---|---|"]
    for workload, row in summary.items():
        unit = row["unit"]
        lines.append(
            f"| `{workload}` | {row['ours']:g} {unit} | {row['grdb']:g} {unit} | {row['ratio']:.2f}× | "
            f"{row['target']} | {'yes' if row['met'] else '**no**'} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--no-build", action="store_true", help="use the release binaries already built")
    parser.add_argument("--rounds", type=int, default=10, help="runs of each workload on each side (at least 5)")
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated, in this order")
    parser.add_argument("--dir", default=None, help="where the stores are made (default: the temporary directory)")
    parser.add_argument("--out", default=os.path.join(BENCHMARKS, "results", "peers.json"))
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
    for round_index in range(arguments.rounds):
        sides = [("ours", OURS), ("grdb", GRDB)]
        if round_index % 2:
            sides.reverse()
        for workload in workloads:
            for side, binary in sides:
                result = run(binary, workload, arguments.dir)
                runs[workload][side].append(result)
                print(f"round {round_index + 1}/{arguments.rounds} {workload} {side}: "
                      f"{result['value']:.6g} {result['unit']}", file=sys.stderr)

    summary = {workload: summarize(workload, runs[workload]["ours"], runs[workload]["grdb"])
               for workload in workloads}
    os.makedirs(os.path.dirname(os.path.abspath(arguments.out)), exist_ok=True)
    with open(arguments.out, "w", encoding="utf-8") as out:
        json.dump(summary, out, indent=2, ensure_ascii=False)
        out.write("\n")
    print(table(summary))


if __name__ == "__main__":
    main()
