#if canImport(Glibc)
    import Glibc
#endif
import Logging
import MentoryEngine
import MentoryHandlerKit
import MentoryWire
import NIOCore
import NIOPosix
import ServiceLifecycle

/// The Unix socket server: accepts connections and hands their requests to the engine.
///
/// Run it as a service. It binds (or adopts) the socket, reports readiness through `onReady`,
/// serves until graceful shutdown, then stops accepting, closes every connection with a reason
/// and removes the socket file it created.
public final class MentoryServer: Service {
    private let configuration: ServerConfiguration
    private let engine: MentoryEngine
    private let eventLoop: any EventLoop
    private let logger: Logger
    private let onReady: @Sendable () async -> Void
    private let tracker: NIOLoopBoundBox<ConnectionTracker>
    /// The end-of-tick flush every connection of the loop shares.
    private let flusher: NIOLoopBoundBox<TickFlusher>
    /// The per-uid budgets every connection of the loop counts in.
    private let budgets: NIOLoopBoundBox<UIDBudgets>
    private let metrics: ServerMetrics

    /// Creates a server whose connections all run on `eventLoop`, which must be the engine's executor.
    public init(
        configuration: ServerConfiguration,
        engine: MentoryEngine,
        eventLoop: any EventLoop,
        logger: Logger,
        onReady: @escaping @Sendable () async -> Void = {}
    ) {
        self.configuration = configuration
        self.engine = engine
        self.eventLoop = eventLoop
        self.logger = logger
        self.onReady = onReady
        self.metrics = ServerMetrics(factory: engine.metricsFactory)
        self.tracker = NIOLoopBoundBox.makeBoxSendingValue(
            ConnectionTracker(
                maxConnections: configuration.maxConnections,
                maxConnectionsPerUID: configuration.maxConnectionsPerUID
            ),
            as: ConnectionTracker.self,
            eventLoop: eventLoop
        )
        self.flusher = NIOLoopBoundBox.makeBoxSendingValue(
            TickFlusher(eventLoop: eventLoop), as: TickFlusher.self, eventLoop: eventLoop)
        let budgets = UIDBudgets(configuration)
        // Replies of up to a frame each are built and freed on several threads (the store's readers): once a
        // burst has drained, glibc keeps the freed pages in its arenas unless asked to give them back.
        let trimLogger = logger
        budgets.onDrainedAfterBurst = {
            if let released = ProcessMemory.trim() {
                trimLogger.debug("queued bytes drained; gave free memory back", metadata: ["released": "\(released)"])
            }
        }
        self.budgets = NIOLoopBoundBox.makeBoxSendingValue(budgets, as: UIDBudgets.self, eventLoop: eventLoop)
    }

    public func run() async throws {
        let budgets = self.budgets
        let tracker = self.tracker
        await self.engine.addMetricsRefresher { engine in
            budgets.value.report(
                to: engine.metricsFactory, subscriptions: engine.subscriptionsPerUID,
                maxConnections: tracker.value.maxConnectionsPerUID,
                maxSubscriptions: engine.configuration.maxSubscriptionsPerUID)
        }
        let channel = try await self.listen()
        self.logger.info(
            "listening",
            metadata: ["socket": "\(self.configuration.socketPath ?? "(activated)")"]
        )
        await self.onReady()
        try? await gracefulShutdown()
        self.logger.info("shutting down: no longer accepting connections")
        try? await channel.close()
        if case .path(let path) = self.configuration.listener {
            SocketFile.remove(path: path)
        }
        try? await self.closeConnections().get()
    }

    /// Changes the connection limits, e.g. after a configuration reload.
    ///
    /// New connections are counted against them at once; connections already open stay open.
    public func updateConnectionLimits(maxConnections: Int, maxConnectionsPerUID: Int) async {
        let tracker = self.tracker
        try? await self.eventLoop.submit {
            tracker.value.maxConnections = maxConnections
            tracker.value.maxConnectionsPerUID = maxConnectionsPerUID
        }.get()
    }

    /// How many connections are open now.
    public func connectionCount() async -> Int {
        let tracker = self.tracker
        return (try? await self.eventLoop.submit { tracker.value.open.count }.get()) ?? 0
    }

    private func listen() async throws -> any Channel {
        Self.raiseFileDescriptorLimit(logger: self.logger)
        let bootstrap = self.makeBootstrap()
        switch self.configuration.listener {
        case .path(let path):
            try SocketFile.prepare(path: path)
            let channel = try await bootstrap.bind(unixDomainSocketPath: path).get()
            do {
                try SocketFile.setMode(path: path, mode: self.configuration.socketMode)
            } catch {
                try? await channel.close()
                SocketFile.remove(path: path)
                throw error
            }
            return channel
        case .activatedSocket(let descriptor, _):
            return try await bootstrap.withBoundSocket(descriptor).get()
        }
    }

