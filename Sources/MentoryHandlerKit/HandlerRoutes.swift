import MentoryWire
import NIOCore
import SwiftProtobuf

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// How a handler answers each method of its namespace and takes each topic's snapshot.
///
/// A method answered by `on(_:_:)` runs synchronously on the engine's executor: the daemon answers
/// it on the event loop with no task. One that needs to suspend (a store, another service) is
/// declared with `onAsync(_:_:)` and runs on the engine's executor between its suspension points.
/// One that suspends only sometimes (a store that may be in memory, on the engine's executor) is declared
/// with `onAsync(_:attempt:_:)`: its attempt answers without a task when it can, and the route that may
/// suspend answers when it cannot.
public struct HandlerRoutes<Handler: MentoryHandler> {
    /// Answers a request without suspending.
    public typealias Respond<Request, Reply> =
        @Sendable (Request, RequestContext, HandlerContext<Handler>) throws -> Reply
    /// Answers a request without suspending if it can; `nil` when it cannot (it must then have changed nothing).
    public typealias Attempt<Request, Reply> =
        @Sendable (Request, RequestContext, HandlerContext<Handler>) throws -> Reply?
    /// Answers a request, suspending as it needs to.
    public typealias RespondAsync<Request, Reply> =
        nonisolated(nonsending) @Sendable (Request, RequestContext, HandlerContext<Handler>) async throws -> Reply
    /// Takes the current state of a topic.
    public typealias TakeSnapshot<Snapshot> =
        nonisolated(nonsending) @Sendable (HandlerContext<Handler>) async throws -> Snapshot

    /// Decodes a request body (its frame's bytes, not a copy), answers it, and returns the reply serialized once.
    @usableFromInline
    package typealias ErasedRespond =
        @Sendable (ByteBuffer, RequestContext, HandlerContext<Handler>) throws -> ProtobufBuffer
    /// ``ErasedRespond`` for an ``Attempt``: `nil` when the attempt cannot answer without suspending.
    @usableFromInline
    package typealias ErasedAttempt =
        @Sendable (ByteBuffer, RequestContext, HandlerContext<Handler>) throws -> ProtobufBuffer?
    @usableFromInline
    package typealias ErasedRespondAsync =
        nonisolated(nonsending) @Sendable (ByteBuffer, RequestContext, HandlerContext<Handler>) async throws
        -> ProtobufBuffer

    @usableFromInline
    package enum Route: Sendable {
        case immediate(ErasedRespond)
        case suspending(ErasedRespondAsync)
        /// Attempted without suspending first; answered by the route that may suspend when the attempt cannot.
        case attempted(ErasedAttempt, otherwise: ErasedRespondAsync)
    }

    @usableFromInline
    package private(set) var routes: [String: Route] = [:]
    @usableFromInline
    package private(set) var snapshots: [String: TakeSnapshot<Data>] = [:]
    @usableFromInline
    package private(set) var duplicates: [String] = []

    package init() {}

    /// Answers `method` with `respond`, which must not suspend.
    ///
    /// The route registrations are inlinable so that a handler's routes are specialized for its own request and
    /// reply types where it declares them: generic, each request looked up the metadata of its types (`Reply?`
    /// among them) at run time.
    @inlinable
    public mutating func on<Request, Reply>(
        _ method: MethodSchema<Handler.Namespace, Request, Reply>,
        _ respond: @escaping Respond<Request, Reply>
    ) {
        self.add(method.name) {
            .immediate { body, call, context in
                try respond(try method.decodeRequest(body), call, context).replyBody()
            }
        }
    }

    /// Answers `method` with `respond`, which may suspend.
    @inlinable
    public mutating func onAsync<Request, Reply>(
        _ method: MethodSchema<Handler.Namespace, Request, Reply>,
        _ respond: @escaping RespondAsync<Request, Reply>
    ) {
        self.add(method.name) {
            .suspending { body, call, context in
                let request = try method.decodeRequest(body)
                return try await respond(request, call, context).replyBody()
            }
        }
    }

