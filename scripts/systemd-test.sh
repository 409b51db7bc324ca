#!/usr/bin/env bash
# Tests mentoryd's real unit files against a real systemd 252, booted as PID 1 of private PID,
# mount and UTS namespaces over a throwaway overlay of / (writes land in a tmpfs; the host's
# files, /tmp and /run are never touched). It follows ../shared/docs/systemd-sandbox.md, except
# that it enters the overlay with pivot_root instead of chroot, so PrivateUsers= works.
#
# Usage (as root):  scripts/systemd-test.sh [--bin-dir DIR] [--debs DIR]
#   --bin-dir DIR   take mentoryd, mentoryctl and mentory-advisor from DIR instead of building them
#                   (also: MENTORYD_BIN_DIR=DIR; the build honours SWIFT_BUILD_FLAGS)
#   --debs DIR      install the Debian packages in DIR (scripts/package-deb.sh's) with apt instead of
#                   running scripts/install.sh, so every row tests what the packages install, and end
#                   with apt remove instead of scripts/uninstall.sh (also: MENTORYD_DEBS=DIR)
#   MENTORYD_TEST_STORAGE_BACKEND=memory|sqlite  sets storage.backend in the sandbox's config
#                   (default: the daemon's own default)
#   MENTORYD_TEST_JOURNAL=FILE  saves the sandbox's journal of the mentoryd units to FILE
#
# Prints one PASS/FAIL line per check and exits non-zero if any check failed. Every wait is
# bounded; a trap kills the namespace's PID 1 (and with it everything in it) on exit.
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD

BIN_DIR=${MENTORYD_BIN_DIR:-}
DEBS=${MENTORYD_DEBS:-}
while [ $# -gt 0 ]; do
  case "$1" in
    --bin-dir) BIN_DIR=$2; shift 2 ;;
    --debs) DEBS=$2; shift 2 ;;
    -h|--help) sed -n "2,18p" "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 64 ;;
  esac
done

if [ "$(id -u)" -ne 0 ]; then
  echo "systemd-test.sh needs root: it boots systemd in private namespaces" >&2
  exit 77
fi
for tool in unshare nsenter pivot_root setpriv tar python3 /lib/systemd/systemd; do
  command -v "$tool" >/dev/null || { echo "missing: $tool" >&2; exit 69; }
done

if [ -n "$DEBS" ]; then
  for package in mentoryd mentory-advisor; do
    ls "$DEBS"/${package}_*.deb >/dev/null 2>&1 || { echo "no ${package}_*.deb in $DEBS" >&2; exit 66; }
  done
elif [ -z "$BIN_DIR" ]; then
  echo "== building mentoryd and mentoryctl"
  # shellcheck disable=SC2086
  swift build ${SWIFT_BUILD_FLAGS:-} --product mentoryd >/dev/null || { echo "FAIL build mentoryd"; exit 1; }
  # shellcheck disable=SC2086
  swift build ${SWIFT_BUILD_FLAGS:-} --product mentoryctl >/dev/null || { echo "FAIL build mentoryctl"; exit 1; }
  # shellcheck disable=SC2086
  swift build ${SWIFT_BUILD_FLAGS:-} --product mentory-advisor >/dev/null || { echo "FAIL build mentory-advisor"; exit 1; }
  # shellcheck disable=SC2086
  BIN_DIR=$(swift build ${SWIFT_BUILD_FLAGS:-} --show-bin-path)
fi
if [ -z "$DEBS" ]; then
  for binary in mentoryd mentoryctl mentory-advisor; do
    [ -x "$BIN_DIR/$binary" ] || { echo "no $binary in $BIN_DIR" >&2; exit 66; }
  done
fi

WORK=$(mktemp -d /tmp/mentoryd-systemd-test.XXXXXX)
# Where the sandbox mounts its tmpfs (in its own mount namespace; only the empty directory is
# ever visible on the host, and it is removed on exit).
export SDBOX=/run/mentoryd-sdbox.$$
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
# in_ns CMD...: runs CMD inside the sandbox (its PID, mount and UTS namespaces and its root).
in_ns() { nsenter -t "$SD" -p -m -u -r "$@"; }
prop() { in_ns systemctl show -p "$1" --value "$2"; }
# Lines systemd logged (at debug level) for each notification mentoryd sent, from cursor $1 on.
notifications() { in_ns journalctl -u mentoryd.service --no-pager -o cat --after-cursor="$1" | grep "Got notification message"; }
cursor() { in_ns journalctl --no-pager -n 0 --show-cursor | sed -n 's/^-- cursor: //p'; }
show_diagnostics() {
  echo "---- systemctl status"; in_ns systemctl status mentoryd.service mentoryd.socket --no-pager -l 2>&1 | tail -30
  echo "---- journal"; in_ns journalctl -u mentoryd.service -u mentoryd.socket --no-pager -n 40 2>&1
  echo "----"
}

# ---- Boot systemd in the sandbox --------------------------------------------------------------
sandbox_boot mentoryd-sandbox
# Debug logging makes systemd log every notification it receives ("Got notification message").
in_ns systemctl log-level debug

# ---- Install with the Debian packages, or scripts/install.sh, and the real unit files ---------------
# The sandbox gets its own copy of the packages, or of the installer, units, config and binaries (its
# /tmp and /run are fresh, and the repository may live anywhere).
SRC=/run/mentoryd-src
in_ns mkdir -p "$SRC/bin"
if [ -n "$DEBS" ]; then
  # Where the packages put things (debian/rules), for the rows below.
  PREFIX_BIN=/usr/bin
  for deb in "$DEBS"/mentoryd_*.deb "$DEBS"/mentory-advisor_*.deb; do
    in_ns sh -c "cat > '$SRC/$(basename "$deb")'" < "$deb"
  done
  # A container image's policy-rc.d (exit 101) would keep the maintainer scripts from starting units; a
  # Debian system has none. Only the sandbox's copy goes.
  in_ns rm -f /usr/sbin/policy-rc.d
  # shellcheck disable=SC2046
  if in_ns env DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(in_ns sh -c "ls $SRC/*.deb") > "$WORK/install.log" 2>&1 \
     && in_ns test -x /usr/bin/mentoryd && in_ns test -x /usr/bin/mentoryctl && in_ns test -x /usr/bin/mentory-advisor \
     && in_ns test -f /lib/systemd/system/mentoryd.service && in_ns test -f /lib/systemd/system/mentoryd.socket \
     && in_ns test -f /usr/lib/systemd/user/mentoryd.service && in_ns test -f /usr/lib/systemd/user/mentoryd-plugin@.service \
     && in_ns test -L /etc/systemd/user/sockets.target.wants/mentoryd.socket \
     && in_ns getent passwd mentory >/dev/null && in_ns test -f /etc/mentoryd/mentoryd.json \
     && in_ns test -f /usr/share/man/man1/mentoryctl.1.gz && in_ns test -f /usr/share/man/man8/mentoryd.8.gz \
     && in_ns grep -q _mentoryctl /usr/share/bash-completion/completions/mentoryctl \
     && in_ns test -s /usr/share/zsh/vendor-completions/_mentoryctl \
     && in_ns test -s /usr/share/fish/vendor_completions.d/mentoryctl.fish; then
    pass "install: apt install of $(cd "$DEBS" && ls mentoryd_*.deb mentory-advisor_*.deb | tr '\n' ' ')installed binaries, units (system, and user units enabled globally), the mentory user, /etc/mentoryd/mentoryd.json, man pages and completions"
  else
    fail "install: apt install of the packages"; tail -30 "$WORK/install.log"
  fi
  # The postinst started mentoryd.socket; row 1 starts from install.sh's --no-start state.
  in_ns systemctl stop mentoryd.socket
