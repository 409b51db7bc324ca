import Foundation

/// The bounds of one transcoding.
public struct TranscodingLimits: Sendable, Equatable {
    /// The deepest nesting of messages (and of JSON arrays and objects) accepted.
    public var maxDepth: Int
    /// The largest protobuf binary input accepted, in bytes.
    public var maxBinaryBytes: Int
    /// The largest JSON input accepted, in bytes.
    public var maxJSONBytes: Int

    /// The default limits: depth 64 (`defaultMaxDepth`), 64 MiB of binary (the client's largest frame)
    /// and 128 MiB of JSON (base64 and escapes make JSON larger).
    public init(
        maxDepth: Int = TranscodingLimits.defaultMaxDepth,
        maxBinaryBytes: Int = 64 << 20,
        maxJSONBytes: Int = 128 << 20
    ) {
        self.maxDepth = maxDepth
        self.maxBinaryBytes = maxBinaryBytes
        self.maxJSONBytes = maxJSONBytes
    }

    /// The default nesting limit.
    public static let defaultMaxDepth = 64
}

/// A map key: the integer, boolean and string types protobuf allows.
enum MapKey: Hashable, Comparable, Sendable {
    case bool(Bool)
    case signed(Int64)
    case unsigned(UInt64)
    case string(String)

    static func < (lhs: MapKey, rhs: MapKey) -> Bool {
        switch (lhs, rhs) {
        case (.bool(let a), .bool(let b)): !a && b
        case (.signed(let a), .signed(let b)): a < b
        case (.unsigned(let a), .unsigned(let b)): a < b
        case (.string(let a), .string(let b)): a < b
        default: false
        }
    }
}

/// One decoded value of a field.
indirect enum ProtoValue: Sendable, Equatable {
    case signed(Int64)  // int32, int64, sint*, sfixed*
    case unsigned(UInt64)  // uint32, uint64, fixed*
    case float(Float)
    case double(Double)
    case bool(Bool)
    case string(String)
    case bytes(Data)
    case enumeration(Int32)
    case message(DynamicMessage)
}

/// A field's decoded content.
enum FieldValue: Sendable, Equatable {
    case single(ProtoValue)
    case list([ProtoValue])
    case map([MapKey: ProtoValue])
}

/// A message of a type known only from its descriptor: its fields by number.
struct DynamicMessage: Sendable, Equatable {
    var fields: [Int32: FieldValue] = [:]
}

extension ProtoValue {
    /// Whether this is the field type's default (zero) value, which proto3 leaves out.
    var isDefault: Bool {
        switch self {
        case .signed(let value): value == 0
        case .unsigned(let value): value == 0
        case .float(let value): value == 0 && value.sign == .plus
        case .double(let value): value == 0 && value.sign == .plus
        case .bool(let value): !value
        case .string(let value): value.isEmpty
        case .bytes(let value): value.isEmpty
        case .enumeration(let value): value == 0
        case .message: false
        }
    }

    /// The map key this value makes.
    var mapKey: MapKey? {
        switch self {
        case .signed(let value): .signed(value)
        case .unsigned(let value): .unsigned(value)
        case .bool(let value): .bool(value)
        case .string(let value): .string(value)
        default: nil
        }
    }

    /// The default value of a field of `kind`.
    static func zero(of kind: FieldKind) -> ProtoValue {
        switch kind {
        case .int32, .int64, .sint32, .sint64, .sfixed32, .sfixed64: .signed(0)
        case .uint32, .uint64, .fixed32, .fixed64: .unsigned(0)
        case .float: .float(0)
        case .double: .double(0)
        case .bool: .bool(false)
        case .string: .string("")
        case .bytes: .bytes(Data())
        case .enumeration: .enumeration(0)
        case .message, .group: .message(DynamicMessage())
        }
    }
}

extension MapKey {
    var value: ProtoValue {
        switch self {
        case .bool(let value): .bool(value)
        case .signed(let value): .signed(value)
        case .unsigned(let value): .unsigned(value)
        case .string(let value): .string(value)
        }
    }
}
