import Foundation

// The well-known types whose proto3 JSON is not an object of their fields: Timestamp, Duration,
// FieldMask, Struct, Value, ListValue and Any (the wrappers are in JSONCoding.swift).

extension DynamicMessage {
    fileprivate func single(_ number: Int32) -> ProtoValue? {
        if case .single(let value)? = self.fields[number] { return value }
        return nil
    }

    fileprivate func signed(_ number: Int32) -> Int64 {
        if case .signed(let value)? = self.single(number) { return value }
        return 0
    }

    fileprivate func string(_ number: Int32) -> String {
        if case .string(let value)? = self.single(number) { return value }
        return ""
    }
}

/// The range of Timestamp: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999999Z.
private let timestampSeconds: ClosedRange<Int64> = -62_135_596_800...253_402_300_799
/// The range of Duration: about +-10,000 years.
private let durationSeconds: ClosedRange<Int64> = -315_576_000_000...315_576_000_000

/// Nanoseconds as RFC 3339 / Duration fractions do it: none, or 3, 6 or 9 digits.
private func fraction(_ nanos: Int64) -> String {
    guard nanos != 0 else { return "" }
    let digits = String(nanos)
    let padded = String(repeating: "0", count: 9 - digits.count) + digits
    if nanos % 1_000_000 == 0 { return "." + padded.prefix(3) }
    if nanos % 1_000 == 0 { return "." + padded.prefix(6) }
    return "." + padded
}

private func twoDigits(_ value: Int64) -> String { value < 10 ? "0\(value)" : "\(value)" }

/// Days since 1970-01-01 -> (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
private func civil(fromDays days: Int64) -> (Int64, Int64, Int64) {
    let z = days + 719_468
    let era = (z >= 0 ? z : z - 146_096) / 146_097
    let dayOfEra = z - era * 146_097
    let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
    let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
    let mp = (5 * dayOfYear + 2) / 153
    let day = dayOfYear - (153 * mp + 2) / 5 + 1
    let month = mp < 10 ? mp + 3 : mp - 9
    return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
}

/// (year, month, day) -> days since 1970-01-01.
private func days(fromCivil year: Int64, _ month: Int64, _ day: Int64) -> Int64 {
    let y = month <= 2 ? year - 1 : year
    let era = (y >= 0 ? y : y - 399) / 400
    let yearOfEra = y - era * 400
    let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
    let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
    return era * 146_097 + dayOfEra - 719_468
}