else
PREFIX_BIN=/usr/local/bin
tar -C "$REPO" -cf - scripts/install.sh scripts/uninstall.sh systemd config docs/man | in_ns tar -C "$SRC" -xf -
for binary in mentoryd mentoryctl mentory-advisor; do
  in_ns sh -c "cat > $SRC/bin/$binary && chmod 0755 $SRC/bin/$binary" < "$BIN_DIR/$binary"
done
if in_ns "$SRC/scripts/install.sh" --bin-dir "$SRC/bin" --no-start > "$WORK/install.log" 2>&1 \
   && in_ns test -x /usr/local/bin/mentoryd && in_ns test -x /usr/local/bin/mentoryctl \
   && in_ns test -f /etc/systemd/system/mentoryd.service && in_ns test -f /etc/systemd/system/mentoryd.socket \
   && in_ns test -f /etc/systemd/user/mentoryd.service && in_ns test -f /etc/systemd/user/mentoryd-plugin@.service \
   && in_ns test -L /etc/systemd/user/sockets.target.wants/mentoryd.socket && in_ns test -x /usr/local/bin/mentory-advisor \
   && in_ns getent passwd mentory >/dev/null && in_ns test -f /etc/mentoryd/mentoryd.json \
   && in_ns test -f /usr/local/share/man/man1/mentoryctl.1 && in_ns test -f /usr/local/share/man/man8/mentoryd.8 \
   && in_ns grep -q _mentoryctl /usr/local/share/bash-completion/completions/mentoryctl \
   && in_ns test -s /usr/local/share/zsh/site-functions/_mentoryctl \
   && in_ns test -s /usr/local/share/fish/vendor_completions.d/mentoryctl.fish; then
  pass "install: scripts/install.sh installed binaries, units (system, and user units enabled globally), the mentory user, /etc/mentoryd/mentoryd.json, man pages and completions"
else
  fail "install: scripts/install.sh"; cat "$WORK/install.log"
fi
fi
# The shipped config, with fault injection switched on (only ever inside this sandbox).
python3 - "$REPO/config/mentoryd.json" > "$WORK/mentoryd.json" <<'EOF'
import json, os, sys
config = json.load(open(sys.argv[1]))
config.setdefault("debug", {})["faultInjection"] = True
if os.environ.get("MENTORYD_TEST_STORAGE_BACKEND"):
    config.setdefault("storage", {})["backend"] = os.environ["MENTORYD_TEST_STORAGE_BACKEND"]
print(json.dumps(config, indent=2))
EOF
in_ns sh -c 'cat > /etc/mentoryd/mentoryd.json' < "$WORK/mentoryd.json"
cat > "$WORK/freeze-engine.py" <<'EOF'
# debug.freezeEngine(seconds) over the wire protocol (docs/PROTOCOL.md), standard library only.
# Exit 0: the engine froze (no reply within 3 s); 1: refused; 2: unreachable.
import socket, struct, sys
def varint(v):
    out = bytearray()
    while True:
        b, v = v & 0x7F, v >> 7
        out.append(b | (0x80 if v else 0))
        if not v: return bytes(out)
def fv(n, v): return varint(n << 3) + varint(v)
def fb(n, d): return varint((n << 3) | 2) + varint(len(d)) + d
def frame(e): return struct.pack(">I", len(e)) + e
def read(s, n):
    d = b""
    while len(d) < n:
        c = s.recv(n - len(d))
        if not c: raise EOFError("connection closed")
        d += c
    return d
def read_frame(s): return read(s, struct.unpack(">I", read(s, 4))[0])
path, seconds = sys.argv[1], int(sys.argv[2])
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.settimeout(10)
try:
    s.connect(path)
    s.sendall(frame(fb(1, fv(1, 1) + fb(2, b"systemd-test"))))   # Envelope.hello
    read_frame(s)                                                # Envelope.welcome
except (OSError, EOFError) as e:
    print("cannot reach mentoryd:", e); sys.exit(2)
request = fv(1, 1) + fb(2, b"debug") + fb(3, b"freezeEngine") + fb(4, fv(1, seconds))
s.sendall(frame(fb(3, request)))                                 # Envelope.request
s.settimeout(3)
try:
    reply = read_frame(s)
except (socket.timeout, TimeoutError):
    print(f"engine frozen for {seconds} s"); sys.exit(0)
except (OSError, EOFError) as e:
    print("connection failed:", e); sys.exit(2)
text = reply.decode("utf-8", "replace")
print("mentoryd answered instead of freezing:", "".join(c for c in text if c.isprintable())); sys.exit(1)
EOF
in_ns sh -c 'cat > /run/freeze-engine.py' < "$WORK/freeze-engine.py"
in_ns systemctl daemon-reload

# ---- 1. Socket activation on demand ------------------------------------------------------------
echo "== 1. socket activation"
in_ns systemctl start mentoryd.socket
if [ "$(prop ActiveState mentoryd.service)" = "inactive" ] && in_ns test -S /run/mentoryd/mentoryd.sock; then
  PING=$(in_ns timeout 30 mentoryctl ping --socket /run/mentoryd/mentoryd.sock 2>&1)
  if [ $? -eq 0 ] && [ "$(prop ActiveState mentoryd.service)" = "active" ]; then
    pass "1 socket activation: only the socket was started; mentoryctl ping started mentoryd and got: $PING"
  else
    fail "1 socket activation: ping failed: $PING"; show_diagnostics
  fi
else
  fail "1 socket activation: the socket is missing or the service started early"; show_diagnostics
fi

# ---- 1b. Who may connect: root and the mentory group, nobody else ---------------------------------
MENTORY_GID=$(in_ns getent group mentory | cut -d: -f3)
SOCKET_MODE=$(in_ns stat -c '%a %U:%G' /run/mentoryd/mentoryd.sock)
as_user() { in_ns setpriv --reuid=65534 --regid="$1" --clear-groups timeout 30 mentoryctl ping --socket /run/mentoryd/mentoryd.sock; }
# systemd creates the socket root:mentory; RuntimeDirectory= later hands /run/mentoryd (and the
# socket in it) to the mentory user. Either way: mode 0660, group mentory.
if [[ "$SOCKET_MODE" =~ ^660\ (root|mentory):mentory$ ]] && as_user "$MENTORY_GID" >/dev/null 2>&1 && ! as_user 65534 >/dev/null 2>&1 \
   && in_ns env -u MENTORY_SOCKET timeout 30 mentoryctl ping >/dev/null 2>&1; then
  pass "1b socket permissions: $SOCKET_MODE; a member of mentory may ping, another user may not; root's mentoryctl finds the socket with no --socket"
else
  fail "1b socket permissions: mode '$SOCKET_MODE'; mentory member: $(as_user "$MENTORY_GID" 2>&1 | tail -1); other: $(as_user 65534 2>&1 | tail -1)"
fi

