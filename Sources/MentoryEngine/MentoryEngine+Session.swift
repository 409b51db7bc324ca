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