extension JSONRenderer {
    /// The JSON of a well-known type with a special representation; `nil` for any other message.
    func renderWellKnown(_ message: DynamicMessage, as type: MessageDescriptor) throws(DescriptorError) -> JSONValue? {
        switch type.fullName {
        case "google.protobuf.Timestamp":
            let seconds = message.signed(1)
            let nanos = message.signed(2)
            guard timestampSeconds.contains(seconds), (0...999_999_999).contains(nanos) else {
                throw DescriptorError(
                    .invalidValue, "a Timestamp of \(seconds) s and \(nanos) ns is outside years 1 to 9999")
            }
            let day = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
            let second = seconds - day * 86_400
            let (year, month, dayOfMonth) = civil(fromDays: day)
            let yearText = String(repeating: "0", count: 4 - String(year).count) + String(year)
            return .string(
                "\(yearText)-\(twoDigits(month))-\(twoDigits(dayOfMonth))T\(twoDigits(second / 3600)):"
                    + "\(twoDigits(second / 60 % 60)):\(twoDigits(second % 60))\(fraction(nanos))Z")
        case "google.protobuf.Duration":
            let seconds = message.signed(1)
            let nanos = message.signed(2)
            guard durationSeconds.contains(seconds), (-999_999_999...999_999_999).contains(nanos),
                seconds == 0 || nanos == 0 || (seconds < 0) == (nanos < 0)
            else {
                throw DescriptorError(.invalidValue, "a Duration of \(seconds) s and \(nanos) ns is out of range")
            }
            let sign = seconds < 0 || nanos < 0 ? "-" : ""
            return .string("\(sign)\(seconds.magnitude)\(fraction(Int64(nanos.magnitude)))s")
        case "google.protobuf.FieldMask":
            guard case .list(let paths)? = message.fields[1] else { return .string("") }
            let texts = paths.compactMap { path -> String? in
                guard case .string(let text) = path else { return nil }
                return DescriptorPool.lowerCamelCase(text)
            }
            return .string(texts.joined(separator: ","))
        case "google.protobuf.Struct":
            guard case .map(let entries)? = message.fields[1] else { return .object([]) }
            var members: [(key: String, value: JSONValue)] = []
            for key in entries.keys.sorted() {
                guard case .string(let name) = key, let value = entries[key] else { continue }
                members.append((name, try self.render(value, kind: .message("google.protobuf.Value"))))
            }
            return .object(members)
        case "google.protobuf.ListValue":
            guard case .list(let values)? = message.fields[1] else { return .array([]) }
            var elements: [JSONValue] = []
            for value in values { elements.append(try self.render(value, kind: .message("google.protobuf.Value"))) }
            return .array(elements)
        case "google.protobuf.Value":
            switch (message.single(2), message.single(3), message.single(4), message.single(5), message.single(6)) {
            case (.double(let number)?, _, _, _, _):
                guard number.isFinite else {
                    throw DescriptorError(.invalidValue, "a google.protobuf.Value cannot hold \(number) in JSON")
                }
                return .number(number.description)
            case (_, .string(let text)?, _, _, _): return .string(text)
            case (_, _, .bool(let flag)?, _, _): return .bool(flag)
            case (_, _, _, let structValue?, _):
                return try self.render(structValue, kind: .message("google.protobuf.Struct"))
            case (_, _, _, _, let list?): return try self.render(list, kind: .message("google.protobuf.ListValue"))
            default: return .null
            }
        case "google.protobuf.Any":
            return try self.renderAny(message)
        default:
            return nil
        }
    }

    private func renderAny(_ message: DynamicMessage) throws(DescriptorError) -> JSONValue {
        let url = message.string(1)
        var content = Data()
        if case .bytes(let data)? = message.single(2) { content = data }
        if url.isEmpty, content.isEmpty { return .object([]) }
        guard self.anyDepth < self.pool.limits.maxDepth else {
            throw DescriptorError(.limitExceeded, "Any messages are nested more than \(self.pool.limits.maxDepth) deep")
        }
        let name = url.split(separator: "/").last.map(String.init) ?? url
        guard let type = self.pool.message(named: name) else {
            throw DescriptorError(
                .unknownMessage, "an Any holds \(url), which the descriptors do not define, so it cannot be shown")
        }
        var reader = BinaryReader(bytes: Array(content), pool: self.pool)
        let inner = try reader.decodeMessage(type, depth: 0)
        let nested = JSONRenderer(pool: self.pool, options: self.options, anyDepth: self.anyDepth + 1)
        let rendered = try nested.render(inner, as: type)
        if hasSpecialJSON(type.fullName) {
            return .object([("@type", .string(url)), ("value", rendered)])
        }
        guard case .object(let members) = rendered else { return rendered }
        return .object([("@type", .string(url))] + members)
    }
}

/// Whether a well-known type's JSON is not an object of its fields (it then sits under "value" in an Any).
func hasSpecialJSON(_ fullName: String) -> Bool {
    fullName.hasPrefix("google.protobuf.")
        && (fullName.hasSuffix("Value") || fullName.hasSuffix(".Timestamp") || fullName.hasSuffix(".Duration")
            || fullName.hasSuffix(".FieldMask") || fullName.hasSuffix(".Struct") || fullName.hasSuffix(".Any"))
}

