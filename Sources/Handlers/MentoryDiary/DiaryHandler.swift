#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import MentoryDomain
import MentoryHandlerKit
import MentoryStorage
import MentoryWire

/// Serves the `diary` namespace: the user's entries, one per calendar day, each with an emotion
/// and action items.
///
/// Entries live in a ``DiaryStore``; a change is acknowledged only once the store holds it, and
/// then published on the `diary` topic. A request that changes nothing publishes nothing.
///
/// Every reply and snapshot fits a frame: `list` and the topic's snapshot stop adding entries
/// before their body would exceed the reply budget, and tell the client where to continue.
public struct DiaryHandler: MentoryHandler {
    public typealias Namespace = MentorySchema.Diary

    /// How many entries `list` returns when the request names no limit.
    public static let defaultListLimit = 50
    /// The most entries one `list` returns.
    public static let maxListLimit = 1000
    /// The most entries the `diary` topic's snapshot holds; a client pages the older ones with `list`.
    public static let defaultSnapshotLimit = 100
    /// How many entries a page reads from the store at a time.
    static let readChunk = 64
    /// Room kept in a reply body for its `next_before` field (a tag, a length and a date).
    static let cursorFieldBytes = 16

    private let store: any DiaryStore
    private let maxReplyBytes: Int
    private let snapshotLimit: Int

    /// Creates the handler over `store`.
    ///
    /// - Parameters:
    ///   - maxReplyBytes: the largest reply or snapshot body; pass
    ///     `ReplyBudget.bodyBytes(maxFrameLength:)` of the server's frame limit.
    ///   - snapshotLimit: the most entries a snapshot holds.
    public init(
        store: any DiaryStore,
        maxReplyBytes: Int = ReplyBudget.defaultBodyBytes,
        snapshotLimit: Int = DiaryHandler.defaultSnapshotLimit
    ) {
        self.store = store
        self.maxReplyBytes = maxReplyBytes
        self.snapshotLimit = max(1, snapshotLimit)
    }

    public func routes(_ routes: inout HandlerRoutes<Self>) {
        routes.onAsync(Namespace.add) { request, _, context in
            let entry = try Self.entry(from: request, now: context.clock.nowUnixMilliseconds())
            // Importing the same entry twice is a no-op; anything else under that id is a conflict.
            let outcome: DiaryInsertOutcome = try await reportingStorageErrors { () async throws(StorageError) in
                try await self.store.insert(entry)
            }
            if outcome == .inserted {
                context.publish(Self.change(.added(entry)), on: Namespace.diaryTopic)
            }
            return entry
        }
        routes.onAsync(Namespace.get) { request, _, _ in
            try await self.existingEntry(id: Self.lookupID(request.id, field: "id"))
        }
        routes.onAsync(Namespace.list) { request, _, _ in
            let limit = request.limit == 0 ? Self.defaultListLimit : Int(request.limit)
            guard limit <= Self.maxListLimit else {
                throw MentoryError.invalidArgument("list at most \(Self.maxListLimit) entries at a time, not \(limit)")
            }
            let before = request.hasBefore ? request.before : nil
            if let before, CalendarDay(before) == nil {
                throw MentoryError.invalidArgument(
                    "'before' must be a date written YYYY-MM-DD, not \(FieldLimits.quoted(before))")
            }
            let page = try await self.page(limit: limit, before: before)
            var reply = Mentory_V1_DiaryListReply()
            reply.entries = page.entries
            if let next = page.nextBefore { reply.nextBefore = next }
            return reply
        }
        routes.onAsync(Namespace.delete) { request, _, context in
            let id = try Self.lookupID(request.id, field: "id")
            let deleted: Mentory_V1_DiaryEntry? = try await reportingStorageErrors { () async throws(StorageError) in
                try await self.store.delete(id: id)
            }
            guard let deleted else {
                throw MentoryError.notFound("diary entry \(FieldLimits.quoted(id))")
            }
            context.publish(Self.change(.deletedID(deleted.id)), on: Namespace.diaryTopic)
            return deleted
        }
        routes.onAsync(Namespace.setSuggestionDone) { request, _, context in
            let entryID = try Self.lookupID(request.entryID, field: "entry_id")
            let itemID = try Self.lookupID(request.suggestionID, field: "suggestion_id")
            let update: DiaryActionItemUpdate = try await reportingStorageErrors { () async throws(StorageError) in
                try await self.store.setActionItemDone(entryID: entryID, itemID: itemID, done: request.done)
            }
            if update.changed {
                context.publish(Self.change(.updated(update.entry)), on: Namespace.diaryTopic)
            }
            return update.entry
        }
        routes.snapshot(Namespace.diaryTopic) { _ in
            try await self.snapshot()
        }
    }

    /// The newest entries, at most ``defaultSnapshotLimit`` (or the `snapshotLimit` given) and no
    /// more than fit the reply budget, with `next_before` set when older entries exist.
    nonisolated(nonsending) func snapshot() async throws -> Mentory_V1_DiarySnapshot {
        let page = try await self.page(limit: self.snapshotLimit, before: nil)
        var snapshot = Mentory_V1_DiarySnapshot()
        snapshot.entries = page.entries
        if let next = page.nextBefore { snapshot.nextBefore = next }
        return snapshot
    }

