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
/// The latest `set` wins. The state is saved through a ``MentorStateStore`` before a change is
/// acknowledged, and every change is published on the `mentor` topic; a new subscriber first gets
/// the current state, so a change made while nobody listened is never lost.
public struct MentorHandler: MentoryHandler {
    /// The methods of the `mentor` namespace.
    public enum Method: String, CaseIterable, Sendable {
        case set
        case get
        case completeTodo
    }

    final class State: HandlerState {
        var current = Mentory_V1_MentorState()
        var writes = OrderedWrites()
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
            return state.current.wireBody()
        case .set:
            let request = try call.decode(Mentory_V1_MentorSetRequest.self)
            let message = try Self.message(from: request, at: engine.clock.nowUnixMilliseconds())
            var updated = Mentory_V1_MentorState()
            updated.message = message
            return try await self.commit(updated, state: state, engine: engine)
        case .completeTodo:
            let request = try call.decode(Mentory_V1_MentorCompleteTodoRequest.self)
            guard state.current.hasMessage,
                let index = state.current.message.actionItems.firstIndex(where: { $0.id == request.id })
            else {
                throw .notFound("mentor action item '\(request.id)'")
            }
            var updated = state.current
            updated.message.actionItems[index].done = true
            updated.message.updatedAtUnixMs = engine.clock.nowUnixMilliseconds()
            return try await self.commit(updated, state: state, engine: engine)
        }
    }

    public func snapshot(of topic: String, engine: isolated MentoryEngine) async throws(MentoryError) -> Data {
        engine.state(State.self).current.wireBody()
    }

    /// Makes `updated` current, publishes it and returns once the store holds it.
    private func commit(
        _ updated: Mentory_V1_MentorState,
        state: State,
        engine: isolated MentoryEngine
    ) async throws(MentoryError) -> Data {
        state.current = updated
        engine.publish(updated, on: WireNames.mentor)
        let store = self.store
        let write = state.writes.enqueue { () async throws(MentoryError) in
            try await store.saveMentorState(updated)
        }
        try await write.value.get()
        return updated.wireBody()
    }

    static func message(
        from request: Mentory_V1_MentorSetRequest,
        at timestamp: Int64
    ) throws(MentoryError) -> Mentory_V1_MentorMessage {
        guard !request.content.allSatisfy(\.isWhitespace) else {
            throw .invalidArgument("the mentor message's content is empty")
        }
        guard request.character == .cool || request.character == .warm else {
            throw .invalidArgument("the mentor character must be cool or warm")
        }
        var message = Mentory_V1_MentorMessage()
        message.content = request.content
        message.character = request.character
        message.actionItems = try ActionItems.normalized(request.actionItems)
        message.updatedAtUnixMs = timestamp
        return message
    }
}
