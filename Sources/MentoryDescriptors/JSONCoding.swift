import Foundation

/// How ``DescriptorPool`` writes JSON.
public struct JSONOutputOptions: Sendable, Equatable {
    /// Indent by two spaces, one member per line; otherwise one line.
    public var pretty: Bool
    /// Write 64-bit integers as JSON numbers instead of proto3 JSON's strings (readers that parse
    /// numbers as doubles lose precision above 2^53).
    public var int64AsNumbers: Bool

    public init(pretty: Bool = false, int64AsNumbers: Bool = false) {
        self.pretty = pretty
        self.int64AsNumbers = int64AsNumbers
    }
}

/// The well-known wrapper messages, written in JSON as their bare `value`.
private let wrapperTypes: Set<String> = [
    "google.protobuf.DoubleValue", "google.protobuf.FloatValue", "google.protobuf.Int64Value",
    "google.protobuf.UInt64Value", "google.protobuf.Int32Value", "google.protobuf.UInt32Value",
    "google.protobuf.BoolValue", "google.protobuf.StringValue", "google.protobuf.BytesValue",
]

// MARK: - DynamicMessage -> JSON

struct JSONRenderer {
    let pool: DescriptorPool
    let options: JSONOutputOptions
    /// How many Any messages enclose what is being rendered (each decodes its content anew).
    var anyDepth = 0

    func render(_ message: DynamicMessage, as type: MessageDescriptor) throws(DescriptorError) -> JSONValue {
        if let special = try self.renderWellKnown(message, as: type) { return special }
        if wrapperTypes.contains(type.fullName), let valueField = type.field(number: 1) {
            let value: ProtoValue
            if case .single(let present)? = message.fields[1] {
                value = present
            } else {
                value = .zero(of: valueField.kind)
            }
            return try self.render(value, kind: valueField.kind)
        }
        var members: [(key: String, value: JSONValue)] = []
        for field in type.fields {
            guard let value = message.fields[field.number] else { continue }
            switch value {
            case .single(let value):
                if !field.hasPresence, value.isDefault { continue }
                if case .group = field.kind { continue }
                members.append((field.jsonName, try self.render(value, kind: field.kind)))
            case .list(let values):
                if values.isEmpty { continue }
                if case .group = field.kind { continue }
                var rendered: [JSONValue] = []
                for value in values { rendered.append(try self.render(value, kind: field.kind)) }
                members.append((field.jsonName, .array(rendered)))
            case .map(let entries):
                guard !entries.isEmpty, let entry = self.pool.mapEntry(of: field),
                    let valueField = entry.field(number: 2)
                else { continue }
                var rendered: [(key: String, value: JSONValue)] = []
                for key in entries.keys.sorted() {
                    let value = entries[key] ?? .zero(of: valueField.kind)
                    rendered.append((Self.keyText(key), try self.render(value, kind: valueField.kind)))
                }
                members.append((field.jsonName, .object(rendered)))
            }
        }
        return .object(members)
    }

    private static func keyText(_ key: MapKey) -> String {
        switch key {
        case .bool(let value): value ? "true" : "false"
        case .signed(let value): String(value)
        case .unsigned(let value): String(value)
        case .string(let value): value
        }
    }

    func render(_ value: ProtoValue, kind: FieldKind) throws(DescriptorError) -> JSONValue {
        switch value {
        case .signed(let number):
            if case .int64 = kind, !self.options.int64AsNumbers { return .string(String(number)) }
            if case .sint64 = kind, !self.options.int64AsNumbers { return .string(String(number)) }
            if case .sfixed64 = kind, !self.options.int64AsNumbers { return .string(String(number)) }
            return .number(String(number))
        case .unsigned(let number):
            if case .uint64 = kind, !self.options.int64AsNumbers { return .string(String(number)) }
            if case .fixed64 = kind, !self.options.int64AsNumbers { return .string(String(number)) }
            return .number(String(number))
        case .float(let number):
            if number.isNaN { return .string("NaN") }
            if number.isInfinite { return .string(number < 0 ? "-Infinity" : "Infinity") }
            return .number(number.description)
        case .double(let number):
            if number.isNaN { return .string("NaN") }
            if number.isInfinite { return .string(number < 0 ? "-Infinity" : "Infinity") }
            return .number(number.description)
        case .bool(let flag): return .bool(flag)
        case .string(let text): return .string(text)
        case .bytes(let data): return .string(data.base64EncodedString())
        case .enumeration(let number):
            if case .enumeration(let name) = kind {
                if name == "google.protobuf.NullValue" { return .null }
                if let valueName = self.pool.enumType(named: name)?.name(of: number) { return .string(valueName) }
            }
            return .number(String(number))
        case .message(let message):
            guard case .message(let name) = kind, let type = self.pool.message(named: name) else { return .object([]) }
            return try self.render(message, as: type)
        }
    }
}

