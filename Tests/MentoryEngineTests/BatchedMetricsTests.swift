import MentoryEngine
import MentoryHandlerKit
import MentoryWire
import Testing

@Suite("Requests answered after the first in a batch are recorded when it closes")
struct BatchedMetricsTests {
    /// The `session.ping` sample of `name`: a counter's value, or a histogram's count and sum.
    private static func ping(_ metrics: Mentory_V1_MetricsReply, _ name: String) -> Mentory_V1_MetricSample? {
        metrics.families.first { $0.name == name }?.samples.first { sample in
            sample.labels.contains { $0.name == "namespace" && $0.value == "session" }
                && !sample.labels.contains { $0.name == "method" && $0.value != "ping" }
        }
    }

    @Test("the first is recorded at once; the others when the batch closes, timed from when it was received to then")
    func recordedWhenTheBatchCloses() async throws {
        let fixture = try await EngineFixture()
        let client = ConnectionID(1_000)
        _ = await fixture.engine.attach(
            ConnectionContext(id: client, clientName: "batch", credentials: nil), sink: AnswerSink())
        // Received two seconds ago: each of the batch's requests took at least that long.
        let received = ContinuousClock.now - .seconds(2)
        await fixture.engine.openBatch()
        for id in UInt64(1)...3 {
            let outcome = await fixture.engine.respond(
                to: try InboundRequest.test("session", "ping", id: id), from: client, received: received)
            guard case .answered(let response) = outcome else {
                Issue.record("session.ping did not answer at once: \(outcome)")
                return
            }
            #expect(response.code == 0)
        }
        let open = await fixture.engine.metricsSnapshot()
        #expect(Self.ping(open, "mentoryd_requests_total")?.value == 1, "only the first is recorded while it is open")
        #expect(Self.ping(open, "mentoryd_request_duration_seconds")?.count == 1)

        await fixture.engine.closeBatch(received: received)
        let closed = await fixture.engine.metricsSnapshot()
        #expect(Self.ping(closed, "mentoryd_requests_total")?.value == 3)
        let durations = try #require(Self.ping(closed, "mentoryd_request_duration_seconds"))
        #expect(durations.count == 3)
        #expect(durations.sum >= 6, "three requests of at least two seconds each: \(durations.sum)")

        // Outside a batch, a request is recorded as it is answered.
        _ = await fixture.engine.respond(
            to: try InboundRequest.test("session", "ping", id: 4), from: client, received: .now)
        #expect(Self.ping(await fixture.engine.metricsSnapshot(), "mentoryd_requests_total")?.value == 4)
    }
}
