import Foundation
import MentoryEngine
import MentoryWire
import NIOCore
import SwiftProtobuf
import Testing

@testable import MentoryServer

/// The value of the sample of family `name` whose labels are exactly `labels`, if any.
func metric(_ reply: Mentory_V1_MetricsReply, _ name: String, _ labels: [String: String] = [:]) -> Double? {
    reply.families.first { $0.name == name }?.samples.first { sample in
        Dictionary(uniqueKeysWithValues: sample.labels.map { ($0.name, $0.value) }) == labels
    }?.value
}

@Suite("ConnectionHandler: metrics")
struct ConnectionMetricsTests {
    @Test("requests are counted by declared namespace, method and code; undeclared names count as unknown")
    func requestCounts() async throws {
        let harness = try await Harness()
        try await harness.handshake()
        try await harness.send((1...5).map { Harness.request($0, "session", "ping") })
        try await harness.send([Harness.request(6, "blob", "nope"), Harness.request(7, "weather", "get")])
        // A hostile client inventing names: none of them becomes a label.
        try await harness.send((100..<300).map { Harness.request($0, "blob", "m\($0)") })
        try await harness.send((300..<500).map { Harness.request($0, "ns\($0)", "m\($0)") })
        let replies = try await harness.received()
        #expect(replies.count == 407)

        try await harness.send([Harness.request(1000, "session", "metrics")])
        let frames = try await harness.received()
        let body = try #require(frames.first { $0.response.id == 1000 }?.response.body)
        let reply = try Mentory_V1_MetricsReply(serializedBytes: body)
        let requests = "mentoryd_requests_total"
        #expect(metric(reply, requests, ["namespace": "session", "method": "ping", "code": "OK"]) == 5)
        #expect(metric(reply, requests, ["namespace": "blob", "method": "unknown", "code": "UNKNOWN_METHOD"]) == 201)
        #expect(
            metric(reply, requests, ["namespace": "unknown", "method": "unknown", "code": "UNKNOWN_NAMESPACE"]) == 201)
        let family = try #require(reply.families.first { $0.name == requests })
        #expect(family.samples.count == 3, "no label set per invented name: \(family.samples.count)")
        let durations = try #require(reply.families.first { $0.name == "mentoryd_request_duration_seconds" })
        #expect(durations.type == .histogram)
        #expect(Set(durations.samples.map { $0.labels.first?.value }) == ["session", "blob", "unknown"])
        #expect(durations.samples.map(\.count).reduce(0, +) == 407)
        // The five pings came in one read, one batch: the first was recorded as it was answered, the others when
        // the batch closed.
        let session = try #require(durations.samples.first { $0.labels.first?.value == "session" })
        #expect(session.count == 5)
        #expect(metric(reply, "mentoryd_connections") == 1)
        _ = try await harness.channel.finish()
    }

    @Test("publishing, resets and outbound back-pressure are counted")
    func eventsAndBackPressure() async throws {
        let harness = try await Harness {
            $0.subscriberQueueBytes = 8192
            $0.maxOutboundBytes = 16384
        }
        try await harness.handshake()
        try await harness.send([try Harness.subscribeToBlob(1)])
        _ = try await harness.received()
        #expect(metric(await harness.engine.metricsSnapshot(), "mentoryd_subscribers") == 1)
        try await harness.peer { $0.holding = true }
        try await harness.send((2...41).map { Harness.blob($0, bytes: 1000, method: "publish") })
        try await harness.peer {
            $0.holding = false
            $0.release()
        }
        await harness.channel.testingEventLoop.run()
        let frames = try await harness.received()
        #expect(frames.events.last?.kind == .reset)

        let reply = await harness.engine.metricsSnapshot()
        #expect(metric(reply, "mentoryd_events_published_total", ["topic": "blob"]) == 40)
        #expect(metric(reply, "mentoryd_subscriber_resets_total", ["topic": "blob"]) == 1)
        #expect(metric(reply, "mentoryd_outbound_backpressure_total") == 0, "16 KiB were never reached")

        // Replies the peer does not take: the outbound bound is reached.
        try await harness.peer { $0.holding = true }
        try await harness.send((100...140).map { Harness.blob($0, bytes: 1000) })
        #expect((metric(await harness.engine.metricsSnapshot(), "mentoryd_outbound_backpressure_total") ?? 0) >= 1)
        try await harness.peer {
            $0.holding = false
            $0.release()
        }
        await harness.channel.testingEventLoop.run()

        // Changes are counted as of each read of the metrics, each once, however often they are read.
        try await harness.send((200...204).map { Harness.blob($0, bytes: 10, method: "publish") })
        await harness.channel.testingEventLoop.run()
        for _ in 0..<2 {
            let later = await harness.engine.metricsSnapshot()
            #expect(metric(later, "mentoryd_events_published_total", ["topic": "blob"]) == 45)
        }
        _ = try await harness.channel.finish()
    }
}
