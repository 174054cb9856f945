#!/usr/bin/env python3
"""Every transcript and command the documents show is run, and what it prints is compared with what they say.

Swift blocks are scripts/doc-snippets.py's. Every other fenced block of README.md, CONTRIBUTING.md and the DocC
articles is one of these, or the check fails naming it:

  ```console          a transcript: each line starting with `$ ` is a command, run with bash; the lines up to the
                      next command are what it prints (standard output and standard error, in order). Compared line
                      by line after trailing white space is dropped.
  ```shell-session    a `protected-store shell` session at a terminal: the check starts the shell under a pseudo-
                      terminal with the state directory the first line names, types each command shown after a
                      prompt (`[…] > `), answers every passcode prompt with 1234, and compares the screen.
  ```sh               commands to run: the block runs with bash and must exit 0.
  <!-- doc-transcripts: help -->
  ```                 the command language as the shell's `help` prints it: compared with `help`'s output.
  <!-- doc-transcripts: as root: REASON -->
  ```console          a transcript that needs root (it gives a folder to another user): run as root, else listed
                      as not run with the reason.
  <!-- doc-transcripts: not run: REASON -->
  ```…                any block the check cannot run here (make test itself, a benchmark of hours): listed in the
                      summary with its reason, never skipped silently.

What varies from run to run is marked in the expected text: `…` matches any characters within a line, and a line
that is only `…` matches any number of lines (none included).

Each block runs in a sandbox of its own: a fresh working directory and HOME, `protected-store` first on PATH (the
build the check is given), `.build/release/protected-store` in the working directory pointing at the same binary
(the README's scripts use that path after `make demo`), no `COLUMNS` (output into a file keeps whole lines; the
pseudo-terminal of a shell session is 100 columns wide), and `/tmp/` in commands mapped to a private folder,
mapped back in what they print, so a transcript can say `/tmp/phone` and the check touches nothing of yours.

Inline commands are checked too: every `protected-store …` code span of the documents must name a subcommand the
tool has, with options its `--help` lists, and every `make TARGET` span a target of the Makefile.

Usage: scripts/doc-transcripts.py [--binary .build/debug/protected-store] [--self-test] [--only FILE:LINE]
Exit status 0 when every block holds, 1 otherwise, with the first line that differs.
"""

from __future__ import annotations

import argparse
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from markdown_fences import FENCE, fenced_blocks

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted(ROOT.glob("Sources/*/Documentation.docc/*.md"))]
MARKER = re.compile(r"^\s*<!--\s*doc-transcripts:\s*(?P<what>[^:]+?)\s*(?::\s*(?P<reason>.+?))?\s*-->\s*$")
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-B]|\x1b[=>]")
PROMPT = re.compile(r"^(?P<prompt>\[[^\]\n]*\] > )(?P<command>.*)$")
PASSCODE_PROMPT = re.compile(r"passcode(?: again)?: $")
TIMEOUT = 120  # seconds a block may take


@dataclass
class Block:
    path: Path
    line: int  # 1-based line of the fence
    info: str
    marker: str | None
    reason: str | None
    lines: list[str]

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks_of(path: Path) -> list[Block]:
    found: list[Block] = []
    for fence in fenced_blocks(path.read_text()):
        marker = MARKER.match(fence.before)
        found.append(Block(path, fence.line, fence.info, marker["what"] if marker else None, marker["reason"] if marker else None, fence.lines))
    return found


# MARK: Comparing


def matches(expected: list[str], actual: list[str]) -> tuple[bool, int]:
    """Whether `actual` is `expected` with its wildcards filled; else the expected line (0-based) that failed."""
    patterns = [None if line.strip() == "…" else line_pattern(line) for line in expected]
    best = [0]

    def match(e: int, a: int) -> bool:
        best[0] = max(best[0], e)
        if e == len(patterns):
            return a == len(actual)
        if patterns[e] is None:
            return any(match(e + 1, skip) for skip in range(a, len(actual) + 1))
        return a < len(actual) and patterns[e].fullmatch(actual[a]) is not None and match(e + 1, a + 1)

    return (True, -1) if match(0, 0) else (False, min(best[0], max(len(expected) - 1, 0)))


