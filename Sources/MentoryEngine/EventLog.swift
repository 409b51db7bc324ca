import MentoryHandlerKit
import MentoryWire

/// A topic's recent events, kept in a bounded ring so a subscriber can resume after a gap.
///
/// Sequence numbers start at 1 and increase by one per published event.
public struct EventLog: Sendable {
    /// The most events kept.
    public let capacity: Int
    private var ring: [Mentory_V1_Event] = []
    private var head = 0
    /// The sequence number of the newest event, or 0 before the first.
    public private(set) var lastSequence: UInt64 = 0

    /// Creates an empty log that keeps at most `capacity` events.
    public init(capacity: Int) {
        precondition(capacity > 0, "an event log needs room for at least one event")
        self.capacity = capacity
        self.ring.reserveCapacity(min(capacity, 1024))
    }

    /// The sequence number of the oldest event still kept, or `nil` when none is.
    public var firstSequence: UInt64? {
        self.ring.isEmpty ? nil : self.lastSequence - UInt64(self.ring.count) + 1
    }

    /// Stamps `event` with the next sequence number, keeps it, and returns it.
    public mutating func append(_ event: Mentory_V1_Event) -> Mentory_V1_Event {
        var event = event
        self.lastSequence += 1
        event.sequence = self.lastSequence
        if self.ring.count < self.capacity {
            self.ring.append(event)
        } else {
            self.ring[self.head] = event
            self.head = (self.head + 1) % self.capacity
        }
        return event
    }

    /// The events after `sequence`, oldest first, or `nil` when some of them are no longer kept.
    public func events(after sequence: UInt64) -> [Mentory_V1_Event]? {
        guard sequence <= self.lastSequence else { return nil }
        if sequence == self.lastSequence { return [] }
        guard let first = self.firstSequence, sequence + 1 >= first else { return nil }
        let skip = Int(sequence + 1 - first)
        let count = self.ring.count
        return (skip..<count).map { self.ring[(self.head + $0) % count] }
    }
}
