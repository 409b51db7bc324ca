#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import NIOCore
import SwiftProtobuf

/// Bytes in a `ByteBuffer` that SwiftProtobuf decodes from and serializes into directly, without
/// going through `Data` or `[UInt8]`.
///
/// Wrapping a buffer (``init(_:)-(ByteBuffer)``) costs nothing: the bytes stay where they are, for example a request
/// body still inside the frame it arrived in. A message serialized into this type
/// (`try message.serializedBytes() as ProtobufBuffer`) is written once into a new buffer that keeps
/// ``headroom`` free bytes in front of it and ``tailroom`` after it, so that a frame's length prefix and its
/// `Envelope` and `Response` headers can be written there (``responseFrame(id:)``), or a change event's
/// (``changeEventFrame(topic:sequence:epoch:)``), and the message is never copied.
public struct ProtobufBuffer: SwiftProtobufContiguousBytes, Sendable {
    /// Free bytes kept in front of a serialized message: room for the largest headers of a response
    /// frame (a 4-byte length prefix, then the `Envelope.response`, `Response.id` and `Response.body`
    /// tags and varints: at most 4 + 1 + 5 + 1 + 10 + 1 + 5 = 27 bytes), and for those of a change event on a
    /// topic of up to 32 bytes (4 + 1 + 5, the topic's 1 + 1 + 32, the sequence's 1 + 10, the kind's 2 and the
    /// body's 1 + 5: 63 bytes).
    public static let headroom = 63
    /// Free bytes kept after a serialized message: room for the field a change event ends with, its epoch (a tag
    /// and a varint: at most 11 bytes).
    public static let tailroom = 11

    private static let allocator = ByteBufferAllocator()

    /// The bytes: the buffer's readable bytes.
    public var buffer: ByteBuffer

    /// No bytes, in one buffer shared by every user: an `Empty` reply costs no allocation. Framing it
    /// (``responseFrame(id:)``) copies it, as there is no room in front of it; ``writeResponseFrame(id:into:)``
    /// only reads it.
    public static let empty = ProtobufBuffer(ByteBuffer())

    /// Wraps `buffer`'s readable bytes without copying them.
    public init(_ buffer: ByteBuffer) {
        self.buffer = buffer
    }

    /// `count` bytes of value `repeating`, after ``headroom`` free bytes; SwiftProtobuf serializes into this.
    public init(repeating: UInt8, count: Int) {
        var buffer = Self.allocator.buffer(capacity: Self.headroom + count + Self.tailroom)
        buffer.moveWriterIndex(forwardBy: Self.headroom)
        buffer.moveReaderIndex(forwardBy: Self.headroom)
        buffer.writeRepeatingByte(repeating, count: count)
        self.buffer = buffer
    }

    /// The bytes of `sequence`, after ``headroom`` free bytes.
    public init<S: Sequence>(_ sequence: S) where S.Element == UInt8 {
        var buffer = Self.allocator.buffer(capacity: Self.headroom + sequence.underestimatedCount + Self.tailroom)
        buffer.moveWriterIndex(forwardBy: Self.headroom)
        buffer.moveReaderIndex(forwardBy: Self.headroom)
        buffer.writeBytes(sequence)
        self.buffer = buffer
    }

    /// The number of bytes.
    public var count: Int { self.buffer.readableBytes }

    /// Calls `body` with the bytes.
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try self.buffer.withUnsafeReadableBytes(body)
    }

    /// Calls `body` with the bytes, writable.
    public mutating func withUnsafeMutableBytes<R>(_ body: (UnsafeMutableRawBufferPointer) throws -> R) rethrows -> R {
        try self.buffer.withUnsafeMutableReadableBytes(body)
    }
}

extension ProtobufBuffer {
    /// The length of the payload of the frame ``responseFrame(id:)`` makes: a serialized
    /// `Envelope { response: Response { id, body } }` whose body is these bytes.
    public func responsePayloadLength(id: UInt64) -> Int {
        let response = Self.responseLength(id: id, bodyLength: self.count)
        return 1 + Varint.size(UInt64(response)) + response
    }

    private static func responseLength(id: UInt64, bodyLength: Int) -> Int {
        (id == 0 ? 0 : 1 + Varint.size(id)) + 1 + Varint.size(UInt64(bodyLength)) + bodyLength
    }

    /// One length-prefixed frame carrying `Envelope { response: Response { id, body } }` with these bytes as
    /// the body, byte for byte what SwiftProtobuf serializes for that envelope.
    ///
    /// The headers are written into the free bytes in front of the body when there are enough of them and the
    /// buffer is not shared (a message serialized into this type, held only here); otherwise the body is copied
    /// once into a new buffer. A shared buffer is never written to: another holder (a reply a handler keeps and
    /// sends again) may be writing its own headers there.
    public consuming func responseFrame(id: UInt64) -> ByteBuffer {
        let bodyLength = self.count
        let headerLength = Self.responseHeaderLength(id: id, bodyLength: bodyLength)
        if self.buffer.readerIndex < headerLength || self.buffer.modifyIfUniquelyOwned({ _ in true }) == nil {
            var copy = Self.allocator.buffer(capacity: headerLength + bodyLength)
            copy.moveWriterIndex(forwardBy: headerLength)
            copy.moveReaderIndex(forwardBy: headerLength)
            copy.writeImmutableBuffer(self.buffer)
            self.buffer = copy
        }
        let start = self.buffer.readerIndex - headerLength
        // The headers are written through one access to the storage: byte by byte through `setInteger`,
        // each byte would check the storage's uniqueness and bounds again (this is on every reply's path).
        let end = self.buffer.withVeryUnsafeMutableBytes { storage in
            Self.putResponseHeaders(into: storage, at: start, id: id, bodyLength: bodyLength)
        }
        precondition(end == self.buffer.readerIndex, "the response headers fill the room left for them")
        self.buffer.moveReaderIndex(to: start)
        return self.buffer
    }

