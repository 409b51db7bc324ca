#!/usr/bin/env bash
# scripts/bench.sh - mentoryd's cost per request beside Redis 7, a raw C echo server and
# plain SQLite, in one table. A benchmark, not a test: it prints figures and asserts nothing.
#
#   scripts/bench.sh [--quick] [--rows ROW,ROW...] [--no-build] [--bin-dir DIR] [--keep]
#
# Rows (default: all): latency, rps, fanout, storage, cli, ready, rss.
#   latency  round trip p50/p99, 1 client, 1 in flight (raw echo / Redis PING / session.ping)
#   rps      requests/s at 1x1, 50x1, 1x16, 50x16 (clients x pipelined)
#   fanout   events/s delivered to 10, 100, 1000 subscribers (Benchmarks/loadgen/fanout.c)
#   The request and fan-out rows also time two floors (.build/release/mentory-floor), servers
#   that only split frames and send pre-encoded replies: the "NIO floor" (--transport nio), the
#   floor of a server built on NIO's channel pipeline, and the "epoll floor" (--transport epoll),
#   the floor of mentoryd's own epoll loop (MentoryEventLoop), as Redis's; the request rows
#   also time mentoryd's engine on that loop (--transport engine: session.ping answered by
#   MentoryEngine, without the rest of the daemon); their cells show — when that binary is missing.
#   storage  durable diary add/s at 1, 8, 64 writers vs one SQLite txn per entry
#            (.build/release/mentory-storage-bench)
#   cli      a whole `mentoryctl ping` process vs `redis-cli ping` (hyperfine if present)
#   ready    exec to READY=1 on a NOTIFY_SOCKET, fresh state and 10,000 diary entries
#   rss      idle RSS, and RSS per idle handshaken connection (1,000 connections)
#
# Servers run on CPU 0, load generators and benchmark clients on CPU 1 (taskset). Every
# figure is the median over repeated runs (5, or 2 with --quick; the slow Swift benches
# 3 and 1), the servers measured one after another within each repetition so that the
# ratios compare runs made under the same conditions. The load generator is C
# (Benchmarks/loadgen), compiled here with cc -O2. Everything the script starts is
# stopped on exit; --keep leaves the temporary directory for inspection.
#
# mentoryd and mentoryctl are built with --static-swift-stdlib in .build-static, as
# scripts/install.sh ships them, so that the ready and cli rows time what is installed (a
# dynamically linked binary spends several ms more in the dynamic loader before main); the
# benchmark clients come from .build/release. --no-build uses both as they are; the table's
# header says whether that mentoryd links the Swift runtime statically. --bin-dir DIR takes
# mentoryd and mentoryctl from DIR instead and builds nothing, e.g. to compare two commits'
# builds, each beside Redis, one run after the other (the floors still from .build/release).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
quick=0
build=1
keep=0
rows="latency,rps,fanout,storage,cli,ready,rss"
bin_dir=""
while [ $# -gt 0 ]; do
    case "$1" in
    --quick) quick=1 ;;
    --no-build) build=0 ;;
    --bin-dir)
        bin_dir=$(cd "${2:?--bin-dir needs a directory}" && pwd)
        build=0
        shift
        ;;
    --keep) keep=1 ;;
    --rows)
        rows="${2:?--rows needs a list, e.g. latency,rps}"
        shift
        ;;
    -h | --help)
        sed -n '2,33p' "$0" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    *)
        echo "unknown option $1 (try --help)" >&2
        exit 2
        ;;
    esac
    shift
done
want() { case ",$rows," in *",$1,"*) return 0 ;; *) return 1 ;; esac }

if [ "$quick" = 1 ]; then
    reps=2 slow_reps=1 run_seconds=1 storage_seconds=2 cli_runs=30 ready_reps=3
else
    reps=5 slow_reps=3 run_seconds=2 storage_seconds=3 cli_runs=100 ready_reps=7
fi
server_cpu=0
client_cpu=1
idle_connections=1000
ready_entries=10000

log() { echo "bench: $*" >&2; }

