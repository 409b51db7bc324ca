#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A failure to prepare the socket path.
public enum SocketFileError: Error, CustomStringConvertible, Sendable {
    case alreadyServing(path: String)
    case notASocket(path: String)
    case cannotCreateDirectory(path: String, errno: Int32)
    case cannotChangeMode(path: String, errno: Int32)
    case pathTooLong(path: String)

    public var description: String {
        switch self {
        case .alreadyServing(let path):
            "another process is already serving \(path); stop it or choose another --socket"
        case .notASocket(let path):
            "\(path) exists and is not a socket; remove it or choose another --socket"
        case .cannotCreateDirectory(let path, let code):
            "cannot create the socket directory \(path): \(String(cString: strerror(code)))"
        case .cannotChangeMode(let path, let code):
            "cannot set the socket's permissions on \(path): \(String(cString: strerror(code)))"
        case .pathTooLong(let path):
            "the socket path \(path) is longer than a Unix socket address allows (107 bytes)"
        }
    }
}

/// File-system chores around a Unix socket path.
enum SocketFile {
    /// Creates the socket's directory if needed and removes a stale socket left by a crashed daemon.
    ///
    /// A socket some process still accepts on is left alone and reported.
    static func prepare(path: String) throws(SocketFileError) {
        guard path.utf8.count < 108 else { throw .pathTooLong(path: path) }
        let directory = Self.directory(of: path)
        try Self.createDirectory(directory)
        var info = stat()
        guard lstat(path, &info) == 0 else { return }
        guard (info.st_mode & S_IFMT) == S_IFSOCK else { throw .notASocket(path: path) }
        if Self.isAccepting(path: path) {
            throw .alreadyServing(path: path)
        }
        unlink(path)
    }

    /// Sets the socket file's permission bits.
    static func setMode(path: String, mode: UInt16) throws(SocketFileError) {
        guard chmod(path, mode_t(mode)) == 0 else {
            throw .cannotChangeMode(path: path, errno: errno)
        }
    }

    static func remove(path: String) {
        unlink(path)
    }

    private static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        let directory = String(path[..<slash])
        return directory.isEmpty ? "/" : directory
    }

    private static func createDirectory(_ directory: String) throws(SocketFileError) {
        var info = stat()
        if stat(directory, &info) == 0 { return }
        let parent = Self.directory(of: directory)
        if parent != directory {
            try Self.createDirectory(parent)
        }
        if mkdir(directory, 0o750) != 0, errno != EEXIST {
            throw .cannotCreateDirectory(path: directory, errno: errno)
        }
    }

    /// Whether a process accepts connections on the socket at `path`.
    private static func isAccepting(path: String) -> Bool {
        #if canImport(Glibc)
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        #else
            let fd = socket(AF_UNIX, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            let bytes = Array(path.utf8.prefix(buffer.count - 1))
            buffer.copyBytes(from: bytes)
            buffer[bytes.count] = 0
        }
        let result = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        return result == 0
    }
}
