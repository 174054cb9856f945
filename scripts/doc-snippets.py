#!/usr/bin/env python3
"""Every ```swift block of README.md and of the DocC articles is code that compiles and runs.

The code of each block lives in Tests/DocumentationSnippetTests (a test target: compiled by `swift build
--build-tests`, run by `swift test`, against a simulated device) or, for a Package.swift fragment, in
Tests/DocumentationManifest/Package.swift. There it sits between markers, in SwiftPM's snippet syntax:

    // snippet.readme-data-layer        a region starts (any name but hide, show and end)
    import ProtectedStore
    // snippet.hide                     lines from here ...
    func dataLayer() async throws {
    // snippet.show                     ... to here are not part of the region (set-up the docs leave out)
        var migrator = DatabaseMigrator.keyValue
    // snippet.end                      the region ends

A region's text is its shown lines, each run of shown lines (between hidden parts) stripped of its own common
indentation. A document's block, stripped of its common indentation, must be byte for byte the text of some
region; every region must be some block's. This script checks that, compiles the manifest regions
(`swift package dump-package`: the fragments are valid PackageDescription in place) and checks that each product
they name is one the root package declares, then — unless --no-run — runs the snippet tests
(`swift test --skip-build --filter DocumentationSnippetTests`) and requires each region's code to have run in a
passing test: one named `@Test("region-name: …")` (or `@Test("region-a, region-b: …")`), or the region's own
`@Test func`. A block this package cannot compile is marked on the line before its fence,
`<!-- doc-snippets: not compiled: REASON -->`, and listed in the summary.

Usage: scripts/doc-snippets.py [--no-run] [--scratch-path .build]
Exit status 0 when every block is a region and every region's test passed, 1 otherwise, naming the document's
file and line, the nearest region and the first line that differs.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import shutil
import subprocess
import tempfile
import sys
from dataclasses import dataclass, field
from pathlib import Path

from markdown_fences import fenced_blocks

ROOT = Path(__file__).resolve().parent.parent
SNIPPET_SOURCES = ROOT / "Tests" / "DocumentationSnippetTests"
MANIFEST = ROOT / "Tests" / "DocumentationManifest" / "Package.swift"
TEST_TARGET = "DocumentationSnippetTests"

# A block that is deliberately not compiled (code of another package, say GRDB's side of a comparison) says so on
# the line before its fence (blank lines between allowed), with the reason: <!-- doc-snippets: not compiled: the same example with GRDB -->.
# Such blocks are listed in the summary, never skipped silently.
NOT_COMPILED = re.compile(r"^\s*<!--\s*doc-snippets:\s*not compiled:\s*(?P<reason>.+?)\s*-->\s*$")
MARKER = re.compile(r"^\s*// snippet\.(?P<word>[A-Za-z0-9_-]+)\s*$")


@dataclass
class Block:
    """A fenced ```swift block of a document."""

    path: Path
    line: int  # 1-based line of the block's first code line
    lines: list[str]
    not_compiled: str | None = None  # the reason given by a `<!-- doc-snippets: not compiled: … -->` line

    @property
    def where(self) -> str:
        return f"{shown(self.path)}:{self.line}"


def shown(path: Path) -> str:
    """A path as the messages show it: relative to the repository when it is in it."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


@dataclass
class Region:
    """The shown lines between `// snippet.NAME` and `// snippet.end`."""

    name: str
    path: Path
    line: int  # 1-based line of the `// snippet.NAME` marker
    lines: list[str] = field(default_factory=list)
    source_lines: list[int] = field(default_factory=list)  # the file line of each shown line

    @property
    def where(self) -> str:
        return f"{shown(self.path)}:{self.line}"


def dedent(lines: list[str]) -> list[str]:
    """Strips the indentation every non-blank line shares; blank lines become empty."""
    widths = [len(line) - len(line.lstrip(" ")) for line in lines if line.strip()]
    cut = min(widths, default=0)
    return [line[cut:] if line.strip() else "" for line in lines]


