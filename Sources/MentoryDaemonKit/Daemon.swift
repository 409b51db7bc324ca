import Configuration
import Logging
import MentoryDebug
import MentoryDiary
import MentoryEngine
import MentoryEventLoop
import MentoryHandlerKit
import MentoryMentor
import MentoryMetrics
import MentoryReachability
import MentoryServer
import MentoryStorage
import MentorySystemd
import MentoryWire
import NIOCore
import ServiceLifecycle
import UnixSignals

/// Starts mentoryd's parts in order and stops them in reverse: a ``Prelude`` of resources, then a
/// `ServiceGroup` of long-lived services.
///
/// Start-up: the event loop, open the store, register the handlers (the prelude, one after the
/// other), then the services: run the background jobs, bind (or adopt) the socket, then report ready
/// (`READY=1`). Shut-down, on every exit path: say `STOPPING=1`, stop reloading, stop accepting and
/// close connections, stop the watchdog, let a background store check and the engine's background
/// jobs finish (the group, last to first), then close the handlers, close the store, stop the event
/// loop (the prelude unwinding); see docs/ARCHITECTURE.md, "Start-up and shut-down".
struct Daemon {
    /// What systemd handed this process; all of it empty or `nil` when started by hand.
    struct Systemd: Sendable {
        /// Where `READY=1`, `STATUS=`, `RELOADING=1`, `STOPPING=1` and `WATCHDOG=1` go.
        var notifier: SystemdNotifier
        /// The listening socket passed by socket activation.
        var activatedSocket: ActivatedSocket?
        /// `WatchdogSec=`, when systemd expects pings.
        var watchdogTimeout: Duration?

        /// Reads `NOTIFY_SOCKET` from `environment`, and `LISTEN_FDS` and `WATCHDOG_USEC` as libsystemd
        /// finds them in the process environment; checks that a passed socket is a Unix stream listener.
        init(environment: [String: String]) throws {
            self.notifier = SystemdNotifier(environment: environment)
            self.activatedSocket = try SocketActivation.unixStreamListener()
            self.watchdogTimeout = try SystemdWatchdog.timeout()
        }
    }

    let settings: DaemonSettings
    let version: String
    let logger: Logger
    /// The level every logger follows; a reload changes it.
    let logLevel: DynamicLogLevel
    let systemd: Systemd
    /// The swift-metrics backend bootstrapped at start-up; the engine serves its snapshot.
    let metrics: MentoryMetricsFactory
    /// Reads the settings again, for a reload.
    let reloadSettings: @Sendable () async throws -> DaemonSettings
    /// Handlers an embedding package adds to the built-in ones.
    let extraHandlers: [any MentoryHandler]
    /// When the command began to run, for the start-up steps' debug log lines.
    var started = ContinuousClock.now

