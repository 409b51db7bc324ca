import Glibc
import MentoryEventLoop
import NIOCore
import NIOConcurrencyHelpers
import Testing

/// What a ``Recorder`` saw.
enum Report: Sendable, Equatable {
    case ready(EpollEvents, bytes: [UInt8])
    case shutDown
}

/// A handler that reads what is readable and reports every callback.
final class Recorder: EpollHandler {
    let reports: AsyncStream<Report>.Continuation
    /// Run after each `ready` report, on the loop.
    var onReady: ((EpollRegistration) -> Void)?

    init(_ reports: AsyncStream<Report>.Continuation) {
        self.reports = reports
    }

    func ready(_ events: EpollEvents, registration: EpollRegistration) {
        var bytes: [UInt8] = []
        if events.contains(.readable) {
            var buffer = [UInt8](repeating: 0, count: 64)
            let count = read(registration.descriptor, &buffer, buffer.count)
            if count > 0 { bytes = Array(buffer[..<count]) }
        }
        self.reports.yield(.ready(events, bytes: bytes))
        self.onReady?(registration)
    }

    func loopShutDown(registration: EpollRegistration) {
        self.reports.yield(.shutDown)
    }
}

/// A connected pair of non-blocking Unix stream sockets, closed when it goes.
final class SocketPair: Sendable {
    let ours: Int32
    let theirs: Int32

    init() throws {
        var descriptors: [Int32] = [-1, -1]
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        guard socketpair(AF_UNIX, type, 0, &descriptors) == 0 else { throw EpollError("socketpair", errno: errno) }
        (self.ours, self.theirs) = (descriptors[0], descriptors[1])
    }

    deinit {
        close(self.ours)
        close(self.theirs)
    }

    /// Writes `bytes` to the peer's end, so that ours is readable.
    func send(_ bytes: [UInt8]) {
        #expect(write(self.theirs, bytes, bytes.count) == bytes.count)
    }
}

/// Registers a ``Recorder`` for `descriptor` on `loop`, which runs `onReady` after each report; `registered` runs on
/// the loop with the registration first. Returns what the recorder reports.
func record(
    _ descriptor: Int32, interest: EpollEvents, on loop: EpollEventLoop,
    onReady: @escaping @Sendable (EpollRegistration) -> Void,
    registered: @escaping @Sendable (EpollRegistration) throws -> Void = { _ in }
) async throws -> AsyncStream<Report>.Iterator {
    let (reports, continuation) = AsyncStream.makeStream(of: Report.self)
    try await loop.submit(withSelector: { selector in
        let recorder = Recorder(continuation)
        recorder.onReady = onReady
        try registered(try selector.register(descriptor, interest: interest, handler: recorder))
    }).get()
    return reports.makeAsyncIterator()
}

@Suite(.timeLimit(.minutes(1)))
struct EpollSelectorTests {
    @Test func aReadableDescriptorIsReportedUntilDeregistered() async throws {
        let (reports, continuation) = AsyncStream.makeStream(of: Report.self)
        var iterator = reports.makeAsyncIterator()
        let watched = try SocketPair()
        let sentinel = try SocketPair()
        try await EpollEventLoop.withEventLoop(threadName: "loop-test") { loop in
            try await loop.submit(withSelector: { selector in
                let recorder = Recorder(continuation)
                // The first report deregisters the descriptor.
                recorder.onReady = { $0.deregister() }
                _ = try selector.register(watched.ours, interest: .readable, handler: recorder)
            }).get()
            watched.send([1, 2, 3])
            #expect(await iterator.next() == .ready(.readable, bytes: [1, 2, 3]))
            // Readable again, but deregistered: the sentinel, made readable after it, is reported alone.
            watched.send([4])
            sentinel.send([5])
            try await loop.submit(withSelector: { selector in
                #expect(selector.count == 0)
                _ = try selector.register(sentinel.ours, interest: .readable, handler: Recorder(continuation))
            }).get()
            #expect(await iterator.next() == .ready(.readable, bytes: [5]))
        }
        #expect(await iterator.next() == .shutDown)  // The sentinel's, as the loop shut down.
    }

    @Test func aDescriptorDeregisteredEarlierInTheSameBatchIsNotReported() async throws {
        let (reports, continuation) = AsyncStream.makeStream(of: Report.self)
        var iterator = reports.makeAsyncIterator()
        let first = try SocketPair()
        let second = try SocketPair()
        let calls = NIOLockedValueBox(0)
        try await EpollEventLoop.withEventLoop(threadName: "loop-test") { loop in
            loop.execute(withSelector: { selector in
                var both: [EpollRegistration] = []
                for pair in [first, second] {
                    let recorder = Recorder(continuation)
                    recorder.onReady = { registration in
                        calls.withLockedValue { $0 += 1 }
                        // Whichever is reported first deregisters both; the other's event of the batch is dropped.
                        for other in both where other !== registration { other.deregister() }
                        registration.deregister()
                        // Runs once the batch is handled.
                        loop.execute { continuation.yield(.ready([], bytes: [])) }
                    }
                    both.append(try! selector.register(pair.ours, interest: .readable, handler: recorder))
                }
                // Both readable before the loop next waits: one batch reports both.
                first.send([1])
                second.send([2])
            })
            let reported = await iterator.next()
            #expect(reported == .ready(.readable, bytes: [1]) || reported == .ready(.readable, bytes: [2]))
            #expect(await iterator.next() == .ready([], bytes: []))
            #expect(calls.withLockedValue { $0 } == 1)
        }
    }

    @Test func writableIsReportedOnceAskedFor() async throws {
        let pair = try SocketPair()
        try await EpollEventLoop.withEventLoop(threadName: "loop-test") { loop in
            // Once told, it stops asking: writable stays true, and level-triggered would report it every turn.
            var reports = try await record(
                pair.ours, interest: .readable, on: loop, onReady: { try! $0.setInterest(.readable) }
            ) { registration in
                try registration.setInterest([.readable, .writable])
                #expect(registration.interest == [.readable, .writable])
            }
            #expect(await reports.next() == .ready(.writable, bytes: []))
        }
    }

    @Test func thePeersCloseIsAReadHangUp() async throws {
        let pair = try SocketPair()
        try await EpollEventLoop.withEventLoop(threadName: "loop-test") { loop in
            var iterator = try await record(pair.ours, interest: [.readable, .readHangUp], on: loop) {
                $0.deregister()
            }
            shutdown(pair.theirs, Int32(SHUT_WR))
            guard case .ready(let events, let bytes) = await iterator.next() else {
                Issue.record("no readiness reported")
                return
            }
            #expect(events.isSuperset(of: [.readable, .readHangUp]))
            #expect(bytes.isEmpty)
        }
    }

    @Test func registeringABadDescriptorThrowsItsErrno() async throws {
        try await EpollEventLoop.withEventLoop(threadName: "loop-test") { loop in
            let continuation = AsyncStream.makeStream(of: Report.self).continuation
            let error = try await loop.submit(withSelector: { selector -> EpollError? in
                do {
                    _ = try selector.register(-1, interest: .readable, handler: Recorder(continuation))
                    return nil
                } catch let error as EpollError {
                    #expect(selector.count == 0)
                    return error
                }
            }).get()
            #expect(error == EpollError("epoll_ctl(EPOLL_CTL_ADD)", errno: EBADF))
        }
    }
}
