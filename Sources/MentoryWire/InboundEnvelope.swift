#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import NIOCore
import SwiftProtobuf

/// A request as the daemon reads it from a frame: its fields decoded, its body left in the frame's buffer.
public struct InboundRequest: Sendable {
    /// The request's id, echoed in its response.
    public var id: UInt64
    /// The namespace called, as read: compared by its bytes on the way to its route, made a `String` only when
    /// asked for.
    package var namespaceName: RequestName
    /// The method called, as read (see ``namespaceName``).
    package var methodName: RequestName
    /// The caller's deadline in milliseconds; 0 means the daemon's default.
    public var timeoutMs: UInt32
    /// The method's serialized request message: the frame it arrived in, narrowed to its bytes; not a copy.
    public var body: ByteBuffer

    /// The namespace called, e.g. `session`.
    public var namespace: String {
        get { self.namespaceName.string }
        set { self.namespaceName = RequestName(newValue) }
    }

    /// The method called, e.g. `ping`.
    public var method: String {
        get { self.methodName.string }
        set { self.methodName = RequestName(newValue) }
    }

    /// A request with these fields.
    public init(id: UInt64, namespace: String, method: String, timeoutMs: UInt32 = 0, body: ByteBuffer) {
        self.init(
            id: id, namespaceName: RequestName(namespace), methodName: RequestName(method), timeoutMs: timeoutMs,
            body: body)
    }

    /// A request with these fields, its names as read.
    init(id: UInt64, namespaceName: RequestName, methodName: RequestName, timeoutMs: UInt32, body: ByteBuffer) {
        self.id = id
        self.namespaceName = namespaceName
        self.methodName = methodName
        self.timeoutMs = timeoutMs
        self.body = body
    }

    /// The request `request` carries; its body is copied once into a buffer.
    public init(_ request: Mentory_V1_Request) {
        self.init(
            id: request.id, namespace: request.namespace, method: request.method, timeoutMs: request.timeoutMs,
            body: ByteBuffer(bytes: request.body))
    }

    /// The request as a generated message; its body is copied into `Data`.
    public var wireRequest: Mentory_V1_Request {
        var request = Mentory_V1_Request()
        request.id = self.id
        request.namespace = self.namespace
        request.method = self.method
        request.timeoutMs = self.timeoutMs
        request.body = Data(self.body.readableBytesView)
        return request
    }
}

