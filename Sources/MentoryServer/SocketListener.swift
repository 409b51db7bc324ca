#if canImport(Glibc)
    import Glibc
#endif
import Logging
import MentoryEventLoop
import NIOCore

/// The listening socket on the server's ``EpollEventLoop``: accepts every connection waiting when it is readable,
/// and hands each to the server.
///
/// When accepting fails for want of a resource (descriptors, memory), it stops watching the socket for a second, as
/// NIO's server channel backs off, rather than spin on a socket that stays readable; the connections waiting stay
/// in the backlog.
final class SocketListener: EpollHandler {
    /// The kernel's queue of connections not accepted yet.
    static let backlog: Int32 = 512
    /// How long accepting pauses after a failure.
    static let backOff = TimeAmount.seconds(1)

    private let descriptor: Int32
    private let eventLoop: any EventLoop
    private let logger: Logger
    /// Serves (or refuses) one accepted connection.
    private let accept: (Int32, EpollSelector) -> Void
    private var registration: EpollRegistration?
    /// How many times accepting has backed off.
    private(set) var backOffs = 0

    /// Accepts on the listening, non-blocking socket `descriptor` with `selector` until ``close()``, handing every
    /// connection to `accept`. Closes `descriptor` and throws if it cannot be watched. Call on the loop.
    static func listen(
        _ descriptor: Int32, selector: EpollSelector, eventLoop: any EventLoop, logger: Logger,
        accept: @escaping (Int32, EpollSelector) -> Void
    ) throws(EpollError) -> SocketListener {
        let listener = SocketListener(descriptor: descriptor, eventLoop: eventLoop, logger: logger, accept: accept)
        do {
            listener.registration = try selector.register(descriptor, interest: .readable, handler: listener)
        } catch {
            Glibc.close(descriptor)
            throw error
        }
        return listener
    }

    private init(
        descriptor: Int32, eventLoop: any EventLoop, logger: Logger, accept: @escaping (Int32, EpollSelector) -> Void
    ) {
        self.descriptor = descriptor
        self.eventLoop = eventLoop
        self.logger = logger
        self.accept = accept
    }

    /// Whether the socket is watched for connections: open, and not backing off.
    var isAccepting: Bool { self.registration?.interest.contains(.readable) == true }

    func ready(_ events: EpollEvents, registration: EpollRegistration) {
        let selector = registration.selector
        while self.registration != nil {
            let accepted: Int32?
            do {
                accepted = try StreamSocket.accept(self.descriptor)
            } catch {
                return self.backOff(after: error)
            }
            guard let accepted else { return }
            self.accept(accepted, selector)
        }
    }

    func loopShutDown(registration: EpollRegistration) {
        self.close()
    }

    /// Stops accepting and closes the socket; connections not accepted yet are refused by the kernel.
    func close() {
        guard let registration = self.registration else { return }
        registration.deregister()
        self.registration = nil
        Glibc.close(self.descriptor)
    }

    private func backOff(after error: EpollError) {
        self.backOffs += 1
        self.logger.warning(
            "cannot accept connections for now; trying again in a second: \(error)",
            metadata: ["error": "\(error)"]
        )
        try? self.registration?.setInterest([])
        let listener = NIOLoopBound(self, eventLoop: self.eventLoop)
        self.eventLoop.scheduleTask(in: Self.backOff) {
            try? listener.value.registration?.setInterest(.readable)
        }
    }
}
