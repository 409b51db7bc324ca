import MentoryDomain
import MentoryWire

/// A store that keeps everything in memory: for tests, and for a daemon run without a state directory.
///
/// By default the store is an actor of its own. Given the executor its callers run on (the daemon
/// passes the engine's event loop), it runs there instead: a call from that executor then does not
/// suspend or change thread, so a request batch that writes to the store is answered in one pass of
/// the loop and the events it publishes leave together.
public actor InMemorySessionStore: DiaryStore, MentorStateStore {
    /// Where the store's code runs.
    private enum Isolation: Sendable {
        /// On an executor of its own, borrowed from a plain actor.
        case own(OwnIsolation)
        /// On a caller's serial executor.
        case shared(any SerialExecutor)
    }

    /// A plain actor whose default executor the store borrows when it is given none.
    private actor OwnIsolation {}

    private let isolation: Isolation
    private var entriesByID: [String: Mentory_V1_DiaryEntry] = [:]
    private var idsByRecordDate: [String: String] = [:]
    /// Every record date, ascending, so a page is a binary search and a slice rather than a sort.
    private var recordDates: [String] = []
    private var mentorState = Mentory_V1_MentorState()
    private var writeFailure: StorageError?

    /// A store on an executor of its own.
    public init() {
        self.isolation = .own(OwnIsolation())
    }

    /// A store that runs on `executor`, which must be serial; callers already on it reach the store
    /// without a hop.
    public init(executor: any SerialExecutor) {
        self.isolation = .shared(executor)
    }

    public nonisolated var unownedExecutor: UnownedSerialExecutor {
        switch self.isolation {
        case .own(let actor): actor.unownedExecutor
        case .shared(let executor): executor.asUnownedSerialExecutor()
        }
    }

    /// Makes every later write fail with `failure` and change nothing, until called with `nil`:
    /// for tests of what a failed write must not do.
    public func failWrites(with failure: StorageError?) {
        self.writeFailure = failure
    }

    private func checkWritable() throws(StorageError) {
        if let failure = self.writeFailure { throw failure }
    }

    @discardableResult
    public func insert(_ entry: Mentory_V1_DiaryEntry) throws(StorageError) -> DiaryInsertOutcome {
        try self.checkWritable()
        if let existing = self.entriesByID[entry.id] {
            guard existing == entry else {
                throw .conflict("a different entry with id \(entry.id) already exists; delete it first to replace it")
            }
            return .alreadyPresent
        }
        if let existing = self.idsByRecordDate[entry.recordDate] {
            throw .conflict("there is already an entry for \(entry.recordDate) (id \(existing)); delete it first")
        }
        self.entriesByID[entry.id] = entry
        self.idsByRecordDate[entry.recordDate] = entry.id
        self.recordDates.insert(entry.recordDate, at: self.firstIndex(notBefore: entry.recordDate))
        return .inserted
    }

    public func entry(id: String) -> Mentory_V1_DiaryEntry? {
        self.entriesByID[id]
    }

    public func entries(limit: Int, before: String?) -> [Mentory_V1_DiaryEntry] {
        let end = before.map { self.firstIndex(notBefore: $0) } ?? self.recordDates.endIndex
        let start = max(self.recordDates.startIndex, end - max(limit, 0))
        return self.recordDates[start..<end].reversed().map { self.entriesByID[self.idsByRecordDate[$0]!]! }
    }

    public func delete(id: String) throws(StorageError) -> Mentory_V1_DiaryEntry? {
        try self.checkWritable()
        guard let entry = self.entriesByID.removeValue(forKey: id) else { return nil }
        self.idsByRecordDate[entry.recordDate] = nil
        self.recordDates.remove(at: self.firstIndex(notBefore: entry.recordDate))
        return entry
    }

    public func setActionItemDone(
        entryID: String,
        itemID: String,
        done: Bool
    ) throws(StorageError) -> DiaryActionItemUpdate {
        try self.checkWritable()
        guard var entry = self.entriesByID[entryID] else {
            throw .notFound("diary entry \(entryID)")
        }
        guard let index = entry.actionItems.firstIndex(where: { $0.id == itemID }) else {
            throw .notFound("action item \(itemID) of diary entry \(entryID)")
        }
        guard entry.actionItems[index].done != done else {
            return DiaryActionItemUpdate(entry: entry, changed: false)
        }
        entry.actionItems[index].done = done
        self.entriesByID[entryID] = entry
        return DiaryActionItemUpdate(entry: entry, changed: true)
    }

    public func loadMentorState() -> Mentory_V1_MentorState {
        self.mentorState
    }

    public func saveMentorState(_ state: Mentory_V1_MentorState) throws(StorageError) {
        try self.checkWritable()
        self.mentorState = state
    }

    /// Saves `state` at once when the caller runs on the executor this store was given (``init(executor:)``), as the
    /// engine's handlers do in the daemon: no suspension, no task. A store on an executor of its own, or a caller
    /// elsewhere, gets `false`, and saves through ``saveMentorState(_:)``.
    public nonisolated func saveMentorStateWithoutSuspending(
        _ state: Mentory_V1_MentorState
    ) throws(StorageError) -> Bool {
        guard case .shared(let executor) = self.isolation, executor.isIsolatingCurrentContext() == true else {
            return false
        }
        try self.saveMentorStateIsolatedAlready(state)
        return true
    }

    /// Saves `state`, isolated to this store, for a caller that the store's executor has just said is isolated to
    /// it (``saveMentorStateWithoutSuspending(_:)``): what `Actor.assumeIsolated` does, without its second executor
    /// check and the two allocations its generic closure costs on every change.
    private nonisolated func saveMentorStateIsolatedAlready(_ state: Mentory_V1_MentorState) throws(StorageError) {
        let isolated: (isolated InMemorySessionStore, Mentory_V1_MentorState) throws(StorageError) -> Void = {
            try $0.saveMentorState($1)
        }
        // SAFETY: calling the store-isolated save as a non-isolated one is sound on the store's executor alone, and
        // the caller is on it: the only caller checked that the store runs on a shared executor (its
        // `unownedExecutor`) whose `isIsolatingCurrentContext()` answered `true`, just before, on this thread.
        // Nothing escapes.
        let plain = unsafeBitCast(
            isolated, to: ((InMemorySessionStore, Mentory_V1_MentorState) throws(StorageError) -> Void).self)
        try plain(self, state)
    }

    /// The index of the first record date that is not before `date` (binary search).
    private func firstIndex(notBefore date: String) -> Int {
        var low = self.recordDates.startIndex
        var high = self.recordDates.endIndex
        while low < high {
            let middle = (low + high) / 2
            if self.recordDates[middle] < date {
                low = middle + 1
            } else {
                high = middle
            }
        }
        return low
    }
}
