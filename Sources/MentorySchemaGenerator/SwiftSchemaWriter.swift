import Foundation
import SwiftProtobuf
import SwiftProtobufPluginLibrary

/// Writes `<file>.schema.swift`: one `NamespaceSchema` enum per namespace inside the container enum,
/// the list of namespaces and the embedded descriptors.
struct SwiftSchemaWriter {
    static let lineLimit = 120
    /// Names a method or topic constant must not take: the `NamespaceSchema` members and the metatype names.
    static let reservedMemberNames: Set<String> = [
        "name", "version", "methods", "topics", "fileDescriptors", "info", "self", "Self", "Type", "Protocol", "init",
    ]
    static let keywords = swiftKeywordsUsedInDeclarations.union(swiftKeywordsUsedInStatements)
        .union(swiftKeywordsUsedInExpressionsAndTypes).union(swiftKeywordsReservedInParticularContexts)

    let file: FileDescriptor
    let namespaces: [NamespaceDeclaration]
    let options: SchemaGeneratorOptions
    let namer: SwiftProtobufNamer
    private var lines: [String] = []

    init(file: FileDescriptor, namespaces: [NamespaceDeclaration], options: SchemaGeneratorOptions) {
        self.file = file
        self.namespaces = namespaces
        self.options = options
        self.namer = SwiftProtobufNamer(currentFile: file, protoFileToModuleMappings: options.mappings)
    }

