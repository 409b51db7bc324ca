/// Latency samples in nanoseconds and their summary.
struct LatencySamples {
    var nanoseconds: [UInt64] = []

    mutating func record(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        self.nanoseconds.append(UInt64(seconds) * 1_000_000_000 + UInt64(attoseconds / 1_000_000_000))
    }

    func percentile(_ p: Double) -> Double {
        let sorted = self.nanoseconds.sorted()
        guard !sorted.isEmpty else { return 0 }
        let index = min(sorted.count - 1, Int((Double(sorted.count - 1) * p).rounded()))
        return Double(sorted[index]) / 1000
    }

    var median: Double { self.percentile(0.5) }
}
