import GRDB
import GRDBSQLite
import Synchronization

/// Keeps the write-ahead log short without ever checkpointing inside a commit.
///
/// **Why.** SQLite's default (`wal_autocheckpoint`, 1000 pages) runs the checkpoint inside the
/// `COMMIT` that makes the log cross the threshold: the writes of that transaction, and every
/// write queued behind it, wait while the log is copied into the database file and both files are
/// fsynced (several milliseconds, against a fraction of one for a commit).
///
/// **How.** The store's writer connection runs with `wal_autocheckpoint` off and a WAL hook that
/// records the log's length (in frames, one page each) after every commit. After each committed
/// batch the group-commit queue calls ``afterCommit(_:)`` on the writer:
/// - at ``Limits/checkpointPages`` or more, a `PASSIVE` checkpoint is started on a connection of
///   this checkpointer's own (one at a time), on its own thread, while the writer goes on
///   committing. `PASSIVE` never blocks a writer or a reader; once it has copied the whole log, the
///   next commit starts the log over from its beginning.
/// - at ``Limits/maxLogPages`` or more (the background checkpoints could not keep up, or a
///   long read kept them from finishing), the writer itself runs a `RESTART` checkpoint before its
///   next batch, which waits up to the busy timeout for readers to leave the log, so that the log
///   starts over.
///
/// **Bounds.** The log's file grows to at most `maxLogPages` plus the pages of one batch, unless a
/// reader holds one snapshot for longer than the busy timeout (SQLite cannot reuse a log that a
/// reader still needs); it is never truncated while the store is open, and truncated to nothing by
/// the store's `close()`.
///
/// **Durability** is SQLite's: the checkpointer's connection runs with `synchronous=FULL`, so a
/// checkpoint fsyncs the log before copying it and the database file before marking the log copied.
/// A crash during a checkpoint leaves the log in place, and the next opening replays it.
final class LogCheckpointer: Sendable {
    /// When checkpoints run, in log frames (pages of the database).
    struct Limits: Sendable, Equatable {
        /// The log's length at which a background `PASSIVE` checkpoint starts.
        var checkpointPages: Int
        /// The log's length at which the writer checkpoints (`RESTART`) before its next batch.
        var maxLogPages: Int
    }

    /// How the checkpoints went so far.
    struct Counts: Sendable, Equatable {
        var background = 0
        var blocking = 0
        var largestLogPages = 0
    }

    private let connection: DatabaseQueue
    private let limits: Limits
    /// The log's length in frames after the writer's last commit, set by the WAL hook.
    private let logFrames = Atomic<Int>(0)
    /// Whether a background checkpoint is scheduled or running.
    private let running = Atomic<Bool>(false)
    private let counts = Mutex(Counts())

    /// Opens the checkpointer's own read-write connection to the database at `path`.
    init(path: String, limits: Limits, busyTimeoutSeconds: Double) throws {
        var configuration = GRDB.Configuration()
        configuration.label = "mentoryd.checkpointer"
        configuration.busyMode = .timeout(busyTimeoutSeconds)
        configuration.prepareDatabase { db in
            // FULL: the checkpoint fsyncs the log before copying it and the database file after.
            try db.execute(sql: "PRAGMA synchronous = FULL")
        }
        self.connection = try DatabaseQueue(path: path, configuration: configuration)
        self.limits = Limits(
            checkpointPages: max(1, limits.checkpointPages),
            maxLogPages: max(max(1, limits.checkpointPages), limits.maxLogPages)
        )
    }

    var statistics: Counts { self.counts.withLock { $0 } }

    /// Turns SQLite's automatic checkpoints off on the writer `db` and records the log's length
    /// after each of its commits instead. Runs on the writer; ``uninstall(from:)`` undoes it.
    func install(on db: Database) throws {
        try db.execute(sql: "PRAGMA wal_autocheckpoint = 0")
        // The hook runs inside COMMIT, on the writer's thread. `self` outlives every commit: the
        // group-commit queue holds it, and the store uninstalls the hook before it closes.
        sqlite3_wal_hook(
            db.sqliteConnection,
            { context, _, _, frames in
                guard let context else { return SQLITE_OK }
                Unmanaged<LogCheckpointer>.fromOpaque(context).takeUnretainedValue()
                    .logFrames.store(Int(frames), ordering: .relaxed)
                return SQLITE_OK
            },
            Unmanaged.passUnretained(self).toOpaque()
        )
    }

    /// Removes the hook ``install(on:)`` set. Runs on the writer.
    func uninstall(from db: Database) {
        sqlite3_wal_hook(db.sqliteConnection, nil, nil)
    }

    /// Starts or runs a checkpoint when the log has grown past the limits. Runs on the writer, after
    /// a committed batch was answered.
    func afterCommit(_ db: Database) {
        let frames = self.logFrames.load(ordering: .relaxed)
        self.counts.withLock { $0.largestLogPages = max($0.largestLogPages, frames) }
        if frames >= self.limits.maxLogPages {
            // The backstop. Best effort: when a reader stays in the log past the busy timeout, the
            // next batch commits anyway and the next one tries again.
            if (try? db.checkpoint(.restart)) != nil {
                self.logFrames.store(0, ordering: .relaxed)
                self.counts.withLock { $0.blocking += 1 }
            }
            return
        }
        guard frames >= self.limits.checkpointPages,
            self.running.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else { return }
        self.connection.asyncWriteWithoutTransaction { db in
            // Best effort: a checkpoint that fails (a busy lock, an I/O error) leaves the log as it
            // was, and the next commit past the threshold starts another.
            let done = (try? db.checkpoint(.passive)) != nil
            self.counts.withLock { if done { $0.background += 1 } }
            self.running.store(false, ordering: .releasing)
        }
    }

    /// Waits for a running background checkpoint and closes the checkpointer's connection. Call it
    /// after the last commit.
    func close() async {
        _ = try? await self.connection.writeWithoutTransaction { _ in }
        try? self.connection.close()
    }
}