# ---------------------------------------------------------------------------
# Tools
need=()
command -v redis-server >/dev/null || need+=(redis-server)
command -v hyperfine >/dev/null || need+=(hyperfine)
if [ ${#need[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        log "installing ${need[*]}"
        DEBIAN_FRONTEND=noninteractive apt-get install -y "${need[@]}" >&2 ||
            log "could not install ${need[*]}; rows that need them are left out"
    else
        log "missing ${need[*]} (apt-get install ${need[*]}); rows that need them are left out"
    fi
fi
have_redis=0
command -v redis-server >/dev/null && command -v redis-cli >/dev/null && have_redis=1
for tool in taskset cc; do
    command -v "$tool" >/dev/null || {
        echo "bench: $tool is required" >&2
        exit 1
    }
done

release="$root/.build/release"
# mentoryd and mentoryctl as scripts/install.sh ships them: the Swift runtime linked statically and
# the ShippedBinaries link options (Package.swift), in their own scratch path so that switching
# between the two link modes does not rebuild everything.
# shellcheck source=scripts/lib/shipped-build.sh
. "$root/scripts/lib/shipped-build.sh"
static_build=("${shipped_build[@]}" --scratch-path "$root/.build-static")
static_release="${bin_dir:-$root/.build-static/release}"
if [ "$build" = 1 ]; then
    log "swift build -c release (the benchmark clients; several minutes the first time)"
    (cd "$root" && swift build -c release "${shipped_swiftc_flags[@]}" --product mentory-storage-bench >&2)
    (cd "$root" && swift build -c release "${shipped_swiftc_flags[@]}" --product mentory-floor >&2)
    for product in mentoryd mentoryctl; do
        log "${static_build[*]} --product $product"
        (cd "$root" && "${static_build[@]}" --product "$product" >&2)
    done
fi
if want storage && [ ! -x "$release/mentory-storage-bench" ]; then
    echo "bench: $release/mentory-storage-bench missing; run swift build -c release" >&2
    exit 1
fi
for product in mentoryd mentoryctl; do
    [ -x "$static_release/$product" ] || {
        echo "bench: $static_release/$product missing; run ${static_build[*]} --product $product" >&2
        exit 1
    }
done

# ---------------------------------------------------------------------------
# Temporary directory, processes, and the commands used

tmp=$(mktemp -d /tmp/mentory-bench.XXXXXX)
bin="$tmp/bin"
mkdir -p "$bin" "$tmp/results"
# shellcheck source=scripts/lib/bench-cleanup.sh
. "$root/scripts/lib/bench-cleanup.sh"

# Every command that produces a figure is written here once, printed at the end.
note() { printf '%s\n' "$*" >>"$tmp/commands.txt"; }
# The arguments quoted for a shell, e.g. --save ''.
quoted() {
    local arg out=()
    for arg in "$@"; do
        if [[ "$arg" =~ ^[A-Za-z0-9_./=:,@%+-]+$ ]]; then
            out+=("$arg")
        else
            out+=("'${arg//\'/\'\\\'\'}'")
        fi
    done
    echo "${out[*]}"
}

loadgen_src="$root/Benchmarks/loadgen"
cflags=(-O2 -Wall -Wextra)
cc "${cflags[@]}" -o "$bin/loadgen" "$loadgen_src/loadgen.c" "$loadgen_src/wire.c" "$loadgen_src/net.c"
cc "${cflags[@]}" -o "$bin/echo-server" "$loadgen_src/echo-server.c"
cc "${cflags[@]}" -o "$bin/readytime" "$loadgen_src/readytime.c"
cc "${cflags[@]}" -o "$bin/fanout" "$loadgen_src/fanout.c" "$loadgen_src/wire.c" "$loadgen_src/net.c"
note "cc ${cflags[*]} -o loadgen Benchmarks/loadgen/loadgen.c Benchmarks/loadgen/wire.c Benchmarks/loadgen/net.c (and fanout.c, echo-server.c, readytime.c)"

# The Swift benches start their own servers: these wrappers pin those to the server CPU.
printf '#!/bin/sh\nexec taskset -c %s %q "$@"\n' "$server_cpu" "$static_release/mentoryd" >"$bin/mentoryd-pinned"
chmod +x "$bin/mentoryd-pinned"
if [ "$have_redis" = 1 ]; then
    printf '#!/bin/sh\nexec taskset -c %s %q "$@"\n' "$server_cpu" "$(command -v redis-server)" >"$bin/redis-server-pinned"
    chmod +x "$bin/redis-server-pinned"
fi

# mentoryd settings for the request rows and the connection rows.
memory_env=(MENTORYD_STORAGE_BACKEND=memory)
many_env=(MENTORYD_LIMITS_MAX_CONNECTIONS=4096 MENTORYD_LIMITS_MAX_CONNECTIONS_PER_UID=4096)

wait_for_socket() {
    local i
    for i in $(seq 1 400); do
        [ -S "$1" ] && return 0
        sleep 0.05
    done
    echo "bench: no socket at $1" >&2
    exit 1
}

# start_server NAME SYSTEM [ENV...]: starts raw|redis|floor|epoll|engine|mentoryd (mentoryd with the given
# environment) on CPU 0 at $tmp/NAME.sock; sets server_pid.
start_server() {
    local name=$1 system=$2
    shift 2
    local socket="$tmp/$name.sock" command
    case "$system" in
    raw) command=("$bin/echo-server" "$socket") ;;
    redis) command=(redis-server --port 0 --unixsocket "$socket" --save '' --appendonly no
        --maxclients 4096 --loglevel warning) ;;
    floor) command=("$release/mentory-floor" --socket "$socket") ;;
    epoll) command=("$release/mentory-floor" --socket "$socket" --transport epoll) ;;
    engine) command=("$release/mentory-floor" --socket "$socket" --transport engine) ;;
    mentoryd) command=("$static_release/mentoryd" --socket "$socket" --state-dir "$tmp/$name.state" --log-level warning)
        [ $# -eq 0 ] || command=(env "$@" "${command[@]}") ;;
    esac
    note "taskset -c $server_cpu $(quoted "${command[@]}")"
    taskset -c "$server_cpu" "${command[@]}" >"$tmp/$name.log" 2>&1 &
    server_pid=$!
    pids+=("$server_pid")
    wait_for_socket "$socket"
    sleep 0.3
}

