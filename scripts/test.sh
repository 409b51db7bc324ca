#!/usr/bin/env bash
# The whole test suite, as CI runs it:
#   0. every committed Swift file passes `swift format lint --strict` and uses no `Synchronization.Mutex`
#      (ThreadSanitizer does not see its hand-over; NIOLockedValueBox instead); the generated code is what the
#      schema generates (scripts/generate-protos.sh --check), the man pages are what the commands' help
#      generates (scripts/generate-manuals.sh --check), the version is declared once and said the same in the
#      Python client and debian/changelog (scripts/check-version.sh), and the benchmarks' C load generators compile
#   1. unit and end-to-end tests (debug build), then the library products' DocC documentation, built
#      with warnings as errors (scripts/check-docs.sh: every ``symbol link`` resolves), then their public
#      API compared with the baseline's, failing on a breaking change (scripts/check-api.sh)
#   2. the release build as it ships (the Swift runtime linked statically, Package.swift's ShippedBinaries
#      link options: what install.sh installs and the Debian packages contain), the Debian packages built from
#      it and checked by lintian (scripts/package-deb.sh), the allocation guard on the release build
#      (allocations per request and per event, against budgets), the Python client's pytest suite against the
#      real daemon, release build (scripts/test-python.sh), the example handler package, built, tested and
#      answering calls (scripts/test-example.sh), and the README's tour of mentoryctl run as pasted
#      (scripts/test-tour.sh)
#   3. the Swift suite under ThreadSanitizer (its own build folder, .build-tsan)
#   4. each libFuzzer target for a short, bounded time (scripts/fuzz.sh)
#   5. the real-systemd harness (scripts/systemd-test.sh) on the release build, installed from the Debian
#      packages when they were built (else by install.sh), and the packages' install, upgrade, remove and
#      purge under real systemd (scripts/deb-test.sh), when running as root
# At the end (or where it stopped) it prints how many seconds each section took.
#
# Usage: scripts/test.sh [--quick]
#   --quick   only step 0 and the tests of step 1, for a fast local loop
# Environment: MENTORYD_FUZZ_SECONDS (default 30) sets step 4's time per target; MENTORYD_API_BASELINE (a tag,
# branch or commit) the API check's baseline, by default the newest v* tag, else the commit in .ci/api-baseline.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
[ "${1:-}" = "--quick" ] && quick=1