    /// The container enum's name: `SchemaName`, else the package's non-version components in
    /// UpperCamelCase followed by `Schema` (`mentory.v1` gives `MentorySchema`). A file that shares its
    /// package with the file declaring the schema options it imports (a second file of `mentory.v1`) is
    /// named after its file instead, since the package's name is that file's (`mentory_domain.proto`
    /// gives `MentoryDomainSchema`).
    static func schemaName(for file: FileDescriptor, options: SchemaGeneratorOptions) -> String {
        if let name = options.schemaName { return name }
        var parts = file.package.split(separator: ".").map(String.init)
        parts.removeAll { $0.range(of: #"^v[0-9]+([a-z]+[0-9]*)?$"#, options: .regularExpression) != nil }
        let sharesOptionsPackage = Self.optionsFile(importedBy: file).map { $0.package == file.package } ?? false
        if parts.isEmpty || sharesOptionsPackage {
            var base = file.name.split(separator: "/").last.map(String.init) ?? file.name
            if base.hasSuffix(".proto") { base.removeLast(".proto".count) }
            parts = [base]
        }
        return parts.map { NamingUtils.toUpperCamelCase($0) }.joined() + "Schema"
    }

    /// Whether `file` declares the schema options (mentory.proto, compiled into MentoryWire).
    static func declaresSchemaOptions(_ file: FileDescriptor) -> Bool {
        file.extensions.contains { $0.fullName == SchemaOptionNames.namespace }
    }

    /// The file declaring the schema options among those `file` imports, directly or not, when `file`
    /// is not it.
    static func optionsFile(importedBy file: FileDescriptor) -> FileDescriptor? {
        guard !Self.declaresSchemaOptions(file) else { return nil }
        return closure(of: file).first { Self.declaresSchemaOptions($0) }
    }

    /// Whether the generated file must `import MentoryWire`: as `ImportMentoryWire` says, else unless the
    /// file declares the schema options (mentory.proto, compiled into MentoryWire) or
    /// `ProtoPathModuleMappings` maps it to the module `MentoryWire`.
    static func importsMentoryWire(_ file: FileDescriptor, options: SchemaGeneratorOptions) -> Bool {
        if let explicit = options.importMentoryWire { return explicit }
        if options.mappings.moduleName(forFile: file) == "MentoryWire" { return false }
        return !Self.declaresSchemaOptions(file)
    }

    static func identifier(_ name: String) -> String {
        keywords.contains(name) ? "`\(name)`" : name
    }

    static func stringLiteral(_ value: String) -> String {
        var result = "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\\": result += "\\\\"
            case "\"": result += "\\\""
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F:
                result += "\\u{\(String(scalar.value, radix: 16))}"
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }

    /// The constant name of a topic: its name in lowerCamelCase followed by `Topic`.
    static func topicConstant(_ topic: String) -> String {
        let words = topic.split { !$0.isLetter && !$0.isNumber }.map(String.init)
        let camel = NamingUtils.toLowerCamelCase(words.joined(separator: "_"))
        return camel + "Topic"
    }

    /// Checks the Swift names the namespaces produce.
    func validateNames() throws(SchemaGenerationError) {
        var typeNames: Set<String> = []
        for namespace in self.namespaces {
            let context = "\(self.file.name): service \(namespace.service.name)"
            let containerMembers: Set = ["namespaces", "fileDescriptors", "self", "Self", "Type", "Protocol", "init"]
            guard !containerMembers.contains(namespace.service.name),
                typeNames.insert(namespace.service.name).inserted
            else {
                throw .message("\(context): the service's name clashes with another member of the schema enum")
            }
            var members: [String: String] = [:]
            for method in namespace.methods {
                if Self.reservedMemberNames.contains(method.name) {
                    throw .message(
                        "\(context): rpc \(method.name) would clash with the NamespaceSchema member "
                            + "\(namespace.service.name).\(method.name); choose another method name"
                    )
                }
                members[method.name] = "rpc \(method.name)"
            }
            for topic in namespace.topics {
                let constant = Self.topicConstant(topic.name)
                guard isValidSwiftIdentifier(constant) else {
                    throw .message("\(context): topic \"\(topic.name)\" gives no Swift name (\(constant))")
                }
                if let other = members.updateValue("topic \"\(topic.name)\"", forKey: constant) {
                    throw .message(
                        "\(context): topic \"\(topic.name)\" and \(other) both become "
                            + "\(namespace.service.name).\(constant)"
                    )
                }
            }
        }
    }

    mutating func write() -> String {
        let schema = Self.schemaName(for: self.file, options: self.options)
        let visibility = self.options.visibility
        let fileName = self.file.name
        self.lines = [
            "// DO NOT EDIT.",
            "// Generated by protoc-gen-mentory from \(fileName): edit that file and generate this one again.",
            "",
        ]
        var imports: Set<String> = ["SwiftProtobuf"]
        if Self.importsMentoryWire(self.file, options: self.options) { imports.insert("MentoryWire") }
        for module in self.options.mappings.neededModules(forFile: self.file) ?? [] { imports.insert(module) }
        for module in imports.sorted() { self.lines.append("import \(module)") }
        self.lines += [
            "",
            "/// The namespaces declared in `\(fileName)`, each as its `service` declares it.",
            "\(visibility) enum \(schema) {}",
        ]
        for namespace in self.namespaces {
            self.writeNamespace(namespace, schema: schema, visibility: visibility)
        }
        self.lines += ["", "extension \(schema) {", "    /// Every namespace the file declares, in declaration order."]
        self.appendList(
            prefix: "    \(visibility) static let namespaces: [NamespaceInfo] = ",
            items: self.namespaces.map { "\(Self.identifier($0.service.name)).info" },
            indent: "    "
        )
        self.lines += ["", "    /// The descriptors of \(fileName) and of every file it imports, dependencies first."]
        if let shared = self.sharedSchemaFile {
            // mentory.proto and its imports are MentoryWire's; refer to them instead of embedding them again.
            let sharedSchema = Self.schemaName(for: shared, options: SchemaGeneratorOptions())
            let sharedNames = Set(closure(of: shared).map(\.name))
            self.lines += [
                "    \(visibility) static let fileDescriptors = SchemaDescriptors(",
                "        base64Files: \(sharedSchema).fileDescriptors.base64Files + [",
            ]
            let embedded = closure(of: self.file).filter { !sharedNames.contains($0.name) }
            for dependency in embedded {
                self.appendBase64(dependency, indent: "            ", comma: embedded.count > 1)
            }
            self.lines += ["        ])", "}"]
        } else {
            self.lines.append("    \(visibility) static let fileDescriptors = SchemaDescriptors(base64Files: [")
            let embedded = closure(of: self.file)
            for dependency in embedded {
                self.appendBase64(dependency, indent: "        ", comma: embedded.count > 1)
            }
            self.lines += ["    ])", "}"]
        }
        return self.lines.joined(separator: "\n") + "\n"
    }

    /// The file declaring the schema options (mentory.proto, compiled into MentoryWire) when this
    /// file imports it and is not it: its descriptors are then `MentorySchema.fileDescriptors`.
    private var sharedSchemaFile: FileDescriptor? {
        Self.optionsFile(importedBy: self.file)
    }

    private mutating func writeNamespace(_ namespace: NamespaceDeclaration, schema: String, visibility: String) {
        let type = Self.identifier(namespace.service.name)
        let indent = "        "
        self.lines += ["", "extension \(schema) {"]
        self.lines.append(
            "    /// Namespace `\(namespace.name)`: service `\(namespace.service.name)` in \(self.file.name)."
        )
        self.appendComments(namespace.service, indent: "    ")
        self.lines += [
            "    \(visibility) enum \(type): NamespaceSchema {",
            "\(indent)\(visibility) static let name = \(Self.stringLiteral(namespace.name))",
            "\(indent)\(visibility) static let version: UInt32 = \(namespace.version)",
        ]
        for method in namespace.methods {
            let constant = Self.identifier(method.name)
            self.lines.append(
                "\(indent)/// `\(namespace.name).\(method.name)`: `\(method.inputType.fullName)` → "
                    + "`\(method.outputType.fullName)`."
            )
            self.appendComments(method, indent: indent)
            var call = "(name: \(Self.stringLiteral(method.name)))"
            if let privilege = namespace.privilege(of: method) {
                self.lines += [
                    "\(indent)///",
                    "\(indent)/// Privileged (`(mentory.v1.privilege) = \(privilege.name)`): the daemon refuses every",
                    "\(indent)/// other caller, whatever the access rules say.",
                ]
                call =
                    "(name: \(Self.stringLiteral(method.name)), privilege: "
                    + "\(self.namer.dottedRelativeName(enumValue: privilege)))"
            }
            self.appendDeclaration(
                "\(indent)\(visibility) static let \(constant) = ",
                generic: "MethodSchema",
                arguments: [
                    type, self.namer.fullName(message: method.inputType),
                    self.namer.fullName(message: method.outputType),
                ],
                call: call,
                indent: indent
            )
        }
        for topic in namespace.topics {
            self.lines.append(
                "\(indent)/// Topic `\(topic.name)`: changes `\(topic.change.fullName)`, "
                    + "snapshots `\(topic.snapshot.fullName)`."
            )
            self.appendDeclaration(
                "\(indent)\(visibility) static let \(Self.topicConstant(topic.name)) = ",
                generic: "TopicSchema",
                arguments: [
                    type, self.namer.fullName(message: topic.change), self.namer.fullName(message: topic.snapshot),
                ],
                call: topic.reads.isEmpty
                    ? "(name: \(Self.stringLiteral(topic.name)))"
                    : "(name: \(Self.stringLiteral(topic.name)), reads: ["
                        + topic.reads.map(Self.stringLiteral).joined(separator: ", ") + "])",
                indent: indent
            )
        }
        self.appendList(
            prefix: "\(indent)\(visibility) static let methods: [MethodInfo] = ",
            items: namespace.methods.map { "\(Self.identifier($0.name)).info" },
            indent: indent
        )
        self.appendList(
            prefix: "\(indent)\(visibility) static let topics: [TopicInfo] = ",
            items: namespace.topics.map { "\(Self.topicConstant($0.name)).info" },
            indent: indent
        )
        self.lines += [
            "\(indent)\(visibility) static var fileDescriptors: SchemaDescriptors { \(schema).fileDescriptors }",
            "    }",
            "}",
        ]
    }

    /// The proto source comments of a service or method, as `///` lines.
    private mutating func appendComments(_ element: some ProvidesSourceCodeLocation, indent: String) {
        let comments = element.protoSourceComments()
        guard !comments.isEmpty else { return }
        self.lines.append("\(indent)///")
        for line in comments.split(separator: "\n", omittingEmptySubsequences: false) where !line.isEmpty {
            self.lines.append(indent + line)
        }
    }

    /// `head` followed by `generic<arguments>call`: on one line if it fits, else with the value on the
    /// next line, else with the generic arguments on a line of their own.
    private mutating func appendDeclaration(
        _ head: String,
        generic: String,
        arguments: [String],
        call: String,
        indent: String
    ) {
        let value = "\(generic)<\(arguments.joined(separator: ", "))>\(call)"
        let continuation = indent + "    "
        if head.count + value.count <= Self.lineLimit {
            self.lines.append(head + value)
        } else if continuation.count + value.count <= Self.lineLimit {
            self.lines.append(String(head.dropLast()))
            self.lines.append(continuation + value)
        } else {
            self.lines.append(String(head.dropLast()))
            self.lines.append(continuation + generic + "<")
            self.lines.append(continuation + "    " + arguments.joined(separator: ", "))
            self.lines.append(continuation + ">" + call)
        }
    }

    /// An array literal after `prefix`, on one line if it fits, else one element a line.
    private mutating func appendList(prefix: String, items: [String], indent: String) {
        let oneLine = prefix + "[" + items.joined(separator: ", ") + "]"
        // swift-format breaks a collection literal that reaches the limit exactly.
        if oneLine.count < Self.lineLimit {
            self.lines.append(oneLine)
            return
        }
        self.lines.append(prefix + "[")
        for item in items { self.lines.append(indent + "    " + item + ",") }
        self.lines.append(indent + "]")
    }

    /// A file's descriptor, without source info, serialized and base64-encoded as a multi-line string
    /// literal whose line breaks are escaped (the value holds none). swift-format wants a comma after
    /// every element of a list of several, and none after the only one.
    private mutating func appendBase64(_ file: FileDescriptor, indent: String, comma: Bool) {
        let proto = file.extractProto()
        // Serializing a descriptor the plugin library decoded cannot fail.
        let encoded = ((try? proto.serializedBytes()) ?? Data()).base64EncodedString()
        let width = Self.lineLimit - indent.count - 1
        self.lines.append(indent + "// \(file.name)")
        self.lines.append(indent + "\"\"\"")
        var rest = Substring(encoded)
        while !rest.isEmpty {
            let chunk = rest.prefix(width)
            rest = rest.dropFirst(chunk.count)
            self.lines.append(indent + chunk + (rest.isEmpty ? "" : "\\"))
        }
        self.lines.append(indent + "\"\"\"" + (comma ? "," : ""))
    }
}
