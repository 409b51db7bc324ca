import NIOConcurrencyHelpers
import CoreMetrics
import Synchronization

// The handlers swift-metrics records into. swift-metrics calls them from any thread, so each is
// Sendable and guards its value with atomics or a lock (`NIOLockedValueBox`, a pthread mutex ThreadSanitizer can see). This is metrics
// plumbing, not domain state: the engine's state stays in the engine actor, lock-free.

/// A counter: only goes up.
///
/// The engine records into it directly (`MentoryMetricsFactory.counterSeries(label:dimensions:)`), not through
/// swift-metrics' `Counter`, so that counting a request costs no existential call and no retain.
package final class CounterSeries: CounterHandler, Sendable {
    private let total = Atomic<Int64>(0)

    /// Adds `amount`, when it is positive.
    package func increment(by amount: Int64) {
        // A counter never goes down; swift-metrics' Counter only passes non-negative amounts.
        guard amount > 0 else { return }
        self.total.wrappingAdd(amount, ordering: .relaxed)
    }

    package func reset() {
        self.total.store(0, ordering: .relaxed)
    }

    /// The count now.
    package var value: Int64 { self.total.load(ordering: .relaxed) }
}

/// A gauge: the last value set, moved up and down by a meter.
final class GaugeSeries: RecorderHandler, MeterHandler, Sendable {
    private let current = NIOLockedValueBox<Double>(0)

    func record(_ value: Int64) { self.set(Double(value)) }
    func record(_ value: Double) { self.set(value) }
    func set(_ value: Int64) { self.set(Double(value)) }
    func set(_ value: Double) { self.current.withLockedValue { $0 = value } }
    func increment(by amount: Double) { self.current.withLockedValue { $0 += amount } }
    func decrement(by amount: Double) { self.current.withLockedValue { $0 -= amount } }

    var value: Double { self.current.withLockedValue { $0 } }
}

/// A histogram over fixed bucket bounds: recorders record values as they are, timers in seconds.
///
/// Lock-free: each bucket and the sum are atomics, so a request's timer costs no mutex. A reading
/// taken while values are recorded may have the sum of a few more or fewer observations than the
/// buckets; the count is always the buckets' total.
///
/// The engine records request durations into it directly (`MentoryMetricsFactory.timerSeries(label:dimensions:)`),
/// not through swift-metrics' `Timer`.
package final class HistogramSeries: RecorderHandler, TimerHandler, Sendable {
    /// One bucket's observations, alone (not cumulative).
    private final class Bucket: Sendable {
        let count = Atomic<UInt64>(0)
    }

    /// Ascending upper bounds; the +Inf bucket is implied.
    let bounds: [Double]
    /// Per bound, its bucket; one more for +Inf.
    private let buckets: [Bucket]
    /// The sum of the observations, as the bits of a `Double`.
    private let sumBits = Atomic<UInt64>(Double(0).bitPattern)

    init(bounds: [Double]) {
        self.bounds = bounds
        self.buckets = (0...bounds.count).map { _ in Bucket() }
    }

    package func record(_ value: Int64) { self.observe(Double(value)) }
    package func record(_ value: Double) { self.observe(value) }
    /// Records a duration of `duration` nanoseconds, in seconds.
    package func recordNanoseconds(_ duration: Int64) { self.observe(Double(duration) / 1e9) }

    /// Records `count` durations of `duration` nanoseconds each, in seconds.
    package func recordNanoseconds(_ duration: Int64, count: Int64) {
        guard count > 0 else { return }
        self.observe(Double(duration) / 1e9, count: UInt64(count))
    }

    /// Records `value` as it is, `count` times; a NaN is ignored.
    package func observe(_ value: Double, count: UInt64 = 1) {
        guard !value.isNaN else { return }
        // The first bound at or above the value (+Inf past the last), by binary search over the ascending
        // bounds, read through a buffer pointer: no generic accessor (which allocates, unspecialized) per probe.
        let index = self.bounds.withUnsafeBufferPointer { bounds in
            var low = 0
            var high = bounds.count
            while low < high {
                let middle = (low + high) / 2
                if value <= bounds[middle] { high = middle } else { low = middle + 1 }
            }
            return low
        }
        self.buckets[index].count.wrappingAdd(count, ordering: .relaxed)
        let added = count == 1 ? value : value * Double(count)
        var expected = self.sumBits.load(ordering: .relaxed)
        while true {
            let (exchanged, original) = self.sumBits.weakCompareExchange(
                expected: expected,
                desired: (Double(bitPattern: expected) + added).bitPattern,
                ordering: .relaxed
            )
            if exchanged { break }
            expected = original
        }
    }

    /// The counts now, with buckets made cumulative as Prometheus reports them (without +Inf).
    var cumulative: (buckets: [UInt64], count: UInt64, sum: Double) {
        var running: UInt64 = 0
        var cumulative: [UInt64] = []
        cumulative.reserveCapacity(self.bounds.count)
        for bucket in self.buckets {
            running &+= bucket.count.load(ordering: .relaxed)
            cumulative.append(running)
        }
        // The last is +Inf's: the count.
        let count = cumulative.removeLast()
        return (cumulative, count, Double(bitPattern: self.sumBits.load(ordering: .relaxed)))
    }
}
