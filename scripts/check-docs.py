#!/usr/bin/env python3
"""Checks the documentation `make docs` built as a browser opens it, through the server `make docs-serve` runs.

It serves the combined archive with scripts/serve-docs.py's handler on a free loopback port and asks it:
- `/` redirects to ProtectedStore's module page, and that page answers;
- the /index/index.json served there (DocC's web app reads it for the sidebar of every page) has a tree of its
  own for each module built, and ProtectedStore's lists ProtectedStore's symbols (`DataController`,
  `StoreCoordinator`), not another module's;
- every link between pages, in every page of the archive, names a page the archive has (a link into another
  module is a link, not text); and the links that cross modules are there: ProtectedStore's page links into
  EncryptedSQLite and StoreErrors, ProtectedStoreTesting's into ProtectedStore;
- the main types' members are grouped by hand (their extension files' Topics), not listed in DocC's automatic
  groups (one alphabetical list per kind of symbol);
- no line of a code listing is wider than DocC's code box shows without scrolling (CODE_WIDTH characters).

Usage: scripts/check-docs.py ARCHIVE   (make docs-check, after make docs)
Exit status 0 when all hold; 1 with one line per failure otherwise.
"""

from __future__ import annotations

import http.client
import importlib.util
import json
import sys
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent
# The modules `make docs` builds (the Makefile's DOC_TARGETS), each with a tree of its own in the index.
MODULES = ["StoreErrors", "SecureKeys", "EncryptedSQLite", "ProtectedData", "ProtectedStore",
           "ProtectedStoreTesting", "ProtectedStoreHarness", "TPMKeys", "LinuxDevice"]
# Symbols the index must list under a module's own tree.
OWN_SYMBOLS = {
    "ProtectedStore": ["/documentation/protectedstore/datacontroller", "/documentation/protectedstore/storecoordinator"],
    "EncryptedSQLite": ["/documentation/encryptedsqlite/database"],
}
# Links a page must have into another module: page → pages of other modules it links to.
CROSS_MODULE_LINKS = {
    "/documentation/protectedstore": ["/documentation/encryptedsqlite/database", "/documentation/storeerrors/storeerror",
                                      "/documentation/securekeys/keyfileformats"],
    "/documentation/protectedstoretesting": ["/documentation/protectedstore/datacontroller"],
}
# The widest code line DocC's code box shows whole, in characters (its content column at its widest, in Chromium:
# 87 show, 88 are cut).
CODE_WIDTH = 87
# Pages whose members are grouped by hand: none of them may fall into one of DocC's automatic groups.
GROUPED_BY_HAND = ["/documentation/protectedstore/datacontroller", "/documentation/protectedstore/storecoordinator"]
# DocC's automatic groups of members. "Default Implementations" (a protocol's, such as `Actor`'s) stays automatic.
AUTOMATIC_GROUPS = {"Classes", "Structures", "Enumerations", "Protocols", "Type Aliases", "Initializers",
                    "Instance Properties", "Instance Methods", "Type Properties", "Type Methods", "Operators",
                    "Subscripts", "Enumeration Cases"}


