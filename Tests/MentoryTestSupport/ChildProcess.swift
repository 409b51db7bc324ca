import Foundation

extension Process {
    /// Starts the process so that it dies with the test process, even when a test times out or
    /// the runner is killed.
    ///
    /// The executable runs under `setpriv --pdeathsig KILL`, which sets `PR_SET_PDEATHSIG` and then
    /// execs it, so the process identifier is the executable's own.
    public func runTiedToTestProcess() async throws {
        if let executable = self.executableURL, FileManager.default.isExecutableFile(atPath: Self.setpriv) {
            self.arguments = ["--pdeathsig", "KILL", "--", executable.path] + (self.arguments ?? [])
            self.executableURL = URL(fileURLWithPath: Self.setpriv)
        }
        try await ChildSpawner.shared.run(self)
    }

    /// util-linux's `setpriv`, which every supported machine has (`.ci/run` installs util-linux).
    private static let setpriv = "/usr/bin/setpriv"
}

/// Spawns children from one thread that lives as long as the test process.
///
/// The parent-death signal follows the *thread* that spawned the child, not the process: a child
/// spawned from a cooperative-pool thread would be killed when that idle thread is retired.
private final class ChildSpawner: Sendable {
    static let shared = ChildSpawner()

    private typealias Job = (process: Process, done: CheckedContinuation<Void, any Error>)

    /// The jobs waiting for the spawner thread, guarded by ``condition``.
    private let pending = PendingJobs()
    /// A pthread mutex and condition variable, which ThreadSanitizer understands (it does not see
    /// the futex inside `Synchronization.Mutex`).
    private let condition = NSCondition()

    /// The queue of jobs; only touched while ``condition`` is locked.
    private final class PendingJobs: @unchecked Sendable {
        // SAFETY: every access happens with `ChildSpawner.condition` locked.
        var jobs: [Job] = []
    }

    private init() {
        let thread = Thread { [self] in
            while true {
                self.condition.lock()
                while self.pending.jobs.isEmpty { self.condition.wait() }
                let ready = self.pending.jobs
                self.pending.jobs.removeAll()
                self.condition.unlock()
                for job in ready {
                    do {
                        try job.process.run()
                        job.done.resume()
                    } catch {
                        job.done.resume(throwing: error)
                    }
                }
            }
        }
        thread.name = "test-child-spawner"
        thread.start()
    }

    func run(_ process: Process) async throws {
        try await withCheckedThrowingContinuation { (done: CheckedContinuation<Void, any Error>) in
            self.condition.lock()
            self.pending.jobs.append((process, done))
            self.condition.signal()
            self.condition.unlock()
        }
    }
}

extension Process {
    /// Waits for the process to exit and returns its exit status, without blocking a thread.
    ///
    /// `waitUntilExit()` blocks its thread until Foundation's process monitor reports the exit; on
    /// the cooperative pool (two threads on a 2-core machine) two such waits can starve the very
    /// test that would make the process exit. This polls instead.
    public func waitForExit() async -> Int32 {
        while self.isRunning {
            try? await Task.sleep(for: .milliseconds(10))
        }
        return self.terminationStatus
    }
}

/// Runs a short command (found on `PATH`) to completion on the calling thread and returns its exit
/// status, or `nil` if it could not start or was killed by a signal.
///
/// It spawns and reaps the child itself, so it does not depend on Foundation's process monitor,
/// which can be held up by another test's child (one that closed the descriptor the monitor
/// watches, as `systemd-socket-activate` does). Standard output and error are discarded.
public func runCommandToCompletion(_ arguments: [String]) -> Int32? {
    guard let command = arguments.first else { return nil }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
    let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    var pid: pid_t = 0
    guard posix_spawnp(&pid, command, &actions, nil, argv, environ) == 0 else { return nil }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 {
        guard errno == EINTR else { return nil }
    }
    // WIFEXITED / WEXITSTATUS, which Swift does not import as functions.
    return status & 0x7F == 0 ? (status >> 8) & 0xFF : nil
}
