import SwiftProtobuf

/// The scalar and composite types a protobuf field can have.
public enum FieldKind: Sendable, Equatable {
    case double, float, int64, uint64, int32, fixed64, fixed32, bool, string, bytes, uint32, sfixed32, sfixed64
    case sint32, sint64
    /// An enum, by its full name (no leading dot).
    case enumeration(String)
    /// A message, by its full name (no leading dot).
    case message(String)
    /// A proto2 group, by its full name; groups are decoded as unknown data and cannot be written.
    case group(String)

    /// Whether a repeated field of this kind may be packed.
    var isPackable: Bool {
        switch self {
        case .string, .bytes, .message, .group: false
        default: true
        }
    }
}

/// One field of a message.
public struct FieldDescriptor: Sendable {
    /// The field's name in the .proto file, e.g. `record_date`.
    public let name: String
    /// The field's proto3 JSON name, e.g. `recordDate`.
    public let jsonName: String
    /// The field number.
    public let number: Int32
    /// The field's type.
    public let kind: FieldKind
    /// Whether the field is `repeated` (maps are repeated too; see ``DescriptorPool/mapEntry(of:)``).
    public let isRepeated: Bool
    /// Whether absence is distinguishable from the default value (message fields, oneof members,
    /// proto3 `optional`, proto2 singular fields).
    public let hasPresence: Bool
    /// The index of the (real, not synthetic) oneof the field belongs to, in ``MessageDescriptor/oneofs``.
    public let oneofIndex: Int?
    /// Whether a repeated scalar is written packed.
    let isPacked: Bool
    /// Whether an unknown enum number is rejected (closed, proto2 enums).
    let enumIsClosed: Bool
}

/// One message type.
public struct MessageDescriptor: Sendable {
    /// The full name, e.g. `mentory.v1.DiaryAddRequest`.
    public let fullName: String
    /// The fields in field-number order.
    public let fields: [FieldDescriptor]
    /// The names of the message's real oneofs (proto3 `optional`'s synthetic oneofs are left out).
    public let oneofs: [String]
    /// Whether this is the synthetic entry message of a map field.
    public let isMapEntry: Bool

    let byNumber: [Int32: Int]
    let byJSONName: [String: Int]

    /// The field with `number`.
    public func field(number: Int32) -> FieldDescriptor? {
        self.byNumber[number].map { self.fields[$0] }
    }

    /// The field with this JSON name or .proto name.
    public func field(named name: String) -> FieldDescriptor? {
        self.byJSONName[name].map { self.fields[$0] }
    }
}

/// One enum type.
public struct EnumDescriptor: Sendable {
    /// The full name, e.g. `mentory.v1.Emotion`.
    public let fullName: String
    /// The values in declaration order.
    public let values: [(name: String, number: Int32)]
    /// Whether numbers outside ``values`` are rejected (proto2 enums).
    public let isClosed: Bool

    let byName: [String: Int32]
    let byNumber: [Int32: String]

    /// The name of `number`, if the enum declares it (the first name, for aliases).
    public func name(of number: Int32) -> String? { self.byNumber[number] }

    /// The number named `name`.
    public func number(of name: String) -> Int32? { self.byName[name] }
}

/// The message and enum types of a `google.protobuf.FileDescriptorSet`, resolved and checked, with
/// protobuf binary <-> proto3 JSON transcoding for any message among them.
///
/// Building checks that every field's type is defined, so transcoding never meets a dangling name.
/// Extensions and groups are not supported: extension fields are skipped like unknown fields.
public struct DescriptorPool: Sendable {
    private var messages: [String: MessageDescriptor] = [:]
    private var enums: [String: EnumDescriptor] = [:]
    /// The bounds every transcoding through this pool observes.
    public var limits: TranscodingLimits

    /// Builds a pool from a descriptor set, such as `session.describe`'s `descriptors`.
    public init(
        _ set: Google_Protobuf_FileDescriptorSet,
        limits: TranscodingLimits = TranscodingLimits()
    ) throws(DescriptorError) {
        try self.init(files: set.file, limits: limits)
    }

