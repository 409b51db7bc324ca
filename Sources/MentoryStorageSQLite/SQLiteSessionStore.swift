#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif
import Foundation
import GRDB
import GRDBSQLite
import Logging
import MentoryDomain
import NIOConcurrencyHelpers
import MentoryStorage
import MentoryWire
import Metrics

/// A durable store for diary entries and the mentor state: one SQLite database in WAL mode.
///
/// **Durability.** Every connection runs with `synchronous=FULL`, so a transaction's commit
/// returns only after the write-ahead log was fsynced. A write method returns only after the
/// transaction holding its write committed: a change the daemon acknowledges survives `kill -9`
/// and a power cut.
///
/// **Group commit.** Writes go through one queue that commits them in batches on GRDB's writer
/// (see ``CommitStatistics``): concurrent writers share a transaction and its fsync, so throughput
/// grows with concurrency, while each caller still waits for its own commit. A lone writer's write
/// is committed at once, without waiting for company. Each commit is recorded in the metrics named
/// by ``StorageMetricLabels``.
///
/// **Reads** run on a pool of read-only connections and see every acknowledged write.
///
/// **One connection writes.** While the store is open, only the pool's writer writes or
/// checkpoints: every checkpoint runs on it, between two batches (see ``checkpointMode``), and the
/// readers are read-only connections, which SQLite never lets checkpoint, on close included. So
/// SQLite's WAL-reset bug (3.7.0 to 3.51.2, two connections writing or checkpointing at the same
/// time) cannot happen with the SQLite the daemon links (``sqliteVersion``).
///
/// **A crash-safe first start.** A new database is built whole beside its name (in WAL mode, with
/// mentoryd's `PRAGMA application_id` and the whole schema), synced, renamed into place, and its
/// directory synced (``NewDatabase``): a power cut leaves no file, an empty one (which the next
/// start builds again) or a whole database. Opening also finishes a file that an older
/// mentoryd left half made when it crashed during its first start (`application_id` 0 and nothing
/// but GRDB's empty migrations table), so that no crash point leaves a file mentoryd refuses.
///
/// **Opening** refuses, with a ``StorageError/failed(_:)`` naming the remedy: a read-only
/// file or directory, a database another mentoryd holds, one locked by another program, a file
/// that is not a SQLite database or fails `PRAGMA quick_check`, a database of another program,
/// and one written by a newer mentoryd. It never replaces a damaged database with an empty one.
///
/// **Integrity check.** `PRAGMA quick_check` reads every page of the file, which grows with the
/// diary, so it runs before the store opens only when the last run did not end with an orderly
/// ``close()`` of a verified file (a crash, a power cut, a new or restored database). The proof
/// of an orderly close is the *clean-shutdown marker*: ``close()`` sets `PRAGMA user_version` to
/// ``SQLiteSchema/cleanShutdownMarker`` in a committed transaction after the last write, and
/// opening clears it again before anything else is written. After a clean shutdown the check is
/// left to ``verifyIntegrity()``, which the daemon runs in the background once it serves; see
/// ``IntegrityCheck``.
public final class SQLiteSessionStore: DiaryStore, MentorStateStore {
    /// Whether the database file passed `PRAGMA quick_check` during this run.
    public enum IntegrityCheck: Sendable, Equatable {
        /// The check ran, and passed, before the store opened: the last run did not close the
        /// store orderly, or the database is new.
        case verifiedAtOpen
        /// The last run closed the store orderly after verifying the file, so opening skipped the
        /// check; ``verifyIntegrity()`` runs it.
        case pending
        /// ``verifyIntegrity()`` found the file sound.
        case verified
        /// ``verifyIntegrity()`` found the file damaged; the reason says what to do. ``close()``
        /// then leaves the clean-shutdown marker unset, so the next start checks the file before it
        /// opens, and refuses it.
        case damaged(String)

        /// Whether the file passed the check during this run.
        public var isVerified: Bool {
            self == .verifiedAtOpen || self == .verified
        }
    }

