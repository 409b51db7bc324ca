import GRDB
import MentoryStorage
import MentoryStorageSQLite
import MentoryTestSupport
import MentoryWire
import MetricsTestKit
import Testing

/// Opens a store recording its metrics in a fresh `TestMetrics`.
private func openMeasuredStore(
    _ directory: String,
    configure: (inout SQLiteSessionStore.Configuration) -> Void = { _ in }
) throws -> (SQLiteSessionStore, TestMetrics) {
    let metrics = TestMetrics()
    let store = try openStore(directory) { configuration in
        configuration.metricsFactory = metrics
        configure(&configuration)
    }
    return (store, metrics)
}

/// Holds the database's write lock from another connection until `release()`.
private struct WriteLockHolder {
    let queue: DatabaseQueue

    init(path: String) async throws {
        var configuration = Configuration()
        configuration.allowsUnsafeTransactions = true
        self.queue = try DatabaseQueue(path: path, configuration: configuration)
        try await self.queue.writeWithoutTransaction { db in try db.execute(sql: "BEGIN IMMEDIATE") }
    }

    func release() async throws {
        try await self.queue.writeWithoutTransaction { db in try db.execute(sql: "ROLLBACK") }
        try self.queue.close()
    }
}

@Suite("SQLite store: group commit batches")
struct GroupCommitBatchingTests {
    @Test("N concurrent writers take between 1 and N commits; every acknowledged entry survives a reopen")
    func concurrentWritersCommitAtMostOncePerWrite() async throws {
        try await withTemporaryDirectory { directory in
            let (store, metrics) = try openMeasuredStore(directory)
            let writers = 64
            let entries = (0..<writers).map { makeEntry(day($0)) }
            let acknowledged = try await withThrowingTaskGroup(of: String.self) { group in
                for entry in entries {
                    group.addTask {
                        try await store.insert(entry)
                        return entry.id
                    }
                }
                return try await group.reduce(into: Set<String>()) { $0.insert($1) }
            }
            #expect(acknowledged.count == writers)

            let statistics = store.commitStatistics
            #expect(statistics.writes == writers)
            #expect(statistics.batches >= 1)
            #expect(statistics.batches <= writers)
            #expect(statistics.failedBatches == 0)
            #expect(statistics.largestBatch <= writers)

            // One record per commit, created once and recorded per commit.
            #expect(try metrics.expectCounter(StorageMetricLabels.commits).totalValue == Int64(statistics.batches))
            let batchSizes = try metrics.expectRecorder(StorageMetricLabels.batchEntries).values
            #expect(batchSizes.count == statistics.batches)
            #expect(batchSizes.reduce(0, +) == Double(writers))
            #expect(batchSizes.allSatisfy { $0 >= 1 })
            let commitTimes = try metrics.expectTimer(StorageMetricLabels.fsyncDuration).values
            #expect(commitTimes.count == statistics.batches)
            #expect(commitTimes.allSatisfy { $0 > 0 })
            #expect(try metrics.expectCounter(StorageMetricLabels.commitFailures).totalValue == 0)
            try await store.close()

            let reopened = try openStore(directory)
            for entry in entries {
                #expect(try await reopened.entry(id: entry.id) == entry)
            }
            #expect(try await reopened.diaryEntryCount() == writers)
            try await reopened.close()
        }
    }