    /// Runs until `SIGTERM`/`SIGINT` or a failure; every exit path closes what was opened, in reverse.
    ///
    /// Throws ``StartupFailure`` when the store or the handlers cannot be opened, before anything
    /// was served; the caller decides whether to exit or to serve the failure (``StartupFailureServer``).
    func run() async throws {
        let settings = self.settings
        let logger = self.logger
        let version = self.version
        let systemd = self.systemd
        let metrics = self.metrics
        let started = self.started
        let extraHandlers = self.extraHandlers
        let reloadSettings = self.reloadSettings
        let logLevel = self.logLevel
        // Trap SIGHUP before anything can report ready, so an early reload never kills the daemon.
        let hangups = await UnixSignalsSequence(trapping: .sighup)

        // The prelude opens the resources in order, then runs the long-lived services in a group of
        // their own; when they have stopped (last to first), it closes the resources last to first.
        let daemon = PreludeService(logger: logger) { prelude in
            var step = ContinuousClock.now
            // 1. The event loop: the engine and every connection share it, so a request never
            // changes thread. Stopped last.
            let eventLoop = try await prelude.open("event loop", closeDeadline: .seconds(5)) {
                try EpollEventLoop(threadName: "mentoryd-loop")
            } close: { loop in
                try? await loop.shutdownGracefully()
            }
            Self.logStep("event loop", since: &step, logger: logger)
            let engine = Self.makeEngine(
                settings: settings, version: version, eventLoop: eventLoop, logger: logger, metrics: metrics)
            let reloadRequests = ReloadRequests()

            // 2. The store. A store that cannot open ends start-up; systemctl status shows why.
            let stores = try await prelude.open("store", closeDeadline: Self.closeDeadline) {
                let stores: OpenedStores
                do {
                    stores = try await StoreBootstrap.open(
                        settings: settings, eventLoop: eventLoop, executor: engine.serialExecutor, logger: logger)
                } catch {
                    throw StartupFailure(cause: "\(error)")
                }
                return stores
            } close: { stores in
                await stores.close()
            }
            Self.logStep("store open", since: &step, logger: logger)

            // 3. The engine's handlers, in dependency order. Handlers registered so far are closed,
            // in reverse, even if a later one fails to open.
            try await prelude.open("handlers", closeDeadline: Self.closeDeadline) {
                try await Self.registerHandlers(
                    stores: stores, extraHandlers: extraHandlers, reloadRequests: reloadRequests, engine: engine,
                    settings: settings, logger: logger)
            } close: { _ in
                await engine.closeHandlers()
            }
            Self.logStep("handlers open", since: &step, logger: logger)

            // 4. The long-lived services; the server binds the socket, then says READY=1.
            let (readySignal, readyContinuation) = AsyncStream<Void>.makeStream(
                bufferingPolicy: .bufferingNewest(1))
            let status: @Sendable () async -> String = {
                let reply = await engine.status()
                return Self.statusLine(connections: Int(reply.connections), subscribers: Int(reply.subscribers))
            }
            let server = MentoryServer(
                configuration: Self.serverConfiguration(settings: settings, systemd: systemd, logger: logger),
                engine: engine,
                eventLoop: eventLoop,
                logger: logger,
                onReady: {
                    // The store is open, the handlers are registered and the socket is listening.
                    logger.info("ready", metadata: ["version": "\(version)"])
                    let line = await status()
                    do {
                        try systemd.notifier.notify(.ready, .status(line))
                    } catch {
                        logger.warning(
                            "cannot tell systemd that mentoryd is ready: \(error)", metadata: ["error": "\(error)"])
                    }
                    logger.debug(
                        "start-up step",
                        metadata: [
                            "step": "ready", "since_main_ms": "\(Milliseconds(since: started))",
                            "process_cpu_ms": "\(Milliseconds.processCPU)",
                        ]
                    )
                    readyContinuation.yield()
                    readyContinuation.finish()
                }
            )
            let reload = ReloadService(
                notifier: systemd.notifier,
                signals: hangups,
                requests: reloadRequests,
                initial: settings,
                logger: logger,
                readyStatus: { await status() },
                reload: { current in
                    let reloaded = try await reloadSettings()
                    return await Self.apply(
                        reloaded, over: current, logLevel: logLevel, engine: engine, server: server, logger: logger)
                }
            )
            let watchdog = WatchdogService(
                notifier: systemd.notifier,
                timeout: systemd.watchdogTimeout,
                logger: logger,
                probe: { _ = await engine.probeLiveness() }
            )
            let statusReporter = StatusService(notifier: systemd.notifier, logger: logger, status: status)
            // After READY=1, and the last of these to stop (a check under way finishes while the
            // rest shuts down, before the handlers and the store close): a check that passes leaves
            // the service idle; one that finds damage stops the daemon (exit status 1), see
            // StoreVerificationService.
            let verification = StoreVerificationService(
                ready: readySignal, readyContinuation: readyContinuation,
                verify: { await stores.verify?() ?? .pending }, logger: logger)

            // The engine's background jobs, queued from here on; run by the first service, which
            // outlives every service that submits them. On shut-down it waits for the requests and
            // resets still running on the engine first (they may submit jobs), then stops the jobs.
            let jobs = BackgroundJobsService(engine.jobs) {
                _ = await engine.finishTasks(within: engine.jobs.shutdownDeadline)
            }

            // Started in this order, stopped last to first: STOPPING=1 goes out first, the watchdog
            // keeps proving liveness until the server has closed every connection, a background
            // check finishes, and the engine's background jobs finish (within their deadline); then
            // the prelude closes the handlers, the store and the event loop.
            try await PreludeService.runServices(
                [
                    PreludeService.member(jobs, "BackgroundJobs"),
                    PreludeService.member(verification, "StoreVerificationService"),
                    PreludeService.member(watchdog, watchdog.description),
                    PreludeService.member(server, "MentoryServer"),
                    PreludeService.member(reload, "ReloadService"),
                    PreludeService.member(statusReporter, statusReporter.description),
                ],
                logger: logger
            )
        }

        // The one group traps the signals and bounds the shut-down: SIGTERM during the prelude stops
        // start-up after the step under way; later, it reaches the services' group.
        var configuration = ServiceGroupConfiguration(
            services: [PreludeService.member(daemon, "prelude")],
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger
        )
        configuration.maximumGracefulShutdownDuration = Self.gracefulShutdownDeadline(
            drainSeconds: settings.shutdownDrainSeconds)
        configuration.maximumCancellationDuration = Self.cancellationDeadline
        // On return or throw every service has stopped, last to first, and every resource has closed.
        try await ServiceGroup(configuration: configuration).run()
        logger.info("stopped")
    }