/// A namespace or method name, kept so that comparing two costs a few machine words rather than a `String`
/// comparison, and reading one from a frame makes no `String`.
///
/// A name of at most 15 ASCII bytes (every name mentoryd declares so far) is packed into two words, its bytes
/// in order and its length in the last byte; any other is kept as a `String`. Which form a name takes depends
/// only on its bytes, so two names are equal exactly when their forms are.
package struct RequestName: Sendable, Hashable {
    /// A packed name's bytes 0-7, least significant first; 0 for a name kept as a `String`.
    package let low: UInt64
    /// A packed name's bytes 8-14, least significant first, and its length in the top byte; 0 for a name kept
    /// as a `String`.
    package let high: UInt64
    /// A name that is not packed: longer than 15 bytes, or not ASCII. A class, so that a name copies as three
    /// words, whatever its form (an optional `String` here made every copy of a request an outlined one).
    package let long: LongName?

    /// A name that is not packed.
    package final class LongName: Sendable {
        package let string: String

        init(_ string: String) {
            self.string = string
        }
    }

    /// The name `string`.
    package init(_ string: String) {
        var string = string
        if let packed = string.withUTF8({ Self.packed(UnsafeRawBufferPointer($0), 0..<$0.count) }) {
            (self.low, self.high, self.long) = (packed.low, packed.high, nil)
        } else {
            (self.low, self.high, self.long) = (0, 0, LongName(string))
        }
    }

    /// The packed name of these words (``packed(_:_:)``).
    init(packedLow low: UInt64, high: UInt64) {
        (self.low, self.high, self.long) = (low, high, nil)
    }

    /// The name `string`, which is not packed: longer than 15 bytes, or not ASCII.
    init(unpacked string: String) {
        (self.low, self.high, self.long) = (0, 0, LongName(string))
    }

    /// The empty name.
    package static var empty: RequestName { RequestName(packedLow: 0, high: 0) }

    /// Whether the two names are the same: two words compared for a packed name.
    @inlinable
    package static func == (lhs: RequestName, rhs: RequestName) -> Bool {
        lhs.low == rhs.low && lhs.high == rhs.high && lhs.long?.string == rhs.long?.string
    }

    /// Hashes the name as ``==`` compares it.
    package func hash(into hasher: inout Hasher) {
        hasher.combine(self.low)
        hasher.combine(self.high)
        hasher.combine(self.long?.string)
    }

    /// The bytes of `bytes` in `range` packed, if they are at most 15 ASCII bytes: a non-zero `high` unless the
    /// range is empty. Bytes past the range may be read (never past `bytes`), and are not kept.
    @inline(__always)
    static func packed(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>) -> (low: UInt64, high: UInt64)? {
        let count = range.count
        guard count <= 15 else { return nil }
        let low = Self.word(bytes, at: range.lowerBound, count: min(count, 8))
        let high = count > 8 ? Self.word(bytes, at: range.lowerBound &+ 8, count: count &- 8) : 0
        guard (low | high) & 0x8080_8080_8080_8080 == 0 else { return nil }
        return (low, high | UInt64(count) &<< 56)
    }

    /// The `count` (at most 8) bytes at `offset` in `bytes`, least significant first, the rest zero: one load
    /// where 8 bytes are there to read, else byte by byte.
    @inline(__always)
    private static func word(_ bytes: UnsafeRawBufferPointer, at offset: Int, count: Int) -> UInt64 {
        if offset &+ 8 <= bytes.count {
            let word = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
            return count == 8 ? word : word & ((1 &<< UInt64(count &* 8)) &- 1)
        }
        var word: UInt64 = 0
        var index = 0
        while index < count {
            word |= UInt64(bytes[offset &+ index]) &<< UInt64(index &* 8)
            index &+= 1
        }
        return word
    }

    /// The name as a `String`.
    package var string: String {
        if let long = self.long { return long.string }
        let count = Int(self.high &>> 56)
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 16) { buffer in
            for index in 0..<count {
                let word = index < 8 ? self.low : self.high
                buffer[index] = UInt8(truncatingIfNeeded: word &>> UInt64((index & 7) &* 8))
            }
            return String(decoding: UnsafeBufferPointer(rebasing: buffer[..<count]), as: UTF8.self)
        }
    }
}

/// An envelope a peer sent, read for the hot path: a `Request` (the common case) with its body left in the
/// frame, anything else decoded by SwiftProtobuf as a whole.
public enum InboundEnvelope: Sendable {
    /// A request.
    case request(InboundRequest)
    /// Any other message (`hello`, `plugin_reply`, or a kind clients do not send); its `kind` is never `nil`.
    ///
    /// Indirect: a generated message holds `Data`, whose layout is known only at run time, and a case holding one
    /// inline made every request's envelope built and taken apart through the run time's enum functions.
    indirect case other(Mentory_V1_Envelope)

    /// Reads one frame's payload.
    ///
    /// A frame holding a request is read by a bounds-checked reader that leaves the body in `frame`; it
    /// accepts exactly what SwiftProtobuf accepts, with the same values. Every other frame, and every frame
    /// that reader does not take (malformed, or using a rare encoding such as a group among the unknown fields),
    /// is decoded by SwiftProtobuf, so what is refused is refused with SwiftProtobuf's own reason.
    public init(frame: ByteBuffer) throws(MalformedMessageError) {
        try self.init(consuming: frame)
    }

