import Logging
import MentorySystemd
import MentoryWire
import NIOCore
import NIOPosix
import ServiceLifecycle
import Synchronization
import UnixSignals

/// What mentoryd runs when it cannot start but systemd has already handed it its listening socket.
///
/// Exiting would make every client connection start mentoryd again, until systemd's start limit
/// fails `mentoryd.socket` and the socket disappears. Instead mentoryd stays up, degraded: it tells
/// systemd `READY=1` with `STATUS=Failed to start: <cause>`, keeps pinging the watchdog, keeps the
/// socket and answers every connection's first frame with a closing `ConnectionError`
/// (`STARTUP_FAILED`, 20) whose message names the cause and what to do. `SIGTERM` ends it with
/// exit status 0; after fixing the cause, `systemctl restart mentoryd` starts the real daemon.
///
/// Bounds: at most ``maxConnections`` connections at once (more are closed at once), each closed
/// after its answer or after ``answerTimeout``; frames above the default frame limit are refused.
struct StartupFailureServer {
    /// Connections served at once; more are closed without an answer.
    static let maxConnections = 64
    /// How long a connection may stay silent before it is closed.
    static let answerTimeout = TimeAmount.seconds(10)

    /// Why mentoryd cannot start, with what to do: sent to systemd and to every client.
    var cause: String
    /// The listening socket systemd passed.
    var socket: ActivatedSocket
    var notifier: SystemdNotifier
    var watchdogTimeout: Duration?
    var logger: Logger

    /// The error every client gets.
    var wireError: Mentory_V1_Error {
        Mentory_V1_Error(code: .startupFailed, message: "mentoryd cannot start: \(self.cause)")
    }

    /// Serves until `SIGTERM` or `SIGINT`.
    func run() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        do {
            try await self.run(on: group)
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
        try? await group.shutdownGracefully()
    }

    private func run(on group: MultiThreadedEventLoopGroup) async throws {
        let hangups = await UnixSignalsSequence(trapping: .sighup)
        // The service group traps SIGTERM and SIGINT before it starts the listener: a SIGTERM
        // that follows the first answer always finds the handler in place.
        let services: [any Service] = [
            WatchdogService(notifier: self.notifier, timeout: self.watchdogTimeout, logger: self.logger, probe: {}),
            IgnoredHangups(signals: hangups, logger: self.logger),
            Listener(server: self, group: group),
        ]
        let serviceGroup = ServiceGroup(
            configuration: .init(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: self.logger)
        )
        try await serviceGroup.run()
        self.logger.info("stopped (start-up had failed)")
    }

    /// Binds the socket, says `READY=1` with the cause, answers until graceful shutdown, then closes.
    private struct Listener: Service {
        var server: StartupFailureServer
        var group: MultiThreadedEventLoopGroup

        func run() async throws {
            let open = Counter()
            let error = self.server.wireError
            let channel = try await ServerBootstrap(group: self.group)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        guard open.value.add(1, ordering: .relaxed).newValue <= StartupFailureServer.maxConnections
                        else {
                            open.value.subtract(1, ordering: .relaxed)
                            channel.close(promise: nil)
                            return
                        }
                        channel.closeFuture.whenComplete { _ in open.value.subtract(1, ordering: .relaxed) }
                        try channel.pipeline.syncOperations.addHandlers([
                            ByteToMessageHandler(LengthPrefixedFrameDecoder()),
                            MessageToByteHandler(EnvelopeFrameEncoder()),
                            StartupFailureHandler(error: error, timeout: StartupFailureServer.answerTimeout),
                        ])
                    }
                }
                .withBoundSocket(self.server.socket.descriptor)
                .get()
            // The cause in the message itself: `journalctl` and `systemctl status` show MESSAGE only.
            self.server.logger.critical(
                "mentoryd cannot start: \(self.server.cause); it keeps the socket and tells every client why until it is restarted",
                metadata: ["cause": "\(self.server.cause)", "socket": "\(self.server.socket.path ?? "(unnamed)")"]
            )
            self.server.send([.ready, .status("Failed to start: \(self.server.cause)")])
            try? await gracefulShutdown()
            self.server.send([.stopping])
            try? await channel.close()
        }
    }

    fileprivate func send(_ states: [NotifyState]) {
        do {
            try self.notifier.notify(states)
        } catch {
            self.logger.warning("cannot notify the service manager: \(error)", metadata: ["error": "\(error)"])
        }
    }

    /// Open connections, shared by the event loop's child channels.
    fileprivate final class Counter: Sendable {
        let value = Atomic<Int>(0)
    }
}

/// Answers a connection's first frame with a closing `STARTUP_FAILED` error, then closes it.
final class StartupFailureHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = Mentory_V1_Envelope

    private let error: Mentory_V1_Error
    private let timeout: TimeAmount
    private var answered = false
    private var timer: Scheduled<Void>?

    init(error: Mentory_V1_Error, timeout: TimeAmount) {
        self.error = error
        self.timeout = timeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let channel = context.channel
        self.timer = context.eventLoop.scheduleTask(in: self.timeout) { channel.close(promise: nil) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.timer?.cancel()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // Whatever the client said first (a Hello, normally), the answer is the same.
        guard !self.answered else { return }
        self.answered = true
        var envelope = Mentory_V1_Envelope()
        envelope.connectionError.error = self.error
        envelope.connectionError.closing = true
        let channel = context.channel
        context.writeAndFlush(Self.wrapOutboundOut(envelope)).whenComplete { _ in channel.close(promise: nil) }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}

/// Keeps `SIGHUP` from killing the degraded daemon: a reload cannot repair a failed start-up.
private struct IgnoredHangups: Service {
    var signals: UnixSignalsSequence
    var logger: Logger

    func run() async throws {
        for await _ in self.signals.cancelOnGracefulShutdown() {
            self.logger.warning("mentoryd did not start, so there is nothing to reload: fix the cause, then restart it")
        }
    }
}
