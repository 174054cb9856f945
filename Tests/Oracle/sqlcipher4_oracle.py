"""Opens stores written by ProtectedStore with SQLCipher 4 (PyPI's sqlcipher3-binary), a second implementation.

Reads one JSON object on stdin -- {"key": "<64 hex digits>", "pragmas": ["PRAGMA ...", ...],
"databases": ["/path/a.sqlite", ...]} -- so the (test-only) key never appears in a process list. For each
database: keys it with the raw key, runs the given pragmas (the format's settings as keys/README.md documents
them, nothing else), reads every table and runs PRAGMA cipher_integrity_check. Writes one JSON object on stdout:
{"cipher_version": "...", "databases": {path: {"tables": {name: [[cell, ...], ...]}, "integrity": [...]}}} with
each cell as {"null": true}, {"integer": n}, {"real": x}, {"text": s} or {"blob": "<hex>"}. Any failure is a
non-zero exit with the reason on stderr.
"""
import json
import sys

import sqlcipher3


def cell(value):
    if value is None:
        return {"null": True}
    if isinstance(value, int):
        return {"integer": value}
    if isinstance(value, float):
        return {"real": value}
    if isinstance(value, str):
        return {"text": value}
    return {"blob": bytes(value).hex()}


def read(path, key, pragmas):
    connection = sqlcipher3.connect(path, isolation_level=None)
    try:
        connection.execute("PRAGMA key = \"x'%s'\"" % key)
        for pragma in pragmas:
            connection.execute(pragma).fetchall()
        names = [row[0] for row in connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        tables = {}
        for name in names:
            quoted = '"' + name.replace('"', '""') + '"'
            tables[name] = [[cell(value) for value in row] for row in connection.execute("SELECT * FROM " + quoted)]
        integrity = [row[0] for row in connection.execute("PRAGMA cipher_integrity_check")]
        return {"tables": tables, "integrity": integrity}
    finally:
        connection.close()


def main():
    request = json.load(sys.stdin)
    key = request["key"]
    if len(key) != 64 or any(c not in "0123456789abcdefABCDEF" for c in key):
        sys.exit("the key must be 64 hex digits")
    probe = sqlcipher3.connect(":memory:")
    version = probe.execute("PRAGMA cipher_version").fetchone()[0]
    probe.close()
    result = {"cipher_version": version, "databases": {}}
    for path in request["databases"]:
        try:
            result["databases"][path] = read(path, key, request["pragmas"])
        except Exception as error:  # say which store, and what SQLCipher 4 said
            sys.exit("SQLCipher %s could not read %s: %s" % (version, path, error))
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