# ---- 2. systemctl status: active (running) with the daemon's STATUS= line ----------------------
echo "== 2. systemctl status"
STATUS_OUT=$(in_ns systemctl status mentoryd.service --no-pager 2>&1)
ACTIVE_LINE=$(grep -E '^\s*Active:' <<<"$STATUS_OUT" | sed 's/^ *//')
STATUS_LINE=$(grep -E '^\s*Status:' <<<"$STATUS_OUT" | sed 's/^ *//')
if grep -q 'active (running)' <<<"$ACTIVE_LINE" && grep -q 'Serving' <<<"$STATUS_LINE"; then
  pass "2 status: $ACTIVE_LINE | $STATUS_LINE"
else
  fail "2 status: expected active (running) and a STATUS line"; echo "$STATUS_OUT"
fi

# ---- 3. systemctl reload: RELOADING=1 then READY=1, same process ------------------------------
echo "== 3. systemctl reload"
PID_BEFORE=$(prop MainPID mentoryd.service)
C=$(cursor)
# A live change: raise the log level in the config, which a reload applies without a restart.
python3 - "$WORK/mentoryd.json" > "$WORK/mentoryd-debug.json" <<'EOF'
import json, sys
config = json.load(open(sys.argv[1])); config["log"]["level"] = "debug"; print(json.dumps(config))
EOF
in_ns sh -c 'cat > /etc/mentoryd/mentoryd.json' < "$WORK/mentoryd-debug.json"
in_ns timeout 30 systemctl reload mentoryd.service
reloaded() { notifications "$C" | grep -A100 "RELOADING=1" | grep -q "READY=1"; }
if wait_for 15 reloaded && [ "$(prop MainPID mentoryd.service)" = "$PID_BEFORE" ] \
   && [ "$(prop ActiveState mentoryd.service)" = "active" ]; then
  SEQ=$(notifications "$C" | grep -oE '\((RELOADING|READY)=1[^)]*\)' | tr '\n' ' ')
  LIVE=$(in_ns journalctl -u mentoryd.service --no-pager -o cat --after-cursor="$C" | grep -c "log level changed")
  pass "3 reload: systemd got $SEQ; MainPID $PID_BEFORE unchanged; 'log level changed' logged $LIVE time(s)"
else
  fail "3 reload: no RELOADING=1 then READY=1, or the process changed"; show_diagnostics
fi
in_ns sh -c 'cat > /etc/mentoryd/mentoryd.json' < "$WORK/mentoryd.json"

# ---- 4. systemctl stop: STOPPING=1 and exit status 0 -----------------------------------------
echo "== 4. systemctl stop"
C=$(cursor)
# (systemctl warns that the socket can start it again: that is the point of socket activation.)
in_ns timeout 60 systemctl stop mentoryd.service 2>/dev/null
RESULT=$(prop Result mentoryd.service); CODE=$(prop ExecMainCode mentoryd.service)
EXIT=$(prop ExecMainStatus mentoryd.service)
if notifications "$C" | grep -q "STOPPING=1" && [ "$RESULT" = "success" ] && [ "$CODE" = "1" ] && [ "$EXIT" = "0" ]; then
  pass "4 stop: STOPPING=1 received, exited with status 0 (Result=$RESULT)"
else
  fail "4 stop: Result=$RESULT ExecMainCode=$CODE ExecMainStatus=$EXIT"; show_diagnostics
fi

# ---- Timing: systemctl start -> active (running), median of 10 ---------------------------------
echo "== timing: systemctl start mentoryd.service -> active (running)"
WALL=(); SYSTEMD=()
for _ in $(seq 10); do
  in_ns timeout 60 systemctl stop mentoryd.service 2>/dev/null
  in_ns systemctl reset-failed mentoryd.service 2>/dev/null  # start limits do not apply to a benchmark
  T0=$(date +%s%N)
  in_ns timeout 30 systemctl start mentoryd.service
  T1=$(date +%s%N)
  WALL+=($(( (T1 - T0) / 1000 )))
  EXITED=$(prop InactiveExitTimestampMonotonic mentoryd.service)
  ENTERED=$(prop ActiveEnterTimestampMonotonic mentoryd.service)
  SYSTEMD+=($(( ENTERED - EXITED )))
done
median() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
echo "   systemctl start wall time (incl. nsenter): median $(median "${WALL[@]}") us  [${WALL[*]}]"
echo "   systemd inactive->active (exec to READY=1): median $(median "${SYSTEMD[@]}") us  [${SYSTEMD[*]}]"

# ---- 5. Frozen engine: the watchdog kills mentoryd and systemd restarts it ---------------------
echo "== 5. watchdog"
in_ns systemctl reset-failed mentoryd.service 2>/dev/null
in_ns systemctl is-active -q mentoryd.service || in_ns timeout 30 systemctl start mentoryd.service
PID_BEFORE=$(prop MainPID mentoryd.service)
RESTARTS_BEFORE=$(prop NRestarts mentoryd.service)
WATCHDOG=$(prop WatchdogUSec mentoryd.service)
C=$(cursor)
T_FREEZE=$(date +%s%N)
FREEZE=$(in_ns timeout 20 python3 /run/freeze-engine.py /run/mentoryd/mentoryd.sock 120 2>&1)
FREEZE_STATUS=$?
restarted() {
  local pid restarts
  pid=$(prop MainPID mentoryd.service); restarts=$(prop NRestarts mentoryd.service)
  [ "$pid" != "0" ] && [ "$pid" != "$PID_BEFORE" ] && [ "$restarts" -gt "$RESTARTS_BEFORE" ] \
    && [ "$(prop SubState mentoryd.service)" = "running" ]
}
if [ $FREEZE_STATUS -ne 0 ]; then
  fail "5 watchdog: could not freeze the engine: $FREEZE"; show_diagnostics
elif wait_for 60 restarted; then
  ELAPSED=$(( ($(date +%s%N) - T_FREEZE) / 1000000 ))
  LOG=$(in_ns journalctl -u mentoryd.service --no-pager -o cat --after-cursor="$C")
  TIMEOUT_LINE=$(grep -m1 "Watchdog timeout" <<<"$LOG")
  WITHHELD=$(grep -c "withholding WATCHDOG=1" <<<"$LOG")
  pass "5 watchdog: $FREEZE; mentoryd withheld WATCHDOG=1 ($WITHHELD warning(s)); systemd: '$TIMEOUT_LINE'; MainPID $PID_BEFORE -> $(prop MainPID mentoryd.service), NRestarts=$(prop NRestarts mentoryd.service), running again ${ELAPSED} ms after the freeze (WatchdogUSec=$WATCHDOG)"
else
  fail "5 watchdog: no restart after freezing (MainPID=$(prop MainPID mentoryd.service) NRestarts=$(prop NRestarts mentoryd.service))"
  show_diagnostics
fi

# ---- 6. Structured journal fields ----------------------------------------------------------------
echo "== 6. journald fields"
in_ns journalctl -u mentoryd.service --no-pager -o json > "$WORK/journal.json"
FIELDS=$(python3 - "$WORK/journal.json" <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    entry = json.loads(line)
    if entry.get("SYSLOG_IDENTIFIER") != "mentoryd" or "CODE_FILE" not in entry:
        continue
    if all(k in entry for k in ("PRIORITY", "CODE_LINE", "CODE_FUNC", "MESSAGE")) and "VERSION" in entry:
        keys = ("MESSAGE", "PRIORITY", "SYSLOG_IDENTIFIER", "CODE_FILE", "CODE_LINE", "CODE_FUNC", "LOGGER_LABEL", "VERSION")
        print(" ".join(f"{k}={entry.get(k)!r}" for k in keys))
        sys.exit(0)
sys.exit(1)
EOF
)
if [ $? -eq 0 ]; then
  pass "6 journal: $FIELDS"
