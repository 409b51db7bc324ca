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
        precondition(kind.rawValue >= 0, "an event frame is written by hand only for a known kind")
        let topicLength = topic.utf8.count
        let kind = UInt64(kind.rawValue)
        let bodyLength = body.count
        var length = 0
        if topicLength > 0 { length += 1 + Varint.size(UInt64(topicLength)) + topicLength }
        if sequence != 0 { length += 1 + Varint.size(sequence) }
        if kind != 0 { length += 1 + Varint.size(kind) }
        if bodyLength > 0 { length += 1 + Varint.size(UInt64(bodyLength)) + bodyLength }
        if epoch != 0 { length += 1 + Varint.size(epoch) }
        let payload = 1 + Varint.size(UInt64(length)) + length
        let total = WireProtocol.lengthPrefixSize + payload
        // Written straight into the buffer's storage: a ByteBuffer write per byte costs more than the bytes.
        self.writeWithUnsafeMutableBytes(minimumWritableBytes: total) { storage in
            var writer = RawWriter(storage: storage)
            writer.put(UInt8(truncatingIfNeeded: payload >> 24))
            writer.put(UInt8(truncatingIfNeeded: payload >> 16))
            writer.put(UInt8(truncatingIfNeeded: payload >> 8))
            writer.put(UInt8(truncatingIfNeeded: payload))
            writer.put(0x2A)  // Envelope.event = 5, length-delimited
            writer.putVarint(UInt64(length))
            if topicLength > 0 {
                writer.put(0x0A)  // Event.topic = 1, length-delimited
                writer.putVarint(UInt64(topicLength))
                var topicText = topic
                topicText.withUTF8 { writer.put(UnsafeRawBufferPointer($0)) }
            }
            if sequence != 0 {
                writer.put(0x10)  // Event.sequence = 2, varint
                writer.putVarint(sequence)
            }
            if kind != 0 {
                writer.put(0x18)  // Event.kind = 3, varint
                writer.putVarint(kind)
            }
            if bodyLength > 0 {
                writer.put(0x22)  // Event.body = 4, length-delimited
                writer.putVarint(UInt64(bodyLength))
                writer.put(body)
            }
            if epoch != 0 {
                writer.put(0x28)  // Event.epoch = 5, varint
                writer.putVarint(epoch)
            }
            precondition(writer.index == total, "an event frame's length was computed wrong")
            return total
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
        let topicLength = topic.utf8.count
        let bodyLength = self.count
        var length = 0
        if topicLength > 0 { length += 1 + Varint.size(UInt64(topicLength)) + topicLength }
        if sequence != 0 { length += 1 + Varint.size(sequence) }
        let kind = UInt64(Mentory_V1_EventKind.change.rawValue)
        if kind != 0 { length += 1 + Varint.size(kind) }
        if bodyLength > 0 { length += 1 + Varint.size(UInt64(bodyLength)) + bodyLength }
        let epochLength = epoch != 0 ? 1 + Varint.size(epoch) : 0
        length += epochLength
        let payload = 1 + Varint.size(UInt64(length)) + length
        let headerLength = WireProtocol.lengthPrefixSize + payload - bodyLength - epochLength
        let bodyStart = self.buffer.readerIndex
        let bodyEnd = self.buffer.writerIndex
        guard headerLength <= bodyStart, self.buffer.writableBytes >= epochLength else { return nil }
        let framed = self.buffer.modifyIfUniquelyOwned { buffer in
            buffer.withVeryUnsafeMutableBytes { storage in
                let headers = UnsafeMutableRawBufferPointer(rebasing: storage[(bodyStart - headerLength)...])
                var writer = RawWriter(storage: headers)
                writer.put(UInt8(truncatingIfNeeded: payload >> 24))
                writer.put(UInt8(truncatingIfNeeded: payload >> 16))
                writer.put(UInt8(truncatingIfNeeded: payload >> 8))
                writer.put(UInt8(truncatingIfNeeded: payload))
                writer.put(0x2A)  // Envelope.event = 5, length-delimited
                writer.putVarint(UInt64(length))
                if topicLength > 0 {
                    writer.put(0x0A)  // Event.topic = 1, length-delimited
                    writer.putVarint(UInt64(topicLength))
                    var topicText = topic
                    topicText.withUTF8 { writer.put(UnsafeRawBufferPointer($0)) }
                }
                if sequence != 0 {
                    writer.put(0x10)  // Event.sequence = 2, varint
                    writer.putVarint(sequence)
                }
                if kind != 0 {
                    writer.put(0x18)  // Event.kind = 3, varint
                    writer.putVarint(kind)
                }
                if bodyLength > 0 {
                    writer.put(0x22)  // Event.body = 4, length-delimited
                    writer.putVarint(UInt64(bodyLength))
                }
                precondition(writer.index == headerLength, "an event frame's headers were computed wrong")
                if epochLength > 0 {
                    var tail = RawWriter(storage: UnsafeMutableRawBufferPointer(rebasing: storage[bodyEnd...]))
                    tail.put(0x28)  // Event.epoch = 5, varint
                    tail.putVarint(epoch)
                }
            }
            return true
        }
        guard framed == true else { return nil }
        var frame = self.buffer
        frame.moveWriterIndex(to: bodyEnd + epochLength)
        frame.moveReaderIndex(to: bodyStart - headerLength)
        return frame
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
