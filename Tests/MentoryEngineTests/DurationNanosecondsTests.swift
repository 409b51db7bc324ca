import Testing

@testable import MentoryEngine

@Suite("A duration in whole nanoseconds, as the metrics record it")
struct DurationNanosecondsTests {
    /// Durations and their nanoseconds; typed one by one, which keeps the type checker quick.
    static let cases: [(Duration, Int64)] = {
        let justUnder: Duration = .seconds(9) + .nanoseconds(223_372_036)
        let justOver: Duration = .seconds(9) + .nanoseconds(223_372_037)
        let negativeOver: Duration = .zero - justOver
        let ten: Duration = .seconds(10) + .nanoseconds(3)
        let second: Duration = .seconds(1) + .nanoseconds(5)
        let half: Duration = .nanoseconds(1) / 2
        let negative: Duration = .zero - .seconds(2) - .nanoseconds(7)
        return [
            (second, 1_000_000_005),
            (.microseconds(1_500), 1_500_000),
            (.zero, 0),
            (half, 0),
            (negative, -2_000_000_007),
            // Either side of 2^63 attoseconds (about 9.22 s), where the 64-bit division stops.
            (justUnder, 9_223_372_036),
            (justOver, 9_223_372_037),
            (negativeOver, -9_223_372_037),
            (ten, 10_000_000_003),
            (.seconds(Int64.max), Int64.max),
            (.seconds(Int64.min), Int64.min),
        ]
    }()

    @Test("whole nanoseconds, truncated toward zero, saturating", arguments: cases)
    func nanoseconds(_ duration: Duration, _ expected: Int64) {
        #expect(duration.nanoseconds == expected)
    }
}
