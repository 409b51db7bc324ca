#!/usr/bin/env bash
# Removes what scripts/install.sh installed: stops and disables the units (the system instance's,
# and every running user manager's own mentoryd; the links people made by enabling user units,
# such as mentoryd-plugin@advisor.service, go too), removes the binaries,
# units, sysusers entry, docs, man pages and completions. Keeps the config (/etc/mentoryd), the
# data (/var/lib/mentoryd) and the mentory user unless --purge is given.
#
# Usage: sudo scripts/uninstall.sh [--prefix DIR] [--purge]
#   --prefix DIR   the prefix given to install.sh (default /usr/local)
#   --purge        also delete /etc/mentoryd, /var/lib/mentoryd, the plugins' state (/var/lib/mentory-plugins)
#                  and the mentory user and group
set -euo pipefail

PREFIX=/usr/local
PURGE=no
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) PREFIX=$2; shift 2 ;;
    --purge) PURGE=yes; shift ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "uninstall.sh: unknown argument '$1' (see --help)" >&2; exit 64 ;;
  esac
done
if [ "$(id -u)" -ne 0 ]; then
  echo "uninstall.sh: run it as root (sudo scripts/uninstall.sh)" >&2
  exit 77
fi

UNIT_DIR=/etc/systemd/system
USER_UNIT_DIR=/etc/systemd/user
if [ -d /run/systemd/system ]; then
  # Each running user manager's own instance: its plugins, the daemon and the socket (bounded waits).
  for manager in $(systemctl list-units --plain --no-legend --state=active 'user@*.service' 2>/dev/null | awk '{print $1}'); do
    uid=${manager#user@}; uid=${uid%.service}
    case "$uid" in ''|*[!0-9]*) continue ;; esac
    setpriv --reuid="$uid" --regid="$(id -g "$uid" 2>/dev/null || echo "$uid")" --init-groups \
      env XDG_RUNTIME_DIR="/run/user/$uid" DBUS_SESSION_BUS_ADDRESS="unix:path=/run/user/$uid/bus" \
      timeout 30 systemctl --user stop 'mentoryd-plugin@*.service' mentoryd.service mentoryd.socket 2>/dev/null || true
  done
fi
systemctl --global disable mentoryd.socket 2>/dev/null || true
# What people enabled under their own managers (systemctl --user enable mentoryd-plugin@advisor puts a
# link in ~/.config/systemd/user/mentoryd.service.wants): the links to the user units removed below,
# which would be left dangling, whether or not that person is logged in now.
# The links point into /etc/systemd/user, or into a folder that leads there (Debian's
# /etc/xdg/systemd/user -> ../../systemd/user, which systemctl finds first).
USER_UNIT_REAL=$(readlink -f "$USER_UNIT_DIR" 2>/dev/null || echo "$USER_UNIT_DIR")
remove_user_links() {
  local home=$1 link target
  for link in "$home"/.config/systemd/user/*.wants/mentoryd.service "$home"/.config/systemd/user/*.wants/mentoryd.socket \
    "$home"/.config/systemd/user/*.wants/mentoryd-plugin@*.service; do
    [ -L "$link" ] || continue
    target=$(readlink "$link")
    [ "$(readlink -f "${target%/*}" 2>/dev/null)" = "$USER_UNIT_REAL" ] || continue
    case "${target##*/}" in mentoryd.service | mentoryd.socket | mentoryd-plugin@.service) rm -f "$link" ;; esac
  done
  # The folder systemctl made for the plugins' links, when nothing else is left in it.
  rmdir "$home/.config/systemd/user/mentoryd.service.wants" 2>/dev/null || true
}
while IFS=: read -r _ _ _ _ _ home _; do
  [ -n "$home" ] && [ "$home" != / ] && [ -d "$home/.config/systemd/user" ] && remove_user_links "$home"
done < <(getent passwd)
rm -f "$USER_UNIT_DIR/mentoryd.service" "$USER_UNIT_DIR/mentoryd.socket" "$USER_UNIT_DIR/mentoryd-plugin@.service"
if [ -d /run/systemd/system ]; then
  # Every plugin instance first (they are PartOf mentoryd.service, and would stop with it anyway).
  for unit in $(systemctl list-units --all --plain --no-legend 'mentoryd-plugin@*' 2>/dev/null | awk '{print $1}'); do
    systemctl disable --now "$unit" 2>/dev/null || true
  done
  systemctl disable --now mentoryd.socket mentoryd.service 2>/dev/null || true
fi
rm -f "$UNIT_DIR/mentoryd.service" "$UNIT_DIR/mentoryd.socket" "$UNIT_DIR/mentoryd-plugin@.service"
rm -f "$PREFIX/bin/mentory-advisor"
rm -f "$PREFIX/bin/mentoryd" "$PREFIX/bin/mentoryctl"
rm -f "$PREFIX/lib/sysusers.d/mentoryd.conf"
rm -rf "$PREFIX/share/doc/mentoryd"
rm -f "$PREFIX/share/man/man1/mentoryctl.1" "$PREFIX/share/man/man8/mentoryd.8"
rm -f "$PREFIX/share/bash-completion/completions/mentoryctl" "$PREFIX/share/zsh/site-functions/_mentoryctl" \
  "$PREFIX/share/fish/vendor_completions.d/mentoryctl.fish"
# RuntimeDirectoryPreserve=yes keeps /run/mentoryd between runs; nothing uses it now.
rm -rf /run/mentoryd
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload
  systemctl reset-failed mentoryd.service mentoryd.socket 2>/dev/null || true
fi
echo "removed the mentoryd binaries, units, man pages, completions and sysusers entry"

if [ "$PURGE" = yes ]; then
  rm -rf /etc/mentoryd /var/lib/mentoryd /var/lib/private/mentoryd
  # The plugins' state (StateDirectory=mentory-plugins/NAME), owned by the user deleted below.
  rm -rf /var/lib/mentory-plugins
  getent passwd mentory >/dev/null && userdel mentory
  getent group mentory >/dev/null && groupdel mentory
  echo "purged /etc/mentoryd, /var/lib/mentoryd, /var/lib/mentory-plugins and the mentory user and group"
else
  echo "kept /etc/mentoryd, /var/lib/mentoryd and the mentory user (--purge removes them)"
fi
