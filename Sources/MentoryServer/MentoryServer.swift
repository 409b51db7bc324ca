#if canImport(Glibc)
    import Glibc
#endif
import Logging
import MentoryEngine
import MentoryEventLoop
import MentoryHandlerKit
import MentoryWire
import NIOCore
import ServiceLifecycle

/// The Unix socket server: accepts connections and hands their requests to the engine.
///
/// Run it as a service. It binds (or adopts) the socket, reports readiness through `onReady`,
/// serves until graceful shutdown, then stops accepting, closes every connection with a reason
/// and removes the socket file it created.
///
/// Every connection is a ``SocketConnection`` on one ``EpollEventLoop``, the engine's executor, as Redis serves
/// its clients: no channel pipeline between the socket and the protocol (docs/ARCHITECTURE.md).
public final class MentoryServer: Service {
    private let configuration: ServerConfiguration
    private let engine: MentoryEngine
    private let eventLoop: EpollEventLoop
    private let logger: Logger
    private let onReady: @Sendable () async -> Void
    private let tracker: NIOLoopBoundBox<ConnectionTracker>
    /// The end-of-tick flush every connection of the loop shares.
    private let flusher: NIOLoopBoundBox<TickFlusher>
    /// The per-uid budgets every connection of the loop counts in.
    private let budgets: NIOLoopBoundBox<UIDBudgets>
    /// The buffer every connection of the loop reads into.
    private let readBuffer: NIOLoopBoundBox<SocketReadBuffer>
    private let metrics: ServerMetrics

    /// Creates a server whose connections all run on `eventLoop`, which must be the engine's executor.
    public init(
        configuration: ServerConfiguration,
        engine: MentoryEngine,
        eventLoop: EpollEventLoop,
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
        self.readBuffer = NIOLoopBoundBox.makeBoxSendingValue(
            SocketReadBuffer(), as: SocketReadBuffer.self, eventLoop: eventLoop)
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
        let listener = try await self.listen()
        self.logger.info(
            "listening",
            metadata: ["socket": "\(self.configuration.socketPath ?? "(activated)")"]
        )
        await self.onReady()
        try? await gracefulShutdown()
        self.logger.info("shutting down: no longer accepting connections")
        try? await self.eventLoop.submit { listener.value.close() }.get()
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

    /// Binds (or adopts) the listening socket and starts accepting on the loop.
    private func listen() async throws -> NIOLoopBound<SocketListener> {
        Self.raiseFileDescriptorLimit(logger: self.logger)
        let descriptor: Int32
        switch self.configuration.listener {
        case .path(let path):
            try SocketFile.prepare(path: path)
            descriptor = try StreamSocket.listen(unixPath: path, backlog: SocketListener.backlog)
            do {
                try SocketFile.setMode(path: path, mode: self.configuration.socketMode)
            } catch {
                close(descriptor)
                SocketFile.remove(path: path)
                throw error
            }
        case .activatedSocket(let activated, _):
            // systemd passes it blocking; the loop accepts until the kernel says none waits.
            _ = fcntl(activated, F_SETFL, fcntl(activated, F_GETFL) | O_NONBLOCK)
            descriptor = activated
        }
        let accept = self.makeAcceptor()
        let (eventLoop, logger, flusher) = (self.eventLoop, self.logger, self.flusher)
        do {
            return try await self.eventLoop.submit(withSelector: { selector in
                flusher.value.flushAtEndOfTurn(of: selector)
                let listener = try SocketListener.listen(
                    descriptor, selector: selector, eventLoop: eventLoop, logger: logger, accept: accept)
                return NIOLoopBound(listener, eventLoop: eventLoop)
            }).get()
        } catch {
            if case .path(let path) = self.configuration.listener { SocketFile.remove(path: path) }
            throw error
        }
    }

    /// What the listener does with each connection it accepts, on the loop: checks the peer and the limits, then
    /// serves it.
    private func makeAcceptor() -> @Sendable (Int32, EpollSelector) -> Void {
        let configuration = self.configuration
        let engine = self.engine
        let eventLoop = self.eventLoop
        let logger = self.logger
        let tracker = self.tracker
        let metrics = self.metrics
        let flusher = self.flusher
        let budgets = self.budgets
        let readBuffer = self.readBuffer
        return { descriptor, selector in
            // Fail closed: a peer whose credentials the kernel does not report is not served.
            let credentials: PeerCredentials
            do {
                credentials = try PeerCredentialsReader.read(descriptor, logger: logger)
            } catch {
                logger.warning("refused a connection: \(error)", metadata: ["reason": "\(error)"])
                metrics.refusedCredentials.increment()
                return Self.refuse(descriptor, error: .internal("\(error); the connection is refused"))
            }
            let connections = tracker.value
            if connections.open.count >= connections.maxConnections {
                metrics.refusedMaxConnections.increment()
                return Self.refuse(
                    descriptor,
                    error: .tooManyConnections(
                        "the daemon already has \(connections.maxConnections) connections; try again later")
                )
            }
            let perUID = connections.maxConnectionsPerUID
            if connections.count(for: credentials.uid) >= perUID {
                metrics.refusedMaxConnectionsPerUID.increment()
                return Self.refuse(
                    descriptor,
                    error: .tooManyConnections(
                        "uid \(credentials.uid) already has \(perUID) connections; close some first")
                )
            }
            let id = connections.nextID()
            let connection = Connection(
                engine: engine, id: id, configuration: configuration, credentials: credentials, logger: logger,
                metrics: metrics, flusher: flusher.value, budgets: budgets.value)
            do {
                let socket = try SocketConnection.serve(
                    descriptor, connection: connection, selector: selector, eventLoop: eventLoop,
                    readBuffer: readBuffer.value
                ) { tracker.value.remove(id) }
                connections.add(socket, id: id, uid: credentials.uid)
                metrics.accepted.increment()
            } catch {
                connection.removed()
                logger.warning("cannot serve a connection: \(error)", metadata: ["error": "\(error)"])
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

    /// Writes a closing connection error straight to a socket that is not served, then closes it.
    ///
    /// The frame is small and the socket new, so one `send` takes it whole.
    private static func refuse(_ descriptor: Int32, error: MentoryError) {
        var frame = ServerFrameEncoder.connectionErrorFrame(
            error,
            closing: true,
            maxFrameLength: WireProtocol.defaultMaxFrameLength
        )
        _ = StreamSocket.write(descriptor, from: &frame)
        close(descriptor)
    }

    /// Sends every connection a closing `SHUTTING_DOWN` error and closes it once that is written, or
    /// after `limits.shutdownDrainSeconds` for a peer that does not read.
    private func closeConnections() -> EventLoopFuture<Void> {
        let tracker = self.tracker
        let eventLoop = self.eventLoop
        let drain = TimeAmount.seconds(Int64(self.configuration.shutdownDrainSeconds))
        return eventLoop.flatSubmit {
            for socket in tracker.value.open.values { socket.connection.failConnection(.shuttingDown) }
            // Each connection closes itself by the deadline; this is the backstop.
            let backstop = eventLoop.scheduleTask(in: drain + .seconds(1)) {
                for socket in tracker.value.open.values { socket.close() }
            }
            let closed = tracker.value.allClosed(on: eventLoop)
            closed.whenComplete { _ in backstop.cancel() }
            return closed
        }
    }
}
