import Foundation
import MentoryDomain
import MentoryEngine
import MentoryHandlerKit
import MentoryWire
import MentoryWireFixtures
import Testing

@Suite("Engine routing and subscriptions")
struct EngineTests {
    @Test("unknown namespaces and methods get error replies")
    func unknownRoutes() async throws {
        let fixture = try await EngineFixture()
        let (client, _) = await fixture.connect()
        #expect(try await fixture.failure("weather", "get", Mentory_V1_Empty(), from: client) == .unknownNamespace)
        #expect(
            try await fixture.failure(WireNames.mentor, "explode", Mentory_V1_Empty(), from: client) == .unknownMethod)
        #expect(
            try await fixture.failure(WireNames.session, "reboot", Mentory_V1_Empty(), from: client) == .unknownMethod)
        // The connection still works afterwards.
        _ = try await fixture.call(
            WireNames.session, "ping", Mentory_V1_Empty(), from: client, as: Mentory_V1_Empty.self)
    }

    @Test("a request from a connection that never said hello is refused")
    func handshakeRequired() async throws {
        let fixture = try await EngineFixture()
        #expect(
            try await fixture.failure(WireNames.session, "ping", Mentory_V1_Empty(), from: ConnectionID(999))
                == .handshakeRequired)
    }

    @Test("a connection's requests are answered until it detaches, and none after, whichever connection asked last")
    func detachedConnection() async throws {
        let fixture = try await EngineFixture()
        let (first, _) = await fixture.connect()
        let (second, _) = await fixture.connect()
        for client in [first, second, first] {
            _ = try await fixture.call(
                WireNames.session, "ping", Mentory_V1_Empty(), from: client, as: Mentory_V1_Empty.self)
        }
        // `first` asked last: it is the connection the engine finds first.
        await fixture.engine.detach(first)
        #expect(
            try await fixture.failure(WireNames.session, "ping", Mentory_V1_Empty(), from: first) == .handshakeRequired)
        _ = try await fixture.call(
            WireNames.session, "ping", Mentory_V1_Empty(), from: second, as: Mentory_V1_Empty.self)
        await fixture.engine.detach(second)
        #expect(
            try await fixture.failure(WireNames.session, "ping", Mentory_V1_Empty(), from: second)
                == .handshakeRequired)
    }

    @Test("a body that is not the method's message is an invalid argument")
    func undecodableBody() async throws {
        let fixture = try await EngineFixture()
        let (client, _) = await fixture.connect()
        var request = Mentory_V1_Request()
        request.id = 5
        request.namespace = WireNames.diary
        request.method = "add"
        request.body = .init([0xFF, 0xFF, 0xFF])
        let response = await fixture.engine.respond(to: request, from: client)
        #expect(response.error.code == UInt32(Mentory_V1_ErrorCode.invalidArgument.rawValue))
    }

    @Test("registering a namespace twice fails")
    func duplicateRegistration() async throws {
        let fixture = try await EngineFixture()
        await #expect(throws: MentoryError.self) {
            try await fixture.engine.register(MentoryReachabilityProbe())
        }
    }

    @Test("status counts connections and subscribers and lists handlers")
    func status() async throws {
        let fixture = try await EngineFixture()
        let (a, _) = await fixture.connect()
        _ = await fixture.connect()
        _ = try await fixture.subscribe(a, to: [WireNames.mentor])
        let status = try await fixture.call(
            WireNames.session, "status", Mentory_V1_Empty(), from: a, as: Mentory_V1_StatusReply.self)
        #expect(status.connections == 2)
        #expect(status.subscribers == 1)
        #expect(
            status.handlers.map(\.namespace) == [
                WireNames.session, WireNames.plugin, WireNames.mentor, WireNames.reachability, WireNames.diary,
            ])
        #expect(status.topics.map(\.topic) == [WireNames.diary, WireNames.mentor, WireNames.reachability])
    }

    @Test("subscribers see every topic's events in order with per-topic sequence numbers")
    func eventsInOrder() async throws {
        let fixture = try await EngineFixture()
        let (writer, _) = await fixture.connect()
        let (reader, sink) = await fixture.connect()
        _ = try await fixture.subscribe(reader, to: [WireNames.mentor, WireNames.diary])
        let snapshots = await sink.next(2)
        #expect(snapshots.map(\.kind) == [.snapshot, .snapshot])
        for index in 1...3 {
            _ = try await fixture.call(
                WireNames.mentor, "set", Mentory_V1_MentorSetRequest.make("m\(index)"), from: writer,
                as: Mentory_V1_MentorState.self)
        }
        _ = try await fixture.call(
            WireNames.diary, "add", Mentory_V1_DiaryAddRequest.make("2026-11-21"), from: writer,
            as: Mentory_V1_DiaryEntry.self)
        let events = await sink.next(4)
        #expect(events.map(\.topic) == [WireNames.mentor, WireNames.mentor, WireNames.mentor, WireNames.diary])
        #expect(events.map(\.sequence) == [1, 2, 3, 1])
        let contents = try events.prefix(3).map { try Mentory_V1_MentorState(serializedBytes: $0.body).message.content }
        #expect(contents == ["m1", "m2", "m3"])
    }

    @Test("resuming within the ring replays exactly the missed events")
    func resumeReplays() async throws {
        let fixture = try await EngineFixture(ringCapacity: 8)
        let (writer, _) = await fixture.connect()
        for index in 1...5 {
            _ = try await fixture.call(
                WireNames.mentor, "set", Mentory_V1_MentorSetRequest.make("m\(index)"), from: writer,
                as: Mentory_V1_MentorState.self)
        }
        let (reader, sink) = await fixture.connect()
        _ = try await fixture.subscribe(reader, to: [WireNames.mentor], resumeAfter: 2, epoch: fixture.engine.epoch)
        let replayed = await sink.next(3)
        #expect(replayed.map(\.sequence) == [3, 4, 5])
        #expect(replayed.allSatisfy { $0.kind == .change })
    }

    @Test("resuming from too old a sequence or another epoch gets a reset with the current state")
    func resumeResets() async throws {
        let fixture = try await EngineFixture(ringCapacity: 2)
        let (writer, _) = await fixture.connect()
        for index in 1...5 {
            _ = try await fixture.call(
                WireNames.mentor, "set", Mentory_V1_MentorSetRequest.make("m\(index)"), from: writer,
                as: Mentory_V1_MentorState.self)
        }
        let (tooOld, oldSink) = await fixture.connect()
        _ = try await fixture.subscribe(tooOld, to: [WireNames.mentor], resumeAfter: 1, epoch: fixture.engine.epoch)
        let reset = try #require(await oldSink.next().first)
        #expect(reset.kind == .reset)
        #expect(reset.sequence == 5)
        #expect(try Mentory_V1_MentorState(serializedBytes: reset.body).message.content == "m5")

        let (otherEpoch, epochSink) = await fixture.connect()
        _ = try await fixture.subscribe(
            otherEpoch, to: [WireNames.mentor], resumeAfter: 5, epoch: fixture.engine.epoch &+ 1)
        #expect(await epochSink.next().first?.kind == .reset)
    }

    @Test("an overflowing subscriber is skipped, then reset once it drains; others are unaffected")
    func overflowThenReset() async throws {
        let fixture = try await EngineFixture()
        let (writer, _) = await fixture.connect()
        let (slow, slowSink) = await fixture.connect()
        let (fast, fastSink) = await fixture.connect()
        _ = try await fixture.subscribe(slow, to: [WireNames.mentor])
        _ = try await fixture.subscribe(fast, to: [WireNames.mentor])
        _ = await slowSink.next()
        _ = await fastSink.next()
        slowSink.accepting.store(false, ordering: .relaxed)
        for index in 1...10 {
            _ = try await fixture.call(
                WireNames.mentor, "set", Mentory_V1_MentorSetRequest.make("m\(index)"), from: writer,
                as: Mentory_V1_MentorState.self)
        }
        #expect(await fastSink.next(10).map(\.sequence) == Array(1...10))
        slowSink.accepting.store(true, ordering: .relaxed)
        await fixture.engine.sinkDrained(slow)
        let reset = try #require(await slowSink.next().first)
        #expect(reset.kind == .reset)
        #expect(reset.sequence == 10)
        #expect(try Mentory_V1_MentorState(serializedBytes: reset.body).message.content == "m10")
        _ = try await fixture.call(
            WireNames.mentor, "set", Mentory_V1_MentorSetRequest.make("after"), from: writer,
            as: Mentory_V1_MentorState.self)
        #expect(await slowSink.next().first?.sequence == 11, "live events resume after the reset")
    }

    @Test("unsubscribing stops events")
    func unsubscribe() async throws {
        let fixture = try await EngineFixture()
        let (client, sink) = await fixture.connect()
        _ = try await fixture.subscribe(client, to: [WireNames.mentor, WireNames.diary])
        _ = await sink.next(2)
        var request = Mentory_V1_UnsubscribeRequest()
        request.topics = [WireNames.mentor]
        _ = try await fixture.call(WireNames.session, "unsubscribe", request, from: client, as: Mentory_V1_Empty.self)
        _ = try await fixture.call(
            WireNames.mentor, "set", Mentory_V1_MentorSetRequest.make("unseen"), from: client,
            as: Mentory_V1_MentorState.self)
        _ = try await fixture.call(
            WireNames.diary, "add", Mentory_V1_DiaryAddRequest.make("2026-11-21"), from: client,
            as: Mentory_V1_DiaryEntry.self)
        #expect(await sink.next().first?.topic == WireNames.diary)
    }

    @Test("subscribing to an unknown topic is refused")
    func unknownTopic() async throws {
        let fixture = try await EngineFixture()
        let (client, _) = await fixture.connect()
        var request = Mentory_V1_SubscribeRequest()
        var subscription = Mentory_V1_TopicSubscription()
        subscription.topic = "weather"
        request.topics = [subscription]
        #expect(try await fixture.failure(WireNames.session, "subscribe", request, from: client) == .invalidArgument)
    }

    @Test("an update made while nobody listens reaches the next subscriber first, as its snapshot")
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

    @Test("a snapshot event carrying a full reply budget of diary entries fits the frame limit")
    func largeSnapshotEventFits() async throws {
        let fixture = try await EngineFixture()
        let (client, _) = await fixture.connect()
        for index in 0..<16 {
            _ = try await fixture.call(
                WireNames.diary, "add", maximalAdd(day(index)), from: client, as: Mentory_V1_DiaryEntry.self)
        }
        let (late, lateSink) = await fixture.connect()
        _ = try await fixture.subscribe(late, to: [WireNames.diary])
        let event = try #require(await lateSink.next().first)
        #expect(event.kind == .snapshot)
        #expect(event.body.count > ReplyBudget.defaultBodyBytes / 2, "the snapshot fills most of its budget")
        #expect(try frameSize(event) <= event.body.count + ReplyBudget.envelopeReserve)
        #expect(try frameSize(event) <= WireProtocol.defaultMaxFrameLength)
    }
}

/// A second handler claiming an existing namespace.
private struct MentoryReachabilityProbe: MentoryHandler {
    typealias Namespace = MentorySchema.Reachability

    func routes(_ routes: inout HandlerRoutes<Self>) {
        routes.on(Namespace.report) { request, _, _ in request }
        routes.on(Namespace.get) { _, _, _ in Mentory_V1_ReachabilitySnapshot() }
        routes.snapshot(Namespace.reachabilityTopic) { _ in Mentory_V1_ReachabilitySnapshot() }
    }
}
