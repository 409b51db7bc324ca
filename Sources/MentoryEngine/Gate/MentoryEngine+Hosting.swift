#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import Configuration
import MentoryHandlerKit
import MentoryWire

/// What a host that tests one handler (`HandlerTestHarness`) asks of the engine: the same gate as a client's
/// request or a subscriber's snapshot, with the error the handler threw kept as it was thrown.
extension MentoryEngine {
    /// Answers `request` from connection `id` through the gate, as ``respond(to:from:received:queued:)`` does,
    /// waiting for a route that suspends; throws the error the work ended with as it was thrown (a handler's
    /// own `HandlerError`, a `MentoryError` of the gate's), where a client would get its wire form.
    package func answer(_ request: InboundRequest, from id: ConnectionID) async throws -> ProtobufBuffer {
        var outcome = self.dispatch(.request(request, from: id, received: .now), answerNow: true)
        if case .admitted(let admitted) = outcome { outcome = await self.complete(admitted) }
        switch outcome {
        case .answered(let reply): return reply
        case .failed(let failure): throw failure.thrown
        default: throw MentoryError.internal("\(request.namespace).\(request.method) answered nothing")
        }
    }

    /// The state of `topic` as a snapshot event for connection `id` carries it, through the gate: the topic's
    /// reads and `subscribe:` rules are checked for that connection, as for a subscriber's. Throws
    /// PERMISSION_DENIED when they refuse it, and what the handler or plugin throws.
    package func snapshot(of topic: String, for id: ConnectionID) async throws -> Data {
        if let connection = self.connections[id],
            let refusal = self.topicRefusal(topic, for: connection.context.credentials)
        {
            throw MentoryError.permissionDenied(namespace: WireNames.session, method: "subscribe(\(topic)): \(refusal)")
        }
        guard let state = try await self.state(of: topic, for: id, kind: .snapshot) else {
            throw MentoryError.invalidArgument("unknown topic '\(topic)'")
        }
        return state
    }

    /// Whether the gate answers `namespace.method` where it arrives, without a task: its route does not suspend.
    package func answersImmediately(_ namespace: String, _ method: String) -> Bool {
        guard case .immediate = self.resolveRoute(namespace, method)?.answer else { return false }
        return true
    }

    /// Hands the handler serving `namespace` a reloaded configuration section, as a reload does; throws what it
    /// throws when it refuses the section, which it keeps the previous one then.
    package func reloadHandler(_ namespace: String, config: ConfigReader, settings: GlobalSettings) throws {
        guard let handler = self.registry.handlers[namespace] else {
            throw MentoryError.unknownNamespace(namespace)
        }
        try handler.reload(config: config, settings: settings)
    }
}