// MARK: - JSON -> DynamicMessage

struct JSONReader {
    let pool: DescriptorPool

    func message(_ json: JSONValue, as type: MessageDescriptor, path: String, depth: Int) throws(DescriptorError)
        -> DynamicMessage
    {
        guard depth <= self.pool.limits.maxDepth else {
            throw DescriptorError(
                .limitExceeded,
                "\(path.isEmpty ? type.fullName : "field '\(path)'") is nested more than "
                    + "\(self.pool.limits.maxDepth) messages deep"
            )
        }
        if let special = try self.readWellKnown(json, as: type, path: path, depth: depth) { return special }
        if wrapperTypes.contains(type.fullName), let valueField = type.field(number: 1) {
            var message = DynamicMessage()
            // `{}`, the body every request defaults to, is the wrapper's default value.
            if case .object(let members) = json, members.isEmpty { return message }
            message.fields[1] = .single(
                try self.scalar(json, field: valueField, path: path.isEmpty ? "value" : path, depth: depth))
            return message
        }
        guard case .object(let members) = json else {
            throw DescriptorError(
                .invalidValue,
                "\(path.isEmpty ? "the body" : "field '\(path)'") expects a JSON object (\(type.fullName)), "
                    + "not \(json.summary)"
            )
        }
        var message = DynamicMessage()
        var given: [Int32: String] = [:]
        var oneofMembers: [Int: String] = [:]
        for (key, value) in members {
            let fieldPath = path.isEmpty ? key : path + "." + key
            guard let field = type.field(named: key) else {
                throw DescriptorError(.unknownField, Self.unknownField(key, fieldPath, type))
            }
            if let earlier = given[field.number] {
                throw DescriptorError(
                    .invalidValue,
                    "field '\(fieldPath)' of \(type.fullName) is given twice (as '\(earlier)' and '\(key)')")
            }
            given[field.number] = key
            // null leaves a field out, except a google.protobuf.Value, whose null is a value.
            if value == .null, !Self.isValueField(field) { continue }
            if let oneof = field.oneofIndex {
                if let other = oneofMembers[oneof] {
                    throw DescriptorError(
                        .invalidValue,
                        "fields '\(other)' and '\(key)' of \(type.fullName) are both in oneof "
                            + "'\(type.oneofs[oneof])'; give at most one"
                    )
                }
                oneofMembers[oneof] = key
            }
            message.fields[field.number] = try self.field(value, field: field, path: fieldPath, depth: depth)
        }
        return message
    }

    private static func unknownField(_ key: String, _ path: String, _ type: MessageDescriptor) -> String {
        let known = type.fields.map(\.jsonName)
        var text = "unknown field '\(path)' in \(type.fullName); "
        if let suggestion = known.min(by: { editDistance($0, key) < editDistance($1, key) }),
            editDistance(suggestion, key) <= max(2, key.count / 3)
        {
            text += "did you mean '\(suggestion)'? "
        }
        text += known.isEmpty ? "it has no fields" : "known fields: " + known.joined(separator: ", ")
        return text
    }

