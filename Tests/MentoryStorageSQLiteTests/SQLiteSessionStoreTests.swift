import Foundation
import GRDB
import MentoryDomain
import MentoryStorage
import MentoryStorageSQLite
import MentoryWire
import Testing

@Suite("SQLite store: schema and migrations")
struct MigrationTests {
    @Test("an empty directory gets a WAL database with every migration")
    func migratesFromEmpty() async throws {
        try await withTemporaryDirectory { directory in
            let store = try openStore(directory)
            // Every commit is fsynced: WAL with synchronous=FULL on the connection that writes.
            let settings = try await store.writerSettings()
            #expect(settings.journalMode == "wal")
            #expect(settings.synchronous == 2)
            #expect(try await store.entries(limit: 10, before: nil).isEmpty)
            #expect(try await store.loadMentorState() == Mentory_V1_MentorState())
            try await store.close()

            let path = directory + "/mentoryd.sqlite"
            // A clean close leaves one self-contained file.
            #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
            #expect(!FileManager.default.fileExists(atPath: path + "-shm"))
            let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
            #expect(mode == 0o600)
            let (applied, journalMode, applicationID, tables) = try inspect(path) { db in
                (
                    try SQLiteSchema.migrator.appliedIdentifiers(db),
                    try String.fetchOne(db, sql: "PRAGMA journal_mode"),
                    try Int32.fetchOne(db, sql: "PRAGMA application_id"),
                    try String.fetchSet(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table'")
                )
            }
            #expect(applied == Set(SQLiteSchema.migrationIdentifiers))
            #expect(journalMode == "wal")
            #expect(applicationID == SQLiteSchema.applicationID)
            #expect(
                tables.isSuperset(of: ["diary_entry", "diary_action_item", "mentor_message", "mentor_action_item"]))
        }
    }

    @Test("a database at the previous schema keeps its entries and gains the mentor tables")
    func migratesFromPreviousSchema() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/mentoryd.sqlite"
            // Build a v1 database by hand, as the previous release left it.
            do {
                let queue = try DatabaseQueue(path: path)
                try SQLiteSchema.migrator.migrate(queue, upTo: SQLiteSchema.v1)
                try await queue.write { db in
                    try db.execute(
                        sql: """
                            INSERT INTO diary_entry (id, record_date, created_at_unix_ms, title, text, emotion, analysis)
                            VALUES ('0b7e6c1e-0000-4000-8000-000000000001', '2024-02-29', 1709164800000,
                                    'Leap day', 'An extra day.', 6, NULL);
                            INSERT INTO diary_action_item (entry_id, position, id, text, done) VALUES
                                ('0b7e6c1e-0000-4000-8000-000000000001', 0, 'a', 'Call mum', 1),
                                ('0b7e6c1e-0000-4000-8000-000000000001', 1, 'b', 'Go running', 0);
                            """
                    )
                }
                #expect(try await queue.read { db in try db.tableExists("mentor_message") } == false)
                try queue.close()
            }

            let store = try openStore(directory)
            let entry = try #require(try await store.entry(id: "0b7e6c1e-0000-4000-8000-000000000001"))
            #expect(entry.recordDate == "2024-02-29")
            #expect(entry.title == "Leap day")
            #expect(entry.emotion == .pleasant)
            #expect(!entry.hasAnalysis)
            #expect(entry.actionItems.map(\.id) == ["a", "b"])
            #expect(entry.actionItems.map(\.done) == [true, false])
            #expect(try await store.loadMentorState() == Mentory_V1_MentorState())
            let state = makeMentorState("Migrated and working")
            try await store.saveMentorState(state)
            try await store.close()

            let reopened = try openStore(directory)
            #expect(try await reopened.loadMentorState() == state)
            try await reopened.close()
            let completed = try inspect(path) { db in try SQLiteSchema.migrator.completedMigrations(db) }
            #expect(completed == SQLiteSchema.migrationIdentifiers)
        }
    }

    @Test("a database written by a newer mentoryd is refused, not modified")
    func refusesNewerSchema() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/mentoryd.sqlite"
            do {
                let queue = try DatabaseQueue(path: path)
                var future = SQLiteSchema.migrator
                future.registerMigration("v99-from-the-future") { db in
                    try db.execute(sql: "CREATE TABLE future (x)")
                }
                try future.migrate(queue)
                try queue.close()
            }
            let error = await storageError { () throws(StorageError) in try openStore(directory) }
            let reason = try #require(error?.storageFailureReason)
            #expect(reason.contains("newer mentoryd"))
            #expect(reason.contains("v99-from-the-future"))
        }
    }

    @Test("another program's SQLite database is refused")
    func refusesForeignDatabase() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/mentoryd.sqlite"
            do {
                let queue = try DatabaseQueue(path: path)
                try await queue.write { db in try db.execute(sql: "CREATE TABLE bookmarks (url TEXT)") }
                try queue.close()
            }
            let error = await storageError { () throws(StorageError) in try openStore(directory) }
            let reason = try #require(error?.storageFailureReason)
            #expect(reason.contains("another program"))
            #expect(try inspect(path) { db in try db.tableExists("diary_entry") } == false)
        }
    }
}

