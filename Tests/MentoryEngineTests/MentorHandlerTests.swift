import MentoryEngine
import MentoryHandlerKit
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

    @Test("a set whose save fails is refused, changes nothing and publishes nothing")
    func failedSave() async throws {
        let fixture = try await EngineFixture()
        let (client, sink) = await fixture.connect()
        let kept = try await fixture.call(
            WireNames.mentor, "set", Mentory_V1_MentorSetRequest.make("kept", todos: ["a"]), from: client,
            as: Mentory_V1_MentorState.self)
        _ = try await fixture.subscribe(client, to: [WireNames.mentor])
        let snapshot = try #require(await sink.next().first)

        await fixture.store.failWrites(with: .storageFailure("the disk is full"))
        #expect(
            try await fixture.failure(WireNames.mentor, "set", Mentory_V1_MentorSetRequest.make("lost"), from: client)
                == .storageFailure)
        var complete = Mentory_V1_MentorCompleteTodoRequest()
        complete.id = kept.message.actionItems[0].id
        #expect(try await fixture.failure(WireNames.mentor, "completeTodo", complete, from: client) == .storageFailure)
        #expect(
            try await fixture.call(
                WireNames.mentor, "get", Mentory_V1_Empty(), from: client, as: Mentory_V1_MentorState.self)
                == kept, "a failed save leaves the current state as it was")
        await fixture.store.failWrites(with: nil)

        let next = try await fixture.call(
            WireNames.mentor, "set", Mentory_V1_MentorSetRequest.make("next"), from: client,
            as: Mentory_V1_MentorState.self)
        let event = try #require(await sink.next().first)
        #expect(event.sequence == snapshot.sequence + 1, "the failed changes published nothing")
        #expect(try Mentory_V1_MentorState(serializedBytes: event.body) == next)
        #expect(await fixture.store.loadMentorState() == next)
    }

    @Test("setting the same message again, or completing a done item, succeeds and publishes nothing")
    func noOpChanges() async throws {
        let fixture = try await EngineFixture()
        let (client, sink) = await fixture.connect()
        let request = Mentory_V1_MentorSetRequest.make("same", .cool, todos: ["a", "b"])
        let first = try await fixture.call(
            WireNames.mentor, "set", request, from: client, as: Mentory_V1_MentorState.self)
        _ = try await fixture.subscribe(client, to: [WireNames.mentor])
        let snapshot = try #require(await sink.next().first)

        #expect(
            try await fixture.call(WireNames.mentor, "set", request, from: client, as: Mentory_V1_MentorState.self)
                == first, "the same message again keeps its item ids and time")
        var withIDs = request
        withIDs.actionItems = first.message.actionItems
        #expect(
            try await fixture.call(WireNames.mentor, "set", withIDs, from: client, as: Mentory_V1_MentorState.self)
                == first)
        var complete = Mentory_V1_MentorCompleteTodoRequest()
        complete.id = first.message.actionItems[0].id
        let done = try await fixture.call(
            WireNames.mentor, "completeTodo", complete, from: client, as: Mentory_V1_MentorState.self)
        #expect(
            try await fixture.call(
                WireNames.mentor, "completeTodo", complete, from: client, as: Mentory_V1_MentorState.self)
                == done)
        let changed = try await fixture.call(
            WireNames.mentor, "set", Mentory_V1_MentorSetRequest.make("different", .cool, todos: ["a", "b"]),
            from: client, as: Mentory_V1_MentorState.self)

        let events = await sink.next(2)
        #expect(events.map(\.sequence) == [snapshot.sequence + 1, snapshot.sequence + 2])
        #expect(try Mentory_V1_MentorState(serializedBytes: events[0].body) == done)
        #expect(try Mentory_V1_MentorState(serializedBytes: events[1].body) == changed)
    }

    @Test("concurrent changes are saved and published in the order they are applied")
    func concurrentChanges() async throws {
        let fixture = try await EngineFixture()
        let (client, sink) = await fixture.connect()
        _ = try await fixture.subscribe(client, to: [WireNames.mentor])
        _ = await sink.next()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<20 {
                group.addTask {
                    _ = try await fixture.send(
                        WireNames.mentor, "set", Mentory_V1_MentorSetRequest.make("change \(index)"), from: client,
                        id: UInt64(100 + index))
                }
            }
            try await group.waitForAll()
        }
        let events = await sink.next(20)
        let last = try Mentory_V1_MentorState(serializedBytes: try #require(events.last).body)
        #expect(await fixture.store.loadMentorState() == last, "the last published state is the one saved last")
        #expect(
            try await fixture.call(
                WireNames.mentor, "get", Mentory_V1_Empty(), from: client, as: Mentory_V1_MentorState.self)
                == last)
    }
}
