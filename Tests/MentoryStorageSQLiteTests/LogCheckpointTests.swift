import Foundation
import GRDB
import MentoryStorageSQLite
import MentoryWire
import Testing

@Suite("SQLite store: checkpoints run beside the writer, and the log stays bounded")
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
            #expect(statistics.backgroundCheckpoints + statistics.blockingCheckpoints > 0)
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
            #expect(statistics.backgroundCheckpoints == 0)
            #expect(statistics.blockingCheckpoints == 0)
            // Nothing was copied into the database file: the log holds every commit since opening.
            #expect(statistics.largestLogPages > 1100)
            try await store.close()
            let reopened = try openStore(directory)
            #expect(try await reopened.diaryEntryCount() == 400)
            try await reopened.close()
        }
    }
}
