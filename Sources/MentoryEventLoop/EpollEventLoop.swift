import CMentoryShims
import Dispatch
import Glibc
import NIOCore
import NIOConcurrencyHelpers
import Synchronization

/// One thread running a level-triggered epoll loop, as Redis runs its own: a NIOCore `EventLoop` (tasks, timers,
/// futures, and a serial executor for actors) that also tells registered descriptors when they are ready.
///
/// Each turn of the loop waits for readiness (or the next timer, or a task queued from another thread), then
/// handles every ready descriptor of the batch through its ``EpollHandler``, runs the timers that are due and the
/// queued tasks, then the handlers asked for the turn's end (``EpollSelector/atEndOfTurn(_:)``), as a flush of
/// every connection written to; until none of these is left. A task queued during a turn, from a handler or another
/// task, runs in the same turn.
///
/// The descriptors are reached through the loop's ``EpollSelector``, on the loop only: see
/// ``execute(withSelector:)``. Everything else is the `EventLoop` API, callable from any thread.
///
/// Shutting down (``shutdownGracefully(queue:_:)``) deregisters every descriptor, telling each handler
/// (``EpollHandler/loopShutDown(registration:)``), runs the tasks already queued, fails the scheduled ones' futures
/// with `EventLoopError.shutdown`, and ends the thread. As on NIO's own loops, nothing may use the loop after that: a
/// task queued then is dropped, and so is the completion of a promise made on it (a future's callbacks run on its
/// loop).
public final class EpollEventLoop: EventLoop, NIOSerialEventLoopExecutor {
    /// The most ready descriptors one wait returns; more are reported by the next one.
    static let maxEventsPerWait: Int32 = 1024
    /// The most queued tasks one turn runs before it looks at the descriptors again.
    static let maxTasksPerTurn = 4096
    /// The epoll data that names ``wakeup``: no registration's token, whose slot is below `UInt32.max`.
    private static let wakeupToken = UInt64.max

    private enum Lifecycle: Sendable {
        case running
        case shuttingDown
        case stopped
    }

    private enum QueuedTask: Sendable {
        case plain(@Sendable () -> Void)
        case withSelector(@Sendable (EpollSelector) -> Void)

        func run(with selector: EpollSelector) {
            switch self {
            case .plain(let body): body()
            case .withSelector(let body): body(selector)
            }
        }
    }

    /// What threads other than the loop's share with it.
    private struct Shared: Sendable {
        var tasks: [QueuedTask] = []
        var timers = ScheduledTasks()
        var nextTimerID: UInt64 = 0
        var lifecycle = Lifecycle.running
        var whenStopped: [(DispatchQueue, @Sendable ((any Error)?) -> Void)] = []
    }

    private let epoll: Int32
    /// An eventfd, readable when another thread queued the first task of a turn or an earlier timer.
    private let wakeup: Int32
    /// The loop thread's `pthread_t`, or 0 before it starts.
    private let thread = Atomic<UInt>(0)
    /// Whether ``shared`` may hold work for the loop: a task, a timer or a shutdown. Set under its lock with each,
    /// cleared under it by the loop once there is none; so a turn with nothing queued takes no lock.
    private let mayHaveWork = Atomic<Bool>(false)
    /// Behind a pthread mutex (`NIOLockedValueBox`), which ThreadSanitizer sees; `Synchronization.Mutex` waits
    /// through raw futex calls it does not.
    private let shared = NIOLockedValueBox(Shared())

    /// Starts the loop on a new thread named `threadName` (as `top -H` shows it; 15 bytes are kept).
    public init(threadName: String = "mentory-loop") throws(EpollError) {
        let epoll = mentory_epoll_create()
        guard epoll >= 0 else { throw EpollError("epoll_create1", errno: errno) }
        let wakeup = mentory_eventfd()
        guard wakeup >= 0 else {
            let error = EpollError("eventfd", errno: errno)
            Glibc.close(epoll)
            throw error
        }
        guard mentory_epoll_control(epoll, wakeup, MENTORY_EPOLL_IN, Self.wakeupToken, 0) == 0 else {
            let error = EpollError("epoll_ctl(EPOLL_CTL_ADD)", errno: errno)
            Glibc.close(wakeup)
            Glibc.close(epoll)
            throw error
        }
        self.epoll = epoll
        self.wakeup = wakeup
        // Initialized: if the thread does not start, deinit closes both descriptors.
        try LoopThread.start(name: threadName) { self.run() }
    }

    deinit {
        // Only here, once nobody can call `execute` any more: a signal after the close could reach a reused number.
        Glibc.close(self.wakeup)
        Glibc.close(self.epoll)
    }

    // MARK: EventLoop

    public var inEventLoop: Bool {
        pthread_self() == self.thread.load(ordering: .relaxed)
    }