# forget PID: it was waited for, so cleanup must not signal its number again.
forget() {
    local kept=() pid
    for pid in "${pids[@]}"; do [ "$pid" = "$1" ] || kept+=("$pid"); done
    pids=("${kept[@]}")
}

stop_server() {
    kill "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
    forget "$1"
}

# record KEY VALUE: one measurement; the table shows the median of a key's values.
record() { echo "$2" >>"$tmp/results/$1"; }
median() {
    [ -s "$tmp/results/$1" ] || return 0
    sort -g "$tmp/results/$1" | awk '{ v[NR] = $1 } END {
        if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
field() { tr ' ' '\n' | sed -n "s/^$1=//p"; }

# The floors: only when their binary was built (the benchmark clients' .build/release).
have_floor=0
if [ -x "$release/mentory-floor" ]; then
    have_floor=1
else
    log "$release/mentory-floor missing (swift build -c release ${shipped_swiftc_flags[*]} --product mentory-floor); no floor columns"
fi
systems=(raw)
[ "$have_redis" = 1 ] && systems+=(redis)
[ "$have_floor" = 1 ] && systems+=(floor epoll engine)
systems+=(mentoryd)
# The protocol loadgen and fanout speak to a system.
proto_of() { case "$1" in mentoryd | floor | epoll | engine) echo mentory ;; *) echo "$1" ;; esac }

# ---------------------------------------------------------------------------
# latency and rps: one C load generator against all three servers

