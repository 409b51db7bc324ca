#!/usr/bin/env bash
# Builds the example handler package (Examples/gratitude: mentoryd plus a `gratitude` namespace,
# see docs/HANDLERS.md), runs its tests, then starts its daemon and answers a call with mentoryctl:
# describe lists the new namespace, call reaches it, gratitude.fromDiary reads the caller's diary (an
# entry added with `mentoryctl diary add` shows up; a caller denied `diary.*` gets PERMISSION_DENIED,
# checked as uid 65534 when run as root), a disabled handler is absent. First it checks that every file
# of the example is shown, as it is, in docs/HANDLERS.md: the walk-through is the example.
#
# The package commits the code generated from its .proto (Sources/GratitudeHandler/Generated, written by
# mentoryd's command plugin generate-mentory-schema), so its build runs no generator; this script
# regenerates it, which needs protoc (apt-get install protobuf-compiler libprotobuf-dev), and fails when
# the committed files differ (leaving the regenerated ones in place, to commit). The generated files are
# the only ones docs/HANDLERS.md does not show.
#
# Usage: scripts/test-example.sh [--bin-dir DIR]   (DIR holds mentoryctl; default: swift build's)
set -euo pipefail
cd "$(dirname "$0")/.."
bin_dir=""
[ "${1:-}" = "--bin-dir" ] && bin_dir=$2
[ -n "$bin_dir" ] || { swift build --product mentoryctl >&2; bin_dir=$(swift build --show-bin-path); }
ctl=$bin_dir/mentoryctl

# docs/HANDLERS.md shows each file of the example in a fenced block preceded by the line
# `<!-- example: PATH -->` (PATH under Examples/gratitude); each must equal its file, and every file
# must be shown.
doc_check=$(mktemp -d "${TMPDIR:-/tmp}/mentory-example-doc.XXXXXX")
awk -v dir="$doc_check" '
  /^<!-- example: .* -->$/ { name = $3; gsub("/", "%", name); pending = 1; next }
  pending && /^```/ { pending = 0; inside = 1; out = dir "/" name; printf "" > out; next }
  inside && /^```$/ { inside = 0; close(out); next }
  inside { print > out }
' docs/HANDLERS.md
doc_status=0
while IFS= read -r file; do
  shown=$doc_check/${file//\//%}
  if [ ! -f "$shown" ]; then
    echo "test-example: docs/HANDLERS.md does not show Examples/gratitude/$file" >&2
    doc_status=1
  elif ! diff -u "Examples/gratitude/$file" "$shown" >&2; then
    echo "test-example: docs/HANDLERS.md shows Examples/gratitude/$file otherwise (diff above)" >&2
    doc_status=1
  fi
  rm -f "$shown"
done < <(cd Examples/gratitude && find . -path ./.build -prune -o -path ./.swiftpm -prune \
  -o -path '*/Generated' -prune -o -type f ! -name Package.resolved -print | sed 's#^\./##' | sort)
for extra in "$doc_check"/*; do
  [ -e "$extra" ] || continue
  echo "test-example: docs/HANDLERS.md shows $(basename "$extra" | tr % /), which Examples/gratitude lacks" >&2
  doc_status=1
done
rm -rf "$doc_check"
[ $doc_status -eq 0 ] || exit 1

# The committed generated code must be what generate-mentory-schema writes from the .proto now.
committed=$(mktemp -d "${TMPDIR:-/tmp}/mentory-example-generated.XXXXXX")
cp -R Examples/gratitude/Sources/GratitudeHandler/Generated "$committed/"
(cd Examples/gratitude && swift package --allow-writing-to-package-directory generate-mentory-schema >&2)
if ! diff -ru "$committed/Generated" Examples/gratitude/Sources/GratitudeHandler/Generated >&2; then
  echo "test-example: Examples/gratitude's generated code is stale (diff above); it is regenerated now: commit it" >&2
  rm -rf "$committed"
  exit 1
fi
rm -rf "$committed"

(cd Examples/gratitude && swift build --build-tests && swift test --skip-build)
daemon=$(cd Examples/gratitude && swift build --show-bin-path)/mentoryd-gratitude

work=$(mktemp -d "${TMPDIR:-/tmp}/mentory-example.XXXXXX")
# Another uid (below) reaches the socket through it.
chmod 755 "$work"
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

# The socket is open to everyone, and uid 65534 may not touch the diary.
start on MENTORYD_SOCKET_MODE=0666 MENTORYD_ACCESS_RULES="deny uid=65534 diary.*"
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

# gratitude.fromDiary reads the caller's diary through context.call: the pleasant entries' texts.
"$ctl" --socket "$socket" diary add --date 2026-01-05 --emotion pleasant --title walk \
  --text "a long walk by the river" >/dev/null || fail "diary add failed"
"$ctl" --socket "$socket" diary add --date 2026-01-06 --emotion unPleasant --title rain \
  --text "soaked on the way home" >/dev/null || fail "diary add failed"
reply=$("$ctl" --socket "$socket" call gratitude.fromDiary)
echo "$reply" | grep -q 'a long walk by the river' || fail "gratitude.fromDiary does not return the entry: $reply"
if echo "$reply" | grep -q 'soaked'; then fail "gratitude.fromDiary returned an unpleasant entry: $reply"; fi

# A caller denied diary.* gets PERMISSION_DENIED from gratitude.fromDiary, which calls diary.list as that
# caller, though gratitude itself is open to it. Only root can run mentoryctl as another uid.
if [ "$(id -u)" -eq 0 ]; then
  as_nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups "$ctl" --socket "$socket")
  "${as_nobody[@]}" call gratitude.list >"$work/out" 2>&1 || fail "uid 65534 may not list gratitude: $(cat "$work/out")"
  if "${as_nobody[@]}" call gratitude.fromDiary >"$work/err" 2>&1; then
    fail "uid 65534, denied diary.*, read the diary through gratitude.fromDiary: $(cat "$work/err")"
  fi
  grep -q 'permission denied' "$work/err" && grep -q 'diary.list' "$work/err" ||
    fail "the denied caller's error says: $(cat "$work/err")"
else
  echo "test-example: not root, so the denied caller (uid 65534) is not checked" >&2
fi
stop

start off MENTORYD_HANDLERS_GRATITUDE_ENABLED=false
if "$ctl" --socket "$socket" describe gratitude >/dev/null 2>&1; then
  fail "a disabled gratitude handler is still described"
fi
stop

echo "test-example: the example package builds, passes its tests and answers calls"
