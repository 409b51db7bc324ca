import Foundation

// Protobuf binary wire format <-> DynamicMessage, driven by a MessageDescriptor.

private enum WireType: UInt64 {
    case varint = 0
    case fixed64 = 1
    case lengthDelimited = 2
    case startGroup = 3
    case endGroup = 4
    case fixed32 = 5
}

extension FieldKind {
    fileprivate var wireType: WireType {
        switch self {
        case .int32, .int64, .uint32, .uint64, .sint32, .sint64, .bool, .enumeration: .varint
        case .fixed64, .sfixed64, .double: .fixed64
        case .fixed32, .sfixed32, .float: .fixed32
        case .string, .bytes, .message: .lengthDelimited
        case .group: .startGroup
        }
    }
}

/// Reads the wire format from a byte buffer.
struct BinaryReader {
    private let bytes: [UInt8]
    private var position: Int
    private let end: Int
    private let pool: DescriptorPool

    init(bytes: [UInt8], pool: DescriptorPool) {
        self.bytes = bytes
        self.position = 0
        self.end = bytes.count
        self.pool = pool
    }

    mutating func decodeMessage(_ type: MessageDescriptor, depth: Int) throws(DescriptorError) -> DynamicMessage {
        try self.decodeMessage(type, until: self.end, depth: depth)
    }

    private mutating func decodeMessage(
        _ type: MessageDescriptor, until limit: Int, depth: Int
    ) throws(DescriptorError) -> DynamicMessage {
        guard depth <= self.pool.limits.maxDepth else {
            throw DescriptorError(
                .limitExceeded,
                "\(type.fullName) is nested more than \(self.pool.limits.maxDepth) messages deep")
        }
        var message = DynamicMessage()
        while self.position < limit {
            let tag = try self.varint(limit, type)
            let number = tag >> 3
            guard let wireType = WireType(rawValue: tag & 7), number > 0, number <= 536_870_911 else {
                throw self.malformed(type, "an invalid tag \(tag)")
            }
            guard let field = type.field(number: Int32(number)) else {
                try self.skip(wireType, number: number, limit, type, depth: depth)
                continue
            }
            try self.decodeField(field, wireType: wireType, into: &message, in: type, limit: limit, depth: depth)
        }
        guard self.position == limit else { throw self.malformed(type, "a field that runs past its end") }
        return message
    }

    private mutating func decodeField(
        _ field: FieldDescriptor,
        wireType: WireType,
        into message: inout DynamicMessage,
        in type: MessageDescriptor,
        limit: Int,
        depth: Int
    ) throws(DescriptorError) {
        if case .group = field.kind {
            // Groups are not supported; their content is skipped like an unknown field's.
            try self.skip(wireType, number: UInt64(field.number), limit, type, depth: depth)
            return
        }
        if let entry = self.pool.mapEntry(of: field) {
            guard wireType == .lengthDelimited else { throw self.wrongWireType(field, wireType, type) }
            let length = try self.length(limit, type)
            let decoded = try self.decodeMessage(entry, until: self.position + length, depth: depth + 1)
            guard let keyField = entry.field(number: 1), let valueField = entry.field(number: 2) else {
                throw self.malformed(type, "a map entry type \(entry.fullName) without key and value fields")
            }
            let key = Self.single(decoded.fields[1]) ?? .zero(of: keyField.kind)
            let value = Self.single(decoded.fields[2]) ?? .zero(of: valueField.kind)
            guard let mapKey = key.mapKey else { throw self.malformed(type, "a map key of an invalid type") }
            var map: [MapKey: ProtoValue] = [:]
            if case .map(let existing) = message.fields[field.number] { map = existing }
            map[mapKey] = value
            message.fields[field.number] = .map(map)
            return
        }
        if field.isRepeated {
            var list: [ProtoValue] = []
            if case .list(let existing) = message.fields[field.number] { list = existing }
            if wireType == .lengthDelimited, field.kind.isPackable {
                let packedLength = try self.length(limit, type)
                let packedEnd = self.position + packedLength
                while self.position < packedEnd {
                    list.append(try self.scalar(field, field.kind.wireType, in: type, limit: packedEnd, depth: depth))
                }
            } else {
                guard wireType == field.kind.wireType else { throw self.wrongWireType(field, wireType, type) }
                list.append(try self.scalar(field, wireType, in: type, limit: limit, depth: depth))
            }
            message.fields[field.number] = .list(list)
            return
        }
        guard wireType == field.kind.wireType else { throw self.wrongWireType(field, wireType, type) }
        var value = try self.scalar(field, wireType, in: type, limit: limit, depth: depth)
        // A singular message given twice is merged, as protobuf specifies.
        if case .message(let later) = value, case .single(.message(var earlier))? = message.fields[field.number] {
            earlier.merge(later)
            value = .message(earlier)
        }
        if let oneof = field.oneofIndex {
            for other in type.fields where other.oneofIndex == oneof && other.number != field.number {
                message.fields[other.number] = nil
            }
        }
        message.fields[field.number] = .single(value)
    }

