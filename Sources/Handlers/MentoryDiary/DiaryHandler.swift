#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import MentoryEngine
import MentoryStorage
import MentoryWire

/// Serves the `diary` namespace: the user's entries, one per calendar day, each with an emotion
/// and action items.
///
/// Entries live in a ``DiaryStore``; a change is acknowledged only once the store holds it, and
/// then published on the `diary` topic.
public struct DiaryHandler: MentoryHandler {
    /// The methods of the `diary` namespace.
    public enum Method: String, CaseIterable, Sendable {
        case add
        case get
        case list
        case delete
        case setSuggestionDone
    }

    /// How many entries `list` returns when the request names no limit.
    public static let defaultListLimit = 50
    /// The most entries one `list` returns.
    public static let maxListLimit = 1000

    private let store: any DiaryStore

    /// Creates the handler over `store`.
    public init(store: any DiaryStore) {
        self.store = store
    }

    public var namespace: String { WireNames.diary }
    public var methods: [String] { Method.allCases.map(\.rawValue) }
    public var topics: [String] { [WireNames.diary] }

    public func handle(_ call: HandlerCall, engine: isolated MentoryEngine) async throws(MentoryError) -> Data {
        guard let method = Method(rawValue: call.method) else {
            throw .unknownMethod(namespace: self.namespace, method: call.method)
        }
        switch method {
        case .add:
            let request = try call.decode(Mentory_V1_DiaryAddRequest.self)
            let entry = try Self.entry(from: request, now: engine.clock.nowUnixMilliseconds())
            if !request.id.isEmpty, let existing = try await self.store.entry(id: request.id) {
                // Importing the same entry twice is a no-op; anything else under that id is a conflict.
                guard existing == entry else {
                    throw .conflict("a different entry with id \(request.id) already exists")
                }
                return existing.wireBody()
            }
            try await self.store.insert(entry)
            engine.publish(Self.change(.added(entry)), on: WireNames.diary)
            return entry.wireBody()
        case .get:
            let request = try call.decode(Mentory_V1_DiaryGetRequest.self)
            return try await self.existingEntry(id: request.id).wireBody()
        case .list:
            let request = try call.decode(Mentory_V1_DiaryListRequest.self)
            let limit = request.limit == 0 ? Self.defaultListLimit : Int(request.limit)
            guard limit <= Self.maxListLimit else {
                throw .invalidArgument("list at most \(Self.maxListLimit) entries at a time")
            }
            let before = request.hasBefore ? request.before : nil
            if let before, CalendarDay(before) == nil {
                throw .invalidArgument("'before' must be a date written YYYY-MM-DD, not '\(before)'")
            }
            var reply = Mentory_V1_DiaryListReply()
            reply.entries = try await self.store.entries(limit: limit, before: before)
            return reply.wireBody()
        case .delete:
            let request = try call.decode(Mentory_V1_DiaryDeleteRequest.self)
            guard let deleted = try await self.store.delete(id: request.id) else {
                throw .notFound("diary entry '\(request.id)'")
            }
            engine.publish(Self.change(.deletedID(deleted.id)), on: WireNames.diary)
            return deleted.wireBody()
        case .setSuggestionDone:
            let request = try call.decode(Mentory_V1_DiarySuggestionDoneRequest.self)
            let updated = try await self.store.setActionItemDone(
                entryID: request.entryID,
                itemID: request.suggestionID,
                done: request.done
            )
            engine.publish(Self.change(.updated(updated)), on: WireNames.diary)
            return updated.wireBody()
        }
    }

    public func snapshot(of topic: String, engine: isolated MentoryEngine) async throws(MentoryError) -> Data {
        var snapshot = Mentory_V1_DiarySnapshot()
        snapshot.entries = try await self.store.entries(limit: .max, before: nil)
        return snapshot.wireBody()
    }

    private func existingEntry(id: String) async throws(MentoryError) -> Mentory_V1_DiaryEntry {
        guard let entry = try await self.store.entry(id: id) else {
            throw .notFound("diary entry '\(id)'")
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
            throw .invalidArgument("the record date must be a real day written YYYY-MM-DD, not '\(request.recordDate)'")
        }
        guard !request.title.allSatisfy(\.isWhitespace) else {
            throw .invalidArgument("the diary entry's title is empty")
        }
        guard !request.text.allSatisfy(\.isWhitespace) else {
            throw .invalidArgument("the diary entry's text is empty")
        }
        guard request.emotion != .unspecified, case .some = Mentory_V1_Emotion(rawValue: request.emotion.rawValue),
            (1...7).contains(request.emotion.rawValue)
        else {
            throw .invalidArgument("the emotion must be one of the seven, from veryUnpleasant to veryPleasant")
        }
        var entry = Mentory_V1_DiaryEntry()
        if request.id.isEmpty {
            entry.id = UUID().uuidString.lowercased()
        } else {
            guard let id = UUID(uuidString: request.id) else {
                throw .invalidArgument("the entry id must be a UUID, not '\(request.id)'")
            }
            entry.id = id.uuidString.lowercased()
        }
        entry.recordDate = request.recordDate
        entry.createdAtUnixMs = request.createdAtUnixMs == 0 ? now : request.createdAtUnixMs
        entry.title = request.title
        entry.text = request.text
        entry.emotion = request.emotion
        if request.hasAnalysis {
            entry.analysis = request.analysis
        }
        entry.actionItems = try ActionItems.normalized(request.actionItems)
        return entry
    }
}