    private func field(_ json: JSONValue, field: FieldDescriptor, path: String, depth: Int) throws(DescriptorError)
        -> FieldValue
    {
        if let entry = self.pool.mapEntry(of: field) {
            guard case .object(let members) = json else {
                throw DescriptorError(
                    .invalidValue, "field '\(path)' expects a JSON object (a map), not \(json.summary)")
            }
            guard let keyField = entry.field(number: 1), let valueField = entry.field(number: 2) else {
                return .map([:])
            }
            var map: [MapKey: ProtoValue] = [:]
            for (key, value) in members {
                let entryPath = "\(path)[\"\(key)\"]"
                guard let mapKey = try self.mapKey(key, field: keyField, path: entryPath).mapKey else { continue }
                if map[mapKey] != nil {
                    throw DescriptorError(.invalidValue, "map '\(path)' has the key '\(key)' twice")
                }
                if value == .null, case .message = valueField.kind, !Self.isValueField(valueField) {
                    map[mapKey] = .zero(of: valueField.kind)
                    continue
                }
                map[mapKey] = try self.scalar(value, field: valueField, path: entryPath, depth: depth)
            }
            return .map(map)
        }
        if field.isRepeated {
            guard case .array(let elements) = json else {
                throw DescriptorError(.invalidValue, "field '\(path)' expects a JSON array, not \(json.summary)")
            }
            var values: [ProtoValue] = []
            for (index, element) in elements.enumerated() {
                let elementPath = "\(path)[\(index)]"
                guard element != .null || Self.isValueField(field) else {
                    throw DescriptorError(.invalidValue, "field '\(elementPath)' is null; a list cannot hold null")
                }
                values.append(try self.scalar(element, field: field, path: elementPath, depth: depth))
            }
            return .list(values)
        }
        return .single(try self.scalar(json, field: field, path: path, depth: depth))
    }

    static func isValueField(_ field: FieldDescriptor) -> Bool {
        if case .message("google.protobuf.Value") = field.kind { return true }
        return false
    }

    private func mapKey(_ key: String, field: FieldDescriptor, path: String) throws(DescriptorError) -> ProtoValue {
        switch field.kind {
        case .string: return .string(key)
        case .bool:
            switch key {
            case "true": return .bool(true)
            case "false": return .bool(false)
            default: throw DescriptorError(.invalidValue, "map key in '\(path)' must be true or false, not '\(key)'")
            }
        default: return try self.scalar(.string(key), field: field, path: path, depth: 0)
        }
    }

    func scalar(_ json: JSONValue, field: FieldDescriptor, path: String, depth: Int) throws(DescriptorError)
        -> ProtoValue
    {
        func invalid(_ expected: String) -> DescriptorError {
            DescriptorError(.invalidValue, "field '\(path)' expects \(expected), not \(json.summary)")
        }
        switch field.kind {
        case .int32, .sint32, .sfixed32:
            return .signed(try Self.integer(json, in: Int64(Int32.min)...Int64(Int32.max), invalid))
        case .int64, .sint64, .sfixed64:
            return .signed(try Self.integer(json, in: Int64.min...Int64.max, invalid))
        case .uint32, .fixed32:
            return .unsigned(try Self.unsigned(json, max: UInt64(UInt32.max), invalid))
        case .uint64, .fixed64:
            return .unsigned(try Self.unsigned(json, max: UInt64.max, invalid))
        case .float:
            let value = try Self.floatingPoint(json, invalid("a number, 'NaN', 'Infinity' or '-Infinity'"))
            guard value.isNaN || value.isInfinite || abs(value) <= Double(Float.greatestFiniteMagnitude) else {
                throw invalid("a 32-bit floating-point number (at most \(Float.greatestFiniteMagnitude))")
            }
            return .float(Float(value))
        case .double:
            return .double(try Self.floatingPoint(json, invalid("a number, 'NaN', 'Infinity' or '-Infinity'")))
        case .bool:
            guard case .bool(let value) = json else { throw invalid("true or false") }
            return .bool(value)
        case .string:
            guard case .string(let value) = json else { throw invalid("a string") }
            return .string(value)
        case .bytes:
            guard case .string(let text) = json, let data = Self.base64(text) else {
                throw invalid("a base64 string")
            }
            return .bytes(data)
        case .enumeration(let name):
            guard let enumType = self.pool.enumType(named: name) else { throw invalid("an enum value") }
            let names = enumType.values.map(\.name)
            let expected =
                names.count <= 32
                ? "one of \(names.joined(separator: ", "))" : "a value of \(name)"
            switch json {
            case .string(let text):
                guard let number = enumType.number(of: text) else { throw invalid(expected) }
                return .enumeration(number)
            case .number:
                let number = try Self.integer(json, in: Int64(Int32.min)...Int64(Int32.max), invalid(expected))
                if field.enumIsClosed, enumType.name(of: Int32(number)) == nil { throw invalid(expected) }
                return .enumeration(Int32(number))
            default: throw invalid(expected)
            }
        case .message(let name):
            let nested = try self.pool.requireMessage(name)
            return .message(try self.message(json, as: nested, path: path, depth: depth + 1))
        case .group:
            throw DescriptorError(.invalidValue, "field '\(path)' is a group, which is not supported")
        }
    }

