import Foundation
import GRDB
import MentoryDomain
import MentoryStorage
import MentoryStorageSQLite
import MentoryWire
import Testing

/// A first start that crashed leaves nothing mentoryd refuses, a foreign database is still refused,
/// and no connection but the writer ever checkpoints.
@Suite("SQLite store: a crash-safe first start, and checkpoints on the writer only")
struct FirstStartTests {
    /// Makes a database at `path` in WAL mode, as a pool would, and runs `body` on it.
    private static func makeDatabase(_ path: String, _ body: (Database) throws -> Void) throws {
        let queue = try DatabaseQueue(path: path)
        try queue.writeWithoutTransaction { db in
            _ = try String.fetchOne(db, sql: "PRAGMA journal_mode = WAL")
            try body(db)
        }
        try queue.close()
    }

    private static func applicationID(_ path: String) throws -> Int32 {
        try inspect(path) { db in try Int32.fetchOne(db, sql: "PRAGMA application_id") ?? 0 }
    }

    @Test("a file an older first start left half made (application_id 0, an empty grdb_migrations) is finished")
    func halfMadeFileIsFinished() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/mentoryd.sqlite"
            // What GRDB's migrator committed on its own before the first migration set the id.
            try Self.makeDatabase(path) { db in
                try db.execute(sql: "CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY)")
            }
            let store = try openStore(directory)
            try await store.insert(makeEntry(day(0)))
            try await store.close()
            #expect(try Self.applicationID(path) == SQLiteSchema.applicationID)
            let applied = try inspect(path) { db in
                try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations ORDER BY identifier")
            }
            #expect(applied == SQLiteSchema.migrationIdentifiers)
        }
    }

    @Test("a file with mentoryd's application_id and no migration applied yet is migrated")
    func claimedFileWithoutMigrationsIsMigrated() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/mentoryd.sqlite"
            try Self.makeDatabase(path) { db in
                try db.execute(sql: "PRAGMA application_id = \(SQLiteSchema.applicationID)")
                try db.execute(sql: "CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY)")
            }
            let store = try openStore(directory)
            try await store.insert(makeEntry(day(0)))
            #expect(try await store.diaryEntryCount() == 1)
            try await store.close()
        }
    }

    @Test(
        "a database of another program without an application_id is still refused, and left as it was",
        arguments: [
            "CREATE TABLE notes (body TEXT)",
            // GRDB's table, but with a migration of another program in it.
            "CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY); "
                + "INSERT INTO grdb_migrations VALUES ('createNotes')",
            "CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY); CREATE TABLE notes (body TEXT)",
        ]
    )
    func foreignDatabaseIsRefused(schema: String) async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/mentoryd.sqlite"
            try Self.makeDatabase(path) { db in try db.execute(sql: schema) }
            let error = await storageError { () throws(StorageError) in try openStore(directory) }
            let reason = try #require(error?.storageFailureReason)
            #expect(reason.contains("another program (application_id 0)"), "\(reason)")
            #expect(try Self.applicationID(path) == 0)
        }
    }

    @Test("a new database gets mentoryd's application_id, and the store names its SQLite and checkpoint mode")
    func newDatabaseIsClaimed() async throws {
        try await withTemporaryDirectory { directory in
            let store = try openStore(directory) {
                $0.checkpointPages = 8
                $0.maxLogPages = 16
            }
            #expect(store.checkpointMode.contains("writer only"))
            #expect(store.checkpointMode.contains("PASSIVE at 8 log pages"))
            #expect(store.checkpointMode.contains("RESTART at 16"))
            #expect(SQLiteSessionStore.sqliteVersion.hasPrefix("3."))
            try await store.close()
            #expect(try Self.applicationID(directory + "/mentoryd.sqlite") == SQLiteSchema.applicationID)
        }
    }

    @Test(
        "a new database is built beside its name and renamed into place: private, in WAL mode, nothing left beside it"
    )
    func newDatabaseIsBuiltAside() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/mentoryd.sqlite"
            let store = try openStore(directory)
            var info = stat()
            #expect(stat(path, &info) == 0)
            #expect(info.st_mode & 0o777 == 0o600)
            #expect(try await store.writerSettings().journalMode == "wal")
            #expect(store.integrityCheck == .verifiedAtOpen)
            for leftover in ["", "-wal", "-shm", "-journal"] {
                #expect(!FileManager.default.fileExists(atPath: path + ".new" + leftover))
            }
            try await store.close()
            #expect(try Self.applicationID(path) == SQLiteSchema.applicationID)
        }
    }

    @Test("an empty file at the name and what an interrupted build left beside it become a new database")
    func interruptedBuildIsRedone() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/mentoryd.sqlite"
            // A first start cut off before its rename: the empty file its lock made, a half-built file beside it.
            #expect(FileManager.default.createFile(atPath: path, contents: Data()))
            #expect(FileManager.default.createFile(atPath: path + ".new", contents: Data("half built".utf8)))
            #expect(FileManager.default.createFile(atPath: path + ".new-journal", contents: Data("stale".utf8)))
            let store = try openStore(directory)
            var entry = Mentory_V1_DiaryEntry()
            entry.id = "01a22176-a5e1-749a-85c3-9d02fc987d11"
            entry.title = "kept"
            try await store.insert(entry)
            try await store.close()
            #expect(!FileManager.default.fileExists(atPath: path + ".new"))
            #expect(!FileManager.default.fileExists(atPath: path + ".new-journal"))
            #expect(try Self.applicationID(path) == SQLiteSchema.applicationID)
            let reopened = try openStore(directory)
            #expect(try await reopened.entry(id: entry.id)?.title == "kept")
            try await reopened.close()
        }
    }

    @Test("a read-only connection never checkpoints, not even when it closes last")
    func readOnlyConnectionsNeverCheckpoint() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/mentoryd.sqlite"
            let writer = try DatabaseQueue(path: path)
            try writer.writeWithoutTransaction { db in
                _ = try String.fetchOne(db, sql: "PRAGMA journal_mode = WAL")
                try db.execute(sql: "PRAGMA wal_autocheckpoint = 0")
                try db.execute(sql: "CREATE TABLE t (x); INSERT INTO t VALUES (1)")
            }
            var configuration = Configuration()
            configuration.readonly = true
            let reader = try DatabaseQueue(path: path, configuration: configuration)
            #expect(try reader.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM t") } == 1)
            #expect(throws: DatabaseError.self) {
                try reader.inDatabase { db in _ = try db.checkpoint(.passive) }
            }
            let logBytes = try #require(
                try FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? NSNumber)
            #expect(logBytes.intValue > 0)
            // The writer closes first (not alone, so it leaves the log); the reader closes last.
            try writer.close()
            try reader.close()
            let after = try FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? NSNumber
            #expect(after == logBytes, "the read-only connection checkpointed or removed the log as it closed")
        }
    }
}