def documents() -> list[Path]:
    """README.md and every DocC article of every module."""
    return [ROOT / "README.md"] + sorted(ROOT.glob("Sources/*/Documentation.docc/**/*.md"))


def swift_blocks(path: Path) -> list[Block]:
    """The fenced blocks whose info string's first word is `swift`, each with the code lines less their common
    indentation."""
    return [
        Block(path, fence.line + 1, dedent(fence.lines), marker["reason"] if (marker := NOT_COMPILED.match(fence.before)) else None)
        for fence in fenced_blocks(path.read_text(encoding="utf-8"))
        if fence.language == "swift"
    ]


def regions(path: Path, problems: list[str]) -> list[Region]:
    """The marked regions of one source file; malformed markers are problems."""
    found: list[Region] = []
    current: Region | None = None
    hidden = False
    run: list[str] = []
    run_lines: list[int] = []

    def flush() -> None:
        if current is not None and run:
            current.lines.extend(dedent(run))
            current.source_lines.extend(run_lines)
        run.clear()
        run_lines.clear()

    for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):
        marker = MARKER.match(line)
        word = marker["word"] if marker else None
        where = f"{shown(path)}:{number}"
        if word is None:
            if current is not None and not hidden:
                run.append(line)
                run_lines.append(number)
        elif word == "hide":
            if current is None or hidden:
                problems.append(f"{where}: `// snippet.hide` outside a region or after another hide")
            flush()
            hidden = True
        elif word == "show":
            if current is None or not hidden:
                problems.append(f"{where}: `// snippet.show` without a `// snippet.hide` before it")
            hidden = False
        elif word == "end":
            if current is None:
                problems.append(f"{where}: `// snippet.end` without a region")
            elif hidden:
                problems.append(f"{where}: region `{current.name}` ends while hidden (add `// snippet.show` or end it earlier)")
            flush()
            if current is not None:
                found.append(current)
            current, hidden = None, False
        else:
            if current is not None:
                problems.append(f"{where}: region `{word}` starts inside region `{current.name}` ({current.where})")
            current, hidden = Region(word, path, number), False
    if current is not None:
        problems.append(f"{current.where}: region `{current.name}` has no `// snippet.end`")
    for region in found:
        while region.lines and not region.lines[-1]:
            region.lines.pop()
            region.source_lines.pop()
        while region.lines and not region.lines[0]:
            region.lines.pop(0)
            region.source_lines.pop(0)
    return found


def trimmed(lines: list[str]) -> list[str]:
    start, end = 0, len(lines)
    while start < end and not lines[start]:
        start += 1
    while end > start and not lines[end - 1]:
        end -= 1
    return lines[start:end]


def first_difference(block: Block, region: Region) -> str:
    """Where a block and its nearest region part, as file:line on both sides."""
    doc = trimmed(block.lines)
    offset = block.lines.index(doc[0]) if doc else 0
    for index in range(max(len(doc), len(region.lines))):
        ours = doc[index] if index < len(doc) else None
        theirs = region.lines[index] if index < len(region.lines) else None
        if ours != theirs:
            doc_where = f"{shown(block.path)}:{block.line + offset + index}" if ours is not None else "(the block ends)"
            code_where = (f"{shown(region.path)}:{region.source_lines[index]}"
                          if theirs is not None else "(the region ends)")
            return (f"  first difference:\n"
                    f"    {doc_where}: {ours!r}\n"
                    f"    {code_where}: {theirs!r}")
    return "  (identical)"


