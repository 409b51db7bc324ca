import Foundation
import MentoryClient
import MentoryWire
import Testing

/// Start-up checks the database (`PRAGMA quick_check`) before `READY=1` only after an unclean
/// shutdown; after a clean one the check runs in the background and a damage it finds stops mentoryd.
@Suite("mentoryd start-up: the integrity check and the clean-shutdown marker", .serialized, .timeLimit(.minutes(10)))
struct StartupIntegrityTests {
    /// Starts mentoryd with its own log file, `name`.log in `directory`.
    static func start(_ directory: String, _ name: String, waitUntilServing: Bool = true) async throws -> DaemonProcess
    {
        try await DaemonProcess.start(
            socketPath: directory + "/mentoryd.sock",
            stateDirectory: directory + "/state",
            logPath: directory + "/\(name).log",
            waitUntilServing: waitUntilServing
        )
    }

    /// Adds `count` diary entries through the daemon.
    static func fill(_ daemon: DaemonProcess, count: Int) async throws {
        let client = try await MentoryClient.connect(socketPath: daemon.socketPath, clientName: "integrity-test")
        for index in 0..<count { _ = try await client.diaryAdd(addRequest(index, client: 0)) }
        await client.close()
    }

    /// Waits until the daemon's log holds `text` (the background check logs when it ends).
    static func waitForLog(_ daemon: DaemonProcess, containing text: String) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            if daemon.logTail(lines: 200).contains(text) { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw CrashTestError("the log never said '\(text)':\n\(daemon.logTail())")
    }

    @Test("after SIGTERM the restart checks in the background; after SIGKILL it checks before opening")
    func checkFollowsTheLastShutdown() async throws {
        try await withScratchDirectory { directory in
            let first = try await Self.start(directory, "first")
            try await Self.fill(first, count: 20)
            #expect(first.logTail(lines: 200).contains("quick_check=passed before opening"))  // a new database
            // The store names the SQLite it runs on and how it checkpoints (issue 21: the WAL-reset bug).
            #expect(first.logTail(lines: 200).contains("sqlite=3."), "\(first.logTail())")
            #expect(first.logTail(lines: 200).contains("checkpoint=writer only, between batches"), "\(first.logTail())")
            #expect(await first.stop(with: SIGTERM) == 0)

            let clean = try await Self.start(directory, "after-sigterm")
            #expect(
                clean.logTail(lines: 200).contains("quick_check=after ready (clean shutdown)"), "\(clean.logTail())")
            try await Self.waitForLog(clean, containing: "store verified in the background")
            _ = await clean.stop(with: SIGKILL)

            let unclean = try await Self.start(directory, "after-sigkill")
            #expect(unclean.logTail(lines: 200).contains("quick_check=passed before opening"), "\(unclean.logTail())")
            let client = try await MentoryClient.connect(socketPath: unclean.socketPath, clientName: "integrity-test")
            #expect(try await client.diaryList(limit: 100).count == 20)
            await client.close()
            #expect(await unclean.stop(with: SIGTERM) == 0)
        }
    }

    @Test("damage found by the background check stops mentoryd with status 1, and the restart refuses the file")
    func backgroundCheckStopsTheDaemon() async throws {
        try await withScratchDirectory { directory in
            let first = try await Self.start(directory, "first")
            try await Self.fill(first, count: 300)
            #expect(await first.stop(with: SIGTERM) == 0)

            // Overwrite pages of the diary's data in the middle of the file: not the header, the
            // schema, the migrations or the mentor's tables (the first pages), which start-up reads.
            let database = directory + "/state/mentoryd.sqlite"
            var bytes = try Data(contentsOf: URL(fileURLWithPath: database))
            let pages = bytes.count / 4096
            try #require(pages >= 24, "the database has only \(pages) pages")
            for offset in stride(from: 4096 * (pages / 2), to: 4096 * (pages / 2 + 4), by: 1) {
                bytes[offset] = UInt8(truncatingIfNeeded: offset &* 31)
            }
            try bytes.write(to: URL(fileURLWithPath: database))

            let damaged = try await Self.start(directory, "damaged", waitUntilServing: false)
            #expect(await damaged.waitForExit() == 1)
            let log = damaged.logTail(lines: 200)
            #expect(log.contains("quick_check=after ready (clean shutdown)"), "log:\n\(log)")
            #expect(log.contains("the background integrity check found the store damaged"), "log:\n\(log)")

            let restarted = try await Self.start(directory, "restarted", waitUntilServing: false)
            let status = await restarted.waitForExit()
            #expect(status != nil && status != 0)
            let refusal = restarted.logTail(lines: 200)
            #expect(refusal.contains("is damaged") && refusal.contains("cannot start"), "log:\n\(refusal)")
            #expect(!refusal.contains("] ready"), "log:\n\(refusal)")
        }
    }
}
