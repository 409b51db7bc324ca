#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif
import GRDB
import MentoryStorage

/// A first start's database: built whole beside its name, then renamed into place.
///
/// Built in place, a new database took 7 syncs before the daemon was ready: SQLite's switch to WAL
/// is a rollback-journal transaction (the journal, its directory, the journal again, the file),
/// and the schema's commit another three (the log, its directory, the log again). Built beside
/// its name with `synchronous=OFF`, it takes 2: the finished file, then its directory after the
/// rename. A power cut before the rename's sync leaves the empty file (or none) at the name, which
/// the next start builds again; after it, a whole database. Nothing is acknowledged before then.
///
/// The log is checkpointed into the file before the rename, so the file is the whole database. Opening
/// it checks it (at once, being empty) and writes a no-op without a sync, as opening after a clean
/// shutdown does, so that the pool's opening finds a log and writes (and syncs) nothing.
enum NewDatabase {
    /// Appended to the database's name for the file it is built in.
    static let buildingSuffix = ".new"

    /// Whether the database at `path`, open as `descriptor`, has not been built yet: an empty file
    /// (as opening it for its lock creates one) with no log holding anything.
    static func isUnbuilt(descriptor: Int32, path: String) -> Bool {
        var info = stat()
        guard fstat(descriptor, &info) == 0, info.st_size == 0 else { return false }
        return (FileSystem.fileSize(path + "-wal") ?? 0) == 0
    }

    /// Builds mentoryd's empty database beside `path`, syncs it, and renames it to `path`, whose
    /// directory it syncs last.
    static func build(at path: String) throws(StorageError) {
        let building = path + Self.buildingSuffix
        Self.removeBuildingFiles(building)
        // Created here rather than by SQLite, so that the diary is private from its first byte.
        let descriptor = open(building, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw .failed("cannot create the new database \(building): \(FileSystem.errnoText())")
        }
        FileSystem.closeDescriptor(descriptor)
        do {
            var grdb = GRDB.Configuration()
            grdb.label = "mentoryd.new-database"
            let queue = try DatabaseQueue(path: building, configuration: grdb)
            let journalMode: String? = try queue.inDatabase { db in
                // No sync until the file is whole: the file is synced once, below.
                try db.execute(sql: "PRAGMA synchronous = OFF")
                let journalMode = try String.fetchOne(db, sql: "PRAGMA journal_mode = WAL")
                try db.inTransaction(.immediate) {
                    try SQLiteSchema.createSchema(in: db)
                    return .commit
                }
                // Everything into the file itself, which is all that is renamed.
                try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
                return journalMode
            }
            try queue.close()
            try SQLiteSessionStore.requireWAL(journalMode, path: path)
            guard (FileSystem.fileSize(building + "-wal") ?? 0) == 0 else {
                throw StorageError.failed("the new database's log \(building)-wal was not checkpointed")
            }
        } catch let error as StorageError {
            Self.removeBuildingFiles(building)
            throw error
        } catch {
            Self.removeBuildingFiles(building)
            throw .failed("cannot create the database \(path): \(StorageFailures.describe(error, path: path))")
        }
        FileSystem.removeIfPresent(building + "-wal")
        FileSystem.removeIfPresent(building + "-shm")
        do throws(StorageError) {
            try FileSystem.syncFile(building)
            guard rename(building, path) == 0 else {
                throw .failed("cannot rename the new database \(building) to \(path): \(FileSystem.errnoText())")
            }
        } catch {
            Self.removeBuildingFiles(building)
            throw error
        }
        try FileSystem.syncDirectory(FileSystem.parentDirectory(of: path))
    }

    /// Removes what an earlier, interrupted build left.
    private static func removeBuildingFiles(_ building: String) {
        for suffix in ["", "-wal", "-shm", "-journal"] {
            FileSystem.removeIfPresent(building + suffix)
        }
    }
}
