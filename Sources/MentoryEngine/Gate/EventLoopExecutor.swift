import NIOCore

/// The engine's executor when it runs on an event loop, as the daemon's does: its jobs run on the loop, and code
/// already running there (a channel handler's, outside any task) counts as isolated to it.
///
/// An event loop is a serial executor of its own, but the runtime cannot tell that a channel handler's code runs
/// on it: a task started with `Task.immediate` from there would be enqueued, not run inline. This executor
/// answers `isIsolatingCurrentContext()` from the loop, so a request's task starts inline on the loop and, when
/// nothing suspends, is answered before ``MentoryEngine/respond(to:from:received:queued:)`` returns. Actors that
/// are to be reached from the engine without a hop (the in-memory store) must run on this same executor
/// (``MentoryEngine/serialExecutor``), not on the loop's own: executors are told apart by identity.
final class EventLoopExecutor: SerialExecutor {
    /// The loop the jobs run on.
    let loop: any EventLoop

    init(_ loop: any EventLoop) {
        self.loop = loop
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        self.loop.execute { job.runSynchronously(on: self.asUnownedSerialExecutor()) }
    }

    func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    func isIsolatingCurrentContext() -> Bool? {
        self.loop.inEventLoop
    }

    func checkIsolated() {
        self.loop.preconditionInEventLoop()
    }
}
