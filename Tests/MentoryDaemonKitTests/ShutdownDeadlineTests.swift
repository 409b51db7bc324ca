import Configuration
import Foundation
import Testing

@testable import MentoryDaemonKit

@Suite("systemd waits for mentoryd's own ordered stop")
struct ShutdownDeadlineTests {
    /// The shipped units of the daemon, system and user.
    static let units = ["systemd/mentoryd.service", "systemd/user/mentoryd.service"]

    /// `TimeoutStopSec=` of the unit at `path` (relative to the package), in seconds.
    private static func timeoutStop(_ path: String) throws -> Int {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let text = try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
        let values = text.split(separator: "\n").compactMap { line -> Int? in
            guard line.hasPrefix("TimeoutStopSec="), line.hasSuffix("s") else { return nil }
            return Int(line.dropFirst("TimeoutStopSec=".count).dropLast())
        }
        return try #require(values.count == 1 ? values.first : nil, "\(path) sets TimeoutStopSec= once, in seconds")
    }

    @Test(
        "TimeoutStopSec= is no shorter than the graceful shut-down's deadline and the cancellation's after it",
        arguments: units)
    func unitWaits(for unit: String) throws {
        let defaults = ConfigReader(provider: InMemoryProvider(values: [:]))
        let settings = try DaemonSettings(config: defaults, environment: [:])
        let longest =
            Daemon.gracefulShutdownDeadline(drainSeconds: settings.shutdownDrainSeconds)
            + Daemon.cancellationDeadline
        #expect(.seconds(try Self.timeoutStop(unit)) >= longest, "\(unit): mentoryd may take \(longest) to stop")
    }
}
