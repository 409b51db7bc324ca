// CSystemd's headers pull in <sys/socket.h>; importing it keeps SOCK_DGRAM and friends visible
// in whole-module (release) builds, where the clang module that owns them is CSystemd.
import CSystemd

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// One state change reported to the service manager with `sd_notify`-style messages.
public enum NotifyState: Sendable, Hashable {
    /// `READY=1`: start-up (or a reload) is complete and the service is serving.
    case ready
    /// `RELOADING=1` with `MONOTONIC_USEC=`: the service is reloading its configuration.
    ///
    /// The timestamp is `CLOCK_MONOTONIC` in microseconds, as `systemd` compares it with its own clock.
    case reloading(monotonicMicroseconds: UInt64)
    /// `STOPPING=1`: a graceful shutdown has begun.
    case stopping
    /// `STATUS=`: a single human-readable line that `systemctl status` shows.
    case status(String)
    /// `WATCHDOG=1`: the service is alive; resets the watchdog timer.
    case watchdog

    /// `RELOADING=1` stamped with the current `CLOCK_MONOTONIC` time.
    public static var reloadingNow: NotifyState {
        .reloading(monotonicMicroseconds: MonotonicClock.nowMicroseconds())
    }

    /// The assignments this state contributes to a notification datagram.
    var assignments: [String] {
        switch self {
        case .ready:
            ["READY=1"]
        case .reloading(let microseconds):
            ["RELOADING=1", "MONOTONIC_USEC=\(microseconds)"]
        case .stopping:
            ["STOPPING=1"]
        case .status(let line):
            // A notification is newline-separated assignments, so the line must be one line.
            ["STATUS=" + String(line.map { $0.isNewline ? " " : $0 })]
        case .watchdog:
            ["WATCHDOG=1"]
        }
    }
}

/// The notification socket could not be used.
public enum SystemdNotifyError: Error, Sendable, Hashable, CustomStringConvertible {
    /// `NOTIFY_SOCKET` names something that is not an absolute path or an abstract (`@`) address.
    case invalidSocketAddress(String)
    /// A system call failed while sending; `errno` says why.
    case sendFailed(socket: String, errno: Int32)

    public var description: String {
        switch self {
        case .invalidSocketAddress(let address):
            "NOTIFY_SOCKET='\(address)' is neither an absolute path nor an abstract address starting with '@' "
                + "(and at most 107 bytes long); check how the service manager started this process"
        case .sendFailed(let socket, let code):
            "cannot send a notification to the service manager at \(socket): \(String(cString: strerror(code)))"
        }
    }
}

/// Sends service-manager notifications (`READY=1`, `STATUS=...`, `WATCHDOG=1`, ...) over the
/// datagram socket systemd names in `NOTIFY_SOCKET`.
///
/// It speaks the protocol of `sd_notify(3)` directly, so a caller can name the socket explicitly
/// (tests do) instead of going through the process environment. A notifier without a socket
/// does nothing: a daemon started outside systemd, or with `Type=simple`, runs unchanged.
///
/// ```swift
/// let notifier = SystemdNotifier(environment: ProcessInfo.processInfo.environment)
/// try notifier.notify(.ready, .status("serving"))
/// ```
public struct SystemdNotifier: Sendable {
    /// The notification socket, as given: an absolute path, or `@name` for an abstract address.
    /// `nil` when there is nobody to notify.
    public let socketAddress: String?

    /// A notifier that sends to `socketAddress`, or does nothing when it is `nil` or empty.
    public init(socketAddress: String?) {
        if let socketAddress, !socketAddress.isEmpty {
            self.socketAddress = socketAddress
        } else {
            self.socketAddress = nil
        }
    }

    /// A notifier for the socket named by `NOTIFY_SOCKET` in `environment`.
    public init(environment: [String: String]) {
        self.init(socketAddress: environment["NOTIFY_SOCKET"])
    }

    /// A notifier that never sends anything.
    public static var disabled: SystemdNotifier { SystemdNotifier(socketAddress: nil) }

    /// Whether notifications go anywhere.
    public var isEnabled: Bool { self.socketAddress != nil }

    /// Sends `states` as one datagram, so the service manager applies them together.
    ///
    /// Does nothing when the notifier has no socket.
    public func notify(_ states: NotifyState...) throws(SystemdNotifyError) {
        try self.notify(states)
    }

    /// Sends `states` as one datagram, so the service manager applies them together.
    ///
    /// Does nothing when the notifier has no socket or `states` is empty.
    public func notify(_ states: [NotifyState]) throws(SystemdNotifyError) {
        guard let socketAddress, !states.isEmpty else { return }
        try Self.send(Self.message(for: states), to: socketAddress)
    }

    /// The text of the datagram `notify(_:)` sends for `states`.
    public static func message(for states: [NotifyState]) -> String {
        states.flatMap(\.assignments).joined(separator: "\n")
    }

    private static func send(_ message: String, to socketAddress: String) throws(SystemdNotifyError) {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let isAbstract = socketAddress.hasPrefix("@")
        guard isAbstract || socketAddress.hasPrefix("/") else {
            throw .invalidSocketAddress(socketAddress)
        }
        var pathBytes = Array(socketAddress.utf8)
        if isAbstract {
            // An abstract address starts with a NUL byte instead of the '@'.
            pathBytes[0] = 0
        }
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        // A path needs room for its terminating NUL; an abstract address is measured exactly.
        guard pathBytes.count < capacity || (isAbstract && pathBytes.count <= capacity) else {
            throw .invalidSocketAddress(socketAddress)
        }
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            buffer.copyBytes(from: pathBytes)
        }
        let addressLength = socklen_t(
            MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + pathBytes.count + (isAbstract ? 0 : 1)
        )

        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else {
            throw .sendFailed(socket: socketAddress, errno: errno)
        }
        defer { close(descriptor) }

        var bytes = Array(message.utf8)
        let sent = bytes.withUnsafeMutableBytes { payload in
            withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                    sendto(
                        descriptor, payload.baseAddress, payload.count, Int32(MSG_NOSIGNAL), socketAddress,
                        addressLength)
                }
            }
        }
        guard sent >= 0 else {
            throw .sendFailed(socket: socketAddress, errno: errno)
        }
    }
}

/// `CLOCK_MONOTONIC`, the clock systemd stamps reloads with.
enum MonotonicClock {
    static func nowMicroseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1_000
    }
}
