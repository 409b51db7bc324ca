import CMentoryShims
import Glibc

/// What a descriptor registered with an ``EpollEventLoop`` is ready for, or asked to be watched for: epoll's flags.
public struct EpollEvents: OptionSet, Sendable, Hashable {
    public let rawValue: UInt32

    @inlinable
    public init(rawValue: UInt32) {
        self.rawValue = rawValue
    }

    /// Bytes can be read, or the peer closed its side (a `read` then returns 0).
    @inlinable public static var readable: EpollEvents { EpollEvents(rawValue: MENTORY_EPOLL_IN) }
    /// Bytes can be written.
    @inlinable public static var writable: EpollEvents { EpollEvents(rawValue: MENTORY_EPOLL_OUT) }
    /// The peer shut down its writing half (`EPOLLRDHUP`): reported only when asked for.
    @inlinable public static var readHangUp: EpollEvents { EpollEvents(rawValue: MENTORY_EPOLL_RDHUP) }
    /// Both directions are closed (`EPOLLHUP`): always reported.
    @inlinable public static var hangUp: EpollEvents { EpollEvents(rawValue: MENTORY_EPOLL_HUP) }
    /// An error is pending on the descriptor (`EPOLLERR`): always reported.
    @inlinable public static var error: EpollEvents { EpollEvents(rawValue: MENTORY_EPOLL_ERR) }
}

/// A system call of the event loop that failed, with the `errno` it set.
public struct EpollError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The call that failed, such as `epoll_ctl`.
    public let call: String
    /// The `errno` it set.
    public let errno: Int32

    public init(_ call: String, errno: Int32) {
        self.call = call
        self.errno = errno
    }

    public var description: String {
        "\(self.call): \(String(cString: strerror(self.errno))) (errno \(self.errno))"
    }
}
