import Foundation
import Logging
import MentoryEngine
import MentoryEventLoop
import MentoryHandlerKit
import MentoryTestSupport
import MentoryWire
import MentoryWireFixtures
import NIOCore
import SwiftProtobuf
import Testing

@testable import MentoryServer

#if canImport(Glibc)
    import Glibc
#endif

/// One ``SocketConnection`` on one end of a real socket pair, with a real engine on an ``EpollEventLoop``; the test
/// is the peer, on the other end, with blocking calls that give up after a generous minute.
private final class SocketHarness: Sendable {
    let loop: EpollEventLoop
    let engine: MentoryEngine
    /// The test's end of the pair.
    let peer: Int32
    private let connection: NIOLoopBound<SocketConnection>
    /// Yields once when the server's end is closed and the connection let go of it.
    let closed: AsyncStream<Void>

    init(loop: EpollEventLoop, configure: (inout ServerConfiguration) -> Void = { _ in }) async throws {
        var configuration = ServerConfiguration(listener: .path("/unused"))
        configure(&configuration)
        let engine = MentoryEngine(configuration: .init(serverVersion: "test", daemonUID: 1000), eventLoop: loop)
        try await engine.register(BlobHandler())
        var pair: [Int32] = [-1, -1]
        let made = socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair)
        try #require(made == 0, "socketpair: errno \(errno)")
        let (server, peer) = (pair[0], pair[1])
        _ = fcntl(server, F_SETFL, fcntl(server, F_GETFL) | O_NONBLOCK)
        var timeout = timeval(tv_sec: 60, tv_usec: 0)
        setsockopt(peer, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(peer, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let (closed, closedContinuation) = AsyncStream.makeStream(of: Void.self)
        let settings = configuration
        self.connection = try await loop.submit(withSelector: { selector in
            let connection = Connection(
                engine: engine, id: ConnectionID(1), configuration: settings,
                credentials: PeerCredentials(pid: 1, uid: 1000, gid: 1000), logger: Logger(label: "test"),
                flusher: TickFlusher(eventLoop: loop))
            let socket = try SocketConnection.serve(
                server, connection: connection, selector: selector, eventLoop: loop, readBuffer: SocketReadBuffer()
            ) { closedContinuation.finish() }
            return NIOLoopBound(socket, eventLoop: loop)
        }).get()
        (self.loop, self.engine, self.peer, self.closed) = (loop, engine, peer, closed)
    }

    deinit {
        Glibc.close(self.peer)
    }

    /// Runs `body` with the connection, on the loop.
    func onLoop<Result: Sendable>(_ body: @escaping @Sendable (SocketConnection) -> Result) async throws -> Result {
        let connection = self.connection
        return try await self.loop.submit { body(connection.value) }.get()
    }

    /// Writes `envelopes` as one `send`: one buffer, several frames.
    func send(_ envelopes: [Mentory_V1_Envelope]) {
        var buffer = ByteBuffer()
        for envelope in envelopes { buffer.writeFrame(envelope) }
        self.send(buffer)
    }

    func send(_ buffer: ByteBuffer) {
        buffer.withUnsafeReadableBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let sent = Glibc.send(self.peer, bytes.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
                guard sent > 0 else { return }
                offset += sent
            }
        }
    }

    /// Reads whole frames until `count` have come, or the server's end closes (fewer then), on a thread of its own.
    func receive(_ count: Int) async throws -> [Mentory_V1_Envelope] {
        try await onOwnThread { Result { try self.receiveBlocking(count) } }.get()
    }

    private func receiveBlocking(_ count: Int) throws -> [Mentory_V1_Envelope] {
        var envelopes: [Mentory_V1_Envelope] = []
        var bytes = ByteBuffer()
        while envelopes.count < count {
            while let length = bytes.getInteger(at: bytes.readerIndex, as: UInt32.self),
                bytes.readableBytes >= 4 + Int(length)
            {
                bytes.moveReaderIndex(forwardBy: 4)
                envelopes.append(try Mentory_V1_Envelope(frame: bytes.readSlice(length: Int(length))!))
            }
            guard envelopes.count < count else { break }
            let read = bytes.writeWithUnsafeMutableBytes(minimumWritableBytes: 64 * 1024) { room in
                max(0, Glibc.read(self.peer, room.baseAddress, room.count))
            }
            if read == 0 { break }
        }
        #expect(bytes.readableBytes == 0, "no bytes past the frames asked for")
        return envelopes
    }