def line_pattern(line: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in line.rstrip().split("…")))


def normalized(text: str, sandbox: Path) -> list[str]:
    text = ANSI.sub("", text).replace("\r\n", "\n").replace("\r", "")
    text = text.replace(str(sandbox / "tmp") + "/", "/tmp/").replace(str(sandbox / "tmp"), "/tmp")
    text = text.replace(str(sandbox / "home"), "~")
    lines = [line.rstrip() for line in text.split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def difference(block: Block, expected: list[str], actual: list[str], failed: int) -> str:
    shown = "\n".join(f"    | {line}" for line in actual[max(0, failed - 3): failed + 6])
    return (
        f"{block.where}: the block does not match what the tool prints, from its line {block.line + 1 + failed}:\n"
        f"  expected: {expected[failed] if expected else '(nothing)'}\n  the tool printed, around there:\n{shown}"
    )


# MARK: The sandbox


class Sandbox:
    def __init__(self, binary: Path) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="doc-transcripts-"))
        for folder in ("tmp", "home", "work/.build/release", "bin"):
            (self.root / folder).mkdir(parents=True)
        (self.root / "work/.build/release/protected-store").symlink_to(binary)
        (self.root / "bin/protected-store").symlink_to(binary)
        self.environment = {
            **{k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")},
            "PATH": f"{self.root / 'bin'}:{os.environ['PATH']}",
            "HOME": str(self.root / "home"),
            "TMPDIR": str(self.root / "tmp"),
        }

    @property
    def work(self) -> Path:
        return self.root / "work"

    def mapped(self, command: str) -> str:
        return re.sub(r"(?<![\w.])/tmp(?=/|\b)", str(self.root / "tmp"), command)

    def close(self) -> None:
        subprocess.run(["pkill", "-f", str(self.root)], check=False)
        shutil.rmtree(self.root, ignore_errors=True)


# MARK: The kinds of block


def check_console(block: Block, binary: Path) -> str | None:
    commands: list[tuple[str, list[str]]] = []
    for line in block.lines:
        if line.startswith("$ "):
            commands.append((line[2:], []))
        elif commands:
            commands[-1][1].append(line)
        elif line.strip():
            return f"{block.where}: a console block starts with a `$ ` command line"
    sandbox = Sandbox(binary)
    try:
        for command, expected in commands:
            while expected and not expected[-1].strip():
                expected.pop()
            with open(sandbox.root / "output", "wb") as output:
                try:
                    subprocess.run(
                        ["bash", "-c", sandbox.mapped(command)], cwd=sandbox.work, env=sandbox.environment,
                        stdout=output, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=TIMEOUT)
                except subprocess.TimeoutExpired:
                    return f"{block.where}: `{command}` did not finish in {TIMEOUT} s"
            actual = normalized((sandbox.root / "output").read_text("utf-8", "replace"), sandbox.root)
            ok, failed = matches([line.rstrip() for line in expected], actual)
            if not ok:
                return f"$ {command}\n" + difference(block, expected, actual, failed)
    finally:
        sandbox.close()
    return None


def check_sh(block: Block, binary: Path) -> str | None:
    sandbox = Sandbox(binary)
    try:
        script = sandbox.mapped("\n".join(block.lines))
        # Output to a file, not a pipe: a process the block leaves in the background must not hold the check up.
        with open(sandbox.root / "output", "wb") as output:
            try:
                run = subprocess.run(
                    ["bash", "-c", script], cwd=sandbox.work, env=sandbox.environment, stdout=output,
                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=TIMEOUT)
                status = f"exits {run.returncode}" if run.returncode != 0 else None
            except subprocess.TimeoutExpired:
                status = f"did not finish in {TIMEOUT} s"
        if status:
            printed = normalized((sandbox.root / "output").read_text("utf-8", "replace"), sandbox.root)
            tail = "\n".join("    | " + l for l in printed[-12:])
            return f"{block.where}: the block {status}:\n{tail}"
    finally:
        sandbox.close()
    return None


def check_shell_session(block: Block, binary: Path) -> str | None:
    header = re.match(r"protected-store shell — state in (?P<dir>\S+?)\.? ", block.lines[0] if block.lines else "")
    if not header:
        return f"{block.where}: a shell-session block starts with the shell's greeting (`protected-store shell — state in DIR. …`)"
    commands = [m["command"] for line in block.lines if (m := PROMPT.match(line))]
    sandbox = Sandbox(binary)
    try:
        screen = drive_pty(
            [str(binary), "shell", "--state-dir", sandbox.mapped(header["dir"])], commands, sandbox)
        actual = normalized(screen, sandbox.root)
        ok, failed = matches([line.rstrip() for line in block.lines], actual)
        return None if ok else difference(block, block.lines, actual, failed)
    finally:
        sandbox.close()


def drive_pty(argv: list[str], commands: list[str], sandbox: Sandbox) -> str:
    """Runs `argv` under a pseudo-terminal: types the next command at each prompt and 1234 at a passcode prompt."""
    import pty

    import fcntl
    import struct
    import termios

    pid, fd = pty.fork()
    if pid == 0:
        os.chdir(sandbox.work)
        os.execve(argv[0], argv, sandbox.environment)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 100, 0, 0))  # a terminal of 100 columns
    screen = b""
    pending = list(commands)
    deadline = time.monotonic() + TIMEOUT
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                screen += chunk
                continue
            tail = ANSI.sub("", screen.decode("utf-8", "replace")).rsplit("\n", 1)[-1].replace("\r", "")
            if PASSCODE_PROMPT.search(tail):
                os.write(fd, b"1234\r")
                time.sleep(0.05)
            elif PROMPT.match(tail) and tail.endswith("> "):
                if not pending:
                    os.write(fd, b"\x04")
                    continue
                os.write(fd, pending.pop(0).encode() + b"\r")
                time.sleep(0.05)
    finally:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)
        os.close(fd)
    return screen.decode("utf-8", "replace")


