import Logging
import MentoryEngine
import MentoryHandlerKit
import MentoryWire
import NIOCore

/// The small frames a connection wrote since its last flush, not yet handed to its transport.
///
/// As Redis does with its reply buffer, a tick's small replies and events are copied into one buffer, so that
/// they cost the pipeline one write and the kernel one `writev`, not one each. A tick's only frame is kept as
/// it is (an event's frame is shared by every subscriber). A subscriber's later events of the same topic continue
/// the tick's ``EventRun`` of that topic when it holds the run's beginning: a range of bytes shared by every such
/// subscriber, not a copy. Anything else starts a buffer of the connection's own, holding copies. Frames over
/// ``maxFrameBytes``, and frames whose write is waited for, go to the transport on their own, after what was
/// coalesced before them (``write(_:promise:transport:)``).
///
/// A value, stored in its ``Connection`` and mutated in place. It writes through the connection's transport, and
/// counts no bytes (the ``ConnectionStateMachine`` does).
struct OutboundFrameBuffer {
    /// Frames up to this size are coalesced; larger ones are written as they are.
    static let maxFrameBytes = 8 * 1024
    /// The capacity a buffer of the connection's own starts with; it grows as frames are added (up to the
    /// outbound bounds).
    static let initialCapacity = 1024
    /// A buffer of the connection's own up to this capacity is kept once handed over (``spare``), to be reused
    /// by the next tick's frames; a larger one is let go.
    static let maxSpareCapacity = 4 * 1024

    /// The write buffer water marks a connection sets on its channel: it turns unwritable as soon as a byte waits
    /// (more than one, strictly: a frame has at least four) and writable again only once none does, so that
    /// writability says whether the kernel took everything flushed.
    static let everythingTaken = ChannelOptions.Types.WriteBufferWaterMark(low: 1, high: 1)

    /// The frames coalesced, if any: the tick's only frame as it is, or (``isOwned``) a buffer of the connection's
    /// own.
    private var frames: ByteBuffer?
    /// Whether ``frames`` is this connection's own buffer rather than the one frame it holds.
    private(set) var isOwned = false
    /// Instead of ``frames``: events back to back in a run shared with other subscribers, its bytes up to
    /// ``runEnd``. Fields rather than an enum's payload, so that extending the range stores one integer.
    private var run: EventRun?
    private var runEnd = 0
    /// ``run``'s identity, compared without retaining it.
    private var runID: ObjectIdentifier?
    /// The buffer of the connection's own last handed over, if small: once the transport has written and dropped
    /// it, the next tick's frames go into its storage, with no allocation (as Redis reuses a client's reply
    /// buffer). Cleared while the transport still holds it, it gets a new storage, as a new buffer would.
    private var spare: ByteBuffer?
    /// The transport's allocator, taken once: asking the channel for it on every write costs more than the write.
    var allocator: ByteBufferAllocator

    init(allocator: ByteBufferAllocator = ByteBufferAllocator()) {
        self.allocator = allocator
    }

    /// Whether no frame waits.
    var isEmpty: Bool { self.frames == nil && self.run == nil }

    /// Whether the frames waiting are a range of a run shared with other subscribers.
    var isSharedRun: Bool { self.run != nil }

    /// The bytes waiting.
    var readableBytes: Int { self.run == nil ? self.frames?.readableBytes ?? 0 : self.runEnd }

    /// Whether a frame of `bytes` is coalesced rather than written on its own.
    static func coalesces(_ bytes: Int) -> Bool {
        bytes <= Self.maxFrameBytes
    }

    /// Adds `frame`: kept as it is when it is the first, copied into the connection's own buffer otherwise.
    mutating func append(_ frame: ByteBuffer) {
        guard !self.isEmpty else {
            self.frames = frame
            self.isOwned = false
            return
        }
        self.appendOwned(reserving: frame.readableBytes) { $0.writeBytesOf(frame) }
    }

    /// Adds a subscriber's event, `shared`: kept as it is when it is the first; as the next range of its topic's run
    /// of this tick (the loop's ``EventRuns``) when what waits is that run's beginning; else copied.
    mutating func append(event shared: SharedEvent, sharing runs: SharedEventRuns?) {
        if let runs {
            if let runID = self.runID {
                if let end = runs.runs.end(of: runID, from: self.runEnd, extendedBy: shared) {
                    self.runEnd = end
                    return
                }
            } else if let held = self.frames {
                if !self.isOwned, let run = runs.runs.run(startedBy: shared, after: held) {
                    self.frames = nil
                    self.run = run
                    self.runID = ObjectIdentifier(run)
                    self.runEnd = run.readableBytes
                    return
                }
            } else {
                // Noted, so that the topic's next event can start a run from it.
                runs.runs.note(shared)
            }
        }
        self.append(shared.frame)
    }

