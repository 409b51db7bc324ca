import MentoryHandlerKit
import NIOConcurrencyHelpers
import Testing

/// What a job saw, in the order it saw it.
private final class Sightings: Sendable {
    let events: AsyncStream<String>
    private let continuation: AsyncStream<String>.Continuation
    let seen = NIOLockedValueBox<[String]>([])

    init() {
        (self.events, self.continuation) = AsyncStream.makeStream(of: String.self)
    }

    func record(_ event: String) {
        self.seen.withLockedValue { $0.append(event) }
        self.continuation.yield(event)
    }

    /// The next `count` events.
    func next(_ count: Int) async -> [String] {
        var events: [String] = []
        for await event in self.events {
            events.append(event)
            if events.count == count { break }
        }
        return events
    }
}

/// A gate a job waits at until the test opens it (or the job is cancelled).
private struct Gate: Sendable {
    let stream: AsyncStream<Never>
    let continuation: AsyncStream<Never>.Continuation

    init() {
        (self.stream, self.continuation) = AsyncStream.makeStream(of: Never.self)
    }

    func wait() async {
        for await _ in self.stream {}
    }

    func open() {
        self.continuation.finish()
    }
}

@Suite("Background jobs", .timeLimit(.minutes(1)))
struct BackgroundJobsTests {
    @Test("submitted jobs run, each as a child task of the runner, which returns once stopped")
    func jobsRun() async throws {
        let jobs = BackgroundJobs()
        jobs.expectRunner()
        let sightings = Sightings()
        await withDiscardingTaskGroup { group in
            group.addTask { await jobs.run() }
            for index in 1...20 {
                try? jobs.submit { sightings.record("job \(index)") }
            }
            #expect(Set(await sightings.next(20)) == Set((1...20).map { "job \($0)" }))
            jobs.stop()
        }
    }

    @Test("shut-down waits for a running job to finish, within the deadline, and still runs the queued ones")
    func shutdownWaits() async throws {
        let jobs = BackgroundJobs(shutdownDeadline: .seconds(3600))
        jobs.expectRunner()
        let sightings = Sightings()
        let gate = Gate()
        await withDiscardingTaskGroup { group in
            group.addTask {
                await jobs.run()
                sightings.record("runner returned")
            }
            try? jobs.submit {
                sightings.record("started")
                await gate.wait()
                sightings.record(Task.isCancelled ? "cancelled" : "finished")
            }
            #expect(await sightings.next(1) == ["started"])
            try? jobs.submit { sightings.record("queued before the stop") }
            jobs.stop()
            let refusal = #expect(throws: BackgroundJobs.Refusal.self) {
                try jobs.submit { sightings.record("after the stop") }
            }
            #expect(refusal?.reason == .stopped)
            #expect(refusal?.description.contains("the runner stopped") == true)
            #expect(await sightings.next(1) == ["queued before the stop"])
            gate.open()
            #expect(await sightings.next(2) == ["finished", "runner returned"])
        }
        #expect(!sightings.seen.withLockedValue { $0 }.contains("after the stop"))
    }

    @Test("a job still running at the shut-down deadline is cancelled, and the runner returns once it ended")
    func cancelledAfterDeadline() async throws {
        let jobs = BackgroundJobs(shutdownDeadline: .milliseconds(1))
        jobs.expectRunner()
        let sightings = Sightings()
        let gate = Gate()
        await withDiscardingTaskGroup { group in
            group.addTask {
                await jobs.run()
                sightings.record("runner returned")
            }
            try? jobs.submit {
                sightings.record("started")
                // Never opened: only the cancellation ends the wait.
                await gate.wait()
                sightings.record(Task.isCancelled ? "cancelled" : "finished")
            }
            #expect(await sightings.next(1) == ["started"])
            jobs.stop()
            #expect(await sightings.next(2) == ["cancelled", "runner returned"])
        }
        gate.open()
    }

    @Test("the queue holds at most its capacity; more are refused at once, and queued jobs run once a runner runs")
    func boundedQueue() async throws {
        let jobs = BackgroundJobs(capacity: 2)
        let sightings = Sightings()
        jobs.expectRunner()
        try jobs.submit { sightings.record("one") }
        try jobs.submit { sightings.record("two") }
        let refusal = #expect(throws: BackgroundJobs.Refusal.self) {
            try jobs.submit { sightings.record("three") }
        }
        #expect(refusal?.reason == .full)
        #expect(refusal?.description.contains("2 jobs wait already") == true)
        // Stopped before it ran: the runner takes what was queued, and returns.
        jobs.stop()
        await jobs.run()
        // Each a child task of its own: they run in either order.
        #expect(sightings.seen.withLockedValue { $0 }.sorted() == ["one", "two"])
    }

    @Test("jobs nobody runs are refused at once, with why, rather than left to wait for ever")
    func notRunning() throws {
        for jobs in [BackgroundJobs(), BackgroundJobs.unavailable] {
            let refusal = #expect(throws: BackgroundJobs.Refusal.self) {
                try jobs.submit {}
            }
            #expect(refusal?.reason == .notRunning)
            #expect(refusal?.description.contains("no runner runs these jobs") == true)
            let timer = #expect(throws: BackgroundJobs.Refusal.self) {
                try jobs.schedule(at: .now) {}
            }
            #expect(timer?.reason == .notRunning)
        }
    }

    @Test("a timer runs its job at its deadline, a cancelled one never does, and neither holds up shut-down")
    func timers() async throws {
        let jobs = BackgroundJobs(shutdownDeadline: .seconds(3600))
        jobs.expectRunner()
        let sightings = Sightings()
        await withDiscardingTaskGroup { group in
            group.addTask {
                await jobs.run()
                sightings.record("runner returned")
            }
            let cancelled = try? jobs.schedule(at: .now + .seconds(3600)) { sightings.record("cancelled fired") }
            let cancelledAtOnce = try? jobs.schedule(at: .now + .seconds(3600)) {
                sightings.record("cancelled at once fired")
            }
            cancelledAtOnce?.cancel()
            _ = try? jobs.schedule(at: .now) { sightings.record("due fired") }
            #expect(await sightings.next(1) == ["due fired"])
            cancelled?.cancel()
            jobs.stop()
            #expect(await sightings.next(1) == ["runner returned"])
        }
        let seen = sightings.seen.withLockedValue { $0 }
        #expect(!seen.contains("cancelled fired"))
        #expect(!seen.contains("cancelled at once fired"))
    }
}