    public func execute(_ task: @escaping @Sendable () -> Void) {
        self.enqueue(.plain(task))
    }

    /// Runs `body` on the loop with its ``EpollSelector``, to register descriptors: as ``execute(_:)``.
    public func execute(withSelector body: @escaping @Sendable (EpollSelector) -> Void) {
        self.enqueue(.withSelector(body))
    }

    /// Runs `body` on the loop with its ``EpollSelector``; the future has its result.
    public func submit<T>(withSelector body: @escaping @Sendable (EpollSelector) throws -> T) -> EventLoopFuture<T> {
        let promise: EventLoopPromise<T> = self.makePromise()
        self.execute(withSelector: { selector in
            do {
                promise.assumeIsolated().succeed(try body(selector))
            } catch {
                promise.fail(error)
            }
        })
        return promise.futureResult
    }

    public func scheduleTask<T>(deadline: NIODeadline, _ task: @escaping @Sendable () throws -> T) -> Scheduled<T> {
        let promise: EventLoopPromise<T> = self.makePromise()
        let scheduled: (id: UInt64, wake: Bool)? = self.shared.withLockedValue { shared in
            guard case .running = shared.lifecycle else { return nil }
            shared.nextTimerID += 1
            let id = shared.nextTimerID
            self.mayHaveWork.store(true, ordering: .releasing)
            let earliest = shared.timers.insert(
                ScheduledTask(
                    deadline: deadline, id: id,
                    run: {
                        do {
                            promise.assumeIsolated().succeed(try task())
                        } catch {
                            promise.fail(error)
                        }
                    },
                    fail: { promise.fail($0) }))
            return (id, earliest)
        }
        guard let scheduled else {
            promise.fail(EventLoopError.shutdown)
            return Scheduled(promise: promise, cancellationTask: {})
        }
        if scheduled.wake, !self.inEventLoop { mentory_eventfd_signal(self.wakeup) }
        return Scheduled(promise: promise) { self.cancelTimer(scheduled.id) }
    }

    public func scheduleTask<T>(in delay: TimeAmount, _ task: @escaping @Sendable () throws -> T) -> Scheduled<T> {
        self.scheduleTask(deadline: .now() + delay, task)
    }

    public func preconditionInEventLoop(file: StaticString, line: UInt) {
        precondition(self.inEventLoop, "not on the event loop's thread", file: file, line: line)
    }

    public func preconditionNotInEventLoop(file: StaticString, line: UInt) {
        precondition(!self.inEventLoop, "on the event loop's thread", file: file, line: line)
    }

    public func shutdownGracefully(queue: DispatchQueue, _ callback: @escaping @Sendable ((any Error)?) -> Void) {
        let stopped = self.shared.withLockedValue { shared in
            switch shared.lifecycle {
            case .stopped:
                return true
            case .running, .shuttingDown:
                shared.lifecycle = .shuttingDown
                self.mayHaveWork.store(true, ordering: .releasing)
                shared.whenStopped.append((queue, callback))
                return false
            }
        }
        if stopped {
            queue.async { callback(nil) }
        } else if !self.inEventLoop {
            mentory_eventfd_signal(self.wakeup)
        }
    }

    // MARK: The loop

    private func enqueue(_ task: QueuedTask) {
        let first: Bool? = self.shared.withLockedValue { shared in
            if case .stopped = shared.lifecycle { return nil }
            shared.tasks.append(task)
            self.mayHaveWork.store(true, ordering: .releasing)
            return shared.tasks.count == 1
        }
        // The loop looks at the queue before it waits: only a first task from elsewhere must wake it.
        if first == true, !self.inEventLoop { mentory_eventfd_signal(self.wakeup) }
    }

    private func cancelTimer(_ id: UInt64) {
        let cancelled = self.shared.withLockedValue { $0.timers.remove(id: id) }
        cancelled?.fail(.cancelled)
    }

    /// The loop thread's body: turns until shut down.
    private func run() {
        self.thread.store(pthread_self(), ordering: .relaxed)
        let selector = EpollSelector(epoll: self.epoll)
        let capacity = Int(Self.maxEventsPerWait)
        let tokens = UnsafeMutablePointer<UInt64>.allocate(capacity: capacity)
        let events = UnsafeMutablePointer<UInt32>.allocate(capacity: capacity)
        defer {
            tokens.deallocate()
            events.deallocate()
        }
        var work = TurnWork()
        var timeout = self.shared.withLockedValue { shared in Self.waitTimeout(shared) }
        while true {
            let ready = mentory_epoll_wait(self.epoll, tokens, events, Self.maxEventsPerWait, timeout)
            if ready < 0 {
                let error = errno
                precondition(error == EINTR, "\(EpollError("epoll_wait", errno: error))")
            }
            for index in 0..<Int(max(ready, 0)) {
                if tokens[index] == Self.wakeupToken {
                    mentory_eventfd_drain(self.wakeup)
                } else {
                    selector.dispatch(token: tokens[index], events: events[index])
                }
            }
            guard let next = self.runTimersAndTasks(&work, selector: selector) else {
                return self.stop(selector: selector, work: &work)
            }
            timeout = next
        }
    }

