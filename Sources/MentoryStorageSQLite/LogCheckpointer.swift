import GRDB
import GRDBSQLite
import NIOConcurrencyHelpers
import Synchronization

/// Keeps the write-ahead log short, with every checkpoint on the writer, between two batches.
///
/// **Why on the writer.** SQLite's WAL-reset bug (versions 3.7.0 to 3.51.2, fixed in 3.51.3; see
/// sqlite.org/wal.html, "walresetbug") can corrupt a database when two connections write or
/// checkpoint at the same time. mentoryd links the system's SQLite (Debian's 3.40.1), so no two of
/// its connections ever do: the writer is the only connection that writes or checkpoints while
/// the store is open, and the pool's readers are opened read-only, which SQLite never lets
/// checkpoint, on close included (``SQLiteSessionStore/checkpointMode``).
///
/// **Not inside a commit.** SQLite's default (`wal_autocheckpoint`, 1000 pages) runs the
/// checkpoint inside the `COMMIT` that makes the log cross the threshold, before that commit
/// returns. The writer instead runs with `wal_autocheckpoint` off and a WAL hook that records the
/// log's length (in frames, one page each) after every commit; after each committed batch *was
/// answered*, the group-commit queue calls ``afterCommit(_:)`` on the writer:
/// - once ``Limits/checkpointPages`` frames were committed since the last checkpoint copied the
///   log, a `PASSIVE` checkpoint copies the log into the database file and fsyncs both. It delays
///   the next batch (writes queued meanwhile share it), never an answered one. When it copied the
///   whole log and no reader is still in the log, the next batch starts the log over from its
///   beginning, reusing its file's blocks.
/// - once the log reaches ``Limits/maxLogPages`` (a reader kept it from starting over), a
///   `RESTART` checkpoint, without a busy timeout: it copies what it can and, unless a reader is
///   still in the log, makes the next batch start the log over; it never waits for a reader.
///
/// **Bounds.** The log's file stays under `checkpointPages` plus one batch, unless a reader holds
/// one snapshot meanwhile (a backup, the integrity check: SQLite cannot reuse a log that a reader
/// still needs); then it grows until that read ends, and the next batches start it over. It is
/// never truncated while the store is open, and truncated to nothing by the store's `close()`.
///
/// **Durability** is SQLite's: the writer runs with `synchronous=FULL`, so a checkpoint fsyncs the
/// log before copying it and the database file before marking the log copied. A crash during a
/// checkpoint leaves the log in place, and the next opening replays it.
final class LogCheckpointer: Sendable {
    /// When checkpoints run, in log frames (pages of the database).
    struct Limits: Sendable, Equatable {
        /// The frames committed since the last checkpoint at which the writer runs a `PASSIVE` checkpoint.
        var checkpointPages: Int
        /// The log's length at which the writer runs a `RESTART` checkpoint.
        var maxLogPages: Int
    }

    /// How the checkpoints went so far.
    struct Counts: Sendable, Equatable {
        var passive = 0
        var restart = 0
        var largestLogPages = 0
    }

    private let limits: Limits
    /// The writer's busy timeout, restored after its `RESTART` checkpoint, which runs without one.
    private let writerBusyTimeoutMilliseconds: Int32
    /// The log's length in frames after the writer's last commit, set by the WAL hook.
    private let logFrames = Atomic<Int>(0)
    /// The log frames the last checkpoint copied (0 once the log started over). Only the writer
    /// touches it; atomic so that the checkpointer stays `Sendable` without a lock.
    private let copiedFrames = Atomic<Int>(0)
    /// In a lock ThreadSanitizer sees (`Synchronization.Mutex` waits through raw futex calls it does not).
    private let counts = NIOLockedValueBox(Counts())
    /// Where a checkpoint's failure (other than a reader still in the log) is logged for the operator.
    private let failureLog: StorageFailureLog?

    init(limits: Limits, busyTimeoutSeconds: Double, failureLog: StorageFailureLog? = nil) {
        self.failureLog = failureLog
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

    /// Runs a checkpoint when the log has grown past the limits. Runs on the writer, between two
    /// batches, after the last one was answered.
    func afterCommit(_ db: Database) {
        let frames = self.logFrames.load(ordering: .relaxed)
        self.counts.withLockedValue { $0.largestLogPages = max($0.largestLogPages, frames) }
        var copied = self.copiedFrames.load(ordering: .relaxed)
        if frames < copied {
            // The log started over: nothing of it is copied yet.
            copied = 0
            self.copiedFrames.store(0, ordering: .relaxed)
        }
        let mode: Database.CheckpointMode
        if frames >= self.limits.maxLogPages {
            mode = .restart
        } else if frames - copied >= self.limits.checkpointPages {
            mode = .passive
        } else {
            return
        }
        // Best effort: a checkpoint that cannot finish (a reader still in the log, an I/O error)
        // leaves the log as it was; the next batch commits anyway, and the one after tries again.
        // An I/O error or a full disk is logged (rate-limited); a reader still in the log is not.
        // Without a busy timeout: a RESTART waiting for a reader to leave the log (a backup, the
        // integrity check) would hold up every write queued behind it. (PASSIVE never waits.)
        sqlite3_busy_timeout(db.sqliteConnection, 0)
        let result: (walFrameCount: Int, checkpointedFrameCount: Int)
        do {
            result = try db.checkpoint(mode)
        } catch {
            self.failureLog?.record(.checkpoint, error, systemErrno: sqlite3_system_errno(db.sqliteConnection))
            sqlite3_busy_timeout(db.sqliteConnection, self.writerBusyTimeoutMilliseconds)
            return
        }
        sqlite3_busy_timeout(db.sqliteConnection, self.writerBusyTimeoutMilliseconds)
        self.copiedFrames.store(result.checkpointedFrameCount, ordering: .relaxed)
        self.counts.withLockedValue {
            if mode == .restart { $0.restart += 1 } else { $0.passive += 1 }
        }
    }
}
