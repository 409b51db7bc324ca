#!/usr/bin/env bash
# Checks the user units (systemd/user) under a real systemd 252 user manager: a start, a call and a
# reload of a person's own mentoryd log no namespace warning ("PrivateNetwork=yes is configured, but
# network namespace setup failed, ignoring", PrivateIPC= too; see systemd/user/mentoryd.service), the
# sandbox is in effect (the daemon's UTS, mount and user namespaces are not its manager's), and `systemd-analyze --user security`
# gives the unit's exposure; then that scripts/uninstall.sh --purge leaves no link behind in a
# person's ~/.config/systemd/user (a plugin they enabled). It boots systemd as PID 1 of private PID, mount and UTS
# namespaces over a throwaway overlay of / with pivot_root, as scripts/systemd-test.sh does (see
# ../shared/docs/systemd-sandbox.md); the host's files, /tmp and /run are never touched.
#
# Usage (as root):  scripts/systemd-user-units-check.sh [--bin-dir DIR] [--units DIR]
#   --bin-dir DIR  take mentoryd and mentoryctl from DIR (default: swift build's debug products)
#   --units DIR    the user units to check (default: systemd/user)
#
# Prints one PASS/FAIL line per check and exits non-zero if any failed. Every wait is bounded; a
# trap kills the namespace's PID 1 (and with it everything in it) on exit.
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
BIN_DIR=${MENTORYD_BIN_DIR:-}
UNITS=$REPO/systemd/user
while [ $# -gt 0 ]; do
  case "$1" in
    --bin-dir) BIN_DIR=$2; shift 2 ;;
    --units) UNITS=$2; shift 2 ;;
    -h|--help) sed -n "2,15p" "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 64 ;;
  esac
done
if [ "$(id -u)" -ne 0 ]; then
  echo "systemd-user-units-check.sh needs root: it boots systemd in private namespaces" >&2
  exit 77
fi
for tool in unshare nsenter pivot_root setpriv /lib/systemd/systemd; do
  command -v "$tool" >/dev/null || { echo "missing: $tool" >&2; exit 69; }
done
if [ -z "$BIN_DIR" ]; then
  swift build --product mentoryd >/dev/null && swift build --product mentoryctl >/dev/null \
    || { echo "FAIL build"; exit 1; }
  BIN_DIR=$(swift build --show-bin-path)
fi

WORK=$(mktemp -d /tmp/mentoryd-user-units.XXXXXX)
export SDBOX=/run/mentoryd-user-units-sdbox.$$
FAILURES=0
# shellcheck source=scripts/lib/systemd-sandbox.sh
. "$REPO/scripts/lib/systemd-sandbox.sh"
cleanup() {
  sandbox_stop
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; FAILURES=$((FAILURES + 1)); }
in_ns() { nsenter -t "$SD" -p -m -u -r "$@"; }

sandbox_boot mentoryd-user-units

for binary in mentoryd mentoryctl; do
  in_ns sh -c "cat > /usr/local/bin/$binary && chmod 0755 /usr/local/bin/$binary" < "$BIN_DIR/$binary"
done
in_ns mkdir -p /etc/systemd/user
for unit in mentoryd.service mentoryd.socket mentoryd-plugin@.service; do
  in_ns sh -c "cat > /etc/systemd/user/$unit" < "$UNITS/$unit"
