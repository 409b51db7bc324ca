import Foundation
import GRDB
import MentoryStorageSQLite
import MentoryWire
import Testing

@Suite("SQLite store: checkpoints run on the writer between batches, and the log stays bounded")
struct LogCheckpointTests {
    /// The bytes a log of `pages` frames takes: its header, then a frame header and a page each.
    private static func logBytes(pages: Int) -> Int64 {
        Int64(32 + pages * (24 + 4096))
    }

    @Test("the log never grows past twice its limit plus one commit, and every entry is kept")
    func logStaysBounded() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/mentoryd.sqlite"
            let maxLogPages = 32
            // One entry with its three action items touches a handful of pages; 16 is far above.
            let pagesOfOneCommit = 16
            let store = try openStore(directory) {
                $0.checkpointPages = 8
                $0.maxLogPages = maxLogPages
            }
            let count = 300
            for index in 0..<count {
                try await store.insert(makeEntry(day(index)))
                let logSize = (try? FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int64) ?? 0
                #expect(logSize <= Self.logBytes(pages: 2 * maxLogPages + pagesOfOneCommit))
            }
            let statistics = store.commitStatistics
            #expect(statistics.batches == count)
            // The log reached the threshold many times over: checkpoints ran, one way or the other.
            #expect(statistics.passiveCheckpoints + statistics.restartCheckpoints > 0)
            #expect(statistics.largestLogPages >= 8)
            #expect(statistics.largestLogPages < 2 * maxLogPages + pagesOfOneCommit)
            try await store.close()

            let reopened = try openStore(directory)
            #expect(try await reopened.diaryEntryCount() == count)
            try await reopened.close()
        }
    }

    @Test("the writer leaves checkpoints to the store: SQLite's automatic checkpoint is off")
    func automaticCheckpointIsOff() async throws {
        try await withTemporaryDirectory { directory in
            let store = try openStore(directory) { $0.checkpointPages = 1_000_000 }
            // Well past SQLite's default threshold of 1000 pages, with no checkpoint of the store's.
            for index in 0..<400 {
                try await store.insert(makeEntry(day(index)))
            }
            let statistics = store.commitStatistics
            #expect(statistics.passiveCheckpoints == 0)
            #expect(statistics.restartCheckpoints == 0)
            // Nothing was copied into the database file: the log holds every commit since opening.
            #expect(statistics.largestLogPages > 1100)
            try await store.close()
            let reopened = try openStore(directory)
            #expect(try await reopened.diaryEntryCount() == 400)
            try await reopened.close()
        }
    }

    @Test(
        "a reader holding a snapshot lets the log grow without holding up writes, and the log starts over after it",
        .timeLimit(.minutes(2))
    )
    func longReaderDoesNotHoldUpWrites() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/mentoryd.sqlite"
            // No checkpoint before the reader begins, so that its snapshot is in the log.
            let maxLogPages = 1000
            // A writer that waited for the reader would wait this long at every batch past twice the
            // limit, and the test would exceed its time limit many times over.
            let store = try openStore(directory) {
                $0.checkpointPages = maxLogPages
                $0.maxLogPages = maxLogPages
                $0.busyTimeout = .seconds(60)
            }
            try await store.insert(makeEntry(day(0)))
            // Another connection reads inside a transaction: its snapshot keeps the log from being reused.
            var readerConfiguration = Configuration()
            readerConfiguration.allowsUnsafeTransactions = true
            let reader = try DatabaseQueue(path: path, configuration: readerConfiguration)
            let seen = try await reader.writeWithoutTransaction { db in
                try db.execute(sql: "BEGIN DEFERRED")
                return try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM diary_entry") ?? -1
            }
            #expect(seen == 1)
            // At least four pages each (the entry, its two indexes, its items): past twice the limit.
            for index in 1..<501 {
                try await store.insert(makeEntry(day(index)))
            }
            // The log grew past the bound while the reader kept it.
            #expect(store.commitStatistics.largestLogPages > 2 * maxLogPages)
            let restartsBefore = store.commitStatistics.restartCheckpoints
            try await reader.writeWithoutTransaction { db in try db.execute(sql: "COMMIT") }
            try reader.close()
            // With the reader gone, the next batches past the limit checkpoint and start the log over.
            for index in 501..<511 {
                try await store.insert(makeEntry(day(index)))
            }
            #expect(store.commitStatistics.restartCheckpoints > restartsBefore)
            #expect(try await store.diaryEntryCount() == 511)
            try await store.close()
        }
    }
}
