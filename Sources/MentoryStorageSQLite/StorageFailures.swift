import GRDB
import MentoryStorage

/// Turns SQLite failures into ``StorageError/failed(_:)`` with a message that says what
/// happened and what the user can do about it.
enum StorageFailures {
    /// The failure of a write that was not saved.
    static func write(_ error: any Error, path: String) -> StorageError {
        if let error = error as? StorageError { return error }
        return .failed("\(self.describe(error, path: path)); the change was not saved")
    }

    /// The failure of a read.
    static func read(_ error: any Error, path: String) -> StorageError {
        if let error = error as? StorageError { return error }
        return .failed(self.describe(error, path: path))
    }

    /// A sentence naming the cause of `error` and the remedy.
    static func describe(_ error: any Error, path: String) -> String {
        guard let error = error as? DatabaseError else {
            return "the database \(path) failed: \(error)"
        }
        let detail = error.message.map { " (SQLite: \($0))" } ?? ""
        switch error.resultCode {
        case .SQLITE_FULL:
            return "the disk holding \(path) is full\(detail); free some space, then retry"
        case .SQLITE_READONLY:
            if error.extendedResultCode == .SQLITE_READONLY_DBMOVED {
                return "the database \(path) was moved or deleted while mentoryd was running\(detail); restart mentoryd"
            }
            return "the database \(path) is read-only\(detail); make the file and its directory writable by "
                + "mentoryd's user (for example chmod u+w), then restart mentoryd"
        case .SQLITE_BUSY, .SQLITE_LOCKED:
            return "the database \(path) is locked by another process\(detail); close whatever holds it "
                + "(another mentoryd, or an sqlite3 shell with an open transaction), then retry"
        case .SQLITE_CORRUPT, .SQLITE_NOTADB:
            return "the database \(path) is damaged\(detail); stop mentoryd and restore the file from a backup "
                + "(mentoryctl backup makes one), or move it aside to start an empty diary"
        case .SQLITE_IOERR:
            // The extended code says which system call failed (SQLite keeps no errno for it).
            let action =
                switch error.extendedResultCode {
                case .SQLITE_IOERR_WRITE: "writing"
                case .SQLITE_IOERR_FSYNC, .SQLITE_IOERR_DIR_FSYNC: "syncing"
                case .SQLITE_IOERR_READ, .SQLITE_IOERR_SHORT_READ: "reading"
                default: "reading or writing"
                }
            return "\(action) \(path) failed with an I/O error\(detail); check the disk and the file system"
        case .SQLITE_CANTOPEN:
            return "the database \(path) cannot be opened\(detail); check that its directory exists and is "
                + "writable by mentoryd's user"
        case .SQLITE_PERM, .SQLITE_AUTH:
            return "access to the database \(path) was denied\(detail); check its owner and permissions"
        case .SQLITE_NOMEM:
            return "SQLite ran out of memory while using \(path)\(detail)"
        default:
            return "the database \(path) failed\(detail), SQLite result code \(error.extendedResultCode.rawValue)"
        }
    }
}
