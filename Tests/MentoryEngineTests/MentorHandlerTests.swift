import MentoryEngine
import MentoryWire
import Testing

@Suite("Mentor handler")
struct MentorHandlerTests {
    @Test("set then get returns the latest message with ids for its action items")
    func setAndGet() async throws {
        let fixture = try await EngineFixture()
        let (client, _) = await fixture.connect()
        _ = try await fixture.call(
            WireNames.mentor, "set", Mentory_V1_MentorSetRequest.make("first"), from: client,
            as: Mentory_V1_MentorState.self)
        let set = try await fixture.call(
            WireNames.mentor, "set", Mentory_V1_MentorSetRequest.make("second", .cool, todos: ["walk", "read"]),
            from: client, as: Mentory_V1_MentorState.self
        )
        let got = try await fixture.call(
            WireNames.mentor, "get", Mentory_V1_Empty(), from: client, as: Mentory_V1_MentorState.self)
        #expect(got == set)
        #expect(got.message.content == "second")
        #expect(got.message.character == .cool)
        #expect(got.message.actionItems.map(\.text) == ["walk", "read"])
        #expect(got.message.actionItems.allSatisfy { !$0.id.isEmpty && !$0.done })
        #expect(got.message.updatedAtUnixMs == 1_795_300_000_000)
        #expect(await fixture.store.loadMentorState() == got, "the store holds what was acknowledged")
    }

    @Test("completeTodo ticks one item and leaves the others")
    func completeTodo() async throws {
        let fixture = try await EngineFixture()
        let (client, _) = await fixture.connect()
        let state = try await fixture.call(
            WireNames.mentor, "set", Mentory_V1_MentorSetRequest.make("do things", todos: ["a", "b"]),
            from: client, as: Mentory_V1_MentorState.self
        )
        var request = Mentory_V1_MentorCompleteTodoRequest()
        request.id = state.message.actionItems[1].id
        let done = try await fixture.call(
            WireNames.mentor, "completeTodo", request, from: client, as: Mentory_V1_MentorState.self)
        #expect(done.message.actionItems.map(\.done) == [false, true])
        request.id = "no-such-item"
        #expect(try await fixture.failure(WireNames.mentor, "completeTodo", request, from: client) == .notFound)
    }

    @Test("invalid messages are refused and change nothing")
    func validation() async throws {
        let fixture = try await EngineFixture()
        let (client, _) = await fixture.connect()
        #expect(
            try await fixture.failure(WireNames.mentor, "set", Mentory_V1_MentorSetRequest.make("   "), from: client)
                == .invalidArgument)
        #expect(
            try await fixture.failure(
                WireNames.mentor, "set", Mentory_V1_MentorSetRequest.make("x", .unspecified), from: client)
                == .invalidArgument)
        #expect(
            try await fixture.failure(
                WireNames.mentor, "set", Mentory_V1_MentorSetRequest.make("x", todos: [""]), from: client)
                == .invalidArgument)
        let got = try await fixture.call(
            WireNames.mentor, "get", Mentory_V1_Empty(), from: client, as: Mentory_V1_MentorState.self)
        #expect(!got.hasMessage)
    }

    @Test("an update made while nobody listens reaches the next subscriber first")
    func cachedUntilSubscribed() async throws {
        let fixture = try await EngineFixture()
        let (writer, _) = await fixture.connect()
        let state = try await fixture.call(
            WireNames.mentor, "set", Mentory_V1_MentorSetRequest.make("while you were away"),
            from: writer, as: Mentory_V1_MentorState.self
        )
        let (reader, sink) = await fixture.connect()
        _ = try await fixture.subscribe(reader, to: [WireNames.mentor])
        let event = try #require(await sink.next().first)
        #expect(event.kind == .snapshot)
        #expect(event.sequence == 1)
        #expect(try Mentory_V1_MentorState(serializedBytes: event.body) == state)
    }
}