    private func makeBootstrap() -> ServerBootstrap {
        let configuration = self.configuration
        let engine = self.engine
        let logger = self.logger
        let tracker = self.tracker
        let metrics = self.metrics
        let flusher = self.flusher
        let budgets = self.budgets
        return ServerBootstrap(group: self.eventLoop)
            .serverChannelOption(.backlog, value: 512)
            .childChannelOption(.autoRead, value: true)
            // A peer that shuts down its writing half mid-frame still gets TRUNCATED_FRAME before the close.
            .childChannelOption(.allowRemoteHalfClosure, value: true)
            .childChannelInitializer { channel in
                PeerCredentialsReader.read(channel, logger: logger).map {
                    Result<PeerCredentials?, any Error>.success($0)
                }.recover { .failure($0) }.flatMapThrowing { read in
                    // Fail closed: a peer whose credentials the kernel does not report is not served.
                    guard case .success(let credentials) = read else {
                        if case .failure(let error) = read {
                            logger.warning("refused a connection: \(error)", metadata: ["reason": "\(error)"])
                            metrics.refusedCredentials.increment()
                            Self.refuse(channel, error: .internal("\(error); the connection is refused"))
                        }
                        return
                    }
                    let connections = tracker.value
                    if connections.open.count >= connections.maxConnections {
                        metrics.refusedMaxConnections.increment()
                        Self.refuse(
                            channel,
                            error: .tooManyConnections(
                                "the daemon already has \(connections.maxConnections) connections; try again later"
                            )
                        )
                        return
                    }
                    let perUID = connections.maxConnectionsPerUID
                    if let uid = credentials?.uid, connections.count(for: uid) >= perUID {
                        metrics.refusedMaxConnectionsPerUID.increment()
                        Self.refuse(
                            channel,
                            error: .tooManyConnections("uid \(uid) already has \(perUID) connections; close some first")
                        )
                        return
                    }
                    let id = connections.add(channel, uid: credentials?.uid)
                    metrics.accepted.increment()
                    channel.closeFuture.whenComplete { _ in tracker.value.remove(id) }
                    let handler = ConnectionHandler(
                        engine: engine,
                        id: id,
                        configuration: configuration,
                        credentials: credentials,
                        logger: logger,
                        metrics: metrics,
                        flusher: flusher.value,
                        budgets: budgets.value
                    )
                    // The handler splits frames itself: one handler, one pipeline pass per read.
                    try channel.pipeline.syncOperations.addHandler(handler)
                }
            }
    }

    /// Raises the soft limit on open files to the hard limit, so the connection limits, not the
    /// kernel, decide how many clients are served.
    private static func raiseFileDescriptorLimit(logger: Logger) {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
        let previous = limit.rlim_cur
        limit.rlim_cur = limit.rlim_max
        if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 {
            logger.debug("raised the open-file limit", metadata: ["from": "\(previous)", "to": "\(limit.rlim_max)"])
        }
    }

    /// Writes a closing connection error straight to a channel that gets no pipeline, then closes it.
    ///
    /// The frame is small and the socket new, so the write completes at once; the close follows it.
    private static func refuse(_ channel: any Channel, error: MentoryError) {
        let frame = ServerFrameEncoder.connectionErrorFrame(
            error,
            closing: true,
            maxFrameLength: WireProtocol.defaultMaxFrameLength
        )
        channel.writeAndFlush(frame).whenComplete { _ in channel.close(promise: nil) }
    }

    /// Sends every connection a closing `SHUTTING_DOWN` error and closes it once that is written, or
    /// after `limits.shutdownDrainSeconds` for a peer that does not read.
    private func closeConnections() -> EventLoopFuture<Void> {
        let tracker = self.tracker
        let eventLoop = self.eventLoop
        let drain = TimeAmount.seconds(Int64(self.configuration.shutdownDrainSeconds))
        return eventLoop.flatSubmit {
            for channel in tracker.value.open.values {
                if let handler = try? channel.pipeline.syncOperations.handler(type: ConnectionHandler.self) {
                    handler.failConnection(.shuttingDown)
                } else {
                    channel.close(promise: nil)
                }
            }
            // Each handler closes its own connection by the deadline; this is the backstop.
            let backstop = eventLoop.scheduleTask(in: drain + .seconds(1)) {
                for channel in tracker.value.open.values { channel.close(promise: nil) }
            }
            let closed = tracker.value.allClosed(on: eventLoop)
            closed.whenComplete { _ in backstop.cancel() }
            return closed
        }
    }
}
