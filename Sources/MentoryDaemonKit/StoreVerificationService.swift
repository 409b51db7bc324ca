import Logging
import MentoryStorageSQLite
import ServiceLifecycle

/// The store's integrity check that start-up skipped after a clean shutdown, run once mentoryd is
/// ready (`READY=1`), so that it never delays start-up however large the diary grows.
///
/// When the check finds the database damaged, it logs the reason at error level and throws
/// ``StoreDamaged``: the service group shuts down gracefully (every connection is closed, every
/// acknowledged write is already durable) and mentoryd exits with status 1, so that systemd
/// restarts it (`Restart=on-failure`). The store then leaves the clean-shutdown marker unset, so
/// the restarted daemon checks the file before opening it and refuses it with the remedy, as for
/// damage found after a crash. Serving on from a file known to be damaged would risk answering from
/// broken pages and writing into them.
///
/// A check that has begun runs to its end through a graceful shutdown (it reads the file once:
/// about 10 ms at 10,000 entries), so that a daemon stopped right after start-up still closes with
/// a verified file and its next start skips the check too; only cancelling the group (a second
/// signal) interrupts it. A shutdown that comes before `READY=1` skips the check, and the next start
/// checks the file before opening it. After a check that passes (or with nothing to check) the
/// service waits for graceful shutdown: a service of the group that ended on its own while the group
/// shuts down would make the group cancel the rest.
struct StoreVerificationService: Service {
    /// Yields once the daemon has reported ready; finished by the service at graceful shutdown.
    let ready: AsyncStream<Void>
    let readyContinuation: AsyncStream<Void>.Continuation
    /// Runs the check (``SQLiteSessionStore/verifyIntegrity()``); `.pending` when there is nothing to check.
    let verify: @Sendable () async -> SQLiteSessionStore.IntegrityCheck
    let logger: Logger

    func run() async throws {
        let continuation = self.readyContinuation
        // A ready signal sent before the shutdown is still delivered after finish().
        let isReady = await withGracefulShutdownHandler {
            for await _ in self.ready { return true }
            return false
        } onGracefulShutdown: {
            continuation.finish()
        }
        guard isReady, !Task.isCancelled else { return }
        let started = ContinuousClock.now
        switch await self.verify() {
        case .verified:
            self.logger.info(
                "store verified in the background (quick_check)",
                metadata: ["ms": "\(Milliseconds(since: started))"]
            )
        case .damaged(let reason):
            self.logger.error("the background integrity check found the store damaged; stopping: \(reason)")
            throw StoreDamaged(reason: reason)
        case .pending, .verifiedAtOpen:
            break
        }
        try? await gracefulShutdown()
    }
}

/// The background integrity check found the database damaged; mentoryd stops with status 1.
struct StoreDamaged: Error, CustomStringConvertible {
    var reason: String
    var description: String { self.reason }
}
