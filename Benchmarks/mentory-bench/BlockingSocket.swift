import Foundation
import Glibc

/// A plain blocking Unix stream socket: the baseline every mentoryd number is compared with.
struct BlockingSocket {
    let fd: Int32

    static func connect(to path: String) throws -> BlockingSocket {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = Self.address(path)
        let result = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard result == 0 else { throw BenchError("cannot connect to \(path): errno \(errno)") }
        return BlockingSocket(fd: fd)
    }

    static func listen(at path: String) throws -> BlockingSocket {
        unlink(path)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = Self.address(path)
        let bound = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0, Glibc.listen(fd, 16) == 0 else { throw BenchError("cannot listen on \(path)") }
        return BlockingSocket(fd: fd)
    }

    func accept() -> BlockingSocket {
        BlockingSocket(fd: Glibc.accept(self.fd, nil, nil))
    }

    func writeAll(_ bytes: [UInt8]) {
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes {
                send(self.fd, $0.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL))
            }
            if n <= 0 { return }
            sent += n
        }
    }

    /// Reads exactly `count` bytes into `buffer`; false on EOF.
    func readExactly(_ count: Int, into buffer: inout [UInt8]) -> Bool {
        if buffer.count < count { buffer = [UInt8](repeating: 0, count: count) }
        var received = 0
        while received < count {
            let n = buffer.withUnsafeMutableBytes { recv(self.fd, $0.baseAddress! + received, count - received, 0) }
            if n <= 0 { return false }
            received += n
        }
        return true
    }

    /// Reads one length-prefixed frame's payload length and payload; false on EOF.
    func readFrame(into buffer: inout [UInt8]) -> Int? {
        guard self.readExactly(4, into: &buffer) else { return nil }
        let length = Int(UInt32(buffer[0]) << 24 | UInt32(buffer[1]) << 16 | UInt32(buffer[2]) << 8 | UInt32(buffer[3]))
        guard self.readExactly(length, into: &buffer) else { return nil }
        return length
    }

    func close() {
        Glibc.close(self.fd)
    }

    private static func address(_ path: String) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            let bytes = Array(path.utf8)
            buffer.copyBytes(from: bytes)
            buffer[bytes.count] = 0
        }
        return address
    }
}

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
