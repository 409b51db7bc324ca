import Foundation

/// A parsed JSON value. Numbers keep their text, so 64-bit integers lose no precision; objects keep
/// their members in order, duplicates included, for the transcoder to judge.
package enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case number(String)
    case string(String)
    case array([JSONValue])
    case object([(key: String, value: JSONValue)])

    package static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): true
        case (.bool(let a), .bool(let b)): a == b
        case (.number(let a), .number(let b)): a == b
        case (.string(let a), .string(let b)): a == b
        case (.array(let a), .array(let b)): a == b
        case (.object(let a), .object(let b)):
            a.count == b.count && zip(a, b).allSatisfy { $0.key == $1.key && $0.value == $1.value }
        default: false
        }
    }

    /// A short description of the value for error messages, e.g. `"HAPPY"` or `an object`.
    package var summary: String {
        switch self {
        case .null: "null"
        case .bool(let value): "\(value)"
        case .number(let text): text
        case .string(let text):
            text.count > 40 ? "'\(text.prefix(40))...'" : "'\(text)'"
        case .array: "an array"
        case .object: "an object"
        }
    }
}

/// A strict RFC 8259 JSON parser with a nesting limit.
package struct JSONParser {
    private let bytes: [UInt8]
    private var position = 0
    private let maxDepth: Int

    /// Parses `bytes` as one JSON value (RFC 8259: no trailing commas, no comments), nested at most
    /// `maxDepth` levels.
    package static func parse(_ bytes: [UInt8], maxDepth: Int) throws(DescriptorError) -> JSONValue {
        var parser = JSONParser(bytes: bytes, maxDepth: maxDepth)
        parser.skipWhitespace()
        let value = try parser.value(depth: 0)
        parser.skipWhitespace()
        guard parser.position == bytes.count else { throw parser.error("unexpected text after the JSON value") }
        return value
    }

    private init(bytes: [UInt8], maxDepth: Int) {
        self.bytes = bytes
        self.maxDepth = maxDepth
    }

    private func error(_ what: String) -> DescriptorError {
        var line = 1
        var column = 1
        for byte in self.bytes[..<min(self.position, self.bytes.count)] {
            if byte == UInt8(ascii: "\n") {
                line += 1
                column = 1
            } else if byte & 0xC0 != 0x80 {
                column += 1
            }
        }
        return DescriptorError(.malformedJSON, "invalid JSON at line \(line), column \(column): \(what)")
    }

    private var current: UInt8? { self.position < self.bytes.count ? self.bytes[self.position] : nil }

    private mutating func skipWhitespace() {
        while let byte = self.current, byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 {
            self.position += 1
        }
    }

    private mutating func value(depth: Int) throws(DescriptorError) -> JSONValue {
        guard let byte = self.current else { throw self.error("the input ends where a value should be") }
        switch byte {
        case UInt8(ascii: "{"): return try self.object(depth: depth + 1)
        case UInt8(ascii: "["): return try self.array(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try self.string())
        case UInt8(ascii: "t"): return try self.literal("true", .bool(true))
        case UInt8(ascii: "f"): return try self.literal("false", .bool(false))
        case UInt8(ascii: "n"): return try self.literal("null", .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try self.number())
        default: throw self.error("unexpected character '\(Unicode.Scalar(byte))'")
        }
    }

    private mutating func literal(_ word: String, _ value: JSONValue) throws(DescriptorError) -> JSONValue {
        let utf8 = Array(word.utf8)
        guard self.bytes.count - self.position >= utf8.count,
            Array(self.bytes[self.position..<self.position + utf8.count]) == utf8
        else { throw self.error("expected \(word)") }
        self.position += utf8.count
        return value
    }

    private mutating func checkDepth(_ depth: Int) throws(DescriptorError) {
        guard depth <= self.maxDepth else {
            throw DescriptorError(.limitExceeded, "the JSON is nested more than \(self.maxDepth) levels deep")
        }
    }

    private mutating func object(depth: Int) throws(DescriptorError) -> JSONValue {
        try self.checkDepth(depth)
        self.position += 1
        var members: [(key: String, value: JSONValue)] = []
        self.skipWhitespace()
        if self.current == UInt8(ascii: "}") {
            self.position += 1
            return .object(members)
        }
        while true {
            self.skipWhitespace()
            if self.current == UInt8(ascii: "}") { throw self.error("a trailing comma before '}' (JSON allows none)") }
            guard self.current == UInt8(ascii: "\"") else { throw self.error("expected a member name in quotes") }
            let key = try self.string()
            self.skipWhitespace()
            guard self.current == UInt8(ascii: ":") else { throw self.error("expected ':' after \"\(key)\"") }
            self.position += 1
            self.skipWhitespace()
            members.append((key, try self.value(depth: depth)))
            self.skipWhitespace()
            switch self.current {
            case UInt8(ascii: ","): self.position += 1
            case UInt8(ascii: "}"):
                self.position += 1
                return .object(members)
            default: throw self.error("expected ',' or '}'")
            }
        }
    }

    private mutating func array(depth: Int) throws(DescriptorError) -> JSONValue {
        try self.checkDepth(depth)
        self.position += 1
        var elements: [JSONValue] = []
        self.skipWhitespace()
        if self.current == UInt8(ascii: "]") {
            self.position += 1
            return .array(elements)
        }
        while true {
            self.skipWhitespace()
            if self.current == UInt8(ascii: "]") { throw self.error("a trailing comma before ']' (JSON allows none)") }
            elements.append(try self.value(depth: depth))
            self.skipWhitespace()
            switch self.current {
            case UInt8(ascii: ","): self.position += 1
            case UInt8(ascii: "]"):
                self.position += 1
                return .array(elements)
            default: throw self.error("expected ',' or ']'")
            }
        }
    }

    private mutating func number() throws(DescriptorError) -> String {
        let start = self.position
        func digits(_ parser: inout JSONParser) -> Int {
            var count = 0
            while let byte = parser.current, byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") {
                parser.position += 1
                count += 1
            }
            return count
        }
        if self.current == UInt8(ascii: "-") { self.position += 1 }
        if self.current == UInt8(ascii: "0") {
            self.position += 1
        } else if digits(&self) == 0 {
            throw self.error("expected a digit")
        }
        if self.current == UInt8(ascii: ".") {
            self.position += 1
            guard digits(&self) > 0 else { throw self.error("expected a digit after '.'") }
        }
        if self.current == UInt8(ascii: "e") || self.current == UInt8(ascii: "E") {
            self.position += 1
            if self.current == UInt8(ascii: "+") || self.current == UInt8(ascii: "-") { self.position += 1 }
            guard digits(&self) > 0 else { throw self.error("expected a digit in the exponent") }
        }
        return String(decoding: self.bytes[start..<self.position], as: UTF8.self)
    }

    private mutating func string() throws(DescriptorError) -> String {
        self.position += 1
        var scalars: [UInt8] = []
        while true {
            guard let byte = self.current else { throw self.error("a string is not closed") }
            switch byte {
            case UInt8(ascii: "\""):
                self.position += 1
                guard let string = String(validating: scalars, as: UTF8.self) else {
                    throw self.error("a string is not valid UTF-8")
                }
                return string
            case UInt8(ascii: "\\"):
                self.position += 1
                guard let escape = self.current else { throw self.error("a string is not closed") }
                self.position += 1
                switch escape {
                case UInt8(ascii: "\""): scalars.append(0x22)
                case UInt8(ascii: "\\"): scalars.append(0x5C)
                case UInt8(ascii: "/"): scalars.append(0x2F)
                case UInt8(ascii: "b"): scalars.append(0x08)
                case UInt8(ascii: "f"): scalars.append(0x0C)
                case UInt8(ascii: "n"): scalars.append(0x0A)
                case UInt8(ascii: "r"): scalars.append(0x0D)
                case UInt8(ascii: "t"): scalars.append(0x09)
                case UInt8(ascii: "u"):
                    var code = try self.hex4()
                    if (0xD800..<0xDC00).contains(code) {
                        guard self.current == UInt8(ascii: "\\") else {
                            throw self.error("a lone surrogate \\u escape")
                        }
                        self.position += 1
                        guard self.current == UInt8(ascii: "u") else { throw self.error("a lone surrogate \\u escape") }
                        self.position += 1
                        let low = try self.hex4()
                        guard (0xDC00..<0xE000).contains(low) else { throw self.error("a lone surrogate \\u escape") }
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00..<0xE000).contains(code) {
                        throw self.error("a lone surrogate \\u escape")
                    }
                    guard let scalar = Unicode.Scalar(code) else { throw self.error("an invalid \\u escape") }
                    scalars += Array(String(Character(scalar)).utf8)
                default: throw self.error("an invalid escape '\\\(Unicode.Scalar(escape))'")
                }
            case 0..<0x20:
                throw self.error("a control character inside a string (escape it)")
            default:
                scalars.append(byte)
                self.position += 1
            }
        }
    }

    private mutating func hex4() throws(DescriptorError) -> UInt32 {
        guard self.bytes.count - self.position >= 4 else { throw self.error("a \\u escape needs 4 hex digits") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = self.bytes[self.position]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw self.error("a \\u escape needs 4 hex digits")
            }
            value = value << 4 | UInt32(digit)
            self.position += 1
        }
        return value
    }
}

