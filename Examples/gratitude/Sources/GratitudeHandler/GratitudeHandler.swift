import MentoryHandlerKit

/// Serves the `gratitude` namespace: things the user is grateful for, kept in memory, and the
/// pleasant moments of the caller's own diary.
///
/// The whole handler: its schema is `gratitude.proto` (`GratitudeSchema`, in `Generated/`, is
/// generated from it), its configuration lives under `handlers.gratitude` (`maxNotes`,
/// default 100, changed by a reload), and it calls the `diary` namespace on its callers' behalf,
/// so it requires it: it opens after the diary handler and closes before it.
public struct GratitudeHandler: MentoryHandler {
    public typealias Namespace = GratitudeSchema.Gratitude

    /// The notes and the limit in force.
    public final class State {
        var notes: [Gratitude_V1_GratitudeNote] = []
        var nextNumber: UInt64 = 1
        var maxNotes: Int

        init(maxNotes: Int) {
            self.maxNotes = maxNotes
        }
    }

    /// The longest note accepted, in UTF-8 bytes.
    public static let maxTextBytes = 280

    /// The emotions of the diary entries `fromDiary` returns.
    public static let pleasant: Set<Mentory_V1_Emotion> = [.slightlyPleasant, .pleasant, .veryPleasant]

    public init() {}

    public var requires: [String] { ["diary"] }

    public func open(_ setup: HandlerSetup) async throws -> sending State {
        State(maxNotes: try Self.maxNotes(setup.config.int(forKey: "maxNotes", default: 100)))
    }

    public func routes(_ routes: inout HandlerRoutes<Self>) {
        routes.on(Namespace.add) { request, _, context in
            let text = request.text
            guard !text.allSatisfy(\.isWhitespace) else { throw GratitudeError.empty }
            guard text.utf8.count <= Self.maxTextBytes else { throw GratitudeError.tooLong(text.utf8.count) }
            let state = context.state
            var note = Gratitude_V1_GratitudeNote()
            note.number = state.nextNumber
            note.text = text
            note.addedAtUnixMs = context.clock.nowUnixMilliseconds()
            state.nextNumber += 1
            state.notes.append(note)
            if state.notes.count > state.maxNotes { state.notes.removeFirst(state.notes.count - state.maxNotes) }
            context.publish(note, on: Namespace.gratitudeTopic)
            return note
        }
        routes.on(Namespace.list) { _, _, context in
            Self.list(context.state)
        }
        routes.onAsync(Namespace.fromDiary) { request, call, context in
            // The diary's list, as the caller: a caller denied `diary.*` gets PERMISSION_DENIED.
            var list = Mentory_V1_DiaryListRequest()
            list.limit = request.limit
            let diary = try await context.call(MentorySchema.Diary.list, list, for: call)
            var reply = Gratitude_V1_GratitudeFromDiaryReply()
            reply.texts = diary.entries.filter { Self.pleasant.contains($0.emotion) }.map(\.text)
            return reply
        }
        routes.snapshot(Namespace.gratitudeTopic) { context in
            Self.list(context.state)
        }
    }

    public func reload(context: HandlerContext<Self>) throws {
        context.state.maxNotes = try Self.maxNotes(context.config.int(forKey: "maxNotes", default: 100))
    }

    private static func list(_ state: State) -> Gratitude_V1_GratitudeListReply {
        var reply = Gratitude_V1_GratitudeListReply()
        reply.notes = state.notes
        return reply
    }

    /// A configuration error names the key: start-up exits 78, a reload keeps the previous limit.
    private static func maxNotes(_ value: Int) throws(HandlerConfigurationError) -> Int {
        guard (1...10_000).contains(value) else {
            throw .init(key: "maxNotes", message: "must be 1 to 10000, not \(value)")
        }
        return value
    }
}

/// Why a gratitude call failed, with a stable reason of this namespace's own.
public enum GratitudeError: HandlerError, Equatable {
    case empty
    case tooLong(Int)

    public var code: Mentory_V1_ErrorCode { .invalidArgument }

    public var reason: String {
        switch self {
        case .empty: "empty_note"
        case .tooLong: "note_too_long"
        }
    }

    public var message: String {
        switch self {
        case .empty: "the note is empty; say what you are grateful for"
        case .tooLong(let bytes): "the note takes \(bytes) bytes; keep it to \(GratitudeHandler.maxTextBytes)"
        }
    }
}
