#if canImport(Glibc)
    import Glibc
#endif
import MentoryEventLoop
import NIOCore

/// A ``Connection`` on a connected Unix stream socket on an ``EpollEventLoop``: its ``ConnectionTransport``, and the
/// handler the loop tells the socket's readiness.
///
/// As Redis serves a client, with no channel pipeline:
/// - **Reads.** One `read` per readable turn, into the loop's ``SocketReadBuffer``; what the connection does not
///   keep leaves the buffer to the next connection with no allocation. The socket is watched for readability only
///   while the connection wants to read (``Connection/readRequested()``, ``read()``).
/// - **Writes.** The frames handed over wait in order until a flush, which writes them at once, one `send` each
///   (a tick's small frames are one buffer, ``OutboundFrameBuffer``). What the kernel does not take waits for the
///   socket to be writable; once it is all taken the connection is told (``Connection/flushedBytesTaken()``), so
///   the byte counts need no water marks.
/// - **Ends.** End of input is the peer's half-close (``Connection/inputClosed()``); a hang-up while reading is held
///   back, a failed read or write, ``close()`` and the loop's shutdown close the socket. The connection is told it
///   is inactive at once, and that its transport is gone on the loop's next task, as NIO tells a channel handler.
final class SocketConnection: ConnectionTransport, EpollHandler {
    /// The protocol logic this socket carries.
    let connection: Connection
    let eventLoop: any EventLoop
    let allocator: ByteBufferAllocator
    private let readBuffer: SocketReadBuffer
    private let descriptor: Int32
    /// The socket's registration with the loop's selector, until it is closed.
    private var registration: EpollRegistration?
    /// Frames handed over and not yet taken by the kernel, in order, each with its write's promise.
    private var pending = CircularBuffer<PendingWrite>(initialCapacity: 2)
    /// Whether the connection wants to read, and whether the peer has ended its input.
    private var wantsToRead = true
    private var inputEnded = false
    /// Told once the socket is closed, after the connection (the server counts it out).
    private let onClose: () -> Void

    /// Serves the connected, non-blocking socket `descriptor` with `connection`, on `selector`'s loop (the
    /// engine's executor); `onClose` runs once it is closed. Closes `descriptor` and throws if it cannot be
    /// watched. Call on the loop.
    @discardableResult
    static func serve(
        _ descriptor: Int32, connection: Connection, selector: EpollSelector, eventLoop: any EventLoop,
        readBuffer: SocketReadBuffer, onClose: @escaping () -> Void = {}
    ) throws(EpollError) -> SocketConnection {
        let socket = SocketConnection(
            descriptor: descriptor, connection: connection, eventLoop: eventLoop, readBuffer: readBuffer,
            onClose: onClose)
        do {
            socket.registration = try selector.register(descriptor, interest: .readable, handler: socket)
        } catch {
            Glibc.close(descriptor)
            throw error
        }
        connection.attach(to: socket, isActive: true)
        return socket
    }

    private init(
        descriptor: Int32, connection: Connection, eventLoop: any EventLoop, readBuffer: SocketReadBuffer,
        onClose: @escaping () -> Void
    ) {
        self.descriptor = descriptor
        self.connection = connection
        self.eventLoop = eventLoop
        self.allocator = readBuffer.allocator
        self.readBuffer = readBuffer
        self.onClose = onClose
    }

    /// Whether the socket is still open.
    var isOpen: Bool { self.registration != nil }

    /// Whether the socket is watched for readability: the connection wants to read and the peer may still send.
    var isReading: Bool { self.isOpen && self.wantsToRead && !self.inputEnded }

    // MARK: EpollHandler

    func ready(_ events: EpollEvents, registration: EpollRegistration) {
        if events.contains(.writable) { self.writePending() }
        guard self.isOpen else { return }
        if self.wantsToRead, !self.inputEnded, !events.isDisjoint(with: [.readable, .hangUp, .error]) {
            self.readOnce()
        } else if !events.isDisjoint(with: [.hangUp, .error]) {
            // Reported whatever the interest, on every turn: with reading held back, the peer's hang-up ends the
            // connection, as a reset would (its unread requests were never taken).
            self.connection.errorCaught(EpollError("epoll_wait (hang-up)", errno: ECONNRESET))
        }
    }

    func loopShutDown(registration: EpollRegistration) {
        self.close()
    }

    /// Reads once, and hands the bytes to the connection; asks it whether to go on reading.
    private func readOnce() {
        var bytes = self.readBuffer.take()
        let result = StreamSocket.read(self.descriptor, into: &bytes, maximumBytes: SocketReadBuffer.readSize)
        switch result {
        case .read:
            self.connection.received(bytes)
            self.readBuffer.giveBack(bytes)
            guard self.isOpen else { return }
            self.connection.readCompleted()
            guard self.isOpen else { return }
            if !self.connection.readRequested() { self.wantsToRead = false }
            self.updateInterest()
        case .wouldBlock:
            self.readBuffer.giveBack(bytes)
        case .endOfInput:
            self.readBuffer.giveBack(bytes)
            self.inputEnded = true
            self.updateInterest()
            self.connection.inputClosed()
        case .failed(let error):
            self.readBuffer.giveBack(bytes)
            self.connection.errorCaught(error)
        }
    }

