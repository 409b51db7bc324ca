import Foundation
import Glibc
import MentoryClient
import MentoryWire
import NIOCore

/// Round-trip latency of mentoryd against a raw Unix socket on the same machine.
///
///     mentory-bench --mentoryd PATH --mentoryctl PATH [--requests N]
///
/// Starts its own daemon on a temporary socket. Not part of the test suite.
@main
struct MentoryBench {
    static func main() async throws {
        let arguments = CommandLine.arguments
        func value(_ flag: String) -> String? {
            arguments.firstIndex(of: flag).flatMap { arguments.indices.contains($0 + 1) ? arguments[$0 + 1] : nil }
        }
        let requests = Int(value("--requests") ?? "") ?? 20_000
        let products = URL(fileURLWithPath: arguments[0]).deletingLastPathComponent()
        let mentoryd = value("--mentoryd") ?? products.appendingPathComponent("mentoryd").path
        let mentoryctl = value("--mentoryctl") ?? products.appendingPathComponent("mentoryctl").path
        let directory = "/tmp/mentory-bench-\(getpid())"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }

        let ping = Self.pingFrame(id: 1)
        print("requests per measurement: \(requests); frame: \(ping.count) bytes")

        // 1. Baseline: the same frame echoed by a blocking server thread over a raw Unix socket.
        let rawPath = directory + "/raw.sock"
        let listener = try BlockingSocket.listen(at: rawPath)
        let echo = Thread {
            let connection = listener.accept()
            var buffer = [UInt8](repeating: 0, count: 4096)
            while let length = connection.readFrame(into: &buffer) {
                connection.writeAll(
                    [
                        UInt8(length >> 24 & 0xFF), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF),
                        UInt8(length & 0xFF),
                    ] + buffer[0..<length])
            }
            connection.close()
        }
        echo.start()
        let raw = try Self.measureBlocking(path: rawPath, frame: ping, requests: requests, handshake: false)
        Self.report("raw Unix socket echo (baseline)", raw, baseline: raw)

        // 2. mentoryd, the same blocking client sending session.ping frames.
        let socketPath = directory + "/mentoryd.sock"
        let daemon = Process()
        daemon.executableURL = URL(fileURLWithPath: mentoryd)
        daemon.arguments = ["--socket", socketPath, "--state-dir", directory + "/state", "--log-level", "warning"]
        try daemon.run()
        defer {
            daemon.terminate()
            daemon.waitUntilExit()
        }
        var client: MentoryClient?
        for _ in 0..<200 where client == nil {
            client = try? await MentoryClient.connect(socketPath: socketPath, clientName: "bench")
            if client == nil { try await Task.sleep(for: .milliseconds(25)) }
        }
        guard let client else { throw BenchError("mentoryd did not start") }

        let daemonRaw = try Self.measureBlocking(path: socketPath, frame: ping, requests: requests, handshake: true)
        Self.report("mentoryd session.ping, blocking client", daemonRaw, baseline: raw)

        // 3. mentoryd through the client library (NIO + async/await).
        var library = LatencySamples()
        let clock = ContinuousClock()
        for _ in 0..<1000 { try await client.ping() }
        for _ in 0..<requests {
            library.record(try await clock.measure { try await client.ping() })
        }
        Self.report("mentoryd session.ping, MentoryClient", library, baseline: raw)

        var mentorGet = LatencySamples()
        for _ in 0..<requests {
            mentorGet.record(try await clock.measure { _ = try await client.mentorGet() })
        }
        Self.report("mentoryd mentor.get, MentoryClient", mentorGet, baseline: raw)
        await client.close()

        // 4. The mentoryctl command as a whole: process start, connect, handshake, ping, exit.
        var ctl = LatencySamples()
        for _ in 0..<200 {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: mentoryctl)
            process.arguments = ["ping", "--socket", socketPath]
            process.standardOutput = FileHandle.nullDevice
            let elapsed = try clock.measure {
                try process.run()
                process.waitUntilExit()
            }
            ctl.record(elapsed)
        }
        Self.report("mentoryctl ping (whole process, 200 runs)", ctl, baseline: nil)
    }

    static func pingFrame(id: UInt64) -> [UInt8] {
        var request = Mentory_V1_Request()
        request.id = id
        request.namespace = WireNames.session
        request.method = "ping"
        var envelope = Mentory_V1_Envelope()
        envelope.request = request
        var buffer = ByteBuffer()
        buffer.writeFrame(envelope)
        return Array(buffer.readableBytesView)
    }

    static func measureBlocking(path: String, frame: [UInt8], requests: Int, handshake: Bool) throws -> LatencySamples {
        let socket = try BlockingSocket.connect(to: path)
        defer { socket.close() }
        var buffer = [UInt8](repeating: 0, count: 4096)
        if handshake {
            var hello = Mentory_V1_Hello()
            hello.protocolVersion = WireProtocol.version
            hello.clientName = "bench-raw"
            var envelope = Mentory_V1_Envelope()
            envelope.hello = hello
            var out = ByteBuffer()
            out.writeFrame(envelope)
            socket.writeAll(Array(out.readableBytesView))
            guard socket.readFrame(into: &buffer) != nil else { throw BenchError("no welcome") }
        }
        let clock = ContinuousClock()
        var samples = LatencySamples()
        for index in 0..<(requests + 1000) {
            let elapsed = clock.measure {
                socket.writeAll(frame)
                _ = socket.readFrame(into: &buffer)
            }
            if index >= 1000 { samples.record(elapsed) }
        }
        return samples
    }

    static func report(_ name: String, _ samples: LatencySamples, baseline: LatencySamples?) {
        let ratio = baseline.map { String(format: "  %.2fx baseline", samples.median / $0.median) } ?? ""
        print(
            String(
                format: "%-46@ median %8.1f µs  p99 %8.1f µs%@",
                name as NSString,
                samples.median,
                samples.percentile(0.99),
                ratio as NSString
            )
        )
    }
}
