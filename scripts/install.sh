#!/usr/bin/env bash
# Installs mentoryd as a systemd service on this host:
#   PREFIX/bin/mentoryd, PREFIX/bin/mentoryctl          (release build, Swift runtime linked statically)
#   /etc/systemd/system/mentoryd.{service,socket}       (the units in systemd/)
#   PREFIX/lib/sysusers.d/mentoryd.conf                 (the mentory user and group, created now)
#   /etc/mentoryd/mentoryd.json                         (config/mentoryd.json; an existing one is kept)
# then enables and starts mentoryd.socket: the daemon starts on the first connection.
#
# Usage: sudo scripts/install.sh [--prefix DIR] [--bin-dir DIR] [--no-start]
#   --prefix DIR    install under DIR instead of /usr/local
#   --bin-dir DIR   install the mentoryd and mentoryctl found in DIR instead of building them
#   --no-start      install and enable, but do not start the socket now
# Undo with scripts/uninstall.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

PREFIX=/usr/local
BIN_DIR=""
START=yes
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) PREFIX=$2; shift 2 ;;
    --bin-dir) BIN_DIR=$2; shift 2 ;;
    --no-start) START=no; shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown argument '$1' (see --help)" >&2; exit 64 ;;
  esac
done
if [ "$(id -u)" -ne 0 ]; then
  echo "install.sh: run it as root (sudo scripts/install.sh): it writes to $PREFIX, /etc and creates a user" >&2
  exit 77
fi

UNIT_DIR=/etc/systemd/system
SYSUSERS_DIR=$PREFIX/lib/sysusers.d
CONFIG_DIR=/etc/mentoryd
DOC_DIR=$PREFIX/share/doc/mentoryd

if [ -z "$BIN_DIR" ]; then
  echo "building mentoryd and mentoryctl (release)"
  swift build -c release --static-swift-stdlib --product mentoryd
  swift build -c release --static-swift-stdlib --product mentoryctl
  BIN_DIR=$(swift build -c release --static-swift-stdlib --show-bin-path)
fi
for binary in mentoryd mentoryctl; do
  [ -x "$BIN_DIR/$binary" ] || { echo "install.sh: no $binary in $BIN_DIR" >&2; exit 66; }
done

install -d -m 0755 "$PREFIX/bin" "$UNIT_DIR" "$SYSUSERS_DIR" "$CONFIG_DIR" "$DOC_DIR"
install -m 0755 "$BIN_DIR/mentoryd" "$PREFIX/bin/mentoryd"
install -m 0755 "$BIN_DIR/mentoryctl" "$PREFIX/bin/mentoryctl"
echo "installed $PREFIX/bin/mentoryd and $PREFIX/bin/mentoryctl"

# The unit names the binaries by absolute path; follow --prefix.
sed "s|/usr/local/bin/mentoryd|$PREFIX/bin/mentoryd|; s|/usr/local/bin/mentoryctl|$PREFIX/bin/mentoryctl|; s|/usr/local/share/doc/mentoryd|$DOC_DIR|" \
  systemd/mentoryd.service > "$UNIT_DIR/mentoryd.service"
chmod 0644 "$UNIT_DIR/mentoryd.service"
install -m 0644 systemd/mentoryd.socket "$UNIT_DIR/mentoryd.socket"
echo "installed $UNIT_DIR/mentoryd.service and mentoryd.socket"

install -m 0644 systemd/sysusers.d/mentoryd.conf "$SYSUSERS_DIR/mentoryd.conf"
if command -v systemd-sysusers >/dev/null; then
  systemd-sysusers "$SYSUSERS_DIR/mentoryd.conf"
else
  getent group mentory >/dev/null || groupadd --system mentory
  getent passwd mentory >/dev/null \
    || useradd --system --gid mentory --home-dir /var/lib/mentoryd --shell /usr/sbin/nologin mentory
fi
echo "user and group 'mentory' exist; add users who may use mentoryctl with: usermod -aG mentory NAME"

if [ -e "$CONFIG_DIR/mentoryd.json" ]; then
  install -m 0644 config/mentoryd.json "$CONFIG_DIR/mentoryd.json.default"
  echo "kept $CONFIG_DIR/mentoryd.json; the shipped default is $CONFIG_DIR/mentoryd.json.default"
else
  install -m 0644 config/mentoryd.json "$CONFIG_DIR/mentoryd.json"
  echo "installed $CONFIG_DIR/mentoryd.json"
fi
[ -f README.md ] && install -m 0644 README.md "$DOC_DIR/README.md"
[ -f docs/PROTOCOL.md ] && install -m 0644 docs/PROTOCOL.md "$DOC_DIR/PROTOCOL.md"

if [ -d /run/systemd/system ]; then
  systemctl daemon-reload
  if [ "$START" = yes ]; then
    systemctl enable --now mentoryd.socket
    echo "mentoryd.socket is listening on /run/mentoryd/mentoryd.sock; try: mentoryctl ping"
  else
    systemctl enable mentoryd.socket
    echo "mentoryd.socket is enabled; start it with: systemctl start mentoryd.socket"
  fi
else
  echo "systemd is not running here: start the units once it is (systemctl enable --now mentoryd.socket)"
fi