    /// Appends the frame ``responseFrame(id:)`` makes to `frames`: its headers, then a copy of these bytes.
    /// Returns the frame's length. These bytes are only read, so a shared buffer (``empty``) costs nothing.
    @discardableResult
    public func writeResponseFrame(id: UInt64, into frames: inout ByteBuffer) -> Int {
        let bodyLength = self.count
        let frameLength = Self.responseHeaderLength(id: id, bodyLength: bodyLength) + bodyLength
        // Headers and body through one access to the frames' storage: each of `reserveCapacity`,
        // `writeWithUnsafeMutableBytes` and `writeImmutableBuffer` checks its uniqueness and capacity again.
        frames.writeWithUnsafeMutableBytes(minimumWritableBytes: frameLength) { storage in
            let headers = Self.putResponseHeaders(into: storage, at: 0, id: id, bodyLength: bodyLength)
            if bodyLength > 0 {
                self.buffer.withUnsafeReadableBytes { body in
                    UnsafeMutableRawBufferPointer(rebasing: storage[headers...]).copyMemory(from: body)
                }
            }
            return headers + bodyLength
        }
        return frameLength
    }

    /// The length prefix and the `Envelope.response`, `Response.id` and `Response.body` headers in front of a
    /// body of `bodyLength` bytes.
    private static func responseHeaderLength(id: UInt64, bodyLength: Int) -> Int {
        let response = Self.responseLength(id: id, bodyLength: bodyLength)
        return WireProtocol.lengthPrefixSize + 1 + Varint.size(UInt64(response)) + response - bodyLength
    }

    /// Writes the headers of ``responseHeaderLength(id:bodyLength:)`` into `storage` from `start`; returns
    /// the index after them.
    private static func putResponseHeaders(
        into storage: UnsafeMutableRawBufferPointer, at start: Int, id: UInt64, bodyLength: Int
    ) -> Int {
        let response = Self.responseLength(id: id, bodyLength: bodyLength)
        let payload = 1 + Varint.size(UInt64(response)) + response
        var index = start
        func put(_ byte: UInt8) {
            storage[index] = byte
            index += 1
        }
        func putVarint(_ value: UInt64) {
            var value = value
            while value >= 0x80 {
                put(UInt8(truncatingIfNeeded: value) | 0x80)
                value >>= 7
            }
            put(UInt8(value))
        }
        let length = UInt32(payload)
        put(UInt8(truncatingIfNeeded: length >> 24))
        put(UInt8(truncatingIfNeeded: length >> 16))
        put(UInt8(truncatingIfNeeded: length >> 8))
        put(UInt8(truncatingIfNeeded: length))
        put(0x22)  // Envelope.response = 4, length-delimited
        putVarint(UInt64(response))
        if id != 0 {
            put(0x08)  // Response.id = 1, varint
            putVarint(id)
        }
        put(0x12)  // Response.body = 2, length-delimited
        putVarint(UInt64(bodyLength))
        return index
    }
}

/// Protobuf base-128 varints.
enum Varint {
    /// The number of bytes `value` takes as a varint.
    static func size(_ value: UInt64) -> Int {
        value == 0 ? 1 : (64 - value.leadingZeroBitCount + 6) / 7
    }
}

/// A response as the daemon sends it: the reply message serialized once into a ``ProtobufBuffer``, or an error.
///
/// The reply's bytes go into the frame where they are (``ProtobufBuffer/responseFrame(id:)``): take them
/// with ``takeBody()`` from the only copy of the response, so that the buffer is not shared when its headers
/// are written.
public struct OutboundResponse: Sendable {
    /// The id of the request answered.
    public var id: UInt64
    /// The serialized reply, when the request succeeded.
    public private(set) var body: ProtobufBuffer?
    /// The error, when it failed: boxed, so that a response's layout is known where it is compiled (a generated
    /// message holds `Data`, whose layout is known only at run time, and a response holding one inline made
    /// every answered request's response copied and destroyed through the run time's value witnesses).
    private let failure: Failure?

    /// The error, when it failed.
    public var error: Mentory_V1_Error? { self.failure?.error }

    /// A failed response's error.
    private final class Failure: Sendable {
        let error: Mentory_V1_Error

        init(_ error: Mentory_V1_Error) {
            self.error = error
        }
    }

    private init(id: UInt64, body: consuming ProtobufBuffer?, error: Mentory_V1_Error?) {
        self.id = id
        self.body = body
        self.failure = error.map(Failure.init)
    }

    /// A successful response carrying the serialized reply `body`.
    public static func success(id: UInt64, body: consuming ProtobufBuffer) -> Self {
        Self(id: id, body: body, error: nil)
    }

    /// A failed response.
    public static func failure(id: UInt64, error: Mentory_V1_Error) -> Self {
        Self(id: id, body: nil, error: error)
    }

    /// The wire error code: 0 for a success.
    public var code: UInt32 { self.failure?.error.code ?? 0 }

    /// The serialized reply's length in bytes; 0 for an error.
    public var bodyLength: Int { self.body?.count ?? 0 }

    /// Moves the reply's bytes out of the response, which keeps only its id and error.
    public mutating func takeBody() -> ProtobufBuffer? {
        self.body.take()
    }

    /// The response as a generated message; the body is copied into `Data`.
    public var wireResponse: Mentory_V1_Response {
        if let error = self.error {
            return .failure(id: self.id, error: error)
        }
        let body = self.body.map { Data($0.buffer.readableBytesView) } ?? Data()
        return .success(id: self.id, body: body)
    }
}
