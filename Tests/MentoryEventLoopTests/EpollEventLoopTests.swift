import Glibc
import MentoryEventLoop
import NIOCore
import Synchronization
import Testing

/// Runs `body` with a new loop, and shuts the loop down after it, whether it threw or not.
func withLoop<Result>(
    threadName: String = "loop-test", _ body: (EpollEventLoop) async throws -> Result
) async throws -> Result {
    let loop = try EpollEventLoop(threadName: threadName)
    do {
        let result = try await body(loop)
        try await loop.shutdownGracefully()
        return result
    } catch {
        try? await loop.shutdownGracefully()
        throw error
    }
}

extension String {
    func trimmingSuffix(_ suffix: String) -> String {
        self.hasSuffix(suffix) ? String(self.dropLast(suffix.count)) : self
    }
}

/// An actor whose executor is the loop.
actor LoopIsolated {
    let loop: EpollEventLoop
    private(set) var calls = 0

    init(loop: EpollEventLoop) {
        self.loop = loop
    }

    nonisolated var unownedExecutor: UnownedSerialExecutor {
        self.loop.asUnownedSerialExecutor()
    }

    func call() -> Bool {
        self.calls += 1
        return self.loop.inEventLoop
    }
}

@Suite(.timeLimit(.minutes(1)))
struct EpollEventLoopTests {
    @Test func tasksRunOnTheLoopsThreadInTheOrderQueued() async throws {
        try await withLoop { loop in
            #expect(!loop.inEventLoop)
            let order = Mutex<[Int]>([])
            let offLoop = Mutex(0)
            for number in 0..<10_000 {
                loop.execute {
                    if !loop.inEventLoop { offLoop.withLock { $0 += 1 } }
                    order.withLock { $0.append(number) }
                }
            }
            let ranOnLoop = try await loop.submit { loop.inEventLoop }.get()
            #expect(ranOnLoop)
            #expect(order.withLock { $0 } == Array(0..<10_000))
            #expect(offLoop.withLock { $0 } == 0)
        }
    }

    @Test func aTaskQueuedByATaskRunsBeforeTheLoopWaitsAgain() async throws {
        try await withLoop { loop in
            // The inner task is queued while the outer runs: it must not wait for a wake-up that never comes.
            let value = try await loop.flatSubmit {
                let promise = loop.makePromise(of: Int.self)
                loop.execute { promise.succeed(42) }
                return promise.futureResult
            }.get()
            #expect(value == 42)
        }
    }

    @Test func futuresAndActorsRunOnTheLoop() async throws {
        try await withLoop { loop in
            let doubled = try await loop.makeSucceededFuture(21).map { $0 * 2 }.get()
            #expect(doubled == 42)
            let actor = LoopIsolated(loop: loop)
            #expect(await actor.call())
            #expect(await actor.call())
            #expect(await actor.calls == 2)
            let box = try await loop.submit { NIOLoopBoundBox(7, eventLoop: loop) }.get()
            #expect(try await loop.submit { box.value }.get() == 7)
        }
    }

    @Test func theThreadHasTheNameGiven() async throws {
        try await withLoop(threadName: "loop-named-test-thread") { loop in
            let name = try await loop.submit { () -> String in
                // The kernel's name of the calling thread.
                let file = open("/proc/thread-self/comm", O_RDONLY)
                defer { close(file) }
                var bytes = [UInt8](repeating: 0, count: 32)
                let count = read(file, &bytes, bytes.count)
                return String(decoding: bytes[..<max(count, 0)], as: UTF8.self).trimmingSuffix("\n")
            }.get()
            #expect(name == "loop-named-test")  // 15 bytes kept.
        }
    }

    @Test func scheduledTasksRunAtOrAfterTheirDeadlinesEarliestFirst() async throws {
        try await withLoop { loop in
            let order = Mutex<[String]>([])
            let start = NIODeadline.now()
            func schedule(_ name: String, after milliseconds: Int64) -> EventLoopFuture<NIODeadline> {
                loop.scheduleTask(in: .milliseconds(milliseconds)) {
                    order.withLock { $0.append(name) }
                    return NIODeadline.now()
                }.futureResult
            }
            let late = schedule("late", after: 60)
            let first = schedule("first", after: 20)
            let second = schedule("second", after: 20)
            let ranLate = try await late.get()
            #expect(try await first.get() >= start + .milliseconds(20))
            #expect(try await second.get() >= start + .milliseconds(20))
            #expect(ranLate >= start + .milliseconds(60))
            #expect(order.withLock { $0 } == ["first", "second", "late"])
        }
    }

    @Test func aTimerScheduledFromAnotherThreadWakesAnIdleLoop() async throws {
        try await withLoop { loop in
            // Idle: nothing queued, no timer, so the loop waits with no time limit until something wakes it.
            try await loop.submit {}.get()
            let ran = try await loop.scheduleTask(in: .milliseconds(1)) { loop.inEventLoop }.futureResult.get()
            #expect(ran)
        }
    }

    @Test func aCancelledTaskNeverRunsAndItsFutureFails() async throws {
        try await withLoop { loop in
            let ran = Mutex(false)
            let scheduled = loop.scheduleTask(in: .hours(1)) { ran.withLock { $0 = true } }
            scheduled.cancel()
            await #expect(throws: EventLoopError.cancelled) { try await scheduled.futureResult.get() }
            // A later timer still runs: the cancelled one left the heap.
            try await loop.scheduleTask(in: .milliseconds(1)) {}.futureResult.get()
            #expect(!ran.withLock { $0 })
        }
    }

    @Test func shutdownRunsWhatIsQueuedFailsWhatIsScheduledAndDropsNewTasks() async throws {
        let loop = try EpollEventLoop()
        let ran = Mutex(0)
        let timerFailure = Mutex<EventLoopError?>(nil)
        let timer = loop.scheduleTask(in: .hours(1)) { ran.withLock { $0 += 1000 } }
        // Added on the loop, as queued work: a future's callbacks run on its loop, and a stopped loop runs none.
        timer.futureResult.whenFailure { error in timerFailure.withLock { $0 = error as? EventLoopError } }
        for _ in 0..<100 { loop.execute { ran.withLock { $0 += 1 } } }
        try await loop.shutdownGracefully()
        #expect(ran.withLock { $0 } == 100)
        #expect(timerFailure.withLock { $0 } == .shutdown)
        // Stopped: a task is dropped (as NIO's loops drop it; a promise completed now would leak, as there).
        loop.execute { ran.withLock { $0 += 1 } }
        try await loop.shutdownGracefully()  // A second shutdown completes at once.
        #expect(ran.withLock { $0 } == 100)
    }
}
