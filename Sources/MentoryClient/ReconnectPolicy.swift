/// How a reconnecting client waits between attempts: exponential back-off with jitter.
public struct ReconnectPolicy: Sendable {
    /// The wait before the first retry.
    public var initialDelay: Duration
    /// The longest wait between two attempts.
    public var maximumDelay: Duration
    /// How much the wait grows after each failed attempt.
    public var multiplier: Double

    public init(
        initialDelay: Duration = .milliseconds(50), maximumDelay: Duration = .seconds(2), multiplier: Double = 2
    ) {
        self.initialDelay = initialDelay
        self.maximumDelay = maximumDelay
        self.multiplier = multiplier
    }

    /// The wait before attempt number `attempt` (0 for the first retry), with up to 20% jitter.
    public func delay(forAttempt attempt: Int) -> Duration {
        let base = self.initialDelay * pow(self.multiplier, Double(min(attempt, 30)))
        let capped = min(base, self.maximumDelay)
        return capped * Double.random(in: 0.8...1.0)
    }

    private func pow(_ base: Double, _ exponent: Double) -> Double {
        var result = 1.0
        for _ in 0..<Int(exponent) { result *= base }
        return result
    }
}
