import CMentoryShims
import Glibc
import NIOCore

/// The system calls of a non-blocking Unix stream socket on an ``EpollEventLoop``: listening, accepting, and moving
/// bytes between its descriptor and `ByteBuffer`s with no copy in between.
///
/// Each call makes one attempt, retried only when a signal interrupted it, and says what the kernel did; the
/// caller decides what a full or empty socket means (wait for readiness, or close).
public enum StreamSocket {
    /// What one ``read(_:into:maximumBytes:)`` did.
    public enum ReadResult: Equatable, Sendable {
        /// This many bytes (at least one) were appended to the buffer.
        case read(Int)
        /// The peer closed its writing half: nothing more will come.
        case endOfInput
        /// Nothing to read now: wait until the descriptor is readable.
        case wouldBlock
        /// The read failed, as with `ECONNRESET`.
        case failed(EpollError)
    }

    /// What one ``write(_:from:)`` did.
    public enum WriteResult: Equatable, Sendable {
        /// The kernel took this many bytes, which were consumed from the buffer (none only if it was empty);
        /// fewer than were readable means the socket's send buffer is full.
        case wrote(Int)
        /// The kernel took nothing: wait until the descriptor is writable.
        case wouldBlock
        /// The write failed, as with `EPIPE` once the peer has gone.
        case failed(EpollError)
    }

    /// Appends what one `read` returns, at most `maximumBytes`, to `buffer` (growing it if it has less room).
    @inlinable
    public static func read(_ descriptor: Int32, into buffer: inout ByteBuffer, maximumBytes: Int) -> ReadResult {
        while true {
            var result = 0
            buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: maximumBytes) { room in
                result = Glibc.read(descriptor, room.baseAddress, min(room.count, maximumBytes))
                return max(0, result)
            }
            if result > 0 { return .read(result) }
            if result == 0 { return .endOfInput }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: return .wouldBlock
            case let error: return .failed(EpollError("read", errno: error))
            }
        }
    }

    /// Writes `buffer`'s readable bytes with one `send`, consuming what the kernel took. A peer that has gone is
    /// `EPIPE`, not a `SIGPIPE` (`MSG_NOSIGNAL`).
    @inlinable
    public static func write(_ descriptor: Int32, from buffer: inout ByteBuffer) -> WriteResult {
        guard buffer.readableBytes > 0 else { return .wrote(0) }
        while true {
            let written = buffer.withUnsafeReadableBytes {
                send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            if written >= 0 {
                buffer.moveReaderIndex(forwardBy: written)
                return .wrote(written)
            }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: return .wouldBlock
            case let error: return .failed(EpollError("send", errno: error))
            }
        }
    }

    /// Accepts one waiting connection as a non-blocking, close-on-exec descriptor, or `nil` when none waits.
    ///
    /// Throws for the errors that a later accept may not share (the process or system out of descriptors, say);
    /// a connection the peer aborted before it was accepted is skipped, as `accept4`'s manual page advises.
    public static func accept(_ listener: Int32) throws(EpollError) -> Int32? {
        while true {
            let descriptor = mentory_accept(listener)
            if descriptor >= 0 { return descriptor }
            switch errno {
            case EINTR, ECONNABORTED, EPROTO: continue
            case EAGAIN, EWOULDBLOCK: return nil
            case let error: throw EpollError("accept4", errno: error)
            }
        }
    }

    /// A new non-blocking, close-on-exec Unix stream socket bound to `path` and listening with `backlog`.
    ///
    /// The path must not exist yet (remove a stale socket file first); what it may be and who may connect is the
    /// caller's (its directory's and the file's modes).
    public static func listen(unixPath path: String, backlog: Int32) throws(EpollError) -> Int32 {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard !bytes.isEmpty, bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            throw EpollError("bind", errno: ENAMETOOLONG)
        }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        let descriptor = socket(AF_UNIX, type, 0)
        guard descriptor >= 0 else { throw EpollError("socket", errno: errno) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0 else {
            let error = EpollError("bind", errno: errno)
            close(descriptor)
            throw error
        }
        guard Glibc.listen(descriptor, backlog) == 0 else {
            let error = EpollError("listen", errno: errno)
            close(descriptor)
            throw error
        }
        return descriptor
    }
}
