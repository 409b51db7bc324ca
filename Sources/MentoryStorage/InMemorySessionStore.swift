import MentoryWire

/// A store that keeps everything in memory: for tests, and for a daemon run without a state directory.
public actor InMemorySessionStore: DiaryStore, MentorStateStore {
    private var entriesByID: [String: Mentory_V1_DiaryEntry] = [:]
    private var idsByRecordDate: [String: String] = [:]
    private var mentorState = Mentory_V1_MentorState()

    public init() {}

    public func insert(_ entry: Mentory_V1_DiaryEntry) throws(MentoryError) {
        if self.entriesByID[entry.id] != nil {
            throw .conflict("an entry with id \(entry.id) already exists")
        }
        if let existing = self.idsByRecordDate[entry.recordDate] {
            throw .conflict("there is already an entry for \(entry.recordDate) (id \(existing)); delete it first")
        }
        self.entriesByID[entry.id] = entry
        self.idsByRecordDate[entry.recordDate] = entry.id
    }

    public func entry(id: String) -> Mentory_V1_DiaryEntry? {
        self.entriesByID[id]
    }

    public func entries(limit: Int, before: String?) -> [Mentory_V1_DiaryEntry] {
        let dates = self.idsByRecordDate.keys
            .filter { before == nil || $0 < before! }
            .sorted(by: >)
            .prefix(limit)
        return dates.map { self.entriesByID[self.idsByRecordDate[$0]!]! }
    }

    public func delete(id: String) -> Mentory_V1_DiaryEntry? {
        guard let entry = self.entriesByID.removeValue(forKey: id) else { return nil }
        self.idsByRecordDate[entry.recordDate] = nil
        return entry
    }

    public func setActionItemDone(
        entryID: String,
        itemID: String,
        done: Bool
    ) throws(MentoryError) -> Mentory_V1_DiaryEntry {
        guard var entry = self.entriesByID[entryID] else {
            throw .notFound("diary entry \(entryID)")
        }
        guard let index = entry.actionItems.firstIndex(where: { $0.id == itemID }) else {
            throw .notFound("action item \(itemID) of diary entry \(entryID)")
        }
        entry.actionItems[index].done = done
        self.entriesByID[entryID] = entry
        return entry
    }

    public func loadMentorState() -> Mentory_V1_MentorState {
        self.mentorState
    }

    public func saveMentorState(_ state: Mentory_V1_MentorState) {
        self.mentorState = state
    }
}