    /// The engine, bound to the event loop.
    private static func makeEngine(
        settings: DaemonSettings, version: String, eventLoop: any EventLoop, logger: Logger,
        metrics: MentoryMetricsFactory
    ) -> MentoryEngine {
        MentoryEngine(
            configuration: .init(
                serverVersion: version,
                eventRingCapacity: settings.eventRingCapacity,
                eventRingBytes: settings.eventRingBytes,
                accessPolicy: settings.accessPolicy,
                requestTimeout: .milliseconds(settings.requestTimeoutMilliseconds),
                maxReplyBytes: ReplyBudget.bodyBytes(maxFrameLength: settings.maxFrameLength),
                pluginCallTimeout: .milliseconds(settings.pluginCallTimeoutMilliseconds),
                pluginRegistrations: PluginRegistrationFiles(
                    directory: (settings.stateDirectory.hasSuffix("/")
                        ? settings.stateDirectory : settings.stateDirectory + "/") + "plugins"),
                instance: DaemonInstance.current().wire,
                maxSubscriptionsPerUID: settings.uidSubscriptions,
                handlerSettings: settings.handlerSettings(instance: .current())
            ),
            eventLoop: eventLoop,
            logger: logger,
            metrics: metrics
        )
    }

    /// The server's configuration: the socket passed by systemd, or the configured path.
    private static func serverConfiguration(settings: DaemonSettings, systemd: Systemd, logger: Logger)
        -> ServerConfiguration
    {
        let listener: ServerConfiguration.Listener
        if let activated = systemd.activatedSocket {
            logger.info(
                "adopting the socket passed by systemd",
                metadata: [
                    "fd": "\(activated.descriptor)", "name": "\(activated.name)",
                    "socket": "\(activated.path ?? "(unnamed)")",
                ]
            )
            listener = .activatedSocket(descriptor: activated.descriptor, path: activated.path)
        } else {
            listener = .path(settings.socketPath)
        }
        return ServerConfiguration(
            listener: listener,
            socketMode: settings.socketMode,
            maxFrameLength: settings.maxFrameLength,
            subscriberQueueBytes: settings.subscriberQueueBytes,
            maxRequestsInFlight: settings.maxRequestsInFlight,
            maxConnections: settings.maxConnections,
            maxConnectionsPerUID: settings.maxConnectionsPerUID,
            handshakeTimeoutSeconds: settings.handshakeTimeoutSeconds,
            maxOutboundBytes: settings.maxOutboundBytes,
            shutdownDrainSeconds: settings.shutdownDrainSeconds,
            uidQueuedBytes: settings.uidQueuedBytes,
            uidRequestsInFlight: settings.uidRequestsInFlight,
            totalQueuedBytes: settings.totalQueuedBytes
        )
    }