    @Test("a lone writer is committed at once: one transaction per write, never waiting for company")
    func loneWriterCommitsEachWrite() async throws {
        try await withTemporaryDirectory { directory in
            let (store, metrics) = try openMeasuredStore(directory)
            let entries = (0..<20).map { makeEntry(day($0)) }
            for entry in entries { try await store.insert(entry) }
            // A refused write, alone in its transaction, is rolled back and leaves nothing behind.
            var conflicting = makeEntry(day(0))
            conflicting.title = "another entry for the same day"
            let refusal = await storageError { () throws(StorageError) in try await store.insert(conflicting) }
            if case .conflict = refusal {
            } else {
                Issue.record("expected a conflict, got \(String(describing: refusal))")
            }
            let deleted = try await store.delete(id: entries[1].id)
            #expect(deleted == entries[1])

            let statistics = store.commitStatistics
            #expect(statistics.writes == 22)
            #expect(statistics.batches == 22)
            #expect(statistics.largestBatch == 1)
            // The refused write committed nothing.
            #expect(try metrics.expectCounter(StorageMetricLabels.commits).totalValue == 21)
            #expect(try metrics.expectRecorder(StorageMetricLabels.batchEntries).values.allSatisfy { $0 == 1 })
            #expect(try await store.diaryEntryCount() == 19)
            #expect(try await store.entry(id: conflicting.id) == nil)
            try await store.close()
        }
    }

