import Logging
import Synchronization

/// What a daemon opened at start-up, closed in reverse order on every exit path, each step under a deadline.
///
/// Swift's `defer` cannot await, so a daemon registers a step right after opening each part and
/// calls ``run()`` once, whether it stops on a signal, on an error or on a failed start-up. A step
/// that overruns its deadline is logged and left behind, so that shut-down always finishes
/// (systemd's `TimeoutStopSec=` is the outer bound).
public struct OrderedTeardown: Sendable {
    private struct Step: Sendable {
        var name: String
        var deadline: Duration
        var body: @Sendable () async -> Void
    }

    private var steps: [Step] = []
    private let logger: Logger

    /// - Parameter logger: Reports each step and those that overran their deadline.
    public init(logger: Logger) {
        self.logger = logger
    }

    /// Registers `body` to run before every step registered earlier.
    public mutating func add(_ name: String, deadline: Duration, _ body: @escaping @Sendable () async -> Void) {
        self.steps.append(Step(name: name, deadline: deadline, body: body))
    }

    /// Runs the steps last to first, each at most for its deadline, and forgets them: a step runs once.
    /// Returns the names of the steps that overran.
    @discardableResult
    public mutating func run() async -> [String] {
        var overran: [String] = []
        while let step = self.steps.popLast() {
            if await !Self.run(step.body, within: step.deadline) {
                overran.append(step.name)
                self.logger.error(
                    "shut-down step overran its deadline; moving on",
                    metadata: ["step": "\(step.name)", "deadline": "\(step.deadline)"]
                )
            } else {
                self.logger.debug("shut-down step done", metadata: ["step": "\(step.name)"])
            }
        }
        return overran
    }

    /// Runs `body`, returning `true` once it finishes or `false` once `limit` passes, whichever is first.
    public static func run(_ body: @escaping @Sendable () async -> Void, within limit: Duration) async -> Bool {
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