    private static func single(_ value: FieldValue?) -> ProtoValue? {
        if case .single(let value)? = value { return value }
        return nil
    }

    private mutating func scalar(
        _ field: FieldDescriptor,
        _ wireType: WireType,
        in type: MessageDescriptor,
        limit: Int,
        depth: Int
    ) throws(DescriptorError) -> ProtoValue {
        switch field.kind {
        case .int32: return .signed(Int64(Int32(truncatingIfNeeded: try self.varint(limit, type))))
        case .int64: return .signed(Int64(bitPattern: try self.varint(limit, type)))
        case .uint32: return .unsigned(UInt64(UInt32(truncatingIfNeeded: try self.varint(limit, type))))
        case .uint64: return .unsigned(try self.varint(limit, type))
        case .sint32:
            let raw = UInt32(truncatingIfNeeded: try self.varint(limit, type))
            return .signed(Int64(Int32(bitPattern: (raw >> 1) ^ (0 &- (raw & 1)))))
        case .sint64:
            let raw = try self.varint(limit, type)
            return .signed(Int64(bitPattern: (raw >> 1) ^ (0 &- (raw & 1))))
        case .bool: return .bool(try self.varint(limit, type) != 0)
        case .enumeration: return .enumeration(Int32(truncatingIfNeeded: try self.varint(limit, type)))
        case .fixed32: return .unsigned(UInt64(try self.fixed32(limit, type)))
        case .sfixed32: return .signed(Int64(Int32(bitPattern: try self.fixed32(limit, type))))
        case .float: return .float(Float(bitPattern: try self.fixed32(limit, type)))
        case .fixed64: return .unsigned(try self.fixed64(limit, type))
        case .sfixed64: return .signed(Int64(bitPattern: try self.fixed64(limit, type)))
        case .double: return .double(Double(bitPattern: try self.fixed64(limit, type)))
        case .string:
            let length = try self.length(limit, type)
            let slice = self.bytes[self.position..<self.position + length]
            self.position += length
            guard let string = String(validating: slice, as: UTF8.self) else {
                throw self.malformed(type, "field '\(field.name)' holds a string that is not valid UTF-8")
            }
            return .string(string)
        case .bytes:
            let length = try self.length(limit, type)
            let data = Data(self.bytes[self.position..<self.position + length])
            self.position += length
            return .bytes(data)
        case .message(let name):
            let length = try self.length(limit, type)
            let nested = try self.pool.requireMessage(name)
            return .message(try self.decodeMessage(nested, until: self.position + length, depth: depth + 1))
        case .group:
            throw self.malformed(type, "group field '\(field.name)', which is not supported")
        }
    }

