import CSystemd
import Logging

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A swift-log handler that writes structured entries to the systemd journal with
/// `sd_journal_sendv(3)`.
///
/// Each entry carries `MESSAGE`, `PRIORITY` (the syslog level), `SYSLOG_IDENTIFIER`,
/// `CODE_FILE`, `CODE_LINE`, `CODE_FUNC`, `LOGGER_LABEL` and one field per metadata key, its
/// name made a valid journal field name by ``JournalFieldName/make(fromMetadataKey:)``.
/// `journalctl -o json` shows them all; `journalctl CONNECTION=#3` filters on one.
public struct JournalLogHandler: LogHandler {
    /// The logger's label, sent as `LOGGER_LABEL`.
    public let label: String
    /// The program name journald files the entry under (`journalctl -t`).
    public let syslogIdentifier: String
    /// The lowest level logged.
    public var logLevel: Logger.Level = .info
    /// Metadata sent with every entry of this logger.
    public var metadata: Logger.Metadata = [:]
    /// Contextual metadata, merged under the entry's own.
    public var metadataProvider: Logger.MetadataProvider?

    /// A handler for the logger labelled `label`, filed under `syslogIdentifier`.
    public init(label: String, syslogIdentifier: String, metadataProvider: Logger.MetadataProvider? = nil) {
        self.label = label
        self.syslogIdentifier = syslogIdentifier
        self.metadataProvider = metadataProvider
    }

    /// One metadata value of this logger.
    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { self.metadata[key] }
        set { self.metadata[key] = newValue }
    }

    /// Sends `event` to the journal; if journald refuses it, writes the message to standard error.
    public func log(event: LogEvent) {
        var merged = self.metadata
        if let provided = self.metadataProvider?.get() {
            merged.merge(provided) { _, new in new }
        }
        if let metadata = event.metadata {
            merged.merge(metadata) { _, new in new }
        }
        let entry = JournalEntry(
            level: event.level,
            message: event.message.description,
            metadata: merged,
            label: self.label,
            syslogIdentifier: self.syslogIdentifier,
            file: event.file,
            function: event.function,
            line: event.line
        )
        entry.send()
    }
}

/// One journal entry as a list of `FIELD=value` pairs.
public struct JournalEntry: Sendable, Hashable {
    /// The fields in the order they are sent.
    public var fields: [JournalField]

    /// The entry for one log event.
    public init(
        level: Logger.Level,
        message: String,
        metadata: Logger.Metadata,
        label: String,
        syslogIdentifier: String,
        file: String,
        function: String,
        line: UInt
    ) {
        var fields = [
            JournalField(name: "MESSAGE", value: message),
            JournalField(name: "PRIORITY", value: String(JournalEntry.priority(of: level))),
            JournalField(name: "SYSLOG_IDENTIFIER", value: syslogIdentifier),
            JournalField(name: "CODE_FILE", value: file),
            JournalField(name: "CODE_LINE", value: String(line)),
            JournalField(name: "CODE_FUNC", value: function),
            JournalField(name: "LOGGER_LABEL", value: label),
        ]
        for key in metadata.keys.sorted() {
            fields.append(
                JournalField(name: JournalFieldName.make(fromMetadataKey: key), value: metadata[key]!.journalValue)
            )
        }
        self.fields = fields
    }

    /// The syslog priority journald stores for a swift-log level (`PRIORITY=`).
    public static func priority(of level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7  // LOG_DEBUG
        case .info: 6  // LOG_INFO
        case .notice: 5  // LOG_NOTICE
        case .warning: 4  // LOG_WARNING
        case .error: 3  // LOG_ERR
        case .critical: 2  // LOG_CRIT
        }
    }

    /// Sends the entry; if journald cannot take it, writes the message to standard error instead.
    func send() {
        var buffer: [UInt8] = []
        var ranges: [Range<Int>] = []
        ranges.reserveCapacity(self.fields.count)
        for field in self.fields {
            let start = buffer.count
            buffer.append(contentsOf: field.name.utf8)
            buffer.append(UInt8(ascii: "="))
            buffer.append(contentsOf: field.value.utf8)
            ranges.append(start..<buffer.count)
        }
        let result = buffer.withUnsafeMutableBytes { bytes in
            var vectors = ranges.map { range in
                iovec(iov_base: bytes.baseAddress! + range.lowerBound, iov_len: range.count)
            }
            return sd_journal_sendv(&vectors, Int32(vectors.count))
        }
        if result < 0 {
            let message = self.fields.first { $0.name == "MESSAGE" }?.value ?? ""
            let line = "journald refused a log entry (\(String(cString: strerror(-result)))): \(message)\n"
            _ = line.utf8CString.withUnsafeBufferPointer { write(STDERR_FILENO, $0.baseAddress, $0.count - 1) }
        }
    }
}

/// One `NAME=value` journal field.
public struct JournalField: Sendable, Hashable {
    /// The field name, e.g. `MESSAGE`; valid as ``JournalFieldName/isValid(_:)`` says.
    public var name: String
    /// The value; may hold any text, newlines included.
    public var value: String

    /// A field named `name` holding `value`.
    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}

/// Journal field names: what journald accepts and how metadata keys become them.
public enum JournalFieldName {
    /// The longest field name journald accepts.
    public static let maximumLength = 64

    /// The fields ``JournalEntry`` sets itself; a metadata key that maps onto one gets a `META_` prefix.
    public static let reserved: Set<String> = [
        "MESSAGE", "PRIORITY", "SYSLOG_IDENTIFIER", "CODE_FILE", "CODE_LINE", "CODE_FUNC", "LOGGER_LABEL",
    ]

    /// Whether journald accepts `name` from a client: 1 to 64 of `A-Z`, `0-9` and `_`, not starting
    /// with a digit or with `_` (which marks fields only journald itself may set).
    public static func isValid(_ name: String) -> Bool {
        guard let first = name.utf8.first, name.utf8.count <= self.maximumLength else { return false }
        guard first != UInt8(ascii: "_"), !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) else {
            return false
        }
        return name.utf8.allSatisfy { byte in
            (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                || byte == UInt8(ascii: "_")
        }
    }

    /// The journal field name for a swift-log metadata key.
    ///
    /// Letters are upper-cased, anything but `A-Z`, `0-9` and `_` becomes `_`, leading underscores
    /// are dropped, a name that would start with a digit or clash with ``reserved`` gets a `META_`
    /// prefix, an empty one becomes `META`, and the result is cut to 64 bytes. `request.id` becomes `REQUEST_ID`.
    public static func make(fromMetadataKey key: String) -> String {
        var bytes: [UInt8] = key.utf8.map { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"): byte - 32
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): byte
            default: UInt8(ascii: "_")
            }
        }
        bytes = Array(bytes.drop { $0 == UInt8(ascii: "_") })
        var name = String(decoding: bytes, as: UTF8.self)
        if name.isEmpty {
            name = "META"
        } else if (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[0]) || self.reserved.contains(name) {
            name = "META_" + name
        }
        if name.utf8.count > self.maximumLength {
            name = String(decoding: name.utf8.prefix(self.maximumLength), as: UTF8.self)
        }
        return name
    }
}

extension Logger.MetadataValue {
    /// The value as journal text: strings as they are, everything else as swift-log prints it.
    var journalValue: String {
        switch self {
        case .string(let string): string
        case .stringConvertible(let value): value.description
        default: self.description
        }
    }
}