def check_manifest(manifest_regions: list[Region], problems: list[str]) -> None:
    """The manifest compiles (dump-package evaluates it) and names only products the root package has."""
    dumped = subprocess.run(["swift", "package", "dump-package", "--package-path", str(MANIFEST.parent)],
                            capture_output=True, text=True)
    if dumped.returncode != 0:
        problems.append(f"{MANIFEST.relative_to(ROOT)} does not compile:\n{dumped.stderr.strip()}")
        return
    root = subprocess.run(["swift", "package", "dump-package", "--package-path", str(ROOT)],
                          capture_output=True, text=True)
    if root.returncode != 0:
        problems.append(f"Package.swift does not load:\n{root.stderr.strip()}")
        return
    products = {product["name"] for product in json.loads(root.stdout)["products"]}
    identity = json.loads(root.stdout)["name"]
    for region in manifest_regions:
        for line, number in zip(region.lines, region.source_lines):
            for name, package in re.findall(r'\.product\(name: "([^"]+)", package: "([^"]+)"\)', line):
                if package == identity and name not in products:
                    problems.append(f"{MANIFEST.relative_to(ROOT)}:{number}: the root package has no product "
                                    f"`{name}` (it has {', '.join(sorted(products))})")


# SwiftPM names a package that is a path dependency after its folder: `.package(path: "../ProtectedStore")` with
# `package: "ProtectedStore"` fails for a clone in a folder of another name ("unknown package 'ProtectedStore' …
# valid packages are: 'clone'"). The documented dependency must work whatever the folder is called.
CLONE_FOLDER = "clone"
DOCUMENTED_PATH = '"../ProtectedStore"'


def check_adoption(manifest: str, problems: list[str]) -> None:
    """An app package whose manifest is `manifest` (the documentation's Package.swift fragments in place) loads
    with the dependency's path pointing at a clone of this repository in a folder named `clone`: SwiftPM finds
    every `package:` its products name. Once with README.md's dependency, once with GettingStarted.md's.
    `swift package describe` loads the manifests and checks the graph's names without fetching anything; the
    clone is made of links to this repository's manifest, sources and tests."""
    if DOCUMENTED_PATH not in manifest:
        problems.append(f"{MANIFEST.relative_to(ROOT)}: no dependency on the path {DOCUMENTED_PATH}, which the "
                        "adoption check replaces with a folder of another name")
        return
    with tempfile.TemporaryDirectory() as folder:
        clone = Path(folder) / CLONE_FOLDER
        clone.mkdir()
        for name in ("Package.swift", "Sources", "Tests"):
            (clone / name).symlink_to(ROOT / name)
        for dependencies in ("readmePackageDependencies", "gettingStartedPackageDependencies"):
            app = Path(folder) / "App"
            shutil.rmtree(app, ignore_errors=True)
            for target, source in (("Sources/App", 'print("app")\n'), ("Tests/ReadmeTests", "import Testing\n"),
                                   ("Tests/AppTests", "import Testing\n")):
                (app / target).mkdir(parents=True)
                (app / target / "File.swift").write_text(source)
            (app / "Package.swift").write_text(
                manifest.replace(DOCUMENTED_PATH, f'"../{CLONE_FOLDER}"')
                .replace("dependencies: readmePackageDependencies", f"dependencies: {dependencies}"))
            described = subprocess.run(["swift", "package", "describe", "--package-path", str(app)],
                                       capture_output=True, text=True)
            if described.returncode != 0:
                errors = list(dict.fromkeys(line for line in described.stderr.splitlines()
                                            if "error:" in line and "fatalError" not in line))
                problems.append(f"{MANIFEST.relative_to(ROOT)} ({dependencies}): an app whose clone of this "
                                f"repository is in a folder named `{CLONE_FOLDER}` does not load:\n  "
                                + "\n  ".join(errors or described.stderr.strip().splitlines()[-5:]))


