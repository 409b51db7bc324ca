import MentoryWire

/// The `code` label of `mentoryd_requests_total`: `OK`, or the error code's name as
/// mentory.proto declares it without its `ERROR_CODE_` prefix (`INVALID_ARGUMENT`, `NOT_FOUND`, …).
public enum ResultCodeLabel {
    /// The label of a successful request.
    public static let ok = "OK"
    /// The label of a code mentory.proto does not declare.
    public static let unknown = "unknown"

    /// The label of error code `code`; ``ok`` for 0.
    public static func label(_ code: UInt32) -> String {
        code == 0 ? Self.ok : Self.names[code] ?? Self.unknown
    }

    /// Whether `code` is 0 or an `ErrorCode` mentory.proto declares.
    public static func isDeclared(_ code: UInt32) -> Bool {
        code == 0 || Self.names[code] != nil
    }

    /// The names of `ErrorCode`, read once from the schema's embedded descriptors (one source of truth).
    static let names: [UInt32: String] = {
        let prefix = "ERROR_CODE_"
        var names: [UInt32: String] = [:]
        for file in MentorySchema.fileDescriptors.files where file.package == "mentory.v1" {
            for value in file.enumType.first(where: { $0.name == "ErrorCode" })?.value ?? [] where value.number > 0 {
                names[UInt32(value.number)] =
                    value.name.hasPrefix(prefix) ? String(value.name.dropFirst(prefix.count)) : value.name
            }
        }
        return names
    }()
}
