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
    /// After a connection that worked was lost (a daemon restart, typically), the wait between
    /// attempts for ``quickRetryWindow``, plus up to 25% jitter: short, so that a plugin is back within
    /// a fraction of a second of the daemon's being ready rather than after a back-off that grew while
    /// the daemon was down. Each attempt is one failed `connect(2)` or handshake, at most about four
    /// a second: no busy loop. At least ``minimumQuickRetryInterval``.
    public var quickRetryInterval: Duration = .milliseconds(250) {
        didSet { self.quickRetryInterval = max(self.quickRetryInterval, Self.minimumQuickRetryInterval) }
    }
    /// How long after such a loss the attempts come every ``quickRetryInterval``; after it, the
    /// back-off from ``initialDelay`` on. `.zero` turns quick retries off.
    public var quickRetryWindow: Duration = .seconds(30)

    /// The shortest ``quickRetryInterval`` a policy allows.
    public static let minimumQuickRetryInterval: Duration = .milliseconds(100)

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

    /// The wait before the next attempt of a client whose working connection was lost `sinceLoss`
    /// ago (`nil` when none worked yet), `attempt` being the number of retries made since the quick
    /// retries ended: ``quickRetryInterval`` within ``quickRetryWindow`` of the loss, else
    /// ``delay(forAttempt:)``. Jittered as described on the type.
    public func delay(forAttempt attempt: Int, sinceLoss: Duration?) -> Duration {
        self.delay(forAttempt: attempt, sinceLoss: sinceLoss, jitter: Double.random(in: 0...0.25))
    }

    /// Whether an attempt `sinceLoss` after the loss of a working connection is a quick retry.
    public func isQuickRetry(sinceLoss: Duration?) -> Bool {
        guard let sinceLoss else { return false }
        return sinceLoss < self.quickRetryWindow
    }

    func delay(forAttempt attempt: Int, sinceLoss: Duration?, jitter: Double) -> Duration {
        guard self.isQuickRetry(sinceLoss: sinceLoss) else { return self.delay(forAttempt: attempt, jitter: jitter) }
        let interval = Self.seconds(max(self.quickRetryInterval, Self.minimumQuickRetryInterval))
        return .nanoseconds(Int64(interval * (1 + min(max(jitter, 0), 0.25)) * 1e9))
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