    /// The text of a number given as a JSON number or as a string holding one.
    private static func numberText(_ json: JSONValue) -> String? {
        switch json {
        case .number(let text): return text
        case .string(let text):
            guard case .number(let parsed)? = try? JSONParser.parse(Array(text.utf8), maxDepth: 1),
                parsed == text
            else { return nil }
            return text
        default: return nil
        }
    }

    private static func integer(
        _ json: JSONValue, in range: ClosedRange<Int64>, _ invalid: @autoclosure () -> DescriptorError
    ) throws(DescriptorError) -> Int64 {
        guard let text = Self.numberText(json) else { throw invalid() }
        let value: Int64?
        if let exact = Int64(text) {
            value = exact
        } else if let double = Double(text), double.rounded() == double {
            value = Int64(exactly: double)
        } else {
            value = nil
        }
        guard let value, range.contains(value) else { throw invalid() }
        return value
    }

    private static func integer(
        _ json: JSONValue, in range: ClosedRange<Int64>, _ invalid: (String) -> DescriptorError
    ) throws(DescriptorError) -> Int64 {
        try Self.integer(json, in: range, invalid("an integer from \(range.lowerBound) to \(range.upperBound)"))
    }

    private static func unsigned(
        _ json: JSONValue, max: UInt64, _ invalid: (String) -> DescriptorError
    ) throws(DescriptorError) -> UInt64 {
        let failure = invalid("an integer from 0 to \(max)")
        guard let text = Self.numberText(json) else { throw failure }
        let value: UInt64?
        if let exact = UInt64(text) {
            value = exact
        } else if text == "-0" {
            value = 0
        } else if let double = Double(text), double.rounded() == double {
            value = UInt64(exactly: double)
        } else {
            value = nil
        }
        guard let value, value <= max else { throw failure }
        return value
    }

    private static func floatingPoint(_ json: JSONValue, _ invalid: DescriptorError) throws(DescriptorError) -> Double {
        if case .string(let text) = json {
            switch text {
            case "NaN": return .nan
            case "Infinity": return .infinity
            case "-Infinity": return -.infinity
            default: break
            }
        }
        guard let text = Self.numberText(json), let value = Double(text), value.isFinite else { throw invalid }
        return value
    }

    /// Standard or URL-safe base64, padded or not.
    static func base64(_ text: String) -> Data? {
        var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        guard standard.count % 4 != 1 else { return nil }
        if !standard.hasSuffix("=") {
            standard += String(repeating: "=", count: (4 - standard.count % 4) % 4)
        }
        return Data(base64Encoded: standard)
    }
}

/// Levenshtein distance, for "did you mean" suggestions.
private func editDistance(_ a: String, _ b: String) -> Int {
    let a = Array(a.lowercased())
    let b = Array(b.lowercased())
    guard !a.isEmpty else { return b.count }
    guard !b.isEmpty else { return a.count }
    var previous = Array(0...b.count)
    for i in 1...a.count {
        var current = [i] + Array(repeating: 0, count: b.count)
        for j in 1...b.count {
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
        }
        previous = current
    }
    return previous[b.count]
}
