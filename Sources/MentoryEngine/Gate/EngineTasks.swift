import MentoryHandlerKit
import MentoryWire

/// A task the engine can cancel, whatever it returns.
protocol CancellableTask: Sendable {
    func cancel()
}

extension Task: CancellableTask {}

/// The tasks the engine starts for work that suspends: a request that waits for its store or a plugin, a
/// reset sent to a subscriber whose queue drained.
///
/// Each starts on the engine's executor, the connection's event loop, so that it costs no thread hop (a request's
/// starts inline there, and one that never suspends is answered without being recorded here); a child
/// task of a group would start elsewhere and hop. None outlives the daemon's service group even so: the engine
/// counts them here, and the service that runs its background jobs waits for them on shut-down, before the
/// jobs stop and the handlers close (``MentoryEngine/finishTasks(within:)``).
struct EngineTasks {
    private var running: [UInt64: any CancellableTask] = [:]
    private var nextID: UInt64 = 0
    /// Who waits for ``running`` to empty.
    private var whenIdle: [CheckedContinuation<Void, Never>] = []
    /// The task being started inline (``reserveInline()``), and its response once it ended before its start
    /// returned.
    private var inline: (id: UInt64, response: OutboundResponse?)?

    /// How many tasks run.
    var count: Int { self.running.count }

    /// The identifier of a task about to start; ``started(_:_:)`` records it once it exists.
    mutating func reserve() -> UInt64 {
        self.nextID &+= 1
        return self.nextID
    }

    /// Records task `id`. A task on the engine's executor cannot resume, let alone end, before its creator
    /// returns (one started inline runs only up to its first suspension before that), so it is recorded before
    /// ``ended(_:)`` can run.
    mutating func started(_ id: UInt64, _ task: some CancellableTask) {
        self.running[id] = task
    }

    /// The identifier of a task about to be started inline (`Task.immediate`, on the engine's executor), which runs
    /// up to its first suspension before its creator goes on. Until ``endInline(_:)``, a task that ends keeps its
    /// response there (``answeredInline(_:_:)``) instead of answering through its connection's sink.
    mutating func reserveInline() -> UInt64 {
        let id = self.reserve()
        self.inline = (id, nil)
        return id
    }

    /// Whether task `id` ended while it was being started inline: then its `response` is kept for
    /// ``endInline(_:)``, and the task, never recorded as running, is not to end (``ended(_:)``).
    mutating func answeredInline(_ id: UInt64, _ response: OutboundResponse) -> Bool {
        guard self.inline?.id == id else { return false }
        self.inline = (id, response)
        return true
    }

    /// Ends task `id`'s inline start: its response if it ended meanwhile; `nil` if it suspended, and is then to be
    /// recorded (``started(_:_:)``) before it can resume.
    mutating func endInline(_ id: UInt64) -> OutboundResponse? {
        defer { self.inline = nil }
        guard let inline = self.inline, inline.id == id else { return nil }
        return inline.response
    }

    /// Forgets task `id`; when none runs any more, resumes whoever waited for that.
    mutating func ended(_ id: UInt64) {
        self.running[id] = nil
        if self.running.isEmpty { self.resumeWaiters() }
    }

    /// Waits until no task runs (at once if none does), or until ``resumeWaiters()``.
    mutating func waitUntilIdle(_ continuation: CheckedContinuation<Void, Never>) {
        if self.running.isEmpty { return continuation.resume() }
        self.whenIdle.append(continuation)
    }

    /// Resumes everyone waiting, whether or not tasks still run.
    mutating func resumeWaiters() {
        let waiters = self.whenIdle
        self.whenIdle = []
        for waiter in waiters { waiter.resume() }
    }

    /// Cancels every task running.
    func cancelAll() {
        for task in self.running.values { task.cancel() }
    }
}

extension MentoryEngine {
    /// Lets the engine's tasks finish within `deadline`, then cancels those still running and waits for them
    /// as long again; returns how many had not ended by then. Called on shut-down, once the server has closed
    /// every connection and before the background jobs stop (a request may still submit one).
    ///
    /// A task that ignores its cancellation is logged and left: the service group's own deadlines bound the rest.
    package func finishTasks(within deadline: Duration) async -> Int {
        guard self.tasks.count > 0 else { return 0 }
        let running = self.tasks.count
        self.logger.debug("waiting for the engine's tasks", metadata: ["tasks": "\(running)"])
        if await !self.tasksEnded(within: deadline) {
            self.logger.warning(
                "\(self.tasks.count) requests or resets still ran after \(deadline); cancelling them",
                metadata: ["tasks": "\(self.tasks.count)"])
            self.tasks.cancelAll()
            if await !self.tasksEnded(within: deadline) {
                self.logger.error(
                    "\(self.tasks.count) requests or resets did not end within \(deadline) of their cancellation",
                    metadata: ["tasks": "\(self.tasks.count)"])
            }
        }
        return self.tasks.count
    }

    /// Whether every task ended within `deadline` (false at once when this task is cancelled).
    private func tasksEnded(within deadline: Duration) async -> Bool {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask { await self.untilIdle() }
            group.addTask {
                try? await Task.sleep(for: deadline)
                return false
            }
            let ended = await group.next() ?? false
            // The sleep ends at once when cancelled; the waiter is resumed whether or not tasks still run.
            group.cancelAll()
            self.tasks.resumeWaiters()
            await group.waitForAll()
            return ended
        }
    }

    private func untilIdle() async -> Bool {
        await withCheckedContinuation { self.tasks.waitUntilIdle($0) }
        return self.tasks.count == 0
    }

    /// Sends the resets a connection whose event queue drained is owed (``sinkDrained(_:)``) as one of the
    /// engine's tasks, then runs `done` on the engine's executor.
    package func startDrain(_ id: ConnectionID, then done: @escaping @Sendable () -> Void) {
        let taskID = self.tasks.reserve()
        let task = Task {
            await self.sinkDrained(id)
            done()
            self.tasks.ended(taskID)
        }
        self.tasks.started(taskID, task)
    }
}