    /// Reads one frame's payload, as ``init(frame:)`` does, taking the frame: a request's body is `frame` itself,
    /// narrowed to the body's bytes, so that no slice is made of it and the frame's storage is retained once, not
    /// twice. The server reads every frame this way.
    package init(consuming frame: consuming ByteBuffer) throws(MalformedMessageError) {
        if let fields = RequestFrameReader.fields(of: frame) {
            self = .request(RequestFrameReader.request(fields, in: consume frame))
            return
        }
        let envelope = try Mentory_V1_Envelope(frame: frame)
        if case .request(let request) = envelope.kind {
            self = .request(InboundRequest(request))
        } else {
            self = .other(envelope)
        }
    }
}

/// Reads an `Envelope` whose message is a `Request` straight from a frame, mirroring SwiftProtobuf's binary
/// decoder (1.39): it returns `nil` for everything it does not take, and ``InboundEnvelope`` then asks
/// SwiftProtobuf, which decides.
///
/// What it takes, as protobuf does: fields in any order; unknown fields (wire types varint, fixed64,
/// length-delimited and fixed32) skipped; a known field with another wire type skipped as an unknown one;
/// a field given twice taking its later value; the `request` field given twice merged. What it leaves to
/// SwiftProtobuf: any other `Envelope` kind anywhere in the frame, groups, and everything malformed
/// (varints of more than ten bytes, tags SwiftProtobuf refuses, lengths past the end, invalid UTF-8).
enum RequestFrameReader {
    /// The request's fields as read: plain values, so that reading them retains and releases nothing.
    fileprivate struct Fields {
        var id: UInt64 = 0
        var namespace = NameField()
        var method = NameField()
        var timeoutMs: UInt32 = 0
        /// The body's offset and length within the frame's readable bytes.
        var body: (offset: Int, length: Int) = (0, 0)
    }

    /// A name as read: packed (``RequestName``), or where its bytes are, for a name that is not (validated).
    fileprivate struct NameField {
        var low: UInt64 = 0
        var high: UInt64 = 0
        var unpacked: Range<Int>?

        /// The name, whose bytes are in `frame`'s readable bytes if it is not packed.
        func name(in frame: ByteBuffer) -> RequestName {
            guard let unpacked = self.unpacked else { return RequestName(packedLow: self.low, high: self.high) }
            let string = frame.getString(at: frame.readerIndex + unpacked.lowerBound, length: unpacked.count)
            return RequestName(unpacked: string ?? "")
        }
    }

    /// The fields of the request `frame` holds, or `nil` when this reader does not take it.
    fileprivate static func fields(of frame: ByteBuffer) -> Fields? {
        // Only plain values come out of the frame's bytes: anything else here was copied and destroyed several
        // times over.
        frame.withUnsafeReadableBytes { bytes in
            Self.canonicalFields(bytes) ?? Self.anyFields(bytes)
        }
    }

    /// The fields of a request laid out as every client of mentoryd writes one, read straight through: the
    /// envelope holds the `request` field (3) alone, and the request its fields in field-number order, each once at
    /// most, with names packed (``RequestName``). `nil` for any other layout, which ``anyFields(_:)`` then reads:
    /// what this takes, it reads as that does (the same cursor), so the two agree on every frame this takes.
    @inline(__always)
    private static func canonicalFields(_ bytes: UnsafeRawBufferPointer) -> Fields? {
        guard bytes.count > 1, bytes[0] == Tag.request else { return nil }
        var envelope = Cursor(bytes: bytes, index: 1, end: bytes.count)
        guard let request = envelope.fieldBody(), request.upperBound == bytes.count else { return nil }
        var cursor = Cursor(bytes: bytes, index: request.lowerBound, end: request.upperBound)
        var fields = Fields()
        if cursor.next(is: Tag.id) {
            guard let id = cursor.varint() else { return nil }
            fields.id = id
        }
        if cursor.next(is: Tag.namespace) {
            guard let range = cursor.fieldBody(), let packed = RequestName.packed(bytes, range) else { return nil }
            fields.namespace = NameField(low: packed.low, high: packed.high)
        }
        if cursor.next(is: Tag.method) {
            guard let range = cursor.fieldBody(), let packed = RequestName.packed(bytes, range) else { return nil }
            fields.method = NameField(low: packed.low, high: packed.high)
        }
        if cursor.next(is: Tag.body) {
            guard let range = cursor.fieldBody() else { return nil }
            fields.body = (range.lowerBound, range.count)
        }
        if cursor.next(is: Tag.timeout) {
            guard let timeout = cursor.varint() else { return nil }
            fields.timeoutMs = UInt32(truncatingIfNeeded: timeout)
        }
        return cursor.index == cursor.end ? fields : nil
    }

