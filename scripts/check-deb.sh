#!/usr/bin/env bash
# CI's check of the .deb (`make deb-check`): builds it (scripts/build-deb.sh), installs it with `dpkg -i`, and runs
# the installed tool — `--version`, and scripts/try-on-desktop.sh (a set-up, a lock, an unlock with the passcode)
# against the mock logind, through its test, DesktopScriptTests, given the installed tool.
#
# dpkg installs into the real /usr: run it as root (or with sudo) on a machine where that is fine, as CI's is.
# The package is removed at the end unless it was installed before.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=
[[ $(id -u) -eq 0 ]] || SUDO=sudo
NAME=protected-store
TOOL=/usr/bin/$NAME

DEB=$(scripts/build-deb.sh | tail -n 1)
echo "built $DEB ($(du -h "$DEB" | cut -f1)): $(dpkg-deb --field "$DEB" Depends)"

INSTALLED_BEFORE=no
dpkg -s "$NAME" >/dev/null 2>&1 && INSTALLED_BEFORE=yes
remove() { [[ $INSTALLED_BEFORE == yes ]] || $SUDO dpkg -r "$NAME" >/dev/null; }
trap remove EXIT
$SUDO dpkg -i "$DEB"

fail() { echo "error: $*" >&2; exit 1; }
[[ $("$TOOL" --version) == "$(dpkg-deb --field "$DEB" Version)" ]] || fail "$TOOL --version is not the package's version"
echo "$TOOL --version: $("$TOOL" --version)"
if ldd "$TOOL" | grep -q 'libswift\|libFoundation\|libdispatch'; then fail "$TOOL needs the Swift runtime: $(ldd "$TOOL")"; fi
for file in /usr/lib/systemd/user/protected-store-device.service /usr/share/man/man1/$NAME.1.gz \
    /usr/share/bash-completion/completions/$NAME /usr/share/zsh/vendor-completions/_$NAME \
    /usr/share/fish/vendor_completions.d/$NAME.fish; do
    [[ -s $file ]] || fail "the package installed no $file"
done
grep -q "^ExecStart=$TOOL device serve --session" /usr/lib/systemd/user/protected-store-device.service \
    || fail "the installed unit does not start $TOOL"
zcat /usr/share/man/man1/$NAME.1.gz | grep -q '^\.Sh DESCRIPTION' || fail "the man page has no DESCRIPTION"
bash -n /usr/share/bash-completion/completions/$NAME || fail "the bash completion does not parse"

# The scripted set-up, lock and unlock against the mock logind: the test that runs scripts/try-on-desktop.sh,
# given the installed tool. The test build is the one `make test` made (built here if missing).
swift build --build-tests >/dev/null
RESULT=$(PROTECTED_STORE_TOOL=$TOOL swift test --skip-build --filter DesktopScriptTests 2>&1) || {
    tail -n 30 <<<"$RESULT" >&2
    fail "DesktopScriptTests failed with $TOOL"
}
tail -n 3 <<<"$RESULT"
# A suite skipped (no dbus-daemon or python3-dbusmock) checked nothing: a failure here.
if grep -q 'skipped' <<<"$RESULT" || ! grep -q 'Test run with 1 test .*passed' <<<"$RESULT"; then
    fail "DesktopScriptTests did not run with $TOOL"
fi