    /// Whether the server's end is closed: the next read, made on a thread of its own, is end of input.
    func readsEndOfInput() async -> Bool {
        await onOwnThread {
            var byte: UInt8 = 0
            return Glibc.read(self.peer, &byte, 1) == 0
        }
    }

    static func blob(_ id: UInt64, bytes: UInt32) throws -> Mentory_V1_Envelope {
        Harness.request(id, "blob", "get", try Google_Protobuf_UInt32Value(bytes).serializedData())
    }
}

@Suite("SocketConnection: the protocol on a socket of the epoll loop", .timeLimit(.minutes(5)))
struct SocketConnectionTests {
    @Test("a Hello and the requests behind it in one read are answered in order")
    func pipelinedRequests() async throws {
        try await EpollEventLoop.withEventLoop(threadName: "socket-test") { loop in
            let harness = try await SocketHarness(loop: loop)
            harness.send(
                [helloEnvelope(clientName: "socket-test")] + (1...16).map { Harness.request($0, "session", "ping") })
            let frames = try await harness.receive(17)
            guard case .welcome = frames.first?.kind else {
                Issue.record("expected a Welcome first, got \(String(describing: frames.first))")
                return
            }
            #expect(frames.dropFirst().map(\.response.id) == Array(1...16))
            #expect(frames.dropFirst().allSatisfy { $0.response.error.code == 0 })
        }
    }

    @Test("a reply larger than the socket's buffers is written as the peer takes it, and the connection goes on")
    func replyLargerThanTheSocketBuffer() async throws {
        try await EpollEventLoop.withEventLoop(threadName: "socket-test") { loop in
            let harness = try await SocketHarness(loop: loop)
            harness.send([helloEnvelope(clientName: "socket-test"), try SocketHarness.blob(1, bytes: 900 * 1024)])
            let frames = try await harness.receive(2)
            #expect(frames.last?.response.id == 1)
            let body = try Google_Protobuf_BytesValue(serializedBytes: frames.last?.response.body ?? Data())
            #expect(body.value.count == 900 * 1024)
            harness.send([Harness.request(2, "session", "ping")])
            #expect(try await harness.receive(1).first?.response.id == 2)
        }
    }

