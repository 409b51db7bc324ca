/// How a reconnecting client waits between attempts: exponential back-off with jitter, capped.
///
/// The wait before retry `n` (0 for the first) is `min(initialDelay × multiplierⁿ, maximumDelay)`
/// plus up to 25% random jitter, and never more than `maximumDelay`. The defaults (1 s, doubling,
/// capped at 30 s) keep a crowd of clients from hammering a restarting daemon; note that with
/// socket activation every attempt on `mentoryd.socket` starts the daemon again, so to keep it
/// down stop `mentoryd.socket` as well as `mentoryd.service`.
public struct ReconnectPolicy: Sendable {
    /// The shortest first wait a policy allows.
    public static let minimumInitialDelay: Duration = .seconds(1)

    /// The wait before the first retry, at least ``minimumInitialDelay``.
    public var initialDelay: Duration
    /// The longest wait between two attempts, at least `initialDelay`.
    public var maximumDelay: Duration
    /// How much the wait grows after each failed attempt, at least 1.
    public var multiplier: Double

    /// A policy; values below the documented minimums are raised to them.
    public init(
        initialDelay: Duration = .seconds(1), maximumDelay: Duration = .seconds(30), multiplier: Double = 2
    ) {
        self.initialDelay = max(initialDelay, Self.minimumInitialDelay)
        self.maximumDelay = max(maximumDelay, self.initialDelay)
        self.multiplier = max(multiplier, 1)
    }

    /// The wait before retry number `attempt` (0 for the first), jittered as described on the type.
    public func delay(forAttempt attempt: Int) -> Duration {
        self.delay(forAttempt: attempt, jitter: Double.random(in: 0...0.25))
    }

    /// The wait before retry number `attempt` with a given jitter fraction in 0...0.25.
    func delay(forAttempt attempt: Int, jitter: Double) -> Duration {
        let initial = Self.seconds(self.initialDelay)
        let maximum = Self.seconds(self.maximumDelay)
        var base = initial
        for _ in 0..<max(0, min(attempt, 64)) where base < maximum {
            base *= self.multiplier
        }
        let seconds = min(min(base, maximum) * (1 + min(max(jitter, 0), 0.25)), maximum)
        return .nanoseconds(Int64(seconds * 1e9))
    }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