extension JSONReader {
    /// The message of a well-known type with a special JSON representation; `nil` for any other message.
    func readWellKnown(
        _ json: JSONValue, as type: MessageDescriptor, path: String, depth: Int
    ) throws(DescriptorError) -> DynamicMessage? {
        let place = path.isEmpty ? "the body" : "field '\(path)'"
        func invalid(_ expected: String) -> DescriptorError {
            DescriptorError(.invalidValue, "\(place) expects \(expected), not \(json.summary)")
        }
        var message = DynamicMessage()
        switch type.fullName {
        case "google.protobuf.Timestamp":
            guard case .string(let text) = json, let (seconds, nanos) = Self.timestamp(text) else {
                throw invalid("an RFC 3339 time such as \"2026-11-22T18:00:00Z\" (years 1 to 9999)")
            }
            message.fields[1] = .single(.signed(seconds))
            message.fields[2] = .single(.signed(nanos))
        case "google.protobuf.Duration":
            guard case .string(let text) = json, let (seconds, nanos) = Self.duration(text) else {
                throw invalid("a duration in seconds such as \"1.5s\" or \"-0.000001s\"")
            }
            message.fields[1] = .single(.signed(seconds))
            message.fields[2] = .single(.signed(nanos))
        case "google.protobuf.FieldMask":
            guard case .string(let text) = json else { throw invalid("a string of comma-separated paths") }
            let paths = text.isEmpty ? [] : text.split(separator: ",", omittingEmptySubsequences: false)
            message.fields[1] = .list(paths.map { .string(Self.snakeCase(String($0))) })
        case "google.protobuf.Struct":
            guard case .object(let members) = json else { throw invalid("a JSON object") }
            guard let valueType = self.pool.message(named: "google.protobuf.Value") else { return nil }
            var entries: [MapKey: ProtoValue] = [:]
            for (key, value) in members {
                guard entries[.string(key)] == nil else {
                    throw DescriptorError(.invalidValue, "\(place) has the key '\(key)' twice")
                }
                entries[.string(key)] = .message(
                    try self.message(value, as: valueType, path: "\(path)[\"\(key)\"]", depth: depth + 1))
            }
            message.fields[1] = .map(entries)
        case "google.protobuf.ListValue":
            guard case .array(let elements) = json else { throw invalid("a JSON array") }
            guard let valueType = self.pool.message(named: "google.protobuf.Value") else { return nil }
            var values: [ProtoValue] = []
            for (index, element) in elements.enumerated() {
                values.append(
                    .message(try self.message(element, as: valueType, path: "\(path)[\(index)]", depth: depth + 1)))
            }
            message.fields[1] = .list(values)
        case "google.protobuf.Value":
            switch json {
            case .null: message.fields[1] = .single(.enumeration(0))
            case .number(let text):
                guard let number = Double(text), number.isFinite else { throw invalid("a finite number") }
                message.fields[2] = .single(.double(number))
            case .string(let text): message.fields[3] = .single(.string(text))
            case .bool(let flag): message.fields[4] = .single(.bool(flag))
            case .object:
                guard let structType = self.pool.message(named: "google.protobuf.Struct") else { return nil }
                message.fields[5] = .single(
                    .message(try self.message(json, as: structType, path: path, depth: depth + 1)))
            case .array:
                guard let listType = self.pool.message(named: "google.protobuf.ListValue") else { return nil }
                message.fields[6] = .single(
                    .message(try self.message(json, as: listType, path: path, depth: depth + 1)))
            }
        case "google.protobuf.Any":
            guard case .object(let members) = json else { throw invalid("a JSON object with \"@type\"") }
            if members.isEmpty { return message }
            guard let url = members.first(where: { $0.key == "@type" })?.value, case .string(let typeURL) = url else {
                throw invalid("a JSON object with \"@type\" naming the message it holds")
            }
            let name = typeURL.split(separator: "/").last.map(String.init) ?? typeURL
            guard let inner = self.pool.message(named: name) else {
                throw DescriptorError(.unknownMessage, "\(place) holds \(typeURL), which the descriptors do not define")
            }
            let rest = members.filter { $0.key != "@type" }
            let content: JSONValue
            if hasSpecialJSON(inner.fullName) {
                guard let value = rest.first(where: { $0.key == "value" })?.value, rest.count == 1 else {
                    throw invalid("an object with \"@type\" and \"value\" (\(inner.fullName) is a bare JSON value)")
                }
                content = value
            } else {
                content = .object(rest)
            }
            let decoded = try self.message(content, as: inner, path: path, depth: depth + 1)
            var writer = BinaryWriter(pool: self.pool)
            try writer.write(decoded, as: inner)
            message.fields[1] = .single(.string(typeURL))
            message.fields[2] = .single(.bytes(Data(writer.bytes)))
        default:
            return nil
        }
        return message
    }

