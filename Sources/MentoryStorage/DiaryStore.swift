import MentoryDomain
import MentoryWire

/// What ``DiaryStore/insert(_:)`` did.
public enum DiaryInsertOutcome: Sendable, Equatable {
    /// The entry was stored.
    case inserted
    /// An identical entry with the same id was already stored; nothing changed.
    case alreadyPresent
}

/// What ``DiaryStore/setActionItemDone(entryID:itemID:done:)`` did.
public struct DiaryActionItemUpdate: Sendable, Equatable {
    /// The entry as stored afterwards.
    public var entry: Mentory_V1_DiaryEntry
    /// Whether the flag changed; `false` when the item already had it.
    public var changed: Bool

    public init(entry: Mentory_V1_DiaryEntry, changed: Bool) {
        self.entry = entry
        self.changed = changed
    }
}

/// Where diary entries live. The diary handler reaches entries only through this protocol.
///
/// Ids are compared exactly: callers pass them in canonical form (``EntityID/normalized(_:)``).
///
/// The methods are `nonisolated(nonsending)`: they start on the caller's executor (the engine's
/// event loop), so that a durable store hops once to its database connection and once back, and
/// not through the global executor on the way.
public protocol DiaryStore: Sendable {
    /// Stores a new entry, deciding in one step (one transaction) whether it may.
    ///
    /// An entry identical to the stored one with the same id is ``DiaryInsertOutcome/alreadyPresent``,
    /// so that repeating an import, even concurrently, succeeds. Throws ``StorageError/conflict(_:)``
    /// when a different entry has the same id, or another entry has the same record date.
    @discardableResult
    nonisolated(nonsending) func insert(_ entry: Mentory_V1_DiaryEntry) async throws(StorageError) -> DiaryInsertOutcome

    /// The entry with `id`, or `nil`.
    nonisolated(nonsending) func entry(id: String) async throws(StorageError) -> Mentory_V1_DiaryEntry?

    /// Up to `limit` entries with a record date before `before` (all when `nil`), newest record date first.
    nonisolated(nonsending) func entries(limit: Int, before: String?) async throws(StorageError)
        -> [Mentory_V1_DiaryEntry]

    /// Removes and returns the entry with `id`, or returns `nil` when there is none.
    nonisolated(nonsending) func delete(id: String) async throws(StorageError) -> Mentory_V1_DiaryEntry?

    /// Sets the done flag of one action item; writes nothing when it already has that value.
    nonisolated(nonsending) func setActionItemDone(
        entryID: String,
        itemID: String,
        done: Bool
    ) async throws(StorageError) -> DiaryActionItemUpdate
}

/// Where the mentor's latest message lives between restarts.
public protocol MentorStateStore: Sendable {
    /// The last saved state; empty when nothing was ever saved.
    nonisolated(nonsending) func loadMentorState() async throws(StorageError) -> Mentory_V1_MentorState

    /// Replaces the saved state; returns once it is stored.
    nonisolated(nonsending) func saveMentorState(_ state: Mentory_V1_MentorState) async throws(StorageError)

    /// Replaces the saved state without suspending, if this store can from where it is called: `true` once it is
    /// stored, `false` (storing nothing) when the caller must call ``saveMentorState(_:)`` instead. Throws what
    /// ``saveMentorState(_:)`` would.
    ///
    /// A store in memory running on the caller's executor can; a store on disk cannot, and keeps the default,
    /// which always answers `false`.
    func saveMentorStateWithoutSuspending(_ state: Mentory_V1_MentorState) throws(StorageError) -> Bool
}

extension MentorStateStore {
    /// Never without suspending: ``saveMentorState(_:)`` stores the state.
    public func saveMentorStateWithoutSuspending(_ state: Mentory_V1_MentorState) throws(StorageError) -> Bool {
        false
    }
}
