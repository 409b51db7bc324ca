#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif
import MentoryStorage

/// The few POSIX file operations the store needs, each failing with an actionable message.
enum FileSystem {
    /// The text of the current `errno`.
    static func errnoText(_ code: Int32 = errno) -> String {
        String(cString: strerror(code))
    }

    /// The directory holding `path`.
    static func parentDirectory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        let parent = String(path[..<slash])
        return parent.isEmpty ? "/" : parent
    }

    /// The size of the file at `path`, or `nil` when it does not exist.
    static func fileSize(_ path: String) -> Int64? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return Int64(info.st_size)
    }

    /// Whether `path` names a directory.
    static func isDirectory(_ path: String) -> Bool {
        var info = stat()
        guard stat(path, &info) == 0 else { return false }
        return (info.st_mode & S_IFMT) == S_IFDIR
    }

    /// Makes the entries of `directory` durable (a new or renamed file survives a power cut).
    static func syncDirectory(_ directory: String) throws(StorageError) {
        let fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else {
            throw .failed("cannot open the directory \(directory) to sync it: \(self.errnoText())")
        }
        defer { close(fd) }
        guard fsync(fd) == 0 else {
            throw .failed("cannot sync the directory \(directory): \(self.errnoText())")
        }
    }

    /// Flushes the file at `path` to the disk.
    static func syncFile(_ path: String) throws(StorageError) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw .failed("cannot open \(path) to sync it: \(self.errnoText())")
        }
        defer { close(fd) }
        guard fsync(fd) == 0 else {
            throw .failed("cannot sync \(path) to the disk: \(self.errnoText())")
        }
    }

    /// Reads up to `count` bytes at the start of the open file `fd`.
    static func readPrefix(_ fd: Int32, count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        let read = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, count, 0) }
        return read > 0 ? Array(bytes[..<read]) : []
    }

    /// Takes an exclusive `flock` on `descriptor`, retrying until `limit` passes.
    ///
    /// Returns `false` with `errno` set when the lock stays taken (`EWOULDBLOCK`) or cannot be had.
    static func lockExclusively(_ descriptor: Int32, waitingUpTo limit: Duration) -> Bool {
        let deadline = ContinuousClock.now + limit
        while true {
            if flock(descriptor, LOCK_EX | LOCK_NB) == 0 { return true }
            let code = errno
            guard code == EWOULDBLOCK || code == EINTR, ContinuousClock.now < deadline else {
                errno = code
                return false
            }
            usleep(20_000)
        }
    }

    /// Closes a descriptor this module opened.
    static func closeDescriptor(_ descriptor: Int32) {
        _ = close(descriptor)
    }

    /// Removes `path` if it exists, ignoring failures (for clean-up after another failure).
    static func removeIfPresent(_ path: String) {
        _ = unlink(path)
    }
}
