import Foundation
import MentoryDomain
import MentoryEngine
import MentoryHandlerKit
import MentoryTestSupport
import MentoryWire
import SwiftProtobuf
import Synchronization
import Testing

/// The namespace of ``GatedHandler``, declared for these tests.
enum GatedSchema: NamespaceSchema {
    static let name = "gated"
    static let version: UInt32 = 1
    static let bump = MethodSchema<GatedSchema, Mentory_V1_Empty, Google_Protobuf_UInt32Value>(name: "bump")
    static let gatedTopic = TopicSchema<GatedSchema, Google_Protobuf_UInt32Value, Google_Protobuf_UInt32Value>(
        name: "gated", reads: ["gated.bump"])
    static let methods: [MethodInfo] = [bump.info]
    static let topics: [TopicInfo] = [gatedTopic.info]
    static var fileDescriptors: SchemaDescriptors { MentoryDomainSchema.fileDescriptors }
}

/// A handler on topic `gated` whose snapshot waits at a gate; `bump` publishes the next counter value.
struct GatedHandler: MentoryHandler {
    typealias Namespace = GatedSchema
    static let topic = GatedSchema.gatedTopic.name

    final class State {
        var counter: UInt32 = 0
    }

    let gate: TestGate

    func open(_ setup: HandlerSetup) async throws -> sending State { State() }

    func routes(_ routes: inout HandlerRoutes<Self>) {
        routes.on(Namespace.bump) { _, _, context in
            context.state.counter += 1
            context.publish(Google_Protobuf_UInt32Value(context.state.counter), on: Namespace.gatedTopic)
            return Google_Protobuf_UInt32Value(context.state.counter)
        }
        routes.snapshot(Namespace.gatedTopic) { context in
            await self.gate.pass()
            return Google_Protobuf_UInt32Value(context.state.counter)
        }
    }
}

extension EngineFixture {
    func bump(from client: ConnectionID) async throws {
        _ = try await self.call(
            GatedHandler.topic, "bump", Mentory_V1_Empty(), from: client, as: Google_Protobuf_UInt32Value.self)
    }
}

@Suite("Subscription races and publishing scope", .timeLimit(.minutes(5)))
struct SubscriptionRaceTests {
    @Test("a connection detaching while subscribe awaits a snapshot leaves no id behind")
    func detachDuringSubscribe() async throws {
        let fixture = try await EngineFixture()
        let gate = TestGate(open: false)
        try await fixture.engine.register(GatedHandler(gate: gate))
        let (client, _) = await fixture.connect()

        var request = Mentory_V1_SubscribeRequest()
        request.topics = [GatedHandler.topic, WireNames.mentor, WireNames.diary].map { topic in
            var subscription = Mentory_V1_TopicSubscription()
            subscription.topic = topic
            return subscription
        }
        let subscribing = Task { try await fixture.send(WireNames.session, "subscribe", request, from: client) }
        #expect(await eventually { await gate.arrivals == 1 }, "the snapshot is being taken")
        #expect(await fixture.engine.subscriberIDs(of: GatedHandler.topic) == [client])

        await fixture.engine.detach(client)
        await gate.open()
        let response = try await subscribing.value
        #expect(response.error.code == UInt32(Mentory_V1_ErrorCode.handshakeRequired.rawValue))

        for topic in [GatedHandler.topic, WireNames.mentor, WireNames.diary] {
            #expect(await fixture.engine.subscriberIDs(of: topic).isEmpty, "\(topic) keeps no id")
        }
        #expect(await fixture.engine.subscribedTopics(of: client).isEmpty)
        #expect(await fixture.engine.subscriberCount == 0)
        #expect(await fixture.engine.subscriptionsAreConsistent)
    }

    @Test("two drains while a reset is being taken start one reset and duplicate no change")
    func oneResetPerTopic() async throws {
        let fixture = try await EngineFixture()
        let gate = TestGate(open: true)
        try await fixture.engine.register(GatedHandler(gate: gate))
        let (writer, _) = await fixture.connect()
        let (reader, sink) = await fixture.connect()
        _ = try await fixture.subscribe(reader, to: [GatedHandler.topic])
        #expect(await sink.next().map(\.kind) == [.snapshot])

        await gate.close()
        sink.accepting.store(false, ordering: .relaxed)
        try await fixture.bump(from: writer)
        try await fixture.bump(from: writer)
        sink.accepting.store(true, ordering: .relaxed)

        let first = Task { await fixture.engine.sinkDrained(reader) }
        #expect(await eventually { await gate.arrivals == 2 }, "the first drain is taking the reset's snapshot")
        let secondDone = Atomic<Bool>(false)
        let second = Task {
            await fixture.engine.sinkDrained(reader)
            secondDone.store(true, ordering: .relaxed)
        }
        // The second drain must return without a snapshot; should it take one, it would reach the gate.
        let settled = await eventually {
            if secondDone.load(ordering: .relaxed) { return true }
            return await gate.arrivals > 2
        }
        #expect(settled)
        #expect(await gate.arrivals == 2, "the second drain starts no second reset")
        try await fixture.bump(from: writer)  // published while the reset is in flight: held back, then replayed
        await gate.open()
        await first.value
        await second.value
        try await fixture.bump(from: writer)

        let events = await sink.next(3)
        #expect(events.map(\.kind) == [.reset, .change, .change])
        #expect(events.map(\.sequence) == [2, 3, 4])
        try await fixture.bump(from: writer)
        #expect(await sink.next().map(\.sequence) == [5], "nothing was sent twice before it")
        #expect(await gate.arrivals == 2)
        #expect(await fixture.engine.subscriptionsAreConsistent)
    }

    @Test("a handler's own publishes work from every requirement, including connectionClosed")
    func ownPublishAllowed() async throws {
        let fixture = try await EngineFixture()
        let (reporter, _) = await fixture.connect()
        let (watcher, sink) = await fixture.connect()
        _ = try await fixture.subscribe(watcher, to: [WireNames.reachability])
        _ = await sink.next()
        var peer = Mentory_V1_PeerState()
        peer.peer = "watch"
        peer.isReachable = true
        _ = try await fixture.call(
            WireNames.reachability, "report", peer, from: reporter, as: Mentory_V1_PeerState.self)
        await fixture.engine.detach(reporter)
        let events = await sink.next(2)
        #expect(events.map(\.sequence) == [1, 2])
        #expect(try Mentory_V1_PeerState(serializedBytes: events[1].body).isReachable == false)
    }

    @Test(
        "an Empty request with a body gets INVALID_ARGUMENT",
        arguments: [
            (WireNames.session, "ping"), (WireNames.session, "status"), ("mentor", "get"), ("reachability", "get"),
        ])
    func emptyRequestWithBody(namespace: String, method: String) async throws {
        let fixture = try await EngineFixture()
        let (client, _) = await fixture.connect()
        // 08 01 parses as an unknown varint field, FF FF FF does not parse at all: both are refused.
        for garbage: [UInt8] in [[0x08, 0x01], [0xFF, 0xFF, 0xFF]] {
            var request = Mentory_V1_Request()
            request.id = 9
            request.namespace = namespace
            request.method = method
            request.body = Data(garbage)
            let response = await fixture.engine.respond(to: request, from: client)
            #expect(response.error.code == UInt32(Mentory_V1_ErrorCode.invalidArgument.rawValue))
            #expect(response.error.message.contains("empty body"))
        }
        let fine = try await fixture.send(namespace, method, Mentory_V1_Empty(), from: client)
        guard case .body = fine.result else {
            Issue.record("\(method) with an empty body failed: \(fine.error.message)")
            return
        }
    }
}
