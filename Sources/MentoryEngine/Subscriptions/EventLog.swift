import MentoryHandlerKit
import MentoryWire
import NIOCore

/// A topic's recent events, kept in a bounded ring so a subscriber can resume after a gap.
///
/// The ring is bounded twice: by a number of events and by their bytes. Without the second bound a topic of large
/// events (a diary of 64 KiB entries) would keep `capacity` of them resident, whoever listens. The newest event is
/// always kept, even alone over the byte bound. Sequence numbers start at 1 and increase by one per published event.
///
/// Each change is kept as the frame its subscribers were sent (``SharedEvent``): a publish frames it once, and a
/// subscriber resuming is sent the same frames again.
public struct EventLog: Sendable {
    /// The topic whose events these are.
    public let topic: String
    /// The most events kept.
    public let capacity: Int
    /// The most bytes of events kept (each counted as its frame plus ``overheadBytes``).
    public let byteCapacity: Int
    /// What an event costs beyond its frame, in ``bytes``: its place in the ring and the frame's bookkeeping.
    public static let overheadBytes = 64
    private var ring: CircularBuffer<SharedEvent>
    /// The bytes of the events kept, as ``byteCapacity`` counts them.
    public private(set) var bytes = 0
    /// The sequence number of the newest event, or 0 before the first.
    public private(set) var lastSequence: UInt64 = 0

    /// Creates an empty log of `topic`'s events that keeps at most `capacity` events and `byteCapacity` bytes of
    /// them.
    public init(topic: String, capacity: Int, byteCapacity: Int = .max) {
        precondition(capacity > 0, "an event log needs room for at least one event")
        precondition(byteCapacity > 0, "an event log needs room for at least one byte")
        self.topic = topic
        self.capacity = capacity
        self.byteCapacity = byteCapacity
        self.ring = CircularBuffer(initialCapacity: min(capacity, 1024))
    }

    /// The sequence number of the oldest event still kept, or `nil` when none is.
    public var firstSequence: UInt64? {
        self.ring.isEmpty ? nil : self.lastSequence - UInt64(self.ring.count) + 1
    }

    /// Publishes a change of `body` (a message serialized) in `epoch`: numbers it with the next sequence number,
    /// frames it once (where `body` is, when it can be: ``SharedEvent``), keeps it, and returns it; the oldest
    /// events go while the ring holds more than ``capacity`` events or ``byteCapacity`` bytes.
    public mutating func append(change body: inout ProtobufBuffer, epoch: UInt64) -> SharedEvent {
        self.lastSequence += 1
        let event = SharedEvent(change: &body, topic: self.topic, sequence: self.lastSequence, epoch: epoch)
        self.ring.append(event)
        self.bytes += Self.cost(of: event)
        while self.ring.count > self.capacity || (self.bytes > self.byteCapacity && self.ring.count > 1) {
            self.bytes -= Self.cost(of: self.ring.removeFirst())
        }
        return event
    }

    /// The events after `sequence`, oldest first, or `nil` when some of them are no longer kept.
    public func events(after sequence: UInt64) -> [SharedEvent]? {
        guard sequence <= self.lastSequence else { return nil }
        if sequence == self.lastSequence { return [] }
        guard let first = self.firstSequence, sequence + 1 >= first else { return nil }
        let skip = Int(sequence + 1 - first)
        return Array(self.ring[self.ring.index(self.ring.startIndex, offsetBy: skip)...])
    }

    /// What `event` counts for in ``bytes``.
    public static func cost(of event: SharedEvent) -> Int {
        event.frame.readableBytes + Self.overheadBytes
    }
}
