#!/usr/bin/env bash
# Runs the README's tour of mentoryctl as a reader pastes it, against a real mentoryd, and fails if any
# of its commands fails. The tour is every fenced ```sh block between the README's `<!-- tour -->` and
# `<!-- end of tour -->` lines, run in order in one bash with `set -euo pipefail`.
#
# The reader runs the tour in a second terminal after scripts/run.sh, relying on mentoryctl's own socket
# discovery, so this script does not pass --socket either: it starts mentoryd in a temporary directory
# with its socket at $XDG_RUNTIME_DIR/mentoryd/mentoryd.sock and points XDG_RUNTIME_DIR there, the first
# place mentoryctl looks. The daemon dies with this script (a trap, and setpriv --pdeathsig KILL should
# the script itself be killed), and the directory is removed on every exit.
#
# Usage: scripts/test-tour.sh [--bin-dir DIR]   (DIR holds mentoryd and mentoryctl; default: the debug
#                                                build, built first)
set -euo pipefail
cd "$(dirname "$0")/.."
bin_dir=""
[ "${1:-}" = "--bin-dir" ] && bin_dir=$2
if [ -z "$bin_dir" ]; then
  swift build --product mentoryd >&2
  swift build --product mentoryctl >&2
  bin_dir=$(swift build --show-bin-path)
fi
for binary in mentoryd mentoryctl; do
  [ -x "$bin_dir/$binary" ] || { echo "test-tour: no $binary in $bin_dir" >&2; exit 66; }
done
# Absolute, because the tour runs in a directory of its own.
bin_dir=$(cd "$bin_dir" && pwd)

work=$(mktemp -d "${TMPDIR:-/tmp}/mentory-tour.XXXXXX")
pid=""
cleanup() {
  [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# The tour as a script whose line N is README.md's line N (every line outside the tour's sh blocks left
# empty), so that $LINENO in an error is the README's line. Line 1, the README's title, becomes the
# preamble: strict mode, and a trap naming the command that failed.
awk '
  NR == 1 {
    print "set -Eeuo pipefail; trap '\''echo \"test-tour: README.md:$LINENO failed (exit $?): $BASH_COMMAND\" >&2'\'' ERR"
    next
  }
  /^<!-- tour -->$/ { tours++; in_tour = 1; print ""; next }
  /^<!-- end of tour -->$/ { ends++; in_tour = 0; print ""; next }
  in_tour && !in_block && /^```sh$/ { in_block = 1; blocks++; print ""; next }
  in_block && /^```$/ { in_block = 0; print ""; next }
  in_block { print; next }
  in_tour && /^```/ { others++ }
  { print "" }
  END {
    if (tours != 1 || ends != 1) { print "test-tour: README.md needs exactly one <!-- tour --> and one <!-- end of tour --> line" > "/dev/stderr"; exit 1 }
    if (blocks == 0) { print "test-tour: the tour holds no ```sh block" > "/dev/stderr"; exit 1 }
    if (in_block) { print "test-tour: the tour ends inside a ```sh block" > "/dev/stderr"; exit 1 }
    if (others > 0) { print "test-tour: the tour holds a fenced block that is not ```sh; it would not be run" > "/dev/stderr"; exit 1 }
  }
' README.md >"$work/tour.sh"
echo "test-tour: $(grep -c . "$work/tour.sh") lines of the README's tour" >&2

# The daemon's and the tour's surroundings, all inside $work: the runtime directory discovery searches
# (0700, as systemd makes $XDG_RUNTIME_DIR), the state directory, an empty configuration (the embedded
# defaults, as scripts/run.sh runs with; no /etc or ~/.config file applies), and TMPDIR for the tour's
# own temporary files. Nothing from the caller's environment chooses another socket or setting.
mkdir -m 0700 "$work/runtime" "$work/state" "$work/tmp" "$work/cwd"
echo '{}' >"$work/mentoryd.json"
unset MENTORY_SOCKET RUNTIME_DIRECTORY STATE_DIRECTORY CONFIGURATION_DIRECTORY NOTIFY_SOCKET LISTEN_FDS LISTEN_PID
while read -r name; do unset "$name"; done < <(compgen -e | grep '^MENTORYD_' || true)
export XDG_RUNTIME_DIR=$work/runtime
export TMPDIR=$work/tmp

setpriv --pdeathsig KILL "$bin_dir/mentoryd" --config "$work/mentoryd.json" --state-dir "$work/state" \
  --socket "$XDG_RUNTIME_DIR/mentoryd/mentoryd.sock" >"$work/daemon.log" 2>&1 &
pid=$!
# Ready when mentoryctl, searching as the tour will, gets an answer; at most 60 s on a loaded machine.
ready=0
for _ in $(seq 1 600); do
  if "$bin_dir/mentoryctl" ping >/dev/null 2>&1; then ready=1; break; fi
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if [ $ready -ne 1 ]; then
  cat "$work/daemon.log" >&2
  echo "test-tour: mentoryd did not start, or mentoryctl's discovery did not find it" >&2
  exit 1
fi

# The tour itself, with this mentoryctl first on PATH, in a directory of its own; bounded so that a
# command that waits for ever fails the test instead of hanging CI.
status=0
(cd "$work/cwd" && PATH="$bin_dir:$PATH" timeout --kill-after=10 300 bash "$work/tour.sh") || status=$?
if [ $status -ne 0 ]; then
  echo "test-tour: the README's tour failed (exit $status); the daemon's log:" >&2
  cat "$work/daemon.log" >&2
  exit 1
fi

# The daemon outlived the tour and stops cleanly.
kill -TERM "$pid"
if ! wait "$pid"; then
  cat "$work/daemon.log" >&2
  echo "test-tour: mentoryd did not stop cleanly after the tour" >&2
  exit 1
fi
pid=""
echo "test-tour: the README's tour runs as pasted"