    /// Registers the enabled handlers and declares the plugins, in dependency order; on a failure,
    /// closes the handlers registered so far and throws a ``StartupFailure``.
    private static func registerHandlers(
        stores: OpenedStores,
        extraHandlers: [any MentoryHandler],
        reloadRequests: ReloadRequests,
        engine: MentoryEngine,
        settings: DaemonSettings,
        logger: Logger
    ) async throws {
        var available: [any MentoryHandler] =
            [
                MentorHandler(store: stores.mentor),
                ReachabilityHandler(),
                DiaryHandler(
                    store: stores.diary,
                    maxReplyBytes: ReplyBudget.bodyBytes(maxFrameLength: settings.maxFrameLength)
                ),
                DaemonHandler(reloads: reloadRequests),
            ] + stores.handlers
        if settings.faultInjection {
            logger.warning(
                "fault injection is enabled (debug.faultInjection): root may freeze the engine; never enable it in production"
            )
            available.append(DebugHandler())
        }
        available += extraHandlers
        let handlers = try Self.enabledHandlers(available, settings: settings, logger: logger)
        do {
            for entry in handlers {
                switch entry {
                case .handler(let handler):
                    let namespace = Self.namespace(of: handler)
                    do throws(MentoryError) {
                        try await engine.register(handler, config: settings.handlerConfig(namespace))
                    } catch {
                        // A handler's configuration it cannot use is a configuration error, like the daemon's own.
                        throw StartupFailure(
                            cause: "the \(namespace) handler cannot start: \(error.message)",
                            exitStatus: error.code == .invalidArgument ? MentorydCommand.configurationExitStatus : 1)
                    }
                case .plugin(let declaration):
                    do {
                        try await engine.declarePlugin(declaration)
                    } catch {
                        throw StartupFailure(
                            cause: "plugin '\(declaration.name)' cannot be declared: \(error)",
                            exitStatus: MentorydCommand.configurationExitStatus)
                    }
                }
            }
        } catch {
            await engine.closeHandlers()
            throw error
        }
        logger.info("handlers registered", metadata: ["namespaces": "\(handlers.map(\.namespace))"])
        // What access.rules opens beyond the privileges, once every privileged method and topic is known.
        await engine.logPrivilegedGrants()
    }

    /// Logs, at debug level, how long the start-up step that just ended took, and restarts the clock.
    private static func logStep(_ name: String, since start: inout ContinuousClock.Instant, logger: Logger) {
        logger.debug("start-up step", metadata: ["step": "\(name)", "ms": "\(Milliseconds(since: start))"])
        start = ContinuousClock.now
    }

    /// A namespace to serve: a handler in this process, or a declared plugin that registers later.
    enum ServedNamespace {
        case handler(any MentoryHandler)
        case plugin(PluginDeclaration)

        var namespace: String {
            switch self {
            case .handler(let handler): Daemon.namespace(of: handler)
            case .plugin(let declaration): declaration.namespace
            }
        }
    }

    /// The handlers the configuration enables and the plugins it declares, each after every
    /// namespace it requires: one graph spans both.
    ///
    /// Throws a ``StartupFailure`` with the configuration's exit status for a cycle or a missing
    /// dependency, naming the chain or what is missing and who needs it.
    static func enabledHandlers(
        _ available: [any MentoryHandler],
        settings: DaemonSettings,
        logger: Logger
    ) throws(StartupFailure) -> [ServedNamespace] {
        var byNamespace: [String: ServedNamespace] = [:]
        var nodes: [HandlerGraph.Node] = []
        var disabled: Set<String> = []
        for handler in available {
            let namespace = Self.namespace(of: handler)
            guard byNamespace[namespace] == nil else {
                throw StartupFailure(
                    cause:
                        "two handlers serve namespace '\(namespace)'; an embedding package may add each namespace once",
                    exitStatus: MentorydCommand.configurationExitStatus)
            }
            let section = settings.handlerConfig(namespace)
            guard section.bool(forKey: "enabled", default: true) else {
                disabled.insert(namespace)
                logger.notice(
                    "handler disabled by configuration: \(namespace) (handlers.\(namespace).enabled is false)",
                    metadata: ["namespace": "\(namespace)"])
                continue
            }
            byNamespace[namespace] = .handler(handler)
            let requires = handler.requires + section.stringArray(forKey: "requires", default: [])
            nodes.append(HandlerGraph.Node(namespace: namespace, requires: requires))
        }
        for plugin in settings.plugins {
            guard byNamespace[plugin.namespace] == nil, plugin.namespace != WireNames.session,
                plugin.namespace != WireNames.plugin
            else {
                throw StartupFailure(
                    cause: Self.takenNamespace(by: plugin), exitStatus: MentorydCommand.configurationExitStatus)
            }
            byNamespace[plugin.namespace] = .plugin(plugin)
            nodes.append(HandlerGraph.Node(namespace: plugin.namespace, requires: plugin.requires))
        }
        do {
            return try HandlerGraph(nodes, disabled: disabled).order.map { byNamespace[$0]! }
        } catch {
            throw StartupFailure(cause: error.description, exitStatus: MentorydCommand.configurationExitStatus)
        }
    }