    /// What a turn does once its descriptors are handled, as decided under the lock.
    private enum TurnEnd {
        /// Run the due timers and tasks just taken, then look again.
        case runWork
        /// Wait for readiness, for at most this many milliseconds (-1: no limit).
        case wait(Int32)
        /// A shutdown was asked, and nothing is left to run.
        case stop
    }

    /// The loop's buffers for a turn's due timers and tasks, reused from turn to turn.
    private struct TurnWork {
        var timers: [ScheduledTask] = []
        var tasks: [QueuedTask] = []
    }

    /// Runs the due timers and the queued tasks, and the handlers of the turn's end, until none is left (or
    /// ``maxTasksPerTurn`` tasks ran); then returns how long the next wait may be, or `nil` once a shutdown is asked.
    /// When nothing was queued, that is one lock.
    private func runTimersAndTasks(_ work: inout TurnWork, selector: EpollSelector) -> Int32? {
        var ran = 0
        while true {
            guard self.mayHaveWork.load(ordering: .acquiring) else {
                // Nothing queued, scheduled or asked: no lock, and no time limit on the wait.
                guard selector.hasTurnEndHandlers else { return -1 }
                selector.endTurn()
                continue
            }
            let next: TurnEnd = self.shared.withLockedValue { shared in
                if ran < Self.maxTasksPerTurn { swap(&shared.tasks, &work.tasks) }
                if let deadline = shared.timers.nextDeadline, case let now = NIODeadline.now(), deadline <= now {
                    while let due = shared.timers.popDue(at: now) { work.timers.append(due) }
                }
                guard work.tasks.isEmpty, work.timers.isEmpty else { return .runWork }
                if case .shuttingDown = shared.lifecycle { return .stop }
                // Tasks left for the next turn (past maxTasksPerTurn) or timers keep it set.
                if shared.tasks.isEmpty, shared.timers.isEmpty { self.mayHaveWork.store(false, ordering: .relaxed) }
                return .wait(Self.waitTimeout(shared))
            }
            switch next {
            case .runWork:
                for timer in work.timers { timer.run() }
                work.timers.removeAll(keepingCapacity: true)
                for task in work.tasks { task.run(with: selector) }
                ran += work.tasks.count
                work.tasks.removeAll(keepingCapacity: true)
            case .wait(let timeout):
                // The turn's end, then a look at the queue again: its handlers may queue tasks.
                guard selector.hasTurnEndHandlers else { return timeout }
                selector.endTurn()
            case .stop:
                guard selector.hasTurnEndHandlers else { return nil }
                selector.endTurn()
            }
        }
    }

    /// How long the loop may wait: not at all with tasks queued or a shutdown asked, else until the next timer.
    private static func waitTimeout(_ shared: Shared) -> Int32 {
        guard shared.tasks.isEmpty, case .running = shared.lifecycle else { return 0 }
        guard let deadline = shared.timers.nextDeadline else { return -1 }
        let nanoseconds = (deadline - .now()).nanoseconds
        guard nanoseconds > 0 else { return 0 }
        // Rounded up: a timer never fires early.
        return Int32(clamping: (nanoseconds + 999_999) / 1_000_000)
    }

    /// Deregisters every descriptor, runs what is queued, fails what is scheduled, and calls back who asked.
    private func stop(selector: EpollSelector, work: inout TurnWork) {
        selector.shutDown()
        _ = self.runTimersAndTasks(&work, selector: selector)  // What the handlers queued as they were told.
        let (tasks, timers, callbacks) = self.shared.withLockedValue { shared in
            shared.lifecycle = .stopped
            defer {
                shared.tasks.removeAll()
                shared.whenStopped.removeAll()
            }
            return (shared.tasks, shared.timers.removeAll(), shared.whenStopped)
        }
        for task in tasks { task.run(with: selector) }
        for timer in timers { timer.fail(.shutdown) }
        for (queue, callback) in callbacks { queue.async { callback(nil) } }
    }
}

extension EpollEventLoop {
    /// Runs `body` with a new loop, and shuts the loop down once `body` returns or throws.
    public static func withEventLoop<Result>(
        threadName: String = "mentory-loop", _ body: (EpollEventLoop) async throws -> Result
    ) async throws -> Result {
        let loop = try EpollEventLoop(threadName: threadName)
        let result: Result
        do {
            result = try await body(loop)
        } catch {
            try? await loop.shutdownGracefully()
            throw error
        }
        try await loop.shutdownGracefully()
        return result
    }
}