    /// Answers `method` with `attempt` where it can answer without suspending, and with `respond`, which may
    /// suspend, where it cannot.
    ///
    /// The host calls `attempt` first, where the request arrives, when nothing needs to be reserved before it
    /// runs; a reply from it answers the request with no task. `nil` says it would have to suspend (a store not
    /// in memory, a change that must wait for its turn), and must leave everything as it found it: `respond` then
    /// answers the same request as a task, as it would have without the attempt. The request is decoded again for
    /// `respond`. Errors `attempt` throws answer the request, as `respond`'s do.
    @inlinable
    public mutating func onAsync<Request, Reply>(
        _ method: MethodSchema<Handler.Namespace, Request, Reply>,
        attempt: @escaping Attempt<Request, Reply>,
        _ respond: @escaping RespondAsync<Request, Reply>
    ) {
        self.add(method.name) {
            .attempted(
                { body, call, context in
                    try attempt(try method.decodeRequest(body), call, context)?.replyBody()
                },
                otherwise: { body, call, context in
                    let request = try method.decodeRequest(body)
                    return try await respond(request, call, context).replyBody()
                })
        }
    }

    /// Answers `method` with `respond`, which must not suspend and answers with its reply serialized
    /// (``Serialized``): the change it published, say, so that it is serialized once.
    ///
    /// This and the other overloads answering with ``Serialized`` are disfavoured: where a closure's reply type
    /// cannot be told (one that only throws), it answers with the method's reply message.
    @_disfavoredOverload
    @inlinable
    public mutating func on<Request, Reply>(
        _ method: MethodSchema<Handler.Namespace, Request, Reply>,
        _ respond: @escaping Respond<Request, Serialized<Reply>>
    ) {
        self.add(method.name) {
            .immediate { body, call, context in
                try respond(try method.decodeRequest(body), call, context).bytes
            }
        }
    }

    /// Answers `method` with `respond`, which may suspend and answers with its reply serialized (``Serialized``).
    @_disfavoredOverload
    @inlinable
    public mutating func onAsync<Request, Reply>(
        _ method: MethodSchema<Handler.Namespace, Request, Reply>,
        _ respond: @escaping RespondAsync<Request, Serialized<Reply>>
    ) {
        self.add(method.name) {
            .suspending { body, call, context in
                let request = try method.decodeRequest(body)
                return try await respond(request, call, context).bytes
            }
        }
    }

    /// Answers `method` as `onAsync(_:attempt:_:)` does, with `attempt` and `respond` answering with their
    /// replies serialized (``Serialized``).
    @_disfavoredOverload
    @inlinable
    public mutating func onAsync<Request, Reply>(
        _ method: MethodSchema<Handler.Namespace, Request, Reply>,
        attempt: @escaping Attempt<Request, Serialized<Reply>>,
        _ respond: @escaping RespondAsync<Request, Serialized<Reply>>
    ) {
        self.add(method.name) {
            .attempted(
                { body, call, context in
                    try attempt(try method.decodeRequest(body), call, context)?.bytes
                },
                otherwise: { body, call, context in
                    let request = try method.decodeRequest(body)
                    return try await respond(request, call, context).bytes
                })
        }
    }

    /// Takes `topic`'s snapshot with `take`: the body of snapshot and reset events.
    @inlinable
    public mutating func snapshot<Change, Snapshot>(
        _ topic: TopicSchema<Handler.Namespace, Change, Snapshot>,
        _ take: @escaping TakeSnapshot<Snapshot>
    ) {
        guard self.snapshots[topic.name] == nil else {
            self.duplicates.append("snapshot of topic '\(topic.name)'")
            return
        }
        self.snapshots[topic.name] = { context in try await take(context).wireBody() }
    }

