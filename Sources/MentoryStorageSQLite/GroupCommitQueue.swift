import NIOConcurrencyHelpers
import GRDB
import GRDBSQLite
import MentoryStorage
import Metrics
import Synchronization

/// How the group commit has batched the writes so far.
public struct CommitStatistics: Sendable, Equatable {
    /// Transactions committed (or attempted), each holding one or more writes.
    public var batches = 0
    /// Writes those transactions held.
    public var writes = 0
    /// The most writes one transaction held.
    public var largestBatch = 0
    /// Transactions that failed as a whole, every write in them answered with a storage failure.
    public var failedBatches = 0
    /// `PASSIVE` checkpoints the writer ran between two batches, once enough of the log was uncopied.
    public var passiveCheckpoints = 0
    /// `RESTART` checkpoints the writer ran between two batches because the log reached its limit.
    public var restartCheckpoints = 0
    /// The longest the write-ahead log was after a commit, in pages.
    public var largestLogPages = 0

    public init() {}
}

/// The labels of the metrics the store records once per commit (with swift-metrics, on the
/// factory given in ``SQLiteSessionStore/Configuration/metricsFactory``, else the one bootstrapped
/// in `MetricsSystem`).
public enum StorageMetricLabels {
    /// Counter: transactions committed (a lone write that was refused, and so rolled back, is none).
    public static let commits = "mentoryd_storage_commits_total"
    /// Recorder: the writes (diary entries, deletes, mentor saves) in each committed transaction.
    public static let batchEntries = "mentoryd_storage_commit_batch_entries"
    /// Timer, nanoseconds: how long each `COMMIT` took, which includes the log's fsync.
    public static let fsyncDuration = "mentoryd_storage_fsync_seconds"
    /// Counter: transactions that failed (their writes were all answered with a storage failure).
    public static let commitFailures = "mentoryd_storage_commit_failures_total"
}

/// Runs writes in shared transactions so that concurrent writers share one fsync.
///
/// **Where it runs.** The queue has no thread or actor of its own: a write is appended to the
/// queue on the caller's executor, and the batches are committed on GRDB's writer, one
/// `writeWithoutTransaction` access per batch. The first write that finds the queue idle schedules
/// that access; while a batch is being committed (and fsynced), later writes only append to the
/// queue, and the access that committed the batch schedules the next one, which takes everything
/// queued meanwhile. A write therefore costs one hop to the writer (shared by its batch) and one
/// back to its caller; a lone writer pays one transaction and waits for nothing else: there is no
/// batching delay. With a ``CallerLoop`` (the daemon's event loop), the first write hands the batch
/// to the writer only after the work already queued on the loop, so that the writes one loop tick
/// read share a transaction, and the batch's writers resume on the loop with one hand-over.
///
/// **Bounds.** One transaction holds at most `maxBatchSize` writes; the queue holds at most
/// `maxQueuedWrites`, and a write beyond that fails at once with ``StorageError/overloaded(_:)``
/// (the daemon sets it to the most requests it has in flight, so it never refuses a write there).
///
/// **Outcomes.** A write that fails (a conflict, say) rolls back alone and the others in its
/// transaction still commit. A write of a shared batch first runs without a savepoint: when it
/// fails before changing anything (SQLite undoes a failed statement; a refusal is thrown after
/// reads only), there is nothing to roll back. When one fails after changing rows, the transaction
/// is rolled back and the batch runs again with each write in a savepoint of its own. (Two
/// statements per write saved in the common case, a batch run twice in the rare one.) Every caller is resumed only after the transaction holding its write committed;
/// when that transaction fails, every write of the batch fails with
/// ``StorageError/failed(_:)`` and none is acknowledged, and the queue goes on with the
/// next batch.
final class GroupCommitQueue: Sendable {
    /// How a write runs in its batch's transaction.
    private enum Isolation: Sendable {
        /// Alone in the transaction: a failed write rolls the transaction back.
        case alone
        /// Shared, without a savepoint: a write that fails after changing rows throws
        /// ``PartialWrite``, and the batch runs again with savepoints.
        case optimistic
        /// Shared, in a savepoint of its own, which a failed write rolls back.
        case savepoint
    }

    /// A write of a shared batch failed after changing rows, with no savepoint to undo them alone.
    private struct PartialWrite: Error {}

    /// A queued write.
    private struct PendingWrite: Sendable {
        /// Applies the write inside the batch's transaction and says how to answer its caller once
        /// that transaction ended; it may run twice (see ``Isolation/optimistic``), and throws only
        /// when the whole transaction is lost or must run again.
        let apply: @Sendable (_ db: Database, _ isolation: Isolation) throws -> Applied
        /// Answers the caller when the batch failed as a whole.
        let fail: @Sendable (StorageError) -> Void
    }

