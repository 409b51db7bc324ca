import Foundation
import SwiftProtobuf
import SwiftProtobufPluginLibrary

/// Writes `<file>.messages.txt`: every top-level message and enum of the file as a `.proto` listing,
/// each after a line `@@ Name`. `scripts/generate-protos.sh` splices the ones a block of docs/PROTOCOL.md
/// names (`<!-- BEGIN GENERATED: messages Request Response -->` … `<!-- END GENERATED: messages -->`)
/// into it, so the document's message listings cannot drift from the schema.
///
/// A listing keeps the fields' own comments, as `//` lines above them; a message's own comment is
/// left to the prose around the block. Types of the file's own package are named without it.
struct MessageListingWriter {
    let file: FileDescriptor

    func write() -> String {
        var lines: [String] = []
        for message in self.file.messages {
            lines.append("@@ \(message.name)")
            lines += self.listing(of: message)
        }
        for enumeration in self.file.enums {
            lines.append("@@ \(enumeration.name)")
            lines.append("enum \(enumeration.name) {")
            for value in enumeration.values {
                lines += Self.comments(value.protoSourceComments(), indent: "  ")
                lines.append("  \(value.name) = \(value.number);")
            }
            lines.append("}")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    private func listing(of message: Descriptor) -> [String] {
        var lines = ["message \(message.name) {"]
        var listedOneofs: Set<String> = []
        for field in message.fields {
            if let oneof = field.realContainingOneof {
                guard listedOneofs.insert(oneof.name).inserted else { continue }
                lines.append("  oneof \(oneof.name) {")
                for member in oneof.fields {
                    lines += Self.comments(member.protoSourceComments(), indent: "    ")
                    lines.append("    \(self.typeName(member)) \(member.name) = \(member.number);")
                }
                lines.append("  }")
                continue
            }
            lines += Self.comments(field.protoSourceComments(), indent: "  ")
            let optional = field.containingOneof != nil ? "optional " : ""
            let repeated = field.isRepeated && !field.isMap ? "repeated " : ""
            lines.append("  \(optional)\(repeated)\(self.typeName(field)) \(field.name) = \(field.number);")
        }
        lines.append("}")
        return lines
    }

    private func typeName(_ field: FieldDescriptor) -> String {
        if field.isMap {
            let entry = field.messageType!
            return "map<\(self.typeName(entry.fields[0])), \(self.typeName(entry.fields[1]))>"
        }
        switch field.type {
        case .message, .group: return self.name(field.messageType.fullName)
        case .enum: return self.name(field.enumType.fullName)
        case .double: return "double"
        case .float: return "float"
        case .int64: return "int64"
        case .uint64: return "uint64"
        case .int32: return "int32"
        case .fixed64: return "fixed64"
        case .fixed32: return "fixed32"
        case .bool: return "bool"
        case .string: return "string"
        case .bytes: return "bytes"
        case .uint32: return "uint32"
        case .sfixed32: return "sfixed32"
        case .sfixed64: return "sfixed64"
        case .sint32: return "sint32"
        case .sint64: return "sint64"
        }
    }

    /// `fullName` without the file's own package.
    private func name(_ fullName: String) -> String {
        let prefix = self.file.package.isEmpty ? "" : self.file.package + "."
        guard !prefix.isEmpty, fullName.hasPrefix(prefix) else { return fullName }
        return String(fullName.dropFirst(prefix.count))
    }

    /// A proto comment as `//` lines.
    private static func comments(_ text: String, indent: String) -> [String] {
        text.split(separator: "\n", omittingEmptySubsequences: false).compactMap { line in
            var text = Substring(line)
            if text.hasPrefix("///") { text = text.dropFirst(3) }
            let trimmed = text.trimmingCharacters(in: .whitespaces)
            return trimmed.isEmpty ? nil : indent + "// " + trimmed
        }
    }
}
