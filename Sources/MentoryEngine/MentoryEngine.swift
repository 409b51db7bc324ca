#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif
import Configuration
import Logging
import MentoryHandlerKit
import MentoryMetrics
import MentoryWire
import NIOCore
import SwiftProtobuf

/// The one owner of mentoryd's session state.
///
/// Connections hand it requests and receive events through an ``EventSink``; handler modules
/// registered in it do the domain work while isolated to it. Give it the server's event loop as
/// its executor and a request costs no hop between threads.
public actor MentoryEngine {
    /// Settings fixed at start-up.
    public struct Configuration: Sendable {
        /// The version string the daemon reports.
        public var serverVersion: String
        /// How many recent events each topic keeps for resuming subscribers.
        public var eventRingCapacity: Int
        /// How many bytes of recent events each topic keeps at most (`events.ringBytes`).
        public var eventRingBytes: Int
        /// Who may call what; can be replaced later with ``MentoryEngine/updateAccessPolicy(_:)``.
        public var accessPolicy: AccessPolicy
        /// The user the daemon runs as, trusted like root by the access policy (its peers could read
        /// the daemon's files anyway); `nil` trusts only root. Defaults to the process's effective uid.
        public var daemonUID: UInt32?
        /// How long a request may take when it names no shorter deadline (`limits.requestTimeoutMilliseconds`).
        public var requestTimeout: Duration
        /// The largest reply body the engine itself builds (`session.metrics`), to fit one frame:
        /// `ReplyBudget.bodyBytes(maxFrameLength:)` of the server's frame limit.
        public var maxReplyBytes: Int
        /// How long a plugin may take to answer a forwarded call, at most
        /// (`limits.pluginCallTimeoutMilliseconds`); a request's shorter deadline wins.
        public var pluginCallTimeout: Duration
        /// Where each declared plugin's last registration is kept across restarts, so that its namespace
        /// is known while it is absent; `nil` keeps none (a plugin's topics are unknown until it registers).
        public var pluginRegistrations: PluginRegistrationFiles?
        /// Which mentoryd this is (a user or the system instance, and its uid), as `session.status` reports it.
        public var instance: Mentory_V1_DaemonInstance
        /// Topic subscriptions one uid's connections may hold together (`limits.uidSubscriptions`); a
        /// `subscribe` past it fails UNAVAILABLE and subscribes nothing.
        public var maxSubscriptionsPerUID: Int
        /// The daemon-wide settings handlers may read (`HandlerSetup.settings`, `HandlerContext.settings`);
        /// a reload may replace them.
        public var handlerSettings: GlobalSettings

        public init(
            serverVersion: String,
            eventRingCapacity: Int = 4096,
            eventRingBytes: Int = 4 << 20,
            accessPolicy: AccessPolicy = .default,
            daemonUID: UInt32? = geteuid(),
            requestTimeout: Duration = .seconds(30),
            maxReplyBytes: Int = ReplyBudget.defaultBodyBytes,
            pluginCallTimeout: Duration = .seconds(5),
            pluginRegistrations: PluginRegistrationFiles? = nil,
            instance: Mentory_V1_DaemonInstance = .init(),
            maxSubscriptionsPerUID: Int = 1024,
            handlerSettings: GlobalSettings = GlobalSettings()
        ) {
            self.serverVersion = serverVersion
            self.eventRingCapacity = eventRingCapacity
            self.eventRingBytes = eventRingBytes
            self.accessPolicy = accessPolicy
            self.daemonUID = daemonUID
            self.requestTimeout = requestTimeout
            self.maxReplyBytes = maxReplyBytes
            self.pluginCallTimeout = pluginCallTimeout
            self.pluginRegistrations = pluginRegistrations
            self.instance = instance
            self.maxSubscriptionsPerUID = maxSubscriptionsPerUID
            self.handlerSettings = handlerSettings
        }
    }

    /// An attached connection: who is on it and where its events go.
    ///
    /// A class, so that looking one up per request or per delivered event costs one retain rather
    /// than a copy of every field. Isolated to the engine.
    final class Connection {
        let context: ConnectionContext
        let sink: any EventSink
        /// The connection and the engine's logger, as every request's context of this connection shares them.
        let caller: RequestContext.Caller
        /// The routes of the methods this connection called last.
        var routes = RouteCache()

        init(context: ConnectionContext, sink: any EventSink, logger: Logger) {
            self.context = context
            self.sink = sink
            self.caller = RequestContext.Caller(connection: context, logger: logger)
        }
    }

    private let executor: any SerialExecutor
    /// The event loop ``executor`` runs on, when the engine was given one: the deadlines of calls forwarded
    /// to plugins are its scheduled tasks.
    nonisolated let eventLoop: (any EventLoop)?
    public nonisolated var unownedExecutor: UnownedSerialExecutor {
        self.executor.asUnownedSerialExecutor()
    }

    /// The executor the engine runs on: the one an actor must share to be reached from the engine without a
    /// hop (the daemon's in-memory store). On an event loop it is the engine's own (`EventLoopExecutor`),
    /// not the loop's.
    package nonisolated var serialExecutor: any SerialExecutor { self.executor }

    /// The engine's settings.
    public nonisolated let configuration: Configuration
    /// The source of wall-clock time for handlers.
    public nonisolated let clock: any SessionClock
    /// A random number drawn at start-up; sequence numbers are only comparable within one epoch.
    public nonisolated let epoch: UInt64
    /// The engine's logger.
    public nonisolated let logger: Logger
    /// Where the daemon's metrics are kept; `session.metrics` replies with its snapshot.
    public nonisolated let metricsFactory: MentoryMetricsFactory
    /// The engine's own metric objects, created once.
    let metrics: EngineMetrics
    /// The engine's background jobs, and its handlers' (``HandlerContext/jobs``): the subscribers' reset
    /// after a plugin registers, the writes of plugins' registrations, the deadlines of calls forwarded to
    /// plugins. Whoever runs the engine runs them: the daemon as a service of its group, started before
    /// the server and stopped after it; tests through their support. Until someone does (or says it will,
    /// ``BackgroundJobs/expectRunner()``), every job is refused at once.
    public nonisolated let jobs: BackgroundJobs

    let startedAt = ContinuousClock.now
    /// What the engine serves: its own namespaces, every handler and plugin namespace (the declared plugins and
    /// the connections that serve them in its ``HandlerRegistry/plugins``), with their routes.
    var registry: HandlerRegistry
    var connections: [ConnectionID: Connection] = [:] {
        // Any change forgets the connection the last request came from; it is looked up again.
        didSet { self.lastConnection = nil }
    }
    /// The attached connection the last request came from (``attachedConnection(_:)``), or `nil`.
    private var lastConnection: Connection?
    /// The topics, their publishers and event rings, and every subscription to them.
    var hub: SubscriptionHub
    /// Who watches the engine from outside: traffic monitors and the metrics refreshers.
    var observers = EngineObservers()
    /// The access policy in force, and the rate limit of the denials logged.
    private(set) var gate: AccessGate
    /// The tasks running requests and resets that suspend, waited for on shut-down.
    var tasks = EngineTasks()

    /// The attached connection `id`: a request's, found without hashing when it comes from the same connection as
    /// the one before (pipelined requests do), else looked up.
    @inline(__always)
    func attachedConnection(_ id: ConnectionID) -> Connection? {
        if let last = self.lastConnection, last.context.id == id { return last }
        return self.lookUpConnection(id)
    }

    /// The attached connection `id`, looked up and kept as the last one; kept out of line.
    @inline(never)
    private func lookUpConnection(_ id: ConnectionID) -> Connection? {
        guard let connection = self.connections[id] else { return nil }
        self.lastConnection = connection
        return connection
    }

    /// The daemon-wide settings handlers see now: ``Configuration/handlerSettings`` until a reload replaces them.
    package var handlerSettings: GlobalSettings { self.registry.handlerSettings }

    /// Creates an engine that runs on `executor`.
    ///
    /// `metrics` is where the engine records and what `session.metrics` reports: the daemon passes
    /// the factory it bootstrapped swift-metrics with; by default the engine keeps its own.
    public init(
        configuration: Configuration,
        executor: any SerialExecutor,
        clock: any SessionClock = SystemSessionClock(),
        logger: Logger = Logger(label: "mentoryd.engine"),
        metrics: MentoryMetricsFactory = MentoryMetricsFactory()
    ) {
        self.init(
            configuration: configuration, executor: executor, eventLoop: nil, clock: clock, logger: logger,
            metrics: metrics)
    }

    /// Creates an engine that runs on `eventLoop`, as the daemon's does: a request costs no hop
    /// between threads, and the deadlines of calls forwarded to plugins are the loop's scheduled tasks.
    /// Its executor (`serialExecutor`) knows when code runs on the loop, so a request whose route suspends
    /// starts inline there and, if it never does suspend, is answered at once.
    public init(
        configuration: Configuration,
        eventLoop: any EventLoop,
        clock: any SessionClock = SystemSessionClock(),
        logger: Logger = Logger(label: "mentoryd.engine"),
        metrics: MentoryMetricsFactory = MentoryMetricsFactory()
    ) {
        self.init(
            configuration: configuration, executor: EventLoopExecutor(eventLoop), eventLoop: eventLoop, clock: clock,
            logger: logger, metrics: metrics)
    }

    private init(
        configuration: Configuration,
        executor: any SerialExecutor,
        eventLoop: (any EventLoop)?,
        clock: any SessionClock,
        logger: Logger,
        metrics: MentoryMetricsFactory
    ) {
        self.configuration = configuration
        self.executor = executor
        self.eventLoop = eventLoop
        self.clock = clock
        self.logger = logger
        self.metricsFactory = metrics
        self.metrics = EngineMetrics(factory: metrics)
        self.jobs = BackgroundJobs(logger: logger)
        self.epoch = UInt64.random(in: 1...UInt64.max)
        self.gate = AccessGate(policy: configuration.accessPolicy, daemonUID: configuration.daemonUID)
        self.hub = SubscriptionHub(
            ringCapacity: configuration.eventRingCapacity, ringBytes: configuration.eventRingBytes,
            maxSubscriptionsPerUID: configuration.maxSubscriptionsPerUID)
        self.registry = HandlerRegistry(handlerSettings: configuration.handlerSettings)
        self.registry.plugins.systemctl = configuration.instance.kind == .user ? "systemctl --user" : "systemctl"
    }

    /// Replaces the access policy, e.g. after a configuration reload. Applies to the next request.
    ///
    /// Logs what the new policy grants beyond the defaults, and ends the subscriptions whose subscribers it
    /// no longer allows to read their topics (each gets an ENDED event).
    public func updateAccessPolicy(_ policy: AccessPolicy) {
        self.gate.replacePolicy(policy)
        self.logPrivilegedGrants()
        self.endRefusedSubscriptions()
    }

    /// Logs, one line each, the privileged methods and topics the access policy grants beyond the defaults
    /// (``AccessPolicy/privilegedGrants(of:)``); the daemon calls it at start, and every policy change does.
    public func logPrivilegedGrants() {
        var privileged: [String] = []
        for namespace in self.namespaces {
            for method in namespace.methods where method.privilege == .owner {
                privileged.append("\(namespace.name).\(method.name)")
            }
            for topic in namespace.topics where topic.reads.isEmpty {
                privileged.append("subscribe:\(topic.name)")
            }
        }
        for grant in self.gate.policy.privilegedGrants(of: privileged) {
            self.logger.notice("access.rules grants \(grant)")
        }
    }

    /// Logs a refused action, at most once a second; the rest are counted in the next line.
    ///
    /// A refusal by `access.rules` names, in `fix`, the rule an operator would write to allow it; a
    /// refusal for want of a method's `privilege`, which no rule grants, says in `needs` who holds it.
    func logDenial(
        _ action: String, connection: ConnectionContext, byRulesOf namespace: String? = nil,
        privilege: Mentory_V1_Privilege = .unspecified
    ) {
        guard
            let metadata = self.gate.denialLog(
                action, connection: connection, byRulesOf: namespace, privilege: privilege, at: .now)
        else { return }
        // The essentials in the message itself, which `journalctl -u` and `systemctl status` show.
        var message = "permission denied: \(action) for \(metadata["peer"].map { "\($0)" } ?? "an unknown peer")"
        if let needs = metadata["needs"] { message += "; it needs \(needs)" }
        if let fix = metadata["fix"] { message += "; \(fix)" }
        self.logger.warning("\(message)", metadata: metadata)
    }

    // MARK: Handler registry

    /// Opens `handler` and hosts it under its namespace.
    ///
    /// `config` is the handler's own section, `handlers.<namespace>` (empty by default). Throws when the namespace or
    /// one of its topics is taken, when the handler's routes do not match its schema, or when it
    /// fails to open; nothing of it is registered then. A ``HandlerConfigurationError`` from `open`
    /// is thrown as INVALID_ARGUMENT naming the key; anything else as INTERNAL.
    package func register<Handler: MentoryHandler>(
        _ handler: Handler,
        config: ConfigReader = ConfigReader(provider: InMemoryProvider(values: [:]))
    ) async throws(MentoryError) {
        let namespace = Handler.Namespace.name
        guard self.namespaceInfo(namespace) == nil else {
            throw .internal("namespace '\(namespace)' is already registered")
        }
        for topic in Handler.Namespace.topics {
            if let owner = self.hub.owner(of: topic.name) {
                throw .internal("topic '\(topic.name)' is already published by '\(owner)'")
            }
        }
        var logger = self.logger
        logger[metadataKey: "namespace"] = "\(namespace)"
        let setup = HandlerSetup(
            namespace: namespace, config: config, logger: logger, clock: self.clock, settings: self.handlerSettings)
        let state: Handler.State
        do {
            state = try await handler.open(setup)
        } catch let error as HandlerConfigurationError {
            throw .invalidArgument("handlers.\(namespace).\(error.key): \(error.message)")
        } catch {
            throw .internal("\(Self.describe(error))")
        }
        let hosted = try Hosted(
            handler, state: state, config: config, logger: logger, clock: self.clock, settings: self.handlerSettings,
            // Unowned: the engine owns its hosted handlers, so a strong capture would be a cycle.
            publisher: { [unowned self] topic, body in self.publish(&body, on: topic) },
            caller: { [unowned self] target, method, body, call in
                try await self.call(target, method, body: body, for: call, from: namespace)
            }, jobs: self.jobs)
        self.registry.handlers[namespace] = hosted
        self.registry.registrationOrder.append(namespace)
        for topic in Handler.Namespace.topics {
            self.hub.declare(topic.name, publishedBy: namespace)
        }
        self.invalidateRoutes()
        self.logger.debug("registered handler", metadata: ["namespace": "\(namespace)"])
    }

    /// Every served namespace's descriptors, merged (and kept until the next registration).
    var describedDescriptors: Google_Protobuf_FileDescriptorSet {
        if let cached = self.registry.describedDescriptorsCache { return cached }
        let merged = SchemaDescriptors.merged(
            [MentorySchema.fileDescriptors]
                + self.registry.registrationOrder.compactMap { self.servedDescriptors($0) })
        self.registry.describedDescriptorsCache = merged
        return merged
    }

    /// Closes every handler, last registered first, after the last plugin registration write. Requests after
    /// this get ``MentoryError/shuttingDown``.
    package func closeHandlers() async {
        self.registry.isShuttingDown = true
        await withCheckedContinuation { self.registry.plugins.awaitRegistrationSaves($0) }
        for namespace in self.registry.registrationOrder.reversed() {
            if let plugin = self.registry.plugins[namespace] {
                plugin.close()
            } else if let handler = self.registry.handlers[namespace] {
                await handler.close()
            }
            self.logger.debug("closed handler", metadata: ["namespace": "\(namespace)"])
        }
    }

    /// Runs `job` as one of ``jobs``; a job refused (no runner, a full queue, shut-down) is logged with
    /// `what` it would have done.
    func runInBackground(_ what: String, _ job: @escaping @Sendable () async -> Void) {
        do throws(BackgroundJobs.Refusal) {
            try self.jobs.submit(job)
        } catch {
            self.logger.error("cannot \(what): \(error)")
        }
    }

    /// Hands every handler its reloaded configuration section; returns the namespaces that refused
    /// theirs, with why (they keep the previous one).
    package func reloadHandlers(
        settings: GlobalSettings? = nil, config: (String) -> ConfigReader
    ) -> [String: String] {
        if let settings { self.registry.handlerSettings = settings }
        var refused: [String: String] = [:]
        // A plugin reads its own configuration; the engine applies `plugins.<name>` (declarePlugins(_:)).
        for namespace in self.registry.registrationOrder {
            guard let handler = self.registry.handlers[namespace] else { continue }
            do {
                try handler.reload(config: config(namespace), settings: self.handlerSettings)
            } catch {
                refused[namespace] = Self.describe(error)
            }
        }
        return refused
    }

    /// The namespaces served, in registration order, `session` and `plugin` first.
    public var namespaces: [NamespaceInfo] {
        EngineHostedNamespace.declared + self.registry.registrationOrder.compactMap { self.namespaceInfo($0) }
    }

    /// The declaration of `namespace`, if anyone serves it: the engine, a handler or a plugin (kept once, in
    /// ``HandlerRegistry/plugins``).
    func namespaceInfo(_ namespace: String) -> NamespaceInfo? {
        EngineHostedNamespace.declared.first { $0.name == namespace }
            ?? self.registry.handlers[namespace]?.info ?? self.registry.plugins[namespace]?.info
    }

    /// The descriptors of the handler or plugin serving `namespace`.
    private func servedDescriptors(_ namespace: String) -> SchemaDescriptors? {
        self.registry.handlers[namespace]?.descriptors ?? self.registry.plugins[namespace]?.descriptors
    }

    /// Every registered handler, in registration order, as the handshake lists them.
    public var handlerDescriptions: [Mentory_V1_HandlerDescription] {
        self.namespaces.map { namespace in
            var description = Mentory_V1_HandlerDescription()
            description.namespace = namespace.name
            description.methods = namespace.methods.map(\.name)
            description.topics = namespace.topics.map(\.name)
            return description
        }
    }

    // MARK: Connections

    /// Introduces a connection that completed its handshake and returns the server's greeting.
    package func attach(_ context: ConnectionContext, sink: any EventSink) -> Mentory_V1_Welcome {
        self.connections[context.id] = Connection(context: context, sink: sink, logger: self.logger)
        var welcome = Mentory_V1_Welcome()
        welcome.protocolVersion = WireProtocol.version
        welcome.serverVersion = self.configuration.serverVersion
        welcome.handlers = self.handlerDescriptions
        welcome.epoch = self.epoch
        return welcome
    }

    /// Forgets a connection: drops its subscriptions and tells every handler.
    ///
    /// A snapshot or reset still being taken for it is abandoned when it completes, and a
    /// `subscribe` still running for it subscribes nothing more.
    package func detach(_ id: ConnectionID) {
        guard self.connections.removeValue(forKey: id) != nil else { return }
        self.pluginDisconnected(id)
        self.hub.unsubscribeAll(id)
        self.observers.monitors[id] = nil
        for namespace in self.registry.registrationOrder {
            // A plugin's own connection going away is handled above (pluginDisconnected).
            self.registry.handlers[namespace]?.connectionClosed(id)
        }
    }

    /// The number of connections that completed the handshake.
    public var connectionCount: Int { self.connections.count }

    /// The number of connections subscribed to at least one topic.
    public var subscriberCount: Int { self.hub.subscriberCount }

    /// Returns at once; used as a liveness probe that proves the engine's executor is running jobs.
    public func probeLiveness() -> UInt64 { self.epoch }

    /// A person's description of an error a handler threw.
    static func describe(_ error: any Error) -> String {
        switch error {
        case let error as MentoryError: error.message
        case let error as any HandlerError: error.message
        default: "\(error)"
        }
    }

    // MARK: Publishing

    /// Publishes a change on `topic` to every subscriber and keeps it for resuming ones.
    ///
    /// Handlers reach this only through their ``HandlerContext``, whose types let them name their
    /// own topics and no others.
    ///
    /// `body` is framed once, in the topic's ring, for every subscriber and every replay: where it is, when it can
    /// be, and it is then a slice of the event's frame, which the handler's reply may share.
    func publish(_ body: inout ProtobufBuffer, on topic: String) {
        guard let (event, subscribers) = self.hub.publish(&body, on: topic, epoch: self.epoch) else {
            self.logger.error("publish on unregistered topic", metadata: ["topic": "\(topic)"])
            return
        }
        if !self.observers.monitors.isEmpty { self.monitorEvent(event, bodyBytes: body.count) }
        guard let subscribers else { return }
        for (id, subscriber) in subscribers where subscriber.delivery == .live {
            self.deliverLive(event, to: id, sink: subscriber.sink)
        }
    }

    /// The sequence number of the newest event on `topic`.
    public func lastSequence(of topic: String) -> UInt64 {
        self.hub.lastSequence(of: topic)
    }

    /// Tells the engine that a connection's event queue has room again; topics that overflowed get a reset.
    ///
    /// Only overflowed topics get one, and each is marked resetting first, so calling this again
    /// while a reset is being taken starts no second reset for the same topic.
    package func sinkDrained(_ id: ConnectionID) async {
        for topic in self.hub.overflowed(of: id) {
            // An earlier suspension may have let another drain begin this topic's reset already.
            guard let generation = self.hub.beginReset(id, topic) else { continue }
            do throws(MentoryError) {
                try await self.sendState(of: topic, to: id, kind: .reset, generation: generation)
            } catch {
                // Logged by sendState; the next drain tries again, or, when the topic's plugin went
                // away meanwhile, its next registration.
                let absent = self.absentPlugin(publishing: topic) != nil
                self.hub.setDelivery(absent ? .held : .overflowed, id, topic)
            }
        }
    }

    func deliver(_ event: SharedEvent, to id: ConnectionID) {
        guard self.hub.entry(id, event.topic)?.delivery == .live,
            let connection = self.connections[id]
        else { return }
        self.deliverLive(event, to: id, sink: connection.sink)
    }

    /// Delivers `event` to `id`, whose subscription to the event's topic is live and whose events go to `sink`.
    private func deliverLive(_ event: SharedEvent, to id: ConnectionID, sink: any EventSink) {
        if !sink.deliver(event) {
            self.hub.setDelivery(.overflowed, id, event.topic)
            self.logger.debug(
                "subscriber queue full; a reset will follow",
                metadata: ["connection": "\(id)", "topic": "\(event.topic)"]
            )
        }
    }

    /// Sends the current state of `topic` as a snapshot or reset, then any events published meanwhile.
    ///
    /// The subscription must be `.resetting` under `generation`. Taking a snapshot may suspend
    /// (a store read), and events published meanwhile are replayed from the ring after it. Should
    /// the ring have moved past the snapshot's sequence by then, replaying would leave a gap, so
    /// the snapshot is taken again until the ring still covers it. Should the connection detach
    /// or the subscription be replaced meanwhile, the snapshot is dropped: the newer owner of the
    /// subscription sends its own. Throws only when the handler fails to take the snapshot.
    func sendState(
        of topic: String,
        to id: ConnectionID,
        kind: Mentory_V1_EventKind,
        generation: UInt64
    ) async throws(MentoryError) {
        var attempts = 0
        while true {
            let sequence = self.lastSequence(of: topic)
            // Through the gate, which checks the topic's reads for the subscriber (ending its subscription
            // when it may no longer read them) and takes the state from the handler or plugin publishing it.
            guard let body = try await self.state(of: topic, for: id, kind: kind) else { return }
            // The snapshot reflects at least every event up to `sequence`; events published while it
            // was being taken follow it, so nothing is lost and no sequence number repeats.
            guard self.hub.entry(id, topic)?.generation == generation,
                let connection = self.connections[id]
            else { return }
            guard self.hub.events(on: topic, after: sequence) != nil else {
                attempts += 1
                if attempts.isMultiple(of: 16) {
                    self.logger.warning(
                        "events outpace snapshots; consider a larger events.ringCapacity",
                        metadata: ["topic": "\(topic)", "attempts": "\(attempts)"]
                    )
                }
                continue
            }
            var event = Mentory_V1_Event()
            event.topic = topic
            event.kind = kind
            event.sequence = sequence
            event.body = body
            event.epoch = self.epoch
            guard connection.sink.deliver(SharedEvent(event)) else {
                self.hub.setDelivery(.overflowed, id, topic)
                return
            }
            if kind == .reset { self.metrics.recordReset(topic) }
            self.hub.setDelivery(.live, id, topic)
            self.replay(topic, after: sequence, to: id)
            return
        }
    }

    func replay(_ topic: String, after sequence: UInt64, to id: ConnectionID) {
        for event in self.hub.events(on: topic, after: sequence) ?? [] {
            self.deliver(event, to: id)
        }
    }
}