    /// Builds a pool from file descriptors, in any order. A file name given twice is read once.
    public init(
        files: [Google_Protobuf_FileDescriptorProto],
        limits: TranscodingLimits = TranscodingLimits()
    ) throws(DescriptorError) {
        self.limits = limits
        var seenFiles: Set<String> = []
        var pending:
            [(file: Google_Protobuf_FileDescriptorProto, message: Google_Protobuf_DescriptorProto, name: String)] =
                []
        var enumClosed: [String: Bool] = [:]
        for file in files where seenFiles.insert(file.name).inserted {
            let syntax = Syntax(file)
            let prefix = file.package.isEmpty ? "" : file.package + "."
            for enumType in file.enumType {
                try self.addEnum(enumType, fullName: prefix + enumType.name, syntax: syntax, closed: &enumClosed)
            }
            var stack = file.messageType.map { (prefix + $0.name, $0) }
            while let (name, message) = stack.popLast() {
                guard self.messages[name] == nil, !pending.contains(where: { $0.name == name }) else {
                    throw DescriptorError(.invalidDescriptors, "message \(name) is defined twice (file \(file.name))")
                }
                pending.append((file, message, name))
                for nested in message.enumType {
                    try self.addEnum(nested, fullName: name + "." + nested.name, syntax: syntax, closed: &enumClosed)
                }
                stack += message.nestedType.map { (name + "." + $0.name, $0) }
            }
        }
        let messageNames = Set(pending.map(\.name))
        for (file, message, name) in pending {
            self.messages[name] = try Self.resolve(
                message, fullName: name, syntax: Syntax(file), messageNames: messageNames, enumClosed: enumClosed)
        }
    }

    /// The full names of every message in the pool, sorted.
    public var messageNames: [String] { self.messages.keys.sorted() }

    /// The message named `fullName` (with or without a leading dot).
    public func message(named fullName: String) -> MessageDescriptor? {
        self.messages[Self.trimDot(fullName)]
    }

    /// The enum named `fullName` (with or without a leading dot).
    public func enumType(named fullName: String) -> EnumDescriptor? {
        self.enums[Self.trimDot(fullName)]
    }

    /// The message or an ``DescriptorError/Kind/unknownMessage`` error.
    func requireMessage(_ fullName: String) throws(DescriptorError) -> MessageDescriptor {
        guard let message = self.message(named: fullName) else {
            throw DescriptorError(
                .unknownMessage, "the descriptors define no message '\(Self.trimDot(fullName))'")
        }
        return message
    }

    /// The entry message of a map field, when `field` is one.
    public func mapEntry(of field: FieldDescriptor) -> MessageDescriptor? {
        guard field.isRepeated, case .message(let name) = field.kind, let entry = self.messages[name],
            entry.isMapEntry
        else { return nil }
        return entry
    }

    private static func trimDot(_ name: String) -> String {
        name.hasPrefix(".") ? String(name.dropFirst()) : name
    }

    private mutating func addEnum(
        _ proto: Google_Protobuf_EnumDescriptorProto,
        fullName: String,
        syntax: Syntax,
        closed: inout [String: Bool]
    ) throws(DescriptorError) {
        guard self.enums[fullName] == nil else {
            throw DescriptorError(.invalidDescriptors, "enum \(fullName) is defined twice")
        }
        var byName: [String: Int32] = [:]
        var byNumber: [Int32: String] = [:]
        for value in proto.value {
            byName[value.name] = value.number
            if byNumber[value.number] == nil { byNumber[value.number] = value.name }
        }
        let isClosed = syntax.enumsAreClosed(proto.options)
        closed[fullName] = isClosed
        self.enums[fullName] = EnumDescriptor(
            fullName: fullName,
            values: proto.value.map { ($0.name, $0.number) },
            isClosed: isClosed,
            byName: byName,
            byNumber: byNumber
        )
    }

