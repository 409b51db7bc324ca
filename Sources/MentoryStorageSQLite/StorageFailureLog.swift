#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif
import GRDB
import Logging
import NIOConcurrencyHelpers
import Synchronization

/// Tells the operator, in the log, when the database fails (a full disk, an I/O error, a lock held
/// too long): at `error` priority, with the database's path, the cause (SQLite's extended result
/// code, which tells a failed write from a failed sync, and the system's `errno` where SQLite kept
/// one: SQLite 3.40 keeps none for a failed commit) and the remedy in the message itself, since the
/// journal's one-line views (`journalctl -u`, `systemctl status`) show nothing else.
///
/// **Rate-limited.** A full disk fails every write until space returns, and each failure would be
/// one line. So the first failure of each kind (the operation and SQLite's extended result code)
/// is logged at once, and further failures of that kind are only counted until ``interval`` has
/// passed since its last line; the next one is then logged with the count of those not logged.
/// When commits succeed again after failing, one `notice` line says so, with the count of failed
/// commits since the last success (itself at most once per ``interval``).
///
/// The client that made the write still gets the full reason in its error (``StorageFailures``);
/// this log is for the operator, who sees no client errors.
final class StorageFailureLog: Sendable {
    /// What failed.
    enum Operation: String, Sendable {
        /// A group-commit transaction (every write in it failed).
        case commit = "a commit to"
        /// One write of a transaction, rolled back alone.
        case write = "a write to"
        /// A read.
        case read = "a read of"
        /// A checkpoint of the write-ahead log into the database file (it is tried again later).
        case checkpoint = "a checkpoint of"
    }

    private struct Window {
        var lastLogged: ContinuousClock.Instant
        var notLogged = 0
    }

    private struct State {
        /// The last line of each kind of failure, by its key.
        var windows: [String: Window] = [:]
        /// The last recovery line.
        var lastRecovery: ContinuousClock.Instant?
        /// Recovery lines not logged since, and the failed commits they would have reported.
        var recoveriesNotLogged = 0
    }

    private let logger: Logger?
    private let path: String
    /// The least time between two lines of the same kind.
    let interval: Duration
    /// Commits failed since the last commit that succeeded; read by every commit, so an atomic.
    private let failedCommits = Atomic<Int>(0)
    // SAFETY: the lock guards only when each kind of failure was last logged, never domain state,
    // and is held for a dictionary look-up, never across a log call, SQLite work or an await.
    private let state = NIOLockedValueBox(State())

    /// Logs the failures of the database at `path` to `logger`; with no logger, logs nothing.
    init(logger: Logger?, path: String, interval: Duration) {
        self.logger = logger
        self.path = path
        self.interval = interval
    }

    /// Records a failure of `operation` with `error`; `systemErrno` is `sqlite3_system_errno` of
    /// the connection that failed, read right after the failure (0 when unknown).
    ///
    /// A refusal (a ``MentoryStorage/StorageError`` thrown by a write's own checks) is not a failure
    /// of the database and is not logged; neither is `SQLITE_BUSY` from a checkpoint (a reader still in
    /// the log: the checkpoint is tried again), nor an interrupted statement (a cancelled call).
    func record(_ operation: Operation, _ error: any Error, systemErrno: Int32 = 0, writes: Int = 0) {
        if operation == .commit { _ = self.failedCommits.wrappingAdd(1, ordering: .relaxed) }
        guard let logger = self.logger, let databaseError = error as? DatabaseError else { return }
        let code = databaseError.extendedResultCode
        if operation == .checkpoint, code.primaryResultCode == .SQLITE_BUSY || code.primaryResultCode == .SQLITE_LOCKED
        {
            return
        }
        // A statement interrupted because its caller went away (a cancelled read) is no failure of the database.
        if code.primaryResultCode == .SQLITE_INTERRUPT { return }
        let key = "\(operation.rawValue) \(code.rawValue)"
        let now = ContinuousClock.now
        let interval = self.interval
        let notLogged: Int? = self.state.withLockedValue { state in
            if let window = state.windows[key], now - window.lastLogged < interval {
                state.windows[key]!.notLogged += 1
                return nil
            }
            let skipped = state.windows[key]?.notLogged ?? 0
            state.windows[key] = Window(lastLogged: now)
            return skipped
        }
        guard let notLogged else { return }
        var message = "storage failure: \(operation.rawValue) \(self.path) failed"
        if writes > 0 { message += " (\(writes) \(writes == 1 ? "write" : "writes") not saved)" }
        message += ": \(StorageFailures.describe(error, path: self.path)) ["
        message += Self.cause(code: code, systemErrno: systemErrno) + "]"
        if notLogged > 0 {
            message += "; \(notLogged) more such \(notLogged == 1 ? "failure" : "failures") since the last line"
        }
        if operation == .checkpoint {
            message += "; the write-ahead log grows until a checkpoint succeeds"
        }
        var metadata: Logger.Metadata = [
            "path": "\(self.path)", "operation": "\(operation)", "sqlite_code": "\(code.rawValue)",
            "not_logged": "\(notLogged)",
        ]
        if systemErrno != 0 { metadata["errno"] = "\(systemErrno)" }
        logger.error("\(message)", metadata: metadata)
    }

