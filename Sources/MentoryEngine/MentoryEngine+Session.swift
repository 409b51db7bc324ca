#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import MentoryHandlerKit
import MentoryWire
import NIOCore
import SwiftProtobuf

extension MentoryEngine {
    /// Answers a method of the built-in `session` namespace, declared by `service Session` in mentory.proto.
    func handleSession(_ body: ByteBuffer, call: RequestContext) async throws -> ProtobufBuffer {
        guard call.method == MentorySchema.Session.subscribe.name else {
            return try self.handleSessionWithoutSuspending(body, method: call.method, connection: call.connection.id)
        }
        let request = try MentorySchema.Session.subscribe.decodeRequest(body)
        return try await self.subscribe(call.connection.id, to: request).replyBody()
    }

    /// Answers a `session` method that does not suspend; `nil` for `subscribe`, which may.
    func handleSessionImmediately(_ body: ByteBuffer, call: RequestContext) throws -> ProtobufBuffer? {
        try self.handleSessionImmediately(body, method: call.method, connection: call.connection.id)
    }

    /// Answers `session.method` for `connection` if it does not suspend; `nil` for `subscribe`, which may.
    /// The `session` methods need no more of a request's context: the route of one builds none.
    func handleSessionImmediately(_ body: ByteBuffer, method: String, connection: ConnectionID) throws
        -> ProtobufBuffer?
    {
        guard method != MentorySchema.Session.subscribe.name else { return nil }
        // Every other session method answers without suspending.
        return try self.handleSessionWithoutSuspending(body, method: method, connection: connection)
    }

    private func handleSessionWithoutSuspending(_ body: ByteBuffer, method: String, connection: ConnectionID) throws
        -> ProtobufBuffer
    {
        typealias Session = MentorySchema.Session
        switch method {
        case Session.ping.name:
            _ = try Session.ping.decodeRequest(body)
            return Mentory_V1_Empty().replyBody()
        case Session.status.name:
            _ = try Session.status.decodeRequest(body)
            return self.status().replyBody()
        case Session.unsubscribe.name:
            let request = try Session.unsubscribe.decodeRequest(body)
            self.unsubscribe(connection, from: request.topics)
            return Mentory_V1_Empty().replyBody()
        case Session.describe.name:
            let request = try Session.describe.decodeRequest(body)
            return try self.describe(request).replyBody()
        case Session.monitor.name:
            let request = try Session.monitor.decodeRequest(body)
            try self.startMonitor(connection, request)
            return Mentory_V1_MonitorReply().replyBody()
        case Session.metrics.name:
            _ = try Session.metrics.decodeRequest(body)
            return self.metricsSnapshot().replyBody()
        default:
            throw MentoryError.unknownMethod(namespace: Session.name, method: method)
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
        reply.plugins = self.pluginStatuses
        reply.instance = self.configuration.instance
        return reply
    }

    /// Every namespace served, or the one asked for, with the descriptors of all their messages.
    public func describe(_ request: Mentory_V1_DescribeRequest) throws(MentoryError) -> Mentory_V1_DescribeReply {
        var namespaces = self.namespaces
        if !request.namespace.isEmpty {
            namespaces = namespaces.filter { $0.name == request.namespace }
            guard !namespaces.isEmpty else { throw .unknownNamespace(request.namespace) }
        }
        var reply = Mentory_V1_DescribeReply()
        reply.namespaces = namespaces.map(\.wireDescription)
        reply.descriptors = self.describedDescriptors
        return reply
    }
}
