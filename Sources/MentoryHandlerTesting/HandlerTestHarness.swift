import Configuration
import Logging
import MentoryHandlerKit
import MentoryWire
import NIOCore
import SwiftProtobuf

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Hosts one handler the way mentoryd does, in memory, for unit tests: open it, call its methods
/// with typed requests, take its topics' snapshots, and see what it published.
///
/// ```swift
/// let harness = try await HandlerTestHarness.open(GreeterHandler())
/// let reply = try await harness.call(GreeterSchema.Greeter.hello, .with { $0.name = "Ada" })
/// #expect(reply.greeting == "Hello, Ada!")
/// ```
///
/// The harness runs the handler exactly as the daemon does (the same routing, request decoding,
/// schema checks and contexts), but without sockets, an engine or other handlers.
public actor HandlerTestHarness<Handler: MentoryHandler> {
    /// One change the handler published.
    public struct Publication: Sendable {
        /// The topic it was published on.
        public var topic: String
        /// The serialized change message.
        public var body: Data
    }

    private var hosted: Hosted<Handler>?
    private var publications: [Publication] = []
    private var nextRequestID: UInt64 = 0
    private let logger: Logger
    private let clock: any SessionClock
    private var settings: GlobalSettings

    private init(logger: Logger, clock: any SessionClock, settings: GlobalSettings) {
        self.logger = logger
        self.clock = clock
        self.settings = settings
    }

    /// Opens `handler` with `config` as its configuration section (keys relative to `handlers.<namespace>`)
    /// and `settings` as the daemon-wide settings it reads.
    ///
    /// Throws what the handler's `MentoryHandler.open(_:)` throws, or `MentoryError.internal(_:)`
    /// when its routes do not match its schema.
    public static func open(
        _ handler: Handler,
        config: [AbsoluteConfigKey: ConfigValue] = [:],
        clock: any SessionClock = SystemSessionClock(),
        settings: GlobalSettings = GlobalSettings(),
        logger: Logger = Logger(label: "mentory.handler-test")
    ) async throws -> HandlerTestHarness<Handler> {
        let harness = HandlerTestHarness(logger: logger, clock: clock, settings: settings)
        try await harness.start(handler, config: ConfigReader(provider: InMemoryProvider(values: config)))
        return harness
    }

    private func start(_ handler: Handler, config: ConfigReader) async throws {
        let setup = HandlerSetup(
            namespace: Handler.Namespace.name, config: config, logger: self.logger, clock: self.clock,
            settings: self.settings)
        let state = try await handler.open(setup)
        self.hosted = try Hosted(
            handler, state: state, config: config, logger: self.logger, clock: self.clock, settings: self.settings,
            publisher: { topic, body in self.publications.append(Publication(topic: topic, body: body)) })
    }

    /// Calls `method` with `request` from `connection`, as a client would, and returns the reply.
    ///
    /// Throws what the handler throws (`MentoryError` or the handler's own `HandlerError`).
    public func call<Request, Reply>(
        _ method: MethodSchema<Handler.Namespace, Request, Reply>,
        _ request: Request,
        from connection: ConnectionContext = .test(),
        timeout: Duration = .seconds(30)
    ) async throws -> Reply {
        let body = try await self.callRaw(
            method.name, body: request.wireBody(), from: connection, timeout: timeout)
        return try Reply(serializedBytes: body)
    }

    /// Calls method `name` with a raw body, as a client sending anything could.
    public func callRaw(
        _ name: String,
        body: Data,
        from connection: ConnectionContext = .test(),
        timeout: Duration = .seconds(30)
    ) async throws -> Data {
        let hosted = try self.requireOpen()
        self.nextRequestID += 1
        let call = RequestContext(
            requestID: self.nextRequestID, method: name, connection: connection,
            deadline: .now + timeout, logger: self.logger)
        let reply = try await hosted.respond(method: name, body: ByteBuffer(bytes: body), call: call)
        return Data(reply.buffer.readableBytesView)
    }

    /// Whether `method` is answered without suspending, as the daemon's hot path needs.
    public func answersImmediately<Request, Reply>(
        _ method: MethodSchema<Handler.Namespace, Request, Reply>,
        _ request: Request
    ) throws -> Bool {
        let hosted = try self.requireOpen()
        let call = RequestContext(
            requestID: 0, method: method.name, connection: .test(), deadline: .now + .seconds(30),
            logger: self.logger)
        let body = ByteBuffer(bytes: request.wireBody())
        return try hosted.respondImmediately(method: method.name, body: body, call: call) != nil
    }

    /// The current state of `topic`, as a new subscriber's snapshot event carries it.
    public func snapshot<Change, Snapshot>(
        of topic: TopicSchema<Handler.Namespace, Change, Snapshot>
    ) async throws -> Snapshot {
        let hosted = try self.requireOpen()
        return try Snapshot(serializedBytes: try await hosted.snapshot(of: topic.name))
    }

    /// The changes published on `topic` so far, oldest first, decoded.
    public func published<Change, Snapshot>(
        on topic: TopicSchema<Handler.Namespace, Change, Snapshot>
    ) throws -> [Change] {
        try self.publications.filter { $0.topic == topic.name }.map { try Change(serializedBytes: $0.body) }
    }

    /// Every change published so far, on any topic, oldest first.
    public var allPublications: [Publication] { self.publications }

    /// Tells the handler that `connection` went away.
    public func closeConnection(_ connection: ConnectionID) throws {
        try self.requireOpen().connectionClosed(connection)
    }

    /// Hands the handler a new configuration section, and `settings` if given, as a reload does; throws if it
    /// refuses the section (the settings are replaced either way).
    public func reload(config: [AbsoluteConfigKey: ConfigValue], settings: GlobalSettings? = nil) throws {
        if let settings { self.settings = settings }
        try self.requireOpen().reload(
            config: ConfigReader(provider: InMemoryProvider(values: config)), settings: self.settings)
    }

    /// Closes the handler; later calls throw `MentoryError.shuttingDown`.
    public func close() async {
        guard let hosted = self.hosted else { return }
        self.hosted = nil
        await hosted.close()
    }

    private func requireOpen() throws(MentoryError) -> Hosted<Handler> {
        guard let hosted = self.hosted else { throw .shuttingDown }
        return hosted
    }
}

/// A clock that always says the same time, for handler tests.
public struct FixedSessionClock: SessionClock {
    /// The time it says.
    public let date: Date

    /// A clock stopped at `date`.
    public init(_ date: Date = Date(timeIntervalSince1970: 1_795_300_000)) {
        self.date = date
    }

    public func now() -> Date { self.date }
}

extension ConnectionContext {
    /// A connection as a test names it: client `test`, root's credentials unless told otherwise.
    public static func test(
        id: UInt64 = 1,
        credentials: PeerCredentials? = PeerCredentials(pid: 1, uid: 0, gid: 0)
    ) -> ConnectionContext {
        ConnectionContext(id: ConnectionID(id), clientName: "test", credentials: credentials)
    }
}
