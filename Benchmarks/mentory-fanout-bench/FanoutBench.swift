import Foundation
import Glibc
import MentoryDomain
import MentoryWire
import NIOCore
import NIOPosix

/// Fan-out throughput and latency of mentoryd beside redis-server pub/sub, both on Unix sockets.
///
///     mentory-fanout-bench [--mentoryd PATH] [--redis-server PATH] [--subscribers 10,100,1000]
///
/// One publisher; N subscribers on one NIO event loop group in this process, decoding what a
/// real client must decode. Throughput: the publisher sends changes as fast as the server
/// answers them, and events delivered per second are counted until every subscriber has every
/// change. Latency: then changes are published one at a time, every 2 ms, each carrying its
/// publish time, so latency is change to delivery on one monotonic clock, across every
/// subscriber. Not part of the test suite.
@main
struct FanoutBench {
    static func main() async throws {
        let arguments = CommandLine.arguments
        func value(_ flag: String) -> String? {
            arguments.firstIndex(of: flag).flatMap { arguments.indices.contains($0 + 1) ? arguments[$0 + 1] : nil }
        }
        let products = URL(fileURLWithPath: arguments[0]).deletingLastPathComponent()
        let mentoryd = value("--mentoryd") ?? products.appendingPathComponent("mentoryd").path
        let redisServer = value("--redis-server") ?? "/usr/bin/redis-server"
        let counts = (value("--subscribers") ?? "10,100,1000").split(separator: ",").compactMap { Int($0) }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        let directory = "/tmp/mentory-fanout-\(getpid())"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }

