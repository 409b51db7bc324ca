import MentoryEngine
import MentoryEventLoop
import MentoryHandlerKit
import MentoryWire
import NIOCore

// The engine on the epoll loop (`--transport engine`): mentoryd's own per-frame work on the connection layer that
// BENCHMARKS.md proposes, to measure what the epoll floor predicts for it. The epoll loop (MentoryEventLoop's
// EpollEventLoop, EpollFloor.swift) is the engine's executor, as it is mentoryd's: each read's frames are
// decoded as mentoryd decodes them (`InboundEnvelope`), answered by `MentoryEngine.respond` (the access gate, the
// route, the metrics, the batch) and framed as mentoryd frames a small reply (`ProtobufBuffer.writeResponseFrame`;
// other envelopes with `ByteBuffer.writeFrame`). A Hello attaches the connection and gets the engine's Welcome. The
// memory of a daemon is not there: no store, no handlers but the engine's own `session` namespace, no uid budgets or
// bounds; and a request that suspends (a route that awaits) closes its connection, as does a frame that is not a Hello
// or a request, or is over the frame limit: this serves `session.ping`, the request rows' call.

/// Where the engine sends what a connection did not ask for at once: the engine floor serves no subscriptions
/// and no request that suspends, so there is nothing to deliver.
final class EngineFloorSink: EventSink {
    func answer(_ response: consuming OutboundResponse) {}

    func deliver(_ event: SharedEvent) -> Bool { false }
}

/// mentoryd's engine answering the frames of the epoll loop's connections.
final class EngineAnswerer: EpollAnswerer {
    private let engine: MentoryEngine
    private let loop: EpollEventLoop
    private let sink = EngineFloorSink()

    /// Made on `loop`, which is the engine's executor, as mentoryd's engine runs on its connections' loop.
    init(loop: EpollEventLoop) {
        self.loop = loop
        self.engine = MentoryEngine(
            configuration: MentoryEngine.Configuration(serverVersion: "mentory-floor"), eventLoop: loop)
        self.engine.preconditionIsolated("the engine's executor must be the loop the floor runs on")
    }

    func answerFrames(of connection: EpollConnection, on loop: EpollFloor) -> Bool {
        self.loop.preconditionInEventLoop()
        // SAFETY: as mentoryd's Connection.handlePendingFrames does, the engine-isolated function is called as
        // a non-isolated one: sound on the engine's executor alone, which init checked is the loop and the line above
        // that we are on it; nothing escapes.
        let isolated: (isolated MentoryEngine, EpollConnection, EngineFloorSink) -> Bool = {
            Self.answerFrames(of: $1, engine: $0, sink: $2)
        }
        return unsafeBitCast(isolated, to: ((MentoryEngine, EpollConnection, EngineFloorSink) -> Bool).self)(
            self.engine, connection, self.sink)
    }

    /// Answers the whole frames at the front of `connection.input`, in one batch of the engine's metrics.
    private static func answerFrames(
        of connection: EpollConnection, engine: isolated MentoryEngine, sink: EngineFloorSink
    ) -> Bool {
        let received = ContinuousClock.now
        engine.openBatch()
        defer { engine.closeBatch(received: received) }
        // Split as mentoryd's InboundFrames splits them, within the default frame limit.
        let decoder = LengthPrefixedFrameDecoder()
        do {
            while let frame = try decoder.nextFrame(from: &connection.input) {
                guard Self.answer(frame, of: connection, engine: engine, sink: sink, received: received) else {
                    return false
                }
            }
            return true
        } catch {
            return false  // Over the frame limit.
        }
    }

    /// Answers one frame into `connection.out`; `false` for what the engine floor does not serve.
    private static func answer(
        _ frame: ByteBuffer, of connection: EpollConnection, engine: isolated MentoryEngine,
        sink: EngineFloorSink, received: ContinuousClock.Instant
    ) -> Bool {
        let id = ConnectionID(connection.number)
        switch try? InboundEnvelope(consuming: frame) {
        case .request(let request):
            switch engine.respond(to: request, from: id, received: received) {
            case .answered(var response):
                if let body = response.takeBody() {
                    _ = body.writeResponseFrame(id: response.id, into: &connection.out)
                    return true
                }
                var envelope = Mentory_V1_Envelope()
                envelope.response = response.wireResponse
                connection.out.writeFrame(envelope)
                return true
            case .suspended:
                return false
            }
        case .other(let envelope):
            guard case .hello(let hello) = envelope.kind, !connection.subscribed else { return false }
            connection.subscribed = true
            var welcome = Mentory_V1_Envelope()
            welcome.welcome = engine.attach(ConnectionContext(id: id, clientName: hello.clientName), sink: sink)
            connection.out.writeFrame(welcome)
            return true
        case nil:
            return false
        }
    }

    func closed(_ connection: EpollConnection) {
        guard connection.subscribed else { return }
        let id = ConnectionID(connection.number)
        self.engine.assumeIsolated { engine in engine.detach(id) }
    }
}
