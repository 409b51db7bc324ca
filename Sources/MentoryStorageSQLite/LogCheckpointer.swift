import GRDB
import GRDBSQLite
import NIOConcurrencyHelpers
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
/// - once ``Limits/checkpointPages`` frames were committed since the last checkpoint copied the
///   log, a `PASSIVE` checkpoint starts on a connection of this checkpointer's own (one at a time),
///   on its own thread, while the writer goes on committing. `PASSIVE` blocks neither the writer
///   nor a reader, and it copies the log into the database file and fsyncs both off the commit path.
/// - SQLite starts the log over from its beginning only when a transaction begins on a log that was
///   copied whole, which a busy writer seldom lets happen (its next batch begins while the
///   checkpoint runs). So once the log reaches ``Limits/maxLogPages``, a background checkpoint
///   copies what is left, and then the writer runs a `RESTART` checkpoint between two batches: it
///   copies only what was committed since (at most a quarter of `checkpointPages`, against the
///   whole log for SQLite's automatic checkpoint), and unless a reader is still in the log, the
///   next batch starts the log over, reusing its file's blocks (an fsync that does not grow
///   the file has no metadata to write). At twice `maxLogPages` it does so even while a background
///   checkpoint runs, after waiting for that one to end.
///
/// **Bounds.** The log's file grows to at most twice `maxLogPages` plus the pages of one batch,
/// unless a reader holds one snapshot meanwhile (a backup, the integrity check: SQLite cannot reuse
/// a log that a reader still needs, and the writer's `RESTART` never waits for one, so as not to
/// hold up writes); then it grows until that read ends, as with SQLite's own checkpoints. It is
/// never truncated while the store is open, and truncated to nothing by the store's `close()`.
///
/// **Durability** is SQLite's: the checkpointer's connection runs with `synchronous=FULL`, so a
/// checkpoint fsyncs the log before copying it and the database file before marking the log copied.
/// A crash during a checkpoint leaves the log in place, and the next opening replays it.
final class LogCheckpointer: Sendable {
    /// When checkpoints run, in log frames (pages of the database).
    struct Limits: Sendable, Equatable {
        /// The frames committed since the last checkpoint at which a background `PASSIVE` checkpoint starts.
        var checkpointPages: Int
        /// The log's length at which the writer checkpoints (`RESTART`) between two batches.
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
    /// The writer's busy timeout, restored after its `RESTART` checkpoint, which runs without one.
    private let writerBusyTimeoutMilliseconds: Int32
    /// The log's length in frames after the writer's last commit, set by the WAL hook.
    private let logFrames = Atomic<Int>(0)
    /// Whether a background checkpoint is scheduled or running.
    private let running = Atomic<Bool>(false)
    /// The log frames the last checkpoint copied (0 once the log started over).
    private let copiedFrames = Atomic<Int>(0)
    /// In a lock ThreadSanitizer sees (`Synchronization.Mutex` waits through raw futex calls it does not).
    private let counts = NIOLockedValueBox(Counts())

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
        self.writerBusyTimeoutMilliseconds = Int32(clamping: Int((busyTimeoutSeconds * 1000).rounded()))
        self.limits = Limits(
            checkpointPages: max(1, limits.checkpointPages),
            maxLogPages: max(max(1, limits.checkpointPages), limits.maxLogPages)
        )
    }

    var statistics: Counts { self.counts.withLockedValue { $0 } }

    /// Turns SQLite's automatic checkpoints off on the writer `db` and records the log's length
    /// after each of its commits instead. Runs on the writer; ``uninstall(from:)`` undoes it.
    func install(on db: Database) throws {
        try db.execute(sql: "PRAGMA wal_autocheckpoint = 0")
        // SAFETY: the hook runs inside COMMIT, on the writer's thread. `self` outlives every commit: the
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
        self.counts.withLockedValue { $0.largestLogPages = max($0.largestLogPages, frames) }
        var copied = self.copiedFrames.load(ordering: .relaxed)
        if frames < copied {
            // The log started over: nothing of it is copied yet.
            copied = 0
            self.copiedFrames.store(0, ordering: .relaxed)
        }
        let running = self.running.load(ordering: .acquiring)
        let uncopied = frames - copied
        let restart =
            frames >= 2 * self.limits.maxLogPages
            || (frames >= self.limits.maxLogPages && !running && uncopied <= self.limits.checkpointPages / 4)
        if restart {
            // Best effort: when it cannot finish, the next batch commits anyway and the one after
            // tries again. Past twice the limit, a background checkpoint still running is waited
            // for (its queue is serial: this returns once it ended), so that no log grows past that
            // bound unless a reader keeps it.
            if running { self.connection.writeWithoutTransaction { _ in } }
            // Without a busy timeout: when a reader is still in the log (a backup, the integrity
            // check) or the background checkpoint still runs, SQLite copies what it can and answers
            // SQLITE_BUSY at once, instead of holding up the writer for the busy timeout.
            sqlite3_busy_timeout(db.sqliteConnection, 0)
            let result = try? db.checkpoint(.restart)
            sqlite3_busy_timeout(db.sqliteConnection, self.writerBusyTimeoutMilliseconds)
            if let result {
                self.copiedFrames.store(result.checkpointedFrameCount, ordering: .relaxed)
                self.counts.withLockedValue { $0.blocking += 1 }
            }
            return
        }
        // Past maxLogPages with much left to copy, a background checkpoint copies it first, so that
        // the writer's RESTART after it finds little to copy.
        let due = uncopied >= self.limits.checkpointPages || frames >= self.limits.maxLogPages
        guard due, !running,
            self.running.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else { return }
        self.connection.asyncWriteWithoutTransaction { db in
            // Best effort: a checkpoint that fails (a busy lock, an I/O error) leaves the log as it
            // was, and the next commit past the threshold starts another.
            if let result = try? db.checkpoint(.passive) {
                // Relative to the log it saw: when the writer started the log over meanwhile, the
                // next commit finds fewer frames than this and counts from 0 again.
                self.copiedFrames.store(result.checkpointedFrameCount, ordering: .relaxed)
                self.counts.withLockedValue { $0.background += 1 }
            }
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