done
in_ns useradd -m alice
ALICE=$(in_ns id -u alice)
as_alice() {
  in_ns setpriv --reuid="$ALICE" --regid="$ALICE" --init-groups env XDG_RUNTIME_DIR="/run/user/$ALICE" \
    DBUS_SESSION_BUS_ADDRESS="unix:path=/run/user/$ALICE/bus" HOME=/home/alice "$@"
}
in_ns timeout 60 systemctl start "user@$ALICE.service"
as_alice timeout 30 systemctl --user daemon-reload
as_alice timeout 30 systemctl --user start mentoryd.socket
SOCK=/run/user/$ALICE/mentoryd/mentoryd.sock
ping_alice() { as_alice timeout 10 mentoryctl --socket "$SOCK" ping; }
wait_for 60 ping_alice; PING=$?
namespace_warnings() { in_ns journalctl --no-pager -o cat "_UID=$ALICE" | grep "is configured, but .* failed, ignoring"; }
START_WARNINGS=$(namespace_warnings | wc -l)
as_alice timeout 30 systemctl --user reload mentoryd.service; RELOAD=$?
ping_alice >/dev/null 2>&1; PING_AFTER=$?
STATE=$(in_ns stat -c '%a %U' /home/alice/.local/state/mentoryd 2>&1)
MAIN=$(as_alice systemctl --user show -p MainPID --value mentoryd.service)
MANAGER=$(in_ns systemctl show -p MainPID --value "user@$ALICE.service")
NAMESPACES=""
for ns in uts mnt user; do
  same=$([ "$(in_ns readlink "/proc/$MAIN/ns/$ns")" = "$(in_ns readlink "/proc/$MANAGER/ns/$ns")" ] && echo shared || echo own)
  NAMESPACES+="$ns=$same "
done
RELOAD_WARNINGS=$(( $(namespace_warnings | wc -l) - START_WARNINGS ))
SECURITY=$(as_alice systemd-analyze --user security mentoryd.service --no-pager 2>&1 | tail -1)
if [ $PING -eq 0 ] && [ $RELOAD -eq 0 ] && [ $PING_AFTER -eq 0 ] && [ "$STATE" = "700 alice" ]; then
  pass "start, call, reload: alice's mentoryd answers $SOCK before and after systemctl --user reload; ~/.local/state/mentoryd: $STATE"
else
  fail "start, call, reload: ping $PING, reload $RELOAD, ping after $PING_AFTER, state directory '$STATE'"
  as_alice systemctl --user status mentoryd.service --no-pager -l 2>&1 | tail -20
fi
if [ "$START_WARNINGS" -eq 0 ] && [ "$RELOAD_WARNINGS" -eq 0 ]; then
  pass "no namespace warnings from alice's manager (systemd $(in_ns systemctl --version | head -1 | awk '{print $2}')) for a start, a call and a reload"
else
  fail "namespace warnings from alice's manager: $START_WARNINGS for a start and a call, $RELOAD_WARNINGS for a reload:"
  namespace_warnings | sort | uniq -c
fi
if [[ "$NAMESPACES" == "uts=own mnt=own user=own " ]]; then
  pass "the sandbox is in effect: mentoryd (pid $MAIN) has namespaces of its own: $NAMESPACES"
else
  fail "namespaces of mentoryd (pid $MAIN) against its manager's: $NAMESPACES"
fi
echo "   systemd-analyze --user security mentoryd.service: $SECURITY"

# scripts/uninstall.sh --purge removes the link alice made by enabling a plugin under her manager.
as_alice timeout 30 systemctl --user enable mentoryd-plugin@advisor.service >/dev/null 2>&1
WANTS=/home/alice/.config/systemd/user/mentoryd.service.wants
LINKED=$(in_ns readlink "$WANTS/mentoryd-plugin@advisor.service")
in_ns mkdir -p /run/mentoryd-src/scripts
in_ns sh -c 'cat > /run/mentoryd-src/scripts/uninstall.sh && chmod 0755 /run/mentoryd-src/scripts/uninstall.sh' \
  < "$REPO/scripts/uninstall.sh"
in_ns timeout 120 /run/mentoryd-src/scripts/uninstall.sh --purge > "$WORK/uninstall.log" 2>&1; UNINSTALL=$?
LEFT=$(in_ns find /home/alice/.config/systemd -name 'mentoryd*' 2>&1)
if [[ "$LINKED" == */systemd/user/mentoryd-plugin@.service ]] && [ $UNINSTALL -eq 0 ] && [ -z "$LEFT" ]; then
  pass "uninstall.sh --purge removed alice's link $WANTS/mentoryd-plugin@advisor.service -> $LINKED, and the folder"
else
  fail "uninstall.sh --purge (exit $UNINSTALL): the link was '$LINKED'; left under ~alice/.config/systemd: $LEFT"
  cat "$WORK/uninstall.log"
fi
[ $FAILURES -eq 0 ] && echo "all checks passed" || echo "$FAILURES check(s) failed"
[ $FAILURES -eq 0 ]
