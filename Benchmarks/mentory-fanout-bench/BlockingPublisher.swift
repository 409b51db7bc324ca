import Foundation
import Glibc
import MentoryDomain
import MentoryWire
import NIOCore

/// The single publisher: a blocking connection that pipelines publishes with a bounded window.
struct BlockingPublisher {
    let fd: Int32
    let system: FanoutBench.System

    init(path: String, system: FanoutBench.System) throws {
        self.system = system
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
        guard result == 0 else { throw BenchFailure("publisher cannot connect") }
        if system == .mentoryd {
            var hello = Mentory_V1_Hello()
            hello.protocolVersion = WireProtocol.version
            hello.clientName = "publisher"
            var buffer = ByteBuffer()
            buffer.writeFrame(envelope(hello: hello))
            self.write(buffer)
            _ = self.readReplies(1)
        }
    }

    /// Publishes `events` changes as fast as the server answers, at most 32 unanswered at a time.
    func publishBurst(events: Int) throws {
        try self.publish(events: events, window: 32, prefix: Payload.burst, pause: nil)
    }

    /// Publishes `events` changes one at a time, waiting for each answer and then `interval`.
    func publishPaced(events: Int, interval: Duration) throws {
        try self.publish(events: events, window: 1, prefix: Payload.paced, pause: interval)
    }

    private func publish(events: Int, window: Int, prefix: String, pause: Duration?) throws {
        var outstanding = 0
        for _ in 0..<events {
            var buffer = ByteBuffer()
            let payload = "\(prefix)\(monotonicNanoseconds())"
            switch self.system {
            case .mentoryd:
                var set = Mentory_V1_MentorSetRequest()
                set.content = payload
                set.character = .cool
                buffer.writeFrame(
                    envelope(request: self.nextRequestID(), WireNames.mentor, "set", try set.serializedData()))
            case .redis:
                buffer.writeString("*3\r\n$7\r\nPUBLISH\r\n$2\r\nch\r\n$\(payload.utf8.count)\r\n\(payload)\r\n")
            }
            self.write(buffer)
            outstanding += 1
            if outstanding == window {
                outstanding -= self.readReplies(max(window / 2, 1))
            }
            if let pause {
                let (seconds, attoseconds) = pause.components
                var request = timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
                nanosleep(&request, nil)
            }
        }
        while outstanding > 0 {
            outstanding -= self.readReplies(outstanding)
        }
    }

    func write(_ buffer: ByteBuffer) {
        let bytes = Array(buffer.readableBytesView)
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes {
                send(self.fd, $0.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL))
            }
            if n <= 0 { return }
            sent += n
        }
    }

    /// Reads until at least `count` replies have arrived; returns how many did.
    private func readReplies(_ count: Int) -> Int {
        var pending = self.pending
        var replies = 0
        var chunk = [UInt8](repeating: 0, count: 65536)
        while replies < count {
            let n = chunk.withUnsafeMutableBytes { recv(self.fd, $0.baseAddress!, $0.count, 0) }
            if n <= 0 { break }
            pending.writeBytes(chunk[0..<n])
            switch self.system {
            case .mentoryd:
                while let length = pending.getInteger(at: pending.readerIndex, as: UInt32.self),
                    pending.readableBytes >= 4 + Int(length)
                {
                    pending.moveReaderIndex(forwardBy: 4 + Int(length))
                    replies += 1
                }
            case .redis:
                while let line = RESPDecoder.readLine(&pending) {
                    _ = line
                    replies += 1
                }
            }
        }
        self.pending.clear()
        if pending.readableBytes > 0 { self.pending.writeBuffer(&pending) }
        return replies
    }

    private func nextRequestID() -> UInt64 {
        self.pendingBox.requestID += 1
        return self.pendingBox.requestID
    }

    private let pendingBox = PendingBuffer()
    private var pending: ByteBuffer {
        get { self.pendingBox.buffer }
        nonmutating set { self.pendingBox.buffer = newValue }
    }

    func close() {
        Glibc.close(self.fd)
    }
}

/// Bytes read past the last complete reply, kept for the next read.
final class PendingBuffer {
    var buffer = ByteBuffer()
    var requestID: UInt64 = 0
}