    /// How to open the store.
    public struct Configuration: Sendable {
        /// The database file; created (mode 0600) when missing. Its directory must exist.
        public var path: String
        /// How long a write waits for a lock another process holds before it fails; also how long
        /// opening waits for another mentoryd to let go of the database (a restarting daemon's
        /// predecessor may still be exiting).
        public var busyTimeout: Duration = .seconds(5)
        /// The most writes one group-commit transaction holds.
        public var maxBatchSize: Int = 512
        /// The most writes waiting for a transaction; a write beyond it fails at once with
        /// ``StorageError/overloaded(_:)``. The daemon sets it to the most requests it can have in
        /// flight (`limits.maxConnections` x `limits.maxRequestsInFlight`), so that it never
        /// refuses a write there; the default is that product for the default limits.
        public var maxQueuedWrites: Int = 1024 * 128
        /// Where the commit metrics go (``StorageMetricLabels``); `nil` for the factory bootstrapped
        /// in `MetricsSystem` when the store opens.
        public var metricsFactory: (any MetricsFactory)?
        /// A cap on the database's size in pages (of 4 KiB); a write past it fails as on a full
        /// disk. `nil` lets the database grow with the disk.
        public var maxPageCount: Int?
        /// The pages committed to the write-ahead log since its last checkpoint at which the writer
        /// runs a `PASSIVE` checkpoint between two batches (SQLite's own default threshold, which it
        /// checks inside a commit).
        public var checkpointPages: Int = 1000
        /// The log's length, in pages, at which the writer runs a `RESTART` checkpoint between two
        /// batches, for a log that a reader kept from starting over: the log's file stays under
        /// twice this plus one batch, 32 MiB with the defaults (see ``CommitStatistics/largestLogPages``).
        public var maxLogPages: Int = 4000
        /// The thread the store's callers share, when they share one (the daemon passes its event
        /// loop): batches start there after the work already queued, and writers resume there.
        /// `nil`, the default, for callers on any thread. See ``CallerLoop``.
        public var callerLoop: (any CallerLoop)?
        /// Where the database's failures while the store is open (a full disk, an I/O error, a lock
        /// held too long, a checkpoint that cannot finish) are logged for the operator, at `error`
        /// priority with the path and the cause in the message, rate-limited by
        /// ``failureLogInterval``; `nil`, the default, logs nothing. (Failures to open are thrown.)
        public var logger: Logger?
        /// The least time between two log lines of the same kind of failure: the first is logged at
        /// once, the rest counted and reported with the next line of their kind.
        public var failureLogInterval: Duration = .seconds(30)

        /// A configuration for the database at `path`.
        public init(path: String) {
            self.path = path
        }
    }

    /// The database file.
    public let path: String
    /// How the store checkpoints its write-ahead log, for the log: who runs the checkpoints, in
    /// which SQLite mode, at which thresholds.
    public let checkpointMode: String
    private let pool: DatabasePool
    private let commits: GroupCommitQueue
    private let checkpointer: LogCheckpointer
    private let failureLog: StorageFailureLog
    /// An open descriptor of the database file holding an exclusive `flock`: one daemon per database.
    ///
    /// It is closed only after every SQLite connection is closed, because closing any descriptor
    /// of a file drops the process's POSIX locks on it, which SQLite relies on.
    private let lockDescriptor: Int32
    /// Where the integrity check stands; read by ``close()`` to decide on the clean-shutdown marker.
    private let integrity: NIOLockedValueBox<IntegrityCheck>