    @Test("no transaction holds more than maxBatchSize writes")
    func batchesAreBounded() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/mentoryd.sqlite"
            let (store, metrics) = try openMeasuredStore(directory) {
                $0.maxBatchSize = 3
                $0.busyTimeout = .seconds(60)
            }
            let lock = try await WriteLockHolder(path: path)
            let writers = 20
            let writes = Task {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for index in 0..<writers { group.addTask { try await store.insert(makeEntry(day(index))) } }
                    try await group.waitForAll()
                }
            }
            try await waitUntil("every write is queued or taken") {
                store.queuedWriteCount + store.commitStatistics.writes == writers
            }
            try await lock.release()
            try await writes.value

            let statistics = store.commitStatistics
            #expect(statistics.writes == writers)
            #expect(statistics.largestBatch <= 3)
            #expect(statistics.batches >= (writers + 2) / 3)
            #expect(try metrics.expectRecorder(StorageMetricLabels.batchEntries).values.allSatisfy { $0 <= 3 })
            #expect(try await store.diaryEntryCount() == writers)
            try await store.close()
        }
    }

    @Test("a refused write that shares a transaction rolls back alone: the others in it commit, twice over")
    func refusedWriteInSharedBatchRollsBackAlone() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/mentoryd.sqlite"
            let (store, _) = try openMeasuredStore(directory) { $0.busyTimeout = .seconds(60) }
            let existing = makeEntry(day(0))
            try await store.insert(existing)
            // Two shared batches in a row, so that the savepoint statements are reused after a rollback.
            for round in 0..<2 {
                let lock = try await WriteLockHolder(path: path)
                let before = store.commitStatistics.writes
                // The first write's batch waits for the lock; the next ones queue behind it and
                // share the following transaction.
                let first = Task { try await store.insert(makeEntry(day(100 * round + 1))) }
                try await waitUntil("the first write is taken") { store.commitStatistics.writes == before + 1 }
                var sameDay = makeEntry(day(0))
                sameDay.title = "another entry for the same day, round \(round)"
                let conflicting = sameDay
                let kept = [makeEntry(day(100 * round + 2)), makeEntry(day(100 * round + 3))]
                let keptWrites = Task {
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        for entry in kept { group.addTask { try await store.insert(entry) } }
                        try await group.waitForAll()
                    }
                }
                let refused = Task { () async -> StorageError? in
                    do throws(StorageError) {
                        try await store.insert(conflicting)
                        return nil
                    } catch {
                        return error
                    }
                }
                try await waitUntil("three writes are queued") { store.queuedWriteCount == 3 }
                try await lock.release()
                _ = try await first.value
                try await keptWrites.value
                let refusal = await refused.value
                if case .conflict = refusal {
                } else {
                    Issue.record("expected a conflict, got \(String(describing: refusal))")
                }
                // The three queued writes shared one transaction.
                #expect(store.commitStatistics.largestBatch == 3)
                #expect(store.commitStatistics.writes == before + 4)
                for entry in kept { #expect(try await store.entry(id: entry.id) == entry) }
                #expect(try await store.entry(id: conflicting.id) == nil)
            }
            #expect(try await store.entry(id: existing.id) == existing)
            #expect(try await store.diaryEntryCount() == 7)
            #expect(store.commitStatistics.failedBatches == 0)
            try await store.close()
            // Every committed entry is in the file, none of the refused ones.
            let reopened = try openStore(directory)
            #expect(try await reopened.diaryEntryCount() == 7)
            try await reopened.close()
        }
    }

    @Test("a batch that cannot commit fails every write in it with STORAGE_FAILURE; later writes still work")
    func failedBatchFailsEveryWaiter() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/mentoryd.sqlite"
            let (store, metrics) = try openMeasuredStore(directory) { $0.busyTimeout = .milliseconds(300) }
            let kept = makeEntry(day(0))
            try await store.insert(kept)

            // Another program holds the write lock: each batch's BEGIN IMMEDIATE gives up after the
            // busy timeout, and the batch fails as a whole.
            let lock = try await WriteLockHolder(path: path)
            let writers = 16
            let failures = await withTaskGroup(of: StorageError?.self) { group in
                for index in 1...writers {
                    group.addTask {
                        await storageError { () throws(StorageError) in try await store.insert(makeEntry(day(index))) }
                    }
                }
                return await group.reduce(into: [StorageError?]()) { $0.append($1) }
            }
            #expect(failures.count == writers)
            for failure in failures {
                let reason = failure?.storageFailureReason
                #expect(reason?.contains("locked by another process") == true)
                #expect(reason?.contains("not saved") == true)
            }
            let statistics = store.commitStatistics
            #expect(statistics.failedBatches >= 1)
            #expect(statistics.failedBatches == statistics.batches - 1)  // all but the first insert's
            #expect(statistics.writes == writers + 1)
            #expect(
                try metrics.expectCounter(StorageMetricLabels.commitFailures).totalValue
                    == Int64(statistics.failedBatches))
            #expect(try metrics.expectCounter(StorageMetricLabels.commits).totalValue == 1)

            // Once the lock is gone, the queue goes on: new writes commit, the failed ones left nothing.
            try await lock.release()
            let later = makeEntry(day(writers + 1))
            try await store.insert(later)
            #expect(
                try await store.entries(limit: 100, before: nil).map(\.id).sorted() == [kept.id, later.id].sorted())
            #expect(try metrics.expectCounter(StorageMetricLabels.commits).totalValue == 2)
            try await store.close()
        }
    }

    @Test("the queue holds at most maxQueuedWrites writes; one more is refused with UNAVAILABLE")
    func queueIsBounded() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/mentoryd.sqlite"
            let store = try openStore(directory) {
                $0.maxQueuedWrites = 4
                $0.busyTimeout = .seconds(60)
            }
            let lock = try await WriteLockHolder(path: path)
            // The first write is taken into a transaction that waits for the lock ...
            let first = Task { try await store.insert(makeEntry(day(0))) }
            try await waitUntil("the first write is in a transaction") {
                store.commitStatistics.writes == 1 && store.queuedWriteCount == 0
            }
            // ... the next four fill the queue ...
            let queued = Task {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for index in 1...4 { group.addTask { try await store.insert(makeEntry(day(index))) } }
                    try await group.waitForAll()
                }
            }
            try await waitUntil("four writes are queued") { store.queuedWriteCount == 4 }
            // ... and one more is refused at once, changing nothing.
            let refused = makeEntry(day(5))
            let error = await storageError { () throws(StorageError) in try await store.insert(refused) }
            guard case .overloaded(let reason) = error else {
                Issue.record("expected UNAVAILABLE, got \(String(describing: error))")
                try await lock.release()
                _ = try? await first.value
                _ = try? await queued.value
                try await store.close()
                return
            }
            #expect(reason.contains("4 writes"))
            #expect(error.map(MentoryError.init)?.code == .unavailable)

            try await lock.release()
            _ = try await first.value
            try await queued.value
            #expect(try await store.diaryEntryCount() == 5)
            #expect(try await store.entry(id: refused.id) == nil)
            try await store.close()
        }
    }
}
