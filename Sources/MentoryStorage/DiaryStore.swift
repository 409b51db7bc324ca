import MentoryWire

/// Where diary entries live. The diary handler reaches entries only through this protocol.
public protocol DiaryStore: Sendable {
    /// Stores a new entry.
    ///
    /// Throws ``MentoryError/conflict(_:)`` when an entry with the same id or the same record date exists.
    func insert(_ entry: Mentory_V1_DiaryEntry) async throws(MentoryError)

    /// The entry with `id`, or `nil`.
    func entry(id: String) async throws(MentoryError) -> Mentory_V1_DiaryEntry?

    /// Up to `limit` entries with a record date before `before` (all when `nil`), newest record date first.
    func entries(limit: Int, before: String?) async throws(MentoryError) -> [Mentory_V1_DiaryEntry]

    /// Removes and returns the entry with `id`, or returns `nil` when there is none.
    func delete(id: String) async throws(MentoryError) -> Mentory_V1_DiaryEntry?

    /// Sets the done flag of one action item and returns the updated entry.
    func setActionItemDone(
        entryID: String,
        itemID: String,
        done: Bool
    ) async throws(MentoryError) -> Mentory_V1_DiaryEntry
}

/// Where the mentor's latest message lives between restarts.
public protocol MentorStateStore: Sendable {
    /// The last saved state; empty when nothing was ever saved.
    func loadMentorState() async throws(MentoryError) -> Mentory_V1_MentorState

    /// Replaces the saved state; returns once it is stored.
    func saveMentorState(_ state: Mentory_V1_MentorState) async throws(MentoryError)
}
