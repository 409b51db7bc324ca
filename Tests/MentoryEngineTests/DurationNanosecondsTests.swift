import Testing

@testable import MentoryEngine

@Suite("A duration in whole nanoseconds, as the metrics record it")
struct DurationNanosecondsTests {
    @Test(
        "whole nanoseconds, truncated toward zero, saturating",
        arguments: [
            (Duration.seconds(1) + .nanoseconds(5), Int64(1_000_000_005)),
            (.microseconds(1_500), 1_500_000),
            (.zero, 0),
            (.nanoseconds(1) / 2, 0),
            (.zero - .seconds(2) - .nanoseconds(7), -2_000_000_007),
            // Either side of 2^63 attoseconds (about 9.22 s), where the 64-bit division stops.
            (.seconds(9) + .nanoseconds(223_372_036), 9_223_372_036),
            (.seconds(9) + .nanoseconds(223_372_037), 9_223_372_037),
            (.zero - .seconds(9) - .nanoseconds(223_372_037), -9_223_372_037),
            (.seconds(10) + .nanoseconds(3), 10_000_000_003),
            (.seconds(Int64.max), Int64.max),
            (.seconds(Int64.min), Int64.min),
        ])
    func nanoseconds(_ duration: Duration, _ expected: Int64) {
        #expect(duration.nanoseconds == expected)
    }
}