    private static func resolve(
        _ proto: Google_Protobuf_DescriptorProto,
        fullName: String,
        syntax: Syntax,
        messageNames: Set<String>,
        enumClosed: [String: Bool]
    ) throws(DescriptorError) -> MessageDescriptor {
        // Synthetic oneofs (proto3 `optional`) are not oneofs for JSON's purposes.
        var synthetic: Set<Int32> = []
        for field in proto.field where field.proto3Optional && field.hasOneofIndex {
            synthetic.insert(field.oneofIndex)
        }
        var realOneofs: [Int32: Int] = [:]
        var oneofNames: [String] = []
        for (index, oneof) in proto.oneofDecl.enumerated() where !synthetic.contains(Int32(index)) {
            realOneofs[Int32(index)] = oneofNames.count
            oneofNames.append(oneof.name)
        }
        var fields: [FieldDescriptor] = []
        for field in proto.field {
            let typeName = Self.trimDot(field.typeName)
            let kind: FieldKind
            switch field.type {
            case .double: kind = .double
            case .float: kind = .float
            case .int64: kind = .int64
            case .uint64: kind = .uint64
            case .int32: kind = .int32
            case .fixed64: kind = .fixed64
            case .fixed32: kind = .fixed32
            case .bool: kind = .bool
            case .string: kind = .string
            case .bytes: kind = .bytes
            case .uint32: kind = .uint32
            case .sfixed32: kind = .sfixed32
            case .sfixed64: kind = .sfixed64
            case .sint32: kind = .sint32
            case .sint64: kind = .sint64
            case .enum:
                guard enumClosed[typeName] != nil else {
                    throw DescriptorError(
                        .invalidDescriptors,
                        "field \(fullName).\(field.name) has type \(field.typeName), "
                            + "which the descriptors do not define")
                }
                kind = .enumeration(typeName)
            case .message, .group:
                guard messageNames.contains(typeName) else {
                    throw DescriptorError(
                        .invalidDescriptors,
                        "field \(fullName).\(field.name) has type \(field.typeName), "
                            + "which the descriptors do not define")
                }
                kind = field.type == .group ? .group(typeName) : .message(typeName)
            }
            let isRepeated = field.label == .repeated
            let oneofIndex = field.hasOneofIndex ? realOneofs[field.oneofIndex] : nil
            let hasPresence: Bool
            if isRepeated {
                hasPresence = false
            } else if oneofIndex != nil || field.proto3Optional {
                hasPresence = true
            } else if case .message = kind {
                hasPresence = true
            } else {
                hasPresence = syntax.explicitPresence(field.options)
            }
            let enumIsClosed = if case .enumeration(let name) = kind { enumClosed[name] ?? false } else { false }
            fields.append(
                FieldDescriptor(
                    name: field.name,
                    jsonName: field.hasJsonName ? field.jsonName : Self.lowerCamelCase(field.name),
                    number: field.number,
                    kind: kind,
                    isRepeated: isRepeated,
                    hasPresence: hasPresence,
                    oneofIndex: oneofIndex,
                    isPacked: isRepeated && kind.isPackable && syntax.packed(field.options),
                    enumIsClosed: enumIsClosed
                ))
        }
        fields.sort { $0.number < $1.number }
        var byNumber: [Int32: Int] = [:]
        var byJSONName: [String: Int] = [:]
        for (index, field) in fields.enumerated() {
            guard byNumber[field.number] == nil else {
                throw DescriptorError(.invalidDescriptors, "\(fullName) has two fields numbered \(field.number)")
            }
            byNumber[field.number] = index
            byJSONName[field.jsonName] = index
            byJSONName[field.name] = index
        }
        return MessageDescriptor(
            fullName: fullName,
            fields: fields,
            oneofs: oneofNames,
            isMapEntry: proto.options.mapEntry,
            byNumber: byNumber,
            byJSONName: byJSONName
        )
    }

    /// protoc's default JSON name: underscores dropped, the letter after each one upper-cased.
    static func lowerCamelCase(_ name: String) -> String {
        var result = ""
        var upperNext = false
        for character in name {
            if character == "_" {
                upperNext = true
            } else if upperNext {
                result += character.uppercased()
                upperNext = false
            } else {
                result.append(character)
            }
        }
        return result
    }
}

/// The rules of a file's syntax (proto2, proto3 or editions) that transcoding depends on.
private struct Syntax {
    enum Kind { case proto2, proto3, editions }
    let kind: Kind
    let features: Google_Protobuf_FeatureSet?

    init(_ file: Google_Protobuf_FileDescriptorProto) {
        switch file.syntax {
        case "proto3": self.kind = .proto3
        case "editions": self.kind = .editions
        default: self.kind = .proto2
        }
        self.features = file.options.hasFeatures ? file.options.features : nil
    }

    func explicitPresence(_ options: Google_Protobuf_FieldOptions) -> Bool {
        switch self.kind {
        case .proto2: return true
        case .proto3: return false
        case .editions:
            let presence =
                options.features.hasFieldPresence ? options.features.fieldPresence : self.features?.fieldPresence
            return presence != .implicit
        }
    }

    func packed(_ options: Google_Protobuf_FieldOptions) -> Bool {
        switch self.kind {
        case .proto2: return options.packed
        case .proto3: return options.hasPacked ? options.packed : true
        case .editions:
            let encoding =
                options.features.hasRepeatedFieldEncoding
                ? options.features.repeatedFieldEncoding : self.features?.repeatedFieldEncoding
            return encoding != .expanded
        }
    }

    func enumsAreClosed(_ options: Google_Protobuf_EnumOptions) -> Bool {
        switch self.kind {
        case .proto2: return true
        case .proto3: return false
        case .editions:
            let type = options.features.hasEnumType ? options.features.enumType : self.features?.enumType
            return type == .closed
        }
    }
}