def check_help(block: Block, binary: Path) -> str | None:
    sandbox = Sandbox(binary)
    try:
        run = subprocess.run(
            [str(binary), "shell", "--state-dir", str(sandbox.root / "tmp/help")], input=b"help\n",
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=sandbox.environment, timeout=TIMEOUT)
        actual = normalized(run.stdout.decode("utf-8", "replace"), sandbox.root)
        ok, failed = matches([line.rstrip() for line in block.lines], actual)
        return None if ok else difference(block, block.lines, actual, failed)
    finally:
        sandbox.close()


# MARK: Inline commands


INLINE = re.compile(r"(?<!`)`(?P<code>(?:protected-store|make) [^`]+)`(?!`)")


def check_inline(path: Path, binary: Path, helps: dict[str, str], targets: set[str]) -> list[str]:
    problems = []
    text = path.read_text()
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        for m in INLINE.finditer(line):
            words = m["code"].split()
            if words[0] == "make":
                for word in words[1:]:
                    if word.startswith("#") or "=" in word:
                        break
                    if re.fullmatch(r"[a-z][a-z-]*", word) and word not in targets:
                        problems.append(f"{path.relative_to(ROOT)}:{number}: `{m['code']}`: the Makefile has no target {word}")
                continue
            problem = check_invocation(words[1:], binary, helps)
            if problem:
                problems.append(f"{path.relative_to(ROOT)}:{number}: `{m['code']}`: {problem}")
    return problems


def check_invocation(words: list[str], binary: Path, helps: dict[str, str]) -> str | None:
    path: list[str] = []
    for word in words:
        if word in ("|", ">", "<", "&&", ";", "2>&1") or word.startswith(("|", ">", "<")):
            break
        if word.startswith("-"):
            option = word.split("=")[0]
            if option in ("-", "--help", "-h", "--version"):
                continue
            text = help_of(path, binary, helps)
            if text is None:
                return f"`protected-store {' '.join(path)}` is not a command"
            if not re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text):
                return f"`protected-store {' '.join(path)} --help` lists no option {option}"
            continue
        if word.isupper() or not re.fullmatch(r"[a-z][a-z-]*", word) or help_of([*path, word], binary, helps) is None:
            if not path:
                return f"protected-store has no command {word}" if re.fullmatch(r"[a-z][a-z-]*", word) else None
            continue
        path.append(word)
    return None