if want latency || want rps; then
    log "request rows: ${reps} x ${run_seconds} s per workload and server"
    for system in "${systems[@]}"; do
        if [ "$system" = mentoryd ]; then
            start_server "req-$system" "$system" "${memory_env[@]}"
        else
            start_server "req-$system" "$system"
        fi
        eval "server_$system=$server_pid"
    done
    workloads=()
    want latency && workloads+=(1x1)
    want rps && workloads+=(1x1 50x1 1x16 50x16)
    workloads=($(printf '%s\n' "${workloads[@]}" | awk '!seen[$0]++'))
    for rep in $(seq 1 "$reps"); do
        for workload in "${workloads[@]}"; do
            for system in "${systems[@]}"; do
                proto=$(proto_of "$system")
                command=("$bin/loadgen" run --proto "$proto" --socket "$tmp/req-$system.sock"
                    --clients "${workload%x*}" --pipeline "${workload#*x}" --seconds "$run_seconds")
                [ "$rep" = 1 ] && note "taskset -c $client_cpu $(quoted "${command[@]}")"
                line=$(taskset -c "$client_cpu" "${command[@]}")
                echo "$line" >>"$tmp/loadgen.txt"
                record "rps-$workload-$system" "$(field rps <<<"$line")"
                record "p50-$workload-$system" "$(field p50_us <<<"$line")"
                record "p99-$workload-$system" "$(field p99_us <<<"$line")"
                errors=$(field errors <<<"$line")
                [ "$errors" = 0 ] || log "$system $workload: $errors error responses"
            done
        done
    done
    for system in "${systems[@]}"; do
        eval "stop_server \$server_$system"
    done
fi

# ---------------------------------------------------------------------------
# fan-out: one C publisher and N C subscribers (Benchmarks/loadgen/fanout.c) against each server

if want fanout; then
    log "fan-out rows: ${reps} runs per subscriber count and server"
    fanout_systems=()
    [ "$have_redis" = 1 ] && fanout_systems+=(redis)
    [ "$have_floor" = 1 ] && fanout_systems+=(floor epoll)
    fanout_systems+=(mentoryd)
    for rep in $(seq 1 "$reps"); do
        for system in "${fanout_systems[@]}"; do
            case "$system" in
            # In memory, as Redis keeps its channels; room for 1,000 subscribers and their queues.
            mentoryd) start_server "fan-$system-$rep" mentoryd "${memory_env[@]}" "${many_env[@]}" \
                MENTORYD_LIMITS_SUBSCRIBER_QUEUE_BYTES=$((8 << 20)) ;;
            redis | floor | epoll) start_server "fan-$system-$rep" "$system" ;;
            esac
            proto=$(proto_of "$system")
            for subscribers in 10 100 1000; do
                command=("$bin/fanout" --proto "$proto" --socket "$tmp/fan-$system-$rep.sock"
                    --subscribers "$subscribers")
                [ "$rep" = 1 ] && note "taskset -c $client_cpu $(quoted "${command[@]}")"
                if line=$(taskset -c "$client_cpu" "${command[@]}"); then
                    echo "$line" >>"$tmp/fanout.txt"
                    record "fanout-$subscribers-$system" "$(field events_per_s <<<"$line")"
                else
                    log "fan-out to $subscribers subscribers of $system failed"
                fi
            done
            stop_server "$server_pid"
        done
    done
fi

# ---------------------------------------------------------------------------
# durable diary add: the Swift bench, mentoryd (SQLite, group commit) vs plain SQLite

if want storage; then
    log "storage rows: ${slow_reps} runs of mentory-storage-bench, ${storage_seconds} s per row"
    mkdir -p "$tmp/storage"
    command=(env MENTORYD_BINARY="$bin/mentoryd-pinned" "$release/mentory-storage-bench"
        --seconds "$storage_seconds" --clients 1,8,64 --dir "$tmp/storage")
    note "taskset -c $client_cpu $(quoted "${command[@]}")"
    for rep in $(seq 1 "$slow_reps"); do
        taskset -c "$client_cpu" "${command[@]}" >"$tmp/storage-$rep.txt" 2>&1 || log "storage bench failed"
        awk -F'|' 'NF >= 7 && $3 ~ /[0-9]/ {
                setup = $2; gsub(/^ +| +$/, "", setup); clients = $3; gsub(/ /, "", clients)
                rate = $5; gsub(/ /, "", rate)
                print (setup == "mentoryd" ? "mentoryd" : "sqlite"), clients, rate }' "$tmp/storage-$rep.txt" |
            while read -r system clients rate; do
                record "diary-$clients-$system" "$rate"
            done
    done
fi

# ---------------------------------------------------------------------------
# whole-process CLI