    /// Up to `limit` entries before `before`, newest first, as many as fit the reply budget, and
    /// the `before` of the next page when more entries follow.
    ///
    /// WORKAROUND (Swift 6.3.1, `-O`): called as an out-of-line function from the `list` route's
    /// `nonisolated(nonsending)` closure, the page came back corrupted from the second call on (a
    /// garbage `next_before` that crashed the release daemon on a repeated `diary.list`; the
    /// dispatch fuzzer found it). Inlined into its callers it is correct. `scripts/test.sh` runs
    /// the Python suite against the release build so that such a miscompile fails CI.
    @inline(__always)
    nonisolated(nonsending) func page(limit: Int, before: String?) async throws -> DiaryPage {
        let budget = self.maxReplyBytes - Self.cursorFieldBytes
        var entries: [Mentory_V1_DiaryEntry] = []
        var size = 0
        var cursor = before
        while true {
            let asked = min(limit - entries.count + 1, Self.readChunk)
            let fetched: [Mentory_V1_DiaryEntry] = try await reportingStorageErrors { () async throws(StorageError) in
                try await self.store.entries(limit: asked, before: cursor)
            }
            for entry in fetched {
                guard entries.count < limit else {
                    return DiaryPage(entries: entries, nextBefore: entries.last?.recordDate)
                }
                let entrySize = Self.fieldSize(of: entry)
                guard size + entrySize <= budget else {
                    guard let last = entries.last else {
                        throw MentoryError.internal(
                            "the diary entry for \(entry.recordDate) takes \(entrySize) bytes, more than a reply "
                                + "may hold (\(budget)); raise limits.maxFrameLength to at least "
                                + "\(ReplyBudget.minimumMaxFrameLength)"
                        )
                    }
                    return DiaryPage(entries: entries, nextBefore: last.recordDate)
                }
                entries.append(entry)
                size += entrySize
            }
            guard fetched.count == asked, let last = fetched.last else {
                return DiaryPage(entries: entries, nextBefore: nil)
            }
            cursor = last.recordDate
        }
    }

    /// The bytes `entry` takes as one element of a repeated message field: tag, length, message.
    static func fieldSize(of entry: Mentory_V1_DiaryEntry) -> Int {
        let length = (try? entry.serializedBytes() as [UInt8])?.count ?? Int.max / 2
        var varint = 1
        var rest = length >> 7
        while rest > 0 {
            varint += 1
            rest >>= 7
        }
        return 1 + varint + length
    }

    /// An id a request names, checked against its limit and in the store's canonical form.
    static func lookupID(_ id: String, field: String) throws(MentoryError) -> String {
        try FieldLimits.id.check(id, field: field)
        return EntityID.normalized(id)
    }

    private nonisolated(nonsending) func existingEntry(id: String) async throws(MentoryError) -> Mentory_V1_DiaryEntry {
        let stored: Mentory_V1_DiaryEntry? = try await reportingStorageErrors { () async throws(StorageError) in
            try await self.store.entry(id: id)
        }
        guard let entry = stored else {
            throw .notFound("diary entry \(FieldLimits.quoted(id))")
        }
        return entry
    }

    private static func change(_ change: Mentory_V1_DiaryChange.OneOf_Change) -> Mentory_V1_DiaryChange {
        var message = Mentory_V1_DiaryChange()
        message.change = change
        return message
    }

    /// Validates an add request and builds the entry it describes.
    static func entry(from request: Mentory_V1_DiaryAddRequest, now: Int64) throws(MentoryError)
        -> Mentory_V1_DiaryEntry
    {
        guard CalendarDay(request.recordDate) != nil else {
            throw .invalidArgument(
                "the record date must be a real day written YYYY-MM-DD, not \(FieldLimits.quoted(request.recordDate))"
            )
        }
        guard !request.title.allSatisfy(\.isWhitespace) else {
            throw .invalidArgument("the diary entry's title is empty")
        }
        try FieldLimits.diaryTitle.check(request.title)
        guard !request.text.allSatisfy(\.isWhitespace) else {
            throw .invalidArgument("the diary entry's text is empty")
        }
        try FieldLimits.diaryText.check(request.text)
        if request.hasAnalysis {
            try FieldLimits.diaryAnalysis.check(request.analysis)
        }
        guard request.emotion != .unspecified, case .some = Mentory_V1_Emotion(rawValue: request.emotion.rawValue),
            (1...7).contains(request.emotion.rawValue)
        else {
            throw .invalidArgument("the emotion must be one of the seven, from veryUnpleasant to veryPleasant")
        }
        var entry = Mentory_V1_DiaryEntry()
        // The random bits of every id this entry needs, drawn at once.
        var randomness = EntityID.Randomness(
            ids: (request.id.isEmpty ? 1 : 0) + ActionItems.missingIDs(in: request.actionItems))
        if request.id.isEmpty {
            entry.id = randomness.timeOrdered(unixMilliseconds: now)
        } else {
            try FieldLimits.id.check(request.id, field: "DiaryAddRequest.id")
            guard let id = EntityID.canonical(request.id) else {
                throw .invalidArgument("the entry id must be a UUID, not \(FieldLimits.quoted(request.id))")
            }
            entry.id = id
        }
        entry.recordDate = request.recordDate
        entry.createdAtUnixMs = request.createdAtUnixMs == 0 ? now : request.createdAtUnixMs
        entry.title = request.title
        entry.text = request.text
        entry.emotion = request.emotion
        if request.hasAnalysis {
            entry.analysis = request.analysis
        }
        entry.actionItems = try ActionItems.normalized(request.actionItems, randomness: &randomness)
        return entry
    }
}

/// One page of entries, newest first, and where the next page starts.
struct DiaryPage: Sendable {
    var entries: [Mentory_V1_DiaryEntry]
    /// The `before` of the next page; nil when no older entries exist.
    var nextBefore: String?
}
