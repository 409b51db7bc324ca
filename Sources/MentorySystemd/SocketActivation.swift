import CSystemd

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A listening socket the service manager passed to this process.
public struct ActivatedSocket: Sendable, Hashable {
    /// The file descriptor, from `SD_LISTEN_FDS_START` on.
    public var descriptor: Int32
    /// The socket's name (`FileDescriptorName=`; by default the socket unit's name).
    public var name: String
    /// The path the socket is bound to, when it is a path-bound Unix socket.
    public var path: String?

    /// A passed socket: its descriptor, name and bound path.
    public init(descriptor: Int32, name: String, path: String?) {
        self.descriptor = descriptor
        self.name = name
        self.path = path
    }
}

/// Socket activation went wrong; the daemon cannot serve on what it was given.
public enum SocketActivationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// `sd_listen_fds_with_names` failed, e.g. because `LISTEN_FDS` is malformed.
    case listenFDsFailed(errno: Int32)
    /// A passed descriptor is not a listening Unix stream socket.
    case notAUnixStreamSocket(descriptor: Int32, name: String)
    /// More sockets were passed than the daemon can serve.
    case unexpectedSocketCount(Int, names: [String])

    /// The exit status for this failure: `EX_NOINPUT` (66), distinct from configuration
    /// errors (`EX_CONFIG`, 78) and ordinary failures (1), so `systemctl status` tells them apart.
    public static let exitStatus: Int32 = 66

    public var description: String {
        switch self {
        case .listenFDsFailed(let code):
            "cannot read the sockets passed by the service manager (LISTEN_FDS): \(String(cString: strerror(code)))"
        case .notAUnixStreamSocket(let descriptor, let name):
            "the socket '\(name)' passed as fd \(descriptor) is not a listening Unix stream socket; "
                + "the socket unit needs ListenStream=/path/to/socket and Accept=no"
        case .unexpectedSocketCount(let count, let names):
            "the service manager passed \(count) sockets (\(names.joined(separator: ", "))) but mentoryd serves "
                + "exactly one; give the socket unit a single ListenStream="
        }
    }
}

/// Socket activation (`sd_listen_fds_with_names(3)`): adopting sockets systemd bound for us.
public enum SocketActivation {
    /// Every descriptor passed with `LISTEN_FDS`, unchecked; empty when the process was not socket-activated.
    ///
    /// - Parameter unsetEnvironment: Whether to remove `LISTEN_*` from the environment. Leave it
    ///   `false` in a multi-threaded process: changing the environment races with readers.
    public static func passedSockets(unsetEnvironment: Bool = false) throws(SocketActivationError) -> [ActivatedSocket]
    {
        var names: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = nil
        let count = sd_listen_fds_with_names(unsetEnvironment ? 1 : 0, &names)
        guard count >= 0 else { throw .listenFDsFailed(errno: -count) }
        defer {
            if let names {
                for index in 0..<Int(count) { free(names[index]) }
                free(names)
            }
        }
        return (0..<count).map { index in
            let descriptor = SD_LISTEN_FDS_START + index
            let name = names?[Int(index)].map { String(cString: $0) } ?? "unknown"
            return ActivatedSocket(descriptor: descriptor, name: name, path: Self.boundPath(of: descriptor))
        }
    }

    /// The one listening Unix stream socket passed by the service manager, or `nil` when the
    /// process was started without socket activation.
    ///
    /// Each passed descriptor is checked with `sd_is_socket_unix`; anything else is an error
    /// rather than a socket silently served wrongly.
    public static func unixStreamListener(unsetEnvironment: Bool = false) throws(SocketActivationError)
        -> ActivatedSocket?
    {
        let sockets = try self.passedSockets(unsetEnvironment: unsetEnvironment)
        guard !sockets.isEmpty else { return nil }
        guard sockets.count == 1 else {
            throw .unexpectedSocketCount(sockets.count, names: sockets.map(\.name))
        }
        let socket = sockets[0]
        try self.checkUnixStreamListener(socket)
        return socket
    }

    /// Throws unless `socket` is a listening Unix stream socket.
    public static func checkUnixStreamListener(_ socket: ActivatedSocket) throws(SocketActivationError) {
        guard sd_is_socket_unix(socket.descriptor, Int32(SOCK_STREAM.rawValue), 1, nil, 0) > 0 else {
            throw .notAUnixStreamSocket(descriptor: socket.descriptor, name: socket.name)
        }
    }

    /// The file-system path a Unix socket is bound to, if any.
    static func boundPath(of descriptor: Int32) -> String? {
        var address = sockaddr_un()
        var length = socklen_t(MemoryLayout<sockaddr_un>.size)
        let result = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        let pathOffset = MemoryLayout<sockaddr_un>.offset(of: \.sun_path)!
        guard result == 0, address.sun_family == sa_family_t(AF_UNIX), Int(length) > pathOffset + 1 else {
            return nil
        }
        return withUnsafeBytes(of: address.sun_path) { buffer -> String? in
            // An abstract address starts with NUL and has no path.
            guard buffer[0] != 0 else { return nil }
            let bytes = buffer.prefix(Int(length) - pathOffset).prefix { $0 != 0 }
            return String(decoding: bytes, as: UTF8.self)
        }
    }
}
