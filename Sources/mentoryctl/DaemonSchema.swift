import Foundation
import MentoryClient
import MentoryDescriptors
import MentoryDomain
import MentoryWire
import SwiftProtobuf

/// What `session.describe` says about the daemon, with a transcoder for every message it names.
struct DaemonSchema {
    /// The namespaces, as described.
    let namespaces: [Mentory_V1_NamespaceDescription]
    /// The daemon's descriptors.
    let pool: DescriptorPool

    /// Asks the daemon. A daemon that predates `session.describe` (it answers UNKNOWN_METHOD) is
    /// described by the namespaces this mentoryctl was built with, those its handshake lists.
    static func fetch(_ client: MentoryClient, namespace: String = "") async throws -> DaemonSchema {
        let reply: Mentory_V1_DescribeReply?
        do {
            reply = try await client.describe(namespace: namespace)
        } catch  where error.remoteCode == .unknownMethod {
            reply = nil
        }
        return try Self.make(from: reply, welcome: client.welcome, namespace: namespace)
    }

    /// ``fetch(_:namespace:)`` over a blocking connection.
    static func fetch(_ client: BlockingMentoryConnection, namespace: String = "") throws -> DaemonSchema {
        let reply: Mentory_V1_DescribeReply?
        do {
            reply = try client.describe(namespace: namespace)
        } catch  where error.remoteCode == .unknownMethod {
            reply = nil
        }
        return try Self.make(from: reply, welcome: client.welcome, namespace: namespace)
    }

    /// The schema `reply` describes; without one (a daemon that predates `session.describe`), the
    /// built-in namespaces the handshake lists.
    private static func make(
        from reply: Mentory_V1_DescribeReply?, welcome: Mentory_V1_Welcome, namespace: String
    ) throws -> DaemonSchema {
        guard let reply else {
            let registered = Set(welcome.handlers.map(\.namespace))
            let builtIn = try Self.builtIn(namespace: namespace)
            return DaemonSchema(
                namespaces: builtIn.namespaces.filter { registered.contains($0.namespace) }, pool: builtIn.pool)
        }
        do {
            return DaemonSchema(namespaces: reply.namespaces, pool: try DescriptorPool(reply.descriptors))
        } catch {
            throw MentoryClientError.malformedReply("the daemon's descriptors are unusable: \(error.message)")
        }
    }

    /// The namespaces of mentory.proto and mentory_domain.proto, as this mentoryctl was built with them.
    static func builtIn(namespace: String = "") throws -> DaemonSchema {
        let namespaces = (MentorySchema.namespaces + MentoryDomainSchema.namespaces).filter {
            namespace.isEmpty || $0.name == namespace
        }
        return DaemonSchema(
            namespaces: namespaces.map(\.wireDescription),
            pool: try DescriptorPool(SchemaDescriptors.merged([MentoryDomainSchema.fileDescriptors])))
    }

    func namespace(_ name: String) -> Mentory_V1_NamespaceDescription? {
        self.namespaces.first { $0.namespace == name }
    }

    /// Every topic of every namespace, in the order described.
    var topics: [Mentory_V1_TopicDescription] { self.namespaces.flatMap(\.topics) }

    /// The message name of `event`'s body: the topic's change or snapshot message.
    func eventMessage(_ event: Mentory_V1_Event) -> String? {
        guard let topic = self.topics.first(where: { $0.name == event.topic }) else { return nil }
        return event.kind == .change ? topic.change : topic.snapshot
    }

    /// `event`'s body as JSON, or `nil` when no topic describes it or it does not decode.
    func eventBodyJSON(_ event: Mentory_V1_Event, options: JSONOutputOptions) -> String? {
        guard let name = self.eventMessage(event) else { return nil }
        return try? self.pool.jsonString(fromBinary: event.body, messageName: name, options: options)
    }

    /// The name of an error code, e.g. `NOT_FOUND`, from the protocol's `ErrorCode` enum.
    static func errorName(_ code: UInt32) -> String {
        let pool = try? DescriptorPool(SchemaDescriptors.merged([MentorySchema.fileDescriptors]))
        guard let name = pool?.enumType(named: "mentory.v1.ErrorCode")?.name(of: Int32(truncatingIfNeeded: code))
        else { return "UNKNOWN_CODE" }
        return name.hasPrefix("ERROR_CODE_") ? String(name.dropFirst("ERROR_CODE_".count)) : name
    }
}

extension Output {
    /// An event as one JSON line: topic, sequence, kind, epoch and the body decoded through the
    /// daemon's descriptors (base64 when no topic describes it).
    static func eventJSON(_ event: Mentory_V1_Event, schema: DaemonSchema) -> String {
        let kind =
            switch event.kind {
            case .snapshot: "snapshot"
            case .reset: "reset"
            default: "change"
            }
        // 64-bit integers stay numbers, as in every other --json output of mentoryctl.
        let body =
            schema.eventBodyJSON(event, options: JSONOutputOptions(int64AsNumbers: true))
            ?? "\"\(event.body.base64EncodedString())\""
        let topic = self.json(Google_Protobuf_StringValue(event.topic))
        return #"{"topic":\#(topic),"sequence":\#(event.sequence),"kind":"\#(kind)","epoch":\#(event.epoch),"#
            + #""body":\#(body)}"#
    }
}
