import MentoryMallocCounter
import NIOConcurrencyHelpers
import NIOEmbedded

/// Heap allocations counted on one thread (see Tests/MentoryMallocCounter).
struct AllocationCounts: Sendable, Equatable {
    var allocations = 0
    var frees = 0
    var bytes = 0

    static func + (lhs: Self, rhs: Self) -> Self {
        Self(allocations: lhs.allocations + rhs.allocations, frees: lhs.frees + rhs.frees, bytes: lhs.bytes + rhs.bytes)
    }
}

/// The test process's malloc counter.
enum AllocationCounter {
    /// Whether allocations can be counted: false under ThreadSanitizer and AddressSanitizer, which
    /// intercept malloc themselves, so the interposer is compiled out.
    static var isAvailable: Bool { mentory_malloc_counter_is_available() }

    /// Allocations counted on every thread so far.
    static var total: Int { Int(mentory_malloc_counter_total()) }

    /// Starts counting the calling thread's allocations.
    static func begin() {
        mentory_malloc_counter_begin()
    }

    /// Stops counting on the calling thread; what it counted since ``begin()``.
    static func end() -> AllocationCounts {
        let counts = mentory_malloc_counter_end()
        return AllocationCounts(
            allocations: Int(counts.allocations), frees: Int(counts.frees), bytes: Int(counts.bytes))
    }

    /// Counts the allocations of one event-loop tick: `body`, run on `loop`, then the tasks it queued on the loop
    /// (the end-of-tick flush), which the loop runs after it in one go, on one thread.
    ///
    /// The counter is per thread, so the suites running in parallel in this process count nothing here:
    /// only this thread, only while `body` and its tasks run. Two marker tasks bracket the queued tasks:
    /// one queued before `body` starts counting, one queued after it stops.
    static func countTick(
        on loop: NIOAsyncTestingEventLoop,
        _ body: @escaping @Sendable () throws -> Void
    ) async throws -> AllocationCounts {
        let queued = NIOLockedValueBox(AllocationCounts())
        let inline = try await loop.executeInContext {
            loop.execute { Self.begin() }
            Self.begin()
            let outcome = Result { try body() }
            let counts = Self.end()
            // Queued whatever `body` did, so the thread that runs the tasks always stops counting.
            loop.execute {
                let counts = Self.end()
                queued.withLockedValue { $0 = counts }
            }
            return try outcome.map { counts }.get()
        }
        await loop.run()
        return inline + queued.withLockedValue { $0 }
    }

    /// What ``countTick(on:_:)`` counts for a tick that does nothing: the test loop's bookkeeping for the
    /// marker task that starts counting (fewest over 100 ticks). Subtracted from the measured figures.
    static func emptyTickAllocations(on loop: NIOAsyncTestingEventLoop) async throws -> Int {
        var fewest = Int.max
        for _ in 0..<100 {
            fewest = min(fewest, try await Self.countTick(on: loop) {}.allocations)
        }
        return fewest
    }
}
