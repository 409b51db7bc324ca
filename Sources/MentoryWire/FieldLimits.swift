/// One documented bound on a request field: a length in UTF-8 bytes or a count of items.
///
/// Every limit is declared once, in ``FieldLimits`` (the protocol's here, the built-in domain's in
/// MentoryDomain's extension of it); the handlers check requests against it, and the table in
/// docs/PROTOCOL.md is MentoryDomain's `FieldLimits.markdownTable` (a test keeps them equal).
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

    package init(_ field: String, _ maximum: Int, _ unit: Unit, checkedBy: String) {
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
/// The protocol's own limits are declared here; the built-in domain's (diary, mentor, reachability)
/// in MentoryDomain's extension of this enum. Together they bound the largest diary entry and mentor
/// state, so that a reply holding one of them always fits a frame (see ``ReplyBudget``).
public enum FieldLimits {
    /// The name a client gives in its `Hello`.
    public static let clientName = FieldLimit("Hello.client_name", 128, .bytes, checkedBy: "the handshake")

    /// The protocol's own limits, in the order of the documentation's table, where they follow the built-in
    /// domain's (MentoryDomain's `FieldLimits.domain`; MentoryDomain's `FieldLimits.all` is the whole table).
    public static let protocolLimits: [FieldLimit] = [clientName]

    /// `limits` as the table docs/PROTOCOL.md shows between its `field-limits` markers.
    public static func markdownTable(listing limits: [FieldLimit]) -> String {
        var lines = ["| field | limit | checked by |", "| --- | --- | --- |"]
        for limit in limits {
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
