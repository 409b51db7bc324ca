import Logging
import MentoryEventLoop
import MentoryTestSupport
import NIOConcurrencyHelpers
import NIOCore
import Testing

@testable import MentoryServer

#if canImport(Glibc)
    import Glibc
#endif

/// Connects a blocking Unix stream socket to `path`; the caller closes it.
private func connect(to path: String) throws -> Int32 {
    let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    try #require(descriptor >= 0)
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
        }
    }
    try #require(connected == 0, "connect: errno \(errno)")
    return descriptor
}

@Suite("SocketListener: accepting on the epoll loop", .timeLimit(.minutes(5)))
struct SocketListenerTests {
    @Test("every connection waiting is accepted in one readiness, as a non-blocking descriptor")
    func acceptsEveryWaitingConnection() async throws {
        let path = "\(TestTemporaryDirectory.path)/mentory-listener-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { unlink(path) }
        try await EpollEventLoop.withEventLoop(threadName: "listener-test") { loop in
            let descriptor = try StreamSocket.listen(unixPath: path, backlog: SocketListener.backlog)
            let (accepted, acceptedContinuation) = AsyncStream.makeStream(of: Int32.self)
            // Three connections wait before the listener watches the socket.
            let clients = try (0..<3).map { _ in try connect(to: path) }
            defer { for client in clients { close(client) } }
            let listener = try await loop.submit(withSelector: { selector in
                let listener = try SocketListener.listen(
                    descriptor, selector: selector, eventLoop: loop, logger: Logger(label: "test")
                ) { connection, _ in
                    acceptedContinuation.yield(fcntl(connection, F_GETFL) & O_NONBLOCK)
                    close(connection)
                }
                return NIOLoopBound(listener, eventLoop: loop)
            }).get()
            var flags: [Int32] = []
            for await flag in accepted {
                flags.append(flag)
                if flags.count == 3 { break }
            }
            #expect(flags == [O_NONBLOCK, O_NONBLOCK, O_NONBLOCK])
            try await loop.submit { listener.value.close() }.get()
            #expect(try await loop.submit { !listener.value.isAccepting }.get())
        }
    }

    @Test("a failed accept stops accepting for a second, then the socket is watched again")
    func backsOffAfterAFailedAccept() async throws {
        try await EpollEventLoop.withEventLoop(threadName: "listener-test") { loop in
            // Not a listening socket: readable once its peer writes, and accept4 fails with EINVAL.
            var pair: [Int32] = [-1, -1]
            let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
            try #require(socketpair(AF_UNIX, type, 0, &pair) == 0)
            let (descriptor, peer) = (pair[0], pair[1])
            defer { close(peer) }
            let accepts = NIOLockedValueBox(0)
            let listener = try await loop.submit(withSelector: { selector in
                let listener = try SocketListener.listen(
                    descriptor, selector: selector, eventLoop: loop, logger: Logger(label: "test")
                ) { connection, _ in
                    accepts.withLockedValue { $0 += 1 }
                    close(connection)
                }
                return NIOLoopBound(listener, eventLoop: loop)
            }).get()
            #expect(try await loop.submit { listener.value.isAccepting }.get())
            var byte: UInt8 = 1
            #expect(write(peer, &byte, 1) == 1)
            // The socket stays readable, so accepting fails again each time the back-off ends: the second back-off
            // shows that the listener watched the socket again. The loop is asked after each of its turns.
            var (backOffs, acceptingWhileBackedOff) = (0, false)
            while backOffs < 2 {
                (backOffs, acceptingWhileBackedOff) = try await loop.submit {
                    (listener.value.backOffs, listener.value.backOffs > 0 && listener.value.isAccepting)
                }.get()
                #expect(!acceptingWhileBackedOff, "not watched while backing off")
                try await loop.scheduleTask(in: .milliseconds(10)) {}.futureResult.get()
            }
            #expect(accepts.withLockedValue { $0 } == 0)
            try await loop.submit { listener.value.close() }.get()
        }
    }
}
