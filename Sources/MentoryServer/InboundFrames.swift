import MentoryWire
import NIOCore

/// The bytes a connection read whose frames are not handled yet: a frame cut short, or whole frames waiting
/// for room.
///
/// The connection splits the byte stream into frames itself, as it handles them: a read costs one pass
/// through the pipeline however many frames it carries. A frame is looked at before it is taken
/// (``next()``, ``consume(_:)``), so that a request over a bound stays where it is, unread. A value, stored in
/// its handler and mutated in place; it does no I/O.
struct InboundFrames {
    /// The empty buffer ``bytes`` holds when every byte read is handled.
    private static let noBytes = ByteBuffer()

    /// The bytes read and not handled yet.
    private var bytes = InboundFrames.noBytes
    private let decoder: LengthPrefixedFrameDecoder
    /// Whether ``batchStarted`` holds the start of the batch of frames being handled now.
    private var batchHasStarted = false
    /// When the frames being handled now were taken up (while ``batchHasStarted``): the clock is read once per batch
    /// of frames, not per request. A request's duration counts from here, so it includes the requests ahead of it
    /// in its batch. Not optional, and stored last: `ContinuousClock.Instant` is resilient, and an optional one is
    /// copied through its metadata (the value witnesses of `Optional`), which cost every request a runtime call.
    private var batchStarted = ContinuousClock.Instant.now

    init(maxFrameLength: Int) {
        self.decoder = LengthPrefixedFrameDecoder(maxFrameLength: maxFrameLength)
    }

    /// The bytes waiting.
    var readableBytes: Int { self.bytes.readableBytes }

    /// Adds the bytes of a read after those waiting.
    mutating func append(_ read: ByteBuffer) {
        if self.bytes.readableBytes == 0 {
            self.bytes = read
        } else {
            // Only a frame cut short, or frames waiting for room, are kept: move them to the front first.
            var read = read
            self.bytes.discardReadBytes()
            self.bytes.writeBuffer(&read)
        }
    }

    /// Lets go of the read's buffer once every byte of it is handled, so that a reader reusing its buffer (a
    /// ``SocketConnection``'s) finds it unshared.
    mutating func releaseIfHandled() {
        if self.bytes.readableBytes == 0 { self.bytes = Self.noBytes }
    }

    /// Drops every byte waiting (the connection is closing).
    mutating func discard() {
        self.bytes = Self.noBytes
    }

    /// The next whole frame's payload, without taking it; `nil` when no whole frame waits. Throws when the next
    /// frame's length is over the limit.
    ///
    /// Only the frame comes back, a slice of the bytes waiting: returning the bytes after it too, as a tuple of
    /// two buffers, cost every request a copy and a destroy of that tuple through its metadata.
    func next() throws(FrameError) -> ByteBuffer? {
        var rest = self.bytes
        return try self.decoder.nextFrame(from: &rest)
    }

    /// Whether `frame` is certainly a `PluginReply` (field 8) or a `Hello` (field 1), which cost no reply.
    static func costsNoReply(_ frame: ByteBuffer) -> Bool {
        let tag = frame.getInteger(at: frame.readerIndex, as: UInt8.self)
        return tag == 0x42 || tag == 0x0A
    }

    /// Takes `frame`, the frame ``next()`` returned: the bytes waiting then start after it.
    mutating func consume(_ frame: ByteBuffer) {
        self.bytes.moveReaderIndex(forwardBy: WireProtocol.lengthPrefixSize + frame.readableBytes)
    }

    /// Whether a whole frame waits.
    var hasWholeFrame: Bool {
        guard let length = self.bytes.getInteger(at: self.bytes.readerIndex, as: UInt32.self) else {
            return false
        }
        return self.bytes.readableBytes >= WireProtocol.lengthPrefixSize + Int(length)
    }

    /// What is wrong with the bytes after the whole frames, at end of input: a length over the limit, or a
    /// frame cut short; `nil` when they end at a frame boundary. Read through the decoder, on a view of the
    /// bytes (whole frames still waiting for room stay where they are).
    func unfinishedFrame() -> FrameError? {
        var rest = self.bytes
        do {
            while try self.decoder.nextFrame(from: &rest) != nil {}
        } catch {
            return error
        }
        return rest.readableBytes > 0 ? .truncatedFrame(bufferedBytes: rest.readableBytes) : nil
    }

    /// When the request being handled was received: the batch's start, read from the clock by its first request.
    mutating func received() -> ContinuousClock.Instant {
        if !self.batchHasStarted {
            self.batchStarted = .now
            self.batchHasStarted = true
        }
        return self.batchStarted
    }

    /// Ends the batch being handled, and returns when it was received: read by its first request (``received()``),
    /// and stale if no request asked. The next batch reads the clock again.
    mutating func endBatch() -> ContinuousClock.Instant {
        self.batchHasStarted = false
        return self.batchStarted
    }
}

extension MentoryError {
    /// The error a connection is closed with over a frame error: FRAME_TOO_LARGE or TRUNCATED_FRAME.
    init(_ error: FrameError) {
        switch error {
        case .frameTooLarge(let length, let maximum): self = .frameTooLarge(length: length, maximum: maximum)
        case .truncatedFrame: self = .truncatedFrame
        }
    }
}

/// A message a client sends, read from one frame.
///
/// The messages other than a request are kept `indirect`: a generated message holds `Data` (its unknown fields),
/// whose layout is known only at run time, and a case holding one made every request's message built and taken
/// apart through the run time's enum functions.
enum ClientMessage {
    case request(InboundRequest)
    indirect case hello(Mentory_V1_Hello)
    indirect case pluginReply(Mentory_V1_PluginReply)
    /// Not a message, or not one clients send: answered with this non-closing connection error.
    case malformed(MentoryError)

    /// Reads one frame's payload (see ``InboundEnvelope/init(frame:)``).
    init(frame: consuming ByteBuffer) {
        let envelope: InboundEnvelope
        do {
            envelope = try InboundEnvelope(consuming: consume frame)
        } catch {
            self = .malformed(.malformedMessage(error.reason))
            return
        }
        switch envelope {
        case .request(let request):
            self = .request(request)
        case .other(let envelope):
            switch envelope.kind {
            case .hello(let hello): self = .hello(hello)
            case .request(let request): self = .request(InboundRequest(request))
            case .pluginReply(let reply): self = .pluginReply(reply)
            default: self = .malformed(.malformedMessage("clients send only Hello, Request and PluginReply"))
            }
        }
    }
}