    /// A write applied in a batch's transaction.
    private struct Applied: Sendable {
        /// Answers the caller; called once the transaction ended.
        var answer: @Sendable () -> Void
        /// Whether the write, alone in its transaction, was refused: the transaction must be rolled
        /// back rather than committed (shared writes roll back their own savepoint instead).
        var mustRollBack: Bool
    }

    /// The queue's state, shared by the callers that append and the writer that commits.
    private struct State {
        /// Writes not yet in a transaction, oldest first; at most `maxQueuedWrites`.
        var pending: [PendingWrite] = []
        /// Whether an access to the writer is scheduled or running that will take the queued writes.
        var isDraining = false
        var isClosed = false
        var drainWaiters: [CheckedContinuation<Void, Never>] = []
        var statistics = CommitStatistics()

        var queuedCount: Int { self.pending.count }
    }

    /// What a caller does after appending.
    private enum Admission {
        case queued
        case startDrain
        case refused(StorageError)
    }

    /// The metrics recorded once per commit, created once.
    private struct CommitMetrics: Sendable {
        let commits: Counter
        let batchEntries: Recorder
        let fsyncDuration: Timer
        let commitFailures: Counter

        init(factory: any MetricsFactory) {
            self.commits = Counter(label: StorageMetricLabels.commits, factory: factory)
            self.batchEntries = Recorder(label: StorageMetricLabels.batchEntries, factory: factory)
            self.fsyncDuration = Timer(label: StorageMetricLabels.fsyncDuration, factory: factory)
            self.commitFailures = Counter(label: StorageMetricLabels.commitFailures, factory: factory)
        }
    }

    private let writer: any DatabaseWriter
    private let path: String
    private let maxBatchSize: Int
    private let maxQueuedWrites: Int
    private let metrics: CommitMetrics
    private let checkpointer: LogCheckpointer?
    /// Where the database's failures are logged for the operator.
    private let failureLog: StorageFailureLog
    /// Where batches start and writers resume, when the callers share one thread (see ``CallerLoop``).
    private let callerLoop: (any CallerLoop)?
    // SAFETY: the lock guards only the queue of pending writes and its counters, not domain state,
    // and is never held across SQLite work, an await or a continuation's resumption: each holder
    // appends or takes a slice of the array and lets go. It replaces an actor hop per write.
    private let state = NIOLockedValueBox(State())

    init(
        writer: any DatabaseWriter,
        path: String,
        maxBatchSize: Int,
        maxQueuedWrites: Int,
        checkpointer: LogCheckpointer? = nil,
        callerLoop: (any CallerLoop)? = nil,
        metricsFactory: any MetricsFactory,
        failureLog: StorageFailureLog? = nil
    ) {
        self.writer = writer
        self.path = path
        self.maxBatchSize = max(1, maxBatchSize)
        self.maxQueuedWrites = max(1, maxQueuedWrites)
        self.metrics = CommitMetrics(factory: metricsFactory)
        self.checkpointer = checkpointer
        self.callerLoop = callerLoop
        self.failureLog = failureLog ?? StorageFailureLog(logger: nil, path: path, interval: .zero)
    }

    /// Writes queued and not yet in a transaction.
    var queuedCount: Int { self.state.withLockedValue { $0.queuedCount } }

    /// How the writes so far were batched.
    var statistics: CommitStatistics {
        var statistics = self.state.withLockedValue { $0.statistics }
        if let counts = self.checkpointer?.statistics {
            statistics.passiveCheckpoints = counts.passive
            statistics.restartCheckpoints = counts.restart
            statistics.largestLogPages = counts.largestLogPages
        }
        return statistics
    }

    /// Runs `body` in the next batch's transaction and returns its value once that transaction committed.
    ///
    /// `body` may throw ``StorageError`` to refuse the write (its savepoint is rolled back); SQLite
    /// errors become ``StorageError/failed(_:)``. Runs on the caller's executor until it
    /// waits for the commit.
    nonisolated(nonsending) func submit<T: Sendable>(
        _ body: @escaping @Sendable (Database) throws -> T
    ) async throws(StorageError) -> T {
        // With a caller loop, the continuation resumes on it, not on Swift's global pool (see CallerLoop).
        let result: Result<T, StorageError> = await withTaskExecutorPreference(self.callerLoop) {
            await self.enqueue(body)
        }
        return try result.get()
    }