def run_tests(run_regions: list[Region], scratch: str, problems: list[str]) -> None:
    """Runs the snippet tests. Each region's code must have run in a passing test: one whose name starts with
    the region's name (`@Test("region-name: what it shows")`, or `@Test("one-region, another: …")` for a test
    that runs several), or, for a region that is itself a `@Test func name()`, a passing test `name()`."""
    command = ["swift", "test", "--skip-build", "--scratch-path", scratch, "--filter", TEST_TARGET]
    print("$ " + " ".join(command), flush=True)
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    output = result.stdout + result.stderr
    if result.returncode != 0:
        failures = [line for line in output.splitlines() if "✘" in line or "error:" in line]
        problems.append("the snippet tests failed (swift test exit status "
                        f"{result.returncode}):\n" + "\n".join(failures[-40:] or output.splitlines()[-40:]))
        return
    covered: set[str] = set()
    for name in re.findall(r'Test "([^"]+)" passed', output):
        if ":" in name:
            covered.update(part.strip() for part in name.split(":", 1)[0].split(","))
    unnamed = re.findall(r"Test (\w+)\(\) passed", output)
    for region in run_regions:
        declared = re.search(r"@Test\b[^\n]*\n?[^\n]*\bfunc (\w+)\(", "\n".join(region.lines))
        if region.name in covered:
            continue
        if declared and declared.group(1) in unnamed:
            unnamed.remove(declared.group(1))  # one passing run per region that declares it
            continue
        problems.append(f"{region.where}: region `{region.name}`: no passing test ran its code (name the @Test that "
                        f"runs it `\"{region.name}: …\"`)")


def match(docs: list[Path], sources: list[Path], problems: list[str]) -> tuple[list[Region], list[Block]]:
    """Every swift block of `docs` must be a region of `sources`, and every region some block."""
    all_regions: list[Region] = []
    for path in sources:
        all_regions.extend(regions(path, problems))
    by_name: dict[str, Region] = {}
    for region in all_regions:
        if region.name in by_name:
            problems.append(f"{region.where}: region `{region.name}` is also at {by_name[region.name].where}")
        by_name[region.name] = region
        if not region.lines:
            problems.append(f"{region.where}: region `{region.name}` shows no line")

    blocks = [block for path in docs for block in swift_blocks(path)]
    used: set[str] = set()
    for block in blocks:
        if block.not_compiled:
            continue
        text = trimmed(block.lines)
        match = next((region for region in all_regions if region.lines == text), None)
        if match is not None:
            used.add(match.name)
            continue
        if not all_regions:
            problems.append(f"{block.where}: this swift block is no snippet region (there are none)")
            continue
        nearest = max(all_regions, key=lambda region: difflib.SequenceMatcher(
            None, "\n".join(region.lines), "\n".join(text)).ratio())
        problems.append(f"{block.where}: this swift block is no snippet region's code; the nearest is "
                        f"`{nearest.name}` ({nearest.where})\n{first_difference(block, nearest)}")
    for region in all_regions:
        if region.name not in used:
            problems.append(f"{region.where}: region `{region.name}` is in no document: paste it into one, or "
                            f"remove it")
    return all_regions, blocks