    /// The one-byte tags of the canonical layout (``canonicalFields(_:)``): field number and wire type.
    private enum Tag {
        /// `Envelope.request` (3), length-delimited.
        static let request: UInt8 = 3 << 3 | WireType.lengthDelimited
        /// `Request.id` (1), varint.
        static let id: UInt8 = 1 << 3 | WireType.varint
        /// `Request.namespace` (2), length-delimited.
        static let namespace: UInt8 = 2 << 3 | WireType.lengthDelimited
        /// `Request.method` (3), length-delimited.
        static let method: UInt8 = 3 << 3 | WireType.lengthDelimited
        /// `Request.body` (4), length-delimited.
        static let body: UInt8 = 4 << 3 | WireType.lengthDelimited
        /// `Request.timeout_ms` (5), varint.
        static let timeout: UInt8 = 5 << 3 | WireType.varint
    }

    /// The fields of the request in `bytes`, in any layout SwiftProtobuf reads, or `nil` when this reader leaves
    /// the frame to SwiftProtobuf.
    private static func anyFields(_ bytes: UnsafeRawBufferPointer) -> Fields? {
        var cursor = Cursor(bytes: bytes, index: 0, end: bytes.count)
        var fields: Fields?
        while cursor.index < cursor.end {
            guard let (number, wireType) = cursor.tag() else { return nil }
            switch (number, wireType) {
            case (3, WireType.lengthDelimited):
                guard let range = cursor.fieldBody() else { return nil }
                var request = fields ?? Fields()
                guard Self.readRequest(bytes, range, into: &request) else { return nil }
                fields = request
            case (1...8, WireType.lengthDelimited):
                // Another kind of envelope, now or before a request that replaces it: SwiftProtobuf's case.
                return nil
            default:
                guard cursor.skip(wireType) else { return nil }
            }
        }
        return fields
    }

    /// The request of `fields`, read from `frame`: its body is `frame` narrowed to the body's bytes.
    fileprivate static func request(_ fields: Fields, in frame: consuming ByteBuffer) -> InboundRequest {
        let namespace = fields.namespace.name(in: frame)
        let method = fields.method.name(in: frame)
        // Within the frame's readable bytes, as the reader checked every length.
        frame.moveReaderIndex(forwardBy: fields.body.offset)
        frame.moveWriterIndex(to: frame.readerIndex + fields.body.length)
        return InboundRequest(
            id: fields.id, namespaceName: namespace, methodName: method, timeoutMs: fields.timeoutMs, body: frame)
    }

    private static func readRequest(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>, into fields: inout Fields)
        -> Bool
    {
        var cursor = Cursor(bytes: bytes, index: range.lowerBound, end: range.upperBound)
        while cursor.index < cursor.end {
            guard let (number, wireType) = cursor.tag() else { return false }
            switch (number, wireType) {
            case (1, WireType.varint):
                guard let id = cursor.varint() else { return false }
                fields.id = id
            case (2, WireType.lengthDelimited):
                guard let range = cursor.fieldBody(), let namespace = Self.name(bytes, range) else { return false }
                fields.namespace = namespace
            case (3, WireType.lengthDelimited):
                guard let range = cursor.fieldBody(), let method = Self.name(bytes, range) else { return false }
                fields.method = method
            case (4, WireType.lengthDelimited):
                guard let range = cursor.fieldBody() else { return false }
                fields.body = (range.lowerBound, range.count)
            case (5, WireType.varint):
                guard let timeout = cursor.varint() else { return false }
                fields.timeoutMs = UInt32(truncatingIfNeeded: timeout)
            default:
                guard cursor.skip(wireType) else { return false }
            }
        }
        return true
    }

