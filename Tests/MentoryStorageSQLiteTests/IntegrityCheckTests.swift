import Foundation
import GRDB
import MentoryStorage
import MentoryStorageSQLite
import MentoryWire
import Testing

/// A database of 200 entries written and closed by the store, then damaged in its b-tree pages.
enum DamagedDatabase {
    /// Writes 200 entries through the store and closes it orderly (which checkpoints everything into
    /// the file and sets the clean-shutdown marker); with `closedCleanly: false`, then clears the
    /// marker as a run that crashed leaves it (opening clears it, only an orderly close sets it).
    static func make(_ path: String, closedCleanly: Bool) async throws {
        let store = try SQLiteSessionStore(configuration: .init(path: path))
        for index in 0..<200 { try await store.insert(makeEntry(day(index))) }
        try await store.close()
        #expect(FileSystemProbe.size(path + "-wal") ?? 0 == 0)
        #expect(try userVersion(path) == SQLiteSchema.cleanShutdownMarker)
        if !closedCleanly {
            let queue = try DatabaseQueue(path: path)
            try await queue.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA user_version = 0") }
            try queue.close()
            #expect(FileSystemProbe.size(path + "-wal") ?? 0 == 0)
        }
    }

    /// Overwrites the middle of the file (b-tree pages of the diary, not the header, the schema
    /// or the migrations' table) with garbage; returns the damaged file's bytes.
    @discardableResult
    static func damage(_ path: String) throws -> Data {
        var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(bytes.count > 16 * 4096)
        for offset in stride(from: 4096 * 3, to: 4096 * 12, by: 1) {
            bytes[offset] = UInt8(truncatingIfNeeded: offset &* 31)
        }
        try bytes.write(to: URL(fileURLWithPath: path))
        return bytes
    }

    /// `PRAGMA user_version`, read through SQLite (so a value still in the log counts).
    static func userVersion(_ path: String) throws -> Int32? {
        try inspect(path) { db in try Int32.fetchOne(db, sql: "PRAGMA user_version") }
    }
}

@Suite("SQLite store: the integrity check runs before opening only after an unclean shutdown")
struct IntegrityCheckTests {
    @Test("a new database is checked at open, and an orderly close sets the clean-shutdown marker")
    func newDatabase() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/mentoryd.sqlite"
            let store = try openStore(directory)
            #expect(store.integrityCheck == .verifiedAtOpen)
            #expect(await store.verifyIntegrity() == .verifiedAtOpen)
            try await store.insert(makeEntry(day(1)))
            #expect(try DamagedDatabase.userVersion(path) == 0)
            try await store.close()
            #expect(try DamagedDatabase.userVersion(path) == SQLiteSchema.cleanShutdownMarker)
        }
    }

    @Test("after a clean shutdown, opening skips the check and clears the marker; the background check passes")
    func cleanShutdownSkipsTheCheck() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/mentoryd.sqlite"
            let first = try openStore(directory)
            let entry = makeEntry(day(2))
            try await first.insert(entry)
            try await first.close()

            let store = try openStore(directory)
            #expect(store.integrityCheck == .pending)
            // Cleared before anything else is written: a crash from here on finds no marker.
            #expect(try DamagedDatabase.userVersion(path) == 0)
            #expect(try await store.entry(id: entry.id) == entry)
            #expect(await store.verifyIntegrity() == .verified)
            #expect(store.integrityCheck == .verified)
            try await store.close()
            #expect(try DamagedDatabase.userVersion(path) == SQLiteSchema.cleanShutdownMarker)
        }
    }

    @Test("a store closed before its background check ran sets no marker: the next start checks the file")
    func closedBeforeTheBackgroundCheck() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/mentoryd.sqlite"
            try await openStore(directory).close()
            let unverified = try openStore(directory)
            #expect(unverified.integrityCheck == .pending)
            try await unverified.close()
            #expect(try DamagedDatabase.userVersion(path) == 0)

            let store = try openStore(directory)
            #expect(store.integrityCheck == .verifiedAtOpen)
            try await store.close()
        }
    }

    @Test("after a clean shutdown, damage is not checked at open but found by the background check, and then refused")
    func backgroundCheckFindsDamage() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/mentoryd.sqlite"
            try await DamagedDatabase.make(path, closedCleanly: true)
            try DamagedDatabase.damage(path)

            // The synchronous check is skipped: the damaged file opens.
            let store = try openStore(directory)
            #expect(store.integrityCheck == .pending)
            let outcome = await store.verifyIntegrity()
            guard case .damaged(let reason) = outcome else {
                Issue.record("the background check passed a damaged file: \(outcome)")
                return
            }
            #expect(reason.contains("damaged"))
            #expect(reason.contains("backup"))
            #expect(store.integrityCheck == outcome)
            #expect(await store.verifyIntegrity() == outcome)
            try await store.close()
            #expect(try DamagedDatabase.userVersion(path) == 0)

            // The next start checks the file before opening it, and refuses it.
            let error = await storageError { () throws(StorageError) in try openStore(directory) }
            let refusal = try #require(error?.storageFailureReason)
            #expect(refusal.contains("is damaged"))
            #expect(refusal.contains("backup"))
        }
    }
}
