#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import MentoryDomain
import MentoryWire
import NIOCore
import SwiftProtobuf

/// A connection to mentoryd for one request at a time, made with plain blocking socket calls on the
/// caller's thread: no event loop, no threads, no tasks.
///
/// It is for short-lived programs that ask and exit (`mentoryctl ping`, `status`, `call`...), where starting
/// ``MentoryClient``'s event-loop threads costs more than the call. It speaks the same protocol with the same
/// guarantees, through the same protocol core, `ClientProtocolCore` (handshake, numbering, framing, decoding,
/// matching): this type only reads, writes and waits.
///
/// - **Trust.** The socket must pass the same ``SocketTrust`` checks: its directories before connecting,
///   the serving process's `SO_PEERCRED` uid before anything is written.
/// - **Bounds.** A frame longer than `maxFrameLength` (``MentoryClient/defaultMaxInboundFrameLength`` by
///   default) is refused as soon as its length prefix arrives, and closes the connection; at most that
///   many bytes plus one read of ``readChunkSize`` are buffered.
/// - **Waits.** Connecting, the handshake and each call wait at most their timeout (`poll(2)` with a
///   deadline, and `SO_SNDTIMEO` for `connect(2)`), and fail with ``MentoryClientError/timedOut(seconds:)``;
///   `nil` waits for ever. The daemon is sent each call's timeout, as ``MentoryClient`` does.
/// - **Errors.** The same ``MentoryClientError`` cases as ``MentoryClient``: a daemon error is `remote`,
///   a connection error frame that closes the connection fails with its code, a broken stream is
///   `connectionClosed`, an undecodable envelope `malformedReply`. After a failure that ends the
///   connection every further call fails the same way.
///
/// ``connectPipelined(socketPath:clientName:defaultTimeout:maxFrameLength:trust:)`` saves the handshake's
/// round trip: the first call is sent right behind the `Hello` (the daemon attaches the connection before it
/// reads the next frame) and the `Welcome` is read with its answer.
///
/// Events and forwarded plugin calls are not delivered (this connection never subscribes); frames other
/// than the awaited answer are skipped. Not thread-safe: use one connection from one thread at a time.
public final class BlockingMentoryConnection {
    /// The server's handshake answer: its version and its handlers.
    ///
    /// For a connection from ``connectPipelined(socketPath:clientName:defaultTimeout:maxFrameLength:trust:)``,
    /// empty until the first call has returned.
    public private(set) var welcome = Mentory_V1_Welcome()
    /// The socket this connection is connected to.
    public let socketPath: String
    /// How long a call waits for its answer by default; `nil` waits for ever.
    public let defaultTimeout: Duration?

    private let socket: BlockingSocket
    /// The protocol: a call waits for nothing but its caller, so nothing is kept per call.
    private var core: ClientProtocolCore<Void>

    /// How many bytes one `read(2)` asks for at most.
    public static let readChunkSize = 64 << 10

    private init(
        socket: BlockingSocket, core: ClientProtocolCore<Void>, socketPath: String, defaultTimeout: Duration?
    ) {
        self.socket = socket
        self.core = core
        self.socketPath = socketPath
        self.defaultTimeout = defaultTimeout
    }

    /// Connects to the daemon at `socketPath` and performs the handshake, within `defaultTimeout`.
    ///
    /// Throws ``MentoryClientError/untrustedSocket(path:reason:)`` without sending anything when the
    /// socket fails `trust`'s checks, and ``MentoryClientError/cannotConnect(path:reason:)`` when nothing
    /// accepts the connection.
    public static func connect(
        socketPath: String,
        clientName: String,
        defaultTimeout: Duration? = .seconds(30),
        maxFrameLength: Int = MentoryClient.defaultMaxInboundFrameLength,
        trust: SocketTrust = .standard()
    ) throws(MentoryClientError) -> BlockingMentoryConnection {
        let wait = Wait(limit: defaultTimeout)
        let connection = try Self.open(
            socketPath: socketPath, clientName: clientName, defaultTimeout: defaultTimeout,
            maxFrameLength: maxFrameLength, trust: trust, wait: wait)
        // The handshake is bounded like any call: a daemon that accepts but never answers fails it.
        while true {
            switch try connection.nextInbound(wait: wait) {
            case .welcomed(let welcome):
                connection.welcome = welcome
                return connection
            case .closed(let ending):
                throw ending.reason
            default:
                continue
            }
        }
    }

