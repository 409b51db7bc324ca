#if canImport(Glibc)
    import Glibc
#endif

/// One documented bound on a request field: a length in UTF-8 bytes or a count of items.
///
/// Every limit is declared once, in ``FieldLimits``; the handlers check requests against it,
/// and the table in docs/PROTOCOL.md is ``FieldLimits/markdownTable`` (a test keeps them equal).
public struct FieldLimit: Sendable, Hashable {
    /// What a limit counts.
    public enum Unit: String, Sendable {
        /// The UTF-8 encoding's length.
        case bytes = "UTF-8 bytes"
        /// The number of elements of a repeated field.
        case items = "items"
    }

    /// The field as docs/PROTOCOL.md names it, e.g. `DiaryAddRequest.title`.
    public let field: String
    /// The largest accepted value.
    public let maximum: Int
    /// What ``maximum`` counts.
    public let unit: Unit
    /// Which methods check it.
    public let checkedBy: String

    init(_ field: String, _ maximum: Int, _ unit: Unit, checkedBy: String) {
        self.field = field
        self.maximum = maximum
        self.unit = unit
        self.checkedBy = checkedBy
    }

    /// Throws ``MentoryError/invalidArgument(_:)`` naming the field, the size and the limit when
    /// `text` is longer than ``maximum`` UTF-8 bytes.
    public func check(_ text: String, field name: String? = nil) throws(MentoryError) {
        try self.check(size: text.utf8.count, field: name)
    }

    /// Throws ``MentoryError/invalidArgument(_:)`` when `count` items are more than ``maximum``.
    public func check(count: Int, field name: String? = nil) throws(MentoryError) {
        try self.check(size: count, field: name)
    }

    private func check(size: Int, field name: String?) throws(MentoryError) {
        guard size > self.maximum else { return }
        throw .invalidArgument(
            "\(name ?? self.field) has \(size) \(self.unit.rawValue), over the limit of \(self.maximum)"
        )
    }
}

/// The limits on request fields. Requests breaking one are refused with code 8 (`INVALID_ARGUMENT`).
///
/// Together they bound the largest diary entry and mentor state, so that a reply holding one of
/// them always fits a frame (see ``ReplyBudget``).
public enum FieldLimits {
    /// A diary entry's title.
    public static let diaryTitle = FieldLimit("DiaryAddRequest.title", 256, .bytes, checkedBy: "diary.add")
    /// A diary entry's text.
    public static let diaryText = FieldLimit("DiaryAddRequest.text", 65_536, .bytes, checkedBy: "diary.add")
    /// A diary entry's analysis.
    public static let diaryAnalysis = FieldLimit(
        "DiaryAddRequest.analysis", 16_384, .bytes, checkedBy: "diary.add")
    /// The mentor message's content.
    public static let mentorContent = FieldLimit(
        "MentorSetRequest.content", 16_384, .bytes, checkedBy: "mentor.set")
    /// The action items of one diary entry or mentor message.
    public static let actionItemCount = FieldLimit(
        "action_items (DiaryAddRequest, MentorSetRequest)", 32, .items, checkedBy: "diary.add, mentor.set")
    /// One action item's text.
    public static let actionItemText = FieldLimit(
        "ActionItem.text", 512, .bytes, checkedBy: "diary.add, mentor.set")
    /// Every id a request carries: entry ids, action item ids.
    public static let id = FieldLimit(
        "ActionItem.id and every id field of a request", 64, .bytes,
        checkedBy: "diary.*, mentor.set, mentor.completeTodo")
    /// A peer's name.
    public static let peerName = FieldLimit("PeerState.peer", 64, .bytes, checkedBy: "reachability.report")
    /// The distinct peers the daemon keeps; a report naming a new peer past it is refused.
    public static let peerCount = FieldLimit(
        "peers known to reachability", 64, .items, checkedBy: "reachability.report")
    /// The name a client gives in its `Hello`.
    public static let clientName = FieldLimit("Hello.client_name", 128, .bytes, checkedBy: "the handshake")

    /// Every limit, in the order of the documentation's table.
    public static let all: [FieldLimit] = [
        diaryTitle, diaryText, diaryAnalysis, mentorContent, actionItemCount, actionItemText, id, peerName,
        peerCount, clientName,
    ]

    /// The table docs/PROTOCOL.md shows between its `field-limits` markers.
    public static var markdownTable: String {
        var lines = ["| field | limit | checked by |", "| --- | --- | --- |"]
        for limit in self.all {
            lines.append("| `\(limit.field)` | \(limit.maximum) \(limit.unit.rawValue) | \(limit.checkedBy) |")
        }
        return lines.joined(separator: "\n")
    }

