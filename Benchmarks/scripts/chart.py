#!/usr/bin/env python3
"""Draws the encrypted/plaintext ratios of BENCHMARKS.md as an SVG bar chart.

    scripts/chart.py RESULTS.md INSTRUCTIONS.md > ratios.svg
    scripts/chart.py --peers results/peers.json > results/peers.svg

With --peers it draws the peer benchmark's ours ÷ GRDB ratios instead (scripts/peers.py writes the JSON), on a
logarithmic scale, since they span three orders of magnitude.

RESULTS.md is `swift package benchmark --format markdown --no-progress` output; every benchmark named
"<measure>: encrypted (raw key)" that has a twin "<measure>: unencrypted" gives one wall-clock p50 ratio.
INSTRUCTIONS.md is `scripts/count-instructions.sh` output; each of its rows gives an instruction ratio.
Only the standard library is used, so the chart can be redrawn on any machine with Python 3.
"""
import json
import math
import re
import sys
from html import escape

ENCRYPTED = ": encrypted (raw key)"
PLAIN = ": unencrypted"
# The targets, by measure; a cold scan's target is plaintext + the crypto floor (shown in the text).
TARGETS = {"insert": 1.10, "warm": 1.05, "point": 1.05}


def wall_clock_p50(path):
    """{benchmark name: p50 in its own unit} from package-benchmark's Markdown output."""
    p50s, name = {}, None
    for line in open(path, encoding="utf-8"):
        heading = re.match(r"^### (.*)", line)
        if heading:
            name = heading.group(1).strip()
        elif name and line.startswith("| Time (wall clock)"):
            cells = [cell.strip() for cell in line.split("|")]
            p50s[name] = float(cells[4])
    return p50s


def instruction_ratios(path):
    """[(workload, ratio)] from count-instructions.sh's table."""
    rows = []
    for line in open(path, encoding="utf-8"):
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[3].endswith("×"):
            rows.append((cells[0], float(cells[3].rstrip("×"))))
    return rows


def target_for(label):
    lowered = label.lower()
    if "insert" in lowered:
        return TARGETS["insert"]
    if "warm" in lowered:
        return TARGETS["warm"]
    if "point" in lowered:
        return TARGETS["point"]
    return None


def bars(results, instructions):
    p50s = wall_clock_p50(results)
    out = []
    for name, encrypted in sorted(p50s.items()):
        if name.endswith(ENCRYPTED):
            measure = name[: -len(ENCRYPTED)]
            plain = p50s.get(measure + PLAIN)
            if plain:
                out.append((f"{measure} — wall clock p50", encrypted / plain))
    for workload, ratio in instruction_ratios(instructions):
        out.append((f"{workload} — instructions (callgrind)", ratio))
    return out


