import Foundation
import Synchronization

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
    private let jobs = Mutex<[Job]>([])
    private let wake = DispatchSemaphore(value: 0)

    private init() {
        let thread = Thread { [self] in
            while true {
                self.wake.wait()
                let ready = self.jobs.withLock { pending in
                    defer { pending.removeAll() }
                    return pending
                }
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
            self.jobs.withLock { $0.append((process, done)) }
            self.wake.signal()
        }
    }
}
