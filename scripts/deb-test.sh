#!/usr/bin/env bash
# The Debian packages' lifecycle under a real systemd 252: install, upgrade, remove and purge, as an
# operator runs them with apt. systemd is booted as PID 1 of private PID, mount and UTS namespaces over a
# throwaway overlay of / (writes land in a tmpfs; the host's files, /tmp and /run are never touched) and with
# no network (a network namespace of its own), as in
# scripts/systemd-test.sh and ../shared/docs/systemd-sandbox.md.
#
#   install   apt install ./mentoryd_*.deb ./mentory-advisor_*.deb ./python3-mentory_*.deb (version N), with
#             nothing downloaded: the declared dependencies must already be on the machine, no Swift
#             toolchain or build tree is used. The system instance answers mentoryctl (socket activation)
#             and runs the advisor; a new user's own instance starts with their user manager, the advisor
#             registers with it, and Debian's python3 imports mentory and calls it.
#   upgrade   the same source packaged as N+1: the running system and user services and plugins restart
#             onto the new binaries (new processes, whose executables are the installed files), every
#             diary entry is intact and the edited configuration is kept.
#   remove    apt remove: nothing of the packages runs, the data, the configuration and the mentory
#             account stay.
#   purge     apt purge: /var/lib/mentoryd, /etc/mentoryd and the mentory account are gone; the user's
#             home directory (their own diary) is untouched.
#
# Usage (as root): scripts/deb-test.sh --bin-dir DIR [--debs DIR]
#   --bin-dir DIR   the static release build (mentoryd, mentoryctl, mentory-advisor) to package as N+1,
#                   and as N unless --debs is given
#   --debs DIR      version N's packages, already built (scripts/package-deb.sh's --out-dir)
# On this machine it installs only what the sandbox must find installed and may lack: python3-protobuf
# (python3-mentory's dependency), with apt-get. Everything else it writes is in its temporary folder.
#
# Prints one PASS/FAIL line per check and exits non-zero if any check failed. Every wait is bounded; a trap
# kills the namespace's PID 1 (and with it everything in it) on every exit, and removes its temporary folder.
# No -e: a failing check is recorded (FAIL) and the next one runs, as in scripts/systemd-test.sh.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

BIN_DIR=""
DEBS=""
while [ $# -gt 0 ]; do
  case "$1" in
    --bin-dir) BIN_DIR=$2; shift 2 ;;
    --debs) DEBS=$2; shift 2 ;;
    -h|--help) sed -n "2,29p" "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 64 ;;
  esac
done
if [ "$(id -u)" -ne 0 ]; then
  echo "deb-test.sh needs root: it boots systemd in private namespaces" >&2
  exit 77
fi
if [ -z "$BIN_DIR" ]; then
  echo "deb-test.sh: --bin-dir DIR is required (a static release build: scripts/package-deb.sh --help)" >&2
  exit 64
fi
for tool in unshare nsenter pivot_root setpriv dpkg-deb /lib/systemd/systemd; do
  command -v "$tool" >/dev/null || { echo "missing: $tool" >&2; exit 69; }
done