    /// Connects to the daemon at `socketPath` and sends the `Hello` without waiting for the `Welcome`: the
    /// first call reads it with its own answer, in the same round trip.
    ///
    /// The checks are those of ``connect(socketPath:clientName:defaultTimeout:maxFrameLength:trust:)``;
    /// a daemon that refuses the handshake fails the first call (within its timeout) instead of this.
    /// ``welcome`` is empty until the first call has returned.
    public static func connectPipelined(
        socketPath: String,
        clientName: String,
        defaultTimeout: Duration? = .seconds(30),
        maxFrameLength: Int = MentoryClient.defaultMaxInboundFrameLength,
        trust: SocketTrust = .standard()
    ) throws(MentoryClientError) -> BlockingMentoryConnection {
        try Self.open(
            socketPath: socketPath, clientName: clientName, defaultTimeout: defaultTimeout,
            maxFrameLength: maxFrameLength, trust: trust, wait: Wait(limit: defaultTimeout))
    }

    /// Checks the socket, connects, checks the peer and sends the `Hello`.
    private static func open(
        socketPath: String, clientName: String, defaultTimeout: Duration?, maxFrameLength: Int, trust: SocketTrust,
        wait: Wait
    ) throws(MentoryClientError) -> BlockingMentoryConnection {
        try trust.checkDirectory(ofSocket: socketPath)
        let socket = try BlockingSocket.connect(path: socketPath, wait: wait)
        // Nothing is written before the serving process is known to be trusted.
        let (pid, uid) = try socket.peerCredentials()
        try trust.checkPeer(uid: uid, pid: pid, path: socketPath)
        var core = ClientProtocolCore<Void>(clientName: clientName, maxFrameLength: maxFrameLength)
        let hello = core.hello()
        let connection = BlockingMentoryConnection(
            socket: socket, core: core, socketPath: socketPath, defaultTimeout: defaultTimeout)
        try connection.send(hello, wait: wait)
        return connection
    }

    /// Whether the connection is still usable: not closed, and no failure ended it.
    public var isConnected: Bool { self.socket.isOpen }

    /// Closes the connection; later calls fail with ``MentoryClientError/connectionClosed(reason:)``.
    public func close() {
        _ = self.core.close(.connectionClosed(reason: "the connection closed before the call was sent"))
        self.socket.close()
    }

    /// Calls `namespace.method` with a serialized body and returns the serialized reply.
    ///
    /// Waits at most `timeout` (``defaultTimeout`` when `nil`) for the answer. A call that times out
    /// leaves the connection usable; its late answer is skipped.
    public func call(
        _ namespace: String,
        _ method: String,
        body: Data,
        timeout: Duration? = nil
    ) throws(MentoryClientError) -> Data {
        let limit = timeout ?? self.defaultTimeout
        let wait = Wait(limit: limit)
        let (id, request) = try self.core.startCall(
            namespace: namespace, method: method, body: body, timeout: limit, pendingCall: { _ in () })
        do throws(MentoryClientError) {
            try self.send(request, wait: wait)
            while true {
                switch try self.nextInbound(wait: wait) {
                case .welcomed(let welcome):
                    self.welcome = welcome
                case .answered(id, _, let result):
                    return try result.get()
                case .closed(let ending):
                    throw ending.reason
                default:
                    // Events, plugin calls, late answers to calls that timed out, errors that do not close.
                    continue
                }
            }
        } catch {
            // Its answer, if it comes, is skipped.
            _ = self.core.abandonCall(id)
            throw error
        }
    }

    /// Calls `namespace.method` with a request message and decodes the reply as `Reply`.
    public func call<Reply: SwiftProtobuf.Message>(
        _ namespace: String,
        _ method: String,
        _ request: some SwiftProtobuf.Message,
        replying: Reply.Type = Reply.self,
        timeout: Duration? = nil
    ) throws(MentoryClientError) -> Reply {
        let reply = try self.call(namespace, method, body: try CallCoding.body(of: request), timeout: timeout)
        return try CallCoding.reply(reply, as: Reply.self)
    }

    /// Calls a method the schema declares, e.g. `connection.call(MentorySchema.Diary.get, request)`.
    public func call<Namespace, Request, Reply>(
        _ method: MethodSchema<Namespace, Request, Reply>,
        _ request: Request,
        timeout: Duration? = nil
    ) throws(MentoryClientError) -> Reply {
        try self.call(method.namespace, method.name, request, replying: Reply.self, timeout: timeout)
    }