else
  fail "6 journal: no entry with MESSAGE, PRIORITY, SYSLOG_IDENTIFIER, CODE_FILE/LINE/FUNC and the VERSION metadata field"
  head -c 3000 "$WORK/journal.json"
fi

# ---- 7. systemd-analyze security ------------------------------------------------------------------
echo "== 7. systemd-analyze security"
SECURITY=$(in_ns systemd-analyze security mentoryd.service --no-pager 2>&1 | tail -1)
SCORE=$(grep -oE '[0-9]+\.[0-9]+' <<<"$SECURITY" | head -1)
if [ -n "$SCORE" ] && awk -v s="$SCORE" 'BEGIN { exit !(s <= 1.0) }'; then
  pass "7 security: $SECURITY"
else
  fail "7 security: exposure ${SCORE:-unknown} > 1.0: $SECURITY"
  in_ns systemd-analyze security mentoryd.service --no-pager 2>&1 | grep '✗'
fi

# ---- 8. Backup: streamed through the socket, written by mentoryctl where the caller asked -------
echo "== 8. backup"
in_ns systemctl is-active -q mentoryd.service || in_ns timeout 30 systemctl start mentoryd.service
in_ns timeout 30 mentoryctl diary add --emotion neutral --title "Backed up" --text "A day to keep." >/dev/null 2>&1
MENTORY_UID=$(in_ns id -u mentory)
backup_ok() {  # backup_ok PATH OWNER [setpriv args...]: backs up to PATH as the caller, checks the file
  local path=$1 owner=$2; shift 2
  local out
  out=$(in_ns "$@" timeout 60 mentoryctl backup --to "$path" --json 2>&1) || { echo "mentoryctl failed: $out"; return 1; }
  local bytes; bytes=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["bytes"])' "$out" 2>/dev/null)
  local stat_line; stat_line=$(in_ns stat -c '%s %u %a' "$path" 2>&1) || { echo "no file at $path: $stat_line"; return 1; }
  local check; check=$(in_ns sqlite3 "$path" 'PRAGMA integrity_check;' 2>&1)
  [ "$stat_line" = "$bytes $owner 600" ] && [ "$check" = "ok" ] || { echo "file: '$stat_line' reply bytes: '$bytes' integrity: '$check'"; return 1; }
  echo "$path: $bytes bytes, uid $owner, mode 600, integrity ok"
}
in_ns rm -f /tmp/mentoryd-backup.sqlite /root/mentoryd-backup.sqlite
in_ns install -d -o mentory -g mentory -m 0700 /tmp/mentory-owned
B1=$(backup_ok /tmp/mentoryd-backup.sqlite 0 env); S1=$?
B2=$(backup_ok /root/mentoryd-backup.sqlite 0 env); S2=$?
# The daemon's own user may back up too (PROTOCOL.md): the copy is its own.
B3=$(backup_ok /tmp/mentory-owned/backup.sqlite "$MENTORY_UID" setpriv --reuid=mentory --regid=mentory --init-groups); S3=$?
# Anyone else, even a member of the mentory group who may use the socket, is refused (storage.* is
# privileged: root and the daemon's user), and nothing is written.
REFUSED=$(in_ns setpriv --reuid=65534 --regid="$MENTORY_GID" --clear-groups timeout 60 \
  mentoryctl backup --to /tmp/mentory-refused.sqlite 2>&1)
if [ $? -ne 0 ] && grep -q "permission denied" <<<"$REFUSED" && ! in_ns test -e /tmp/mentory-refused.sqlite; then
  S5=0; B5="refused: $REFUSED"
else
  S5=1; B5="not refused: $REFUSED"
fi
AGAIN=$(in_ns timeout 60 mentoryctl backup --to /tmp/mentoryd-backup.sqlite 2>&1); S4=$?
LEFT=$(in_ns sh -c 'ls -A /var/lib/mentoryd | grep -c "^.mentoryd-backup-"; ls -A /tmp /root | grep -c partial' | tr '\n' ' ')
if [ $S1 -eq 0 ] && [ $S2 -eq 0 ] && [ $S3 -eq 0 ] && [ $S5 -eq 0 ] && [ $S4 -ne 0 ] && grep -q "already exists" <<<"$AGAIN" && [ "$LEFT" = "0 0 " ]; then
  pass "8 backup: as root (the daemon runs as uid $MENTORY_UID): $B1; $B2; as the mentory user: $B3; another member of the mentory group: $B5; a second backup to the same path is refused; no snapshot or partial file left"
else
  fail "8 backup: [$B1] [$B2] [$B3] [$B5] again($S4): $AGAIN; leftovers (snapshots, partial files): $LEFT"; show_diagnostics
fi

# ---- 9. A reload with a broken config fails the reload job; the daemon keeps serving ---------------
echo "== 9. failed reload"
PID_BEFORE=$(prop MainPID mentoryd.service)
C=$(cursor)
printf '{\n  "log": {\n    "level": info\n  }\n}\n' | in_ns sh -c 'cat > /etc/mentoryd/mentoryd.json'
RELOAD_OUT=$(in_ns timeout 30 systemctl reload mentoryd.service 2>&1); RELOAD_STATUS=$?
in_ns journalctl -u mentoryd.service --no-pager -o json --after-cursor="$C" > "$WORK/reload-journal.json"
RELOAD_LINE=$(python3 - "$WORK/reload-journal.json" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    entry = json.loads(line)
    message = entry.get("MESSAGE", "")
    # The daemon's own error line (mentoryctl, run by ExecReload=, prints the same reason at info level).
    if (entry.get("SYSLOG_IDENTIFIER") == "mentoryd" and entry.get("PRIORITY") == "3" and isinstance(message, str)
            and "reload failed" in message and "/etc/mentoryd/mentoryd.json" in message and "line 3" in message):
        print(entry.get("SYSLOG_IDENTIFIER"), "PRIORITY=" + str(entry.get("PRIORITY")), message); sys.exit(0)
sys.exit(1)
PY
)
FOUND=$?
PING_AFTER=$(in_ns timeout 30 mentoryctl ping 2>&1); PING_STATUS=$?
in_ns sh -c 'cat > /etc/mentoryd/mentoryd.json' < "$WORK/mentoryd.json"
in_ns timeout 30 systemctl reload mentoryd.service; GOOD_RELOAD=$?
if [ $RELOAD_STATUS -ne 0 ] && [ $FOUND -eq 0 ] && [ $PING_STATUS -eq 0 ] && [ $GOOD_RELOAD -eq 0 ] \
   && [ "$(prop MainPID mentoryd.service)" = "$PID_BEFORE" ] && [ "$(prop ActiveState mentoryd.service)" = "active" ]; then
  pass "9 failed reload: systemctl reload exited $RELOAD_STATUS; journal: $RELOAD_LINE; still serving (MainPID $PID_BEFORE); the fixed config reloads (exit 0)"
