import MentoryDomain
import MentoryEngine
import MentoryHandlerKit
import MentoryMentor
import MentoryStorage
import MentoryWire
import NIOCore
import SwiftProtobuf
import Synchronization
import Testing

/// `inline.now` is an async route that never suspends.
enum InlineSchema: NamespaceSchema {
    static let name = "inline"
    static let version: UInt32 = 1
    static let now = MethodSchema<InlineSchema, Mentory_V1_Empty, Mentory_V1_Empty>(name: "now")
    static let methods: [MethodInfo] = [now.info]
    static let topics: [TopicInfo] = []
    static var fileDescriptors: SchemaDescriptors { MentoryDomainSchema.fileDescriptors }
}

struct InlineHandler: MentoryHandler {
    typealias Namespace = InlineSchema

    func routes(_ routes: inout HandlerRoutes<Self>) {
        routes.onAsync(Namespace.now) { _, _, _ in Mentory_V1_Empty() }
    }
}

/// A connection's sink that keeps the ids of the responses it is sent, in order.
final class AnswerSink: EventSink {
    let stream: AsyncStream<UInt64>
    private let continuation: AsyncStream<UInt64>.Continuation
    let answered = Atomic<Int>(0)

    init() {
        (self.stream, self.continuation) = AsyncStream.makeStream(of: UInt64.self)
    }

    func answer(_ response: consuming OutboundResponse) {
        self.answered.add(1, ordering: .relaxed)
        self.continuation.yield(response.id)
    }

    func deliver(_ event: SharedEvent) -> Bool { true }

    /// The ids of the next `count` responses.
    func next(_ count: Int) async -> [UInt64] {
        var ids: [UInt64] = []
        for await id in self.stream {
            ids.append(id)
            if ids.count == count { break }
        }
        return ids
    }
}

@Suite("Requests whose route may suspend start inline", .timeLimit(.minutes(2)))
struct InlineRequestTests {
    private static func connect(_ fixture: EngineFixture) async -> (ConnectionID, AnswerSink) {
        let sink = AnswerSink()
        let id = ConnectionID(1_000)
        _ = await fixture.engine.attach(ConnectionContext(id: id, clientName: "inline", credentials: nil), sink: sink)
        return (id, sink)
    }

    @Test("an async route that does not suspend is answered at once, and leaves no task running")
    func answeredInline() async throws {
        let fixture = try await EngineFixture()
        try await fixture.engine.register(InlineHandler())
        let (client, sink) = await Self.connect(fixture)
        for id in UInt64(1)...3 {
            let outcome = await fixture.engine.respond(
                to: try InboundRequest.test("inline", "now", id: id), from: client, received: .now)
            guard case .answered(let response) = outcome else {
                Issue.record("inline.now did not answer at once: \(outcome)")
                return
            }
            #expect(response.id == id && response.code == 0)
        }
        #expect(sink.answered.load(ordering: .relaxed) == 0, "nothing went through the sink")
        #expect(await fixture.engine.finishTasks(within: .zero) == 0, "no task was left running")
    }

    @Test("one that suspends is answered through the sink, and its task is waited for")
    func suspendedAnswersThroughTheSink() async throws {
        let fixture = try await EngineFixture()
        let holds = Holds()
        try await fixture.engine.register(HoldHandler(holds: holds))
        let (client, sink) = await Self.connect(fixture)
        let outcome = await fixture.engine.respond(
            to: try InboundRequest.test("hold", "release", id: 7), from: client, received: .now)
        guard case .suspended(let task, _) = outcome else {
            Issue.record("hold.release did not suspend: \(outcome)")
            return
        }
        // Started inline: the handler already runs.
        for await _ in holds.started { break }
        async let left = fixture.engine.finishTasks(within: .seconds(600))
        holds.release()
        #expect(await left == 0)
        #expect(await sink.next(1) == [7])
        #expect(await task.value.id == 7)
    }

    @Test("pipelined changes, the first started inline and the rest queued behind it, keep their order")
    func pipelinedOrder() async throws {
        // The fixture's store runs on an executor of its own: every change suspends.
        let fixture = try await EngineFixture()
        let (client, sink) = await Self.connect(fixture)
        var tasks: [Task<OutboundResponse, Never>] = []
        for id in UInt64(1)...4 {
            let outcome = await fixture.engine.respond(
                to: try InboundRequest.mentorSet("change \(id)", id: id), from: client, received: .now, queued: id > 1)
            guard case .suspended(let task, _) = outcome else {
                Issue.record("mentor.set \(id) did not suspend: \(outcome)")
                return
            }
            tasks.append(task)
        }
        #expect(await sink.next(4) == [1, 2, 3, 4])
        for task in tasks { #expect(await task.value.code == 0) }
        #expect(await fixture.store.loadMentorState().message.content == "change 4")
    }

    @Test(
        "on an event loop, a change to a store on the engine's executor is answered at once from the loop's code",
        arguments: EngineTestLoop.allCases)
    func inlineOnTheEventLoop(on kind: EngineTestLoop) async throws {
        try await kind.with { loop in
            let engine = MentoryEngine(
                configuration: .init(serverVersion: "test"), eventLoop: loop, clock: FixedClock())
            engine.jobs.runForTesting()
            defer { engine.jobs.stop() }
            let store = InMemorySessionStore(executor: engine.serialExecutor)
            try await engine.register(MentorHandler(store: store))
            try await engine.register(InlineHandler())
            let sink = AnswerSink()
            let client = ConnectionID(1)
            _ = await engine.attach(ConnectionContext(id: client, clientName: "loop", credentials: nil), sink: sink)
            let requests = [
                try InboundRequest.test("inline", "now", id: 1), try InboundRequest.mentorSet("first", id: 2),
                try InboundRequest.mentorSet("second", id: 3),
            ]
            // Called as a channel handler calls it: on the loop, outside any task.
            let answered = try await loop.submit {
                engine.assumeIsolated { engine in
                    requests.map { request -> UInt64? in
                        guard case .answered(let response) = engine.respond(to: request, from: client, received: .now)
                        else { return nil }
                        return response.code == 0 ? response.id : nil
                    }
                }
            }.get()
            #expect(answered == [1, 2, 3])
            #expect(sink.answered.load(ordering: .relaxed) == 0)
            #expect(await store.loadMentorState().message.content == "second")
            #expect(await engine.finishTasks(within: .zero) == 0)
        }
    }
}

extension InboundRequest {
    /// A request `id` for `namespace.method` carrying `body`, as the frame reader makes one.
    static func test(
        _ namespace: String, _ method: String, id: UInt64, body: some SwiftProtobuf.Message = Mentory_V1_Empty()
    ) throws -> InboundRequest {
        var request = Mentory_V1_Request()
        request.id = id
        request.namespace = namespace
        request.method = method
        request.body = try body.serializedData()
        return InboundRequest(request)
    }

    /// A `mentor.set` request `id` for a message of `content`.
    static func mentorSet(_ content: String, id: UInt64) throws -> InboundRequest {
        var body = Mentory_V1_MentorSetRequest()
        body.content = content
        body.character = .warm
        return try self.test("mentor", "set", id: id, body: body)
    }
}