/// Writes JSON text, compact or indented by two spaces.
struct JSONWriter {
    private(set) var text = ""
    let pretty: Bool

    init(pretty: Bool) {
        self.pretty = pretty
    }

    mutating func write(_ value: JSONValue, indent: Int = 0) {
        switch value {
        case .null: self.text += "null"
        case .bool(let value): self.text += value ? "true" : "false"
        case .number(let text): self.text += text
        case .string(let string): self.writeString(string)
        case .array(let elements):
            guard !elements.isEmpty else {
                self.text += "[]"
                return
            }
            self.text += "["
            for (index, element) in elements.enumerated() {
                if index > 0 { self.text += "," }
                self.newline(indent + 1)
                self.write(element, indent: indent + 1)
            }
            self.newline(indent)
            self.text += "]"
        case .object(let members):
            guard !members.isEmpty else {
                self.text += "{}"
                return
            }
            self.text += "{"
            for (index, member) in members.enumerated() {
                if index > 0 { self.text += "," }
                self.newline(indent + 1)
                self.writeString(member.key)
                self.text += self.pretty ? ": " : ":"
                self.write(member.value, indent: indent + 1)
            }
            self.newline(indent)
            self.text += "}"
        }
    }

    private mutating func newline(_ indent: Int) {
        guard self.pretty else { return }
        self.text += "\n" + String(repeating: "  ", count: indent)
    }

    private mutating func writeString(_ string: String) {
        self.text += "\""
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": self.text += "\\\""
            case "\\": self.text += "\\\\"
            case "\n": self.text += "\\n"
            case "\r": self.text += "\\r"
            case "\t": self.text += "\\t"
            case "\u{08}": self.text += "\\b"
            case "\u{0C}": self.text += "\\f"
            case "\u{00}"..."\u{1F}", "\u{7F}", "\u{2028}", "\u{2029}":
                let hex = String(scalar.value, radix: 16, uppercase: false)
                self.text += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: self.text.unicodeScalars.append(scalar)
            }
        }
        self.text += "\""
    }
}