    /// The name in `range`, or `nil` if it is not valid UTF-8. A short ASCII name (namespaces and methods are)
    /// is packed from its bytes, with no `String` made (it is on every request's path).
    private static func name(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>) -> NameField? {
        if let packed = RequestName.packed(bytes, range) { return NameField(low: packed.low, high: packed.high) }
        guard String(validating: UnsafeRawBufferPointer(rebasing: bytes[range]), as: UTF8.self) != nil else {
            return nil
        }
        return NameField(unpacked: range)
    }
}

/// Protobuf wire types.
private enum WireType {
    static let varint: UInt8 = 0
    static let fixed64: UInt8 = 1
    static let lengthDelimited: UInt8 = 2
    static let fixed32: UInt8 = 5
}

/// A position in a message's bytes, never past `end`. Every read returns `nil` (or `false`) where
/// SwiftProtobuf's binary decoder would throw, or where this reader leaves the decision to it.
private struct Cursor {
    let bytes: UnsafeRawBufferPointer
    var index: Int
    let end: Int

    /// The next field's number and wire type, as SwiftProtobuf reads a tag: at most five bytes, the fifth at
    /// most 15, field number not 0, wire type 0-5. Groups (wire types 3 and 4) are left to SwiftProtobuf.
    mutating func tag() -> (number: Int, wireType: UInt8)? {
        let first = self.bytes[self.index]
        let wireType = first & 7
        guard
            wireType == WireType.varint || wireType == WireType.fixed64 || wireType == WireType.lengthDelimited
                || wireType == WireType.fixed32
        else { return nil }
        var number = Int(first & 0x7f) >> 3
        var position = self.index + 1
        var byte = first
        var shift = 4
        while byte & 0x80 != 0 {
            guard position < self.end, position - self.index < 5 else { return nil }
            byte = self.bytes[position]
            position += 1
            if position - self.index == 5, byte > 15 { return nil }
            number |= Int(byte & 0x7f) << shift
            shift += 7
        }
        guard number != 0 else { return nil }
        self.index = position
        return (number, wireType)
    }

    /// Moves past the next byte when it is `tag`, and says whether it was.
    @inline(__always)
    mutating func next(is tag: UInt8) -> Bool {
        guard self.index < self.end, self.bytes[self.index] == tag else { return false }
        self.index += 1
        return true
    }

    /// A varint as SwiftProtobuf reads one: at most ten bytes, the bits past 64 dropped.
    mutating func varint() -> UInt64? {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        var position = self.index
        while true {
            guard position < self.end, shift <= 63 else { return nil }
            let byte = self.bytes[position]
            position += 1
            value |= UInt64(byte & 0x7f) &<< shift
            if byte & 0x80 == 0 {
                self.index = position
                return value
            }
            shift += 7
        }
    }

    /// The range of a length-delimited field's body (string, bytes or message): under 2 GiB and within `end`.
    mutating func fieldBody() -> Range<Int>? {
        guard let length = self.varint(), length < 0x7fff_ffff, length <= UInt64(self.end - self.index) else {
            return nil
        }
        let start = self.index
        self.index += Int(length)
        return start..<self.index
    }

    /// Skips an unknown field's value.
    mutating func skip(_ wireType: UInt8) -> Bool {
        switch wireType {
        case WireType.varint:
            return self.varint() != nil
        case WireType.fixed64, WireType.fixed32:
            let size = wireType == WireType.fixed64 ? 8 : 4
            guard self.end - self.index >= size else { return false }
            self.index += size
            return true
        case WireType.lengthDelimited:
            guard let length = self.varint(), length <= UInt64(self.end - self.index) else { return false }
            self.index += Int(length)
            return true
        default:
            return false
        }
    }
}
