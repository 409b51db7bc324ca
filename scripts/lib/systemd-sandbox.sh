# shellcheck shell=bash
# Boots systemd as PID 1 of private PID, mount and UTS namespaces over a throwaway overlay of / (writes
# land in a tmpfs; the host's files, /tmp and /run are never touched). It follows
# ../shared/docs/systemd-sandbox.md, except that it enters the overlay with pivot_root instead of
# chroot, so PrivateUsers= works. Sourced by scripts/systemd-test.sh, scripts/deb-test.sh and
# scripts/systemd-user-units-check.sh, which run as root.
#
#   WORK=$(mktemp -d ...); export SDBOX=/run/NAME.$$   # where the sandbox mounts its tmpfs
#   trap 'sandbox_stop; rm -rf "$WORK"' EXIT
#   sandbox_boot HOSTNAME [UNSHARE_OPTION...]          # e.g. --net for a sandbox with no network
#   nsenter -t "$SD" -p -m -u -r CMD...                 # SD: the host PID of the sandbox's systemd
#
# sandbox_boot exits the script (status 1, after a FAIL line) when systemd does not come up in 30 s.

SD=""
UNSHARE=""

# wait_for SECONDS CMD...: polls CMD every 0.1 s until it succeeds or SECONDS pass.
wait_for() {
  local deadline=$(( $(date +%s%N) + $1 * 1000000000 )); shift
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s%N)" -ge "$deadline" ] && return 1
    sleep 0.1
  done
}

# sandbox_boot HOSTNAME [UNSHARE_OPTION...]: boots the sandbox and waits for basic.target; sets SD and UNSHARE.
sandbox_boot() {
  local hostname=$1; shift
  cat > "$WORK/boot.sh" <<EOF_BOOT
#!/usr/bin/env bash
exec unshare --pid --fork --mount --uts $* --propagation private bash -c '
set -e
B=\$SDBOX; mkdir -p \$B; mount -t tmpfs tmpfs \$B; mkdir -p \$B/upper \$B/work \$B/root
mount -t overlay overlay -o lowerdir=/,upperdir=\$B/upper,workdir=\$B/work \$B/root
R=\$B/root
mount --rbind /dev \$R/dev; mount --rbind /sys \$R/sys; mount -t proc proc \$R/proc
mount --bind \$R/proc/sys \$R/proc/sys; mount -o remount,bind,ro \$R/proc/sys
mount -t tmpfs tmpfs \$R/run; mount -t tmpfs tmpfs \$R/tmp
hostname $hostname
# pivot_root rather than chroot: the kernel refuses user namespaces (PrivateUsers=) to a chrooted
# process, and the units under test use them. The old root is detached, so nothing leaks back.
mkdir -p \$R/.sdbox-oldroot; cd \$R; pivot_root . .sdbox-oldroot; cd /; umount -l /.sdbox-oldroot
exec /lib/systemd/systemd --system --unit=basic.target'
EOF_BOOT
  chmod +x "$WORK/boot.sh"
  echo "== booting systemd in a PID namespace"
  setsid "$WORK/boot.sh" >"$WORK/boot.log" 2>&1 </dev/null &
  UNSHARE=$!
  for _ in $(seq 100); do SD=$(pgrep -P "$UNSHARE" -x systemd) && break; sleep 0.1; done
  if [ -z "$SD" ]; then
    echo "FAIL boot: systemd did not start"; cat "$WORK/boot.log"; exit 1
  fi
  if ! wait_for 30 sh -c "nsenter -t $SD -p -m -u -r systemctl is-system-running 2>/dev/null | grep -qE 'running|degraded'"; then
    echo "FAIL boot: systemd did not reach basic.target"; exit 1
  fi
  echo "   systemd $(nsenter -t "$SD" -p -m -u -r systemctl --version | head -1 | awk '{print $2}') is PID 1 of the sandbox (host PID $SD)"
}

# sandbox_stop: kills the sandbox's PID 1, and with it everything in it; removes the tmpfs's mount point.
sandbox_stop() {
  [ -n "$SD" ] && kill -KILL "$SD" 2>/dev/null
  [ -n "$UNSHARE" ] && kill -KILL "$UNSHARE" 2>/dev/null
  [ -n "$UNSHARE" ] && wait "$UNSHARE" 2>/dev/null
  rmdir "$SDBOX" 2>/dev/null
  return 0
}