# Each section's name and duration, for the summary printed when the run ends, however it ends.
section_names=()
section_seconds=()
section_started=0
end_section() {
  [ ${#section_names[@]} -gt 0 ] && section_seconds+=($(( $(date +%s) - section_started )))
  return 0
}
section() {
  end_section
  section_names+=("$1")
  section_started=$(date +%s)
  printf '\n==> %s (%s)\n' "$1" "$(date +%T)"
}
print_durations() {
  end_section
  local i total=0
  printf '\n==> seconds per section\n'
  for i in "${!section_seconds[@]}"; do
    printf '%6d  %s\n' "${section_seconds[$i]}" "${section_names[$i]}"
    total=$(( total + section_seconds[i] ))
  done
  printf '%6d  in all\n' "$total"
}

# A failing run's cause is printed again at the end of the output, because a CI log is often read only from its
# tail: Swift Testing reports each failed expectation where it happens, among hundreds of lines of progress.
logs=$(mktemp -d "${TMPDIR:-/tmp}/mentoryd-test-logs.XXXXXX")
# The Swift tests put their temporary files, sockets and daemons' state in TMPDIR (MentoryTestSupport's
# TestTemporaryDirectory): a directory of this run's own, removed when the run ends, however it ends (a failed
# step, Ctrl-C, or CI's time-out sending SIGTERM), so that a test killed before its own clean-up leaves nothing
# behind. Only the test processes get it: paths under it stay short enough for a Unix socket's 107 bytes.
scratch=$(mktemp -d "${TMPDIR:-/tmp}/mentoryd-tests.XXXXXX")
chmod 755 "$scratch" # some tests run mentoryctl as uid 65534 against a daemon's socket in there
trap 'print_durations; rm -rf "$logs" "$scratch"' EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
#
# The suite runs from its test bundle rather than through `swift test`, so that it can bound how many tests
# run at once (Swift Testing otherwise starts all of them together). About 100 of them start daemons and
# clients; all at once on two cores, a single call waited more than 30 s for the CPU. With a bounded width
# every wait a test makes is its own. MENTORYD_TEST_WIDTH overrides it (default: 4 per core).
width=${MENTORYD_TEST_WIDTH:-$(($(nproc) * 4))}
swift_test() {
  local bin_dir=$1 log="$logs/swift-test.log" status=0
  shift
  TMPDIR=$scratch "$bin_dir/mentorydPackageTests.xctest" --testing-library swift-testing \
    --experimental-maximum-parallelization-width "$width" "$@" 2>&1 | tee "$log" || status=$?
  if [ $status -ne 0 ]; then
    printf '\n==> the tests in %s failed (exit %d); the failures again:\n' "$bin_dir" "$status"
    grep -E -A4 '✘ Test .*(recorded an issue|failed)|error:|Fatal error|Thread Sanitizer|WARNING: ThreadSanitizer' \
      "$log" | grep -v '^--$' | head -200 || true
  fi
  return $status
}

scripts/install-deps.sh

section "swift format"
# Every committed Swift file, generated code included, is as .swift-format wants it.
git ls-files -z '*.swift' | xargs -0 swift format lint --strict
# Shared state behind a lock, in what step 3 runs, uses a pthread mutex (NIOLockedValueBox), which ThreadSanitizer
# sees. Synchronization's Mutex hands a contended lock over inside a PI futex, which it does not see, and step 3 then
# reports a race that is not one (BackgroundJobsTests did, once in several runs).
if git grep -n -E '\bMutex *[<(]' -- 'Sources/*.swift' 'Tests/*.swift'; then
  echo "==> Synchronization.Mutex above: use NIOLockedValueBox, which ThreadSanitizer sees (docs/TESTING.md)" >&2
  exit 1
fi

section "generated code is current"
scripts/generate-protos.sh --check
scripts/generate-manuals.sh --check
scripts/check-version.sh

# Benchmarks are not tests, but their C load generators must keep compiling against the protocol.
section "benchmark load generators compile"
c_compiler=$(command -v cc || command -v clang)
for program in loadgen fanout; do
  "$c_compiler" -O2 -Wall -Wextra -Werror -fsyntax-only "Benchmarks/loadgen/$program.c"
done
"$c_compiler" -O2 -Wall -Wextra -Werror -fsyntax-only Benchmarks/loadgen/wire.c Benchmarks/loadgen/net.c \
  Benchmarks/loadgen/echo-server.c Benchmarks/loadgen/readytime.c

section "unit and end-to-end tests"
# Every module a target imports is one it declares in Package.swift.
swift build --build-tests --explicit-target-dependency-import-check error
swift_test "$(swift build --show-bin-path)"
[ $quick -eq 1 ] && exit 0

section "DocC documentation of the library products"
scripts/check-docs.sh

section "API compatibility of the library products"
# Against MENTORYD_API_BASELINE when set; docs/TESTING.md, "API compatibility", says how to take in an intended break.
scripts/check-api.sh

# The optimized build is what users run, and the optimizer is where a miscompile shows up (the
# dispatch fuzzer once found `diary.list` crashing only there), so the Python suite uses it. It is built
# once, as it ships (scripts/lib/shipped-build.sh): the Swift runtime linked statically, with the ShippedBinaries
# link options and run-time exclusivity checks left to the debug build, as
# scripts/install.sh installs it and the Debian packages contain it; every later step takes it from here.
# shellcheck source=scripts/lib/shipped-build.sh
. scripts/lib/shipped-build.sh
release=("${shipped_build[@]}")
section "release build"
"${release[@]}" --product mentoryd
"${release[@]}" --product mentoryctl
# The real-systemd harness (step 5) also runs the reference plugin under both instances.
"${release[@]}" --product mentory-advisor
release_bin=$("${release[@]}" --show-bin-path)

# The three Debian packages from that build (no second compile), and lintian on them. As root, the script
# installs the packaging tools it lacks; elsewhere they must be installed (.ci/run installs them).
debs="$scratch/debs"
section "Debian packages (scripts/package-deb.sh) and lintian"
if command -v dpkg-buildpackage >/dev/null && command -v dh >/dev/null && command -v lintian >/dev/null \
   || { [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; }; then
  scripts/package-deb.sh --bin-dir "$release_bin" --out-dir "$debs"
else
  debs=""
  echo "Debian packages skipped: no dpkg-buildpackage, dh and lintian here (apt-get install debhelper dh-python pybuild-plugin-pyproject lintian)"
fi

# Allocations per request and per event on the hot paths, against budgets, in the optimized build users run
# (docs/TESTING.md); the debug build allocates more, and code is not contorted to please it. Built with the
# same flags as the release build above, so that it compiles only its own targets.
section "allocation guard (release build)"
"${release[@]}" --product mentory-allocation-guard
"$release_bin/mentory-allocation-guard"

section "Python client (release build)"
scripts/test-python.sh --bin-dir "$release_bin"

section "example handler package"
scripts/test-example.sh --bin-dir "$(swift build --show-bin-path)"

# The README's tour, every command as a reader pastes it, against the optimized daemon and CLI.
section "README tour (release build)"
scripts/test-tour.sh --bin-dir "$release_bin"

section "ThreadSanitizer"
swift build --build-tests --sanitize=thread --scratch-path .build-tsan
TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1} \
  swift_test "$(swift build --sanitize=thread --scratch-path .build-tsan --show-bin-path)"

section "fuzzing, ${MENTORYD_FUZZ_SECONDS:-30} s per target"
scripts/fuzz.sh "${MENTORYD_FUZZ_SECONDS:-30}"

section "real systemd"
if [ "$(id -u)" -eq 0 ] && command -v unshare >/dev/null; then
  # Installed from the packages when they were built (so its rows test what they install), else by install.sh.
  scripts/systemd-test.sh --bin-dir "$release_bin" ${debs:+--debs "$debs"}
else
  echo "systemd harness skipped: it needs root to boot systemd in a PID namespace"
fi

section "Debian packages under real systemd: install, upgrade, remove, purge"
if [ "$(id -u)" -eq 0 ] && command -v unshare >/dev/null && [ -n "$debs" ]; then
  # Version N is the packages built above; N+1 repackages the same build (scripts/deb-test.sh).
  scripts/deb-test.sh --bin-dir "$release_bin" --debs "$debs"
else
  echo "package lifecycle skipped: it needs root to boot systemd in a PID namespace, and the packages"
fi
