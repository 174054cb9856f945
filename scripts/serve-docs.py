#!/usr/bin/env python3
"""Serves the combined DocC archive `make docs` builds from one local web server, as a browser opens it.

The archive holds every module: one /index/index.json with each module's own sidebar tree, and the pages of
/documentation/MODULE/… for all of them, so a link from one module's page into another's is a link. `/`, where
DocC's web app has no page, redirects to ProtectedStore's module page, the app's entry point; the package's page
that lists the modules is /documentation/.

Usage: scripts/serve-docs.py PORT ARCHIVE   (make docs-serve; ARCHIVE is .build/docs/ProtectedStore.doccarchive)
"""

from __future__ import annotations

import http.server
import sys
from pathlib import Path

# Where `/` sends a reader: the module an app imports.
HOME = "/documentation/protectedstore/"
# The paths that redirect to HOME: the root, where DocC's web app has no page ("can't be found").
REDIRECTED = {"", "/"}


def handler_for(archive: Path) -> type[http.server.SimpleHTTPRequestHandler]:
    """A request handler that serves `archive`'s files, redirects REDIRECTED to HOME, and answers every other
    page path of the web app (/documentation/…, /tutorials/…) with the app's index.html when the archive has no
    file of its own there, as a static host configured for DocC does."""

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *arguments, **keywords) -> None:
            super().__init__(*arguments, directory=str(archive), **keywords)

        def do_GET(self) -> None:
            if self.redirect():
                return
            super().do_GET()

        def do_HEAD(self) -> None:
            if self.redirect():
                return
            super().do_HEAD()

        def redirect(self) -> bool:
            path = self.path.split("?", 1)[0].split("#", 1)[0]
            if path not in REDIRECTED:
                return False
            self.send_response(302)
            self.send_header("Location", HOME)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return True

        def translate_path(self, path: str) -> str:
            translated = Path(super().translate_path(path))
            relative = path.split("?", 1)[0].split("#", 1)[0]
            if not translated.exists() and relative.startswith(("/documentation/", "/tutorials/")):
                return str(archive / "index.html")
            return str(translated)

        def log_message(self, *arguments) -> None:
            pass

    return Handler


def archive_at(argument: str) -> Path:
    """The archive named on the command line; exits with what to do when it is not one."""
    archive = Path(argument).resolve()
    if not (archive / "index" / "index.json").is_file():
        sys.exit(f"no DocC archive at {archive}: run make docs first")
    return archive


def main() -> None:
    port, archive = int(sys.argv[1]), archive_at(sys.argv[2])
    with http.server.ThreadingHTTPServer(("127.0.0.1", port), handler_for(archive)) as server:
        print(f"serving {archive.name} at http://localhost:{port}{HOME}\nCtrl-C stops it", flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
