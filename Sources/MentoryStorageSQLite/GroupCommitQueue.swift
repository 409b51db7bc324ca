import GRDB
import MentoryWire

/// How the group commit has batched the writes so far.
public struct CommitStatistics: Sendable, Equatable {
    /// Transactions committed (or attempted), each holding one or more writes.
    public var batches = 0
    /// Writes those transactions held.
    public var writes = 0
    /// The most writes one transaction held.
    public var largestBatch = 0

    public init() {}
}

/// Runs writes in shared transactions so that concurrent writers share one fsync.
///
/// A write is queued, and a single drain task commits the queue in batches: while one batch's
/// transaction is being committed (and fsynced), new writes queue up and go into the next one. So
/// a lone writer pays one transaction, and N concurrent writers pay far fewer than N.
///
/// Each write runs inside its own savepoint within the batch's transaction, so a write that fails
/// (a conflict, say) rolls back alone and the others still commit. Every caller is resumed only
/// after the transaction holding its write committed; when that commit fails, every write of the
/// batch fails with the commit's error and none is acknowledged.
actor GroupCommitQueue {
    /// A queued write.
    private struct PendingWrite: Sendable {
        /// Applies the write inside the batch's transaction and returns how to answer its caller
        /// once that transaction committed.
        let apply: @Sendable (Database) throws -> @Sendable () -> Void
        /// Answers the caller when the batch failed as a whole.
        let fail: @Sendable (MentoryError) -> Void
    }

    private let writer: any DatabaseWriter
    private let path: String
    private let maxBatchSize: Int
    private var pending: [PendingWrite] = []
    private var isDraining = false
    private var isClosed = false
    private var drainWaiters: [CheckedContinuation<Void, Never>] = []
    private(set) var statistics = CommitStatistics()

    init(writer: any DatabaseWriter, path: String, maxBatchSize: Int) {
        self.writer = writer
        self.path = path
        self.maxBatchSize = max(1, maxBatchSize)
    }

    /// Writes queued and not yet in a transaction.
    var queuedCount: Int { self.pending.count }

    /// Runs `body` in the next batch's transaction and returns its value once that transaction committed.
    ///
    /// `body` may throw ``MentoryError`` to refuse the write (its savepoint is rolled back); SQLite
    /// errors become ``MentoryError/storageFailure(_:)``.
    func submit<T: Sendable>(
        _ body: @escaping @Sendable (Database) throws -> T
    ) async throws(MentoryError) -> T {
        let path = self.path
        let result: Result<T, MentoryError> = await withCheckedContinuation { continuation in
            guard !self.isClosed else {
                continuation.resume(returning: .failure(.storageFailure("the database \(path) is closed")))
                return
            }
            self.pending.append(
                PendingWrite(
                    apply: { db in
                        let outcome = try Self.attempt(body, in: db, path: path)
                        return { continuation.resume(returning: outcome) }
                    },
                    fail: { error in continuation.resume(returning: .failure(error)) }
                )
            )
            if !self.isDraining {
                self.isDraining = true
                Task { await self.drain() }
            }
        }
        return try result.get()
    }

    /// Refuses new writes and returns once every queued write was committed or failed.
    ///
    /// Returns `true` the first time only.
    func close() async -> Bool {
        guard !self.isClosed else { return false }
        self.isClosed = true
        if self.isDraining {
            await withCheckedContinuation { self.drainWaiters.append($0) }
        }
        return true
    }

    private func drain() async {
        while !self.pending.isEmpty {
            let count = min(self.pending.count, self.maxBatchSize)
            let batch = Array(self.pending[..<count])
            self.pending.removeFirst(count)
            await self.commit(batch)
        }
        self.isDraining = false
        let waiters = self.drainWaiters
        self.drainWaiters = []
        for waiter in waiters { waiter.resume() }
    }

    private func commit(_ batch: [PendingWrite]) async {
        self.statistics.batches += 1
        self.statistics.writes += batch.count
        self.statistics.largestBatch = max(self.statistics.largestBatch, batch.count)
        do {
            // `write` wraps the closure in one IMMEDIATE transaction and commits it; with
            // synchronous=FULL the commit returns only after the WAL was fsynced.
            let answers = try await self.writer.write { db in
                try batch.map { try $0.apply(db) }
            }
            for answer in answers { answer() }
        } catch {
            let failure = StorageFailures.write(error, path: self.path)
            for write in batch { write.fail(failure) }
        }
    }

    /// Runs one write in a savepoint; returns its own outcome unless the whole transaction is lost.
    private static func attempt<T>(
        _ body: (Database) throws -> T,
        in db: Database,
        path: String
    ) throws -> Result<T, MentoryError> {
        var value: T?
        do {
            try db.inSavepoint {
                value = try body(db)
                return .commit
            }
        } catch let error as MentoryError {
            return .failure(error)
        } catch {
            // The savepoint rolled this write back. When SQLite abandoned the whole transaction
            // (it may on a full disk or an I/O error), the batch fails as a whole.
            guard db.isInsideTransaction else { throw error }
            return .failure(StorageFailures.write(error, path: path))
        }
        guard let value else {
            return .failure(.internal("a write in \(path) finished without a value"))
        }
        return .success(value)
    }
}
