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
        routes.onAsync(Namespace.set) { request, _, context in
            // Checked and built before the request waits for its turn.
            let message = try Self.message(from: request, at: context.clock.nowUnixMilliseconds())
            return try await self.change(context) { current throws(MentoryError) in
                guard !Self.isSame(request, as: current) else { return nil }
                var updated = Mentory_V1_MentorState()
                updated.message = message
                return updated
            }
        }
        routes.onAsync(Namespace.completeTodo) { request, _, context in
            try FieldLimits.id.check(request.id, field: "id")
            let id = EntityID.normalized(request.id)
            let timestamp = context.clock.nowUnixMilliseconds()
            return try await self.change(context) { current throws(MentoryError) in
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
        routes.snapshot(Namespace.mentorTopic) { context in
            context.state.current
        }
    }

    /// Runs one change after every change started before it has finished: `makeChange` derives
    /// the new state from the current one (`nil`: nothing changes), which is saved, then made
    /// current and published. Returns the state the reply carries.
    ///
    /// Changes wait for each other because each is computed from the saved state: a change built
    /// on one whose save then fails would otherwise save what the failed one had.
    private nonisolated(nonsending) func change(
        _ context: HandlerContext<Self>,
        _ makeChange: (Mentory_V1_MentorState) throws(MentoryError) -> Mentory_V1_MentorState?
    ) async throws(MentoryError) -> Mentory_V1_MentorState {
        let state = context.state
        await state.takeTurn()
        defer { state.endTurn() }
        guard let updated = try makeChange(state.current) else {
            return state.current
        }
        try await reportingStorageErrors { () async throws(StorageError) in
            try await self.store.saveMentorState(updated)
        }
        state.current = updated
        context.publish(updated, on: Namespace.mentorTopic)
        return updated
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
