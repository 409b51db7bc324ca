# shellcheck shell=bash
# The clean-up both benchmark scripts share (scripts/bench.sh, scripts/bench-paired.sh): on exit, however
# it comes, every process whose pid the script added to `pids` is stopped and waited for, and the
# temporary directory `tmp` is removed, unless `keep` is 1 (--keep). The sourcing script defines `log`
# and sets `tmp` and `keep` before it sources this.
pids=()
cleanup() {
    local pid
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${pids[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    if [ "$keep" = 1 ]; then log "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