else
  fail "9 failed reload: systemctl reload exited $RELOAD_STATUS ($RELOAD_OUT); journal line found: $FOUND; ping: $PING_AFTER; good reload: $GOOD_RELOAD"
  show_diagnostics
fi

# ---- 10. Start-up failure under socket activation: the socket survives, clients learn why ------------
echo "== 10. start-up failure"
in_ns timeout 60 systemctl stop mentoryd.service 2>/dev/null
in_ns systemctl reset-failed mentoryd.service mentoryd.socket 2>/dev/null  # a clean slate; never again below
echo '{ "log": { "level": "loud" } }' | in_ns sh -c 'cat > /etc/mentoryd/mentoryd.json'
STATUSES=""; LAST_MESSAGE=""
for _ in $(seq 8); do   # more connections than systemd's default start limit (5 in 10 s)
  LAST_MESSAGE=$(in_ns timeout 30 mentoryctl ping 2>&1); STATUSES+="$? "
done
SOCKET_STATE=$(prop ActiveState mentoryd.socket); SOCKET_RESULT=$(prop Result mentoryd.socket)
SERVICE_STATE=$(prop ActiveState mentoryd.service); STATUS_TEXT=$(prop StatusText mentoryd.service)
RESTARTS=$(prop NRestarts mentoryd.service)
in_ns sh -c 'cat > /etc/mentoryd/mentoryd.json' < "$WORK/mentoryd.json"
in_ns timeout 30 systemctl restart mentoryd.service; RESTART_STATUS=$?
FIXED=$(in_ns timeout 30 mentoryctl ping 2>&1); FIXED_STATUS=$?
if [ "$STATUSES" = "69 69 69 69 69 69 69 69 " ] && grep -q "log.level" <<<"$LAST_MESSAGE" && grep -q "/etc/mentoryd/mentoryd.json" <<<"$LAST_MESSAGE" \
   && [ "$SOCKET_STATE" = "active" ] && [ "$SOCKET_RESULT" = "success" ] && [ "$SERVICE_STATE" = "active" ] \
   && grep -q "^Failed to start" <<<"$STATUS_TEXT" && [ $RESTART_STATUS -eq 0 ] && [ $FIXED_STATUS -eq 0 ]; then
  pass "10 start-up failure: 8 pings exited 69 with '$LAST_MESSAGE'; mentoryd.socket $SOCKET_STATE (Result=$SOCKET_RESULT); service $SERVICE_STATE, NRestarts=$RESTARTS, Status='$STATUS_TEXT'; after fixing the config, systemctl restart (no reset-failed) serves: $FIXED"
else
  fail "10 start-up failure: ping statuses [$STATUSES] last: $LAST_MESSAGE; socket $SOCKET_STATE/$SOCKET_RESULT; service $SERVICE_STATE '$STATUS_TEXT'; restart $RESTART_STATUS; ping after fix: $FIXED"
  show_diagnostics
fi

# ---- 10b. A damaged database: the same degraded mode -------------------------------------------------
in_ns timeout 60 systemctl stop mentoryd.service 2>/dev/null
in_ns mv /var/lib/mentoryd/mentoryd.sqlite /var/lib/mentoryd/mentoryd.sqlite.good
in_ns sh -c 'echo "not a database, a diary in plain text" > /var/lib/mentoryd/mentoryd.sqlite; chown mentory:mentory /var/lib/mentoryd/mentoryd.sqlite'
DAMAGED=$(in_ns timeout 30 mentoryctl ping 2>&1); DAMAGED_STATUS=$?
DAMAGED_SOCKET=$(prop ActiveState mentoryd.socket); DAMAGED_TEXT=$(prop StatusText mentoryd.service)
in_ns mv -f /var/lib/mentoryd/mentoryd.sqlite.good /var/lib/mentoryd/mentoryd.sqlite
in_ns timeout 30 systemctl restart mentoryd.service; RESTART_STATUS=$?
if [ $DAMAGED_STATUS -eq 69 ] && [ "$DAMAGED_SOCKET" = "active" ] && grep -q "^Failed to start" <<<"$DAMAGED_TEXT" \
   && [ $RESTART_STATUS -eq 0 ] && in_ns timeout 30 mentoryctl ping >/dev/null 2>&1; then
  pass "10b damaged database: ping exited 69 with '$DAMAGED'; socket $DAMAGED_SOCKET; after restoring it, systemctl restart serves"
else
  fail "10b damaged database: ping $DAMAGED_STATUS '$DAMAGED'; socket $DAMAGED_SOCKET; status '$DAMAGED_TEXT'; restart $RESTART_STATUS"
  show_diagnostics
fi

# ---- 11. No libdispatch noise in the journal ----------------------------------------------------------
echo "== 11. journal noise"
TOTAL=$(in_ns journalctl -u mentoryd.service --no-pager -o cat | wc -l)
NOISE=$(in_ns journalctl -u mentoryd.service --no-pager -o cat | grep -c "Failed to set thread priority")
if [ "$NOISE" -eq 0 ]; then
  pass "11 journal: 0 of $TOTAL mentoryd.service entries are 'Failed to set thread priority'"
else
  fail "11 journal: $NOISE of $TOTAL mentoryd.service entries are 'Failed to set thread priority'"
  in_ns journalctl -u mentoryd.service --no-pager -o cat | grep -m3 "Failed to set thread priority"
fi

# ---- 12. Per-uid access rules under the shipped system unit: peers' real uids reach the policy ------
echo "== 12. per-uid access rules"
# Two people in the mentory group (both may use the shared socket), and a plugin for alice.
in_ns useradd -m -G mentory alice; in_ns useradd -m -G mentory bob
ALICE=$(in_ns id -u alice); BOB=$(in_ns id -u bob)
as() {  # as USER CMD...: runs CMD as USER (with their groups) in their own session's environment
  local user=$1 uid; shift; uid=$(in_ns id -u "$user")
  in_ns setpriv --reuid="$uid" --regid="$(in_ns id -g "$user")" --init-groups env -u MENTORY_SOCKET HOME="/home/$user" \
    XDG_RUNTIME_DIR="/run/user/$uid" DBUS_SESSION_BUS_ADDRESS="unix:path=/run/user/$uid/bus" "$@"
}
python3 - "$WORK/mentoryd.json" "$BOB" "$ALICE" > "$WORK/mentoryd-rules.json" <<'EOF'
import json, sys
config = json.load(open(sys.argv[1]))
bob, alice = sys.argv[2], sys.argv[3]
# No closing "deny any ..." line: the privileged methods stay closed whatever a rule list leaves out.
config["access"] = {"rules": [f"deny uid={bob} diary.*", f"allow uid={alice} plugin.*"]}
config["plugins"] = {"declared": ["advisor"], "advisor": {"namespace": "advisor"}}
print(json.dumps(config, indent=2))
EOF
in_ns sh -c 'cat > /etc/mentoryd/mentoryd.json' < "$WORK/mentoryd-rules.json"
# Access rules and plugins sections are live on reload (row 13c reloads one in). Rows 10 and 10b started
# the service several times in the last seconds: clear its start-limit counter first.
in_ns systemctl reset-failed mentoryd.service mentoryd.socket 2>/dev/null
in_ns timeout 60 systemctl restart mentoryd.service; RULES_RELOAD=$?
SYS=/run/mentoryd/mentoryd.sock
BOB_LIST=$(as bob timeout 30 mentoryctl --socket $SYS diary list 2>&1); BOB_STATUS=$?
ALICE_LIST=$(as alice timeout 30 mentoryctl --socket $SYS diary list 2>&1); ALICE_STATUS=$?
ROOT_LIST=$(in_ns timeout 30 mentoryctl --socket $SYS diary list 2>&1); ROOT_STATUS=$?
BOB_PING=$(as bob timeout 30 mentoryctl --socket $SYS ping 2>&1); BOB_PING_STATUS=$?
# alice's advisor registers (allow uid=ALICE plugin.*); bob's is refused and exits 77 for good.
in_ns systemd-run --quiet --unit=systemd-test-advisor-alice --uid=alice --gid=alice \
  "$PREFIX_BIN/mentory-advisor" --socket $SYS --state-file /home/alice/advisor-position >/dev/null 2>&1