    // MARK: Driving the core

    /// Writes `envelope` as one frame, waiting at most until `wait`'s deadline for room.
    private func send(_ envelope: Mentory_V1_Envelope, wait: Wait) throws(MentoryClientError) {
        var frame = ByteBuffer()
        frame.writeFrame(envelope)
        do throws(MentoryClientError) {
            try self.socket.write(&frame, wait: wait)
        } catch {
            throw self.failUnlessTimeout(error)
        }
    }

    /// What the next frame means, reading (at most until `wait`'s deadline) until a whole one has arrived.
    /// An outcome that ends the connection has closed the socket.
    private func nextInbound(wait: Wait) throws(MentoryClientError) -> ClientProtocolCore<Void>.Inbound {
        while true {
            if let inbound = self.core.nextInbound() {
                if case .closed = inbound { self.socket.close() }
                return inbound
            }
            if let closeReason = self.core.closeReason { throw closeReason }
            var bytes = ByteBufferAllocator().buffer(capacity: Self.readChunkSize)
            let read: Bool
            do throws(MentoryClientError) {
                read = try self.socket.read(into: &bytes, upTo: Self.readChunkSize, wait: wait)
            } catch {
                throw self.failUnlessTimeout(error)
            }
            guard read else {
                let ending = self.core.inputEnded()
                self.socket.close()
                throw ending.reason
            }
            self.core.receive(bytes)
        }
    }

    /// A timeout leaves the connection usable; any other failure of the socket ends it.
    private func failUnlessTimeout(_ error: MentoryClientError) -> MentoryClientError {
        if case .timedOut = error { return error }
        _ = self.core.close(error)
        self.socket.close()
        return error
    }
}

/// How long one operation may still wait: a limit and the deadline it gives from the operation's start.
struct Wait {
    let limit: Duration?
    let deadline: ContinuousClock.Instant?

    init(limit: Duration?) {
        self.limit = limit
        self.deadline = limit.map { ContinuousClock.now.advanced(by: $0) }
    }

    /// Milliseconds left for `poll(2)`: -1 for ever, 0 when the deadline has passed (rounded up).
    var pollMilliseconds: Int32 {
        guard let deadline = self.deadline else { return -1 }
        let left = ContinuousClock.now.duration(to: deadline)
        guard left > .zero else { return 0 }
        let milliseconds =
            left.components.seconds * 1000 + (left.components.attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return Int32(clamping: milliseconds)
    }

    var expired: MentoryClientError {
        .timedOut(after: self.limit ?? .zero)
    }
}

/// One connected Unix stream socket in non-blocking mode, whose every wait is a `poll(2)` bounded by a ``Wait``.
/// Closed when released.
final class BlockingSocket {
    private var descriptor: Int32

    private init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    deinit {
        self.close()
    }

    var isOpen: Bool { self.descriptor >= 0 }

    /// Connects to the Unix socket at `path`; the connect itself waits at most `wait`'s limit.
    static func connect(path: String, wait: Wait) throws(MentoryClientError) -> BlockingSocket {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        let pathBytes = Array(path.utf8)
        guard pathBytes.count < capacity else {
            throw .cannotConnect(
                path: path, reason: "the socket path is \(pathBytes.count) bytes long; at most \(capacity - 1) fit")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: pathBytes)
            raw[pathBytes.count] = 0
        }
        #if canImport(Glibc)
            let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        #else
            let type = SOCK_STREAM
        #endif
        let descriptor = socket(AF_UNIX, type, 0)
        guard descriptor >= 0 else {
            throw .cannotConnect(path: path, reason: Self.describe(errno: errno, in: "socket(domain:type:protocol:)"))
        }
        // A listener whose backlog is full makes connect(2) wait; SO_SNDTIMEO bounds that wait.
        if let left = wait.deadline.map({ ContinuousClock.now.duration(to: $0) }) {
            let clamped = max(left, .milliseconds(1))
            var interval = timeval(
                tv_sec: Int(clamped.components.seconds),
                tv_usec: Int(clamped.components.attoseconds / 1_000_000_000_000))
            _ = setsockopt(
                descriptor, SOL_SOCKET, SO_SNDTIMEO, &interval, socklen_t(MemoryLayout<timeval>.size))
        }
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                Glibc.connect(descriptor, address, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else {
            let code = errno
            _ = Glibc.close(descriptor)
            throw .cannotConnect(path: path, reason: Self.describe(errno: code, in: "connect(descriptor:addr:size:)"))
        }
        // From here every wait is a poll(2) with the caller's deadline.
        let flags = fcntl(descriptor, F_GETFL)
        _ = fcntl(descriptor, F_SETFL, flags | O_NONBLOCK)
        return BlockingSocket(descriptor: descriptor)
    }

