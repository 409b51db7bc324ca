import Logging
import Synchronization

/// The daemon's background work: jobs that outlive the call that started them, and timers.
///
/// Every job runs as a child task of one runner, `run()`, so that none escapes the structure that runs
/// it: the daemon runs the runner as a service of its `ServiceGroup`, started before the services that
/// submit jobs and stopped after them, so that shut-down waits for the jobs. On `stop()` the runner
/// takes no more jobs, lets those it took (and those still queued) finish within ``shutdownDeadline``,
/// then cancels them and returns once they have ended.
///
/// Jobs wait in a queue of at most ``capacity`` until the runner takes them. A job is refused at once,
/// with a ``Refusal`` that says why, rather than left to wait for ever:
/// - when no runner will run them (nobody called `expectRunner()` or `run()`; for instance a
///   ``HandlerContext`` made by a test);
/// - when the queue is full;
/// - after `stop()`.
///
/// A handler reaches its daemon's jobs through ``HandlerContext/jobs``.
public final class BackgroundJobs: Sendable {
    /// Why a job was not taken.
    public struct Refusal: Error, CustomStringConvertible, Equatable {
        /// The kinds of refusal.
        public enum Reason: Sendable, Equatable {
            /// No runner runs these jobs, nor will.
            case notRunning
            /// ``BackgroundJobs/capacity`` jobs wait already.
            case full
            /// The runner stopped: the daemon is shutting down.
            case stopped
        }

        /// Why the job was not taken.
        public let reason: Reason
        /// The queue's capacity, for the message.
        let capacity: Int

        public var description: String {
            switch self.reason {
            case .notRunning:
                "background job refused: no runner runs these jobs (run BackgroundJobs.run(), as the daemon"
                    + " does in its service group, or build the engine with the test support that runs it)"
            case .full:
                "background job refused: \(self.capacity) jobs wait already, the most the queue holds"
            case .stopped:
                "background job refused: the runner stopped (the daemon is shutting down)"
            }
        }
    }

    /// A job that runs at a deadline unless cancelled first (``BackgroundJobs/schedule(at:_:)``).
    public struct Timer: Sendable {
        fileprivate let cancellation: AsyncStream<Never>.Continuation

        /// Cancels the timer: its job does not run if it has not started yet. Idempotent.
        public func cancel() {
            self.cancellation.finish()
        }
    }

    private struct Job: Sendable {
        let body: @Sendable () async -> Void
    }

    private static let idle: UInt8 = 0
    private static let expected: UInt8 = 1
    private static let running: UInt8 = 2
    private static let stopped: UInt8 = 3

    /// How long jobs may run on after ``stop()`` unless told otherwise: the engine's.
    package static let defaultShutdownDeadline = Duration.seconds(5)

    /// The most jobs that may wait to be taken.
    public let capacity: Int
    /// How long jobs may take to finish once the runner stops, before it cancels them.
    public let shutdownDeadline: Duration
    private let logger: Logger
    private let state = Atomic<UInt8>(BackgroundJobs.idle)
    private let jobs: AsyncStream<Job>
    private let queue: AsyncStream<Job>.Continuation
    /// Finished by ``stop()``: the shut-down deadline starts then.
    private let stopSignal: AsyncStream<Never>
    private let stopContinuation: AsyncStream<Never>.Continuation

    /// Jobs that nothing runs yet: call ``expectRunner()`` (or ``run()``) before submitting.
    ///
    /// - Parameters:
    ///   - capacity: The most jobs that may wait to be taken; more are refused (``Refusal/Reason/full``).
    ///   - shutdownDeadline: How long jobs may run on after ``stop()`` before they are cancelled.
    ///   - logger: Where an overrun deadline is logged.
    package init(
        capacity: Int = 4096,
        shutdownDeadline: Duration = BackgroundJobs.defaultShutdownDeadline,
        logger: Logger = Logger(label: "mentoryd.jobs")
    ) {
        precondition(capacity > 0, "a background job queue holds at least one job")
        self.capacity = capacity
        self.shutdownDeadline = shutdownDeadline
        self.logger = logger
        (self.jobs, self.queue) = AsyncStream.makeStream(of: Job.self, bufferingPolicy: .bufferingOldest(capacity))
        (self.stopSignal, self.stopContinuation) = AsyncStream.makeStream(of: Never.self)
    }

    /// Jobs no runner will ever run: every submit is refused with ``Refusal/Reason/notRunning``. What a
    /// ``HandlerContext`` made outside a host has.
    package static let unavailable = BackgroundJobs(capacity: 1)

