#!/usr/bin/env bash
# scripts/bench-paired.sh - two mentoryd builds measured in the same run, interleaved: the paired
# benchmark that says whether a change made the request path faster or slower on a noisy machine.
# A benchmark, not a test: it prints figures and asserts nothing.
#
#   scripts/bench-paired.sh --before DIR --after DIR [--rounds N] [--seconds S] [--keep]
#
# DIR holds a mentoryd binary (e.g. a copy of .build-static/release/mentoryd built from each
# commit). Both daemons run at once on CPU 0 with the memory store, each idle while the other is
# loaded. Every round runs the C load generator (Benchmarks/loadgen, compiled here with cc -O2) on
# CPU 1 for S seconds (default 2) per workload, 1x1, 50x1, 1x16 and 50x16 (clients x pipelined
# requests), first against one binary and then against the other, the order flipping every round
# (default 8 rounds). It prints a markdown table: per workload the median req/s of each binary and
# the median over rounds of after / before within the round, which cancels most of the drift
# between rounds; then the commands it ran. Everything it starts is stopped on exit; --keep leaves
# the temporary directory (its loadgen.txt has every run) for inspection.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
before=""
after=""
rounds=8
seconds=2
keep=0
while [ $# -gt 0 ]; do
    case "$1" in
    --before)
        before=$(cd "${2:?--before needs a directory}" && pwd)
        shift
        ;;
    --after)
        after=$(cd "${2:?--after needs a directory}" && pwd)
        shift
        ;;
    --rounds)
        rounds="${2:?--rounds needs a number}"
        shift
        ;;
    --seconds)
        seconds="${2:?--seconds needs a number}"
        shift
        ;;
    --keep) keep=1 ;;
    -h | --help)
        sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    *)
        echo "unknown option $1 (try --help)" >&2
        exit 2
        ;;
    esac
    shift
done
if [ -z "$before" ] || [ -z "$after" ]; then
    echo "bench-paired: --before DIR and --after DIR are required (try --help)" >&2
    exit 2
fi
for dir in "$before" "$after"; do
    [ -x "$dir/mentoryd" ] || {
        echo "bench-paired: no mentoryd in $dir" >&2
        exit 1
    }
done
for tool in taskset cc; do
    command -v "$tool" >/dev/null || {
        echo "bench-paired: $tool is required" >&2
        exit 1
    }
done

server_cpu=0
client_cpu=1
workloads=(1x1 50x1 1x16 50x16)
log() { echo "bench-paired: $*" >&2; }

tmp=$(mktemp -d /tmp/mentory-paired.XXXXXX)
# shellcheck source=scripts/lib/bench-cleanup.sh
. "$root/scripts/lib/bench-cleanup.sh"

cflags=(-O2 -Wall -Wextra)
loadgen_src="$root/Benchmarks/loadgen"
cc "${cflags[@]}" -o "$tmp/loadgen" "$loadgen_src/loadgen.c" "$loadgen_src/wire.c" "$loadgen_src/net.c"

for side in before after; do
    dir=${!side}
    taskset -c "$server_cpu" env MENTORYD_STORAGE_BACKEND=memory "$dir/mentoryd" --socket "$tmp/$side.sock" \
        --state-dir "$tmp/$side.state" --log-level warning >"$tmp/$side.log" 2>&1 &
    pids+=($!)
done
for side in before after; do
    for _ in $(seq 1 400); do
        [ -S "$tmp/$side.sock" ] && break
        sleep 0.05
    done
    [ -S "$tmp/$side.sock" ] || {
        echo "bench-paired: $side's mentoryd made no socket; its log:" >&2
        cat "$tmp/$side.log" >&2
        exit 1
    }
done
sleep 1

field() { tr ' ' '\n' | sed -n "s/^$1=//p"; }
median() {
    sort -g | awk '{ v[NR] = $1 } END {
        if (NR == 0) print ""; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

log "$rounds rounds x ${#workloads[@]} workloads x 2 binaries x $seconds s"
for round in $(seq 1 "$rounds"); do
    if [ $((round % 2)) = 1 ]; then order=(before after); else order=(after before); fi
    for workload in "${workloads[@]}"; do
        for side in "${order[@]}"; do
            line=$(taskset -c "$client_cpu" "$tmp/loadgen" run --proto mentory --socket "$tmp/$side.sock" \
                --clients "${workload%x*}" --pipeline "${workload#*x}" --seconds "$seconds" | tr '\n' ' ')
            echo "round=$round workload=$workload binary=$side $line" >>"$tmp/loadgen.txt"
            rps=$(field rps <<<"$line")
            echo "$rps" >"$tmp/$side-$workload-$round"
            errors=$(field errors <<<"$line")
            [ "${errors:-0}" = 0 ] || log "$side $workload round $round: $errors error responses"
        done
        b=$(cat "$tmp/before-$workload-$round")
        a=$(cat "$tmp/after-$workload-$round")
        awk -v a="$a" -v b="$b" 'BEGIN { if (b > 0) printf "%.4f\n", a / b }' >>"$tmp/ratio-$workload"
    done
    log "round $round done"
done

echo "| workload | before req/s | after req/s | after / before (median of per-round ratios) | rounds |"
echo "| --- | ---: | ---: | ---: | ---: |"
for workload in "${workloads[@]}"; do
    b=$(cat "$tmp"/before-"$workload"-* | median)
    a=$(cat "$tmp"/after-"$workload"-* | median)
    r=$(median <"$tmp/ratio-$workload")
    lo=$(sort -g "$tmp/ratio-$workload" | head -1)
    hi=$(sort -g "$tmp/ratio-$workload" | tail -1)
    printf '| req/s %s | %.0f | %.0f | %.3f (%.3f-%.3f) | %s |\n' "$workload" "$b" "$a" "$r" "$lo" "$hi" "$rounds"
done
echo
echo "Commands (the servers on CPU $server_cpu, each loadgen on CPU $client_cpu):"
echo
echo '```'
echo "cc ${cflags[*]} -o loadgen Benchmarks/loadgen/loadgen.c Benchmarks/loadgen/wire.c Benchmarks/loadgen/net.c"
for side in before after; do
    echo "taskset -c $server_cpu env MENTORYD_STORAGE_BACKEND=memory ${!side}/mentoryd --socket $side.sock" \
        "--state-dir $side.state --log-level warning"
done
echo "taskset -c $client_cpu loadgen run --proto mentory --socket SIDE.sock --clients C --pipeline P --seconds $seconds"
echo '```'