@Suite("SQLite store: diary and mentor semantics")
struct SemanticsTests {
    @Test("entries round-trip with every field, across a reopen")
    func entryRoundTrip() async throws {
        try await withTemporaryDirectory { directory in
            let store = try openStore(directory)
            let full = makeEntry("2024-05-01")
            let bare = makeEntry("2024-05-02", analysis: nil, items: 0)
            var emptyAnalysis = makeEntry("2024-05-03", analysis: "", items: 1)
            emptyAnalysis.emotion = .veryUnpleasant
            for entry in [full, bare, emptyAnalysis] {
                try await store.insert(entry)
            }
            #expect(try await store.entry(id: full.id) == full)
            #expect(try await store.entry(id: bare.id) == bare)
            #expect(try await store.entry(id: emptyAnalysis.id) == emptyAnalysis)
            #expect(try await store.entry(id: "nope") == nil)
            try await store.close()

            let reopened = try openStore(directory)
            #expect(try await reopened.entries(limit: 10, before: nil) == [emptyAnalysis, bare, full])
            let reloaded = try #require(try await reopened.entry(id: emptyAnalysis.id))
            #expect(reloaded.hasAnalysis && reloaded.analysis.isEmpty)
            try await reopened.close()
        }
    }

    @Test("a different entry with the same id, or the same record date, is a conflict, exactly as in memory")
    func conflictRules() async throws {
        try await withTemporaryDirectory { directory in
            let sqlite = try openStore(directory)
            let memory = InMemorySessionStore()
            let first = makeEntry("2024-01-01")
            var sameID = makeEntry("2024-01-02", id: first.id)
            sameID.title = "Different"
            let sameDate = makeEntry("2024-01-01")
            let fine = makeEntry("2024-01-03")
            for store in [sqlite as any DiaryStore, memory] {
                try await store.insert(first)
            }
            // The identical entry again is no change, in both stores.
            #expect(try await sqlite.insert(first) == .alreadyPresent)
            #expect(try await memory.insert(first) == .alreadyPresent)
            for attempt in [sameID, sameDate] {
                let sqliteError = await storageError { () throws(StorageError) in try await sqlite.insert(attempt) }
                let memoryError = await storageError { () throws(StorageError) in try await memory.insert(attempt) }
                #expect(sqliteError != nil)
                #expect(sqliteError == memoryError)
                if case .conflict = sqliteError {
                } else {
                    Issue.record("expected a conflict, got \(String(describing: sqliteError))")
                }
            }
            try await sqlite.insert(fine)
            // The refused entries left nothing behind.
            #expect(try await sqlite.entries(limit: 10, before: nil).map(\.id) == [fine.id, first.id])
            // Once the day is free again, it can be written.
            #expect(try await sqlite.delete(id: first.id) == first)
            try await sqlite.insert(sameDate)
            #expect(try await sqlite.entry(id: sameDate.id) == sameDate)
            try await sqlite.close()
        }
    }