    /// Says that ``run()`` is about to run these jobs (the daemon says it as it puts the runner in its
    /// service group, before the services that submit jobs start): jobs submitted from now on wait in
    /// the queue until the runner takes them, rather than being refused.
    package func expectRunner() {
        _ = self.state.compareExchange(expected: Self.idle, desired: Self.expected, ordering: .acquiringAndReleasing)
    }

    /// Whether the runner stopped taking jobs.
    package var isStopped: Bool {
        self.state.load(ordering: .acquiring) == Self.stopped
    }

    /// Queues `job`; the runner runs it as a child task of its own.
    ///
    /// Throws a ``Refusal`` at once when no runner will run it, when the queue is full or after the
    /// runner stopped; the job is not run then.
    public func submit(_ job: @escaping @Sendable () async -> Void) throws(Refusal) {
        if self.state.load(ordering: .acquiring) == Self.idle {
            throw Refusal(reason: .notRunning, capacity: self.capacity)
        }
        switch self.queue.yield(Job(body: job)) {
        case .enqueued:
            return
        case .dropped:
            throw Refusal(reason: .full, capacity: self.capacity)
        case .terminated:
            throw Refusal(reason: .stopped, capacity: self.capacity)
        @unknown default:
            throw Refusal(reason: .stopped, capacity: self.capacity)
        }
    }

    /// Runs `job` at `deadline`, unless the returned timer is cancelled first (then `job` never runs).
    ///
    /// A timer counts as one job in the queue until the runner takes it; it is refused as ``submit(_:)``
    /// refuses a job. A timer still waiting when the shut-down deadline passes is cancelled with the rest.
    public func schedule(
        at deadline: ContinuousClock.Instant,
        _ job: @escaping @Sendable () async -> Void
    ) throws(Refusal) -> Timer {
        let (cancelled, cancellation) = AsyncStream.makeStream(of: Never.self)
        try self.submit {
            let fires = await withTaskGroup(of: Bool.self) { race in
                race.addTask {
                    do {
                        try await Task.sleep(until: deadline, clock: .continuous)
                        return true
                    } catch {
                        return false
                    }
                }
                race.addTask {
                    // Ends when the timer is cancelled, or when this task is.
                    for await _ in cancelled {}
                    return false
                }
                let first = await race.next() ?? false
                race.cancelAll()
                return first
            }
            guard fires, !Task.isCancelled else { return }
            await job()
        }
        return Timer(cancellation: cancellation)
    }

    /// Stops taking jobs: every submit from now on is refused (``Refusal/Reason/stopped``). The runner
    /// still runs the jobs taken before, those queued among them, within ``shutdownDeadline``. Idempotent.
    package func stop() {
        self.state.store(Self.stopped, ordering: .releasing)
        self.queue.finish()
        self.stopContinuation.finish()
    }

    /// Runs every job submitted, each as a child task, until ``stop()``; then lets them finish within
    /// ``shutdownDeadline``, cancels those still running and returns once every one has ended.
    ///
    /// Cancelling the task that runs it cancels the jobs at once; it returns when they have ended.
    /// Call it once.
    package func run() async {
        var current = self.state.load(ordering: .acquiring)
        while current != Self.stopped {
            precondition(current != Self.running, "BackgroundJobs.run() is already running")
            let (exchanged, original) = self.state.compareExchange(
                expected: current, desired: Self.running, ordering: .acquiringAndReleasing)
            if exchanged { break }
            current = original
        }
        // true: every job ended; false: the deadline passed; nil: the deadline's timer was cancelled.
        await withTaskGroup(of: Bool?.self) { group in
            group.addTask {
                await withDiscardingTaskGroup { running in
                    for await job in self.jobs {
                        running.addTask { await job.body() }
                    }
                }
                return true
            }
            group.addTask {
                for await _ in self.stopSignal {}
                guard !Task.isCancelled else { return nil }
                do {
                    try await Task.sleep(for: self.shutdownDeadline)
                    return false
                } catch {
                    return nil
                }
            }
            while let ended = await group.next() {
                if ended == true {
                    group.cancelAll()
                } else if ended == false {
                    self.logger.error(
                        "background jobs overran the shut-down deadline; cancelling them",
                        metadata: ["deadline": "\(self.shutdownDeadline)"])
                    group.cancelAll()
                }
            }
        }
    }
}