    /// `value` for an error message: quoted, and cut to at most 64 bytes so that an error reply
    /// never echoes a large request back.
    public static func quoted(_ value: String) -> String {
        guard value.utf8.count > 64 else { return "'\(value)'" }
        var cut = ""
        for character in value {
            guard cut.utf8.count + character.utf8.count <= 60 else { break }
            cut.append(character)
        }
        return "'\(cut)…' (\(value.utf8.count) bytes)"
    }
}

/// How much of a frame a reply or event body may fill.
///
/// A body travels inside an `Envelope` (a `Response` or an `Event`), whose other fields and
/// length prefixes take at most ``envelopeReserve`` bytes; so a body of at most
/// `maxFrameLength - envelopeReserve` bytes always makes a frame the peer accepts.
public enum ReplyBudget {
    /// Bytes of every frame kept for the envelope around a body (measured need: under 64).
    public static let envelopeReserve = 256

    /// The largest body a frame of `maxFrameLength` bytes carries.
    public static func bodyBytes(maxFrameLength: Int) -> Int {
        maxFrameLength - self.envelopeReserve
    }

    /// The largest body with the default frame length (1 MiB).
    public static let defaultBodyBytes = bodyBytes(maxFrameLength: WireProtocol.defaultMaxFrameLength)

    /// The smallest `limits.maxFrameLength` with which every reply fits: one largest diary entry
    /// (every field at its limit) with room to spare.
    public static let minimumMaxFrameLength = 256 * 1024
}

/// Identifiers of diary entries and action items: lowercase UUIDs.
public enum EntityID {
    /// A fresh random (version 4) UUID in lowercase, from the system's generator (`getrandom(2)`
    /// on Linux; no file is opened).
    public static func random() -> String {
        self.format(self.stamped(self.randomBytes(), version: 4))
    }

    /// A fresh time-ordered (version 7, RFC 9562) UUID in lowercase: the first 48 bits are
    /// `unixMilliseconds`, the other 74 free bits random, from the system's generator.
    ///
    /// Ids made one after another sort after each other, so the store adds each new entry at the
    /// right edge of its id index instead of at a random page of it.
    public static func timeOrdered(unixMilliseconds: Int64) -> String {
        var bytes = self.randomBytes()
        let milliseconds = UInt64(max(0, unixMilliseconds)) & 0xFFFF_FFFF_FFFF
        for index in 0..<6 {
            bytes[index] = UInt8(truncatingIfNeeded: milliseconds >> (8 * (5 - index)))
        }
        return self.format(self.stamped(bytes, version: 7))
    }

    /// 16 random bytes from the system's generator: one `getrandom(2)` call on Linux (through
    /// `getentropy`), no file opened.
    private static func randomBytes() -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: 16)
        #if canImport(Glibc)
            // getentropy(3) is one getrandom(2) call for up to 256 bytes, never a partial fill.
            if bytes.withUnsafeMutableBytes({ getentropy($0.baseAddress, $0.count) }) == 0 {
                return bytes
            }
        #endif
        var generator = SystemRandomNumberGenerator()
        for half in 0..<2 {
            withUnsafeBytes(of: generator.next() as UInt64) {
                bytes.replaceSubrange((8 * half)..<(8 * half + 8), with: $0)
            }
        }
        return bytes
    }

    /// `bytes` with the UUID version nibble set to `version` and the RFC 9562 variant bits.
    private static func stamped(_ bytes: [UInt8], version: UInt8) -> [UInt8] {
        var bytes = bytes
        bytes[6] = (bytes[6] & 0x0F) | (version << 4)
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        return bytes
    }

    /// The canonical form of a UUID written 8-4-4-4-12 in hexadecimal digits of either case:
    /// the same in lowercase. `nil` when `text` is not a UUID.
    public static func canonical(_ text: String) -> String? {
        let utf8 = Array(text.utf8)
        guard utf8.count == 36 else { return nil }
        var result: [UInt8] = []
        result.reserveCapacity(36)
        for (index, byte) in utf8.enumerated() {
            if index == 8 || index == 13 || index == 18 || index == 23 {
                guard byte == UInt8(ascii: "-") else { return nil }
                result.append(byte)
                continue
            }
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"):
                result.append(byte)
            case UInt8(ascii: "A")...UInt8(ascii: "F"):
                result.append(byte + 32)
            default:
                return nil
            }
        }
        return String(decoding: result, as: UTF8.self)
    }

    /// An id as the store keys it: a UUID in canonical form, anything else unchanged.
    public static func normalized(_ text: String) -> String {
        self.canonical(text) ?? text
    }

    private static func format(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var result: [UInt8] = []
        result.reserveCapacity(36)
        for (index, byte) in bytes.enumerated() {
            if index == 4 || index == 6 || index == 8 || index == 10 { result.append(UInt8(ascii: "-")) }
            result.append(digits[Int(byte >> 4)])
            result.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: result, as: UTF8.self)
    }
}
