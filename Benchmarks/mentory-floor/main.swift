import Glibc
import MentoryEventLoop

// mentory-floor - the least a server must do to serve mentoryd's protocol, for scripts/bench.sh (issue 32's
// floors of two designs). A benchmark, not a server.
//
//     mentory-floor --socket PATH [--transport nio|epoll|engine] [--flush read|tick]
//
// Both transports answer each frame of what Benchmarks/loadgen sends with the bytes mentoryd would send, encoded
// once at start (FloorProtocol.swift): no protobuf decoding, no engine, no metrics.
// - `nio` (the default): SwiftNIO's channel pipeline, with the options mentoryd had on it (NIOFloor.swift).
// - `epoll`: mentoryd's own epoll loop (MentoryEventLoop), as Redis's, the design of mentoryd's connection layer
//   (EpollFloor.swift); it writes once per connection at the end of the loop's turn.
// - `engine`: not a floor: mentoryd's engine answers the requests (EngineFloor.swift), on the epoll loop as its
//   executor, to measure mentoryd's own per-frame work on that layer (`session.ping` only).

let arguments = CommandLine.arguments
func option(_ name: String) -> String? {
    arguments.firstIndex(of: name).flatMap { arguments.dropFirst($0 + 1).first }
}
guard let path = option("--socket"), ["nio", "epoll", "engine"].contains(option("--transport") ?? "nio") else {
    print("usage: mentory-floor --socket PATH [--transport nio|epoll|engine] [--flush read|tick]")
    exit(2)
}

// Room for the fan-out row's 1,000 subscribers, as mentoryd raises its own limit.
var limit = rlimit()
if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max {
    limit.rlim_cur = limit.rlim_max
    _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
}
unlink(path)

switch option("--transport") {
case "epoll", "engine":
    let loop = try EpollEventLoop(threadName: "mentory-floor")
    let engine = option("--transport") == "engine"
    try EpollFloor.start(path: path, on: loop) {
        engine ? EngineAnswerer(loop: loop) as any EpollAnswerer : TopicAnswerer()
    }
    while true { pause() }
default:
    try runNIOFloor(path: path, flushAtTickEnd: option("--flush") == "tick")
}