advisor_connected() { in_ns timeout 10 mentoryctl --socket $SYS status | grep -q "advisor (advisor): connected"; }
wait_for 30 advisor_connected; ADVISOR_ALICE=$?
SUGGEST=$(as alice timeout 30 mentoryctl --socket $SYS call advisor.suggest '{"emotion": "EMOTION_NEUTRAL", "text": "a walk"}' --json 2>&1)
SUGGEST_STATUS=$?
# The advisor's topic is derived from the diary (reads: "diary.list"): bob, denied the diary, gets none of it,
# and the traffic monitor, which the rule list never mentions, stays closed to him.
BOB_ADVICE=$(as bob timeout 30 mentoryctl --socket $SYS watch advice --count 1 2>&1); BOB_ADVICE_STATUS=$?
BOB_MONITOR=$(as bob timeout 30 mentoryctl --socket $SYS monitor 2>&1); BOB_MONITOR_STATUS=$?
GRANT_LOGGED=$(in_ns journalctl -u mentoryd.service --no-pager -o cat 2>/dev/null \
  | grep -c "access.rules grants plugin.register to uid=$ALICE")
in_ns systemctl stop systemd-test-advisor-alice.service 2>/dev/null
BOB_ADVISOR=$(in_ns timeout 60 systemd-run --quiet --wait --pipe --uid=bob --gid=bob \
  "$PREFIX_BIN/mentory-advisor" --socket $SYS --state-file /home/bob/advisor-position </dev/null 2>&1)
BOB_ADVISOR_STATUS=$?
in_ns sh -c 'cat > /etc/mentoryd/mentoryd.json' < "$WORK/mentoryd.json"
in_ns timeout 30 systemctl reload mentoryd.service   # the rules go, and so does the declared plugin
if [ $RULES_RELOAD -eq 0 ] && [ $BOB_STATUS -eq 1 ] && grep -qi "permission denied" <<<"$BOB_LIST" && [ $BOB_PING_STATUS -eq 0 ] \
   && [ $ALICE_STATUS -eq 0 ] && [ $ROOT_STATUS -eq 0 ] && [ $ADVISOR_ALICE -eq 0 ] && [ $SUGGEST_STATUS -eq 0 ] \
   && grep -q content <<<"$SUGGEST" && [ $BOB_ADVISOR_STATUS -eq 77 ] \
   && [ $BOB_ADVICE_STATUS -eq 1 ] && grep -q "diary.list" <<<"$BOB_ADVICE" \
   && [ $BOB_MONITOR_STATUS -eq 1 ] && grep -qi "permission denied" <<<"$BOB_MONITOR" && [ "$GRANT_LOGGED" -ge 1 ]; then
  pass "12 per-uid rules: 'deny uid=$BOB diary.*' refuses bob (uid $BOB) diary list: $(tail -1 <<<"$BOB_LIST"), while bob may still ping and alice (uid $ALICE) and root list; 'allow uid=$ALICE plugin.*' admits alice's mentory-advisor (connected, advisor.suggest answers; the journal says 'access.rules grants plugin.register to uid=$ALICE'), bob's registration is refused (exit $BOB_ADVISOR_STATUS); bob's watch of the diary-derived topic advice: $(tail -1 <<<"$BOB_ADVICE"); bob's monitor, which no rule names: $(tail -1 <<<"$BOB_MONITOR")"
else
  fail "12 per-uid rules: restart $RULES_RELOAD; bob list $BOB_STATUS: $BOB_LIST; bob ping $BOB_PING_STATUS; alice list $ALICE_STATUS: $ALICE_LIST; root $ROOT_STATUS; alice's advisor connected: $ADVISOR_ALICE; suggest $SUGGEST_STATUS: $SUGGEST; bob's advisor exit $BOB_ADVISOR_STATUS: $(tail -3 <<<"$BOB_ADVISOR"); bob's advice watch $BOB_ADVICE_STATUS: $BOB_ADVICE; bob's monitor $BOB_MONITOR_STATUS: $BOB_MONITOR; grant lines logged: $GRANT_LOGGED"
  show_diagnostics
fi

# ---- 13. A user instance each: alice and bob under their own user managers ---------------------------
echo "== 13. user instances"
# alice's own configuration (never /etc): her instance declares the advisor, run by her plugin unit.
in_ns install -d -o alice -g alice -m 0700 /home/alice/.config /home/alice/.config/mentoryd
printf '{ "plugins": { "declared": ["advisor"], "advisor": { "namespace": "advisor" } } }\n' \
  | in_ns sh -c 'cat > /home/alice/.config/mentoryd/mentoryd.json; chown alice:alice /home/alice/.config/mentoryd/mentoryd.json'
