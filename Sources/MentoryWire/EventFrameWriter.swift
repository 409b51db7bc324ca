#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import NIOCore

extension ByteBuffer {
    /// Appends `event` as one frame holding an `Envelope` whose message is the event: byte for byte what
    /// ``writeFrame(_:)`` writes for that envelope.
    ///
    /// An event as the engine publishes it (no `error`, no unknown fields, a known kind) is written here
    /// field by field, in field-number order and leaving out default values as SwiftProtobuf does, with its
    /// body copied once; any other event is left to SwiftProtobuf. Publishing encodes every event once, so this
    /// is the fixed cost of a publish.
    public mutating func writeEventFrame(_ event: Mentory_V1_Event) {
        guard !event.hasError, event.unknownFields.data.isEmpty, event.kind.rawValue >= 0 else {
            var envelope = Mentory_V1_Envelope()
            envelope.event = event
            return self.writeFrame(envelope)
        }
        event.body.withUnsafeBytes { body in
            self.writeEventFrame(
                topic: event.topic, sequence: event.sequence, kind: event.kind, body: body, epoch: event.epoch)
        }
    }

    /// Appends one frame holding an `Envelope` whose message is the event of these fields, with no error and no
    /// unknown fields: byte for byte what ``writeFrame(_:)`` writes for that envelope. `kind` must be a known kind.
    ///
    /// Written field by field, in field-number order and leaving out default values as SwiftProtobuf does, with
    /// `body` copied once: a publish frames its change here, straight from the bytes it serialized, with no
    /// `Event` message made.
    public mutating func writeEventFrame(
        topic: String, sequence: UInt64, kind: Mentory_V1_EventKind, body: UnsafeRawBufferPointer, epoch: UInt64
    ) {
        let layout = EventFrameLayout(
            topic: topic, sequence: sequence, kind: kind, bodyLength: body.count, epoch: epoch)
        // Written straight into the buffer's storage: a ByteBuffer write per byte costs more than the bytes.
        self.writeWithUnsafeMutableBytes(minimumWritableBytes: layout.total) { storage in
            var writer = RawWriter(storage: storage)
            layout.putHeaders(&writer, topic: topic)
            writer.put(body)
            layout.putEpoch(&writer)
            precondition(writer.index == layout.total, "an event frame's length was computed wrong")
            return layout.total
        }
    }
}

extension ProtobufBuffer {
    /// These bytes (a change a handler serialized) as the body of a change event on `topic`, numbered `sequence`, in
    /// `epoch`: one frame holding that event's `Envelope`, byte for byte what
    /// `ByteBuffer.writeEventFrame(_:)` writes, framed where the bytes are. The headers go into the
    /// free bytes in front of them and the epoch into those after, so that a publish allocates nothing more and
    /// copies nothing; these bytes stay what they were, now sharing the frame's storage.
    ///
    /// `nil`, changing nothing, when there is not room enough (a topic name longer than ``headroom`` leaves room
    /// for) or the storage is shared: writing into it would change what another holder sees.
    public mutating func changeEventFrame(topic: String, sequence: UInt64, epoch: UInt64) -> ByteBuffer? {
        let layout = EventFrameLayout(
            topic: topic, sequence: sequence, kind: .change, bodyLength: self.count, epoch: epoch)
        let bodyStart = self.buffer.readerIndex
        let bodyEnd = self.buffer.writerIndex
        guard layout.headerLength <= bodyStart, self.buffer.writableBytes >= layout.epochLength else { return nil }
        let framed = self.buffer.modifyIfUniquelyOwned { buffer in
            buffer.withVeryUnsafeMutableBytes { storage in
                var headers = RawWriter(
                    storage: UnsafeMutableRawBufferPointer(rebasing: storage[(bodyStart - layout.headerLength)...]))
                layout.putHeaders(&headers, topic: topic)
                precondition(headers.index == layout.headerLength, "an event frame's headers were computed wrong")
                var tail = RawWriter(storage: UnsafeMutableRawBufferPointer(rebasing: storage[bodyEnd...]))
                layout.putEpoch(&tail)
            }
            return true
        }
        guard framed == true else { return nil }
        var frame = self.buffer
        frame.moveWriterIndex(to: bodyEnd + layout.epochLength)
        frame.moveReaderIndex(to: bodyStart - layout.headerLength)
        return frame
    }
}