def help_of(path: list[str], binary: Path, helps: dict[str, str]) -> str | None:
    key = " ".join(path)
    if key not in helps:
        run = subprocess.run([str(binary), *path, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
        helps[key] = run.stdout.decode() if run.returncode == 0 else None
    return helps[key]


def make_targets() -> set[str]:
    return set(re.findall(r"^([a-z][a-z-]*):", (ROOT / "Makefile").read_text(), re.M))


# MARK: Main


CHECKS = {"console": check_console, "sh": check_sh, "shell-session": check_shell_session}


def check_block(block: Block, binary: Path) -> str | None:
    if block.marker == "not run":
        return None
    if block.marker == "as root" and block.info == "console":
        if os.geteuid() != 0:
            block.marker, block.reason = "not run", f"needs root ({block.reason}); run the check as root to run it"
            return None
        return check_console(block, binary)
    if block.marker == "help":
        return check_help(block, binary)
    if block.marker is not None:
        return f"{block.where}: unknown doc-transcripts marker '{block.marker}' (help, as root: REASON, not run: REASON)"
    if block.info in CHECKS:
        return CHECKS[block.info](block, binary)
    return (
        f"{block.where}: a ```{block.info} block the check cannot run: make it console, shell-session or sh, or mark it "
        "<!-- doc-transcripts: help --> or <!-- doc-transcripts: not run: REASON -->")


def self_test(binary: Path) -> int:
    """The check fails on a transcript that drifted by one character, and holds on the same one undrifted."""
    good = Block(ROOT / "README.md", 0, "console", None, None, ["$ protected-store --version", "0.…"])
    bad = Block(ROOT / "README.md", 0, "console", None, None, ["$ protected-store --version", "O.…"])
    wild = matches(["a", "…", "b … d"], ["a", "x", "y", "b c d"])[0] and not matches(["a", "b"], ["a"])[0]
    if check_console(good, binary) is not None or check_console(bad, binary) is None or not wild:
        print("doc-transcripts self-test: the check does not tell a drifted transcript from a right one", file=sys.stderr)
        return 1
    print("doc-transcripts self-test: a transcript drifted by one character fails the check")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", default=str(ROOT / ".build/debug/protected-store"))
    parser.add_argument("--self-test", action="store_true")
    parser.add_argument("--only", help="FILE:LINE of one block")
    arguments = parser.parse_args()
    binary = Path(arguments.binary).resolve()
    if not binary.exists():
        print(f"doc-transcripts: no {binary}: build the tool first (swift build)", file=sys.stderr)
        return 1
    if arguments.self_test:
        return self_test(binary)
    failures: list[str] = []
    ran = not_run = 0
    for document in DOCUMENTS:
        if not document.exists():
            continue
        for block in blocks_of(document):
            if block.info == "swift":
                continue  # scripts/doc-snippets.py
            if arguments.only and arguments.only != block.where:
                continue
            started = time.monotonic()
            problem = check_block(block, binary)
            if block.marker == "not run":
                not_run += 1
                print(f"not run  {block.where}: {block.reason}")
            elif problem:
                failures.append(problem)
                print(f"FAILED   {block.where}")
            else:
                ran += 1
                print(f"ok       {block.where} ({block.info or block.marker}, {time.monotonic() - started:.1f}s)")
    if not arguments.only:
        helps: dict[str, str] = {}
        targets = make_targets()
        for document in DOCUMENTS:
            if document.exists():
                failures += check_inline(document, binary, helps, targets)
    for failure in failures:
        print("\n" + failure, file=sys.stderr)
    print(f"\ndoc-transcripts: {ran} blocks ran and held, {not_run} not run (reasons above), {len(failures)} problems")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
