import Foundation
import GRDB
import MentoryDomain
import MentoryStorage
import MentoryStorageSQLite
import MentoryWire

/// Makes a fresh directory under the temporary directory; the caller removes it.
func makeTemporaryDirectory() throws -> String {
    var template = Array((NSTemporaryDirectory() + "/mentory-sqlite-tests.XXXXXX").utf8CString)
    let path = template.withUnsafeMutableBufferPointer { buffer -> String? in
        guard let result = mkdtemp(buffer.baseAddress!) else { return nil }
        return String(cString: result)
    }
    guard let path else { throw FixtureError("mkdtemp failed: \(String(cString: strerror(errno)))") }
    return path
}

/// Runs `body` with a fresh directory under the temporary directory, removed afterwards.
func withTemporaryDirectory<T>(_ body: (String) async throws -> T) async throws -> T {
    let path = try makeTemporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: path) }
    return try await body(path)
}

struct FixtureError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Opens the store at `directory/mentoryd.sqlite`.
func openStore(
    _ directory: String,
    configure: (inout SQLiteSessionStore.Configuration) -> Void = { _ in }
) throws(StorageError) -> SQLiteSessionStore {
    var configuration = SQLiteSessionStore.Configuration(path: directory + "/mentoryd.sqlite")
    configure(&configuration)
    return try SQLiteSessionStore(configuration: configuration)
}

/// A complete entry for `recordDate`, with an analysis and three action items.
func makeEntry(
    _ recordDate: String,
    id: String = UUID().uuidString.lowercased(),
    analysis: String? = "Sounds like a good day.",
    items: Int = 3
) -> Mentory_V1_DiaryEntry {
    var entry = Mentory_V1_DiaryEntry()
    entry.id = id
    entry.recordDate = recordDate
    entry.createdAtUnixMs = 1_700_000_000_123
    entry.title = "Title for \(recordDate) — ünïcødé ✓"
    entry.text = "Line one\nLine two with 'quotes' and \"double quotes\"; DROP TABLE diary_entry; --"
    entry.emotion = .slightlyPleasant
    if let analysis { entry.analysis = analysis }
    entry.actionItems = (0..<items).map { index in
        var item = Mentory_V1_ActionItem()
        item.id = "item-\(index)"
        item.text = "Do thing \(index)"
        item.done = index == 1
        return item
    }
    return entry
}

/// The calendar day `index` days after 2000-01-01.
func day(_ index: Int) -> String {
    var components = DateComponents()
    components.year = 2000
    components.month = 1
    components.day = 1 + index
    var calendar = Calendar(identifier: .gregorian)
    calendar.timeZone = TimeZone(identifier: "UTC")!
    let date = calendar.date(from: components)!
    let parts = calendar.dateComponents([.year, .month, .day], from: date)
    return CalendarDay(year: parts.year!, month: parts.month!, day: parts.day!)!.description
}

/// A mentor state with a message and action items.
func makeMentorState(_ content: String, doneItems: Set<Int> = []) -> Mentory_V1_MentorState {
    var message = Mentory_V1_MentorMessage()
    message.content = content
    message.character = .warm
    message.updatedAtUnixMs = 1_700_000_000_999
    message.actionItems = (0..<3).map { index in
        var item = Mentory_V1_ActionItem()
        item.id = "mentor-\(index)"
        item.text = "Mentor step \(index)"
        item.done = doneItems.contains(index)
        return item
    }
    var state = Mentory_V1_MentorState()
    state.message = message
    return state
}

/// Runs `body` on a plain GRDB connection to the database file (for inspecting the schema).
func inspect<T>(_ path: String, _ body: (Database) throws -> T) throws -> T {
    let queue = try DatabaseQueue(path: path)
    defer { try? queue.close() }
    return try queue.read(body)
}

/// The error `body` threw, or `nil`.
func storageError<T>(_ body: () async throws(StorageError) -> T) async -> StorageError? {
    do {
        _ = try await body()
        return nil
    } catch {
        return error
    }
}

extension StorageError {
    /// The storage failure's message, or `nil` for another error.
    var storageFailureReason: String? {
        guard case .failed(let reason) = self else { return nil }
        return reason
    }
}
