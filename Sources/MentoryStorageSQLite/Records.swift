import GRDB
import MentoryDomain
import MentoryWire

/// Reads and writes diary entries and the mentor state as rows of ``SQLiteSchema``.
///
/// Every function runs inside a database access the caller opened; none opens a transaction. The
/// statements of the write path and of single-entry reads are prepared once per connection and
/// reused (GRDB's statement cache): the set of their SQL texts is fixed and small.
enum DiaryRows {
    private static let entryColumns = "id, record_date, created_at_unix_ms, title, text, emotion, analysis"

    /// Inserts `entry` and its action items. The caller checked the conflict rules.
    static func insert(_ entry: Mentory_V1_DiaryEntry, into db: Database) throws {
        try db.cachedStatement(sql: "INSERT INTO diary_entry (\(entryColumns)) VALUES (?, ?, ?, ?, ?, ?, ?)").execute(
            arguments: [
                entry.id,
                entry.recordDate,
                entry.createdAtUnixMs,
                entry.title,
                entry.text,
                entry.emotion.rawValue,
                entry.hasAnalysis ? entry.analysis : nil,
            ]
        )
        guard !entry.actionItems.isEmpty else { return }
        let insertItem = try db.cachedStatement(
            sql: "INSERT INTO diary_action_item (entry_id, position, id, text, done) VALUES (?, ?, ?, ?, ?)")
        for (position, item) in entry.actionItems.enumerated() {
            try insertItem.execute(arguments: [entry.id, position, item.id, item.text, item.done])
        }
    }

    /// The ids of the entries that have the id `id` or the record date `recordDate`: none, one or two.
    ///
    /// One statement (SQLite answers the `OR` from both indexes) reading one column, for the insert's
    /// conflict checks: the common answer, none, costs neither a second statement nor a row decoding.
    static func ids(matchingID id: String, orRecordDate recordDate: String, in db: Database) throws -> [String] {
        try String.fetchAll(
            db.cachedStatement(sql: "SELECT id FROM diary_entry WHERE id = ? OR record_date = ?"),
            arguments: [id, recordDate]
        )
    }

    /// The entry with `id`, with its action items, or `nil`.
    static func entry(id: String, in db: Database) throws -> Mentory_V1_DiaryEntry? {
        try self.entries(sql: "WHERE id = ?", arguments: [id], in: db).first
    }

    /// Up to `limit` entries before `before`, newest record date first.
    static func entries(limit: Int, before: String?, in db: Database) throws -> [Mentory_V1_DiaryEntry] {
        // SQLite reads a negative LIMIT as "no limit".
        let sqlLimit: Int64 = limit >= Int(Int64.max) ? -1 : Int64(max(0, limit))
        if let before {
            return try self.entries(
                sql: "WHERE record_date < ? ORDER BY record_date DESC LIMIT ?",
                arguments: [before, sqlLimit],
                in: db
            )
        }
        return try self.entries(sql: "ORDER BY record_date DESC LIMIT ?", arguments: [sqlLimit], in: db)
    }

