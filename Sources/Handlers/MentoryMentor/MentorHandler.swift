#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import MentoryDomain
import MentoryHandlerKit
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
    public typealias Namespace = MentorySchema.Mentor

    /// The current mentor state and the changes waiting to be saved.
    public final class State {
        var current: Mentory_V1_MentorState
        /// Whether a change is being saved; while one is, the next wait in ``waitingChanges``.
        var changing = false
        /// Changes waiting for their turn, oldest first. At most one per request in flight, which
        /// the server bounds.
        var waitingChanges: [CheckedContinuation<Void, Never>] = []

        init(current: Mentory_V1_MentorState) {
            self.current = current
        }

        /// Waits until every change started before this one has finished, then holds the turn.
        nonisolated(nonsending) func takeTurn() async {
            guard self.changing else {
                self.changing = true
                return
            }
            await withCheckedContinuation { self.waitingChanges.append($0) }
        }

        /// Passes the turn to the oldest waiting change, if any.
        func endTurn() {
            if self.waitingChanges.isEmpty {
                self.changing = false
            } else {
                self.waitingChanges.removeFirst().resume()
            }
        }
    }

    private let store: any MentorStateStore

    /// Creates the handler over `store`.
    public init(store: any MentorStateStore) {
        self.store = store
    }

    public func open(_ setup: HandlerSetup) async throws -> sending State {
        let current = try await reportingStorageErrors { () async throws(StorageError) in
            try await self.store.loadMentorState()
        }
        return State(current: current)
    }

    public func routes(_ routes: inout HandlerRoutes<Self>) {
        routes.on(Namespace.get) { _, _, context in
            context.state.current
        }
        // A change is attempted without a task first: on a store in memory, when no other change holds the turn,
        // nothing suspends.
        routes.onAsync(
            Namespace.set,
            attempt: { request, _, context in
                try self.changeWithoutSuspending(context, Change.set(request, at: context.clock.nowUnixMilliseconds()))
            }
        ) { request, _, context in
            // Checked and built before the request waits for its turn.
            try await self.change(context, Change.set(request, at: context.clock.nowUnixMilliseconds()))
        }
        routes.onAsync(
            Namespace.completeTodo,
            attempt: { request, _, context in
                try self.changeWithoutSuspending(
                    context, Change.completeTodo(request, at: context.clock.nowUnixMilliseconds()))
            }
        ) { request, _, context in
            try await self.change(context, Change.completeTodo(request, at: context.clock.nowUnixMilliseconds()))
        }
        routes.snapshot(Namespace.mentorTopic) { context in
            context.state.current
        }
    }

    /// A change a request asks for: checked and built before it waits for its turn, and applied to the state
    /// current when its turn comes.
    enum Change {
        /// `set`: the message `request` asks for, built.
        case set(Mentory_V1_MentorSetRequest, message: Mentory_V1_MentorMessage)
        /// `complete_todo`: the action item `id` is done, at `timestamp`.
        case completeTodo(id: String, timestamp: Int64)

        /// Checks and builds a set request's change, made at `timestamp`.
        static func set(_ request: Mentory_V1_MentorSetRequest, at timestamp: Int64) throws(MentoryError) -> Change {
            .set(request, message: try MentorHandler.message(from: request, at: timestamp))
        }

        /// Checks a complete-todo request's change, made at `timestamp`.
        static func completeTodo(
            _ request: Mentory_V1_MentorCompleteTodoRequest, at timestamp: Int64
        ) throws(MentoryError) -> Change {
            try FieldLimits.id.check(request.id, field: "id")
            return .completeTodo(id: EntityID.normalized(request.id), timestamp: timestamp)
        }

        /// The state after this change, from `current`; `nil` when nothing changes.
        func applied(to current: Mentory_V1_MentorState) throws(MentoryError) -> Mentory_V1_MentorState? {
            switch self {
            case .set(let request, let message):
                guard !MentorHandler.isSame(request, as: current) else { return nil }
                var updated = Mentory_V1_MentorState()
                updated.message = message
                return updated
            case .completeTodo(let id, let timestamp):
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

    /// Runs `change` after every change started before it has finished: the new state it makes of the current
    /// one (if any) is saved, then made current and published. Returns the state the reply carries, serialized
    /// (once, for the reply and the event, when it changed).
    ///
    /// Changes wait for each other because each is computed from the saved state: a change built
    /// on one whose save then fails would otherwise save what the failed one had.
    private nonisolated(nonsending) func change(
        _ context: HandlerContext<Self>, _ change: Change
    ) async throws(MentoryError) -> Serialized<Mentory_V1_MentorState> {
        let state = context.state
        await state.takeTurn()
        defer { state.endTurn() }
        guard let updated = try change.applied(to: state.current) else {
            return Serialized(state.current)
        }
        try await reportingStorageErrors { () async throws(StorageError) in
            try await self.store.saveMentorState(updated)
        }
        state.current = updated
        return context.publish(updated, on: Namespace.mentorTopic)
    }

    /// Runs `change` as ``change(_:_:)`` does, if it can without suspending: no other change holds the turn (it
    /// would wait for it) and the store saves without suspending. Returns `nil`, having changed nothing, when it
    /// cannot.
    private func changeWithoutSuspending(
        _ context: HandlerContext<Self>, _ change: Change
    ) throws(MentoryError) -> Serialized<Mentory_V1_MentorState>? {
        let state = context.state
        guard !state.changing else { return nil }
        guard let updated = try change.applied(to: state.current) else {
            return Serialized(state.current)
        }
        let saved = try reportingStorageErrors { () throws(StorageError) in
            try self.store.saveMentorStateWithoutSuspending(updated)
        }
        guard saved else { return nil }
        state.current = updated
        return context.publish(updated, on: Namespace.mentorTopic)
    }

    /// Checks a set request's content and character against the rules and ``FieldLimits`` (its action
    /// items are checked as ``message(from:at:)`` normalizes them).
    static func validate(_ request: Mentory_V1_MentorSetRequest) throws(MentoryError) {
        guard !Self.isBlank(request.content) else {
            throw .invalidArgument("the mentor message's content is empty")
        }
        try FieldLimits.mentorContent.check(request.content)
        guard request.character == .cool || request.character == .warm else {
            throw .invalidArgument("the mentor character must be cool or warm")
        }
    }

    /// Whether `text` is empty or only whitespace: whether every character is whitespace, as
    /// `Character.isWhitespace` says (its first scalar has the Unicode White_Space property).
    ///
    /// Read a scalar at a time while the text is ASCII, with no Unicode property looked up: an ASCII scalar
    /// that is not whitespace, coming after ASCII whitespace only, starts a character of its own, so the text is
    /// not blank. At the first scalar beyond ASCII, the characters decide.
    package static func isBlank(_ text: String) -> Bool {
        for scalar in text.unicodeScalars {
            switch scalar.value {
            case 0x09...0x0D, 0x20: continue
            case 0..<0x80: return false
            default: return text.allSatisfy(\.isWhitespace)
            }
        }
        return true
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
