import MentoryEventLoop
import NIOCore
import NIOConcurrencyHelpers
import Testing

/// What the handlers did, in order, from any thread.
final class EventLog: Sendable {
    private let entries = NIOLockedValueBox<[String]>([])

    func append(_ entry: String) {
        self.entries.withLockedValue { $0.append(entry) }
    }

    var all: [String] { self.entries.withLockedValue { $0 } }
}

/// A turn-end handler that logs, runs what it was given, and counts its runs.
final class TurnEndLogger: EpollTurnEndHandler {
    let log: EventLog
    let name: String
    var onTurnEnded: (() -> Void)?

    init(_ name: String, log: EventLog) {
        self.name = name
        self.log = log
    }

    func turnEnded() {
        self.log.append(self.name)
        self.onTurnEnded?()
    }
}

/// A readiness handler that logs its descriptor's readiness, reads it, and runs what it was given.
final class ReadyLogger: EpollHandler {
    let log: EventLog
    var onReady: (() -> Void)?

    init(log: EventLog) {
        self.log = log
    }

    func ready(_ events: EpollEvents, registration: EpollRegistration) {
        var buffer = ByteBuffer()
        _ = StreamSocket.read(registration.descriptor, into: &buffer, maximumBytes: 64)
        self.log.append("ready")
        self.onReady?()
    }

    func loopShutDown(registration: EpollRegistration) {
        registration.deregister()
    }
}

@Suite(.timeLimit(.minutes(1)))
struct TurnEndTests {
    @Test func theTurnsEndComesAfterItsEventsAndTasksAndWhatItQueuesRunsBeforeTheLoopWaits() async throws {
        let log = EventLog()
        let (done, finish) = AsyncStream.makeStream(of: Void.self)
        let first = try SocketPair()
        let second = try SocketPair()
        try await EpollEventLoop.withEventLoop(threadName: "loop-test") { loop in
            loop.execute(withSelector: { selector in
                let end = TurnEndLogger("end", log: log)
                // Queued by the turn's end, on the loop: no wake-up comes for it, so the loop must look again.
                end.onTurnEnded = {
                    loop.execute {
                        log.append("queued by the end"); finish.yield()
                    }
                }
                var asked = false
                for pair in [first, second] {
                    let handler = ReadyLogger(log: log)
                    handler.onReady = {
                        guard !asked else { return }
                        asked = true
                        selector.atEndOfTurn(end)
                        loop.execute { log.append("task") }
                    }
                    _ = try! selector.register(pair.ours, interest: .readable, handler: handler)
                }
                first.send([1])
                second.send([2])
            })
            var iterator = done.makeAsyncIterator()
            await iterator.next()
            #expect(log.all == ["ready", "ready", "task", "end", "queued by the end"])
        }
    }

    @Test func aHandlerAskedForByTheTurnsEndRunsInTheSameTurn() async throws {
        let log = EventLog()
        let (done, finish) = AsyncStream.makeStream(of: Void.self)
        try await EpollEventLoop.withEventLoop(threadName: "loop-test") { loop in
            loop.execute(withSelector: { selector in
                let first = TurnEndLogger("first", log: log)
                let second = TurnEndLogger("second", log: log)
                first.onTurnEnded = { selector.atEndOfTurn(second) }
                // Nothing else wakes the loop: if it waited before `second` ran, this would never come.
                second.onTurnEnded = { finish.yield() }
                selector.atEndOfTurn(first)
            })
            var iterator = done.makeAsyncIterator()
            await iterator.next()
            #expect(log.all == ["first", "second"])
        }
    }
}