    @Test("list orders by record date, honours limit and the exclusive before bound")
    func listing() async throws {
        try await withTemporaryDirectory { directory in
            let store = try openStore(directory)
            let entries = (0..<30).map { makeEntry(day($0 * 3)) }
            for entry in entries.shuffled() { try await store.insert(entry) }
            let newestFirst = entries.reversed().map(\.id)
            #expect(try await store.entries(limit: .max, before: nil).map(\.id) == newestFirst)
            #expect(try await store.entries(limit: 5, before: nil).map(\.id) == Array(newestFirst.prefix(5)))
            #expect(
                try await store.entries(limit: 100, before: entries[10].recordDate).map(\.id)
                    == entries[..<10].reversed().map(\.id))
            #expect(try await store.entries(limit: 0, before: nil).isEmpty)
            #expect(try await store.entries(limit: 3, before: "1999-12-31").isEmpty)
            #expect(try await store.diaryEntryCount() == 30)
            try await store.close()
        }
    }

    @Test("action items' done flags are set, cleared and persisted")
    func actionItemDoneFlags() async throws {
        try await withTemporaryDirectory { directory in
            let store = try openStore(directory)
            let entry = makeEntry("2024-03-10")
            try await store.insert(entry)
            var expected = entry
            let updated = try await store.setActionItemDone(entryID: entry.id, itemID: "item-2", done: true)
            expected.actionItems[2].done = true
            #expect(updated == DiaryActionItemUpdate(entry: expected, changed: true))
            let cleared = try await store.setActionItemDone(entryID: entry.id, itemID: "item-1", done: false)
            expected.actionItems[1].done = false
            #expect(cleared == DiaryActionItemUpdate(entry: expected, changed: true))
            // Setting a flag to its current value is fine, and reported as no change.
            #expect(
                try await store.setActionItemDone(entryID: entry.id, itemID: "item-1", done: false)
                    == DiaryActionItemUpdate(entry: expected, changed: false))

            let unknownEntry = await storageError { () throws(StorageError) in
                try await store.setActionItemDone(entryID: "missing", itemID: "item-1", done: true)
            }
            #expect(unknownEntry == .notFound("diary entry missing"))
            let unknownItem = await storageError { () throws(StorageError) in
                try await store.setActionItemDone(entryID: entry.id, itemID: "item-9", done: true)
            }
            #expect(unknownItem == .notFound("action item item-9 of diary entry \(entry.id)"))
            try await store.close()

            let reopened = try openStore(directory)
            #expect(try await reopened.entry(id: entry.id) == expected)
            try await reopened.close()
        }
    }

    @Test("delete returns the entry once and removes its action items")
    func deletion() async throws {
        try await withTemporaryDirectory { directory in
            let store = try openStore(directory)
            let entry = makeEntry("2024-04-01")
            let other = makeEntry("2024-04-02")
            try await store.insert(entry)
            try await store.insert(other)
            #expect(try await store.delete(id: entry.id) == entry)
            #expect(try await store.delete(id: entry.id) == nil)
            #expect(try await store.entry(id: entry.id) == nil)
            try await store.close()
            let itemCounts = try inspect(directory + "/mentoryd.sqlite") { db in
                try [entry.id, other.id].map { id in
                    try Int.fetchOne(
                        db, sql: "SELECT COUNT(*) FROM diary_action_item WHERE entry_id = ?", arguments: [id])
                }
            }
            #expect(itemCounts == [0, 3])
        }
    }

    @Test("the mentor state round-trips, with its done flags, across a reopen")
    func mentorState() async throws {
        try await withTemporaryDirectory { directory in
            let store = try openStore(directory)
            let first = makeMentorState("Breathe.")
            try await store.saveMentorState(first)
            #expect(try await store.loadMentorState() == first)
            let second = makeMentorState("Take a walk, then write.", doneItems: [0, 2])
            try await store.saveMentorState(second)
            try await store.close()

            let reopened = try openStore(directory)
            let loaded = try await reopened.loadMentorState()
            #expect(loaded == second)
            #expect(loaded.message.actionItems.map(\.done) == [true, false, true])
            #expect(loaded.message.character == .warm)
            // Saving the empty state clears it.
            try await reopened.saveMentorState(Mentory_V1_MentorState())
            #expect(try await reopened.loadMentorState() == Mentory_V1_MentorState())
            try await reopened.close()
        }
    }
}

@Suite("SQLite store: group commit")
struct GroupCommitTests {
    @Test("concurrent writers share transactions, and each sees its own outcome")
    func concurrentWritersShareTransactions() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/mentoryd.sqlite"
            let store = try openStore(directory) { $0.busyTimeout = .seconds(60) }
            // Hold the write lock from another connection so that every write queues up behind the
            // first batch; then let go. The queue must then commit them in far fewer transactions.
            var blockerConfiguration = Configuration()
            blockerConfiguration.allowsUnsafeTransactions = true
            let blocker = try DatabaseQueue(path: path, configuration: blockerConfiguration)
            try await blocker.writeWithoutTransaction { db in try db.execute(sql: "BEGIN IMMEDIATE") }

            let writers = 200
            let entries = (0..<writers).map { makeEntry(day($0)) }
            let duplicates = (0..<10).map { makeEntry(day($0)) }  // same days as the first ten: conflicts
            let outcomes = Task {
                await withTaskGroup(of: (String, StorageError?).self) { group in
                    for entry in entries + duplicates {
                        group.addTask {
                            (entry.id, await storageError { () throws(StorageError) in try await store.insert(entry) })
                        }
                    }
                    return await group.reduce(into: [String: StorageError?]()) { $0[$1.0] = $1.1 }
                }
            }
            // All but the first batch's writes are queued while the lock is held.
            while store.queuedWriteCount + store.commitStatistics.writes < writers + duplicates.count {
                try await Task.sleep(for: .milliseconds(5))
            }
            try await blocker.writeWithoutTransaction { db in try db.execute(sql: "COMMIT") }
            try blocker.close()
            let results = await outcomes.value