if want cli; then
    log "cli row"
    start_server cli-mentoryd mentoryd "${memory_env[@]}"
    cli_mentoryd=$server_pid
    clis=("$static_release/mentoryctl ping --socket $tmp/cli-mentoryd.sock")
    if [ "$have_redis" = 1 ]; then
        start_server cli-redis redis
        cli_redis=$server_pid
        clis+=("redis-cli -s $tmp/cli-redis.sock ping")
    fi
    if command -v hyperfine >/dev/null; then
        command=(hyperfine -N --warmup 10 --runs "$cli_runs" --export-json "$tmp/cli.json" "${clis[@]}")
        note "taskset -c $client_cpu $(quoted "${command[@]}")"
        taskset -c "$client_cpu" "${command[@]}" >"$tmp/cli.txt" 2>&1
        # hyperfine's JSON: {"results": [{"command": ..., "median": seconds}, ...]}, in order.
        medians=($(tr ',' '\n' <"$tmp/cli.json" | sed -n 's/^ *"median": *//p'))
        record cli-mentoryd "$(awk -v s="${medians[0]}" 'BEGIN { print s * 1000 }')"
        [ "${#medians[@]}" -gt 1 ] && record cli-redis "$(awk -v s="${medians[1]}" 'BEGIN { print s * 1000 }')"
    else
        note "taskset -c $client_cpu <each command> x $cli_runs, timed with date +%s%N (no hyperfine)"
        for index in "${!clis[@]}"; do
            key=cli-mentoryd
            [ "$index" = 1 ] && key=cli-redis
            for run in $(seq 1 "$cli_runs"); do
                start=$(date +%s%N)
                taskset -c "$client_cpu" ${clis[$index]} >/dev/null
                record "$key" "$(((($(date +%s%N) - start)) / 1000))e-3"
            done
        done
    fi
    stop_server "$cli_mentoryd"
    [ "$have_redis" = 1 ] && stop_server "$cli_redis"
fi

# ---------------------------------------------------------------------------
# start to READY=1

if want ready; then
    log "ready rows: ${ready_reps} starts each"
    # A database of $ready_entries diary entries, filled through the daemon itself.
    start_server ready-fill mentoryd
    note "taskset -c $client_cpu $bin/loadgen fill --socket $tmp/ready-fill.sock --entries $ready_entries"
    taskset -c "$client_cpu" "$bin/loadgen" fill --socket "$tmp/ready-fill.sock" --entries "$ready_entries" >&2
    stop_server "$server_pid"
    for rep in $(seq 1 "$ready_reps"); do
        fresh=("$bin/readytime" --cpu "$server_cpu" "$tmp/notify.sock" -- "$static_release/mentoryd"
            --socket "$tmp/ready.sock" --state-dir "$tmp/ready-fresh-$rep" --log-level warning)
        full=("$bin/readytime" --cpu "$server_cpu" "$tmp/notify.sock" -- "$static_release/mentoryd"
            --socket "$tmp/ready.sock" --state-dir "$tmp/ready-fill.state" --log-level warning)
        redis=("$bin/readytime" --cpu "$server_cpu" "$tmp/notify.sock" -- redis-server --port 0
            --unixsocket "$tmp/ready.sock" --save '' --appendonly no --supervised systemd --loglevel warning)
        if [ "$rep" = 1 ]; then
            note "$(quoted "${fresh[@]}")    # a new state dir each time"
            note "$(quoted "${full[@]}")    # the $ready_entries entries"
            [ "$have_redis" = 1 ] && note "$(quoted "${redis[@]}")"
        fi
        record ready-fresh-mentoryd "$("${fresh[@]}" 2>>"$tmp/ready.log" | field ready_ms)"
        record ready-full-mentoryd "$("${full[@]}" 2>>"$tmp/ready.log" | field ready_ms)"
        if [ "$have_redis" = 1 ]; then
            record ready-fresh-redis "$("${redis[@]}" 2>>"$tmp/ready.log" | field ready_ms)"
        fi
    done
fi

# ---------------------------------------------------------------------------
# idle RSS and RSS per idle handshaken connection

rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }

