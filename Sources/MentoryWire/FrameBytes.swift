import SwiftProtobuf

/// Framing over plain byte arrays, for clients that do their own blocking I/O instead of using a channel.
///
/// The frames are the same as ``LengthPrefixedFrameDecoder`` and ``EnvelopeFrameEncoder`` read and write:
/// a 4-byte big-endian length, then that many bytes of a serialized `Envelope`.
extension Mentory_V1_Envelope {
    /// Decodes an envelope from one frame's payload (the bytes after the length prefix).
    ///
    /// Fails like `init(frame:)`: on bytes that are not an `Envelope`, or an envelope that carries no message.
    public init(framePayload: some Collection<UInt8>) throws(MalformedMessageError) {
        do {
            self = try Mentory_V1_Envelope(serializedBytes: Array(framePayload))
        } catch {
            throw MalformedMessageError(reason: "\(error)")
        }
        if self.kind == nil {
            throw MalformedMessageError(reason: "the envelope carries no message")
        }
    }

    /// This envelope as one whole frame: its length as a 4-byte big-endian integer, then its bytes.
    public func frameBytes() -> [UInt8] {
        // Serializing a message built in memory cannot fail: it has no required fields.
        let payload: [UInt8] = (try? self.serializedBytes()) ?? []
        let length = UInt32(truncatingIfNeeded: payload.count)
        var frame: [UInt8] = []
        frame.reserveCapacity(WireProtocol.lengthPrefixSize + payload.count)
        frame += [UInt8(length >> 24), UInt8(truncatingIfNeeded: length >> 16)]
        frame += [UInt8(truncatingIfNeeded: length >> 8), UInt8(truncatingIfNeeded: length)]
        frame += payload
        return frame
    }
}

/// Reads the length prefix of a frame from plain bytes.
public enum FrameLength {
    /// The payload length announced by the four bytes at `start` of `bytes`, or `nil` when fewer than four
    /// bytes are there.
    public static func read(from bytes: [UInt8], at start: Int = 0) -> Int? {
        guard bytes.count - start >= WireProtocol.lengthPrefixSize else { return nil }
        return Int(bytes[start]) << 24 | Int(bytes[start + 1]) << 16 | Int(bytes[start + 2]) << 8
            | Int(bytes[start + 3])
    }
}
