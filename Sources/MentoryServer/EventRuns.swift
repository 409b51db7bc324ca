import MentoryEngine
import MentoryWire
import NIOCore

/// One topic's change events of one event-loop tick, copied back to back once, so that the subscribers that get
/// them all send one shared run of bytes rather than copies of their own.
///
/// Every subscriber of a topic gets its events in the same order. A subscriber's first frame of a tick is kept as it
/// is (``OutboundFrameBuffer``); without runs, the second would make it copy both into a buffer of its own, every
/// subscriber the same bytes. With runs, the first subscriber to get the tick's second event starts the run from
/// the frame it holds, the event is appended once, and every other subscriber holding the same first frame (the same
/// storage, not merely equal bytes) holds a range of the run instead: bounds, not bytes.
///
/// Confined to its event loop, like the ``TickFlusher`` that keeps it.
final class EventRun {
    /// Runs stop growing at this size: the subscribers of events past it copy them, as they would without runs.
    static let maxBytes = 64 * 1024

    /// The frame the run starts with: the tick's first event of the topic, as its subscribers hold it.
    let first: ByteBuffer
    /// The events, back to back from ``first``. Appended to in place until a subscriber flushes a slice of it; an
    /// append after that copies it once, and the slices flushed keep the bytes they had.
    private(set) var frames: ByteBuffer

    /// Starts a run with `first` and its next event, `next`.
    init(first: ByteBuffer, next: ByteBuffer, allocator: ByteBufferAllocator) {
        self.first = first
        let bytes = first.readableBytes + next.readableBytes
        var frames = allocator.buffer(capacity: max(OutboundFrameBuffer.initialCapacity, 2 * bytes))
        frames.writeBytesOf(first)
        frames.writeBytesOf(next)
        self.frames = frames
    }

    /// The bytes of the run so far.
    var readableBytes: Int { self.frames.readableBytes }

    /// Where ``first`` ends, and the event after it starts.
    var firstEnd: Int { self.first.readableBytes }

    /// Whether `frame` may still be appended.
    func fits(_ frame: ByteBuffer) -> Bool {
        self.frames.readableBytes + frame.readableBytes <= Self.maxBytes
    }

    /// Appends `frame`; returns its range in the run.
    func append(_ frame: ByteBuffer) -> Range<Int> {
        let start = self.frames.readableBytes
        self.frames.writeBytesOf(frame)
        return start..<self.frames.readableBytes
    }

    /// The run's bytes in `range`, sharing its storage.
    func slice(_ range: Range<Int>) -> ByteBuffer {
        self.frames.getSlice(at: self.frames.readerIndex + range.lowerBound, length: range.count)!
    }
}

/// The event runs of one event-loop tick, by topic, and where the event placed last went.
///
/// A topic's first change event of a tick is noted as it is; its second starts the run (``EventRun``), from the
/// first, and later ones are appended to it, each once, by the first subscriber to get it. The engine delivers an
/// event to all its subscribers in a row, so every subscriber after the first finds the event's place by comparing
/// one address. Kept by the loop's ``TickFlusher``, which ends the tick's runs before it flushes.
///
/// Stored properties rather than an optional tuple: a subscriber's question is answered with no copy of a buffer
/// or a run (no retain), as it is asked once per event delivered.
struct EventRuns {
    /// A topic's events so far this tick.
    private enum Topic {
        /// One: its frame.
        case first(ByteBuffer)
        /// More: their run.
        case run(EventRun)
    }

    private var topics: [String: Topic] = [:]
    /// The event placed last, held so that the address compared is not reused by another; its readable bytes'
    /// address and length; and where it went: its run (`nil`: none) and its bytes there.
    private var lastFrame: ByteBuffer?
    private var lastAddress: UnsafeRawPointer?
    private var lastLength = 0
    private var lastRun: EventRun?
    /// ``lastRun``'s identity, compared without retaining it.
    private var lastRunID: ObjectIdentifier?
    private var lastStart = 0
    private var lastEnd = 0
    /// The allocator of the runs' storage.
    let allocator = ByteBufferAllocator()