if want rss; then
    log "rss rows: ${slow_reps} runs, $idle_connections connections"
    for rep in $(seq 1 "$slow_reps"); do
        for system in "${systems[@]}"; do
            case "$system" in floor | epoll | engine) continue ;; esac # they serve the request rows only
            name="rss-$system"
            rm -rf "$tmp/$name".{state,sock,hold,out} # a fresh start each repetition
            # mentoryd as deployed: the default SQLite store.
            if [ "$system" = mentoryd ]; then
                start_server "$name" "$system" "${many_env[@]}"
            else
                start_server "$name" "$system"
            fi
            pid=$server_pid
            sleep 0.5
            idle=$(rss_kib "$pid")
            proto=$(proto_of "$system")
            command=("$bin/loadgen" idle --proto "$proto" --socket "$tmp/$name.sock"
                --connections "$idle_connections")
            [ "$rep" = 1 ] && note "taskset -c $client_cpu $(quoted "${command[@]}")    # VmRSS of the server before and after"
            mkfifo "$tmp/$name.hold"
            taskset -c "$client_cpu" "${command[@]}" <"$tmp/$name.hold" >"$tmp/$name.out" &
            holder=$!
            pids+=("$holder")
            exec 7>"$tmp/$name.hold"
            for i in $(seq 1 600); do
                grep -q ready "$tmp/$name.out" 2>/dev/null && break
                sleep 0.1
            done
            sleep 0.5
            loaded=$(rss_kib "$pid")
            exec 7>&-
            wait "$holder" || true
            forget "$holder"
            stop_server "$pid"
            record "rss-idle-$system" "$(awk -v k="$idle" 'BEGIN { print k / 1024 }')"
            record "rss-conn-$system" "$(awk -v a="$idle" -v b="$loaded" -v n="$idle_connections" \
                'BEGIN { print (b - a) / n }')"
        done
    done
fi

# ---------------------------------------------------------------------------
# The table

# A figure with precision fitting its size; "—" when there is none.
fmt() {
    [ -n "${1:-}" ] || {
        echo "—"
        return
    }
    awk -v v="$1" 'BEGIN {
        a = v < 0 ? -v : v
        if (a >= 100) printf "%.0f", v; else if (a >= 10) printf "%.1f", v; else printf "%.2f", v }'
}
ratio() {
    if [ -n "${1:-}" ] && [ -n "${2:-}" ] && awk -v d="$2" 'BEGIN { exit !(d != 0) }'; then
        awk -v n="$1" -v d="$2" 'BEGIN { printf "%.2fx", n / d }'
    else
        echo "—"
    fi
}
row() { # row LABEL RAW REDIS MENTORYD [REDIS_PREFIX] [RATIO_SUFFIX] [NIO_FLOOR] [EPOLL_FLOOR] [ENGINE_ON_EPOLL]
    local redis_cell
    redis_cell=$(fmt "$3")
    [ -n "$3" ] && [ -n "${5:-}" ] && redis_cell="$5$redis_cell"
    local r floor_r epoll_r engine_r
    r=$(ratio "$4" "$3")
    [ "$r" != "—" ] && r="$r${6:-}"
    floor_r=$(ratio "${7:-}" "$3")
    epoll_r=$(ratio "${8:-}" "$3")
    engine_r=$(ratio "${9:-}" "$3")
    printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$1" "$(fmt "$2")" "$redis_cell" \
        "$(fmt "${7:-}")" "$(fmt "${8:-}")" "$(fmt "${9:-}")" "$(fmt "$4")" "$floor_r" "$epoll_r" "$engine_r" "$r"
}

echo
echo "## mentoryd beside Redis $(redis-server --version 2>/dev/null | sed -n 's/.*v=\([^ ]*\).*/\1/p')"
echo
echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg) at the end;"
echo "servers on CPU $server_cpu, clients on CPU $client_cpu; medians of $reps runs ($slow_reps for the Swift benches"
echo "and RSS, $ready_reps for READY); ratios are to Redis (latency and time: lower is better, rates: higher is"
echo "better). The floors (Benchmarks/mentory-floor) only split frames and answer with pre-encoded replies: the"
echo "NIO floor on SwiftNIO's channel pipeline, the epoll floor on mentoryd's own epoll loop as Redis's. \"engine on"
echo "epoll\" is mentoryd's engine answering session.ping on that epoll loop, without the rest of the daemon."
if ldd "$static_release/mentoryd" 2>/dev/null | grep -q libswiftCore; then
    echo "mentoryd and mentoryctl link the Swift runtime dynamically: not what scripts/install.sh ships"
    echo "(build with --static-swift-stdlib, or drop --no-build)."
