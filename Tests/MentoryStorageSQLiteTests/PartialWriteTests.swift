import Dispatch
import GRDB
import MentoryStorage
import MentoryTestSupport
import MentoryWire
import MetricsTestKit
import Synchronization
import Testing

@testable import MentoryStorageSQLite

@Suite("SQLite store: a shared write that fails after changing rows")
struct PartialWriteTests {
    @Test("rolls back alone: the batch runs again with savepoints, and the other writes commit")
    func partialWriteRollsBackAlone() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/queue.sqlite"
            let writer = try DatabaseQueue(path: path)
            try await writer.write { db in try db.execute(sql: "CREATE TABLE t (v INTEGER NOT NULL)") }
            let queue = GroupCommitQueue(
                writer: writer, path: path, maxBatchSize: 16, maxQueuedWrites: 16, metricsFactory: TestMetrics())
            for round in 0..<2 {
                // The first write holds the writer (its own thread, not the cooperative pool's) until
                // the next three are queued, so that those share the following transaction.
                let release = DispatchSemaphore(value: 0)
                let started = Atomic<Bool>(false)
                let base = 10 * round
                let first = Task {
                    try await queue.submit { db in
                        started.store(true, ordering: .releasing)
                        release.wait()
                        try db.execute(sql: "INSERT INTO t VALUES (?)", arguments: [base])
                    }
                }
                try await waitUntil("the first write runs") { started.load(ordering: .acquiring) }
                let kept = Task {
                    try await queue.submit { db in
                        try db.execute(sql: "INSERT INTO t VALUES (?)", arguments: [base + 1])
                    }
                }
                let refused = Task { () async -> StorageError? in
                    do throws(StorageError) {
                        try await queue.submit { db in
                            // Changes a row, then refuses: the row must not be committed.
                            try db.execute(sql: "INSERT INTO t VALUES (?)", arguments: [base + 2])
                            throw StorageError.conflict("refused after writing")
                        }
                        return nil
                    } catch {
                        return error
                    }
                }
                let alsoKept = Task {
                    try await queue.submit { db in
                        try db.execute(sql: "INSERT INTO t VALUES (?)", arguments: [base + 3])
                    }
                }
                try await waitUntil("three writes are queued") { queue.queuedCount == 3 }
                release.signal()
                try await first.value
                try await kept.value
                try await alsoKept.value
                let refusal = await refused.value
                #expect(refusal == .conflict("refused after writing"))
            }
            let values = try await writer.read { db in try Int.fetchAll(db, sql: "SELECT v FROM t ORDER BY v") }
            #expect(values == [0, 1, 3, 10, 11, 13])
            let statistics = queue.statistics
            #expect(statistics.largestBatch == 3)
            #expect(statistics.failedBatches == 0)
            _ = await queue.close()
            try writer.close()
        }
    }
}