    /// The pid and uid of the process serving the socket (`SO_PEERCRED`).
    func peerCredentials() throws(MentoryClientError) -> (pid: Int32, uid: UInt32) {
        // `struct ucred` (pid, uid, gid) is not visible from Swift without _GNU_SOURCE; three 32-bit
        // fields read as a homogeneous tuple have its exact layout.
        var credentials: (UInt32, UInt32, UInt32) = (0, 0, 0)
        var length = socklen_t(MemoryLayout<(UInt32, UInt32, UInt32)>.size)
        guard getsockopt(self.descriptor, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0 else {
            let reason = Self.describe(errno: errno, in: "getsockopt(SO_PEERCRED)")
            throw .connectionClosed(reason: "cannot read the daemon's credentials: \(reason)")
        }
        return (Int32(bitPattern: credentials.0), credentials.1)
    }

    /// Writes all of `bytes`, waiting at most until `wait`'s deadline for room.
    func write(_ bytes: inout ByteBuffer, wait: Wait) throws(MentoryClientError) {
        guard self.isOpen else {
            throw .connectionClosed(reason: "the connection closed before the call was sent")
        }
        while bytes.readableBytes > 0 {
            let written = bytes.withUnsafeReadableBytes { raw in
                send(self.descriptor, raw.baseAddress!, raw.count, Int32(MSG_NOSIGNAL))
            }
            if written >= 0 {
                bytes.moveReaderIndex(forwardBy: written)
                continue
            }
            let code = errno
            switch code {
            case EINTR:
                continue
            case EAGAIN, EWOULDBLOCK:
                try self.poll(for: Int16(POLLOUT), wait: wait)
            default:
                throw .connectionClosed(reason: Self.describe(errno: code, in: "write(descriptor:pointer:size:)"))
            }
        }
    }

    /// Appends what has arrived, at most `count` bytes, to `bytes`, waiting at most until `wait`'s deadline for
    /// something; `false` at the end of the stream.
    func read(into bytes: inout ByteBuffer, upTo count: Int, wait: Wait) throws(MentoryClientError) -> Bool {
        guard self.isOpen else { throw .connectionClosed(reason: "the connection was closed") }
        let descriptor = self.descriptor
        while true {
            var result = 0
            var code: Int32 = 0
            bytes.writeWithUnsafeMutableBytes(minimumWritableBytes: count) { raw in
                result = Glibc.read(descriptor, raw.baseAddress!, count)
                code = errno
                return max(result, 0)
            }
            if result > 0 { return true }
            if result == 0 { return false }
            switch code {
            case EINTR:
                continue
            case EAGAIN, EWOULDBLOCK:
                try self.poll(for: Int16(POLLIN), wait: wait)
            default:
                throw .connectionClosed(reason: Self.describe(errno: code, in: "read(descriptor:pointer:size:)"))
            }
        }
    }

    /// Waits until the socket is ready for `events`, or throws `wait`'s timeout.
    private func poll(for events: Int16, wait: Wait) throws(MentoryClientError) {
        var entry = pollfd(fd: self.descriptor, events: events, revents: 0)
        while true {
            let ready = Glibc.poll(&entry, 1, wait.pollMilliseconds)
            if ready > 0 { return }
            if ready == 0 { throw wait.expired }
            let code = errno
            guard code == EINTR else {
                throw .connectionClosed(reason: Self.describe(errno: code, in: "poll"))
            }
        }
    }

    /// Closes the socket; later reads and writes fail with `connectionClosed`.
    func close() {
        guard self.descriptor >= 0 else { return }
        _ = Glibc.close(self.descriptor)
        self.descriptor = -1
    }

    /// The way NIO's `IOError` describes a failed system call, so both clients word failures alike.
    static func describe(errno code: Int32, in call: String) -> String {
        "\(call): \(String(cString: strerror(code))) (errno: \(code))"
    }
}