    private mutating func skip(
        _ wireType: WireType, number: UInt64, _ limit: Int, _ type: MessageDescriptor, depth: Int
    ) throws(DescriptorError) {
        switch wireType {
        case .varint: _ = try self.varint(limit, type)
        case .fixed64: _ = try self.fixed64(limit, type)
        case .fixed32: _ = try self.fixed32(limit, type)
        case .lengthDelimited: self.position += try self.length(limit, type)
        case .startGroup:
            guard depth < self.pool.limits.maxDepth else {
                throw DescriptorError(
                    .limitExceeded, "\(type.fullName) is nested more than \(self.pool.limits.maxDepth) groups deep")
            }
            while true {
                let tag = try self.varint(limit, type)
                guard let inner = WireType(rawValue: tag & 7) else { throw self.malformed(type, "an invalid tag") }
                if inner == .endGroup {
                    guard tag >> 3 == number else { throw self.malformed(type, "a group closed by the wrong tag") }
                    return
                }
                try self.skip(inner, number: tag >> 3, limit, type, depth: depth + 1)
            }
        case .endGroup: throw self.malformed(type, "an unexpected end of group")
        }
    }

    private mutating func varint(_ limit: Int, _ type: MessageDescriptor) throws(DescriptorError) -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while self.position < limit {
            let byte = self.bytes[self.position]
            self.position += 1
            guard shift < 64 else { throw self.malformed(type, "a varint longer than 10 bytes") }
            result |= UInt64(byte & 0x7f) << shift
            if byte & 0x80 == 0 { return result }
            shift += 7
        }
        throw self.malformed(type, "a varint cut short")
    }

    private mutating func fixed32(_ limit: Int, _ type: MessageDescriptor) throws(DescriptorError) -> UInt32 {
        guard limit - self.position >= 4 else { throw self.malformed(type, "a 32-bit value cut short") }
        var value: UInt32 = 0
        for index in 0..<4 { value |= UInt32(self.bytes[self.position + index]) << (8 * index) }
        self.position += 4
        return value
    }

    private mutating func fixed64(_ limit: Int, _ type: MessageDescriptor) throws(DescriptorError) -> UInt64 {
        guard limit - self.position >= 8 else { throw self.malformed(type, "a 64-bit value cut short") }
        var value: UInt64 = 0
        for index in 0..<8 { value |= UInt64(self.bytes[self.position + index]) << (8 * index) }
        self.position += 8
        return value
    }

    private mutating func length(_ limit: Int, _ type: MessageDescriptor) throws(DescriptorError) -> Int {
        let length = try self.varint(limit, type)
        guard length <= UInt64(limit - self.position) else {
            throw self.malformed(type, "a length of \(length) bytes where \(limit - self.position) remain")
        }
        return Int(length)
    }

    private func malformed(_ type: MessageDescriptor, _ what: String) -> DescriptorError {
        DescriptorError(
            .malformedBinary, "the bytes are not a valid \(type.fullName): at byte \(self.position), \(what)")
    }

    private func wrongWireType(_ field: FieldDescriptor, _ wireType: WireType, _ type: MessageDescriptor)
        -> DescriptorError
    {
        self.malformed(type, "field '\(field.name)' (\(field.number)) has wire type \(wireType.rawValue)")
    }
}

extension DynamicMessage {
    /// Merges `other` into this message as protobuf's binary merge does.
    mutating func merge(_ other: DynamicMessage) {
        for (number, value) in other.fields {
            switch (self.fields[number], value) {
            case (.list(let a)?, .list(let b)): self.fields[number] = .list(a + b)
            case (.map(let a)?, .map(let b)): self.fields[number] = .map(a.merging(b) { $1 })
            case (.single(.message(var a))?, .single(.message(let b))):
                a.merge(b)
                self.fields[number] = .single(.message(a))
            default: self.fields[number] = value
            }
        }
    }
}

/// Writes the wire format, fields in number order.
struct BinaryWriter {
    private(set) var bytes: [UInt8] = []
    let pool: DescriptorPool

    init(pool: DescriptorPool) {
        self.pool = pool
    }