    /// Queues `body` and waits until its batch's transaction ended.
    private nonisolated(nonsending) func enqueue<T: Sendable>(
        _ body: @escaping @Sendable (Database) throws -> T
    ) async -> Result<T, StorageError> {
        let path = self.path
        let maxQueuedWrites = self.maxQueuedWrites
        let failureLog = self.failureLog
        return await withCheckedContinuation { continuation in
            let write = PendingWrite(
                apply: { db, isolation in
                    let outcome = try Self.attempt(
                        body, in: db, isolation: isolation, path: path, failureLog: failureLog)
                    let failed: Bool
                    if case .failure = outcome { failed = true } else { failed = false }
                    return Applied(
                        answer: { continuation.resume(returning: outcome) },
                        mustRollBack: isolation == .alone && failed
                    )
                },
                fail: { error in continuation.resume(returning: .failure(error)) }
            )
            let admission = self.state.withLockedValue { state -> Admission in
                guard !state.isClosed else {
                    return .refused(.failed("the database \(path) is closed"))
                }
                guard state.queuedCount < maxQueuedWrites else {
                    return .refused(
                        .overloaded(
                            "\(maxQueuedWrites) writes are already waiting for the database \(path); retry later"))
                }
                state.pending.append(write)
                guard !state.isDraining else { return .queued }
                state.isDraining = true
                return .startDrain
            }
            switch admission {
            case .queued:
                break
            case .startDrain:
                if let callerLoop = self.callerLoop {
                    // After the requests this loop tick already read: they join the batch.
                    callerLoop.execute { self.scheduleBatch() }
                } else {
                    self.scheduleBatch()
                }
            case .refused(let error):
                continuation.resume(returning: .failure(error))
            }
        }
    }

    /// Refuses new writes and returns once every queued write was committed or failed.
    ///
    /// Returns `true` the first time only.
    func close() async -> Bool {
        let (first, draining) = self.state.withLockedValue { state in
            defer { state.isClosed = true }
            return (!state.isClosed, state.isDraining)
        }
        guard first else { return false }
        if draining {
            await withCheckedContinuation { continuation in
                let idle = self.state.withLockedValue { state in
                    guard state.isDraining else { return true }
                    state.drainWaiters.append(continuation)
                    return false
                }
                if idle { continuation.resume() }
            }
        }
        return true
    }

    /// Commits the next batch on the writer: one access to it per batch, so that other accesses
    /// (a checkpoint, a settings query) get their turn between batches.
    private func scheduleBatch() {
        self.writer.asyncWriteWithoutTransaction { db in
            self.commitNextBatch(db)
        }
    }

    /// Takes up to `maxBatchSize` queued writes, commits them in one transaction, answers them, and
    /// schedules the next batch when writes queued up meanwhile.
    private func commitNextBatch(_ db: Database) {
        let maxBatchSize = self.maxBatchSize
        let batch = self.state.withLockedValue { state -> [PendingWrite] in
            let count = min(state.pending.count, maxBatchSize)
            guard count > 0 else { return [] }
            let batch = Array(state.pending[..<count])
            if count == state.pending.count {
                // The common case: the batch takes the whole queue.
                state.pending.removeAll(keepingCapacity: state.pending.capacity <= 4 * maxBatchSize)
            } else {
                state.pending.removeFirst(count)
            }
            state.statistics.batches += 1
            state.statistics.writes += batch.count
            state.statistics.largestBatch = max(state.statistics.largestBatch, batch.count)
            return batch
        }
        if !batch.isEmpty {
            self.commit(batch, in: db)
            // After the batch was answered: a checkpoint here delays only the next batch.
            self.checkpointer?.afterCommit(db)
        }
        let (more, waiters) = self.state.withLockedValue { state -> (Bool, [CheckedContinuation<Void, Never>]) in
            if state.queuedCount > 0 { return (true, []) }
            state.isDraining = false
            defer { state.drainWaiters = [] }
            return (false, state.drainWaiters)
        }
        if more {
            self.scheduleBatch()
        }
        for waiter in waiters { waiter.resume() }
    }