    // MARK: ConnectionTransport

    func write(_ frames: ByteBuffer, promise: EventLoopPromise<Void>?) {
        guard self.isOpen else {
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        self.pending.append(PendingWrite(bytes: frames, promise: promise))
    }

    func flush(_ frames: ByteBuffer?) -> Bool {
        guard self.isOpen else { return false }
        if var frames, self.pending.isEmpty {
            // The common case, a tick's frames and nothing waiting: written at once, and queued only if the kernel
            // does not take them all.
            switch StreamSocket.write(self.descriptor, from: &frames) {
            case .wrote:
                if frames.readableBytes == 0 { return true }
            case .wouldBlock: break
            case .failed(let error):
                self.connection.errorCaught(error)
                return false
            }
            self.pending.append(PendingWrite(bytes: frames, promise: nil))
            self.updateInterest()
            return false
        }
        if let frames { self.write(frames, promise: nil) }
        // Waiting for the socket to be writable: the kernel took nothing since, so there is no point trying.
        if self.registration?.interest.contains(.writable) == true { return false }
        return self.writeFrames()
    }

    func read() {
        guard !self.wantsToRead else { return }
        self.wantsToRead = true
        self.updateInterest()
    }

    func close() {
        guard let registration = self.registration else { return }
        registration.deregister()
        self.registration = nil
        Glibc.close(self.descriptor)
        let unwritten = self.pending
        self.pending.removeAll()
        for write in unwritten { write.promise?.fail(ChannelError.ioOnClosedChannel) }
        self.connection.inactive()
        let socket = NIOLoopBound(self, eventLoop: self.eventLoop)
        self.eventLoop.execute {
            socket.value.connection.removed()
            socket.value.onClose()
        }
    }

    // MARK: Writing

    /// Writes what waits, in order, until the kernel stops taking it; returns whether it took everything. Then
    /// completes the promises of the frames taken, and closes the socket if a write failed.
    private func writeFrames() -> Bool {
        var taken: [EventLoopPromise<Void>] = []
        var failure: EpollError?
        while var write = self.pending.first {
            switch StreamSocket.write(self.descriptor, from: &write.bytes) {
            case .wrote:
                if write.bytes.readableBytes > 0 {
                    self.pending[self.pending.startIndex] = write
                } else {
                    self.pending.removeFirst()
                    if let promise = write.promise { taken.append(promise) }
                    continue
                }
            case .wouldBlock: break
            case .failed(let error): failure = error
            }
            break
        }
        let allTaken = self.pending.isEmpty && failure == nil
        if failure == nil { self.updateInterest() }
        for promise in taken { promise.succeed() }
        if let failure { self.connection.errorCaught(failure) }
        return allTaken && self.isOpen
    }

    /// The socket is writable again: writes what waited, and tells the connection once all is taken.
    private func writePending() {
        guard self.isOpen, self.writeFrames() else { return }
        self.connection.flushedBytesTaken()
    }

    /// Watches the socket for what the connection waits for: readability while it wants to read and the peer may
    /// still send, writability while frames wait.
    private func updateInterest() {
        guard let registration = self.registration else { return }
        var interest: EpollEvents = []
        if self.wantsToRead, !self.inputEnded { interest.insert(.readable) }
        if !self.pending.isEmpty { interest.insert(.writable) }
        do {
            try registration.setInterest(interest)
        } catch {
            self.connection.errorCaught(error)
        }
    }
}

/// A frame (or a tick's frames) handed to a ``SocketConnection`` and not yet taken by the kernel.
private struct PendingWrite {
    var bytes: ByteBuffer
    let promise: EventLoopPromise<Void>?
}

/// The buffer the ``SocketConnection``s of one loop read into, one read at a time.
///
/// A connection that handles every frame of its read lets go of the bytes, so the next read reuses the buffer's
/// storage with no allocation; one that keeps some (a frame cut short, frames waiting for room) keeps that
/// storage, and the next read starts a new one. Confined to its loop.
final class SocketReadBuffer {
    /// The most one read takes: Redis's `PROTO_IOBUF_LEN`.
    static let readSize = 16 * 1024

    let allocator: ByteBufferAllocator
    private var buffer: ByteBuffer

    /// What ``buffer`` holds while a read has the buffer.
    private static let lent = ByteBuffer()

    init(allocator: ByteBufferAllocator = ByteBufferAllocator()) {
        self.allocator = allocator
        self.buffer = allocator.buffer(capacity: Self.readSize)
    }

    /// The buffer to read into, emptied; held by the reader until it gives it back.
    fileprivate func take() -> ByteBuffer {
        var buffer = self.buffer
        self.buffer = Self.lent
        buffer.clear()
        return buffer
    }

    /// Gives the buffer back after a read.
    fileprivate func giveBack(_ buffer: ByteBuffer) {
        self.buffer = buffer
    }
}