    /// Opens the store like ``init(configuration:)``, on a thread of its own.
    ///
    /// Opening blocks: it may wait up to ``Configuration/busyTimeout`` for another mentoryd to let
    /// go of the database's lock, then reads and checks the whole file. Async code calls this, so
    /// that no thread of Swift's cooperative pool is held while it waits.
    public static func opened(configuration: Configuration) async throws(StorageError) -> SQLiteSessionStore {
        // Handed over behind a lock, which ThreadSanitizer sees order the store's initialization on the opening
        // thread before its use on the caller's: it does not always see the continuation do so.
        let handover = NIOLockedValueBox<Result<SQLiteSessionStore, StorageError>?>(nil)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let thread = Thread {
                let result: Result<SQLiteSessionStore, StorageError>
                do throws(StorageError) {
                    result = .success(try SQLiteSessionStore(configuration: configuration))
                } catch {
                    result = .failure(error)
                }
                handover.withLockedValue { $0 = result }
                continuation.resume()
            }
            thread.name = "mentoryd.store-open"
            thread.start()
        }
        guard let result = handover.withLockedValue({ $0 }) else {
            preconditionFailure("the opening thread resumed its caller before handing the store over")
        }
        return try result.get()
    }

    /// Opens (creating if needed) the database, checks it, and migrates it to the current schema.
    ///
    /// This blocks the calling thread while it waits for the database's lock (up to
    /// ``Configuration/busyTimeout``) and checks the file: from async code, call
    /// ``opened(configuration:)`` instead.
    ///
    /// Throws ``StorageError/failed(_:)`` saying why the database cannot be used and what to do.
    public init(configuration: Configuration) throws(StorageError) {
        let path = configuration.path
        let directory = FileSystem.parentDirectory(of: path)
        guard FileSystem.isDirectory(directory) else {
            throw .failed(
                "the state directory \(directory) does not exist; create it or pass another --state-dir")
        }
        let existingSize = FileSystem.fileSize(path)
        if existingSize == nil, let walSize = FileSystem.fileSize(path + "-wal"), walSize > 0 {
            throw .failed(
                "\(path)-wal exists but the database \(path) is missing, so committed entries may be lost; "
                    + "restore \(path) from a backup, or move \(path)-wal aside to start an empty diary"
            )
        }
        guard access(directory, W_OK) == 0 else {
            throw .failed(
                "the state directory \(directory) is read-only (\(FileSystem.errnoText())); SQLite needs to "
                    + "create files next to the database: make it writable by mentoryd's user"
            )
        }
        var descriptor = try Self.openLocked(path, waitingUpTo: configuration.busyTimeout)
        var built = false
        if NewDatabase.isUnbuilt(descriptor: descriptor, path: path) {
            // The lock is on the empty file the rename replaces: it is taken on the new one before the
            // old one is let go, which another mentoryd may be waiting for.
            let replaced = descriptor
            defer { FileSystem.closeDescriptor(replaced) }
            try NewDatabase.build(at: path)
            descriptor = try Self.openLocked(path, waitingUpTo: .zero)
            built = true
        }
        let pool: DatabasePool
        let closedCleanly: Bool
        do {
            try Self.checkHeader(descriptor: descriptor, path: path)
            // Inspect before the pool opens: opening a pool writes (GRDB makes the log non-empty),
            // and nothing may be written to a database that is damaged or not mentoryd's. The
            // inspection's connection leaves the log non-empty itself (the claim, or the marker's
            // clearing), so the pool finds nothing to write; it stays open until the pool is, so
            // that its closing is not the last connection's (which would checkpoint and sync).
            let inspection = try Self.inspect(configuration, built: built)
            closedCleanly = inspection.closedCleanly
            defer { try? inspection.connection.close() }
            pool = try Self.openPool(configuration)
        } catch {
            FileSystem.closeDescriptor(descriptor)
            throw error
        }
        do {
            try Self.prepare(pool, path: path)
        } catch {
            try? pool.close()
            FileSystem.closeDescriptor(descriptor)
            throw error
        }
        let checkpointer: LogCheckpointer
        let failureLog = StorageFailureLog(
            logger: configuration.logger, path: path, interval: configuration.failureLogInterval)
        do {
            // Checkpoints move out of the commits, onto the writer between batches: see LogCheckpointer.
            checkpointer = LogCheckpointer(
                limits: .init(checkpointPages: configuration.checkpointPages, maxLogPages: configuration.maxLogPages),
                busyTimeoutSeconds: Self.seconds(configuration.busyTimeout),
                failureLog: failureLog
            )
            try pool.writeWithoutTransaction { db in try checkpointer.install(on: db) }
        } catch {
            try? pool.close()
            FileSystem.closeDescriptor(descriptor)
            throw .failed("cannot open the diary database: \(StorageFailures.describe(error, path: path))")
        }
        self.path = path
        self.checkpointMode =
            "writer only, between batches: PASSIVE at \(max(1, configuration.checkpointPages)) log pages, "
            + "RESTART at \(max(max(1, configuration.checkpointPages), configuration.maxLogPages)); "
            + "read-only readers never checkpoint"
        self.pool = pool
        self.checkpointer = checkpointer
        self.failureLog = failureLog
        self.lockDescriptor = descriptor
        self.integrity = NIOLockedValueBox(closedCleanly ? .pending : .verifiedAtOpen)
        self.commits = GroupCommitQueue(
            writer: pool,
            path: path,
            maxBatchSize: configuration.maxBatchSize,
            maxQueuedWrites: configuration.maxQueuedWrites,
            checkpointer: checkpointer,
            callerLoop: configuration.callerLoop,
            metricsFactory: configuration.metricsFactory ?? MetricsSystem.factory,
            failureLog: failureLog
        )
    }

    /// Commits the queued writes, sets the clean-shutdown marker when the file was verified during
    /// this run, checkpoints the log into the database file, and closes it.
    ///
    /// Calls after the first do nothing. Writes after this fail with ``StorageError/failed(_:)``.
    /// Every acknowledged write is already durable, so a failure here (reported by the error) loses
    /// nothing: the next start-up replays the log (and checks the file, having found no marker).
    public func close() async throws(StorageError) {
        guard await self.commits.close() else { return }
        defer { FileSystem.closeDescriptor(self.lockDescriptor) }
        // No commit follows: the writer's hook goes.
        _ = try? await self.pool.writeWithoutTransaction { db in self.checkpointer.uninstall(from: db) }
        if self.integrityCheck.isVerified {
            // After the last write, in a transaction of its own (fsynced: synchronous=FULL), so that
            // the marker never stands for a file with writes this run had not finished. Best
            // effort: without it, the next start-up checks the file before it opens.
            _ = try? await self.pool.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA user_version = \(SQLiteSchema.cleanShutdownMarker)")
            }
        }
        // Best effort: when another program holds the database, the log stays and is replayed later.
        _ = try? await self.pool.writeWithoutTransaction { db in
            try db.checkpoint(.truncate)
        }
        do {
            try self.pool.close()
            // The pool closes its writer before its readers (so the writer, not alone, leaves the
            // log), and a read-only connection never checkpoints; a last read-write connection,
            // alone on the file once the pool is closed, checkpoints and removes the -wal and -shm
            // files as it closes, leaving one self-contained file.
            try DatabaseQueue(path: self.path).close()
        } catch {
            throw .failed("closing \(self.path) failed: \(StorageFailures.describe(error, path: self.path))")
        }
    }

    /// The version of the SQLite library the store runs on (`sqlite3_libversion()`).
    public static var sqliteVersion: String {
        String(cString: sqlite3_libversion())
    }

    /// Where the integrity check of the database file stands in this run.
    public var integrityCheck: IntegrityCheck {
        self.integrity.withLockedValue { $0 }
    }

    /// Runs the integrity check that opening skipped after a clean shutdown (``IntegrityCheck/pending``),
    /// and returns where the check stands afterwards.
    ///
    /// It reads every page of the database (`PRAGMA quick_check`) on a read-only connection of the
    /// pool, from one snapshot, while the store keeps serving; the log is not checkpointed past
    /// that snapshot until it ends. Before checking, it makes the clearing of the clean-shutdown
    /// marker durable (opening cleared it without waiting for the disk), so that a start after a
    /// damage found here always checks the file before opening it, and refuses it.
    ///
    /// Returns ``IntegrityCheck/damaged(_:)`` when the file fails the check or cannot be read, and
    /// ``IntegrityCheck/pending`` when the task was cancelled first. Does nothing, returning the
    /// current state, unless the check is pending.
    public func verifyIntegrity() async -> IntegrityCheck {
        let current = self.integrityCheck
        guard current == .pending else { return current }
        let path = self.path
        let outcome: IntegrityCheck
        do {
            // The marker was cleared in the log without an fsync; this fsync of the log makes the
            // clearing durable. (SQLite holds no lock on the -wal file, so closing this descriptor
            // drops none of its locks.)
            try FileSystem.syncFile(path + "-wal")
            let problems = try await self.pool.read { db in try String.fetchAll(db, sql: "PRAGMA quick_check") }
            outcome = problems == ["ok"] ? .verified : .damaged(Self.damagedReason(path: path, problems: problems))
        } catch {
            if Task.isCancelled { return .pending }
            outcome = .damaged(
                "the integrity check of \(path) failed: \(StorageFailures.describe(error, path: path))")
        }
        return self.integrity.withLockedValue { state in
            if state == .pending { state = outcome }
            return state
        }
    }

    /// What quick_check found, and what to do about it.
    private static func damagedReason(path: String, problems: [String]) -> String {
        "the database \(path) is damaged (quick_check: \(problems.prefix(3).joined(separator: "; "))); "
            + "mentoryd will not start over it. Stop mentoryd and restore the file from a backup, "
            + "or move it aside to start an empty diary"
    }

    /// How the writes so far were batched.
    public var commitStatistics: CommitStatistics {
        self.commits.statistics
    }

    /// The durability settings of the connection that writes: `journal_mode` and `synchronous`
    /// (`wal` and 2, FULL, while the store is open).
    public func writerSettings() async throws(StorageError) -> (journalMode: String, synchronous: Int) {
        do {
            return try await self.pool.writeWithoutTransaction { db in
                (
                    try String.fetchOne(db, sql: "PRAGMA journal_mode") ?? "",
                    try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? -1
                )
            }
        } catch {
            throw StorageFailures.read(error, path: self.path)
        }
    }

    /// Writes waiting for the next transaction.
    public var queuedWriteCount: Int {
        self.commits.queuedCount
    }

    // MARK: DiaryStore

    @discardableResult
    nonisolated(nonsending) public func insert(_ entry: Mentory_V1_DiaryEntry) async throws(StorageError)
        -> DiaryInsertOutcome
    {
        // The check and the insert share the write's transaction: two identical imports, even
        // concurrent ones, both succeed, and exactly one of them writes.
        try await self.commits.submit { db in
            // Both checks in one statement; the entries it finds, if any, are read only then.
            let matches = try DiaryRows.ids(matchingID: entry.id, orRecordDate: entry.recordDate, in: db)
            if matches.contains(entry.id), let existing = try DiaryRows.entry(id: entry.id, in: db) {
                guard existing == entry else {
                    throw StorageError.conflict(
                        "a different entry with id \(entry.id) already exists; delete it first to replace it")
                }
                return DiaryInsertOutcome.alreadyPresent
            }
            if let existing = matches.first(where: { $0 != entry.id }) {
                throw StorageError.conflict(
                    "there is already an entry for \(entry.recordDate) (id \(existing)); delete it first"
                )
            }
            try DiaryRows.insert(entry, into: db)
            return DiaryInsertOutcome.inserted
        }
    }

    nonisolated(nonsending) public func entry(id: String) async throws(StorageError) -> Mentory_V1_DiaryEntry? {
        try await self.read { db in try DiaryRows.entry(id: id, in: db) }
    }

    nonisolated(nonsending) public func entries(limit: Int, before: String?) async throws(StorageError)
        -> [Mentory_V1_DiaryEntry]
    {
        try await self.read { db in try DiaryRows.entries(limit: limit, before: before, in: db) }
    }

    nonisolated(nonsending) public func delete(id: String) async throws(StorageError) -> Mentory_V1_DiaryEntry? {
        try await self.commits.submit { db in
            guard let entry = try DiaryRows.entry(id: id, in: db) else { return nil }
            try DiaryRows.delete(id: id, in: db)
            return entry
        }
    }

    nonisolated(nonsending) public func setActionItemDone(
        entryID: String,
        itemID: String,
        done: Bool
    ) async throws(StorageError) -> DiaryActionItemUpdate {
        try await self.commits.submit { db in
            guard var entry = try DiaryRows.entry(id: entryID, in: db) else {
                throw StorageError.notFound("diary entry \(entryID)")
            }
            guard let index = entry.actionItems.firstIndex(where: { $0.id == itemID }) else {
                throw StorageError.notFound("action item \(itemID) of diary entry \(entryID)")
            }
            guard entry.actionItems[index].done != done else {
                return DiaryActionItemUpdate(entry: entry, changed: false)
            }
            _ = try DiaryRows.setActionItemDone(entryID: entryID, itemID: itemID, done: done, in: db)
            entry.actionItems[index].done = done
            return DiaryActionItemUpdate(entry: entry, changed: true)
        }
    }

    /// The number of diary entries.
    public func diaryEntryCount() async throws(StorageError) -> Int {
        try await self.read { db in try DiaryRows.count(in: db) }
    }

    // MARK: MentorStateStore

    nonisolated(nonsending) public func loadMentorState() async throws(StorageError) -> Mentory_V1_MentorState {
        try await self.read { db in try MentorRows.load(from: db) }
    }

    nonisolated(nonsending) public func saveMentorState(_ state: Mentory_V1_MentorState) async throws(StorageError) {
        try await self.commits.submit { db in try MentorRows.save(state, into: db) }
    }

    // MARK: Backup

    /// What ``backup(to:)`` wrote.
    public struct BackupSummary: Sendable, Equatable {
        /// The copy's path.
        public var path: String
        /// The copy's size in bytes.
        public var bytes: Int64
        /// The diary entries the copy holds.
        public var diaryEntries: Int
    }

    /// Writes a consistent copy of the database to `destination` while the store keeps serving.
    ///
    /// The copy is one self-contained SQLite file (mode 0600) holding every write acknowledged
    /// before the copy began; mentoryd opens it as its database after a restore. `destination`
    /// must be an absolute path in an existing directory and must not exist: a backup never
    /// overwrites a file. The copy is verified with `PRAGMA quick_check` and synced to the disk
    /// before it appears under its name.
    public func backup(to destination: String) async throws(StorageError) -> BackupSummary {
        guard destination.hasPrefix("/") else {
            throw .invalidArgument("the backup destination must be an absolute path, not '\(destination)'")
        }
        let directory = FileSystem.parentDirectory(of: destination)
        guard FileSystem.isDirectory(directory) else {
            throw .invalidArgument("the backup directory \(directory) does not exist")
        }
        guard FileSystem.fileSize(destination) == nil else {
            throw .conflict("\(destination) already exists; a backup never overwrites a file, choose a new name")
        }
        let partial = destination + ".partial-\(UInt64.random(in: 0...UInt64.max))"
        let descriptor = open(partial, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw .failed("cannot create \(partial): \(FileSystem.errnoText())")
        }
        FileSystem.closeDescriptor(descriptor)
        defer {
            for suffix in ["", "-journal", "-wal", "-shm"] { FileSystem.removeIfPresent(partial + suffix) }
        }
        let entries: Int
        do {
            let copy = try DatabaseQueue(path: partial)
            // A read transaction on the pool sees one snapshot: every acknowledged write and none half done.
            try await self.pool.read { db in
                try copy.writeWithoutTransaction { copyDB in try db.backup(to: copyDB) }
            }
            entries = try await copy.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA journal_mode = DELETE")
                let problems = try String.fetchAll(db, sql: "PRAGMA quick_check")
                guard problems == ["ok"] else {
                    throw StorageError.failed(
                        "the backup failed its integrity check: \(problems.prefix(3).joined(separator: "; "))"
                    )
                }
                return try DiaryRows.count(in: db)
            }
            try copy.close()
        } catch {
            throw .failed(
                "cannot back up to \(destination): \(StorageFailures.describe(error, path: self.path))")
        }
        try FileSystem.syncFile(partial)
        guard link(partial, destination) == 0 else {
            let code = errno
            if code == EEXIST {
                throw .conflict("\(destination) already exists; a backup never overwrites a file, choose a new name")
            }
            throw .failed("cannot create \(destination): \(FileSystem.errnoText(code))")
        }
        try FileSystem.syncDirectory(directory)
        return BackupSummary(path: destination, bytes: FileSystem.fileSize(destination) ?? 0, diaryEntries: entries)
    }

    // MARK: Opening

    nonisolated(nonsending) private func read<T: Sendable>(
        _ body: @escaping @Sendable (Database) throws -> T
    ) async throws(StorageError) -> T {
        do {
            return try await self.pool.read(body)
        } catch {
            self.failureLog.record(.read, error)
            throw StorageFailures.read(error, path: self.path)
        }
    }

    /// Opens the database file at `path` (creating it empty) and takes its exclusive `flock`, waiting up
    /// to `limit`: one daemon per database. Should the file have been replaced while this waited (a
    /// first start renames its new database into place), it locks the file now at `path` instead.
    private static func openLocked(_ path: String, waitingUpTo limit: Duration) throws(StorageError) -> Int32 {
        while true {
            let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            guard descriptor >= 0 else {
                let code = errno
                switch code {
                case EACCES, EPERM, EROFS:
                    throw .failed(
                        "the database \(path) is read-only (\(FileSystem.errnoText(code))); make it writable by "
                            + "mentoryd's user (for example chmod u+w \(path)), then restart mentoryd"
                    )
                default:
                    throw .failed("cannot open the database \(path): \(FileSystem.errnoText(code))")
                }
            }
            guard FileSystem.lockExclusively(descriptor, waitingUpTo: limit) else {
                let code = errno
                FileSystem.closeDescriptor(descriptor)
                if code == EWOULDBLOCK {
                    throw .failed(
                        "the database \(path) is locked: another mentoryd is already using it; stop that daemon, "
                            + "or give this one another --state-dir"
                    )
                }
                throw .failed("cannot lock the database \(path): \(FileSystem.errnoText(code))")
            }
            var locked = stat()
            var current = stat()
            if fstat(descriptor, &locked) == 0, stat(path, &current) == 0,
                locked.st_dev != current.st_dev || locked.st_ino != current.st_ino
            {
                FileSystem.closeDescriptor(descriptor)
                continue
            }
            return descriptor
        }
    }

    /// Rejects a non-empty file that does not start with SQLite's header, before SQLite sees it.
    private static func checkHeader(descriptor: Int32, path: String) throws(StorageError) {
        let header = FileSystem.readPrefix(descriptor, count: 16)
        guard !header.isEmpty else { return }
        guard header == Array("SQLite format 3\0".utf8) else {
            throw .failed(
                "the database \(path) is damaged: it does not start with a SQLite header; mentoryd will not "
                    + "replace it with an empty one. Stop mentoryd and restore the file from a backup, or move "
                    + "it aside to start an empty diary"
            )
        }
    }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    private static func openPool(_ configuration: Configuration) throws(StorageError) -> DatabasePool {
        var grdb = GRDB.Configuration()
        grdb.label = "mentoryd"
        grdb.busyMode = .timeout(self.seconds(configuration.busyTimeout))
        let maxPageCount = configuration.maxPageCount
        grdb.prepareDatabase { db in
            // FULL: in WAL mode, every commit fsyncs the log before it returns. (The pool's writer
            // is set to FULL again in `prepare`, after the pool enabled WAL.)
            try db.execute(sql: "PRAGMA synchronous = FULL")
            if let maxPageCount, !db.configuration.readonly {
                try db.execute(sql: "PRAGMA max_page_count = \(maxPageCount)")
            }
        }
        do {
            return try DatabasePool(path: configuration.path, configuration: grdb)
        } catch {
            throw .failed(
                "cannot open the diary database: \(StorageFailures.describe(error, path: configuration.path))")
        }
    }

    /// What ``inspect(_:built:)`` found.
    private struct Inspection {
        /// Whether the clean-shutdown marker was set (and so the integrity check was skipped); it
        /// is cleared now.
        var closedCleanly: Bool
        /// The inspection's connection, to close once the pool is open.
        var connection: DatabaseQueue
    }

    /// Checks, on a plain connection of its own, that the database is mentoryd's and not from a
    /// newer mentoryd, and, unless the last run closed it cleanly, that it is sound; then makes the
    /// first write of this run: it claims a new or half-made file for mentoryd, or clears the
    /// clean-shutdown marker.
    ///
    /// A new database is built whole beside its name and renamed into place before this runs
    /// (``NewDatabase``, `built`: 3 syncs before READY=1 on a first start, where building it in place
    /// took 7 and, before that, 14). **The claim** remains for a half-made file an older mentoryd
    /// left: it turns on write-ahead logging (a transaction of its own, in a rollback journal), then
    /// commits, durably and in one transaction, mentoryd's `application_id` and the whole schema
    /// (``SQLiteSchema/createSchema(in:)``), so a power cut leaves the file empty or complete.
    private static func inspect(_ configuration: Configuration, built: Bool) throws(StorageError) -> Inspection {
        let path = configuration.path
        var grdb = GRDB.Configuration()
        grdb.label = "mentoryd.inspection"
        grdb.busyMode = .timeout(self.seconds(configuration.busyTimeout))
        let migrator = SQLiteSchema.migrator
        var opened: DatabaseQueue?
        do {
            let queue = try DatabaseQueue(path: path, configuration: grdb)
            opened = queue
            let closedCleanly: Bool = try queue.inDatabase { db in
                // Read through SQLite, so a marker still in the log counts, and one cleared in the
                // log (by a run that then crashed) does not.
                let closedCleanly =
                    try Int32.fetchOne(db, sql: "PRAGMA user_version") == SQLiteSchema.cleanShutdownMarker
                if !closedCleanly {
                    let problems = try String.fetchAll(db, sql: "PRAGMA quick_check")
                    guard problems == ["ok"] else {
                        throw StorageError.failed(Self.damagedReason(path: path, problems: problems))
                    }
                }
                let applicationID = try Int32.fetchOne(db, sql: "PRAGMA application_id") ?? 0
                let unclaimed = try applicationID == 0 && Self.isUnclaimed(db)
                guard applicationID == SQLiteSchema.applicationID || unclaimed else {
                    throw StorageError.failed(
                        "\(path) is a SQLite database of another program (application_id \(applicationID)), not "
                            + "mentoryd's; move it aside or choose another --state-dir"
                    )
                }
                if try migrator.hasBeenSuperseded(db) {
                    let known = Set(SQLiteSchema.migrationIdentifiers)
                    let unknown = try migrator.appliedIdentifiers(db).subtracting(known).sorted()
                    throw StorageError.failed(
                        "the database \(path) was written by a newer mentoryd (schema \(unknown.joined(separator: ", "))); "
                            + "upgrade mentoryd, or restore a backup made by this version"
                    )
                }
                if unclaimed {
                    // FULL: the journal switch and the claim are each fsynced before they return.
                    try db.execute(sql: "PRAGMA synchronous = FULL")
                    try Self.requireWAL(try String.fetchOne(db, sql: "PRAGMA journal_mode = WAL"), path: path)
                    try db.inTransaction(.immediate) {
                        try SQLiteSchema.createSchema(in: db)
                        return .commit
                    }
                } else if closedCleanly || built {
                    // The first write of this run, so that a crash from here on finds no marker.
                    // Without an fsync (synchronous=OFF for this one transaction): it costs none
                    // of the start-up, and the clearing becomes durable with the next commit or
                    // with verifyIntegrity(), whichever comes first. Until then a crash can bring
                    // back the marker only with the file exactly as the clean shutdown left it.
                    // A database this start built (NewDatabase) has no marker: the same write,
                    // a no-op, only leaves the log non-empty, so that the pool writes nothing.
                    try db.execute(sql: "PRAGMA synchronous = OFF; PRAGMA user_version = 0")
                }
                return closedCleanly
            }
            return Inspection(closedCleanly: closedCleanly, connection: queue)
        } catch let error as StorageError {
            try? opened?.close()
            throw error
        } catch {
            try? opened?.close()
            throw .failed("cannot open the diary database: \(StorageFailures.describe(error, path: path))")
        }
    }

    /// Throws unless `journalMode` is `wal`.
    static func requireWAL(_ journalMode: String?, path: String) throws(StorageError) {
        guard journalMode?.lowercased() == "wal" else {
            throw StorageError.failed(
                "the database \(path) cannot use write-ahead logging (journal mode is \(journalMode ?? "unknown")); "
                    + "put the state directory on a local file system"
            )
        }
    }

    /// Whether a database without an `application_id` is one mentoryd may claim: empty (a new
    /// file, or a foreign empty one, which holds nothing to lose), or holding nothing but an empty
    /// `grdb_migrations` table, which is what a first start of a mentoryd before this check left
    /// when it crashed between GRDB's creating that table and the first migration (which set the
    /// `application_id`). Anything else is another program's.
    private static func isUnclaimed(_ db: Database) throws -> Bool {
        let names = try String.fetchAll(db, sql: "SELECT name FROM sqlite_master")
        guard !names.isEmpty else { return true }
        let onlyMigrations = names.allSatisfy {
            $0 == "grdb_migrations" || $0.hasPrefix("sqlite_autoindex_grdb_migrations_")
        }
        guard onlyMigrations, names.contains("grdb_migrations") else { return false }
        return try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM grdb_migrations") == 0
    }

    /// Makes the pool's writer durable (synchronous=FULL in WAL mode), then migrates the database
    /// (a database the inspection claimed has nothing left to migrate).
    private static func prepare(_ pool: DatabasePool, path: String) throws(StorageError) {
        let migrator = SQLiteSchema.migrator
        do {
            try pool.writeWithoutTransaction { db in
                try Self.requireWAL(try String.fetchOne(db, sql: "PRAGMA journal_mode"), path: path)
                // DatabasePool switches its writer to synchronous=NORMAL when it enables WAL, after the
                // prepareDatabase functions ran. NORMAL does not fsync at commit: a power cut could
                // lose acknowledged writes. The writer connection lives as long as the pool, so
                // setting FULL here holds for every write.
                try db.execute(sql: "PRAGMA synchronous = FULL")
                let synchronous = try Int.fetchOne(db, sql: "PRAGMA synchronous")
                guard synchronous == 2 else {
                    throw StorageError.internal("PRAGMA synchronous is \(synchronous ?? -1), not FULL (2)")
                }
            }
            try migrator.migrate(pool)
            // Takes the write lock once: fails now, not at the first write, on a read-only or locked database.
            try pool.writeWithoutTransaction { db in
                try db.execute(sql: "BEGIN IMMEDIATE; COMMIT")
            }
        } catch let error as StorageError {
            throw error
        } catch {
            throw .failed("cannot open the diary database: \(StorageFailures.describe(error, path: path))")
        }
    }
}
