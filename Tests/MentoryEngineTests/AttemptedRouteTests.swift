import MentoryDomain
import MentoryEngine
import MentoryHandlerKit
import MentoryMentor
import MentoryStorage
import MentoryWire
import NIOConcurrencyHelpers
import NIOCore
import SwiftProtobuf
import Synchronization
import Testing

/// `attempt.count` is attempted without a task first: its attempt answers while ``AttemptCounts/attemptAnswers``
/// holds, throws while ``AttemptCounts/attemptThrows`` does, and otherwise leaves the request to the route that may
/// suspend.
enum AttemptSchema: NamespaceSchema {
    static let name = "attempt"
    static let version: UInt32 = 1
    static let count = MethodSchema<AttemptSchema, Mentory_V1_Empty, Mentory_V1_Empty>(name: "count")
    static let methods: [MethodInfo] = [count.info]
    static let topics: [TopicInfo] = []
    static var fileDescriptors: SchemaDescriptors { MentoryDomainSchema.fileDescriptors }
}

/// What `attempt.count` was asked, and how its attempt answers.
final class AttemptCounts: Sendable {
    let attemptAnswers = Atomic<Bool>(true)
    let attemptThrows = Atomic<Bool>(false)
    let attempts = Atomic<Int>(0)
    let suspendingCalls = Atomic<Int>(0)
}

struct AttemptHandler: MentoryHandler {
    typealias Namespace = AttemptSchema
    let counts: AttemptCounts

    func routes(_ routes: inout HandlerRoutes<Self>) {
        routes.onAsync(
            Namespace.count,
            attempt: { _, _, _ in
                self.counts.attempts.add(1, ordering: .relaxed)
                if self.counts.attemptThrows.load(ordering: .relaxed) { throw MentoryError.notFound("the count") }
                return self.counts.attemptAnswers.load(ordering: .relaxed) ? Mentory_V1_Empty() : nil
            }
        ) { _, _, _ in
            self.counts.suspendingCalls.add(1, ordering: .relaxed)
            return Mentory_V1_Empty()
        }
    }
}

/// A mentor store whose first save through ``saveMentorState(_:)`` waits until ``release()``, and which saves
/// without suspending whenever asked to: the contents saved, in order, either way.
final class GatedMentorStore: MentorStateStore {
    let saved = NIOLockedValueBox<[String]>([])
    let savedWithoutSuspending = Atomic<Int>(0)
    private let held = Atomic<Bool>(false)
    let holding: AsyncStream<Void>
    private let holdingContinuation: AsyncStream<Void>.Continuation
    private let released: AsyncStream<Void>
    private let releasedContinuation: AsyncStream<Void>.Continuation

    init() {
        (self.holding, self.holdingContinuation) = AsyncStream.makeStream(of: Void.self)
        (self.released, self.releasedContinuation) = AsyncStream.makeStream(of: Void.self)
    }

    func release() { self.releasedContinuation.finish() }

    nonisolated(nonsending) func loadMentorState() async throws(StorageError) -> Mentory_V1_MentorState {
        Mentory_V1_MentorState()
    }

    nonisolated(nonsending) func saveMentorState(_ state: Mentory_V1_MentorState) async throws(StorageError) {
        if !self.held.exchange(true, ordering: .relaxed) {
            self.holdingContinuation.yield()
            for await _ in self.released {}
        }
        self.saved.withLockedValue { $0.append(state.message.content) }
    }

    func saveMentorStateWithoutSuspending(_ state: Mentory_V1_MentorState) throws(StorageError) -> Bool {
        self.savedWithoutSuspending.add(1, ordering: .relaxed)
        self.saved.withLockedValue { $0.append(state.message.content) }
        return true
    }
}

@Suite("Routes attempted without a task first", .timeLimit(.minutes(2)))
struct AttemptedRouteTests {
    /// An engine serving `attempt`, and a client attached to it.
    private static func engine(_ counts: AttemptCounts) async throws -> (EngineFixture, ConnectionID, AnswerSink) {
        let fixture = try await EngineFixture()
        try await fixture.engine.register(AttemptHandler(counts: counts))
        let sink = AnswerSink()
        let id = ConnectionID(2_000)
        _ = await fixture.engine.attach(ConnectionContext(id: id, clientName: "attempt", credentials: nil), sink: sink)
        return (fixture, id, sink)
    }

    @Test("an attempt that answers answers at once, and the route that may suspend is not called")
    func attemptAnswers() async throws {
        let counts = AttemptCounts()
        let (fixture, client, sink) = try await Self.engine(counts)
        let outcome = await fixture.engine.respond(
            to: try InboundRequest.test("attempt", "count", id: 1), from: client, received: .now)
        guard case .answered(let response) = outcome else {
            Issue.record("attempt.count did not answer at once: \(outcome)")
            return
        }
        #expect(response.id == 1 && response.code == 0)
        #expect(counts.attempts.load(ordering: .relaxed) == 1)
        #expect(counts.suspendingCalls.load(ordering: .relaxed) == 0)
        #expect(sink.answered.load(ordering: .relaxed) == 0)
        #expect(await fixture.engine.finishTasks(within: .zero) == 0, "no task was started")
    }