        emit(
            "subscribers  system     events/s delivered   p50 µs    p99 µs   delivered/expected"
                + "   (latency: \(pacedEvents) changes, one every \(pacedInterval))"
        )
        for subscribers in counts {
            let events = max(1000, 200_000 / subscribers)
            for system in [System.mentoryd, .redis] {
                let socketPath = directory + "/\(system)-\(subscribers).sock"
                let server = try system.start(
                    binary: system == .mentoryd ? mentoryd : redisServer, socketPath: socketPath, directory: directory)
                defer {
                    // Children of this process inherit its blocked signals, SIGTERM among them:
                    // mentoryd still reads it through a signalfd, but redis-server never sees it and
                    // would keep waitUntilExit() waiting. Redis keeps nothing here: kill it outright.
                    if system == .redis {
                        kill(server.processIdentifier, SIGKILL)
                    } else {
                        server.terminate()
                    }
                    server.waitUntilExit()
                }
                try await waitForSocket(socketPath)
                let result = try await run(
                    system: system, socketPath: socketPath, subscribers: subscribers, events: events, group: group)
                emit(
                    String(
                        format: "%11d  %-8@ %12.0f   %8.1f  %8.1f   %d/%d",
                        subscribers,
                        "\(system)" as NSString,
                        result.throughput,
                        result.p50,
                        result.p99,
                        result.delivered,
                        subscribers * (events + pacedEvents)
                    )
                )
            }
        }
        try await group.shutdownGracefully()
    }

    enum System: CustomStringConvertible {
        case mentoryd
        case redis

        var description: String { self == .mentoryd ? "mentoryd" : "redis" }

        func start(binary: String, socketPath: String, directory: String) throws -> Process {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: binary)
            switch self {
            case .mentoryd:
                process.arguments = [
                    "--socket", socketPath, "--log-level", "warning", "--state-dir", directory + "/state",
                ]
                var environment = ProcessInfo.processInfo.environment
                environment["MENTORYD_STORAGE_BACKEND"] = "memory"
                environment["MENTORYD_LIMITS_MAX_CONNECTIONS"] = "4096"
                environment["MENTORYD_LIMITS_MAX_CONNECTIONS_PER_UID"] = "4096"
                environment["MENTORYD_LIMITS_SUBSCRIBER_QUEUE_BYTES"] = "\(8 << 20)"
                process.environment = environment
            case .redis:
                process.arguments = [
                    "--port", "0", "--unixsocket", socketPath, "--save", "", "--appendonly", "no",
                    "--maxclients", "4096", "--client-output-buffer-limit", "pubsub 0 0 0",
                ]
            }
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            return process
        }
    }

    struct Result {
        var throughput: Double
        var p50: Double
        var p99: Double
        var delivered: Int
    }

    static func waitForSocket(_ path: String) async throws {
        for _ in 0..<200 {
            if FileManager.default.fileExists(atPath: path) {
                try await Task.sleep(for: .milliseconds(100))
                return
            }
            try await Task.sleep(for: .milliseconds(25))
        }
        throw BenchFailure("no server socket at \(path)")
    }

    static func run(system: System, socketPath: String, subscribers: Int, events: Int, group: any EventLoopGroup)
        async throws -> Result
    {
        var channels: [any Channel] = []
        for _ in 0..<subscribers {
            let ready = group.any().makePromise(of: Void.self)
            let channel = try await ClientBootstrap(group: group)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        switch system {
                        case .mentoryd:
                            try channel.pipeline.syncOperations.addHandlers([
                                ByteToMessageHandler(LengthPrefixedFrameDecoder(maxFrameLength: 64 << 20)),
                                MentorySubscriberHandler(ready: ready),
                            ])
                        case .redis:
                            try channel.pipeline.syncOperations.addHandlers([
                                ByteToMessageHandler(RESPDecoder()),
                                RedisSubscriberHandler(ready: ready),
                            ])
                        }
                    }
                }
                .connect(unixDomainSocketPath: socketPath).get()
            switch system {
            case .mentoryd:
                var hello = Mentory_V1_Hello()
                hello.protocolVersion = WireProtocol.version
                hello.clientName = "fanout"
                var subscribe = Mentory_V1_SubscribeRequest()
                var topic = Mentory_V1_TopicSubscription()
                topic.topic = WireNames.mentor
                subscribe.topics = [topic]
                var buffer = channel.allocator.buffer(capacity: 64)
                buffer.writeFrame(envelope(hello: hello))
                buffer.writeFrame(envelope(request: 1, WireNames.session, "subscribe", try subscribe.serializedData()))
                try await channel.writeAndFlush(buffer)
            case .redis:
                try await channel.writeAndFlush(ByteBuffer(string: "*2\r\n$9\r\nSUBSCRIBE\r\n$2\r\nch\r\n"))
            }
            try await ready.futureResult.get()
            channels.append(channel)
        }

        let publisher = try BlockingPublisher(path: socketPath, system: system)
        defer { publisher.close() }

        // Throughput: one publisher as fast as the server answers; until every subscriber has all.
        let start = monotonicNanoseconds()
        try publisher.publishBurst(events: events)
        let burstDelivered = try await waitForDeliveries(subscribers * events, from: channels)

        // Latency: changes published one at a time every `pacedInterval`, change to delivery.
        try publisher.publishPaced(events: pacedEvents, interval: pacedInterval)
        let total = try await waitForDeliveries(subscribers * (events + pacedEvents), from: channels)

        var latencies: [UInt64] = []
        for channel in channels {
            latencies += try await channel.pipeline.handler(type: SubscriberCounter.self).map(\.latencies).get()
            try? await channel.close()
        }
        latencies.sort()
        func percentile(_ p: Double) -> Double {
            latencies.isEmpty
                ? 0 : Double(latencies[min(latencies.count - 1, Int(Double(latencies.count - 1) * p))]) / 1000
        }
        let seconds = Double(burstDelivered.lastDelivery - start) / 1e9
        return Result(
            throughput: Double(burstDelivered.count) / seconds,
            p50: percentile(0.5),
            p99: percentile(0.99),
            delivered: total.count
        )
    }

    /// Changes in the latency phase, and the pause after each.
    static let pacedEvents = 500
    static let pacedInterval = Duration.milliseconds(2)

    /// Waits (up to two minutes) until the subscribers together have `expected` deliveries;
    /// returns how many arrived and when the last one did.
    static func waitForDeliveries(_ expected: Int, from channels: [any Channel]) async throws -> (
        count: Int, lastDelivery: UInt64
    ) {
        let deadline = ContinuousClock.now + .seconds(120)
        while true {
            var count = 0
            var last: UInt64 = 0
            for channel in channels {
                let (delivered, lastDelivery) = try await channel.pipeline.handler(type: SubscriberCounter.self)
                    .map { ($0.count, $0.lastDelivery) }.get()
                count += delivered
                last = max(last, lastDelivery)
            }
            if count >= expected || ContinuousClock.now >= deadline { return (count, last) }
            try await Task.sleep(for: .milliseconds(20))
        }
    }
}

/// Writes a line to standard output at once, unbuffered, so progress shows when piped.
func emit(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

struct BenchFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

func monotonicNanoseconds() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}

func envelope(hello: Mentory_V1_Hello) -> Mentory_V1_Envelope {
    var envelope = Mentory_V1_Envelope()
    envelope.hello = hello
    return envelope
}

func envelope(request id: UInt64, _ namespace: String, _ method: String, _ body: Data) -> Mentory_V1_Envelope {
    var request = Mentory_V1_Request()
    request.id = id
    request.namespace = namespace
    request.method = method
    request.body = body
    var envelope = Mentory_V1_Envelope()
    envelope.request = request
    return envelope
}