    /// Notes `shared`, a subscriber's first frame of the tick, so that its topic's next event can start a run.
    mutating func note(_ shared: SharedEvent) {
        self.place(shared)
    }

    /// The run `shared` starts together with `held`, a subscriber's only frame of the tick: `nil` unless `held`
    /// is the topic's first event of the tick (the same bytes, not merely equal ones) and `shared` its second.
    mutating func run(startedBy shared: SharedEvent, after held: ByteBuffer) -> EventRun? {
        self.place(shared)
        guard let run = self.lastRun, self.lastStart == run.firstEnd, run.first.isSameBytes(as: held) else {
            return nil
        }
        return run
    }

    /// Where the bytes of a subscriber holding the run identified by `run` up to `end` end once `shared` is added,
    /// when `shared` comes next in that run; `nil` otherwise.
    mutating func end(of run: ObjectIdentifier, from end: Int, extendedBy shared: SharedEvent) -> Int? {
        self.place(shared)
        guard self.lastRunID == run, self.lastStart == end else { return nil }
        return self.lastEnd
    }

    /// Puts `shared` in its topic's run, unless it was the event placed last: appended once, by the first
    /// subscriber to get it. In none when it is not a change (a snapshot or reset is one subscriber's own), when
    /// it is the topic's first event of the tick (noted, for the run its second starts), or when the run is full.
    private mutating func place(_ shared: SharedEvent) {
        let (address, length) = shared.frame.withUnsafeReadableBytes { ($0.baseAddress, $0.count) }
        if address == self.lastAddress, length == self.lastLength, self.lastFrame != nil { return }
        self.lastFrame = shared.frame
        self.lastAddress = address
        self.lastLength = length
        self.lastRun = nil
        self.lastRunID = nil
        guard shared.kind == .change else { return }
        let topic = shared.topic
        switch self.topics[topic] {
        case nil:
            self.topics[topic] = .first(shared.frame)
        case .first(let first):
            guard first.readableBytes + length <= EventRun.maxBytes else { return }
            let run = EventRun(first: first, next: shared.frame, allocator: self.allocator)
            self.topics[topic] = .run(run)
            (self.lastRun, self.lastRunID) = (run, ObjectIdentifier(run))
            (self.lastStart, self.lastEnd) = (run.firstEnd, run.readableBytes)
        case .run(let run):
            guard run.fits(shared.frame) else { return }
            let range = run.append(shared.frame)
            (self.lastRun, self.lastRunID) = (run, ObjectIdentifier(run))
            (self.lastStart, self.lastEnd) = (range.lowerBound, range.upperBound)
        }
    }

    /// Ends the tick's runs: the next tick's events start new ones. Subscribers still holding a run keep it.
    mutating func endTick() {
        guard self.lastFrame != nil else { return }
        self.topics.removeAll(keepingCapacity: true)
        self.lastFrame = nil
        self.lastAddress = nil
        self.lastRun = nil
        self.lastRunID = nil
    }
}

/// A loop's ``EventRuns``, shared by its connections: kept by its ``TickFlusher``, and passed by each connection to
/// its ``OutboundFrameBuffer`` with every event. A class of its own, not the flusher, which is weakly referenced
/// (by its task) and so pays a side table's slow reference counting on every retain.
final class SharedEventRuns {
    /// The runs, mutated in place: one access per event delivered.
    var runs = EventRuns()
}

extension ByteBuffer {
    /// Whether `other`'s readable bytes are this buffer's own, in the same storage: not merely equal bytes.
    func isSameBytes(as other: ByteBuffer) -> Bool {
        self.readableBytes == other.readableBytes
            && self.withUnsafeReadableBytes { mine in
                other.withUnsafeReadableBytes { theirs in mine.baseAddress == theirs.baseAddress }
            }
    }

    /// Appends `other`'s readable bytes through its bytes (`writeImmutableBuffer` also moves the reader index of a
    /// copy of `other`).
    mutating func writeBytesOf(_ other: ByteBuffer) {
        _ = other.withUnsafeReadableBytes { self.writeBytes($0) }
    }
}