    mutating func write(_ message: DynamicMessage, as type: MessageDescriptor) throws(DescriptorError) {
        for field in type.fields {
            guard let value = message.fields[field.number] else { continue }
            switch value {
            case .single(let value):
                if !field.hasPresence, value.isDefault { continue }
                try self.writeField(field, value)
            case .list(let values):
                if field.isPacked, !values.isEmpty {
                    var packed = BinaryWriter(pool: self.pool)
                    for value in values { try packed.writeValue(field.kind, value) }
                    self.tag(field.number, .lengthDelimited)
                    self.varint(UInt64(packed.bytes.count))
                    self.bytes += packed.bytes
                } else {
                    for value in values { try self.writeField(field, value) }
                }
            case .map(let entries):
                guard let entry = self.pool.mapEntry(of: field), let keyField = entry.field(number: 1),
                    let valueField = entry.field(number: 2)
                else { continue }
                for key in entries.keys.sorted() {
                    var writer = BinaryWriter(pool: self.pool)
                    try writer.writeField(keyField, key.value)
                    try writer.writeField(valueField, entries[key] ?? .zero(of: valueField.kind))
                    self.tag(field.number, .lengthDelimited)
                    self.varint(UInt64(writer.bytes.count))
                    self.bytes += writer.bytes
                }
            }
        }
    }

    private mutating func writeField(_ field: FieldDescriptor, _ value: ProtoValue) throws(DescriptorError) {
        if case .group = field.kind {
            throw DescriptorError(
                .invalidValue, "group field '\(field.name)' cannot be written (groups are not supported)")
        }
        self.tag(field.number, field.kind.wireType)
        try self.writeValue(field.kind, value)
    }

    private mutating func writeValue(_ kind: FieldKind, _ value: ProtoValue) throws(DescriptorError) {
        switch (kind, value) {
        case (.int32, .signed(let v)), (.int64, .signed(let v)): self.varint(UInt64(bitPattern: v))
        case (.uint32, .unsigned(let v)), (.uint64, .unsigned(let v)): self.varint(v)
        case (.sint32, .signed(let v)):
            let v32 = Int32(truncatingIfNeeded: v)
            self.varint(UInt64(UInt32(bitPattern: (v32 << 1) ^ (v32 >> 31))))
        case (.sint64, .signed(let v)): self.varint(UInt64(bitPattern: (v << 1) ^ (v >> 63)))
        case (.bool, .bool(let v)): self.varint(v ? 1 : 0)
        case (.enumeration, .enumeration(let v)): self.varint(UInt64(bitPattern: Int64(v)))
        case (.fixed32, .unsigned(let v)): self.fixed32(UInt32(truncatingIfNeeded: v))
        case (.sfixed32, .signed(let v)): self.fixed32(UInt32(bitPattern: Int32(truncatingIfNeeded: v)))
        case (.float, .float(let v)): self.fixed32(v.bitPattern)
        case (.fixed64, .unsigned(let v)): self.fixed64(v)
        case (.sfixed64, .signed(let v)): self.fixed64(UInt64(bitPattern: v))
        case (.double, .double(let v)): self.fixed64(v.bitPattern)
        case (.string, .string(let v)):
            self.varint(UInt64(v.utf8.count))
            self.bytes += v.utf8
        case (.bytes, .bytes(let v)):
            self.varint(UInt64(v.count))
            self.bytes += v
        case (.message(let name), .message(let v)):
            var nested = BinaryWriter(pool: self.pool)
            try nested.write(v, as: try self.pool.requireMessage(name))
            self.varint(UInt64(nested.bytes.count))
            self.bytes += nested.bytes
        default:
            throw DescriptorError(.invalidValue, "a value of the wrong type for a \(kind) field")
        }
    }

    private mutating func tag(_ number: Int32, _ wireType: WireType) {
        self.varint(UInt64(number) << 3 | wireType.rawValue)
    }

    private mutating func varint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            self.bytes.append(UInt8(value & 0x7f) | 0x80)
            value >>= 7
        }
        self.bytes.append(UInt8(value))
    }

    private mutating func fixed32(_ value: UInt32) {
        for index in 0..<4 { self.bytes.append(UInt8(truncatingIfNeeded: value >> (8 * index))) }
    }

    private mutating func fixed64(_ value: UInt64) {
        for index in 0..<8 { self.bytes.append(UInt8(truncatingIfNeeded: value >> (8 * index))) }
    }
}