    @Test("an attempt that cannot answer leaves the request to the route that may suspend")
    func attemptStepsAside() async throws {
        let counts = AttemptCounts()
        counts.attemptAnswers.store(false, ordering: .relaxed)
        let (fixture, client, _) = try await Self.engine(counts)
        let outcome = await fixture.engine.respond(
            to: try InboundRequest.test("attempt", "count", id: 2), from: client, received: .now)
        let response: OutboundResponse
        switch outcome {
        case .answered(let answered): response = answered
        case .suspended(let task, _): response = await task.value
        }
        #expect(response.id == 2 && response.code == 0)
        #expect(counts.attempts.load(ordering: .relaxed) == 1)
        #expect(counts.suspendingCalls.load(ordering: .relaxed) == 1)
    }

    @Test("an attempt's error answers the request, and the route that may suspend is not called")
    func attemptThrows() async throws {
        let counts = AttemptCounts()
        counts.attemptThrows.store(true, ordering: .relaxed)
        let (fixture, client, _) = try await Self.engine(counts)
        let outcome = await fixture.engine.respond(
            to: try InboundRequest.test("attempt", "count", id: 3), from: client, received: .now)
        guard case .answered(let response) = outcome else {
            Issue.record("attempt.count's error did not answer at once: \(outcome)")
            return
        }
        #expect(response.id == 3 && response.code == UInt32(Mentory_V1_ErrorCode.notFound.rawValue))
        #expect(counts.suspendingCalls.load(ordering: .relaxed) == 0)
    }

    @Test("a queued request is not attempted: it waits behind those in flight, as a task")
    func queuedIsNotAttempted() async throws {
        let counts = AttemptCounts()
        let (fixture, client, sink) = try await Self.engine(counts)
        let outcome = await fixture.engine.respond(
            to: try InboundRequest.test("attempt", "count", id: 4), from: client, received: .now, queued: true)
        guard case .suspended = outcome else {
            Issue.record("a queued attempt.count did not start a task: \(outcome)")
            return
        }
        #expect(await sink.next(1) == [4])
        #expect(counts.attempts.load(ordering: .relaxed) == 0)
        #expect(counts.suspendingCalls.load(ordering: .relaxed) == 1)
    }

    @Test(
        "a mentor change is not attempted past one that holds the turn: it waits, and the saves keep their order",
        arguments: EngineTestLoop.allCases)
    func mentorChangeWaitsForTheTurn(on kind: EngineTestLoop) async throws {
        try await kind.with { loop in
            let engine = MentoryEngine(
                configuration: .init(serverVersion: "test"), eventLoop: loop, clock: FixedClock())
            engine.jobs.runForTesting()
            defer { engine.jobs.stop() }
            let store = GatedMentorStore()
            try await engine.register(MentorHandler(store: store))
            let sink = AnswerSink()
            let client = ConnectionID(1)
            _ = await engine.attach(ConnectionContext(id: client, clientName: "turn", credentials: nil), sink: sink)
            // The first change is queued (a task, not attempted) and holds the turn while its save waits.
            let first = await engine.respond(
                to: try InboundRequest.mentorSet("first", id: 1), from: client, received: .now, queued: true)
            guard case .suspended = first else {
                Issue.record("the queued change did not start a task: \(first)")
                return
            }
            for await _ in store.holding { break }
            // The second is attempted, finds the turn taken, and waits for it as a task.
            let second = await engine.respond(
                to: try InboundRequest.mentorSet("second", id: 2), from: client, received: .now)
            guard case .suspended = second else {
                Issue.record("the change behind the turn was answered past it: \(second)")
                store.release()
                return
            }
            #expect(store.savedWithoutSuspending.load(ordering: .relaxed) == 0)
            store.release()
            #expect(await sink.next(2) == [1, 2])
            #expect(store.saved.withLockedValue { $0 } == ["first", "second"])
            // With the turn free, the next change is answered at once, saved without suspending.
            let third = await engine.respond(
                to: try InboundRequest.mentorSet("third", id: 3), from: client, received: .now)
            guard case .answered(let response) = third else {
                Issue.record("a change with the turn free was not answered at once: \(third)")
                return
            }
            #expect(response.code == 0)
            #expect(store.savedWithoutSuspending.load(ordering: .relaxed) == 1)
            #expect(store.saved.withLockedValue { $0 } == ["first", "second", "third"])
        }
    }

    @Test(
        "the memory store saves without suspending only on the executor it was given",
        arguments: EngineTestLoop.allCases)
    func memoryStoreSavesOnItsExecutor(on kind: EngineTestLoop) async throws {
        try await kind.with { loop in
            let state = {
                var state = Mentory_V1_MentorState()
                state.message.content = "saved at once"
                return state
            }()
            // A store on an executor of its own never does.
            #expect(try InMemorySessionStore().saveMentorStateWithoutSuspending(state) == false)
            let engine = MentoryEngine(
                configuration: .init(serverVersion: "test"), eventLoop: loop, clock: FixedClock())
            let store = InMemorySessionStore(executor: engine.serialExecutor)
            // Off its executor, it does not.
            #expect(try store.saveMentorStateWithoutSuspending(state) == false)
            #expect(await store.loadMentorState().message.content.isEmpty)
            // On it, it does; and a failing store throws as its save would.
            let onLoop = try await loop.submit { try store.saveMentorStateWithoutSuspending(state) }.get()
            #expect(onLoop)
            #expect(await store.loadMentorState().message.content == "saved at once")
            await store.failWrites(with: .failed("the disk is full"))
            let failure = try await loop.submit { () -> StorageError? in
                do throws(StorageError) {
                    _ = try store.saveMentorStateWithoutSuspending(state)
                    return nil
                } catch {
                    return error
                }
            }.get()
            #expect(failure == .failed("the disk is full"))
        }
    }
}
