import Dispatch
import MentoryStorage
import MentoryStorageSQLite
import MentoryTestSupport
import Synchronization
import Testing

/// A caller loop on a serial dispatch queue, counting the jobs and the work it ran.
private final class QueueCallerLoop: CallerLoop {
    let queue = DispatchQueue(label: "caller-loop")
    let jobs = Atomic<Int>(0)
    let work = Atomic<Int>(0)

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        self.queue.async {
            self.jobs.add(1, ordering: .relaxed)
            job.runSynchronously(on: self.asUnownedTaskExecutor())
        }
    }

    func execute(_ work: @escaping @Sendable () -> Void) {
        self.queue.async {
            self.work.add(1, ordering: .relaxed)
            work()
        }
    }
}

@Suite("SQLite store: a caller loop")
struct CallerLoopTests {
    @Test("the writes one turn of the caller loop queued share one transaction")
    func writesOfOneTurnShareATransaction() async throws {
        try await withTemporaryDirectory { directory in
            let loop = QueueCallerLoop()
            let store = try openStore(directory) { $0.callerLoop = loop }
            let writers = 20
            let entries = (0..<writers).map { makeEntry(day($0)) }
            // One turn of the loop starts every writer; each runs, and queues its write, on the
            // loop before the batch starts there.
            let takenBeforeTheBatchStarted = Atomic<Int>(-1)
            let tasks = loop.queue.sync {
                let tasks = entries.map { entry in
                    Task(executorPreference: loop) {
                        try await store.insert(entry)
                    }
                }
                // Runs after every writer queued its write, and before the batch starts: the
                // writer thread has been handed nothing yet.
                loop.queue.async {
                    takenBeforeTheBatchStarted.store(store.commitStatistics.writes, ordering: .relaxed)
                }
                return tasks
            }
            for task in tasks {
                #expect(try await task.value == .inserted)
            }
            #expect(takenBeforeTheBatchStarted.load(ordering: .relaxed) == 0)
            let statistics = store.commitStatistics
            #expect(statistics.writes == writers)
            #expect(statistics.batches == 1)
            #expect(statistics.largestBatch == writers)
            try await store.close()
        }
    }

    @Test("a writer on another executor resumes through the loop, where its batch is answered with one hand-over")
    func writersResumeThroughTheLoop() async throws {
        try await withTemporaryDirectory { directory in
            let loop = QueueCallerLoop()
            let store = try openStore(directory) { $0.callerLoop = loop }
            for index in 0..<3 {
                let jobsBefore = loop.jobs.load(ordering: .relaxed)
                let workBefore = loop.work.load(ordering: .relaxed)
                // From a task of Swift's global pool, one write at a time.
                #expect(try await Task.detached { try await store.insert(makeEntry(day(index))) }.value == .inserted)
                // Answered on the loop, with one hand-over; the batch started there too, unless the
                // writer was still finishing the last batch and took this write on next.
                #expect((1...2).contains(loop.work.load(ordering: .relaxed) - workBefore))
                // The writer's continuation resumed on the loop, as its task executor.
                #expect(loop.jobs.load(ordering: .relaxed) - jobsBefore >= 1)
            }
            #expect(store.commitStatistics.batches == 3)
            try await store.close()
        }
    }
}
