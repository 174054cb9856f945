#!/usr/bin/env python3
"""Public-API audit for the ProtectedStore library modules.

Runs `swift package --scratch-path P dump-symbol-graph --minimum-access-level public
--skip-synthesized-members` in a package folder, reads the `*.symbols.json` files it writes
(`Module@Other.symbols.json` counts for `Module`), and reports per library module: public/open
symbols, how many have no doc comment, and how many are named like a test hook (--hooks).

Counted: every public/open declaration with a source location in this package: types, protocols,
protocol requirements, enum cases, initializers, methods, properties, subscripts, typealiases,
operators, and members declared in extensions of other modules' types. Skipped: SPI symbols and
symbols without a source location (compiler-synthesized: `init(rawValue:)`, `init(from:)` of a
Codable type, a property wrapper's `$projection`). A doc comment inherited from a protocol
requirement (e.g. `description` taking the standard library's text) counts as documented unless
--own-docs is given. Hooks match the symbol's own base name (`abandon()` matches `abandon`,
`$crashPoint` matches `crashPoint`); with --list, symbols that only take a hook-named parameter
or mention a hook type are listed as references (not counted, not failed by --check).

  scripts/public-api.py [--package DIR] [--scratch-path P] [--list] [--check]
Exit status: 0 ok; 1 with --check when any module has an undocumented symbol or a hook; 2 on error.
"""

import argparse
import glob
import json
import os
import re
import subprocess
import sys
import time
from urllib.parse import unquote, urlparse

MODULES = [
    "StoreErrors",
    "SecureKeys",
    "EncryptedSQLite",
    "ProtectedData",
    "ProtectedStore",
    "ProtectedStoreTesting",
    "ProtectedStoreHarness",
    "TPMKeys",
    "LinuxDevice",
]
DEFAULT_HOOKS = (
    "plantedFault,PlantedFault,attachDelay,abandon,schedulesTimers,"
    "clockDidAdvance,crashPoint,CrashPoint,SimulatedCrash"
)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--package", default=".", help="package folder (default: .)")
    p.add_argument("--scratch-path", default=".build-symbols",
                   help="passed to swift package --scratch-path (default: .build-symbols, relative to --package)")
    p.add_argument("--hooks", default=DEFAULT_HOOKS, help="comma-separated test-hook names")
    p.add_argument("--list", action="store_true", help="list every undocumented symbol and every hook")
    p.add_argument("--check", action="store_true", help="exit 1 when any module has an undocumented symbol or a hook")
    p.add_argument("--own-docs", action="store_true",
                   help="treat a doc comment inherited from another module's protocol requirement as missing")
    p.add_argument("--symbol-graph-dir", help="read an existing symbol-graph folder instead of running swift")
    p.add_argument("--verbose", action="store_true", help="print swift's output")
    return p.parse_args()


def dump_symbol_graphs(package, scratch, verbose):
    """Run swift; return (folder, start time). Tolerates a non-zero exit (the test aggregate modules
    `<Package>PackageTests` cannot be extracted on Linux) as long as the library graphs were written."""
    help_text = subprocess.run(["swift", "package", "dump-symbol-graph", "--help"], cwd=package,
                               capture_output=True, text=True).stdout
    cmd = ["swift", "package", "--scratch-path", scratch, "dump-symbol-graph", "--minimum-access-level", "public"]
    if "--skip-synthesized-members" in help_text:
        cmd.append("--skip-synthesized-members")
    print("$ (cd %s && %s)" % (package, " ".join(cmd)), file=sys.stderr)
    start = time.time()
    proc = subprocess.run(cmd, cwd=package, capture_output=True, text=True)
    output = proc.stdout + proc.stderr
    if verbose:
        sys.stderr.write(output)
    match = re.search(r"Files written to (\S+)", output)
    if match:
        folder = match.group(1)
    else:
        found = glob.glob(os.path.join(package, scratch, "*", "symbolgraph"))
        folder = found[0] if found else None
    if proc.returncode != 0:
        errors = sorted(set(re.findall(r"^error: (.*?)(?: Current visible modules:|$)", output, re.M)))
        print("warning: swift exited %d; %s" % (proc.returncode, "; ".join(e[:160] for e in errors) or "no error line"),
              file=sys.stderr)
    if folder is None or not os.path.isdir(folder):
        sys.stderr.write(output[-4000:])
        sys.exit("error: no symbol-graph folder written")
    return folder, start