    /// The namespace a handler serves.
    static func namespace<Handler: MentoryHandler>(of handler: Handler) -> String {
        Handler.Namespace.name
    }

    /// How long closing the handlers, or the store, may take before shut-down moves on.
    static let closeDeadline = Duration.seconds(10)

    /// How long the group's graceful shutdown may take before it cancels its services: the server's
    /// drain (`limits.shutdownDrainSeconds`) and its one-second backstop, the engine's tasks (their deadline
    /// before and after their cancellation), the background jobs' deadline, closing the handlers and the
    /// store, stopping the event loop, and a second to spare. systemd's `TimeoutStopSec=` (90 s in the
    /// shipped units) is longer than this and ``cancellationDeadline`` together.
    static func gracefulShutdownDeadline(drainSeconds: Int) -> Duration {
        .seconds(drainSeconds + 1) + BackgroundJobs.defaultShutdownDeadline * 3 + closeDeadline * 2 + .seconds(5)
            + .seconds(1)
    }

    /// How long cancelled services may take to end before the group stops the process: long enough
    /// for the handlers, the store and the event loop to close in order, each within its deadline.
    static let cancellationDeadline = closeDeadline * 2 + .seconds(10)

    /// The `STATUS=` line `systemctl status` shows.
    static func statusLine(connections: Int, subscribers: Int) -> String {
        "Serving \(connections) connection\(connections == 1 ? "" : "s"), "
            + "\(subscribers) subscriber\(subscribers == 1 ? "" : "s")"
    }

    /// Applies what can change while running and returns the settings now in effect; logs the rest.
    static func apply(
        _ reloaded: DaemonSettings,
        over current: DaemonSettings,
        logLevel: DynamicLogLevel,
        engine: MentoryEngine,
        server: MentoryServer,
        logger: Logger
    ) async -> DaemonSettings {
        var effective = current
        if reloaded.logLevel != current.logLevel {
            logLevel.level = reloaded.logLevel
            effective.logLevel = reloaded.logLevel
            logger.notice(
                "log level changed from \(current.logLevel) to \(reloaded.logLevel)",
                metadata: ["from": "\(current.logLevel)", "to": "\(reloaded.logLevel)"]
            )
        }
        if reloaded.maxConnections != current.maxConnections
            || reloaded.maxConnectionsPerUID != current.maxConnectionsPerUID
        {
            await server.updateConnectionLimits(
                maxConnections: reloaded.maxConnections,
                maxConnectionsPerUID: reloaded.maxConnectionsPerUID
            )
            effective.maxConnections = reloaded.maxConnections
            effective.maxConnectionsPerUID = reloaded.maxConnectionsPerUID
            logger.notice(
                """
                connection limits changed: limits.maxConnections \(reloaded.maxConnections), \
                limits.maxConnectionsPerUID \(reloaded.maxConnectionsPerUID)
                """,
                metadata: [
                    "maxConnections": "\(reloaded.maxConnections)",
                    "maxConnectionsPerUID": "\(reloaded.maxConnectionsPerUID)",
                ]
            )
        }
        if reloaded.accessPolicy != current.accessPolicy {
            await engine.updateAccessPolicy(reloaded.accessPolicy)
            effective.accessPolicy = reloaded.accessPolicy
            logger.notice(
                "access rules changed: \(reloaded.accessPolicy.rules.count) rules",
                metadata: ["rules": "\(reloaded.accessPolicy.rules.count)"])
        }
        if reloaded.plugins != current.plugins {
            effective.plugins = await Self.applyPlugins(
                reloaded.plugins, over: current.plugins, engine: engine, logger: logger)
        }
        // The handlers' view of the settings, with the live ones (the log level) as reloaded.
        let refused = await engine.reloadHandlers(settings: effective.handlerSettings(instance: .current())) {
            namespace in reloaded.handlerConfig(namespace)
        }
        for (namespace, reason) in refused.sorted(by: { $0.key < $1.key }) {
            logger.warning(
                "handler \(namespace) refused its reloaded configuration and keeps the previous one: \(reason)",
                metadata: ["namespace": "\(namespace)", "reason": "\(reason)"]
            )
        }
        effective.config = reloaded.config
        let needRestart = DaemonSettings.changedNeedingRestart(current, reloaded)
        if !needRestart.isEmpty {
            logger.warning(
                """
                changed settings take effect only after a restart (systemctl restart mentoryd): \
                \(needRestart.joined(separator: ", "))
                """,
                metadata: ["settings": "\(needRestart.joined(separator: ", "))"]
            )
        }
        return effective
    }
}

