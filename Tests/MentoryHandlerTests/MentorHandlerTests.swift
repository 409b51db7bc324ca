import MentoryDomain
import MentoryHandlerKit
import MentoryHandlerTesting
import MentoryMentor
import MentoryStorage
import MentoryWire
import MentoryWireFixtures
import Testing

/// A mentor store that records every state it saved, in order, over an in-memory store
/// (whose `failWrites` makes saves fail).
actor RecordingMentorStore: MentorStateStore {
    let backing = InMemorySessionStore()
    private(set) var saved: [Mentory_V1_MentorState] = []

    func loadMentorState() async throws(StorageError) -> Mentory_V1_MentorState {
        await self.backing.loadMentorState()
    }

    func saveMentorState(_ state: Mentory_V1_MentorState) async throws(StorageError) {
        try await self.backing.saveMentorState(state)
        self.saved.append(state)
    }
}

@Suite("Mentor handler")
struct MentorHandlerTests {
    typealias Mentor = MentorySchema.Mentor

    private func open(_ store: any MentorStateStore) async throws -> HandlerTestHarness<MentorHandler> {
        try await HandlerTestHarness.open(MentorHandler(store: store), clock: FixedSessionClock())
    }

    @Test("set then get returns the latest message with ids for its action items")
    func setAndGet() async throws {
        let store = InMemorySessionStore()
        let harness = try await self.open(store)
        let first = try await harness.call(Mentor.set, .make("first"))
        let set = try await harness.call(Mentor.set, .make("second", .cool, todos: ["walk", "read"]))
        let got = try await harness.call(Mentor.get, Mentory_V1_Empty())
        #expect(got == set)
        #expect(got.message.content == "second")
        #expect(got.message.character == .cool)
        #expect(got.message.actionItems.map(\.text) == ["walk", "read"])
        #expect(got.message.actionItems.allSatisfy { !$0.id.isEmpty && !$0.done })
        #expect(got.message.updatedAtUnixMs == 1_795_300_000_000)
        #expect(await store.loadMentorState() == got, "the store holds what was acknowledged")
        #expect(try await harness.published(on: Mentor.mentorTopic) == [first, set])
        #expect(try await harness.snapshot(of: Mentor.mentorTopic) == got, "a new subscriber gets the current state")
    }

    @Test("the state saved before a restart is the state after it")
    func loadsSavedState() async throws {
        let store = InMemorySessionStore()
        let saved = try await self.open(store).call(Mentor.set, .make("remember me", todos: ["a"]))
        let reopened = try await self.open(store)
        #expect(try await reopened.call(Mentor.get, Mentory_V1_Empty()) == saved)
        #expect(try await reopened.published(on: Mentor.mentorTopic).isEmpty)
    }

    @Test("get answers without suspending; set and completeTodo wait for the store")
    func immediate() async throws {
        let harness = try await self.open(InMemorySessionStore())
        #expect(try await harness.answersImmediately(Mentor.get, Mentory_V1_Empty()))
        #expect(try await !harness.answersImmediately(Mentor.set, .make("x")))
        #expect(try await !harness.answersImmediately(Mentor.completeTodo, Mentory_V1_MentorCompleteTodoRequest()))
    }

    @Test("completeTodo ticks one item and leaves the others")
    func completeTodo() async throws {
        let harness = try await self.open(InMemorySessionStore())
        let state = try await harness.call(Mentor.set, .make("do things", todos: ["a", "b"]))
        var request = Mentory_V1_MentorCompleteTodoRequest()
        request.id = state.message.actionItems[1].id
        let done = try await harness.call(Mentor.completeTodo, request)
        #expect(done.message.actionItems.map(\.done) == [false, true])
        request.id = "no-such-item"
        #expect(await failure(harness, Mentor.completeTodo, request) == .notFound)
        #expect(try await harness.published(on: Mentor.mentorTopic) == [state, done])
    }

    @Test("invalid messages are refused and change nothing")
    func validation() async throws {
        let store = InMemorySessionStore()
        let harness = try await self.open(store)
        #expect(await failure(harness, Mentor.set, .make("   ")) == .invalidArgument)
        #expect(await failure(harness, Mentor.set, .make("x", .unspecified)) == .invalidArgument)
        #expect(await failure(harness, Mentor.set, .make("x", todos: [""])) == .invalidArgument)
        #expect(try await !harness.call(Mentor.get, Mentory_V1_Empty()).hasMessage)
        #expect(try await harness.published(on: Mentor.mentorTopic).isEmpty)
        #expect(await !store.loadMentorState().hasMessage)
    }

    @Test("a set whose save fails is refused, changes nothing and publishes nothing")
    func failedSave() async throws {
        let store = InMemorySessionStore()
        let harness = try await self.open(store)
        let kept = try await harness.call(Mentor.set, .make("kept", todos: ["a"]))

        await store.failWrites(with: .failed("the disk is full"))
        #expect(await failure(harness, Mentor.set, .make("lost")) == .storageFailure)
        var complete = Mentory_V1_MentorCompleteTodoRequest()
        complete.id = kept.message.actionItems[0].id
        #expect(await failure(harness, Mentor.completeTodo, complete) == .storageFailure)
        #expect(
            try await harness.call(Mentor.get, Mentory_V1_Empty()) == kept,
            "a failed save leaves the current state as it was")
        #expect(try await harness.snapshot(of: Mentor.mentorTopic) == kept)
        await store.failWrites(with: nil)

        let next = try await harness.call(Mentor.set, .make("next"))
        #expect(
            try await harness.published(on: Mentor.mentorTopic) == [kept, next], "the failed changes published nothing")
        #expect(await store.loadMentorState() == next)
    }

    @Test("setting the same message again, or completing a done item, succeeds and publishes nothing")
    func noOpChanges() async throws {
        let store = RecordingMentorStore()
        let harness = try await self.open(store)
        let request = Mentory_V1_MentorSetRequest.make("same", .cool, todos: ["a", "b"])
        let first = try await harness.call(Mentor.set, request)

        #expect(
            try await harness.call(Mentor.set, request) == first, "the same message again keeps its item ids and time")
        var withIDs = request
        withIDs.actionItems = first.message.actionItems
        #expect(try await harness.call(Mentor.set, withIDs) == first)
        var complete = Mentory_V1_MentorCompleteTodoRequest()
        complete.id = first.message.actionItems[0].id
        let done = try await harness.call(Mentor.completeTodo, complete)
        #expect(try await harness.call(Mentor.completeTodo, complete) == done)
        let changed = try await harness.call(Mentor.set, .make("different", .cool, todos: ["a", "b"]))

        #expect(try await harness.published(on: Mentor.mentorTopic) == [first, done, changed])
        #expect(await store.saved == [first, done, changed], "a change that changes nothing is not saved either")
    }

    @Test("concurrent changes are saved and published in the order they are applied")
    func concurrentChanges() async throws {
        let store = RecordingMentorStore()
        let harness = try await self.open(store)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<20 {
                group.addTask {
                    _ = try await harness.call(Mentor.set, .make("change \(index)"))
                }
            }
            try await group.waitForAll()
        }
        let published = try await harness.published(on: Mentor.mentorTopic)
        #expect(published.count == 20)
        #expect(await store.saved == published, "each change is published after its save, in the same order")
        let last = try #require(published.last)
        #expect(await store.backing.loadMentorState() == last, "the last published state is the one saved last")
        #expect(try await harness.call(Mentor.get, Mentory_V1_Empty()) == last)
    }
}