def load_serve_docs():
    """scripts/serve-docs.py as a module (its name has a dash)."""
    spec = importlib.util.spec_from_file_location("serve_docs", SCRIPTS / "serve-docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def nodes(tree: list[dict]):
    """Every node of an index tree, depth first."""
    for node in tree:
        yield node
        yield from nodes(node.get("children", []))


def module_tree(index: dict, module: str) -> dict | None:
    """The index node of `module`'s page, /documentation/MODULE."""
    path = f"/documentation/{module.lower()}"
    return next((node for node in nodes(index["interfaceLanguages"]["swift"]) if node.get("path") == path), None)


def page_file(archive: Path, url: str) -> Path:
    """The render JSON of the page at `url` (/documentation/…, without its fragment)."""
    return archive / "data" / (url.split("#", 1)[0].strip("/").lower() + ".json")


def code_listings(node):
    """Every code listing of a page's render JSON."""
    if isinstance(node, dict):
        if node.get("type") == "codeListing":
            yield node
        for value in node.values():
            yield from code_listings(value)
    elif isinstance(node, list):
        for value in node:
            yield from code_listings(value)


def check(archive: Path, get) -> list[str]:
    """The failures; `get(path)` answers (status, headers, body) through the server."""
    failures: list[str] = []
    home = load_serve_docs().HOME

    status, headers, _ = get("/")
    if status not in (301, 302, 307, 308) or headers.get("Location") != home:
        failures.append(f"/ answers {status} {headers.get('Location', '')!r}, not a redirect to {home}")
    status, _, body = get(home)
    if status != 200 or b"<html" not in body.lower():
        failures.append(f"{home} answers {status}, not the web app's page")

    status, _, body = get("/index/index.json")
    if status != 200:
        return failures + [f"/index/index.json answers {status}"]
    index = json.loads(body)
    for module in MODULES:
        tree = module_tree(index, module)
        if tree is None:
            failures.append(f"the index served has no tree for {module}: its sidebar would show another module's")
            continue
        paths = {node.get("path") for node in nodes(tree.get("children", []))}
        strangers = sorted(p for p in paths if p and not p.startswith(f"/documentation/{module.lower()}/"))
        if strangers:
            failures.append(f"{module}'s sidebar tree lists pages of other modules: {strangers[:3]}")
        for symbol in OWN_SYMBOLS.get(module, []):
            if symbol not in paths:
                failures.append(f"the index served for {module}'s pages does not list {symbol}")

    pages = sorted((archive / "data" / "documentation").rglob("*.json"))
    if not pages:
        failures.append(f"no pages in {archive}/data/documentation")
    broken: dict[str, list[str]] = {}
    links: dict[str, set[str]] = {}
    wide: dict[str, str] = {}
    for page in pages:
        document = json.loads(page.read_text())
        url = "/" + str(page.relative_to(archive / "data").with_suffix(""))
        for listing in code_listings([document.get("primaryContentSections", []), document.get("sections", [])]):
            for line in listing.get("code", []):
                if len(line) > CODE_WIDTH:
                    wide.setdefault(line.strip(), url)
        for reference in document.get("references", {}).values():
            target = reference.get("url", "")
            if reference.get("type") != "topic" or not target.startswith("/documentation/"):
                continue
            links.setdefault(url, set()).add(target.split("#", 1)[0].lower())
            if not page_file(archive, target).is_file():
                broken.setdefault(target, []).append(url)
    for target, sources in sorted(broken.items()):
        failures.append(f"{target} is linked from {len(sources)} page(s) ({sources[0]}, …) but the archive has no such page")
    for line, page in sorted(wide.items()):
        failures.append(f"{page}: a code line wider than {CODE_WIDTH} characters is cut off in the code box: {line[:60]}…")
    for page, targets in CROSS_MODULE_LINKS.items():
        for target in targets:
            if target not in links.get(page, set()):
                failures.append(f"{page} has no link to {target}")
    for page in GROUPED_BY_HAND:
        if not page_file(archive, page).is_file():
            failures.append(f"the archive has no page {page}")
            continue
        document = json.loads(page_file(archive, page).read_text())
        automatic = [section["title"] for section in document.get("topicSections", [])
                     if section.get("title") in AUTOMATIC_GROUPS]
        if automatic:
            failures.append(f"{page} lists members in DocC's automatic groups {automatic}: group them in its extension file")
    # The pages a browser loads answer through the server too, not only on disk.
    for page in CROSS_MODULE_LINKS:
        status, _, _ = get("/data" + page + ".json")
        if status != 200:
            failures.append(f"/data{page}.json answers {status}")
    print(f"{len(pages)} pages, {sum(len(t) for t in links.values())} links between pages checked")
    return failures


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: scripts/check-docs.py ARCHIVE")
    serve_docs = load_serve_docs()
    archive = serve_docs.archive_at(sys.argv[1])
    server = ThreadingHTTPServer(("127.0.0.1", 0), serve_docs.handler_for(archive))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    def get(path: str):
        connection = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=30)
        try:
            connection.request("GET", path)
            response = connection.getresponse()
            return response.status, dict(response.getheaders()), response.read()
        finally:
            connection.close()

    try:
        failures = check(archive, get)
    finally:
        server.shutdown()
        server.server_close()
    for failure in failures:
        print(f"docs-check: {failure}", file=sys.stderr)
    if failures:
        sys.exit(1)
    print("docs-check: / redirects to ProtectedStore, each module's sidebar is its own, every link resolves, "
          "the main types' members are grouped, every code line fits its box")


if __name__ == "__main__":
    main()