    @usableFromInline
    package mutating func add(_ name: String, _ route: () -> Route) {
        guard self.routes[name] == nil else {
            self.duplicates.append("method '\(name)'")
            return
        }
        self.routes[name] = route()
    }

    /// What ``MentoryHandler/Namespace`` declares but the routes leave unanswered, or declare twice.
    package var problems: [String] {
        var problems = self.duplicates.map { "\($0) is declared twice" }
        for method in Handler.Namespace.methods where self.routes[method.name] == nil {
            problems.append("method '\(method.name)' has no route")
        }
        for topic in Handler.Namespace.topics where self.snapshots[topic.name] == nil {
            problems.append("topic '\(topic.name)' has no snapshot")
        }
        return problems
    }
}

extension SwiftProtobuf.Message {
    /// The message serialized as a reply or event body.
    @inlinable
    public func wireBody() -> Data {
        // Serializing an in-memory proto3 message cannot fail: it has no required fields.
        (try? self.serializedData()) ?? Data()
    }

    /// The message serialized as a reply body, once, into a buffer with room in front for the frame's headers.
    @inlinable
    package func replyBody() -> ProtobufBuffer {
        // `Empty` (the reply of ping and of most writes) serializes to no bytes: skip the serializer.
        if Self.self == Mentory_V1_Empty.self, self.unknownFields.data.isEmpty {
            return .empty
        }
        // Serializing an in-memory proto3 message cannot fail: it has no required fields.
        return (try? self.serializedBytes()) ?? ProtobufBuffer(repeating: 0, count: 0)
    }
}

extension MethodSchema {
    /// Decodes a request body for this method, refusing garbage with ``MentoryError/invalidArgument(_:)``.
    ///
    /// `Empty` takes no bytes at all: bytes there are either garbage or another message's fields,
    /// which protobuf would otherwise accept as unknown fields. Handler routes and the engine's own
    /// `session` methods decode through this one place.
    /// The body is read where it is, in its frame: nothing is copied but the decoded fields.
    @inlinable
    package func decodeRequest(_ body: ByteBuffer) throws(MentoryError) -> Request {
        if Request.self == Mentory_V1_Empty.self {
            try self.checkEmpty(body)
            // No bytes decode to the default message: skip the decoder.
            if let empty = Mentory_V1_Empty() as? Request { return empty }
        }
        do {
            return try Request(serializedBytes: ProtobufBuffer(body))
        } catch {
            throw .invalidArgument("the body of '\(self.name)' is not a valid \(Request.protoMessageName): \(error)")
        }
    }

    /// Refuses bytes in the body of a method that takes `Empty`: they are either garbage or another message's
    /// fields, which protobuf would otherwise accept as unknown fields.
    @usableFromInline
    package func checkEmpty(_ body: ByteBuffer) throws(MentoryError) {
        guard body.readableBytes == 0 else {
            throw .invalidArgument(
                "'\(self.name)' takes an empty body (Empty), but the request carried \(body.readableBytes) bytes")
        }
    }
}

extension MethodSchema where Request == Mentory_V1_Empty {
    /// ``decodeRequest(_:)`` where the method is known to take `Empty` (the engine's `session` methods):
    /// the same answer, without looking up the generic request type at run time.
    package func decodeRequest(_ body: ByteBuffer) throws(MentoryError) -> Mentory_V1_Empty {
        try self.checkEmpty(body)
        return Mentory_V1_Empty()
    }
}

extension Mentory_V1_Empty {
    /// ``SwiftProtobuf/Message/replyBody()`` for `Empty`, which serializes to no bytes (a message made in memory
    /// carries no unknown fields): no serializer, no generic lookups, and no allocation (``ProtobufBuffer/empty``).
    @inlinable
    package func replyBody() -> ProtobufBuffer {
        guard self.unknownFields.data.isEmpty else {
            return (try? self.serializedBytes()) ?? ProtobufBuffer(repeating: 0, count: 0)
        }
        return .empty
    }
}
