import Foundation
import GRDB
import MentoryDomain
import MentoryStorage
import MentoryStorageSQLite
import MentoryTestSupport
import MentoryWire
import Testing

/// Whether this process can make a file it cannot write: any user but root can (chmod), and root
/// can when the file system supports the immutable attribute (`chattr +i`).
let canMakeReadOnlyFiles: Bool = {
    if getuid() != 0 { return true }
    // Not FileManager's item-replacement directory: it leaves its TemporaryItems parent behind.
    guard let directory = try? makeTemporaryDirectory() else { return false }
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let probe = directory + "/probe"
    guard FileManager.default.createFile(atPath: probe, contents: Data()) else { return false }
    guard runTool("chattr", ["+i", probe]) else { return false }
    defer { _ = runTool("chattr", ["-i", probe]) }
    return open(probe, O_RDWR) < 0
}()

@discardableResult
func runTool(_ name: String, _ arguments: [String]) -> Bool {
    runCommandToCompletion([name] + arguments) == 0
}

/// Makes `path` unwritable for this process (chmod for users, the immutable attribute for root).
func makeReadOnly(_ path: String) throws {
    if getuid() == 0 {
        guard runTool("chattr", ["+i", path]) else { throw FixtureError("chattr +i \(path) failed") }
    } else {
        try FileManager.default.setAttributes([.posixPermissions: 0o400], ofItemAtPath: path)
    }
}

func makeWritable(_ path: String) {
    if getuid() == 0 { runTool("chattr", ["-i", path]) }
    try? FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
}

@Suite("SQLite store: failures are clear and never lose data")
struct StorageFailureTests {
    @Test("a file that is not a SQLite database stops the start-up and is left untouched")
    func garbageFile() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/mentoryd.sqlite"
            let garbage = Data((0..<20_000).map { UInt8(truncatingIfNeeded: $0 &* 7919) })
            try garbage.write(to: URL(fileURLWithPath: path))
            let error = await storageError { () throws(StorageError) in try openStore(directory) }
            let reason = try #require(error?.storageFailureReason)
            #expect(reason.contains("damaged"))
            #expect(reason.contains("backup"))
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == garbage)
        }
    }

    @Test("after an unclean shutdown, a database with damaged pages fails its check at start-up, left untouched")
    func damagedPages() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/mentoryd.sqlite"
            try await DamagedDatabase.make(path, closedCleanly: false)
            let bytes = try DamagedDatabase.damage(path)

            let error = await storageError { () throws(StorageError) in try openStore(directory) }
            let reason = try #require(error?.storageFailureReason)
            #expect(reason.contains("damaged"))
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == bytes)
        }
    }

    @Test("a log without its database stops the start-up instead of starting empty")
    func walWithoutDatabase() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/mentoryd.sqlite"
            try Data(repeating: 1, count: 4096).write(to: URL(fileURLWithPath: path + "-wal"))
            let error = await storageError { () throws(StorageError) in try openStore(directory) }
            let reason = try #require(error?.storageFailureReason)
            #expect(reason.contains("missing"))
            #expect(!FileManager.default.fileExists(atPath: path))
        }
    }

    @Test("a read-only database file stops the start-up with the remedy", .enabled(if: canMakeReadOnlyFiles))
    func readOnlyFile() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/mentoryd.sqlite"
            let store = try openStore(directory)
            try await store.insert(makeEntry("2024-06-01"))
            try await store.close()
            try makeReadOnly(path)
            defer { makeWritable(path) }
            let error = await storageError { () throws(StorageError) in try openStore(directory) }
            let reason = try #require(error?.storageFailureReason)
            #expect(reason.contains("read-only"))
            #expect(reason.contains("writable"))
        }
    }

    @Test("a second store on the same database is refused: one daemon per database")
    func secondOpener() async throws {
        try await withTemporaryDirectory { directory in
            let store = try openStore(directory)
            let error = await storageError { () throws(StorageError) in
                try openStore(directory) { $0.busyTimeout = .milliseconds(100) }
            }
            let reason = try #require(error?.storageFailureReason)
            #expect(reason.contains("another mentoryd"))
            // The first one is unaffected.
            try await store.insert(makeEntry("2024-06-02"))
            try await store.close()
            // Once closed, the database can be opened again.
            let again = try openStore(directory)
            #expect(try await again.diaryEntryCount() == 1)
            try await again.close()
        }
    }

    @Test("a database another program keeps locked fails writes (and start-up) with a clear error")
    func lockedByAnotherProgram() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/mentoryd.sqlite"
            let store = try openStore(directory) { $0.busyTimeout = .milliseconds(200) }
            let kept = makeEntry("2024-06-03")
            try await store.insert(kept)

            var configuration = Configuration()
            configuration.allowsUnsafeTransactions = true
            let other = try DatabaseQueue(path: path, configuration: configuration)
            try await other.writeWithoutTransaction { db in try db.execute(sql: "BEGIN IMMEDIATE") }

            let error = await storageError { () throws(StorageError) in try await store.insert(makeEntry("2024-06-04"))
            }
            let reason = try #require(error?.storageFailureReason)
            #expect(reason.contains("locked by another process"))
            #expect(reason.contains("not saved"))
            // Reads still work while the lock is held.
            #expect(try await store.entry(id: kept.id) == kept)
            try await store.close()

            let startup = await storageError { () throws(StorageError) in
                try openStore(directory) { $0.busyTimeout = .milliseconds(200) }
            }
            #expect(startup?.storageFailureReason?.contains("locked by another process") == true)

            try await other.writeWithoutTransaction { db in try db.execute(sql: "ROLLBACK") }
            try other.close()
            let reopened = try openStore(directory)
            #expect(try await reopened.entries(limit: 10, before: nil) == [kept])
            try await reopened.close()
        }
    }

    @Test("a full disk fails the write that does not fit, keeps the others, and the store recovers")
    func fullDisk() async throws {
        try await withTemporaryDirectory { directory in
            // max_page_count makes SQLite report SQLITE_FULL exactly as a full disk does.
            let store = try openStore(directory) { $0.maxPageCount = 64 }
            var stored: [Mentory_V1_DiaryEntry] = []
            var failure: StorageError?
            for index in 0..<2000 {
                var entry = makeEntry(day(index))
                entry.text = String(repeating: "x", count: 3000)
                do throws(StorageError) {
                    try await store.insert(entry)
                    stored.append(entry)
                } catch {
                    failure = error
                    break
                }
            }
            let reason = try #require(failure?.storageFailureReason)
            #expect(reason.contains("full"))
            #expect(reason.contains("not saved"))
            #expect(!stored.isEmpty)
            // Everything acknowledged is there; the failed write is not.
            #expect(try await store.diaryEntryCount() == stored.count)
            // Freeing space lets writes succeed again.
            #expect(try await store.delete(id: stored[0].id) == stored[0])
            let small = makeEntry("1999-01-01", items: 0)
            try await store.insert(small)
            #expect(try await store.entry(id: small.id) == small)
            try await store.close()
        }
    }
}