def svg(rows):
    width, left, bar_height, gap, top = 900, 380, 22, 10, 50
    scale_max = max([2.0] + [ratio for _, ratio in rows]) * 1.05
    plot = width - left - 40
    height = top + len(rows) * (bar_height + gap) + 50

    def x(ratio):
        return left + plot * ratio / scale_max

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="13">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{left}" y="24" font-size="16" font-weight="bold">Encrypted ÷ unencrypted (1.0 = no cost)</text>',
    ]
    for tick in [t / 2 for t in range(0, int(scale_max * 2) + 1)]:
        parts.append(f'<line x1="{x(tick):.1f}" y1="{top - 8}" x2="{x(tick):.1f}" y2="{height - 40}" stroke="#ddd"/>')
        parts.append(f'<text x="{x(tick):.1f}" y="{height - 24}" text-anchor="middle">{tick:.1f}×</text>')
    parts.append(f'<line x1="{x(1):.1f}" y1="{top - 8}" x2="{x(1):.1f}" y2="{height - 40}" stroke="#333"/>')
    for index, (label, ratio) in enumerate(rows):
        y = top + index * (bar_height + gap)
        target = target_for(label)
        met = target is None or ratio <= target
        colour = "#4a7fb5" if met else "#c8553d"
        parts.append(f'<text x="{left - 8}" y="{y + 16}" text-anchor="end">{escape(label)}</text>')
        parts.append(f'<rect x="{left}" y="{y}" width="{x(ratio) - left:.1f}" height="{bar_height}" fill="{colour}"/>')
        parts.append(f'<text x="{x(ratio) + 4:.1f}" y="{y + 16}">{ratio:.2f}×</text>')
        if target:
            parts.append(
                f'<line x1="{x(target):.1f}" y1="{y - 3}" x2="{x(target):.1f}" y2="{y + bar_height + 3}" '
                f'stroke="black" stroke-width="2" stroke-dasharray="3,2"/>')
    parts.append(
        f'<text x="{left}" y="{height - 6}" font-size="11">blue: target met or none set · red: over target · '
        f'dashed: target</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def peer_bars(path):
    """[(label, ratio, target ratio, met)] from peers.json, in its order."""
    rows = []
    for workload, row in json.load(open(path, encoding="utf-8")).items():
        ratio_target = re.match(r"≤([0-9.]+)×", row["target"])  # none for a workload with only an absolute limit
        target = float(ratio_target.group(1)) if ratio_target else None
        label = f"{workload} ({row['ours']:g} vs {row['grdb']:g} {row['unit']})"
        rows.append((label, row["ratio"], target, row["met"]))
    return rows


def peer_svg(rows):
    width, left, bar_height, gap, top = 1000, 400, 22, 10, 56
    low = min([0.25] + [ratio for _, ratio, _, _ in rows]) / 1.5
    high = max([4.0] + [ratio for _, ratio, _, _ in rows]) * 1.5
    plot = width - left - 80
    height = top + len(rows) * (bar_height + gap) + 64

    def x(ratio):
        return left + plot * (math.log10(ratio) - math.log10(low)) / (math.log10(high) - math.log10(low))

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="13">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        '<text x="20" y="24" font-size="16" font-weight="bold">ProtectedStore ÷ GRDB, median of the round-by-round ratios '
        '(below 1× ours is faster; log scale)</text>',
    ]
    # 1, 10, 100, … and, below 10×, the 2s and 5s between them.
    ticks = [m * 10 ** e for e in range(-2, 5) for m in (1, 2, 5) if low <= m * 10 ** e <= high and (m == 1 or e < 1)]
    for tick in ticks:
        parts.append(f'<line x1="{x(tick):.1f}" y1="{top - 8}" x2="{x(tick):.1f}" y2="{height - 54}" stroke="#ddd"/>')
        parts.append(f'<text x="{x(tick):.1f}" y="{height - 38}" text-anchor="middle">{tick:g}×</text>')
    parts.append(f'<line x1="{x(1):.1f}" y1="{top - 8}" x2="{x(1):.1f}" y2="{height - 54}" stroke="#333"/>')
    for index, (label, ratio, target, met) in enumerate(rows):
        y = top + index * (bar_height + gap)
        colour = "#4a7fb5" if met else "#c8553d"
        start, end = sorted((x(1), x(ratio)))
        parts.append(f'<text x="{left - 8}" y="{y + 16}" text-anchor="end">{escape(label)}</text>')
        parts.append(f'<rect x="{start:.1f}" y="{y}" width="{max(end - start, 1):.1f}" height="{bar_height}" fill="{colour}"/>')
        if target is not None:
            parts.append(
                f'<line x1="{x(target):.1f}" y1="{y - 3}" x2="{x(target):.1f}" y2="{y + bar_height + 3}" '
                f'stroke="black" stroke-width="2" stroke-dasharray="3,2"/>')
        parts.append(f'<text x="{max(x(ratio), x(1), x(target or 1)) + 6:.1f}" y="{y + 16}">{ratio:.2f}×</text>')
    parts.append(
        f'<text x="20" y="{height - 20}" font-size="11">Bars start at 1×: blue, target met; red, target missed. '
        f'Dashed: the target ratio; the read latencies also have limits in ms (BENCHMARKS.md, section 7).</text>')
    parts.append(
        f'<text x="20" y="{height - 6}" font-size="11">ProtectedStore: SQLCipher 3.4.1, encrypted, app-level API. '
        f'GRDB 7.10: DatabasePool over plain SQLite 3.40.1. scripts/peers.py, BENCHMARKS.md section 7.</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--peers":
        sys.stdout.write(peer_svg(peer_bars(sys.argv[2])))
    elif len(sys.argv) == 3:
        sys.stdout.write(svg(bars(sys.argv[1], sys.argv[2])))
    else:
        sys.exit("usage: chart.py RESULTS.md INSTRUCTIONS.md > ratios.svg | chart.py --peers peers.json > peers.svg")
