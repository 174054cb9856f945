#!/usr/bin/env python3
"""Draws the encrypted/plaintext ratios of BENCHMARKS.md as an SVG bar chart.

    scripts/chart.py RESULTS.md INSTRUCTIONS.md > ratios.svg

RESULTS.md is `swift package benchmark --format markdown --no-progress` output; every benchmark named
"<measure>: encrypted (raw key)" that has a twin "<measure>: unencrypted" gives one wall-clock p50 ratio.
INSTRUCTIONS.md is `scripts/count-instructions.sh` output; each of its rows gives an instruction ratio.
Only the standard library is used, so the chart can be redrawn on any machine with Python 3.
"""
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


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: chart.py RESULTS.md INSTRUCTIONS.md > ratios.svg")
    sys.stdout.write(svg(bars(sys.argv[1], sys.argv[2])))