    private static func snakeCase(_ camel: String) -> String {
        var result = ""
        for character in camel {
            if character.isUppercase {
                result += "_" + character.lowercased()
            } else {
                result.append(character)
            }
        }
        return result
    }

    /// "[-]SECONDS[.FRACTION]s" -> (seconds, nanos), both with the duration's sign.
    private static func duration(_ text: String) -> (Int64, Int64)? {
        guard text.hasSuffix("s") else { return nil }
        var body = Substring(text.dropLast())
        let negative = body.hasPrefix("-")
        if negative { body = body.dropFirst() }
        let parts = body.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        guard let whole = parts.first, !whole.isEmpty, whole.allSatisfy(\.isASCII), whole.allSatisfy(\.isNumber),
            let seconds = Int64(whole), durationSeconds.contains(seconds)
        else { return nil }
        var nanos: Int64 = 0
        if parts.count == 2 {
            let digits = parts[1]
            guard (1...9).contains(digits.count), digits.allSatisfy(\.isASCII), digits.allSatisfy(\.isNumber),
                let value = Int64(digits + String(repeating: "0", count: 9 - digits.count))
            else { return nil }
            nanos = value
        }
        return negative ? (-seconds, -nanos) : (seconds, nanos)
    }

    /// RFC 3339 ("2026-11-22T18:00:00.5Z", or with an offset) -> (seconds, nanos) since the Unix epoch.
    private static func timestamp(_ text: String) -> (Int64, Int64)? {
        let chars = Array(text.utf8)
        func number(_ range: Range<Int>) -> Int64? {
            guard range.upperBound <= chars.count else { return nil }
            var value: Int64 = 0
            for byte in chars[range] {
                guard byte >= 0x30, byte <= 0x39 else { return nil }
                value = value * 10 + Int64(byte - 0x30)
            }
            return value
        }
        guard chars.count >= 20, chars[4] == UInt8(ascii: "-"), chars[7] == UInt8(ascii: "-"),
            chars[10] == UInt8(ascii: "T") || chars[10] == UInt8(ascii: "t"), chars[13] == UInt8(ascii: ":"),
            chars[16] == UInt8(ascii: ":"),
            let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
            let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
            (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 60, year >= 1
        else { return nil }
        let monthLengths: [Int64] = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        guard day <= monthLengths[Int(month) - 1] + (month == 2 && leap ? 1 : 0) else { return nil }
        var index = 19
        var nanos: Int64 = 0
        if index < chars.count, chars[index] == UInt8(ascii: ".") {
            let start = index + 1
            index = start
            while index < chars.count, chars[index] >= 0x30, chars[index] <= 0x39 { index += 1 }
            guard (1...9).contains(index - start), let value = number(start..<index) else { return nil }
            var scaled = value
            for _ in 0..<(9 - (index - start)) { scaled *= 10 }
            nanos = scaled
        }
        guard index < chars.count else { return nil }
        var offset: Int64 = 0
        switch chars[index] {
        case UInt8(ascii: "Z"), UInt8(ascii: "z"):
            guard index + 1 == chars.count else { return nil }
        case UInt8(ascii: "+"), UInt8(ascii: "-"):
            guard index + 6 == chars.count, chars[index + 3] == UInt8(ascii: ":"),
                let hours = number(index + 1..<index + 3), let minutes = number(index + 4..<index + 6),
                hours < 24, minutes < 60
            else { return nil }
            offset = (hours * 3600 + minutes * 60) * (chars[index] == UInt8(ascii: "-") ? -1 : 1)
        default: return nil
        }
        let seconds = days(fromCivil: year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset
        guard timestampSeconds.contains(seconds) else { return nil }
        return (seconds, nanos)
    }
}
