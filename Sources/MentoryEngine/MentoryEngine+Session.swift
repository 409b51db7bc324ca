#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import MentoryWire

/// The methods of the built-in `session` namespace.
public enum SessionMethod: String, CaseIterable, Sendable {
    case ping
    case status
    case subscribe
    case unsubscribe
    case metrics
}

extension MentoryEngine {
    func handleSession(_ call: HandlerCall) async throws(MentoryError) -> Data {
        guard let method = SessionMethod(rawValue: call.method) else {
            throw .unknownMethod(namespace: WireNames.session, method: call.method)
        }
        switch method {
        case .ping:
            try call.requireEmptyBody()
            return Mentory_V1_Empty().wireBody()
        case .status:
            try call.requireEmptyBody()
            return self.status().wireBody()
        case .subscribe:
            let request = try call.decode(Mentory_V1_SubscribeRequest.self)
            return try await self.subscribe(call.connection.id, to: request).wireBody()
        case .unsubscribe:
            let request = try call.decode(Mentory_V1_UnsubscribeRequest.self)
            self.unsubscribe(call.connection.id, from: request.topics)
            return Mentory_V1_Empty().wireBody()
        case .metrics:
            _ = try call.decode(Mentory_V1_MetricsRequest.self)
            return self.metricsSnapshot().wireBody()
        }
    }

    /// The daemon's vital signs, as `session.status` reports them.
    public func status() -> Mentory_V1_StatusReply {
        var reply = Mentory_V1_StatusReply()
        reply.serverVersion = self.configuration.serverVersion
        reply.uptimeSeconds = self.uptimeSeconds
        reply.connections = UInt32(self.connectionCount)
        reply.handlers = self.handlerDescriptions
        reply.subscribers = UInt32(self.subscriberCount)
        reply.topics = self.topicPositions
        reply.epoch = self.epoch
        return reply
    }
}
