import Configuration
import Logging
import MentoryDiary
import MentoryEngine
import MentoryHandlerKit
import MentoryMentor
import MentoryReachability
import MentoryStorage
import MentoryWire
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
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
/// The harness hosts the handler in the daemon's engine, without sockets: every call, snapshot and
/// publication takes the daemon's own path (its gate: routing, the method's privilege and the access rules for
/// the calling connection, the deadline, request decoding, metrics), and a handler's own error is thrown as it
/// threw it.
///
/// **Calls on the caller's behalf.** A method that calls another namespace (`context.call(_:_:for:)`) reaches
/// the daemon's built-in namespaces (`diary`, `mentor`, `reachability`, over an in-memory store) and any fake
/// registered with ``register(_:config:)``, hosted in a real engine: the call passes the same gate as in the
/// daemon, with the caller's credentials (`call(_:_:from:timeout:)`'s `connection`), the access rules given
/// to ``open(_:config:clock:settings:logger:accessRules:)``, the methods' privileges, the deadline and the
/// loop check. So a test can deny its caller `diary.*` and see the refusal:
///
/// ```swift
/// let harness = try await HandlerTestHarness.open(GratitudeHandler(), accessRules: ["deny uid=1000 diary.*"])
/// let alice = ConnectionContext.test(credentials: PeerCredentials(pid: 1, uid: 1000, gid: 1000))
/// await #expect(throws: (any Error).self) {
///     try await harness.call(GratitudeSchema.Gratitude.fromDiary, .init(), from: alice)
/// }
/// ```
///
/// ``callHosted(_:_:from:timeout:)`` calls those namespaces directly, through the same gate, to set up what a
/// test needs (diary entries, say).
public actor HandlerTestHarness<Handler: MentoryHandler> {
    /// One change the handler published.
    public struct Publication: Sendable {
        /// The topic it was published on.
        public var topic: String
        /// The serialized change message.
        public var body: Data
    }

    /// Whether the handler is open: from ``open(_:config:clock:settings:logger:)`` until ``close()``.
    private var isOpen = false
    /// The handler's methods the gate answers where they arrive, without a task (their routes do not suspend).
    private var immediateMethods: Set<String> = []
    private var nextRequestID: UInt64 = 0
    private let logger: Logger
    private let clock: any SessionClock
    private var settings: GlobalSettings
    /// Hosts the handler under test, and the namespaces it may call on its callers' behalf, behind the daemon's
    /// gate.
    private let host: MentoryEngine
    /// The connections attached to ``host`` so far: a call counts against its connection.
    private var attached: Set<ConnectionID> = []
    /// What the handler published, as a subscriber to its topics was sent it.
    private let publications = PublicationRecorder()

    private init(logger: Logger, clock: any SessionClock, settings: GlobalSettings, accessRules: [String]) throws {
        self.logger = logger
        self.clock = clock
        self.settings = settings
        self.host = MentoryEngine(
            configuration: .init(
                serverVersion: "handler-test", accessPolicy: try AccessPolicy(parsing: accessRules), daemonUID: nil,
                handlerSettings: settings),
            executor: MultiThreadedEventLoopGroup.singleton.next().executor, clock: clock, logger: logger)
        // The handler's background jobs (`context.jobs`) run as in the daemon, until ``close()`` or the harness
        // goes away.
        self.host.jobs.runForTesting()
    }

    deinit {
        self.host.jobs.stop()
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
        try await Self.open(handler, config: config, clock: clock, settings: settings, logger: logger, accessRules: [])
    }

    /// Opens `handler` as ``open(_:config:clock:settings:logger:)`` does, with `accessRules` (as `access.rules`
    /// writes them, e.g. `"deny uid=1000 diary.*"`) deciding the calls it makes on its callers' behalf, as in the
    /// daemon; root and callers without credentials are treated as the daemon treats them.
    public static func open(
        _ handler: Handler,
        config: [AbsoluteConfigKey: ConfigValue] = [:],
        clock: any SessionClock = SystemSessionClock(),
        settings: GlobalSettings = GlobalSettings(),
        logger: Logger = Logger(label: "mentory.handler-test"),
        accessRules: [String]
    ) async throws -> HandlerTestHarness<Handler> {
        let harness = try HandlerTestHarness(logger: logger, clock: clock, settings: settings, accessRules: accessRules)
        try await harness.start(handler, config: ConfigReader(provider: InMemoryProvider(values: config)))
        return harness
    }

    private func start(_ handler: Handler, config: ConfigReader) async throws {
        let store = InMemorySessionStore()
        let namespace = Handler.Namespace.name
        // The built-in namespaces beside it, bar the one under test (the diary handler's own tests, say).
        if namespace != MentorHandler.Namespace.name { try await self.host.register(MentorHandler(store: store)) }
        if namespace != ReachabilityHandler.Namespace.name { try await self.host.register(ReachabilityHandler()) }
        if namespace != DiaryHandler.Namespace.name { try await self.host.register(DiaryHandler(store: store)) }
        try await self.host.register(handler, config: config)
        self.isOpen = true
        for method in Handler.Namespace.methods where await self.host.answersImmediately(namespace, method.name) {
            self.immediateMethods.insert(method.name)
        }
        // Its publications are recorded as a subscriber to its topics gets them, from where they stand now.
        let topics = Handler.Namespace.topics.map(\.name)
        guard !topics.isEmpty else { return }
        let recorder = ConnectionContext(
            id: Self.recorderConnection, clientName: "harness", credentials: PeerCredentials(pid: 1, uid: 0, gid: 0))
        let welcome = await self.host.attach(recorder, sink: self.publications)
        var subscribe = Mentory_V1_SubscribeRequest()
        for topic in topics {
            var subscription = Mentory_V1_TopicSubscription()
            subscription.topic = topic
            subscription.resumeAfter = await self.host.lastSequence(of: topic)
            subscription.epoch = welcome.epoch
            subscribe.topics.append(subscription)
        }
        _ = try await self.host.subscribe(recorder.id, to: subscribe)
    }

    /// The connection that records the handler's publications: not one a test would name.
    private static var recorderConnection: ConnectionID { ConnectionID(UInt64.max) }

    /// Hosts `fake` for its namespace, for the handler under test to call on its callers' behalf (a namespace
    /// served by another handler or by a plugin in the daemon). `config` is its configuration section.
    public func register<Fake: MentoryHandler>(
        _ fake: Fake, config: [AbsoluteConfigKey: ConfigValue] = [:]
    ) async throws {
        try await self.host.register(fake, config: ConfigReader(provider: InMemoryProvider(values: config)))
    }

    /// Calls `method` of a namespace hosted beside the handler under test (a built-in one or a fake) from
    /// `connection`, as a client would: through the daemon's gate, its privilege and access rules included.
    public func callHosted<Target, Request, Reply>(
        _ method: MethodSchema<Target, Request, Reply>,
        _ request: Request,
        from connection: ConnectionContext = .test(),
        timeout: Duration = .seconds(30)
    ) async throws -> Reply {
        await self.attach(connection)
        self.nextRequestID += 1
        var wire = Mentory_V1_Request()
        wire.id = self.nextRequestID
        wire.namespace = Target.name
        wire.method = method.name
        wire.body = try request.serializedData()
        wire.timeoutMs = UInt32(clamping: timeout.components.seconds * 1000)
        let response = await self.host.respond(to: wire, from: connection.id)
        switch response.result {
        case .body(let body): return try Reply(serializedBytes: body)
        case .error(let error):
            throw HostedCallFailure(code: error.code, message: error.message, reason: error.reason)
        case nil: throw MentoryError.internal("\(Target.name).\(method.name) answered nothing")
        }
    }

    /// Introduces `connection` to the host once, so that calls made on its behalf count against it.
    private func attach(_ connection: ConnectionContext) async {
        guard self.attached.insert(connection.id).inserted else { return }
        _ = await self.host.attach(connection, sink: DiscardingSink())
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
        try self.requireOpen()
        await self.attach(connection)
        self.nextRequestID += 1
        var request = Mentory_V1_Request()
        request.id = self.nextRequestID
        request.namespace = Handler.Namespace.name
        request.method = name
        request.body = body
        request.timeoutMs = UInt32(
            clamping: timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        let reply = try await self.host.answer(InboundRequest(request), from: connection.id)
        return Data(reply.buffer.readableBytesView)
    }

    /// Whether `method` is answered without suspending, as the daemon's hot path needs.
    public func answersImmediately<Request, Reply>(
        _ method: MethodSchema<Handler.Namespace, Request, Reply>,
        _ request: Request
    ) throws -> Bool {
        try self.requireOpen()
        return self.immediateMethods.contains(method.name)
    }

    /// The current state of `topic`, as a new subscriber's snapshot event carries it (taken through the gate, for
    /// a root test connection).
    public func snapshot<Change, Snapshot>(
        of topic: TopicSchema<Handler.Namespace, Change, Snapshot>
    ) async throws -> Snapshot {
        try self.requireOpen()
        let connection = ConnectionContext.test()
        await self.attach(connection)
        return try Snapshot(serializedBytes: try await self.host.snapshot(of: topic.name, for: connection.id))
    }

    /// The changes published on `topic` so far, oldest first, decoded.
    public func published<Change, Snapshot>(
        on topic: TopicSchema<Handler.Namespace, Change, Snapshot>
    ) throws -> [Change] {
        try (self.publications.all() as [Publication]).filter { $0.topic == topic.name }.map {
            try Change(serializedBytes: $0.body)
        }
    }

    /// Every change published so far, on any topic, oldest first.
    public var allPublications: [Publication] { self.publications.all() }

    /// Tells the handler (and the namespaces hosted beside it) that `connection` went away.
    public func closeConnection(_ connection: ConnectionID) async throws {
        try self.requireOpen()
        // Told as the daemon tells them, when the engine forgets the connection.
        await self.attach(ConnectionContext(id: connection, clientName: "test", credentials: nil))
        self.attached.remove(connection)
        await self.host.detach(connection)
    }

    /// Hands the handler a new configuration section, and `settings` if given, as a reload does; throws if it
    /// refuses the section (the settings are replaced either way).
    public func reload(config: [AbsoluteConfigKey: ConfigValue], settings: GlobalSettings? = nil) async throws {
        try self.requireOpen()
        if let settings { self.settings = settings }
        try await self.host.reloadHandler(
            Handler.Namespace.name, config: ConfigReader(provider: InMemoryProvider(values: config)),
            settings: self.settings)
    }

    /// Closes the handler; later calls throw `MentoryError.shuttingDown`.
    public func close() async {
        guard self.isOpen else { return }
        self.isOpen = false
        await self.host.closeHandlers()
        self.host.jobs.stop()
    }

    private func requireOpen() throws(MentoryError) {
        guard self.isOpen else { throw .shuttingDown }
    }
}

/// Records the changes the handler under test publishes, as its harness's subscriber to its topics is sent them:
/// it takes every event (never falling behind), and keeps the changes.
private final class PublicationRecorder: EventSink {
    private let changes = NIOLockedValueBox<[(topic: String, body: Data)]>([])

    /// Every change so far, oldest first.
    func all<Handler>() -> [HandlerTestHarness<Handler>.Publication] {
        self.changes.withLockedValue {
            $0.map { HandlerTestHarness<Handler>.Publication(topic: $0.topic, body: $0.body) }
        }
    }

    func answer(_ response: consuming OutboundResponse) {}

    func deliver(_ event: SharedEvent) -> Bool {
        guard event.kind == .change else { return true }
        self.changes.withLockedValue { $0.append((event.topic, event.event.body)) }
        return true
    }
}

/// How a call with ``HandlerTestHarness/callHosted(_:_:from:timeout:)`` failed: the error a client would get.
public struct HostedCallFailure: Error, Sendable, Equatable {
    /// The wire code (`Mentory_V1_ErrorCode`'s raw value), e.g. 11 for PERMISSION_DENIED.
    public var code: UInt32
    /// The message a person reads.
    public var message: String
    /// The namespace's own code for the failure, when it gave one.
    public var reason: String
}

/// Where the harness's host sends what it would send a client: nothing of it is read.
private final class DiscardingSink: EventSink {
    func answer(_ response: consuming OutboundResponse) {}
    func deliver(_ event: SharedEvent) -> Bool { true }
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