elif [ "$(od -An -tx1 -j16 -N1 "$static_release/mentoryctl" | tr -d ' ')" = 02 ]; then
    # ELF e_type 2 (ET_EXEC): linked non-PIE, with the ShippedBinaries link options.
    echo "mentoryd and mentoryctl link the Swift runtime statically, with the ShippedBinaries link options,"
    echo "as scripts/install.sh ships them."
else
    echo "mentoryd and mentoryctl link the Swift runtime statically, but without the ShippedBinaries link"
    echo "options scripts/install.sh ships them with (build with --traits ShippedBinaries, or drop --no-build)."
fi
echo
echo "| workload | raw echo | Redis 7 | NIO floor | epoll floor | engine on epoll | mentoryd | NIO floor / Redis | epoll floor / Redis | engine on epoll / Redis | mentoryd / Redis |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
if want latency; then
    row "round trip p50 µs, 1 client, 1 in flight" "$(median p50-1x1-raw)" "$(median p50-1x1-redis)" \
        "$(median p50-1x1-mentoryd)" "" "" "$(median p50-1x1-floor)" "$(median p50-1x1-epoll)" \
        "$(median p50-1x1-engine)"
    row "round trip p99 µs, 1 client, 1 in flight" "$(median p99-1x1-raw)" "$(median p99-1x1-redis)" \
        "$(median p99-1x1-mentoryd)" "" "" "$(median p99-1x1-floor)" "$(median p99-1x1-epoll)" \
        "$(median p99-1x1-engine)"
fi
if want rps; then
    for workload in 1x1 50x1 1x16 50x16; do
        row "req/s, $workload (clients x in flight each)" "$(median "rps-$workload-raw")" \
            "$(median "rps-$workload-redis")" "$(median "rps-$workload-mentoryd")" "" "" \
            "$(median "rps-$workload-floor")" "$(median "rps-$workload-epoll")" "$(median "rps-$workload-engine")"
    done
fi
if want fanout; then
    for subscribers in 10 100 1000; do
        row "fan-out events/s delivered, $subscribers subscribers" "" "$(median "fanout-$subscribers-redis")" \
            "$(median "fanout-$subscribers-mentoryd")" "" "" "$(median "fanout-$subscribers-floor")" \
            "$(median "fanout-$subscribers-epoll")"
    done
fi
if want storage; then
    for clients in 1 8 64; do
        row "durable diary add/s, $clients writer(s) (Redis column: SQLite, 1 txn+fsync per entry)" "" \
            "$(median "diary-$clients-sqlite")" "$(median "diary-$clients-mentoryd")" "SQLite " " vs SQLite"
    done
fi
if want cli; then
    row "whole CLI process ms: mentoryctl ping / redis-cli ping" "" "$(median cli-redis)" "$(median cli-mentoryd)"
fi
if want ready; then
    row "exec to READY=1 ms, fresh state dir" "" "$(median ready-fresh-redis)" "$(median ready-fresh-mentoryd)"
    row "exec to READY=1 ms, $ready_entries diary entries" "" "" "$(median ready-full-mentoryd)"
fi
if want rss; then
    row "idle RSS MiB (mentoryd: SQLite store)" "$(median rss-idle-raw)" "$(median rss-idle-redis)" \
        "$(median rss-idle-mentoryd)"
    row "RSS KiB per idle handshaken connection ($idle_connections open)" "$(median rss-conn-raw)" \
        "$(median rss-conn-redis)" "$(median rss-conn-mentoryd)"
fi
echo
echo "### Commands"
echo
echo '```'
awk '!seen[$0]++' "$tmp/commands.txt" | sed "s|$tmp|\$TMP|g; s|$root/||g"
echo '```'
