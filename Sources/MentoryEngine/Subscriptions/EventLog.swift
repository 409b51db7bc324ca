import MentoryHandlerKit
import MentoryWire
import NIOCore

/// A topic's recent events, kept in a bounded ring so a subscriber can resume after a gap.
///
/// The ring is bounded twice: by a number of events and by their bytes. Without the second bound a topic of large
/// events (a diary of 64 KiB entries) would keep `capacity` of them resident, whoever listens. The newest event is
/// always kept, even alone over the byte bound. Sequence numbers start at 1 and increase by one per published event.
public struct EventLog: Sendable {
    /// The most events kept.
    public let capacity: Int
    /// The most bytes of events kept (each counted as its body plus ``overheadBytes``).
    public let byteCapacity: Int
    /// What an event costs beyond its body, in ``bytes``: its topic, sequence and message bookkeeping.
    public static let overheadBytes = 64
    private var ring: CircularBuffer<Mentory_V1_Event>
    /// The bytes of the events kept, as ``byteCapacity`` counts them.
    public private(set) var bytes = 0
    /// The sequence number of the newest event, or 0 before the first.
    public private(set) var lastSequence: UInt64 = 0

    /// Creates an empty log that keeps at most `capacity` events and `byteCapacity` bytes of them.
    public init(capacity: Int, byteCapacity: Int = .max) {
        precondition(capacity > 0, "an event log needs room for at least one event")
        precondition(byteCapacity > 0, "an event log needs room for at least one byte")
        self.capacity = capacity
        self.byteCapacity = byteCapacity
        self.ring = CircularBuffer(initialCapacity: min(capacity, 1024))
    }

    /// The sequence number of the oldest event still kept, or `nil` when none is.
    public var firstSequence: UInt64? {
        self.ring.isEmpty ? nil : self.lastSequence - UInt64(self.ring.count) + 1
    }

    /// Stamps `event` with the next sequence number, keeps it, and returns it; the oldest events go while the ring
    /// holds more than ``capacity`` events or ``byteCapacity`` bytes.
    public mutating func append(_ event: Mentory_V1_Event) -> Mentory_V1_Event {
        var event = event
        self.lastSequence += 1
        event.sequence = self.lastSequence
        self.ring.append(event)
        self.bytes += Self.cost(of: event)
        while self.ring.count > self.capacity || (self.bytes > self.byteCapacity && self.ring.count > 1) {
            self.bytes -= Self.cost(of: self.ring.removeFirst())
        }
        return event
    }

    /// The events after `sequence`, oldest first, or `nil` when some of them are no longer kept.
    public func events(after sequence: UInt64) -> [Mentory_V1_Event]? {
        guard sequence <= self.lastSequence else { return nil }
        if sequence == self.lastSequence { return [] }
        guard let first = self.firstSequence, sequence + 1 >= first else { return nil }
        let skip = Int(sequence + 1 - first)
        return Array(self.ring[self.ring.index(self.ring.startIndex, offsetBy: skip)...])
    }

    private static func cost(of event: Mentory_V1_Event) -> Int {
        event.body.count + Self.overheadBytes
    }
}