@Suite("SQLite store: online backup")
struct BackupTests {
    @Test("a backup taken during writes is a consistent database holding every write acknowledged before it")
    func backupWhileWriting() async throws {
        try await withTemporaryDirectory { directory in
            let store = try openStore(directory)
            let mentor = makeMentorState("Backed up", doneItems: [1])
            try await store.saveMentorState(mentor)
            let before = (0..<100).map { makeEntry(day($0)) }
            for entry in before { try await store.insert(entry) }

            let writer = Task {
                for index in 100..<400 { try await store.insert(makeEntry(day(index))) }
            }
            let destination = directory + "/copy.sqlite"
            let summary = try await store.backup(to: destination)
            try await writer.value
            #expect(summary.path == destination)
            #expect(summary.diaryEntries >= before.count)
            #expect(summary.bytes > 0)
            let mode = try FileManager.default.attributesOfItem(atPath: destination)[.posixPermissions] as? Int
            #expect(mode == 0o600)
            #expect(
                try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.contains("partial") }.isEmpty
            )

            // A second backup to the same name is refused; the first copy is intact.
            let again = await storageError { () throws(StorageError) in try await store.backup(to: destination) }
            if case .conflict = again {} else { Issue.record("expected a conflict, got \(String(describing: again))") }
            let relative = await storageError { () throws(StorageError) in try await store.backup(to: "copy2.sqlite") }
            if case .invalidArgument = relative {
            } else {
                Issue.record("expected invalidArgument, got \(String(describing: relative))")
            }
            try await store.close()

            // The copy opens as a mentoryd database with the acknowledged entries and the mentor state.
            let restoreDirectory = directory + "/restore"
            try FileManager.default.createDirectory(atPath: restoreDirectory, withIntermediateDirectories: true)
            try FileManager.default.moveItem(atPath: destination, toPath: restoreDirectory + "/mentoryd.sqlite")
            let restored = try openStore(restoreDirectory)
            #expect(try await restored.diaryEntryCount() == summary.diaryEntries)
            for entry in before {
                #expect(try await restored.entry(id: entry.id) == entry)
            }
            #expect(try await restored.loadMentorState() == mentor)
            try await restored.close()
        }
    }
}

enum FileSystemProbe {
    static func size(_ path: String) -> Int? {
        (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? nil
    }
}