/// Where the fields of an event frame go: an `Envelope` holding an `Event` with no error and no unknown fields, its
/// fields in field-number order and default values left out, as SwiftProtobuf writes them.
private struct EventFrameLayout {
    let topicLength: Int
    let sequence: UInt64
    let kind: UInt64
    let bodyLength: Int
    let epoch: UInt64
    /// The `Event` message's length.
    let length: Int
    /// The frame's payload: the `Envelope`.
    let payload: Int
    /// The epoch field's length, after the body.
    let epochLength: Int

    init(topic: String, sequence: UInt64, kind: Mentory_V1_EventKind, bodyLength: Int, epoch: UInt64) {
        precondition(kind.rawValue >= 0, "an event frame is written by hand only for a known kind")
        self.topicLength = topic.utf8.count
        self.sequence = sequence
        self.kind = UInt64(kind.rawValue)
        self.bodyLength = bodyLength
        self.epoch = epoch
        self.epochLength = epoch != 0 ? 1 + Varint.size(epoch) : 0
        var length = self.epochLength
        if self.topicLength > 0 { length += 1 + Varint.size(UInt64(self.topicLength)) + self.topicLength }
        if sequence != 0 { length += 1 + Varint.size(sequence) }
        if self.kind != 0 { length += 1 + Varint.size(self.kind) }
        if bodyLength > 0 { length += 1 + Varint.size(UInt64(bodyLength)) + bodyLength }
        self.length = length
        self.payload = 1 + Varint.size(UInt64(length)) + length
    }

    /// The whole frame's length, its length prefix included.
    var total: Int { WireProtocol.lengthPrefixSize + self.payload }
    /// The length of everything in front of the body.
    var headerLength: Int { self.total - self.bodyLength - self.epochLength }

    /// Writes the length prefix and every field in front of the body, up to the body's tag and length.
    func putHeaders(_ writer: inout RawWriter, topic: String) {
        writer.put(UInt8(truncatingIfNeeded: self.payload >> 24))
        writer.put(UInt8(truncatingIfNeeded: self.payload >> 16))
        writer.put(UInt8(truncatingIfNeeded: self.payload >> 8))
        writer.put(UInt8(truncatingIfNeeded: self.payload))
        writer.put(0x2A)  // Envelope.event = 5, length-delimited
        writer.putVarint(UInt64(self.length))
        if self.topicLength > 0 {
            writer.put(0x0A)  // Event.topic = 1, length-delimited
            writer.putVarint(UInt64(self.topicLength))
            var topicText = topic
            topicText.withUTF8 { writer.put(UnsafeRawBufferPointer($0)) }
        }
        if self.sequence != 0 {
            writer.put(0x10)  // Event.sequence = 2, varint
            writer.putVarint(self.sequence)
        }
        if self.kind != 0 {
            writer.put(0x18)  // Event.kind = 3, varint
            writer.putVarint(self.kind)
        }
        if self.bodyLength > 0 {
            writer.put(0x22)  // Event.body = 4, length-delimited
            writer.putVarint(UInt64(self.bodyLength))
        }
    }

    /// Writes the field after the body: the epoch, unless it is 0.
    func putEpoch(_ writer: inout RawWriter) {
        guard self.epoch != 0 else { return }
        writer.put(0x28)  // Event.epoch = 5, varint
        writer.putVarint(self.epoch)
    }
}

/// Writes bytes into storage reserved for them, from its start.
private struct RawWriter {
    let storage: UnsafeMutableRawBufferPointer
    var index = 0

    mutating func put(_ byte: UInt8) {
        self.storage[self.index] = byte
        self.index += 1
    }

    mutating func put(_ bytes: UnsafeRawBufferPointer) {
        guard let source = bytes.baseAddress, !bytes.isEmpty else { return }
        precondition(self.index + bytes.count <= self.storage.count, "an event frame overran its storage")
        (self.storage.baseAddress! + self.index).copyMemory(from: source, byteCount: bytes.count)
        self.index += bytes.count
    }

    mutating func putVarint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            self.put(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        self.put(UInt8(value))
    }
}
