import MentoryStorageSQLite
import NIOCore

/// The daemon's event loop as the SQLite store's ``CallerLoop``: the engine, and so every request
/// that writes, runs on it.
///
/// A job enqueued here (a write's caller resuming after its commit) runs on the loop as a task
/// executor's job; it then continues on the engine's executor, the same loop, without waking
/// another thread.
final class EventLoopCallerLoop: CallerLoop {
    private let eventLoop: any EventLoop

    init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        self.eventLoop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }

    func execute(_ work: @escaping @Sendable () -> Void) {
        self.eventLoop.execute(work)
    }
}
