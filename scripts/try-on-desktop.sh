#!/usr/bin/env bash
# Try ProtectedStore's session device on your own Linux desktop (README, "On a real Linux desktop").
#
# It builds the tool if needed, says what the lock source follows and where the device key would go, then runs
# a device agent locked by your session (`device serve --session`) on a throwaway state directory, an "app"
# with a class-A store, and asks you to lock your screen: after the grace period the store closes and its keys
# are wiped; unlocking the screen changes nothing; the passcode brings the store back. Everything it makes is
# removed at the end (also on Ctrl-C). Nothing of yours is touched.
#
# Usage: scripts/try-on-desktop.sh [--bus-address unix:path=…]   (the option: a test's private bus)
set -euo pipefail
cd "$(dirname "$0")/.."

BUS=()
if [[ ${1:-} == --bus-address ]]; then BUS=(--bus-address "$2" --no-session-bus); fi
B=${PROTECTED_STORE_TOOL:-.build/release/protected-store}   # PROTECTED_STORE_TOOL: another build of the tool
[[ -x $B ]] || { echo "building the tool (swift build -c release)…"; swift build -c release --product protected-store >/dev/null; }

say() { printf '\n== %s\n' "$*"; }
DIR=$(mktemp -d "${TMPDIR:-/tmp}/protected-store-try.XXXXXX")
chmod 700 "$DIR"
AGENT_PID=
APP_PID=
cleanup() {
    exec 7>&- 2>/dev/null || true
    [[ -n $APP_PID ]] && kill "$APP_PID" 2>/dev/null || true
    [[ -n $AGENT_PID ]] && kill "$AGENT_PID" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$DIR"
}
trap cleanup EXIT

say "What the lock source follows, and where the device key would go"
$B session status "${BUS[@]}" || { echo "No session lock source here: see the reason above."; exit 1; }

say "A device agent locked by your session (state in $DIR)"
$B device serve --session --fast-kdf --state-dir "$DIR/state" "${BUS[@]}" >"$DIR/agent.log" 2>&1 &
AGENT_PID=$!
for _ in $(seq 100); do grep -q serves "$DIR/agent.log" && break; sleep 0.1; done
grep serves "$DIR/agent.log" || { cat "$DIR/agent.log"; exit 1; }

client() { printf '%s\n' "$@" | $B shell --state-dir "$DIR/state" --keep-going; }
app_status() {
    : >"$DIR/app.out"
    printf 'status\n' >&7
    for _ in $(seq 50); do grep -q '^presented error' "$DIR/app.out" && break; sleep 0.1; done
    grep -E '^(device|protected data|store|coordinator) ' "$DIR/app.out"
}

say "The app: a class-A store (complete protection), one value written"
mkfifo "$DIR/app.in"
$B shell --state-dir "$DIR/state" --keep-going <"$DIR/app.in" >>"$DIR/app.out" 2>&1 &   # appended: app_status empties it between looks
APP_PID=$!
exec 7>"$DIR/app.in"
printf '%s\n' 'device setup --passcode try-1234 --grace 5s' 'app launch --protection complete' 'put note "written before the lock"' >&7
sleep 1
app_status

say "Now lock your screen (Super+L, or: loginctl lock-session). Wait 10 seconds, unlock it, and come back here."
read -r -p "Press Enter once you are back… " _
app_status
echo "→ The device stays locked: your session's unlock is never enough; the class-A keys were wiped 5 s after the lock."

say "The passcode brings the store back"
client 'device unlock --passcode try-1234' >/dev/null
sleep 1
app_status
: >"$DIR/app.out"; printf 'get note\n' >&7; sleep 1; cat "$DIR/app.out"
say "Done: the agent stops and $DIR is removed."
