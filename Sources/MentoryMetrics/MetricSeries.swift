import NIOConcurrencyHelpers
import CoreMetrics
import Synchronization

// The handlers swift-metrics records into. swift-metrics calls them from any thread, so each is
// Sendable and guards its value with an `Atomic` or a lock (`NIOLockedValueBox`, a pthread mutex ThreadSanitizer can see). This is metrics
// plumbing, not domain state: the engine's state stays in the engine actor, lock-free.

/// A counter: only goes up.
final class CounterSeries: CounterHandler, Sendable {
    private let total = Atomic<Int64>(0)

    func increment(by amount: Int64) {
        // A counter never goes down; swift-metrics' Counter only passes non-negative amounts.
        guard amount > 0 else { return }
        self.total.wrappingAdd(amount, ordering: .relaxed)
    }

    func reset() {
        self.total.store(0, ordering: .relaxed)
    }

    var value: Int64 { self.total.load(ordering: .relaxed) }
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
final class HistogramSeries: RecorderHandler, TimerHandler, Sendable {
    struct Counts: Sendable {
        /// Per bound, the observations in that bucket alone (not cumulative); one more for +Inf.
        var buckets: [UInt64]
        var count: UInt64 = 0
        var sum: Double = 0
    }

    /// Ascending upper bounds; the +Inf bucket is implied.
    let bounds: [Double]
    private let counts: NIOLockedValueBox<Counts>

    init(bounds: [Double]) {
        self.bounds = bounds
        self.counts = NIOLockedValueBox(Counts(buckets: Array(repeating: 0, count: bounds.count + 1)))
    }

    func record(_ value: Int64) { self.observe(Double(value)) }
    func record(_ value: Double) { self.observe(value) }
    func recordNanoseconds(_ duration: Int64) { self.observe(Double(duration) / 1e9) }

    func observe(_ value: Double) {
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
        self.counts.withLockedValue { counts in
            counts.buckets[index] &+= 1
            counts.count &+= 1
            counts.sum += value
        }
    }

    /// The counts now, with buckets made cumulative as Prometheus reports them (without +Inf).
    var cumulative: (buckets: [UInt64], count: UInt64, sum: Double) {
        let counts = self.counts.withLockedValue { $0 }
        var running: UInt64 = 0
        var buckets: [UInt64] = []
        buckets.reserveCapacity(self.bounds.count)
        for index in self.bounds.indices {
            running &+= counts.buckets[index]
            buckets.append(running)
        }
        return (buckets, counts.count, counts.sum)
    }
}
