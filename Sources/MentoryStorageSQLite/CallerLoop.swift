/// The one thread that a store's callers share, such as the daemon's event loop.
///
/// Given in ``SQLiteSessionStore/Configuration/callerLoop``, it changes two things about the group
/// commit; neither changes what a write does or when it is acknowledged:
///
/// - **A batch starts after the work already queued on the loop.** The first write that finds the
///   queue idle hands the batch to the writer with ``execute(_:)``, not at once. The writes that
///   the same loop tick read then share the batch's transaction and fsync. Without this, the
///   writer thread could start a transaction for the first write before the loop has handed it
///   the others.
/// - **The writers resume on the loop.** A write's continuation resumes on the executor it waits
///   in, and a `nonisolated(nonsending)` caller waits in none of its own. So its caller would resume
///   on a thread of Swift's global pool, and only from there hop back to the loop: two thread
///   wake-ups per batch instead of one. With a caller loop, a write waits with the loop as its task
///   executor, and each batch is answered by one ``execute(_:)``.
public protocol CallerLoop: TaskExecutor {
    /// Runs `work` on the loop, after the work already queued on it.
    func execute(_ work: @escaping @Sendable () -> Void)
}