def base_name(component):
    return component.split("(", 1)[0].lstrip("$")


def source_path(uri, package):
    path = unquote(urlparse(uri).path)
    rel = os.path.relpath(path, package)
    return None if rel.startswith("..") else rel


def main():
    args = parse_args()
    package = os.path.realpath(args.package)
    hooks = {h.strip() for h in args.hooks.split(",") if h.strip()}
    if args.symbol_graph_dir:
        folder, start = args.symbol_graph_dir, 0
    else:
        folder, start = dump_symbol_graphs(package, args.scratch_path, args.verbose)

    stats = {m: {"public": 0, "undocumented": [], "hooks": [], "refs": []} for m in MODULES}
    seen_files = set()
    seen_ids = set()
    for file in sorted(glob.glob(os.path.join(folder, "*.symbols.json"))):
        module = os.path.basename(file)[: -len(".symbols.json")].split("@", 1)[0]
        if module not in stats:
            continue
        if os.path.getmtime(file) < start - 1:
            print("warning: ignoring stale %s" % file, file=sys.stderr)
            continue
        seen_files.add(module)
        with open(file, encoding="utf-8") as f:
            graph = json.load(f)
        for sym in graph.get("symbols", []):
            if sym.get("spi") or sym.get("accessLevel") not in ("public", "open"):
                continue
            loc = sym.get("location")
            if not loc:
                continue  # synthesized: not in this package's source
            rel = source_path(loc.get("uri", ""), package)
            if rel is None:
                continue
            precise = sym["identifier"]["precise"]
            if precise in seen_ids:
                continue
            seen_ids.add(precise)
            where = "%s:%d" % (rel, loc["position"]["line"] + 1)  # symbol graphs count lines from 0
            name = ".".join(sym.get("pathComponents", [])) or sym["names"]["title"]
            entry = "%s %s (%s)" % (module, name, where)
            s = stats[module]
            s["public"] += 1

            doc = sym.get("docComment") or {}
            documented = any(line.get("text", "").strip() for line in doc.get("lines", []))
            if documented and args.own_docs and doc.get("module") not in (None, module):
                documented = False
            if not documented:
                s["undocumented"].append(entry)

            if base_name(sym["pathComponents"][-1]) in hooks:
                s["hooks"].append(entry)
            else:
                words = set()
                for frag in sym.get("declarationFragments", []):
                    if frag.get("kind") in ("identifier", "externalParam", "internalParam", "typeIdentifier"):
                        words.add(frag.get("spelling", ""))
                words.update(sym["pathComponents"][:-1])
                if words & hooks:
                    s["refs"].append("%s  [%s]" % (entry, ",".join(sorted(words & hooks))))

    missing = [m for m in MODULES if m not in seen_files]
    if missing:
        sys.exit("error: no fresh symbol graph for %s in %s" % (", ".join(missing), folder))

    width = max(len(m) for m in MODULES + ["total"])
    print("%-*s %7s %13s %6s" % (width, "module", "public", "undocumented", "hooks"))
    totals = [0, 0, 0]
    for m in MODULES:
        s = stats[m]
        row = [s["public"], len(s["undocumented"]), len(s["hooks"])]
        totals = [a + b for a, b in zip(totals, row)]
        print("%-*s %7d %13d %6d" % (width, m, *row))
    print("%-*s %7d %13d %6d" % (width, "total", *totals))

    if args.list:
        print("\nundocumented:")
        for m in MODULES:
            for e in stats[m]["undocumented"]:
                print(e)
        print("\nhooks:")
        for m in MODULES:
            for e in stats[m]["hooks"]:
                print(e)
        print("\nhook references (parameters, types, enclosing type; not counted):")
        for m in MODULES:
            for e in stats[m]["refs"]:
                print(e)

    if args.check and (totals[1] or totals[2]):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