    /// Records a commit that succeeded: after failed ones, logs that writes succeed again.
    ///
    /// Called after every commit, so its common path is one relaxed atomic load.
    func commitSucceeded() {
        guard self.failedCommits.load(ordering: .relaxed) > 0 else { return }
        let failed = self.failedCommits.exchange(0, ordering: .relaxed)
        guard failed > 0, let logger = self.logger else { return }
        let now = ContinuousClock.now
        let interval = self.interval
        let earlier: Int? = self.state.withLockedValue { state in
            if let last = state.lastRecovery, now - last < interval {
                state.recoveriesNotLogged += 1
                return nil
            }
            defer { state.recoveriesNotLogged = 0 }
            state.lastRecovery = now
            return state.recoveriesNotLogged
        }
        guard let earlier else { return }
        var message = "storage recovered: commits to \(self.path) succeed again after \(failed) failed "
        message += failed == 1 ? "commit" : "commits"
        if earlier > 0 {
            message += " (and \(earlier) earlier \(earlier == 1 ? "recovery" : "recoveries") not logged)"
        }
        logger.notice("\(message)", metadata: ["path": "\(self.path)", "failed_commits": "\(failed)"])
    }

    /// SQLite's result code by name and number, and the system's `errno` when SQLite kept one:
    /// `SQLITE_IOERR_FSYNC (1034), errno 5 EIO: Input/output error`.
    static func cause(code: ResultCode, systemErrno: Int32) -> String {
        var cause = "\(Self.name(of: code)) (\(code.rawValue))"
        if systemErrno != 0 {
            let name = Self.errnoNames[systemErrno].map { " \($0)" } ?? ""
            cause += ", errno \(systemErrno)\(name): \(String(cString: strerror(systemErrno)))"
        } else if code.primaryResultCode == .SQLITE_FULL {
            cause += ", errno \(ENOSPC) ENOSPC or the database's page limit"
        }
        return cause
    }

    /// The name of an SQLite (extended) result code, as sqlite3.h spells it.
    static func name(of code: ResultCode) -> String {
        if let name = Self.extendedNames[code.rawValue] { return name }
        let primary = Self.primaryNames[code.primaryResultCode.rawValue] ?? "SQLITE_ERROR_\(code.rawValue & 0xFF)"
        return code.rawValue == code.primaryResultCode.rawValue ? primary : "\(primary) (extended)"
    }

    private static let primaryNames: [Int32: String] = [
        1: "SQLITE_ERROR", 2: "SQLITE_INTERNAL", 3: "SQLITE_PERM", 4: "SQLITE_ABORT", 5: "SQLITE_BUSY",
        6: "SQLITE_LOCKED", 7: "SQLITE_NOMEM", 8: "SQLITE_READONLY", 9: "SQLITE_INTERRUPT", 10: "SQLITE_IOERR",
        11: "SQLITE_CORRUPT", 13: "SQLITE_FULL", 14: "SQLITE_CANTOPEN", 15: "SQLITE_PROTOCOL", 17: "SQLITE_SCHEMA",
        18: "SQLITE_TOOBIG", 19: "SQLITE_CONSTRAINT", 23: "SQLITE_AUTH", 26: "SQLITE_NOTADB",
    ]

    private static let extendedNames: [Int32: String] = [
        266: "SQLITE_IOERR_READ", 522: "SQLITE_IOERR_SHORT_READ", 778: "SQLITE_IOERR_WRITE",
        1034: "SQLITE_IOERR_FSYNC", 1290: "SQLITE_IOERR_DIR_FSYNC", 1546: "SQLITE_IOERR_TRUNCATE",
        1802: "SQLITE_IOERR_FSTAT", 2058: "SQLITE_IOERR_UNLOCK", 2314: "SQLITE_IOERR_RDLOCK",
        2570: "SQLITE_IOERR_DELETE", 3082: "SQLITE_IOERR_NOMEM", 3338: "SQLITE_IOERR_ACCESS",
        3594: "SQLITE_IOERR_CHECKRESERVEDLOCK", 3850: "SQLITE_IOERR_LOCK", 4106: "SQLITE_IOERR_CLOSE",
        4618: "SQLITE_IOERR_SHMOPEN", 4874: "SQLITE_IOERR_SHMSIZE", 5130: "SQLITE_IOERR_SHMLOCK",
        5386: "SQLITE_IOERR_SHMMAP", 5642: "SQLITE_IOERR_SEEK", 6154: "SQLITE_IOERR_MMAP",
        6666: "SQLITE_IOERR_CONVPATH", 8458: "SQLITE_IOERR_CORRUPTFS", 261: "SQLITE_BUSY_RECOVERY",
        517: "SQLITE_BUSY_SNAPSHOT", 264: "SQLITE_READONLY_RECOVERY", 520: "SQLITE_READONLY_CANTLOCK",
        776: "SQLITE_READONLY_ROLLBACK", 1032: "SQLITE_READONLY_DBMOVED", 267: "SQLITE_CORRUPT_VTAB",
    ]

    private static let errnoNames: [Int32: String] = [
        EPERM: "EPERM", ENOENT: "ENOENT", EINTR: "EINTR", EIO: "EIO", EBADF: "EBADF", EAGAIN: "EAGAIN",
        ENOMEM: "ENOMEM", EACCES: "EACCES", EBUSY: "EBUSY", EEXIST: "EEXIST", ENOTDIR: "ENOTDIR",
        EISDIR: "EISDIR", EINVAL: "EINVAL", ENFILE: "ENFILE", EMFILE: "EMFILE", EFBIG: "EFBIG",
        ENOSPC: "ENOSPC", EROFS: "EROFS", EDQUOT: "EDQUOT", ENOLCK: "ENOLCK", ESTALE: "ESTALE",
    ]
}
