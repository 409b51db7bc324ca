#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import MentoryEngine
import MentoryStorage
import MentoryWire

/// Serves the `mentor` namespace: the day's mentor message, its character and its action items.
///
/// The latest `set` wins. A change is saved through a ``MentorStateStore`` first; only once the
/// store holds it does it become the current state and get published on the `mentor` topic, so a
/// failed save changes nothing and publishes nothing. A request that changes nothing (the same
/// message again, an item already done) succeeds without saving or publishing. A new subscriber
/// first gets the current state, so a change made while nobody listened is never lost.
public struct MentorHandler: MentoryHandler {
    /// The methods of the `mentor` namespace.
    public enum Method: String, CaseIterable, Sendable {
        case set
        case get
        case completeTodo
    }

    final class State: HandlerState {
        var current = Mentory_V1_MentorState()
        /// Ends when the last change started has been saved (or failed) and applied.
        var lastChange: Task<Void, Never>?
        init() {}
    }

    private let store: any MentorStateStore

    /// Creates the handler over `store`.
    public init(store: any MentorStateStore) {
        self.store = store
    }

    public var namespace: String { WireNames.mentor }
    public var methods: [String] { Method.allCases.map(\.rawValue) }
    public var topics: [String] { [WireNames.mentor] }

    public func open(engine: isolated MentoryEngine) async throws(MentoryError) {
        engine.state(State.self).current = try await self.store.loadMentorState()
    }

    public func handle(_ call: HandlerCall, engine: isolated MentoryEngine) async throws(MentoryError) -> Data {
        guard let method = Method(rawValue: call.method) else {
            throw .unknownMethod(namespace: self.namespace, method: call.method)
        }
        let state = engine.state(State.self)
        switch method {
        case .get:
            try call.requireEmptyBody()
            return state.current.wireBody()
        case .set:
            let request = try call.decode(Mentory_V1_MentorSetRequest.self)
            try Self.validate(request)
            let timestamp = engine.clock.nowUnixMilliseconds()
            return try await self.change(state: state, engine: engine) { current throws(MentoryError) in
                guard !Self.isSame(request, as: current) else { return nil }
                var updated = Mentory_V1_MentorState()
                updated.message = try Self.message(from: request, at: timestamp)
                return updated
            }
        case .completeTodo:
            let request = try call.decode(Mentory_V1_MentorCompleteTodoRequest.self)
            try FieldLimits.id.check(request.id, field: "id")
            let id = EntityID.normalized(request.id)
            let timestamp = engine.clock.nowUnixMilliseconds()
            return try await self.change(state: state, engine: engine) { current throws(MentoryError) in
                guard current.hasMessage, let index = current.message.actionItems.firstIndex(where: { $0.id == id })
                else {
                    throw .notFound("mentor action item \(FieldLimits.quoted(id))")
                }
                guard !current.message.actionItems[index].done else { return nil }
                var updated = current
                updated.message.actionItems[index].done = true
                updated.message.updatedAtUnixMs = timestamp
                return updated
            }
        }
    }

    public func snapshot(of topic: String, engine: isolated MentoryEngine) async throws(MentoryError) -> Data {
        engine.state(State.self).current.wireBody()
    }

    /// Runs one change after every change started before it has finished: `makeChange` derives
    /// the new state from the current one (`nil`: nothing changes), which is saved, then made
    /// current and published. Returns the state the reply carries.
    ///
    /// Changes wait for each other because each is computed from the saved state: a change built
    /// on one whose save then fails would otherwise save what the failed one had.
    private func change(
        state: State,
        engine: isolated MentoryEngine,
        _ makeChange: (Mentory_V1_MentorState) throws(MentoryError) -> Mentory_V1_MentorState?
    ) async throws(MentoryError) -> Data {
        let previous = state.lastChange
        let (finished, finish) = AsyncStream<Never>.makeStream()
        state.lastChange = Task { for await _ in finished {} }
        defer { finish.finish() }
        await previous?.value
        guard let updated = try makeChange(state.current) else {
            return state.current.wireBody()
        }
        try await self.store.saveMentorState(updated)
        state.current = updated
        engine.publish(updated, on: WireNames.mentor)
        return updated.wireBody()
    }

    /// Checks a set request against the rules and ``FieldLimits`` before it waits for its turn.
    static func validate(_ request: Mentory_V1_MentorSetRequest) throws(MentoryError) {
        guard !request.content.allSatisfy(\.isWhitespace) else {
            throw .invalidArgument("the mentor message's content is empty")
        }
        try FieldLimits.mentorContent.check(request.content)
        guard request.character == .cool || request.character == .warm else {
            throw .invalidArgument("the mentor character must be cool or warm")
        }
        _ = try ActionItems.normalized(request.actionItems)
    }

    /// Whether `request` asks for the message `current` already holds: the same content,
    /// character and action items (an item sent without an id matches the item at its place).
    static func isSame(_ request: Mentory_V1_MentorSetRequest, as current: Mentory_V1_MentorState) -> Bool {
        guard current.hasMessage else { return false }
        let message = current.message
        guard message.content == request.content, message.character == request.character,
            message.actionItems.count == request.actionItems.count
        else { return false }
        return zip(request.actionItems, message.actionItems).allSatisfy { asked, held in
            asked.text == held.text && asked.done == held.done
                && (asked.id.isEmpty || EntityID.normalized(asked.id) == held.id)
        }
    }

    static func message(
        from request: Mentory_V1_MentorSetRequest,
        at timestamp: Int64
    ) throws(MentoryError) -> Mentory_V1_MentorMessage {
        try self.validate(request)
        var message = Mentory_V1_MentorMessage()
        message.content = request.content
        message.character = request.character
        message.actionItems = try ActionItems.normalized(request.actionItems)
        message.updatedAtUnixMs = timestamp
        return message
    }
}
