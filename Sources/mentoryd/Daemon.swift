import Logging
import MentoryDiary
import MentoryEngine
import MentoryMentor
import MentoryReachability
import MentoryServer
import MentoryStorage
import MentoryWire
import NIOCore
import NIOPosix
import ServiceLifecycle

/// Starts mentoryd's parts in order and stops them in reverse.
///
/// Start-up: open the store, register the handlers, bind the socket, then report ready.
/// Shut-down: stop accepting and close connections, close the handlers, close the store.
struct Daemon {
    let settings: DaemonSettings
    let version: String
    let logger: Logger

    func run() async throws {
        // The engine and every connection share one event loop: a request never changes thread.
        let eventLoopGroup = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        do {
            try await self.run(on: eventLoopGroup.next())
        } catch {
            try? await eventLoopGroup.shutdownGracefully()
            throw error
        }
        try await eventLoopGroup.shutdownGracefully()
    }

    private func run(on eventLoop: any EventLoop) async throws {

        // 1. The store.
        let stores = try await StoreBootstrap.open(settings: self.settings, logger: self.logger)

        // 2. The engine and its handlers.
        let engine = MentoryEngine(
            configuration: .init(serverVersion: self.version, eventRingCapacity: self.settings.eventRingCapacity),
            executor: eventLoop.executor,
            logger: self.logger
        )
        let handlers: [any MentoryHandler] = [
            MentorHandler(store: stores.mentor),
            ReachabilityHandler(),
            DiaryHandler(store: stores.diary),
        ] + stores.handlers
        for handler in handlers {
            try await engine.register(handler)
        }
        self.logger.info("handlers registered", metadata: ["namespaces": "\(handlers.map(\.namespace))"])

        // 3. The socket, then readiness.
        let logger = self.logger
        let server = MentoryServer(
            configuration: ServerConfiguration(
                listener: .path(self.settings.socketPath),
                socketMode: self.settings.socketMode,
                maxFrameLength: self.settings.maxFrameLength,
                subscriberQueueBytes: self.settings.subscriberQueueBytes,
                maxRequestsInFlight: self.settings.maxRequestsInFlight,
                maxConnections: self.settings.maxConnections,
                handshakeTimeoutSeconds: self.settings.handshakeTimeoutSeconds
            ),
            engine: engine,
            eventLoop: eventLoop,
            logger: self.logger,
            onReady: {
                logger.info("ready", metadata: ["version": "\(version)"])
            }
        )
        let group = ServiceGroup(
            configuration: .init(
                services: [server],
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: self.logger
            )
        )
        try await group.run()

        // Reverse order: the server has closed its socket and connections; now handlers, then store.
        await engine.closeHandlers()
        await stores.close()
        self.logger.info("stopped")
    }
}