    /// Has `write` add `bytes` bytes straight into the connection's own buffer; at least one frame must
    /// wait already (the first is kept as it is, see ``append(_:)``).
    ///
    /// The buffer is taken out while it is written to, so that it has one owner and grows in place: a copy of it
    /// still held (as the first frame once was, for the whole function) would make every write copy all of it.
    mutating func appendOwned(reserving bytes: Int, _ write: (inout ByteBuffer) -> Void) {
        var buffer: ByteBuffer
        if let run = self.run.take() {
            self.runID = nil
            buffer = self.ownBuffer(capacity: 2 * (self.runEnd + bytes))
            buffer.writeBytesOf(run.slice(0..<self.runEnd))
            self.isOwned = true
        } else {
            guard let frames = self.frames.take() else {
                preconditionFailure("only a tick's second and later frames go into a buffer of the connection's own")
            }
            buffer = frames
        }
        if !self.isOwned {
            let first = buffer
            buffer = self.ownBuffer(capacity: first.readableBytes + bytes)
            buffer.writeBytesOf(first)
            self.isOwned = true
        }
        write(&buffer)
        self.frames = buffer
    }

    /// An empty buffer of the connection's own with room for `capacity` bytes: the ``spare`` one if there is one.
    private mutating func ownBuffer(capacity: Int) -> ByteBuffer {
        guard var buffer = self.spare.take() else {
            return self.allocator.buffer(capacity: max(Self.initialCapacity, capacity))
        }
        buffer.clear(minimumCapacity: max(Self.initialCapacity, capacity))
        return buffer
    }

    /// How ``frame(_:method:maxFrameLength:logger:)`` framed a response.
    enum FramedResponse {
        /// Appended to the frames coalesced, in `bytes`.
        case appended(bytes: Int)
        /// A frame of its own to write; `size` is what the reply took (over the limit: what it would have).
        case frame(ByteBuffer, size: Int)
    }

    /// Frames `response` (of `method`), taking its reply body out of it: appended in place when it can be
    /// coalesced, else framed on its own; a reply over the frame limit becomes an INTERNAL error, logged.
    mutating func frame(
        _ response: inout OutboundResponse, method: () -> String, maxFrameLength: Int, logger: Logger
    ) -> FramedResponse {
        if let bytes = self.append(&response, maxFrameLength: maxFrameLength) { return .appended(bytes: bytes) }
        switch ServerFrameEncoder.encode(&response, maxFrameLength: maxFrameLength) {
        case .success(let frame):
            return .frame(frame, size: frame.readableBytes)
        case .failure(let oversized):
            let replacement = ServerFrameEncoder.oversizedReplyFrame(
                response.id, method: method(), oversized, logger: logger)
            // What the handler tried to send is what the next one may try: a whole frame is reserved for it.
            return .frame(replacement, size: oversized.length)
        }
    }

    /// Appends a small successful response, its headers and then its body copied once, without framing the body
    /// on its own first (an `Empty` reply then costs no buffer); returns the frame's length. The tick's first frame
    /// starts a buffer of the connection's own (its ``spare`` one, if any). `nil` leaves it to be sent the usual way:
    /// an error, or a frame too large to coalesce or over the frame limit.
    mutating func append(_ response: inout OutboundResponse, maxFrameLength: Int) -> Int? {
        guard let payload = response.body?.responsePayloadLength(id: response.id) else { return nil }
        let bytes = WireProtocol.lengthPrefixSize + payload
        guard Self.coalesces(bytes), payload <= maxFrameLength else { return nil }
        if self.isEmpty {
            self.frames = self.ownBuffer(capacity: bytes)
            self.isOwned = true
        }
        let body = response.takeBody()!
        self.appendOwned(reserving: bytes) { body.writeResponseFrame(id: response.id, into: &$0) }
        return bytes
    }

    /// Writes `frame` without flushing: coalesced when it is small and no one waits for its write, else handed
    /// to the transport as it is, after what was coalesced before it.
    mutating func write(_ frame: ByteBuffer, promise: EventLoopPromise<Void>?, transport: any ConnectionTransport) {
        if promise == nil, Self.coalesces(frame.readableBytes) { return self.append(frame) }
        if let coalesced = self.take() { transport.write(coalesced, promise: nil) }
        transport.write(frame, promise: promise)
    }

    /// Writes a subscriber's event without flushing: as ``write(_:promise:transport:)`` does, a small one through
    /// ``append(event:sharing:)``. `transport` is asked for only for a frame written on its own, so that the many
    /// small events of a fan-out do not retain it.
    mutating func write(
        event shared: SharedEvent, sharing runs: SharedEventRuns?,
        transport: @autoclosure () -> (any ConnectionTransport)?
    ) {
        guard Self.coalesces(shared.frame.readableBytes) else {
            if let transport = transport() { self.write(shared.frame, promise: nil, transport: transport) }
            return
        }
        self.append(event: shared, sharing: runs)
    }

    /// Takes every frame waiting, to hand to the transport; `nil` when none does.
    ///
    /// A run's range is handed over as a slice of the run when it is the whole run so far, so that the storage it
    /// keeps alive holds no byte not counted to this connection; a part of a run is copied out.
    mutating func take() -> ByteBuffer? {
        guard let run = self.run.take() else {
            let frames = self.frames.take()
            if self.isOwned, let frames, frames.capacity <= Self.maxSpareCapacity { self.spare = frames }
            self.isOwned = false
            return frames
        }
        self.runID = nil
        if self.runEnd == run.readableBytes { return run.slice(0..<self.runEnd) }
        var copy = self.allocator.buffer(capacity: self.runEnd)
        copy.writeBytesOf(run.slice(0..<self.runEnd))
        return copy
    }

    /// Drops every frame waiting (the connection is gone).
    mutating func discard() {
        self.frames = nil
        self.spare = nil
        self.isOwned = false
        self.run = nil
        self.runID = nil
    }
}
