import Logging
import NIOCore

/// The byte stream under a ``Connection``: what its protocol logic asks of a NIO channel (``ConnectionHandler``)
/// or of a socket on an epoll loop (``SocketConnection``).
///
/// Confined to the connection's event loop, which is the engine's executor. Every call comes from the
/// connection, on that loop; the transport tells the connection what happens to the stream through the
/// connection's own methods (``Connection/received(_:)``, ``Connection/flushedBytesTaken()`` and the rest).
protocol ConnectionTransport: AnyObject {
    /// The loop the connection runs on: its timers and deferred work are scheduled here.
    var eventLoop: any EventLoop { get }

    /// The allocator for the connection's own buffers.
    var allocator: ByteBufferAllocator { get }

    /// Hands `frames` to the stream after what it holds, without sending them yet; `promise` completes once the
    /// kernel has taken them (or fails once the stream closes first).
    func write(_ frames: ByteBuffer, promise: EventLoopPromise<Void>?)

    /// Sends what was handed over, after `frames` (if any) appended to it. Returns whether the kernel took every
    /// byte; if not, the transport calls ``Connection/flushedBytesTaken()`` once it has, or the stream closes.
    func flush(_ frames: ByteBuffer?) -> Bool

    /// Reads more from the peer: the connection wants the next read (it held reading back, or it handled a read).
    func read()

    /// Closes the stream now; what was not taken yet is dropped.
    func close()
}

extension EventLoop {
    /// Runs `close` (a connection's) once `written` completes, or after `drainSeconds` for a peer that does not read
    /// what it was sent, which is logged.
    func close(
        after written: EventLoopFuture<Void>, drainSeconds seconds: Int, logger: Logger,
        _ close: @escaping () -> Void
    ) {
        let close = NIOLoopBound(close, eventLoop: self)
        let deadline = self.scheduleTask(in: .seconds(Int64(seconds))) {
            logger.notice(
                "closed a connection that did not take its last frames in time (\(seconds) s)",
                metadata: ["drainSeconds": "\(seconds)"]
            )
            close.value()
        }
        written.whenComplete { _ in
            deadline.cancel()
            close.value()
        }
    }
}