    @Test("a peer that does not read is no longer read from past the outbound bound, and is read again once it reads")
    func outboundBoundHoldsReadingBack() async throws {
        try await EpollEventLoop.withEventLoop(threadName: "socket-test") { loop in
            let harness = try await SocketHarness(loop: loop) { $0.maxOutboundBytes = 256 * 1024 }
            harness.send([helloEnvelope(clientName: "socket-test")])
            _ = try await harness.receive(1)
            // Each request asks for 64 KiB: the replies fill the socket, then the bound, and the server stops
            // reading. Whenever the socket takes no more, the loop is asked (after its turn) whether it still reads.
            let request = try SocketHarness.blob(1, bytes: 64 * 1024)
            var frame = ByteBuffer()
            frame.writeFrame(request)
            _ = fcntl(harness.peer, F_SETFL, fcntl(harness.peer, F_GETFL) | O_NONBLOCK)
            var sent = 0
            func sendOne() throws -> Bool {
                let result = frame.withUnsafeReadableBytes {
                    Glibc.send(harness.peer, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
                }
                if result < 0, errno == EAGAIN { return false }
                try #require(result == frame.readableBytes, "a request's frame goes in whole")
                sent += 1
                return true
            }
            var reading = true
            while reading, sent < 10_000 {
                if try !sendOne() { reading = try await harness.onLoop { $0.isReading } }
            }
            #expect(!reading, "the server stopped reading a peer that does not read")
            // Nothing reads the socket now: it fills, and stays full after the loop's next turn.
            var more = 0
            while try sendOne(), more < 10_000 { more += 1 }
            #expect(try await harness.onLoop { !$0.isReading })
            #expect(try !sendOne(), "the server still does not read")
            _ = fcntl(harness.peer, F_SETFL, fcntl(harness.peer, F_GETFL) & ~O_NONBLOCK)
            let replies = try await harness.receive(sent)
            #expect(replies.count == sent, "every request sent is answered once the peer reads")
            #expect(replies.allSatisfy { $0.response.error.code == 0 })
        }
    }

    @Test("a frame cut short at the end of input gets TRUNCATED_FRAME, then the socket is closed")
    func truncatedFrameAtEndOfInput() async throws {
        try await EpollEventLoop.withEventLoop(threadName: "socket-test") { loop in
            let harness = try await SocketHarness(loop: loop)
            harness.send([helloEnvelope(clientName: "socket-test")])
            _ = try await harness.receive(1)
            var partial = ByteBuffer()
            partial.writeInteger(UInt32(100))
            partial.writeBytes([1, 2, 3])
            harness.send(partial)
            shutdown(harness.peer, Int32(SHUT_WR))
            let frames = try await harness.receive(1)
            #expect(frames.first?.connectionError.error.code == UInt32(Mentory_V1_ErrorCode.truncatedFrame.rawValue))
            #expect(frames.first?.connectionError.closing == true)
            #expect(await harness.readsEndOfInput())
            for await _ in harness.closed {}
        }
    }

    @Test("the peer's half-close at a frame boundary is answered, then the socket is closed")
    func halfCloseAtAFrameBoundary() async throws {
        try await EpollEventLoop.withEventLoop(threadName: "socket-test") { loop in
            let harness = try await SocketHarness(loop: loop)
            harness.send([helloEnvelope(clientName: "socket-test"), Harness.request(1, "session", "ping")])
            shutdown(harness.peer, Int32(SHUT_WR))
            let frames = try await harness.receive(2)
            #expect(frames.last?.response.id == 1)
            #expect(await harness.readsEndOfInput())
            for await _ in harness.closed {}
        }
    }

    @Test("a failed connection tells the peer why, once, then closes")
    func failConnection() async throws {
        try await EpollEventLoop.withEventLoop(threadName: "socket-test") { loop in
            let harness = try await SocketHarness(loop: loop)
            harness.send([helloEnvelope(clientName: "socket-test")])
            _ = try await harness.receive(1)
            try await harness.onLoop { socket in
                socket.connection.failConnection(.shuttingDown)
                socket.connection.failConnection(.shuttingDown)
            }
            let frames = try await harness.receive(2)
            #expect(frames.count == 1, "one closing error: \(frames)")
            #expect(frames.first?.connectionError.error.code == UInt32(Mentory_V1_ErrorCode.shuttingDown.rawValue))
            #expect(frames.first?.connectionError.closing == true)
            for await _ in harness.closed {}
            #expect(try await harness.onLoop { !$0.isOpen })
        }
    }

    @Test("the peer's close ends the connection, and the engine lets go of it")
    func peerCloses() async throws {
        try await EpollEventLoop.withEventLoop(threadName: "socket-test") { loop in
            let harness = try await SocketHarness(loop: loop)
            harness.send([helloEnvelope(clientName: "socket-test")])
            _ = try await harness.receive(1)
            #expect(await harness.engine.connectionCount == 1)
            // Both directions shut, as a close does; the descriptor itself is the harness's to close, once.
            shutdown(harness.peer, Int32(SHUT_RDWR))
            for await _ in harness.closed {}
            #expect(await harness.engine.connectionCount == 0)
        }
    }

    @Test("the loop's shutdown closes the socket")
    func loopShutdown() async throws {
        let loop = try EpollEventLoop(threadName: "socket-test")
        let harness = try await SocketHarness(loop: loop)
        harness.send([helloEnvelope(clientName: "socket-test")])
        _ = try await harness.receive(1)
        try await loop.shutdownGracefully()
        #expect(await harness.readsEndOfInput())
        for await _ in harness.closed {}
    }
}
