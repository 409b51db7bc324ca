import Foundation
import Logging
import MentoryStorage
import MentoryStorageSQLite
import NIOConcurrencyHelpers
import Testing

/// The lines a logger was given, for tests.
final class CapturedLog: Sendable {
    private let entries = NIOLockedValueBox<[(level: Logger.Level, message: String)]>([])

    var all: [(level: Logger.Level, message: String)] { self.entries.withLockedValue { $0 } }

    func append(_ level: Logger.Level, _ message: String) {
        self.entries.withLockedValue { $0.append((level, message)) }
    }

    /// A logger writing here.
    var logger: Logger {
        Logger(label: "test") { _ in CapturingLogHandler(log: self) }
    }
}

struct CapturingLogHandler: LogHandler {
    let log: CapturedLog
    var logLevel: Logger.Level = .trace
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { self.metadata[key] }
        set { self.metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        self.log.append(event.level, event.message.description)
    }
}

@Suite("SQLite store: its failures reach the log, rate-limited, with the path and the cause")
struct StorageFailureLogTests {
    /// Fills a store capped at 64 pages until a write fails, then fails `extra` more writes, then
    /// frees space and writes again; returns the store's path and what it logged.
    private func fillAndRecover(extra: Int, interval: Duration) async throws -> (path: String, log: CapturedLog) {
        let log = CapturedLog()
        return try await withTemporaryDirectory { directory in
            let store = try openStore(directory) {
                // max_page_count makes SQLite report SQLITE_FULL exactly as a full disk does.
                $0.maxPageCount = 64
                $0.logger = log.logger
                $0.failureLogInterval = interval
            }
            var stored: [String] = []
            var failures = 0
            var index = 0
            while failures <= extra, index < 5000 {
                var entry = makeEntry(day(index))
                entry.text = String(repeating: "x", count: 3000)
                index += 1
                do throws(StorageError) {
                    try await store.insert(entry)
                    stored.append(entry.id)
                } catch {
                    #expect(error.storageFailureReason?.contains("full") == true, "\(error)")
                    failures += 1
                }
            }
            #expect(failures == extra + 1)
            _ = try await store.delete(id: stored[0])
            try await store.insert(makeEntry("1999-01-01", items: 0))
            try await store.close()
            return (directory + "/mentoryd.sqlite", log)
        }
    }

    @Test(
        "the first failure is logged at error priority with the path, SQLite's code and the remedy; repeats are counted, not logged"
    )
    func firstFailureLoggedRepeatsCounted() async throws {
        let (path, log) = try await self.fillAndRecover(extra: 3, interval: .seconds(3600))
        let errors = log.all.filter { $0.level == .error }
        #expect(errors.count == 1, "\(errors)")
        let line = try #require(errors.first?.message)
        #expect(line.hasPrefix("storage failure: a "), "\(line)")
        #expect(line.contains(path), "\(line)")
        #expect(line.contains("is full"), "\(line)")
        #expect(line.contains("free some space"), "\(line)")
        #expect(line.contains("SQLITE_FULL (13)"), "\(line)")
    }

    @Test("with no interval, every failure is logged, each after the first counting none skipped")
    func everyFailureLoggedWithoutInterval() async throws {
        let (_, log) = try await self.fillAndRecover(extra: 2, interval: .zero)
        let errors = log.all.filter { $0.level == .error }
        #expect(errors.count == 3, "\(errors)")
        #expect(!errors.contains { $0.message.contains("more such") })
    }

    @Test("a commit that succeeds after failed commits logs the recovery once, with the count")
    func recoveryIsLogged() async throws {
        let (path, log) = try await self.fillAndRecover(extra: 3, interval: .seconds(3600))
        let notices = log.all.filter { $0.level == .notice }
        // SQLite abandons the transaction when it runs out of pages, so each failure is a failed commit.
        #expect(log.all.contains { $0.level == .error && $0.message.contains("a commit to \(path) failed") })
        #expect(notices.count == 1, "\(notices)")
        #expect(notices.first?.message.contains("storage recovered: commits to \(path) succeed again after 4") == true)
    }
}