WORK=$(mktemp -d /tmp/mentoryd-deb-test.XXXXXX)
export SDBOX=/run/mentoryd-debbox.$$
FAILURES=0
PASSES=0
# shellcheck source=scripts/lib/systemd-sandbox.sh
. scripts/lib/systemd-sandbox.sh
cleanup() {
  sandbox_stop
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

pass() { echo "PASS $*"; PASSES=$((PASSES + 1)); }
fail() { echo "FAIL $*"; FAILURES=$((FAILURES + 1)); }
# in_ns CMD...: runs CMD inside the sandbox (its PID, mount and UTS namespaces and its root), with the
# PATH of a Debian system (no pyenv shim before Debian's python3).
in_ns() { nsenter -t "$SD" -p -m -u -r env PATH=/usr/sbin:/usr/bin:/sbin:/bin "$@"; }
prop() { in_ns systemctl show -p "$1" --value "$2"; }
# as USER CMD...: runs CMD as USER (with their groups) in their own session's environment.
as() {
  local user=$1 uid; shift; uid=$(in_ns id -u "$user")
  in_ns setpriv --reuid="$uid" --regid="$(in_ns id -g "$user")" --init-groups env -u MENTORY_SOCKET HOME="/home/$user" \
    XDG_RUNTIME_DIR="/run/user/$uid" DBUS_SESSION_BUS_ADDRESS="unix:path=/run/user/$uid/bus" "$@"
}
uprop() { as alice systemctl --user show -p "$1" --value "$2"; }
# The executable a process runs: the installed file, or "... (deleted)" when it was replaced since it started.
exe_of() { in_ns readlink "/proc/$1/exe" 2>/dev/null || echo "no process $1"; }
# The sandbox has a network namespace of its own with no way out, so apt can download nothing: what the
# packages depend on must already be installed.
apt_install() { in_ns env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@"; }

# ---- Versions N and N+1 ---------------------------------------------------------------------------------
# The runtime dependencies the sandbox must find installed (it downloads nothing): python3-mentory's.
if ! dpkg-query -W -f='${Status}' python3-protobuf 2>/dev/null | grep -q 'install ok installed'; then
  echo "== installing python3-protobuf on this machine (python3-mentory's dependency)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-protobuf >/dev/null
fi
T_START=$(date +%s)
mkdir -p "$WORK/n" "$WORK/n1"
if [ -n "$DEBS" ]; then
  cp "$DEBS"/mentoryd_*.deb "$DEBS"/mentory-advisor_*.deb "$DEBS"/python3-mentory_*.deb "$WORK/n/"
else
  echo "== packaging version N"
  scripts/package-deb.sh --bin-dir "$BIN_DIR" --out-dir "$WORK/n" --fast --no-lintian > "$WORK/package-n.log" 2>&1 \
    || { cat "$WORK/package-n.log"; echo "FAIL packaging N"; exit 1; }
fi
N=$(dpkg-deb -f "$(ls "$WORK"/n/mentoryd_*.deb)" Version)
N1="$N+1"
echo "== packaging version N+1 ($N1): the same source and binaries, only the packaging step again (xz -1)"
scripts/package-deb.sh --bin-dir "$BIN_DIR" --out-dir "$WORK/n1" --version "$N1" --fast --no-lintian > "$WORK/package-n1.log" 2>&1 \
  || { cat "$WORK/package-n1.log"; echo "FAIL packaging N+1"; exit 1; }
T_PACKAGED=$(date +%s)
echo "   N = $N, N+1 = $N1 (packaging took $((T_PACKAGED - T_START)) s)"

# ---- Boot systemd in the sandbox --------------------------------------------------------------------------
sandbox_boot mentoryd-debbox --net
# A container image's /usr/sbin/policy-rc.d (exit 101: "start no service") would keep the maintainer scripts
# from starting, restarting and stopping units; a Debian system has none. Only the sandbox's copy goes.
in_ns rm -f /usr/sbin/policy-rc.d
# The packages go in through the namespace (its /tmp and /run are its own).
PKG=/run/mentoryd-debs
for version in n n1; do
  in_ns mkdir -p "$PKG/$version"
  for deb in "$WORK/$version"/*.deb; do
    in_ns sh -c "cat > '$PKG/$version/$(basename "$deb")'" < "$deb"
  done
done
debs() { in_ns sh -c "ls $PKG/$1/mentoryd_*.deb $PKG/$1/mentory-advisor_*.deb $PKG/$1/python3-mentory_*.deb"; }

# ---- 1. Install N ------------------------------------------------------------------------------------------
echo "== 1. apt install (version $N)"
T0=$(date +%s)
# shellcheck disable=SC2046
if apt_install $(debs n) > "$WORK/install.log" 2>&1; then
  pass "1 install: apt install of the three packages, nothing downloaded, in $(( $(date +%s) - T0 )) s"
else
  fail "1 install: apt install"; tail -30 "$WORK/install.log"
  echo "deb-test: the packages did not install; nothing further to check"; exit 1
fi
CONFFILES=$(in_ns dpkg-query -W -f='${Conffiles}' mentoryd 2>&1)
if in_ns test -x /usr/bin/mentoryd && in_ns test -x /usr/bin/mentoryctl && in_ns test -x /usr/bin/mentory-advisor \
   && in_ns test -f /lib/systemd/system/mentoryd.service && in_ns test -f /lib/systemd/system/mentoryd.socket \
   && in_ns test -f /lib/systemd/system/mentoryd-plugin@.service \
   && in_ns test -f /usr/lib/systemd/user/mentoryd.service && in_ns test -f /usr/lib/systemd/user/mentoryd-plugin@.service \
   && in_ns test -L /etc/systemd/user/sockets.target.wants/mentoryd.socket \
   && in_ns test -L /etc/systemd/system/sockets.target.wants/mentoryd.socket \
   && in_ns getent passwd mentory >/dev/null && grep -q /etc/mentoryd/mentoryd.json <<<"$CONFFILES" \
   && in_ns test -f /usr/lib/sysusers.d/mentoryd.conf \
   && in_ns test -f /usr/share/man/man1/mentoryctl.1.gz && in_ns test -f /usr/share/man/man8/mentoryd.8.gz \
   && in_ns grep -q _mentoryctl /usr/share/bash-completion/completions/mentoryctl \
   && in_ns test -s /usr/share/zsh/vendor-completions/_mentoryctl \
   && in_ns test -s /usr/share/fish/vendor_completions.d/mentoryctl.fish \
   && in_ns test -f /usr/share/doc/mentoryd/docs/PLUGINS.md \
   && ! in_ns grep -rq /usr/local /lib/systemd/system/mentoryd.service /usr/lib/systemd/user/mentoryd.service; then
  pass "1 files: binaries in /usr/bin, system units in /lib/systemd/system, user units in /usr/lib/systemd/user (mentoryd.socket enabled for the system and for every user), the mentory account (sysusers), conffile /etc/mentoryd/mentoryd.json, man pages, bash/zsh/fish completions, docs"
else
  fail "1 files: something is missing"; in_ns dpkg -L mentoryd | head -60
fi

# ---- 2. The system instance --------------------------------------------------------------------------------
echo "== 2. the system instance"
SOCKET_STATE="$(prop ActiveState mentoryd.socket)/$(in_ns systemctl is-enabled mentoryd.socket 2>&1)"
SERVICE_BEFORE=$(prop ActiveState mentoryd.service)
PING=$(in_ns timeout 30 mentoryctl ping 2>&1); PING_STATUS=$?
ADD=$(in_ns timeout 30 mentoryctl diary add --emotion pleasant --title "system entry" --text "written before the upgrade" --json 2>&1)
ADD_STATUS=$?
SYS_LIST=$(in_ns timeout 30 mentoryctl diary list --json 2>&1)
if [ "$SOCKET_STATE" = "active/enabled" ] && [ "$SERVICE_BEFORE" = "inactive" ] && [ $PING_STATUS -eq 0 ] \
   && [ $ADD_STATUS -eq 0 ] && grep -q "system entry" <<<"$SYS_LIST" && [ "$(prop ActiveState mentoryd.service)" = "active" ]; then
  pass "2 system instance: mentoryd.socket $SOCKET_STATE, mentoryd.service $SERVICE_BEFORE until mentoryctl ping ($PING) started it; diary add and list on /run/mentoryd/mentoryd.sock"
else
  fail "2 system instance: socket $SOCKET_STATE, service before $SERVICE_BEFORE; ping $PING_STATUS: $PING; add $ADD_STATUS: $ADD; list: $SYS_LIST"
  in_ns systemctl status mentoryd.socket mentoryd.service --no-pager -l 2>&1 | tail -30
fi
# The advisor for the system instance: declared in /etc/mentoryd/mentoryd.json (so the conffile is now
# the administrator's), run by the packaged template.
in_ns /usr/bin/python3 - <<'EOF'
import json
path = "/etc/mentoryd/mentoryd.json"
config = json.load(open(path))
config["plugins"] = {"declared": ["advisor"], "advisor": {"namespace": "advisor"}}
json.dump(config, open(path, "w"), indent=2)
EOF
in_ns timeout 60 systemctl restart mentoryd.service
in_ns timeout 60 systemctl enable --now mentoryd-plugin@advisor.service >/dev/null 2>&1
system_advisor() { in_ns timeout 10 mentoryctl status | grep -q "advisor (advisor): connected"; }
if wait_for 30 system_advisor; then
  pass "2 system advisor: mentoryd-plugin@advisor.service (the packaged template) registered with the system instance"
else
  fail "2 system advisor: not connected"; in_ns systemctl status mentoryd-plugin@advisor.service --no-pager -l 2>&1 | tail -20
fi

# ---- 3. A new user's own instance, with the advisor; Debian's python3 imports mentory ------------------------
echo "== 3. a new user's own instance"
in_ns useradd -m alice
ALICE=$(in_ns id -u alice)
# alice's own configuration declares the advisor (user instances never read /etc/mentoryd).
in_ns install -d -o alice -g alice -m 0700 /home/alice/.config /home/alice/.config/mentoryd
printf '{ "plugins": { "declared": ["advisor"], "advisor": { "namespace": "advisor" } } }\n' \
  | in_ns sh -c 'cat > /home/alice/.config/mentoryd/mentoryd.json; chown alice:alice /home/alice/.config/mentoryd/mentoryd.json'
in_ns timeout 60 systemctl start "user@$ALICE.service"
user_socket_active() { as alice systemctl --user is-active -q mentoryd.socket; }
wait_for 30 user_socket_active; ALICE_SOCKET=$?
ALICE_ADD=$(as alice timeout 30 mentoryctl diary add --emotion pleasant --title "alice's entry" --text "her own diary" --json 2>&1)
ALICE_ADD_STATUS=$?
ALICE_STATUS=$(as alice timeout 30 mentoryctl status 2>&1)
as alice timeout 30 systemctl --user enable --now mentoryd-plugin@advisor.service >/dev/null 2>&1
alice_advisor() { as alice timeout 10 mentoryctl status | grep -q "advisor (advisor): connected"; }
wait_for 30 alice_advisor; ALICE_PLUGIN=$?
SUGGEST=$(as alice timeout 30 mentoryctl call advisor.suggest '{"emotion": "EMOTION_NEUTRAL", "text": "a walk"}' --json 2>&1)
SUGGEST_STATUS=$?
if [ $ALICE_SOCKET -eq 0 ] && [ $ALICE_ADD_STATUS -eq 0 ] && grep -q "user instance of alice (uid $ALICE)" <<<"$ALICE_STATUS" \
   && [ $ALICE_PLUGIN -eq 0 ] && [ $SUGGEST_STATUS -eq 0 ] && grep -q content <<<"$SUGGEST"; then
  pass "3 user instance: alice's manager started her mentoryd.socket (enabled for every user by the package); '$(grep instance: <<<"$ALICE_STATUS" | sed 's/^ *//')'; her mentoryd-plugin@advisor registered and advisor.suggest answers"
else
  fail "3 user instance: socket $ALICE_SOCKET; add $ALICE_ADD_STATUS: $ALICE_ADD; status: $ALICE_STATUS; plugin $ALICE_PLUGIN; suggest $SUGGEST_STATUS: $SUGGEST"
  as alice systemctl --user status mentoryd.socket mentoryd.service mentoryd-plugin@advisor.service --no-pager -l 2>&1 | tail -30
fi
PY=$(as alice timeout 30 /usr/bin/python3 -c '
import mentory
with mentory.connect() as client:
    client.ping()
    print(mentory.__file__, mentory.__version__, client.status().server_version)' 2>&1)
if [ $? -eq 0 ] && grep -q "^/usr/lib/python3/dist-packages/mentory/__init__.py $N " <<<"$PY"; then
  pass "3 python3-mentory: Debian's python3 imports mentory and pings alice's instance: $PY"
else
  fail "3 python3-mentory: $PY"
fi

# ---- 4. Upgrade to N+1 ------------------------------------------------------------------------------------
echo "== 4. apt install (upgrade to $N1)"
SYS_PID=$(prop MainPID mentoryd.service); SYS_ADVISOR_PID=$(prop MainPID mentoryd-plugin@advisor.service)
ALICE_PID=$(uprop MainPID mentoryd.service); ALICE_ADVISOR_PID=$(uprop MainPID mentoryd-plugin@advisor.service)
T0=$(date +%s)
# shellcheck disable=SC2046
apt_install $(debs n1) > "$WORK/upgrade.log" 2>&1; UPGRADE_STATUS=$?
UPGRADE_SECONDS=$(( $(date +%s) - T0 ))
VERSIONS=$(in_ns dpkg-query -W -f='${Package} ${Version}\n' mentoryd mentory-advisor python3-mentory | sort | tr '\n' ' ')
wait_for 30 system_advisor; SYS_ADVISOR_BACK=$?
wait_for 30 alice_advisor; ALICE_ADVISOR_BACK=$?
NEW_SYS_PID=$(prop MainPID mentoryd.service); NEW_SYS_ADVISOR_PID=$(prop MainPID mentoryd-plugin@advisor.service)
NEW_ALICE_PID=$(uprop MainPID mentoryd.service); NEW_ALICE_ADVISOR_PID=$(uprop MainPID mentoryd-plugin@advisor.service)
EXES="$(exe_of "$NEW_SYS_PID"), $(exe_of "$NEW_SYS_ADVISOR_PID"), $(exe_of "$NEW_ALICE_PID"), $(exe_of "$NEW_ALICE_ADVISOR_PID")"
SYS_LIST=$(in_ns timeout 30 mentoryctl diary list --json 2>&1)
ALICE_LIST=$(as alice timeout 30 mentoryctl diary list --json 2>&1)
if [ $UPGRADE_STATUS -eq 0 ] && [ "$VERSIONS" = "mentory-advisor $N1 mentoryd $N1 python3-mentory $N1 " ]; then
  pass "4 upgrade: apt install of $N1 over $N in $UPGRADE_SECONDS s: $VERSIONS"
else
  fail "4 upgrade: apt exit $UPGRADE_STATUS; $VERSIONS"; tail -30 "$WORK/upgrade.log"
fi
if [ "$NEW_SYS_PID" != "$SYS_PID" ] && [ "$NEW_SYS_ADVISOR_PID" != "$SYS_ADVISOR_PID" ] && [ "$NEW_ALICE_PID" != "$ALICE_PID" ] \
   && [ "$NEW_ALICE_ADVISOR_PID" != "$ALICE_ADVISOR_PID" ] && [ "$NEW_SYS_PID" != 0 ] && [ "$NEW_ALICE_PID" != 0 ] \
   && [ "$EXES" = "/usr/bin/mentoryd, /usr/bin/mentory-advisor, /usr/bin/mentoryd, /usr/bin/mentory-advisor" ] \
   && [ $SYS_ADVISOR_BACK -eq 0 ] && [ $ALICE_ADVISOR_BACK -eq 0 ]; then
  pass "4 restarted onto the new binaries: system mentoryd $SYS_PID -> $NEW_SYS_PID, its advisor $SYS_ADVISOR_PID -> $NEW_SYS_ADVISOR_PID, alice's mentoryd $ALICE_PID -> $NEW_ALICE_PID, her advisor $ALICE_ADVISOR_PID -> $NEW_ALICE_ADVISOR_PID; executables: $EXES; both advisors registered again"
else
  fail "4 restart: system mentoryd $SYS_PID -> $NEW_SYS_PID, advisor $SYS_ADVISOR_PID -> $NEW_SYS_ADVISOR_PID (back: $SYS_ADVISOR_BACK); alice's $ALICE_PID -> $NEW_ALICE_PID, advisor $ALICE_ADVISOR_PID -> $NEW_ALICE_ADVISOR_PID (back: $ALICE_ADVISOR_BACK); executables: $EXES"
fi
if grep -q "system entry" <<<"$SYS_LIST" && grep -q "alice's entry" <<<"$ALICE_LIST" && ! grep -q "alice's entry" <<<"$SYS_LIST" \
   && in_ns grep -q '"advisor"' /etc/mentoryd/mentoryd.json; then
  pass "4 data kept: the system instance's entry and alice's own are intact, each in its own diary; the edited /etc/mentoryd/mentoryd.json was kept"
else
  fail "4 data: system list: $SYS_LIST; alice's list: $ALICE_LIST"
fi

# ---- 5. Remove ----------------------------------------------------------------------------------------------
echo "== 5. apt remove"
in_ns env DEBIAN_FRONTEND=noninteractive apt-get remove -y -q mentoryd mentory-advisor python3-mentory > "$WORK/remove.log" 2>&1
REMOVE_STATUS=$?
RUNNING=$(in_ns pgrep -a -f '^/usr/bin/mentory' 2>&1)
STATES="system socket $(prop ActiveState mentoryd.socket), service $(prop ActiveState mentoryd.service), advisor $(prop ActiveState mentoryd-plugin@advisor.service); alice's socket $(uprop ActiveState mentoryd.socket), service $(uprop ActiveState mentoryd.service), advisor $(uprop ActiveState mentoryd-plugin@advisor.service)"
if [ $REMOVE_STATUS -eq 0 ] && [ -z "$RUNNING" ] && ! in_ns test -e /usr/bin/mentoryd && ! in_ns test -e /run/mentoryd/mentoryd.sock \
   && ! in_ns test -e "/run/user/$ALICE/mentoryd/mentoryd.sock" && ! grep -q "=active\| active" <<<"${STATES// inactive/}" \
   && in_ns test -f /var/lib/mentoryd/mentoryd.sqlite && in_ns test -f /etc/mentoryd/mentoryd.json \
   && in_ns getent passwd mentory >/dev/null && in_ns test -f /home/alice/.local/state/mentoryd/mentoryd.sqlite \
   && ! in_ns /usr/bin/python3 -c 'import mentory' 2>/dev/null; then
  pass "5 remove: nothing of the packages runs ($STATES); /var/lib/mentoryd, /etc/mentoryd/mentoryd.json and the mentory account kept"
else
  fail "5 remove: apt exit $REMOVE_STATUS; running: [$RUNNING]; $STATES"; tail -20 "$WORK/remove.log"
fi

# ---- 6. Purge -----------------------------------------------------------------------------------------------
echo "== 6. apt purge"
# (python3-mentory has no configuration: removing it left nothing to purge, and apt no longer knows it.)
in_ns env DEBIAN_FRONTEND=noninteractive apt-get purge -y -q mentoryd mentory-advisor > "$WORK/purge.log" 2>&1
PURGE_STATUS=$?
LEFT=$(in_ns dpkg-query -W -f='${Package} ${Status}\n' mentoryd mentory-advisor python3-mentory 2>/dev/null | grep -v "not-installed" || true)
if [ $PURGE_STATUS -eq 0 ] && [ -z "$LEFT" ] && ! in_ns test -e /var/lib/mentoryd && ! in_ns test -e /etc/mentoryd \
   && ! in_ns test -e /var/lib/mentory-plugins && ! in_ns getent passwd mentory >/dev/null && ! in_ns getent group mentory >/dev/null \
   && ! in_ns test -e /etc/systemd/user/sockets.target.wants/mentoryd.socket \
   && ! in_ns test -e /etc/systemd/system/sockets.target.wants/mentoryd.socket \
   && in_ns test -f /home/alice/.local/state/mentoryd/mentoryd.sqlite && in_ns test -f /home/alice/.config/mentoryd/mentoryd.json \
   && [ -z "$(in_ns pgrep -a -f '^/usr/bin/mentory')" ]; then
  pass "6 purge: /var/lib/mentoryd, /etc/mentoryd, /var/lib/mentory-plugins, the mentory user and group and the units' enablement are gone; alice's home (her diary and configuration) untouched"
else
  fail "6 purge: apt exit $PURGE_STATUS; left: $LEFT"; tail -20 "$WORK/purge.log"
  in_ns ls -la /var/lib/mentoryd /etc/mentoryd 2>&1 | head; in_ns getent passwd mentory
fi

echo
if [ $FAILURES -eq 0 ]; then
  echo "deb-test: all $PASSES checks passed in $(( $(date +%s) - T_START )) s (packaging included)"
else
  echo "deb-test: $FAILURES of $((PASSES + FAILURES)) checks failed"
fi
exit $(( FAILURES > 0 ))
