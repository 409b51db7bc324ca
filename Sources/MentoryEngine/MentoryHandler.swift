#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import MentoryWire
import SwiftProtobuf

/// A handler module: it serves one namespace and publishes on its topics.
///
/// Handlers hold no state of their own. Their state lives in the engine, reached through the
/// `isolated` engine parameter every requirement takes; so a handler runs on the engine's
/// executor and never races another.
///
/// A handler publishes with ``MentoryEngine/publish(_:on:)`` only on the topics it declares in
/// ``topics``, and only from its requirements (or tasks they start): the engine runs each of them
/// scoped to the handler's namespace and refuses a publish on another handler's topic.
public protocol MentoryHandler: Sendable {
    /// The namespace this handler serves; requests are routed by it.
    var namespace: String { get }
    /// The methods it answers, as listed in the handshake.
    var methods: [String] { get }
    /// The topics it publishes on.
    var topics: [String] { get }

    /// Prepares the handler's state, for example by loading it from the store. Called once, at registration.
    func open(engine: isolated MentoryEngine) async throws(MentoryError)

    /// Answers one request and returns the serialized reply body.
    func handle(_ call: HandlerCall, engine: isolated MentoryEngine) async throws(MentoryError) -> Data

    /// The current state of `topic`, serialized: the body of snapshot and reset events.
    func snapshot(of topic: String, engine: isolated MentoryEngine) async throws(MentoryError) -> Data

    /// Tells the handler that a connection went away.
    func connectionClosed(_ connection: ConnectionID, engine: isolated MentoryEngine)

    /// Releases what ``open(engine:)`` acquired. Called once, at shutdown.
    func close(engine: isolated MentoryEngine) async
}

extension MentoryHandler {
    public var topics: [String] { [] }
    public func open(engine: isolated MentoryEngine) async throws(MentoryError) {}
    public func snapshot(of topic: String, engine: isolated MentoryEngine) async throws(MentoryError) -> Data {
        Data()
    }
    public func connectionClosed(_ connection: ConnectionID, engine: isolated MentoryEngine) {}
    public func close(engine: isolated MentoryEngine) async {}

    /// The handshake's description of this handler.
    public var handlerDescription: Mentory_V1_HandlerDescription {
        var description = Mentory_V1_HandlerDescription()
        description.namespace = self.namespace
        description.methods = self.methods
        description.topics = self.topics
        return description
    }
}

/// One request as a handler sees it.
public struct HandlerCall: Sendable {
    /// The method name, e.g. `set`.
    public var method: String
    /// The serialized request message.
    public var body: Data
    /// Who is calling.
    public var connection: ConnectionContext

    public init(method: String, body: Data, connection: ConnectionContext) {
        self.method = method
        self.body = body
        self.connection = connection
    }

    /// Decodes the body as `type`, turning a decoding failure into ``MentoryError/invalidArgument(_:)``.
    ///
    /// Decoding `Mentory_V1_Empty` applies ``requireEmptyBody()``.
    public func decode<Body: SwiftProtobuf.Message>(_ type: Body.Type) throws(MentoryError) -> Body {
        if type == Mentory_V1_Empty.self {
            try self.requireEmptyBody()
        }
        do {
            return try Body(serializedBytes: self.body)
        } catch {
            throw .invalidArgument("the body of '\(self.method)' is not a valid \(Body.protoMessageName): \(error)")
        }
    }
}

extension HandlerCall {
    /// Refuses any body: a method whose request is `Empty` takes no bytes at all.
    ///
    /// `Empty` has no fields, so bytes there are either garbage or another message's fields
    /// (possibly sent to the wrong method); protobuf would parse many of them as unknown fields
    /// and succeed, so they are refused outright with ``MentoryError/invalidArgument(_:)``.
    public func requireEmptyBody() throws(MentoryError) {
        guard self.body.isEmpty else {
            throw .invalidArgument(
                "'\(self.method)' takes an empty body (Empty), but the request carried \(self.body.count) bytes")
        }
    }
}

/// Engine-owned state of one handler module: a class the engine creates on first use and keeps.
///
/// It is only reachable through an isolated engine, so it needs no locks and need not be `Sendable`.
public protocol HandlerState: AnyObject {
    init()
}

extension SwiftProtobuf.Message {
    /// The message serialized as a reply or event body.
    public func wireBody() -> Data {
        // Serializing an in-memory proto3 message cannot fail: it has no required fields.
        (try? self.serializedData()) ?? Data()
    }
}
