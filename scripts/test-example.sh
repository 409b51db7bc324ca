#!/usr/bin/env bash
# Builds the example handler package (Examples/gratitude: mentoryd plus a `gratitude` namespace,
# see docs/HANDLERS.md), runs its tests, then starts its daemon and answers a call with mentoryctl:
# describe lists the new namespace, call reaches it, a disabled handler is absent.
#
# Usage: scripts/test-example.sh [--bin-dir DIR]   (DIR holds mentoryctl; default: swift build's)
set -euo pipefail
cd "$(dirname "$0")/.."
bin_dir=""
[ "${1:-}" = "--bin-dir" ] && bin_dir=$2
[ -n "$bin_dir" ] || { swift build --product mentoryctl >&2; bin_dir=$(swift build --show-bin-path); }
ctl=$bin_dir/mentoryctl

(cd Examples/gratitude && swift build --build-tests && swift test --skip-build)
daemon=$(cd Examples/gratitude && swift build --show-bin-path)/mentoryd-gratitude

work=$(mktemp -d "${TMPDIR:-/tmp}/mentory-example.XXXXXX")
pid=""
cleanup() {
  [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

start() {
  socket=$work/$1.sock
  shift
  env "$@" MENTORYD_STORAGE_BACKEND=memory \
    setpriv --pdeathsig KILL "$daemon" --socket "$socket" --state-dir "$work/state" \
    >"$work/daemon.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 200); do
    "$ctl" --socket "$socket" ping >/dev/null 2>&1 && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  cat "$work/daemon.log" >&2
  echo "test-example: mentoryd-gratitude did not start" >&2
  exit 1
}
stop() {
  kill -TERM "$pid"
  wait "$pid" || { echo "test-example: mentoryd-gratitude did not stop cleanly" >&2; exit 1; }
  pid=""
}
fail() {
  echo "test-example: $*" >&2
  cat "$work/daemon.log" >&2
  exit 1
}

start on
"$ctl" --socket "$socket" describe gratitude | grep -q 'add' || fail "describe does not list gratitude.add"
reply=$("$ctl" --socket "$socket" call gratitude.add '{"text": "tea with a friend"}')
echo "$reply" | grep -q '"text": *"tea with a friend"' || fail "gratitude.add replied: $reply"
echo "$reply" | grep -q '"number": *"1"' || fail "the first note is not number 1: $reply"
list=$("$ctl" --socket "$socket" call gratitude.list)
echo "$list" | grep -q 'tea with a friend' || fail "gratitude.list replied: $list"
if "$ctl" --socket "$socket" call gratitude.add '{"text": "  "}' >"$work/err" 2>&1; then
  fail "an empty note was accepted"
fi
grep -q 'empty' "$work/err" || fail "the empty note's error says: $(cat "$work/err")"
stop

start off MENTORYD_HANDLERS_GRATITUDE_ENABLED=false
if "$ctl" --socket "$socket" describe gratitude >/dev/null 2>&1; then
  fail "a disabled gratitude handler is still described"
fi
stop

echo "test-example: the example package builds, passes its tests and answers calls"
