import Foundation
import SwiftProtobufPluginLibrary

/// What `protoc-gen-mentory` writes, and how; parsed from `--mentory_opt=Key=Value` pairs.
///
/// | key | values | default |
/// | --- | --- | --- |
/// | `Output` | `Swift` (`<file>.schema.swift`), `Markdown` (`<file>.namespaces.md` and the message listings `<file>.messages.txt`) | `Swift` |
/// | `Visibility` | `Internal`, `Public`, `Package` (as protoc-gen-swift) | `Internal` |
/// | `SchemaName` | the name of the container enum | from the package: `mentory.v1` gives `MentorySchema`; from the file for another file of the package of mentory.proto: `mentory_domain.proto` gives `MentoryDomainSchema` |
/// | `ImportMentoryWire` | `true`, `false` | `true` unless the file is mentory.proto (it declares the schema options) |
/// | `ProtoPathModuleMappings` | a module mappings file, as protoc-gen-swift takes it | none |
/// | `FileNaming` | `FullPath`, `PathToUnderscores`, `DropPath` (as protoc-gen-swift) | `FullPath` |
public struct SchemaGeneratorOptions {
    /// The kind of file to write.
    public enum Output: Equatable, Sendable {
        /// `<file>.schema.swift`: the typed namespace tables and the embedded descriptors.
        case swift
        /// `<file>.namespaces.md`: a Markdown table of every method and topic, for docs/PROTOCOL.md.
        case markdown
    }

    /// How the output file's name derives from the `.proto` file's path.
    public enum FileNaming: Equatable, Sendable {
        case fullPath
        case pathToUnderscores
        case dropPath
    }

    public var output: Output = .swift
    /// The access level keyword of the generated declarations (`public`, `package` or `internal`).
    public var visibility: String = "internal"
    public var schemaName: String?
    public var importMentoryWire: Bool?
    public var fileNaming: FileNaming = .fullPath
    public var mappings = ProtoFileToModuleMappings()

    /// The defaults: Swift output, internal visibility.
    public init() {}

    /// Parses protoc's parameter pairs; unknown keys and values are errors naming the accepted ones.
    public init(pairs: [(key: String, value: String)]) throws(SchemaGenerationError) {
        for (key, value) in pairs {
            switch key {
            case "Output":
                switch value.lowercased() {
                case "swift": self.output = .swift
                case "markdown": self.output = .markdown
                default: throw .invalidParameter(key, value, accepted: "Swift, Markdown")
                }
            case "Visibility":
                switch value.lowercased() {
                case "internal": self.visibility = "internal"
                case "public": self.visibility = "public"
                case "package": self.visibility = "package"
                default: throw .invalidParameter(key, value, accepted: "Internal, Public, Package")
                }
            case "SchemaName":
                guard isValidSwiftIdentifier(value) else {
                    throw .invalidParameter(key, value, accepted: "a Swift identifier")
                }
                self.schemaName = value
            case "ImportMentoryWire":
                switch value.lowercased() {
                case "true", "yes", "1": self.importMentoryWire = true
                case "false", "no", "0": self.importMentoryWire = false
                default: throw .invalidParameter(key, value, accepted: "true, false")
                }
            case "FileNaming":
                switch value.lowercased() {
                case "fullpath", "full_path": self.fileNaming = .fullPath
                case "pathtounderscores", "path_to_underscores": self.fileNaming = .pathToUnderscores
                case "droppath", "drop_path": self.fileNaming = .dropPath
                default: throw .invalidParameter(key, value, accepted: "FullPath, PathToUnderscores, DropPath")
                }
            case "ProtoPathModuleMappings":
                guard !value.isEmpty else { continue }
                do {
                    self.mappings = try ProtoFileToModuleMappings(path: value)
                } catch {
                    throw .message("cannot read ProtoPathModuleMappings file '\(value)': \(error)")
                }
            default:
                throw .message(
                    "unknown protoc-gen-mentory option '\(key)' (known: Output, Visibility, SchemaName, "
                        + "ImportMentoryWire, ProtoPathModuleMappings, FileNaming)"
                )
            }
        }
    }

    /// The output file's path for `protoFile` with `suffix` (e.g. `.schema.swift`) instead of `.proto`.
    func outputPath(for protoFile: String, suffix: String) -> String {
        var base = protoFile
        if base.hasSuffix(".proto") { base.removeLast(".proto".count) }
        switch self.fileNaming {
        case .fullPath:
            break
        case .pathToUnderscores:
            base = base.replacingOccurrences(of: "/", with: "_")
        case .dropPath:
            if let slash = base.lastIndex(of: "/") { base = String(base[base.index(after: slash)...]) }
        }
        return base + suffix
    }
}

/// Why generation failed; protoc prints the description.
public enum SchemaGenerationError: Error, CustomStringConvertible, Equatable {
    case message(String)
    case invalidParameter(String, String, accepted: String)

    public var description: String {
        switch self {
        case .message(let message):
            return message
        case .invalidParameter(let key, let value, let accepted):
            return "invalid value '\(value)' for protoc-gen-mentory option '\(key)' (accepted: \(accepted))"
        }
    }
}