            let statistics = store.commitStatistics
            #expect(statistics.writes == writers + duplicates.count)
            #expect(statistics.batches < statistics.writes / 10)
            #expect(statistics.largestBatch > 1)

            // Exactly one entry per day won; the rest got a conflict and left nothing behind.
            let stored = try await store.entries(limit: .max, before: nil)
            #expect(stored.count == writers)
            let storedIDs = Set(stored.map(\.id))
            for (id, error) in results {
                if storedIDs.contains(id) {
                    #expect(error == nil)
                } else if case .conflict = error {
                } else {
                    Issue.record(
                        "entry \(id) is neither stored nor refused as a conflict: \(String(describing: error))")
                }
            }
            #expect(results.values.count { $0 == nil } == writers)
            try await store.close()
        }
    }

    @Test("a write is visible to another connection as soon as it is acknowledged")
    func acknowledgedWritesAreCommitted() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/mentoryd.sqlite"
            let store = try openStore(directory)
            let observer = try DatabasePool(path: path)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for client in 0..<16 {
                    group.addTask {
                        for round in 0..<20 {
                            let entry = makeEntry(day(client * 100 + round))
                            try await store.insert(entry)
                            // Another connection, so this reads only what was committed.
                            let count = try await observer.read { db in
                                try Int.fetchOne(
                                    db, sql: "SELECT COUNT(*) FROM diary_entry WHERE id = ?", arguments: [entry.id])
                            }
                            #expect(count == 1)
                        }
                    }
                }
                try await group.waitForAll()
            }
            #expect(try await store.diaryEntryCount() == 320)
            let statistics = store.commitStatistics
            #expect(statistics.writes == 320)
            try observer.close()
            try await store.close()
        }
    }

    @Test("writes queued when the store closes are committed first; later ones fail")
    func closeDrainsTheQueue() async throws {
        try await withTemporaryDirectory { directory in
            let store = try openStore(directory)
            let entries = (0..<50).map { makeEntry(day($0)) }
            let writes = Task {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for entry in entries { group.addTask { try await store.insert(entry) } }
                    try await group.waitForAll()
                }
            }
            try await writes.value
            try await store.close()
            let late = await storageError { () throws(StorageError) in try await store.insert(makeEntry(day(999))) }
            #expect(late?.storageFailureReason?.contains("closed") == true)
            let reopened = try openStore(directory)
            #expect(try await reopened.diaryEntryCount() == 50)
            try await reopened.close()
        }
    }
}

@Suite("SQLite store: imports and opening")
struct ImportAndOpenTests {
    @Test("concurrent identical inserts all succeed, exactly one writes; a different entry with the id conflicts")
    func concurrentIdenticalInserts() async throws {
        try await withTemporaryDirectory { directory in
            let store = try openStore(directory)
            let entries = (0..<50).map { makeEntry(day($0)) }
            let outcomes = try await withThrowingTaskGroup(of: DiaryInsertOutcome.self) { group in
                for entry in entries + entries + entries {
                    group.addTask { try await store.insert(entry) }
                }
                return try await group.reduce(into: [DiaryInsertOutcome]()) { $0.append($1) }
            }
            #expect(outcomes.count { $0 == .inserted } == entries.count)
            #expect(outcomes.count { $0 == .alreadyPresent } == 2 * entries.count)
            #expect(try await store.diaryEntryCount() == entries.count)
            var changed = entries[0]
            changed.title = "changed"
            let error = await storageError { () throws(StorageError) in _ = try await store.insert(changed) }
            if case .conflict = error {} else { Issue.record("expected a conflict, got \(String(describing: error))") }
            try await store.close()
        }
    }

    @Test(
        "openers waiting for the database's lock wait on their own threads, not the cooperative pool",
        .timeLimit(.minutes(2))
    )
    func openWaitsOffThePool() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/mentoryd.sqlite"
            let first = try openStore(directory)
            // More waiting openers than the pool has threads: were they waiting on the pool, the
            // first store's close (which needs the pool) could not run, and none would open.
            let openers = ProcessInfo.processInfo.activeProcessorCount + 2
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<openers {
                    group.addTask {
                        var configuration = SQLiteSessionStore.Configuration(path: path)
                        configuration.busyTimeout = .seconds(90)
                        let store = try await SQLiteSessionStore.opened(configuration: configuration)
                        try await store.insert(makeEntry(day(index)))
                        try await store.close()
                    }
                }
                // Give the openers time to start waiting (a delay, not an assertion), then run work on
                // the pool alongside them and let go.
                try await Task.sleep(for: .milliseconds(300))
                try await first.insert(makeEntry(day(openers)))
                try await first.close()
                try await group.waitForAll()
            }
            let last = try openStore(directory)
            #expect(try await last.diaryEntryCount() == openers + 1)
            try await last.close()
        }
    }
}
