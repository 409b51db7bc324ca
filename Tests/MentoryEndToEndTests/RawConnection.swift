import Foundation
import Glibc
import MentoryWire
import MentoryWireFixtures
import NIOCore

/// A blocking Unix-socket connection that writes and reads raw bytes, for hostile-input tests.
final class RawConnection {
    private let fd: Int32

    /// - Parameters:
    ///   - receiveTimeoutSeconds: How long a read waits before it fails.
    ///   - sendTimeoutSeconds: How long a write waits for the daemon to take bytes before it gives
    ///     up, for peers that test the daemon's back-pressure; `nil` waits for ever.
    init(path: String, receiveTimeoutSeconds: Int = 5, sendTimeoutSeconds: Int? = nil) throws {
        self.fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            let bytes = Array(path.utf8)
            buffer.copyBytes(from: bytes)
            buffer[bytes.count] = 0
        }
        let result = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(self.fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard result == 0 else { throw DaemonFailure(message: "connect failed: errno \(errno)") }
        var timeout = timeval(tv_sec: receiveTimeoutSeconds, tv_usec: 0)
        setsockopt(self.fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        if let sendTimeoutSeconds {
            var timeout = timeval(tv_sec: sendTimeoutSeconds, tv_usec: 0)
            setsockopt(self.fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        }
    }

    deinit {
        close(self.fd)
    }

    /// Writes all of `bytes`, or as much as the peer takes before it closes (or, with a send
    /// timeout, stops reading); returns how many it took.
    @discardableResult
    func write(_ bytes: [UInt8]) -> Int {
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes { buffer in
                Glibc.send(self.fd, buffer.baseAddress! + sent, buffer.count - sent, Int32(MSG_NOSIGNAL))
            }
            guard n > 0 else { break }
            sent += n
        }
        return sent
    }

    /// Ends this side's writing; the daemon sees EOF.
    func shutdownWrite() {
        shutdown(self.fd, Int32(SHUT_WR))
    }

    func send(_ envelope: Mentory_V1_Envelope) {
        self.send([envelope])
    }

    /// Writes the frames of `envelopes` in one go; returns how many bytes the daemon took.
    @discardableResult
    func send(_ envelopes: [Mentory_V1_Envelope]) -> Int {
        self.send(frames: Self.frames(envelopes))
    }

    /// Writes bytes already framed (``frames(_:)``) in one go; returns how many bytes the daemon took.
    @discardableResult
    func send(frames: [UInt8]) -> Int {
        self.write(frames)
    }

    /// The frames of `envelopes`, one after another: encode a large batch before connecting, so that
    /// a slow encoding (a debug build under ThreadSanitizer) cannot outlast the handshake timeout.
    static func frames(_ envelopes: [Mentory_V1_Envelope]) -> [UInt8] {
        var buffer = ByteBuffer()
        for envelope in envelopes { buffer.writeFrame(envelope) }
        return Array(buffer.readableBytesView)
    }

    func hello(version: UInt32 = WireProtocol.version) throws -> Mentory_V1_Envelope {
        self.sendHello(version: version)
        return try self.receive()
    }

    /// Sends a `Hello` without waiting for the answer.
    func sendHello(version: UInt32 = WireProtocol.version) {
        var envelope = Mentory_V1_Envelope()
        var hello = Mentory_V1_Hello()
        hello.protocolVersion = version
        hello.clientName = "raw"
        envelope.hello = hello
        self.send(envelope)
    }

    private func readExactly(_ count: Int) throws -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: count)
        var received = 0
        while received < count {
            let n = bytes.withUnsafeMutableBytes { buffer in
                recv(self.fd, buffer.baseAddress! + received, count - received, 0)
            }
            if n == 0 { return nil }
            guard n > 0 else { throw DaemonFailure(message: "recv failed: errno \(errno)") }
            received += n
        }
        return bytes
    }

    /// Reads one frame and decodes it.
    func receive() throws -> Mentory_V1_Envelope {
        guard let header = try self.readExactly(4) else { throw DaemonFailure(message: "connection closed") }
        let length = Int(UInt32(header[0]) << 24 | UInt32(header[1]) << 16 | UInt32(header[2]) << 8 | UInt32(header[3]))
        guard let payload = try self.readExactly(length) else { throw DaemonFailure(message: "closed mid-frame") }
        return try Mentory_V1_Envelope(frame: ByteBuffer(bytes: payload))
    }

    /// Whether the peer has closed the connection (reads until EOF, bounded by the receive timeout).
    func isClosedByPeer() -> Bool {
        var byte: UInt8 = 0
        while true {
            let n = recv(self.fd, &byte, 1, 0)
            if n == 0 { return true }
            if n < 0 { return false }
        }
    }
}
