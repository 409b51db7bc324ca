import MentoryEngine
import MentoryHandlerKit
import MentoryWire
import SwiftProtobuf
import Testing

/// A subscriber's snapshot passes the one gate as a call does: counted, shown to monitors, held to a deadline.
@Suite("Snapshots through the gate: metrics, monitors, deadline")
struct SnapshotGateTests {
    static let root = PeerCredentials(pid: 1, uid: 0, gid: 0)
    static let subscriber = PeerCredentials(pid: 20, uid: 0, gid: 0)

    /// The value of `name`'s sample whose labels include `labels` (histograms: its count); nil without one.
    static func value(
        _ metrics: Mentory_V1_MetricsReply, _ name: String, _ labels: [String: String]
    ) -> Double? {
        guard let family = metrics.families.first(where: { $0.name == name }) else { return nil }
        let sample = family.samples.first { sample in
            labels.allSatisfy { label in sample.labels.contains { $0.name == label.key && $0.value == label.value } }
        }
        guard let sample else { return nil }
        return family.type == .histogram ? Double(sample.count) : sample.value
    }

    @Test("a subscriber's snapshot is counted by topic and code, and shown to monitors as taken for the subscriber")
    func countedAndMonitored() async throws {
        let fixture = try await EngineFixture()
        let (monitor, records) = await fixture.connect(credentials: Self.root)
        _ = try await fixture.call(
            WireNames.session, "monitor", Mentory_V1_MonitorRequest(), from: monitor, as: Mentory_V1_MonitorReply.self)
        let (subscriber, events) = await fixture.connect(credentials: Self.subscriber)
        _ = try await fixture.subscribe(subscriber, to: ["mentor"])
        #expect(await events.next().first?.kind == .snapshot)

        var calls: [Mentory_V1_MonitorCall] = []
        for event in await records.next(2) {
            let record = try Mentory_V1_MonitorRecord(serializedBytes: event.body)
            if case .call(let call) = record.what { calls.append(call) }
        }
        let taken = try #require(calls.first { !$0.topic.isEmpty }, "\(calls)")
        #expect(taken.topic == "mentor")
        #expect(taken.namespace == "mentor" && taken.method.isEmpty)
        #expect(taken.connection == subscriber.rawValue && taken.uid == 0 && taken.pid == 20)
        #expect(taken.code == 0)
        #expect(calls.contains { $0.namespace == "session" && $0.method == "subscribe" })

        let metrics = await fixture.engine.metricsSnapshot()
        #expect(Self.value(metrics, "mentoryd_snapshots_total", ["topic": "mentor", "code": "OK"]) == 1)
        #expect(Self.value(metrics, "mentoryd_snapshot_duration_seconds", ["topic": "mentor"]) == 1)
    }

    @Test("a handler's state that comes after its deadline is not sent: the subscribe fails DEADLINE_EXCEEDED")
    func lateState() async throws {
        // Every deadline has passed by the time any state is taken.
        let fixture = try await EngineFixture(requestTimeout: .nanoseconds(1))
        let (subscriber, _) = await fixture.connect(credentials: Self.subscriber)
        let response = try await fixture.send(
            WireNames.session, "subscribe",
            Mentory_V1_SubscribeRequest.with { $0.topics = [.with { $0.topic = "mentor" }] }, from: subscriber)
        #expect(response.error.code == UInt32(Mentory_V1_ErrorCode.deadlineExceeded.rawValue))
        #expect(response.error.message.contains("snapshot(mentor)"), "\(response.error.message)")
        #expect(await fixture.engine.subscribedTopics(of: subscriber).isEmpty)
        let metrics = await fixture.engine.metricsSnapshot()
        #expect(
            Self.value(metrics, "mentoryd_snapshots_total", ["topic": "mentor", "code": "DEADLINE_EXCEEDED"]) == 1)
    }

    @Test("a plugin's snapshot is asked for with the request deadline, and counted once answered")
    func pluginState() async throws {
        let fixture = try await EngineFixture(pluginCallTimeout: .seconds(600), requestTimeout: .seconds(2))
        try await fixture.engine.declarePlugin(PluginTests.declaration)
        let plugin = try await PluginTests.connectPlugin(fixture, expectedCallTimeoutMs: 600_000)
        let (subscriber, events) = await fixture.connect(credentials: Self.subscriber)
        async let subscribed = fixture.subscribe(subscriber, to: ["advice"])
        let call = try #require(await plugin.sink.nextCall())
        #expect(call.snapshotTopic == "advice")
        #expect(call.timeoutMs > 0 && call.timeoutMs <= 2000, "the request timeout, not the plugin call timeout")
        #expect(!call.caller.known, "a snapshot is the topic's state, taken for no caller")
        await fixture.engine.pluginReply(try PluginTests.reply(call, content: "hello"), from: plugin.id)
        _ = try await subscribed
        #expect(await events.next().first?.kind == .snapshot)
        let metrics = await fixture.engine.metricsSnapshot()
        #expect(Self.value(metrics, "mentoryd_snapshots_total", ["topic": "advice", "code": "OK"]) == 1)
    }
}
