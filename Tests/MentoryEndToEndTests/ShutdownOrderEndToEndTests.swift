import Foundation
import MentoryTestSupport
import Testing

/// The start-up and shut-down order of the real daemon, as its debug log tells it.
@Suite("Start-up and shut-down order, against the real daemon", .timeLimit(.minutes(10)))
struct ShutdownOrderEndToEndTests {
    /// The index of the first log line holding every one of `texts`.
    private static func line(_ texts: String..., in log: [Substring]) -> Int? {
        log.firstIndex { line in texts.allSatisfy { line.contains($0) } }
    }

    @Test("on SIGTERM mentoryd stops its parts in the reverse of their start-up order, and exits 0")
    func sigterm() async throws {
        let daemon = try await DaemonProcess(environment: ["MENTORYD_STORAGE_BACKEND": "memory"])
        #expect(await daemon.stop() == 0)
        let log = daemon.log.split(separator: "\n")
        let opened = ["event loop", "store", "handlers"].map { Self.line("resource opened", $0, in: log) }
        let ready = Self.line("ready", "version", in: log)
        let stopAccepting = Self.line("no longer accepting connections", in: log)
        let closed = ["handlers", "store", "event loop"].map { Self.line("resource closed", $0, in: log) }
        let all = opened + [ready, stopAccepting] + closed
        #expect(all.allSatisfy { $0 != nil }, "\(daemon.log)")
        let indices = all.compactMap { $0 }
        #expect(indices == indices.sorted(), "opened, ready, stopped accepting, closed in reverse: \(daemon.log)")
    }

    @Test(
        "start-up failing half-way (a handler's missing dependency): exit 78, the store and event loop close in reverse"
    )
    func startupFailsHalfway() async throws {
        let result = try await HandlerConfigurationTests.runDaemonToExit(
            config: #"{"handlers": {"diary": {"requires": ["nowhere"]}}}"#, arguments: ["--log-level", "debug"])
        #expect(result.status == 78, "\(result.stderr)")
        let log = result.stderr.split(separator: "\n")
        let store = Self.line("resource closed", "store", in: log)
        let eventLoop = Self.line("resource closed", "event loop", in: log)
        #expect(store != nil && eventLoop != nil && store! < eventLoop!, "\(result.stderr)")
        #expect(Self.line("resource opened", "handlers", in: log) == nil, "\(result.stderr)")
        #expect(Self.line("listening", in: log) == nil, "the socket never opened: \(result.stderr)")
    }
}
