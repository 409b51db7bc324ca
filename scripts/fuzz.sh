#!/usr/bin/env bash
# Builds the libFuzzer targets in Fuzz/ and runs each for a bounded time.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]
#
# SECONDS is the run time per target (default 30, what CI uses); TARGETs default to all of
# them (frame-decoder, dispatch). Seeds come from Fuzz/corpus/<target>/ (read only); new
# inputs, crash/timeout/leak artifacts and the logs go to fuzz-out/<target>/ (gitignored).
# The script exits non-zero if any target crashed, hung, leaked or broke an invariant, and
# prints each target's executions, exec/s and final coverage (libFuzzer's cov:/ft:).
#
# Environment:
#   FUZZ_SKIP_BUILD=1     use the binaries already built
#   FUZZ_CONFIG=debug     build configuration (default release)
#   FUZZ_SCRATCH=PATH     SwiftPM scratch path (default .build-fuzz in the repository)
#   FUZZ_OUT=PATH         output directory (default fuzz-out in the repository)
#   FUZZ_ARGS="..."       extra libFuzzer flags, e.g. "-jobs=2 -workers=2" or "-dict=..."
#
# To reproduce a crash: fuzz-out/bin/fuzz-<target> fuzz-out/<target>/crash-<hash>
# To minimize one:      fuzz-out/bin/fuzz-<target> -minimize_crash=1 -runs=10000 <file>
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-30}
shift || true
targets=("$@")
[[ ${#targets[@]} -eq 0 ]] && targets=(frame-decoder dispatch)

config=${FUZZ_CONFIG:-release}
scratch=${FUZZ_SCRATCH:-$repo/.build-fuzz}
out=${FUZZ_OUT:-$repo/fuzz-out}

# Per-target input size limits (bytes).
max_len_for() {
    case "$1" in
        frame-decoder) echo 8192 ;;
        dispatch) echo 4096 ;;
        *) echo "unknown fuzz target '$1' (known: frame-decoder, dispatch)" >&2; exit 2 ;;
    esac
}
for target in "${targets[@]}"; do max_len_for "$target" >/dev/null; done

if [[ ${FUZZ_SKIP_BUILD:-0} != 1 ]]; then
    echo "==> building fuzz targets ($config, -sanitize=fuzzer,address) in $scratch"
    build_start=$(date +%s)
    # `--sanitize=fuzzer` makes SwiftPM link libFuzzer's `main` into the executables (instead of
    # aliasing `main` to the module's entry point). It cannot be combined with
    # `--sanitize=address`: SwiftPM passes them as two `-sanitize=` flags and swiftc honours only
    # the last one, which leaves the code without coverage instrumentation. So the Swift compiler
    # gets one combined flag, which (coming last) wins for every Swift module in the graph.
    # Only our products: a plain `swift build` would also link the dependencies' executables
    # (swift-protobuf's protoc) with libFuzzer's main.
    for target in "${targets[@]}"; do
        swift build -c "$config" \
            --package-path "$repo/Fuzz" \
            --scratch-path "$scratch" \
            --product "fuzz-$target" \
            --sanitize=fuzzer \
            -Xswiftc -sanitize=fuzzer,address
    done
    echo "==> built in $(($(date +%s) - build_start)) s"
fi
bin_dir=$(swift build -c "$config" --package-path "$repo/Fuzz" --scratch-path "$scratch" --show-bin-path)
mkdir -p "$out/bin"

status=0
summary=()
for target in "${targets[@]}"; do
    binary="$bin_dir/fuzz-$target"
    [[ -x $binary ]] || { echo "missing $binary; build first" >&2; exit 2; }
    cp -f "$binary" "$out/bin/"
    work="$out/$target"
    mkdir -p "$work/corpus"
    log="$work/fuzz-$(date +%Y%m%d-%H%M%S).log"
    echo "==> fuzzing $target for ${seconds}s (log: $log)"
    set +e
    # The first corpus directory receives new inputs; the committed seeds are only read.
    # -malloc_limit_mb catches any allocation sized by a hostile length field.
    # shellcheck disable=SC2086
    # Swift's own crash backtracer trips ASan; libFuzzer prints the stack instead.
    SWIFT_BACKTRACE=enable=no \
    ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0} \
        "$binary" \
        -max_total_time="$seconds" \
        -max_len="$(max_len_for "$target")" \
        -timeout=10 \
        -rss_limit_mb=2048 \
        -malloc_limit_mb=64 \
        -print_final_stats=1 \
        -artifact_prefix="$work/" \
        ${FUZZ_ARGS:-} \
        "$work/corpus" "$repo/Fuzz/corpus/$target" >"$log" 2>&1
    rc=$?
    set -e
    # A build that lost its coverage instrumentation fuzzes blind; refuse to report it as a pass.
    counters=$(sed -n 's/^INFO: Loaded 1 modules *(\([0-9]*\) inline 8-bit counters.*/\1/p' "$log" | head -1)
    if [[ ${counters:-0} -lt 20000 ]]; then
        echo "!! $target: only ${counters:-0} coverage counters; the build is not instrumented" >&2
        rc=${rc/#0/3}
    fi
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -1)
    last=$(grep -E '^#[0-9]+' "$log" | grep -E 'cov: ' | tail -1 || true)
    cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
    corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9]*[a-zA-Z]*\).*/\1/p' <<<"$last")
    artifacts=$(grep -cE '^(artifact_prefix|Test unit written to)' "$log" || true)
    line="$target: executions=${execs:-?} exec/s=${speed:-?} cov=${cov:-?} ft=${ft:-?} corpus=${corp:-?} peak_rss_mb=${rss:-?} exit=$rc"
    if [[ $rc -ne 0 ]]; then
        status=1
        line+=" FAILED"
        echo "!! $target failed (exit $rc); the end of its log:" >&2
        tail -60 "$log" >&2
        grep -E 'Test unit written to' "$log" >&2 || true
    elif [[ $artifacts -ne 0 ]]; then
        status=1
        line+=" FAILED (artifacts written)"
    fi
    echo "$line"
    summary+=("$line")
done

echo "==> summary"
printf '%s\n' "${summary[@]}"
exit $status