# carol is not in the mentory group: the system socket refuses her, and her own instance answers.
in_ns useradd -m carol; CAROL=$(in_ns id -u carol)
in_ns timeout 60 systemctl start "user@$ALICE.service" "user@$BOB.service" "user@$CAROL.service"
# install.sh (or the package) enabled mentoryd.socket for every user (systemctl --global): their managers start it.
user_socket_active() { as "$1" systemctl --user is-active -q mentoryd.socket; }
wait_for 30 user_socket_active alice; ALICE_SOCKET=$?
wait_for 30 user_socket_active bob; BOB_SOCKET=$?
wait_for 30 user_socket_active carol; CAROL_SOCKET=$?
ALICE_SOCK=/run/user/$ALICE/mentoryd/mentoryd.sock; BOB_SOCK=/run/user/$BOB/mentoryd/mentoryd.sock
MODES="$(in_ns stat -c '%a %U' "$ALICE_SOCK" "/run/user/$ALICE/mentoryd" "/run/user/$ALICE" 2>&1 | tr '\n' ' ')"
# Both are in the mentory group and the system socket is up: each still reaches their own instance.
ALICE_ADD=$(as alice timeout 30 mentoryctl diary add --emotion pleasant --title "alice's" --text "private" --json 2>&1); ALICE_ADD_STATUS=$?
ALICE_STATUS_OUT=$(as alice timeout 30 mentoryctl status 2>&1)
BOB_STATUS_OUT=$(as bob timeout 30 mentoryctl status 2>&1)
CAROL_STATUS_OUT=$(as carol timeout 30 mentoryctl status 2>&1)
BOB_DIARY=$(as bob timeout 30 mentoryctl diary list --json 2>&1); BOB_DIARY_STATUS=$?
ROOT_STATUS_OUT=$(in_ns env -u XDG_RUNTIME_DIR timeout 30 mentoryctl status 2>&1)
# Neither can connect to the other's socket (0600 in a 0700 directory).
BOB_TO_ALICE=$(as bob timeout 30 mentoryctl --socket "$ALICE_SOCK" ping 2>&1); BOB_TO_ALICE_STATUS=$?
ALICE_TO_BOB=$(as alice timeout 30 mentoryctl --socket "$BOB_SOCK" ping 2>&1); ALICE_TO_BOB_STATUS=$?
STATE=$(in_ns stat -c '%a %U' /home/alice/.local/state/mentoryd 2>&1)
STATE_DB=$(in_ns test -f /home/alice/.local/state/mentoryd/mentoryd.sqlite && echo yes)
# alice's plugin unit under her manager; her config declared it.
as alice timeout 30 systemctl --user start mentoryd-plugin@advisor.service
alice_advisor() { as alice timeout 10 mentoryctl status | grep -q "advisor (advisor): connected"; }
wait_for 30 alice_advisor; ALICE_PLUGIN=$?
# Notify, watchdog, reload under the user manager.
as alice timeout 30 systemctl --user reload mentoryd.service; USER_RELOAD=$?
# systemd 252's false namespace warnings (docs/OPERATIONS.md): none for alice's start, calls, plugin and reload.
USER_WARNINGS=$(in_ns journalctl --no-pager -o cat "_UID=$ALICE" | grep -c "is configured, but .* failed, ignoring")
USER_PROPS=$(as alice systemctl --user show -p Type -p WatchdogUSec -p StatusText -p ActiveState mentoryd.service | tr '\n' ' ')
USER_SECURITY=$(as alice systemd-analyze --user security mentoryd.service --no-pager 2>&1 | tail -1)
if [ $ALICE_SOCKET -eq 0 ] && [ $BOB_SOCKET -eq 0 ] && [[ "$MODES" == "600 alice 700 alice 700 alice " ]] \
   && [ $ALICE_ADD_STATUS -eq 0 ] && grep -q "instance:    user instance of alice (uid $ALICE)" <<<"$ALICE_STATUS_OUT" \
   && grep -q "instance:    user instance of bob (uid $BOB)" <<<"$BOB_STATUS_OUT" \
   && [ $CAROL_SOCKET -eq 0 ] && grep -q "instance:    user instance of carol (uid $CAROL)" <<<"$CAROL_STATUS_OUT" \
   && grep -q "instance:    system instance, shared" <<<"$ROOT_STATUS_OUT" \
   && [ $BOB_DIARY_STATUS -eq 0 ] && ! grep -q "alice's" <<<"$BOB_DIARY" \
   && [ $BOB_TO_ALICE_STATUS -eq 69 ] && [ $ALICE_TO_BOB_STATUS -eq 69 ] && [ "$STATE" = "700 alice" ] && [ "$STATE_DB" = yes ] \
   && [ $ALICE_PLUGIN -eq 0 ] && [ $USER_RELOAD -eq 0 ] && [ "$USER_WARNINGS" -eq 0 ] && grep -q "WatchdogUSec=10s" <<<"$USER_PROPS" \
   && grep -q "ActiveState=active" <<<"$USER_PROPS"; then
  pass "13 user instances: alice's and bob's managers started their own mentoryd.socket (globally enabled); $ALICE_SOCK and its directories: $MODES; mentoryctl (no --socket) found each one's own: '$(grep instance: <<<"$ALICE_STATUS_OUT" | sed 's/^ *//')', '$(grep instance: <<<"$BOB_STATUS_OUT" | sed 's/^ *//')', root: '$(grep instance: <<<"$ROOT_STATUS_OUT" | sed 's/^ *//')', carol (not in the mentory group): '$(grep instance: <<<"$CAROL_STATUS_OUT" | sed 's/^ *//')'; bob's diary lacks alice's entry; bob -> alice's socket: $(tail -1 <<<"$BOB_TO_ALICE"); alice -> bob's: exit $ALICE_TO_BOB_STATUS; state ~alice/.local/state/mentoryd $STATE; alice's mentoryd-plugin@advisor connected (declared in ~/.config/mentoryd/mentoryd.json); systemctl --user reload: exit 0; namespace warnings from alice's manager: $USER_WARNINGS; $USER_PROPS; $USER_SECURITY"
else
  fail "13 user instances: sockets $ALICE_SOCKET/$BOB_SOCKET; modes '$MODES'; alice add $ALICE_ADD_STATUS: $ALICE_ADD; alice status: $ALICE_STATUS_OUT; bob status: $BOB_STATUS_OUT; carol socket $CAROL_SOCKET, status: $CAROL_STATUS_OUT; root status: $ROOT_STATUS_OUT; bob diary $BOB_DIARY_STATUS: $BOB_DIARY; bob->alice $BOB_TO_ALICE_STATUS: $BOB_TO_ALICE; alice->bob $ALICE_TO_BOB_STATUS: $ALICE_TO_BOB; state '$STATE' db '$STATE_DB'; plugin $ALICE_PLUGIN; reload $USER_RELOAD; namespace warnings $USER_WARNINGS; $USER_PROPS"
  in_ns systemctl status mentoryd.socket --no-pager -l 2>&1 | tail -12
  as alice systemctl --user status mentoryd.socket mentoryd.service mentoryd-plugin@advisor.service --no-pager -l 2>&1 | tail -40
  in_ns journalctl --no-pager -n 40 "_UID=$ALICE" 2>&1 | tail -40
fi

# ---- 13b. No silent fallback: alice's own instance stopped, plain mentoryctl writes nothing shared ----------
echo "== 13b. a stopped user instance"
as alice timeout 30 systemctl --user stop mentoryd-plugin@advisor.service mentoryd.socket mentoryd.service
STOPPED_ADD=$(as alice timeout 30 mentoryctl diary add --date 2026-11-19 --emotion neutral --title "alice-stopped" \
  --text "meant for her own diary" 2>&1); STOPPED_ADD_STATUS=$?
SHARED=$(in_ns timeout 30 mentoryctl --socket $SYS diary list --json 2>&1); SHARED_STATUS=$?
as alice timeout 30 systemctl --user start mentoryd.socket
if [ $STOPPED_ADD_STATUS -eq 69 ] && grep -q "/run/user/$ALICE/mentoryd/mentoryd.sock" <<<"$STOPPED_ADD" \
   && grep -q "systemctl --user start mentoryd.socket" <<<"$STOPPED_ADD" && grep -q "enable-linger" <<<"$STOPPED_ADD" \
   && [ $SHARED_STATUS -eq 0 ] && ! grep -q "alice-stopped" <<<"$SHARED"; then
  pass "13b no silent fallback: alice (in the mentory group, system socket up) with her user instance stopped: mentoryctl diary add exits 69, '$(tr '\n' ' ' <<<"$STOPPED_ADD" | cut -c1-240)…'; the system instance's diary has no such entry"
else
  fail "13b no silent fallback: add $STOPPED_ADD_STATUS: $STOPPED_ADD; system diary $SHARED_STATUS: $(grep -c alice-stopped <<<"$SHARED") matching entries"
fi

