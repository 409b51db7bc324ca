import Glibc
import MentoryEventLoop
import NIOCore
import NIOConcurrencyHelpers
import Testing

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

    /// Whether it runs on the loop after a sleep: a timer of the concurrency runtime's, whose job the loop runs.
    func callAfterSleeping() async throws -> Bool {
        try await Task.sleep(for: .milliseconds(1))
        self.calls += 1
        return self.loop.inEventLoop
    }
}

@Suite(.timeLimit(.minutes(1)))
struct EpollEventLoopTests {
    @Test func tasksRunOnTheLoopsThreadInTheOrderQueued() async throws {
        try await EpollEventLoop.withEventLoop(threadName: "loop-test") { loop in
            #expect(!loop.inEventLoop)
            let order = NIOLockedValueBox<[Int]>([])
            let offLoop = NIOLockedValueBox(0)
            for number in 0..<10_000 {
                loop.execute {
                    if !loop.inEventLoop { offLoop.withLockedValue { $0 += 1 } }
                    order.withLockedValue { $0.append(number) }
                }
            }
            let ranOnLoop = try await loop.submit { loop.inEventLoop }.get()
            #expect(ranOnLoop)
            #expect(order.withLockedValue { $0 } == Array(0..<10_000))
            #expect(offLoop.withLockedValue { $0 } == 0)
        }
    }

    @Test func aTaskQueuedByATaskRunsBeforeTheLoopWaitsAgain() async throws {
        try await EpollEventLoop.withEventLoop(threadName: "loop-test") { loop in
            // The inner task is queued while the outer runs: it must not wait for a wake-up that never comes.
            let value = try await loop.flatSubmit {
                let promise = loop.makePromise(of: Int.self)
                loop.execute { promise.succeed(42) }
                return promise.futureResult
            }.get()
            #expect(value == 42)
        }
    }

    @Test func aChainOfTasksLongerThanATurnRunsToItsEndWithNoWakeUp() async throws {
        try await EpollEventLoop.withEventLoop(threadName: "loop-test") { loop in
            let (done, finish) = AsyncStream.makeStream(of: Int.self)
            // Each task queues the next, on the loop: no wake-up is signalled for any of them, and a turn runs at
            // most 4,096, so the loop must not wait while the rest of the chain is queued.
            @Sendable func link(_ number: Int) {
                guard number < 10_000 else {
                    finish.yield(number)
                    return
                }
                loop.execute { link(number + 1) }
            }
            loop.execute { link(0) }
            var iterator = done.makeAsyncIterator()
            #expect(await iterator.next() == 10_000)
        }
    }

    @Test func futuresAndActorsRunOnTheLoop() async throws {
        try await EpollEventLoop.withEventLoop(threadName: "loop-test") { loop in
            let doubled = try await loop.makeSucceededFuture(21).map { $0 * 2 }.get()
            #expect(doubled == 42)
            let actor = LoopIsolated(loop: loop)
            #expect(await actor.call())
            #expect(await actor.call())
            #expect(try await actor.callAfterSleeping())
            #expect(await actor.calls == 3)
            let box = try await loop.submit { NIOLoopBoundBox(7, eventLoop: loop) }.get()
            #expect(try await loop.submit { box.value }.get() == 7)
        }
    }

    @Test func theThreadHasTheNameGiven() async throws {
        try await EpollEventLoop.withEventLoop(threadName: "loop-named-test-thread") { loop in
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
        try await EpollEventLoop.withEventLoop(threadName: "loop-test") { loop in
            let (ran, ranContinuation) = AsyncStream.makeStream(of: (name: String, at: NIODeadline).self)
            let start = NIODeadline.now()
            for (name, milliseconds) in [("late", 60), ("first", 20), ("second", 20)] {
                // Told through a stream, not each future's `get()`: awaiting a future the loop has already completed
                // resumes the continuation before its setup returns, which ThreadSanitizer cannot see is ordered.
                _ = loop.scheduleTask(in: .milliseconds(Int64(milliseconds))) {
                    ranContinuation.yield((name, NIODeadline.now()))
                }
            }
            var order: [String] = []
            for await (name, at) in ran {
                let deadline = start + .milliseconds(name == "late" ? 60 : 20)
                #expect(at >= deadline, "\(name) ran \(deadline - at) early")
                order.append(name)
                if order.count == 3 { break }
            }
            #expect(order == ["first", "second", "late"])
        }
    }

    @Test func aTimerScheduledFromAnotherThreadWakesAnIdleLoop() async throws {
        try await EpollEventLoop.withEventLoop(threadName: "loop-test") { loop in
            // Idle: nothing queued, no timer, so the loop waits with no time limit until something wakes it.
            try await loop.submit {}.get()
            let ran = try await loop.scheduleTask(in: .milliseconds(1)) { loop.inEventLoop }.futureResult.get()
            #expect(ran)
        }
    }

    @Test func aCancelledTaskNeverRunsAndItsFutureFails() async throws {
        try await EpollEventLoop.withEventLoop(threadName: "loop-test") { loop in
            let ran = NIOLockedValueBox(false)
            let scheduled = loop.scheduleTask(in: .hours(1)) { ran.withLockedValue { $0 = true } }
            scheduled.cancel()
            await #expect(throws: EventLoopError.cancelled) { try await scheduled.futureResult.get() }
            // A later timer still runs: the cancelled one left the heap.
            try await loop.scheduleTask(in: .milliseconds(1)) {}.futureResult.get()
            #expect(!ran.withLockedValue { $0 })
        }
    }

    @Test func shutdownRunsWhatIsQueuedFailsWhatIsScheduledAndDropsNewTasks() async throws {
        let loop = try EpollEventLoop()
        let ran = NIOLockedValueBox(0)
        let timerFailure = NIOLockedValueBox<EventLoopError?>(nil)
        let timer = loop.scheduleTask(in: .hours(1)) { ran.withLockedValue { $0 += 1000 } }
        // Added on the loop, as queued work: a future's callbacks run on its loop, and a stopped loop runs none.
        timer.futureResult.whenFailure { error in timerFailure.withLockedValue { $0 = error as? EventLoopError } }
        for _ in 0..<100 { loop.execute { ran.withLockedValue { $0 += 1 } } }
        try await loop.shutdownGracefully()
        #expect(ran.withLockedValue { $0 } == 100)
        #expect(timerFailure.withLockedValue { $0 } == .shutdown)
        // Stopped: a task is dropped (as NIO's loops drop it; a promise completed now would leak, as there).
        loop.execute { ran.withLockedValue { $0 += 1 } }
        try await loop.shutdownGracefully()  // A second shutdown completes at once.
        #expect(ran.withLockedValue { $0 } == 100)
    }
}