def self_test() -> int:
    """The check fails when it should: a block that drifted by one line, a region no document shows, a region
    left open; and passes a block in a list item whose region hides set-up lines, and a block marked not
    compiled."""
    import tempfile
    with tempfile.TemporaryDirectory() as folder:
        doc, code = Path(folder) / "doc.md", Path(folder) / "Code.swift"
        code.write_text("\n".join([
            "// snippet.one", "import ProtectedStore", "// snippet.hide", "func run() {", "// snippet.show", "",
            "    let a = 1", "    print(a)", "// snippet.end", "}", "", "// snippet.two", "let b = 2", "// snippet.end",
        ]) + "\n")
        good = ["Text.", "", "- item:", "", "  ```swift", "  import ProtectedStore", "", "  let a = 1", "  print(a)",
                "  ```", "", "```swift", "let b = 2", "```", ""]
        doc.write_text("\n".join(good))
        failures: list[str] = []

        def expect(name: str, condition: bool, detail: object) -> None:
            print(f"self-test: {'ok  ' if condition else 'FAIL'} {name}")
            if not condition:
                failures.append(f"{name}: {detail}")

        problems: list[str] = []
        _, blocks = match([doc], [code], problems)
        expect("identical blocks match their regions", problems == [] and len(blocks) == 2, problems)

        doc.write_text("\n".join(good).replace("print(a)", "print(b)"))
        problems = []
        match([doc], [code], problems)
        expect("a drifted line is named, with the region's line", len(problems) == 2
               and f"{doc}:6: this swift block is no snippet region's code; the nearest is `one`" in problems[0]
               and f"{doc}:9: '  print(b)'".replace("  print", "print") in problems[0]
               and f"{code}:8: 'print(a)'" in problems[0]
               and "region `one` is in no document" in problems[1], problems)

        doc.write_text("\n".join(good[:10]))
        problems = []
        match([doc], [code], problems)
        expect("a region no document shows fails", problems == [f"{code}:12: region `two` is in no document: "
                                                               "paste it into one, or remove it"], problems)

        doc.write_text("\n".join(good[:11] + ["<!-- doc-snippets: not compiled: GRDB's side -->"] + good[11:])
                       .replace("let b = 2", "let b = 3"))
        code.write_text(code.read_text().replace("// snippet.two\nlet b = 2\n// snippet.end\n", ""))
        problems = []
        _, blocks = match([doc], [code], problems)
        expect("a block marked not compiled is listed, not matched",
               problems == [] and [block.not_compiled for block in blocks] == [None, "GRDB's side"], problems)

        code.write_text(code.read_text().replace("// snippet.end\n}", "}"))
        problems = []
        match([doc], [code], problems)
        expect("a region left open fails", any("region `one` has no `// snippet.end`" in p for p in problems), problems)

    # The adoption check fails on the dependency SwiftPM names after its folder (issue 30, item 4).
    problems = []
    folder_named = MANIFEST.read_text(encoding="utf-8").replace(
        f'.package(name: "ProtectedStore", path: {DOCUMENTED_PATH})', f".package(path: {DOCUMENTED_PATH})")
    check_adoption(folder_named, problems)
    expect("a dependency named after its folder fails in a folder named otherwise",
           len(problems) == 2 and all("unknown package 'ProtectedStore'" in p for p in problems), problems)
    for failure in failures:
        print(f"self-test: {failure}", file=sys.stderr)
    return 1 if failures else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--no-run", action="store_true", help="check the text only; do not run the tests")
    parser.add_argument("--scratch-path", default=".build", help="swift's build folder (default .build)")
    parser.add_argument("--self-test", action="store_true", help="check that the check fails when it should")
    arguments = parser.parse_args()
    if arguments.self_test:
        return self_test()

    problems: list[str] = []
    all_regions, blocks = match(documents(), sorted(SNIPPET_SOURCES.rglob("*.swift")) + [MANIFEST], problems)

    manifest_regions = [region for region in all_regions if region.path == MANIFEST]
    check_manifest(manifest_regions, problems)
    check_adoption(MANIFEST.read_text(encoding="utf-8"), problems)
    files = sorted({block.path for block in blocks})
    if not problems and not arguments.no_run:
        run_tests([region for region in all_regions if region.path != MANIFEST], arguments.scratch_path, problems)

    if problems:
        print(f"doc-snippets: {len(problems)} problem(s) in {len(blocks)} swift blocks of {len(files)} files:",
              file=sys.stderr)
        for problem in problems:
            print(problem, file=sys.stderr)
        print("doc-snippets: a block's code lives between `// snippet.NAME` and `// snippet.end` in "
              f"Tests/{TEST_TARGET} (CONTRIBUTING.md, \"Code in the documentation\")", file=sys.stderr)
        return 1
    skipped = [block for block in blocks if block.not_compiled]
    checked = [block for block in blocks if not block.not_compiled]
    fragments = len([b for b in checked if any(r.lines == trimmed(b.lines) and r.path == MANIFEST for r in all_regions)])
    ran = "compiled and run" if not arguments.no_run else "matched (not run: --no-run)"
    print(f"doc-snippets: {len(checked)} swift blocks in {len(files)} files, all {ran} "
          f"({len(checked) - fragments} as tests in Tests/{TEST_TARGET}, {fragments} as Package.swift fragments "
          f"evaluated in {MANIFEST.relative_to(ROOT)})")
    for block in skipped:
        print(f"doc-snippets: NOT compiled, as marked: {block.where} ({block.not_compiled})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
