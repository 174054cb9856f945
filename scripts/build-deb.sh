#!/usr/bin/env bash
# Builds the .deb a desktop user installs without a Swift toolchain (README, "Installing the .deb").
#
# The tool is a release build with the Swift runtime linked statically (`--static-swift-stdlib`); the package holds
# it in /usr/bin, the user unit in /usr/lib/systemd/user/ (ExecStart pointed at /usr/bin), a man page generated
# from the tool's help by swift-argument-parser's generate-manual, and the bash, zsh and fish completions the tool
# prints, in Debian's directories. Its Depends are what dpkg-shlibdeps finds the binary linked against (SQLCipher,
# libsodium, libsystemd, tpm2-tss, libedit, the C and C++ runtimes), and tpm2-tss's device TCTI, loaded at run time.
#
# Usage: scripts/build-deb.sh [OUTPUT-DIRECTORY]   (default .build/deb); prints the .deb's path last.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${1:-.build/deb}
NAME=protected-store

# The man page first: swift-argument-parser's generate-manual plugin builds every product of the package and reads
# the tool's help (`--experimental-dump-help`). In debug, what `make test` built (the help is the same), so that
# it neither rebuilds in release nor relinks the release binary with the Swift runtime linked dynamically.
swift package generate-manual --configuration debug --authors "the ProtectedStore authors" >/dev/null
MAN_PAGE=.build/plugins/GenerateManual/outputs/$NAME/$NAME.1
[[ -s $MAN_PAGE ]] || { echo "error: generate-manual wrote no $MAN_PAGE" >&2; exit 1; }

swift build -c release --static-swift-stdlib --product "$NAME"
BIN=.build/release/$NAME
if ldd "$BIN" | grep -q 'libswift\|libFoundation\|libdispatch'; then
    echo "error: $BIN links a Swift runtime library dynamically:" >&2
    ldd "$BIN" >&2
    exit 1
fi

VERSION=$("$BIN" --version)
ARCH=$(dpkg --print-architecture)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/$NAME-deb.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
ROOT=$WORK/root

install -Dm755 "$BIN" "$ROOT/usr/bin/$NAME"
strip --strip-unneeded "$ROOT/usr/bin/$NAME"
mkdir -p "$ROOT/usr/lib/systemd/user"
sed 's|^ExecStart=%h/.local/bin/|ExecStart=/usr/bin/|' Support/systemd/protected-store-device.service \
    >"$ROOT/usr/lib/systemd/user/protected-store-device.service"
grep -q '^ExecStart=/usr/bin/protected-store ' "$ROOT/usr/lib/systemd/user/protected-store-device.service" || {
    echo "error: the unit's ExecStart no longer starts %h/.local/bin/protected-store: update this script" >&2
    exit 1
}
chmod 644 "$ROOT/usr/lib/systemd/user/protected-store-device.service"

mkdir -p "$ROOT/usr/share/man/man1"
gzip -9n -c "$MAN_PAGE" >"$ROOT/usr/share/man/man1/$NAME.1.gz"

install -d "$ROOT/usr/share/bash-completion/completions" "$ROOT/usr/share/zsh/vendor-completions" \
    "$ROOT/usr/share/fish/vendor_completions.d"
"$BIN" --generate-completion-script bash >"$ROOT/usr/share/bash-completion/completions/$NAME"
"$BIN" --generate-completion-script zsh >"$ROOT/usr/share/zsh/vendor-completions/_$NAME"
"$BIN" --generate-completion-script fish >"$ROOT/usr/share/fish/vendor_completions.d/$NAME.fish"

install -Dm644 LICENSE "$ROOT/usr/share/doc/$NAME/copyright"

# Depends: the packages of the shared libraries the binary needs (dpkg-shlibdeps reads debian/control).
mkdir -p "$WORK/debian"
printf 'Source: %s\n\nPackage: %s\nArchitecture: any\n' "$NAME" "$NAME" >"$WORK/debian/control"
DEPENDS=$(cd "$WORK" && dpkg-shlibdeps -O "root/usr/bin/$NAME" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
[[ -n $DEPENDS ]] || { echo "error: dpkg-shlibdeps found no dependencies of $BIN" >&2; exit 1; }
# tpm2-tss loads its TCTI for /dev/tpmrm0 at run time (dlopen): no link shows it.
DEPENDS="$DEPENDS, libtss2-tcti-device0"

mkdir -p "$ROOT/DEBIAN"
cat >"$ROOT/DEBIAN/control" <<EOF
Package: $NAME
Version: $VERSION
Architecture: $ARCH
Maintainer: ProtectedStore maintainers <maintainers@localhost>
Installed-Size: $(du -sk --exclude=DEBIAN "$ROOT" | cut -f1)
Depends: $DEPENDS
Section: utils
Priority: optional
Description: encrypted app data that follows the desktop's screen lock
 protected-store runs the ProtectedStore device agent as a systemd user
 service (protected-store-device.service), locked by the user's session: the
 session's lock and suspend wipe the class A keys after a grace period, and
 only the passcode brings them back. The device key is sealed by the
 machine's TPM when there is one. The tool also opens a shell on a device,
 exports and backs up stores, and runs the simulator.
EOF

mkdir -p "$OUT"
DEB=$OUT/${NAME}_${VERSION}_${ARCH}.deb
dpkg-deb --root-owner-group --build "$ROOT" "$DEB" >/dev/null
echo "$DEB"