    /// Entries selected by `sql` (a WHERE/ORDER/LIMIT tail), in its order, with their action items.
    private static func entries(
        sql: String,
        arguments: StatementArguments,
        in db: Database
    ) throws -> [Mentory_V1_DiaryEntry] {
        var entries: [Mentory_V1_DiaryEntry] = []
        var indexByID: [String: Int] = [:]
        // `sql` is one of three fixed tails: cached.
        let rows = try Row.fetchCursor(
            db.cachedStatement(sql: "SELECT \(entryColumns) FROM diary_entry \(sql)"), arguments: arguments)
        while let row = try rows.next() {
            var entry = Mentory_V1_DiaryEntry()
            entry.id = row[0]
            entry.recordDate = row[1]
            entry.createdAtUnixMs = row[2]
            entry.title = row[3]
            entry.text = row[4]
            entry.emotion = Mentory_V1_Emotion(rawValue: row[5]) ?? .unspecified
            if let analysis: String = row[6] {
                entry.analysis = analysis
            }
            indexByID[entry.id] = entries.count
            entries.append(entry)
        }
        guard !entries.isEmpty else { return entries }
        // The selected entries' action items, read by chunks of ids to stay far below SQLite's
        // limit on bound parameters.
        let ids = entries.map(\.id)
        for start in stride(from: 0, to: ids.count, by: 500) {
            let chunk = Array(ids[start..<min(start + 500, ids.count)])
            let placeholders = Array(repeating: "?", count: chunk.count).joined(separator: ", ")
            let itemsSQL = """
                SELECT entry_id, id, text, done FROM diary_action_item
                WHERE entry_id IN (\(placeholders)) ORDER BY entry_id, position
                """
            // One entry's items (a get, or a write's check) is the common case: cached. Other
            // chunk sizes are prepared each time rather than filling the cache with one per size.
            let statement =
                chunk.count == 1 ? try db.cachedStatement(sql: itemsSQL) : try db.makeStatement(sql: itemsSQL)
            let items = try Row.fetchCursor(statement, arguments: StatementArguments(chunk))
            while let row = try items.next() {
                let entryID: String = row[0]
                guard let index = indexByID[entryID] else { continue }
                var item = Mentory_V1_ActionItem()
                item.id = row[1]
                item.text = row[2]
                item.done = row[3]
                entries[index].actionItems.append(item)
            }
        }
        return entries
    }

    /// Deletes the entry with `id` (its action items cascade).
    static func delete(id: String, in db: Database) throws {
        try db.cachedStatement(sql: "DELETE FROM diary_entry WHERE id = ?").execute(arguments: [id])
    }

    /// Sets the done flag of the first action item of `entryID` whose id is `itemID`.
    ///
    /// Returns `false` when the entry has no such item.
    static func setActionItemDone(entryID: String, itemID: String, done: Bool, in db: Database) throws -> Bool {
        try db.execute(
            sql: """
                UPDATE diary_action_item SET done = ?
                WHERE entry_id = ? AND position = (
                    SELECT MIN(position) FROM diary_action_item WHERE entry_id = ? AND id = ?
                )
                """,
            arguments: [done, entryID, entryID, itemID]
        )
        return db.changesCount > 0
    }

    /// The number of diary entries.
    static func count(in db: Database) throws -> Int {
        try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM diary_entry") ?? 0
    }
}

/// Reads and writes the mentor's state: at most one message and its action items.
enum MentorRows {
    /// The stored state; empty when nothing was saved.
    static func load(from db: Database) throws -> Mentory_V1_MentorState {
        var state = Mentory_V1_MentorState()
        guard
            let row = try Row.fetchOne(
                db,
                sql: "SELECT content, character, updated_at_unix_ms FROM mentor_message WHERE singleton = 1"
            )
        else {
            return state
        }
        var message = Mentory_V1_MentorMessage()
        message.content = row[0]
        message.character = Mentory_V1_MentorCharacter(rawValue: row[1]) ?? .unspecified
        message.updatedAtUnixMs = row[2]
        let items = try Row.fetchCursor(db, sql: "SELECT id, text, done FROM mentor_action_item ORDER BY position")
        while let item = try items.next() {
            var actionItem = Mentory_V1_ActionItem()
            actionItem.id = item[0]
            actionItem.text = item[1]
            actionItem.done = item[2]
            message.actionItems.append(actionItem)
        }
        state.message = message
        return state
    }

    /// Replaces the stored state with `state`.
    static func save(_ state: Mentory_V1_MentorState, into db: Database) throws {
        try db.execute(sql: "DELETE FROM mentor_action_item; DELETE FROM mentor_message;")
        guard state.hasMessage else { return }
        let message = state.message
        try db.execute(
            sql: "INSERT INTO mentor_message (singleton, content, character, updated_at_unix_ms) VALUES (1, ?, ?, ?)",
            arguments: [message.content, message.character.rawValue, message.updatedAtUnixMs]
        )
        for (position, item) in message.actionItems.enumerated() {
            try db.execute(
                sql: "INSERT INTO mentor_action_item (position, id, text, done) VALUES (?, ?, ?, ?)",
                arguments: [position, item.id, item.text, item.done]
            )
        }
    }
}
