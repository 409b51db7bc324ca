import Logging
import Synchronization

/// What start-up opened, closed in reverse order on every exit path, each step under a deadline.
///
/// Swift's `defer` cannot await, so the daemon registers a step right after opening each part and
/// calls ``run()`` once, whether it stops on a signal, on an error or on a failed start-up. A step
/// that overruns its deadline is logged and left behind, so that shut-down always finishes
/// (systemd's `TimeoutStopSec=` is the outer bound).
struct Teardown {
    private var steps: [(name: String, deadline: Duration, body: @Sendable () async -> Void)] = []
    private let logger: Logger

    init(logger: Logger) {
        self.logger = logger
    }

    /// Registers `body` to run before every step registered earlier.
    mutating func add(_ name: String, deadline: Duration, _ body: @escaping @Sendable () async -> Void) {
        self.steps.append((name, deadline, body))
    }

    /// Runs the steps last to first, each at most for its deadline; runs each step once.
    mutating func run() async {
        while let step = self.steps.popLast() {
            if await !Self.run(step.body, within: step.deadline) {
                self.logger.error(
                    "shut-down step overran its deadline; moving on",
                    metadata: ["step": "\(step.name)", "deadline": "\(step.deadline)"]
                )
            } else {
                self.logger.debug("shut-down step done", metadata: ["step": "\(step.name)"])
            }
        }
    }

    /// Runs `body`, returning `true` once it finishes or `false` once `limit` passes, whichever is first.
    static func run(_ body: @escaping @Sendable () async -> Void, within limit: Duration) async -> Bool {
        let settled = Flag()
        var timer: Task<Void, Never>?
        let finished = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            Task {
                await body()
                if settled.set() { continuation.resume(returning: true) }
            }
            timer = Task {
                try? await Task.sleep(for: limit)
                if settled.set() { continuation.resume(returning: false) }
            }
        }
        timer?.cancel()
        return finished
    }

    /// Set once; tells the first of the racing tasks that it won.
    private final class Flag: Sendable {
        private let value = Atomic<Bool>(false)
        /// True for the first caller only.
        func set() -> Bool {
            self.value.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        }
    }
}

/// Start-up failed before anything was served; ``cause`` says why and what to do.
struct StartupFailure: Error, CustomStringConvertible {
    var cause: String
    var description: String { self.cause }
}
