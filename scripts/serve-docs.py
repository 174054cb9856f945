#!/usr/bin/env python3
"""Serves every DocC archive of a folder from one local web server: /documentation/MODULE/ and
/tutorials/MODULE/ of each archive, and the shared files (css, js, data, images) from the archive that has them.

Usage: scripts/serve-docs.py PORT OUTPUTS-FOLDER   (make docs-serve)
"""

import http.server
import sys
from pathlib import Path


def main() -> None:
    port, outputs = int(sys.argv[1]), Path(sys.argv[2]).resolve()
    archives = sorted(outputs.glob("*.doccarchive"))
    if not archives:
        sys.exit(f"no .doccarchive in {outputs}: run make docs first")

    class Handler(http.server.SimpleHTTPRequestHandler):
        def translate_path(self, path: str) -> str:
            relative = path.split("?", 1)[0].split("#", 1)[0].lstrip("/")
            for archive in archives:
                candidate = archive / relative
                if candidate.exists():
                    return str(candidate)
            return str(archives[0] / relative)

        def log_message(self, *arguments) -> None:
            pass

    modules = ", ".join(f"http://localhost:{port}/documentation/{a.stem.lower()}/" for a in archives)
    print(f"serving {len(archives)} archives: {modules}\nCtrl-C stops it", flush=True)
    with http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler) as server:
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