extension Daemon {
    /// Declares the plugins of a reloaded configuration (see ``MentoryEngine/declarePlugins(_:)``) and returns
    /// those in effect: `reloaded`, or `current` when `reloaded` cannot be served as start-up would refuse it
    /// (a namespace a built-in serves, a requirement nothing serves, a cycle), which is logged with the fix.
    static func applyPlugins(
        _ reloaded: [PluginDeclaration],
        over current: [PluginDeclaration],
        engine: MentoryEngine,
        logger: Logger
    ) async -> [PluginDeclaration] {
        let inProcess = await engine.inProcessNamespaces
        if let problem = Self.problem(declaring: reloaded, besides: inProcess) {
            logger.warning(
                "the reloaded plugins sections are not applied, the plugins declared before stay: \(problem)",
                metadata: ["reason": "\(problem)"])
            return current
        }
        let changes = await engine.declarePlugins(reloaded)
        for name in changes.added {
            logger.notice(
                "plugin declared: \(name) (plugins.\(name)); it may register now", metadata: ["plugin": "\(name)"])
        }
        for name in changes.changed {
            logger.notice("plugin declaration changed: \(name) (plugins.\(name))", metadata: ["plugin": "\(name)"])
        }
        for name in changes.removed {
            logger.notice(
                "plugin no longer declared: \(name); its namespace is not served", metadata: ["plugin": "\(name)"])
        }
        for (name, reason) in changes.refused {
            logger.warning(
                "plugin \(name) cannot be declared: \(reason)", metadata: ["plugin": "\(name)", "reason": "\(reason)"])
        }
        let refused = Set(changes.refused.map(\.name))
        return reloaded.filter { !refused.contains($0.name) }
    }

    /// What is wrong with `plugin`, whose namespace a built-in handler (or the engine) serves, and the fix.
    static func takenNamespace(by plugin: PluginDeclaration) -> String {
        "plugin '\(plugin.name)' declares namespace '\(plugin.namespace)', which a built-in handler serves;"
            + " fix plugins.\(plugin.name).namespace"
    }

    /// Why `plugins` cannot be declared beside the in-process namespaces `inProcess`, if it cannot: the checks
    /// start-up makes (``enabledHandlers(_:settings:logger:)``), with the same messages.
    static func problem(declaring plugins: [PluginDeclaration], besides inProcess: [String]) -> String? {
        var nodes = inProcess.map { HandlerGraph.Node(namespace: $0, requires: []) }
        let served = Set(inProcess).union([WireNames.session, WireNames.plugin])
        for plugin in plugins {
            guard !served.contains(plugin.namespace) else {
                return Self.takenNamespace(by: plugin)
            }
            nodes.append(HandlerGraph.Node(namespace: plugin.namespace, requires: plugin.requires))
        }
        do {
            _ = try HandlerGraph(nodes, disabled: [])
            return nil
        } catch {
            return error.description
        }
    }
}

/// Start-up failed before anything was served; ``cause`` says why and what to do.
struct StartupFailure: Error, CustomStringConvertible {
    var cause: String
    /// The exit status when the daemon was started by hand: 78 (`EX_CONFIG`) when the
    /// configuration is to blame, else 1.
    var exitStatus: Int32 = 1
    var description: String { self.cause }
}