    private func commit(_ batch: [PendingWrite], in db: Database) {
        let clock = ContinuousClock()
        var commitDuration: Duration?
        var outcome: Result<[Applied], any Error>
        var isolation: Isolation = batch.count > 1 ? .optimistic : .alone
        // The system's errno of the failure that lost the transaction, read before the rollback.
        var systemErrno: Int32 = 0
        repeat {
            do {
                // IMMEDIATE: the write lock is taken now, not at the first write. With synchronous=FULL
                // in WAL mode, COMMIT returns only after the log was fsynced. Both statements are
                // prepared once per connection (GRDB's beginTransaction and commit parse theirs each time).
                try db.cachedStatement(sql: "BEGIN IMMEDIATE TRANSACTION").execute()
                do {
                    let applied = try batch.map { [isolation] in try $0.apply(db, isolation) }
                    if applied.contains(where: \.mustRollBack) {
                        // A lone write that was refused: nothing to keep.
                        try db.rollback()
                    } else {
                        let start = clock.now
                        try db.cachedStatement(sql: "COMMIT TRANSACTION").execute()
                        commitDuration = clock.now - start
                    }
                    outcome = .success(applied)
                } catch {
                    systemErrno = sqlite3_system_errno(db.sqliteConnection)
                    if db.isInsideTransaction { try? db.rollback() }
                    throw error
                }
            } catch is PartialWrite {
                // Rolled back above: run the batch again, each write in a savepoint.
                isolation = .savepoint
                outcome = .failure(PartialWrite())
                continue
            } catch {
                if systemErrno == 0 { systemErrno = sqlite3_system_errno(db.sqliteConnection) }
                outcome = .failure(error)
            }
            break
        } while true
        switch outcome {
        case .success(let applied):
            if let commitDuration {
                self.failureLog.commitSucceeded()
                self.metrics.commits.increment()
                self.metrics.batchEntries.record(batch.count)
                self.metrics.fsyncDuration.recordNanoseconds(Self.nanoseconds(commitDuration))
            }
            self.answer { for write in applied { write.answer() } }
        case .failure(let error):
            self.metrics.commitFailures.increment()
            self.state.withLockedValue { $0.statistics.failedBatches += 1 }
            self.failureLog.record(.commit, error, systemErrno: systemErrno, writes: batch.count)
            let failure = StorageFailures.write(error, path: self.path)
            self.answer { for write in batch { write.fail(failure) } }
        }
    }

    /// Resumes a batch's writers: on the caller loop with one hand-over when there is one, else here.
    private func answer(_ resume: @escaping @Sendable () -> Void) {
        if let callerLoop = self.callerLoop {
            callerLoop.execute(resume)
        } else {
            resume()
        }
    }

    private static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }

    /// Runs one write as `isolation` says; returns its own outcome unless the whole transaction is
    /// lost (or, ``Isolation/optimistic``, must run again: ``PartialWrite``).
    private static func attempt<T>(
        _ body: (Database) throws -> T,
        in db: Database,
        isolation: Isolation,
        path: String,
        failureLog: StorageFailureLog
    ) throws -> Result<T, StorageError> {
        var value: T?
        do {
            switch isolation {
            case .savepoint:
                value = try Self.inSavepoint(db) { try body(db) }
            case .alone:
                // Alone in the transaction: when the write fails, the whole transaction is rolled
                // back instead of a savepoint, which saves two statements per write.
                value = try body(db)
            case .optimistic:
                // Rows changed by completed statements; a statement that fails is undone by SQLite.
                let changesBefore = db.totalChangesCount
                do {
                    value = try body(db)
                } catch {
                    if db.isInsideTransaction, db.totalChangesCount != changesBefore { throw PartialWrite() }
                    throw error
                }
            }
        } catch let error as PartialWrite {
            throw error
        } catch {
            // The savepoint rolled this write back (or, alone, the transaction will be). When the
            // whole transaction is gone (SQLite abandons it on a full disk or an I/O error, and
            // `inSavepoint` rolls it back when the savepoint cannot be), the batch fails as a whole.
            guard db.isInsideTransaction else { throw error }
            if let refusal = error as? StorageError { return .failure(refusal) }
            failureLog.record(.write, error, systemErrno: sqlite3_system_errno(db.sqliteConnection), writes: 1)
            return .failure(StorageFailures.write(error, path: path))
        }
        guard let value else {
            return .failure(.internal("a write in \(path) finished without a value"))
        }
        return .success(value)
    }

    /// Runs `body` in a savepoint of the current transaction: released when `body` returns, rolled
    /// back (and released) when it throws, and the error rethrown.
    ///
    /// Like GRDB's `inSavepoint`, but its three statements are prepared once per connection
    /// (GRDB's statement cache) instead of parsed for every write: a shared batch runs them once
    /// per write.
    private static func inSavepoint<T>(_ db: Database, _ body: () throws -> T) throws -> T {
        try db.cachedStatement(sql: "SAVEPOINT mentoryd_write").execute()
        let value: T
        do {
            value = try body()
        } catch {
            // When SQLite abandoned the whole transaction, there is no savepoint left to roll back:
            // the caller sees that the transaction is gone and fails the batch. When the savepoint
            // cannot be rolled back, the whole transaction is, so that no half-done write commits.
            if db.isInsideTransaction {
                do {
                    try db.cachedStatement(sql: "ROLLBACK TRANSACTION TO SAVEPOINT mentoryd_write").execute()
                    try db.cachedStatement(sql: "RELEASE SAVEPOINT mentoryd_write").execute()
                } catch {
                    try? db.rollback()
                }
            }
            throw error
        }
        do {
            try db.cachedStatement(sql: "RELEASE SAVEPOINT mentoryd_write").execute()
        } catch {
            // The write could be neither kept alone nor undone alone: the batch fails as a whole.
            try? db.rollback()
            throw error
        }
        return value
    }
}
