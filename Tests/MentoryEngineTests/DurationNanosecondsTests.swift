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
            (.seconds(Int64.max), Int64.max),
            (.seconds(Int64.min), Int64.min),
        ])
    func nanoseconds(_ duration: Duration, _ expected: Int64) {
        #expect(duration.nanoseconds == expected)
    }
}