# ---- 13c. A plugin declared by a reload: bob's instance declares none; his advisor waits, then serves ------------
echo "== 13c. a plugin declared by a reload"
# Enabled, so mentoryd.service wants it: a restart of the daemon starts it again, whatever state it is in.
as bob timeout 30 systemctl --user enable --now mentoryd-plugin@advisor.service >/dev/null 2>&1
bob_advisor_waits() { in_ns journalctl --no-pager -o cat "_UID=$BOB" 2>/dev/null | grep -q "declares no plugin for namespace advisor yet"; }
wait_for 30 bob_advisor_waits; BOB_WAITS=$?
BOB_UNIT_WAITING=$(as bob systemctl --user is-active mentoryd-plugin@advisor.service 2>&1)
BOB_DAEMON_PID=$(as bob systemctl --user show -p MainPID --value mentoryd.service)
in_ns install -d -o bob -g bob -m 0700 /home/bob/.config /home/bob/.config/mentoryd
printf '{ "plugins": { "advisor": {} } }\n' \
  | in_ns sh -c 'cat > /home/bob/.config/mentoryd/mentoryd.json; chown bob:bob /home/bob/.config/mentoryd/mentoryd.json'
DECLARE_START=$(date +%s%N)
as bob timeout 30 systemctl --user reload mentoryd.service; BOB_RELOAD=$?
bob_advisor() { as bob timeout 10 mentoryctl status 2>/dev/null | grep -q "advisor (advisor): connected"; }
wait_for 30 bob_advisor; BOB_DECLARED=$?
DECLARE_MS=$(( ($(date +%s%N) - DECLARE_START) / 1000000 ))
BOB_DAEMON_PID_AFTER=$(as bob systemctl --user show -p MainPID --value mentoryd.service)
BOB_SUGGEST=$(as bob timeout 30 mentoryctl call advisor.suggest '{"emotion": "EMOTION_NEUTRAL", "text": "a walk"}' --json 2>&1)
BOB_SUGGEST_STATUS=$?
# Down (stopped), then the daemon restarted: the plugin comes back with it.
as bob timeout 30 systemctl --user stop mentoryd-plugin@advisor.service
as bob timeout 60 systemctl --user restart mentoryd.service
wait_for 30 bob_advisor; BOB_BACK=$?
if [ $BOB_WAITS -eq 0 ] && [ "$BOB_UNIT_WAITING" = active ] && [ $BOB_RELOAD -eq 0 ] && [ $BOB_DECLARED -eq 0 ] \
   && [ -n "$BOB_DAEMON_PID" ] && [ "$BOB_DAEMON_PID" != 0 ] && [ "$BOB_DAEMON_PID" = "$BOB_DAEMON_PID_AFTER" ] \
   && [ $BOB_SUGGEST_STATUS -eq 0 ] && grep -q content <<<"$BOB_SUGGEST" && [ $BOB_BACK -eq 0 ]; then
  pass "13c plugin declared by reload: bob's mentoryd-plugin@advisor, not declared, waited (unit $BOB_UNIT_WAITING, not exit 77); after adding plugins.advisor to ~/.config/mentoryd/mentoryd.json, systemctl --user reload brought it up in ${DECLARE_MS} ms, same daemon (MainPID $BOB_DAEMON_PID), advisor.suggest answers; stopped, then systemctl --user restart mentoryd: the enabled plugin is back"
else
  fail "13c plugin declared by reload: waits $BOB_WAITS, unit '$BOB_UNIT_WAITING', reload $BOB_RELOAD, connected $BOB_DECLARED, MainPID $BOB_DAEMON_PID -> $BOB_DAEMON_PID_AFTER, suggest $BOB_SUGGEST_STATUS: $BOB_SUGGEST, back after restart $BOB_BACK"
  as bob systemctl --user status mentoryd.service mentoryd-plugin@advisor.service --no-pager -l 2>&1 | tail -30
  in_ns journalctl --no-pager -n 40 "_UID=$BOB" 2>&1 | tail -40
fi

if [ -n "${MENTORYD_TEST_JOURNAL:-}" ]; then
  in_ns journalctl -u mentoryd.service -u mentoryd.socket --no-pager > "$MENTORYD_TEST_JOURNAL" 2>&1
  echo "   the sandbox's mentoryd journal is in $MENTORYD_TEST_JOURNAL"
fi

# ---- scripts/uninstall.sh, or apt remove -------------------------------------------------------------
echo "== uninstall"
if [ -n "$DEBS" ]; then
  # The enablement symlinks stay until apt purge (scripts/deb-test.sh checks that); the rest goes now.
  if in_ns env DEBIAN_FRONTEND=noninteractive apt-get remove -y -q mentoryd mentory-advisor > "$WORK/uninstall.log" 2>&1 \
     && ! in_ns test -e /usr/bin/mentoryd && ! in_ns test -e /lib/systemd/system/mentoryd.service \
     && ! in_ns test -e /lib/systemd/system/mentoryd.socket && [ "$(prop LoadState mentoryd.service)" = "not-found" ] \
     && ! in_ns test -e /usr/lib/systemd/user/mentoryd.socket \
     && ! in_ns test -e "/run/user/$ALICE/mentoryd/mentoryd.sock" && ! as alice systemctl --user is-active -q mentoryd.service \
     && ! as alice systemctl --user is-active -q mentoryd-plugin@advisor.service \
     && ! in_ns test -e /run/mentoryd/mentoryd.sock && ! in_ns test -e /usr/share/man/man1/mentoryctl.1.gz \
     && ! in_ns test -e /usr/share/bash-completion/completions/mentoryctl && [ -z "$(in_ns pgrep -f '^/usr/bin/mentory')" ]; then
    pass "uninstall: apt remove stopped the units (alice's own instance and plugin too) and removed binaries, system and user units, man pages and completions (config and data kept)"
  else
    fail "uninstall: apt remove"; tail -20 "$WORK/uninstall.log"
  fi
elif in_ns "$SRC/scripts/uninstall.sh" > "$WORK/uninstall.log" 2>&1 \
   && ! in_ns test -e /usr/local/bin/mentoryd && ! in_ns test -e /etc/systemd/system/mentoryd.service \
   && ! in_ns test -e /etc/systemd/system/mentoryd.socket && [ "$(prop LoadState mentoryd.service)" = "not-found" ] \
   && ! in_ns test -e /etc/systemd/user/mentoryd.socket && ! in_ns test -e /etc/systemd/user/sockets.target.wants/mentoryd.socket \
   && ! in_ns test -e "/run/user/$ALICE/mentoryd/mentoryd.sock" && ! as alice systemctl --user is-active -q mentoryd.service \
   && ! in_ns test -e /run/mentoryd/mentoryd.sock && ! in_ns test -e /usr/local/share/man/man1/mentoryctl.1 \
   && ! in_ns test -e /usr/local/share/bash-completion/completions/mentoryctl; then
  pass "uninstall: scripts/uninstall.sh stopped the units (alice's own instance too) and removed binaries, system and user units, man pages and completions (config and data kept)"
else
  fail "uninstall: scripts/uninstall.sh"; cat "$WORK/uninstall.log"
fi

echo
if [ $FAILURES -eq 0 ]; then
  echo "systemd-test: all checks passed"
else
  echo "systemd-test: $FAILURES check(s) failed"
fi
exit $(( FAILURES > 0 ))
