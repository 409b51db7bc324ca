import MentoryDomain
import MentorySchemaGenerator
import MentoryWire
import SwiftProtobuf
import SwiftProtobufPluginLibrary
import Testing

/// protoc-gen-mentory's generator, run in-process on mentory.proto's and mentory_domain.proto's descriptors
/// (as embedded in MentorySchema and MentoryDomainSchema) and on variations of them.
@Suite("protoc-gen-mentory")
struct SchemaGeneratorTests {
    static let files = MentorySchema.fileDescriptors.files
    static var mentory: Google_Protobuf_FileDescriptorProto { Self.files.last! }
    /// mentory_domain.proto after its imports (mentory.proto and its own).
    static let domainFiles = MentoryDomainSchema.fileDescriptors.files

    /// The field number of the `mentory.v1` extension `name`, as mentory.proto declares it.
    static func optionNumber(_ name: String) -> Int {
        Int(Self.mentory.extension.first { $0.name == name }!.number)
    }

    static func field(_ number: Int, _ payload: [UInt8]) -> [UInt8] {
        varint(UInt64(number << 3 | 2)) + varint(UInt64(payload.count)) + payload
    }

    static func varint(_ value: UInt64) -> [UInt8] {
        var value = value
        var bytes: [UInt8] = []
        while value >= 0x80 {
            bytes.append(UInt8(value & 0x7F) | 0x80)
            value >>= 7
        }
        return bytes + [UInt8(value)]
    }

    /// Service options declaring `namespace` with `topics` (name, change, snapshot).
    static func options(namespace: String?, topics: [(String, String, String)] = []) throws
        -> Google_Protobuf_ServiceOptions
    {
        var bytes: [UInt8] = []
        if let namespace { bytes += field(optionNumber("namespace"), Array(namespace.utf8)) }
        for (name, change, snapshot) in topics {
            let topic = field(1, Array(name.utf8)) + field(2, Array(change.utf8)) + field(3, Array(snapshot.utf8))
            bytes += field(optionNumber("topic"), topic)
        }
        return try Google_Protobuf_ServiceOptions(serializedBytes: bytes)
    }

    /// Generates for the last of `protos`, with the other files as its imports.
    static func generate(
        _ protos: [Google_Protobuf_FileDescriptorProto],
        _ pairs: [(key: String, value: String)] = [("Visibility", "Public")]
    ) throws(SchemaGenerationError) -> [SchemaGenerator.Output] {
        let set = DescriptorSet(protos: protos)
        let options = try SchemaGeneratorOptions(pairs: pairs)
        return try SchemaGenerator.generate(files: [set.files.last!], options: options)
    }

    static func error(_ protos: [Google_Protobuf_FileDescriptorProto]) -> String? {
        do {
            _ = try Self.generate(protos)
            return nil
        } catch {
            return error.description
        }
    }

    /// mentory_domain.proto with `change` applied, after its imports.
    static func domainChanged(_ change: (inout Google_Protobuf_FileDescriptorProto) throws -> Void) rethrows
        -> [Google_Protobuf_FileDescriptorProto]
    {
        var proto = Self.domainFiles.last!
        try change(&proto)
        return Self.domainFiles.dropLast() + [proto]
    }

    /// mentory.proto with `change` applied.
    static func mentoryChanged(_ change: (inout Google_Protobuf_FileDescriptorProto) throws -> Void) rethrows
        -> [Google_Protobuf_FileDescriptorProto]
    {
        var proto = Self.mentory
        try change(&proto)
        return Self.files.dropLast() + [proto]
    }

    @Test("mentory.proto gives MentorySchema, its namespaces and its descriptors")
    func mentorySchema() throws {
        let outputs = try Self.generate(Self.files, [("Visibility", "Public"), ("FileNaming", "DropPath")])
        let output = try #require(outputs.first)
        #expect(outputs.count == 1)
        #expect(output.name == "mentory.schema.swift")
        let text = output.contents
        #expect(text.contains("public enum MentorySchema {}"))
        #expect(!text.contains("import MentoryWire"))
        #expect(!text.contains("Diary"), "the domain's namespaces are mentory_domain.proto's")
        #expect(text.contains("Debug, SwiftProtobuf.Google_Protobuf_UInt32Value, Mentory_V1_Empty"))
        #expect(text.contains(">(name: \"freezeEngine\", privilege: .root)"))
        #expect(text.contains(">(name: \"reload\", privilege: .owner)"))
        #expect(text.contains(">(name: \"backup\", privilege: .owner)"))
        #expect(text.contains("public static let ping = "))
        for namespace in MentorySchema.namespaces {
            for method in namespace.methods {
                let privilege = method.privilege == .unspecified ? "" : ", privilege: "
                #expect(text.contains("(name: \"\(method.name)\"\(privilege)"))
            }
        }
        let longest = text.split(separator: "\n").map(\.count).max() ?? 0
        #expect(longest <= 120)
        // Each embedded file is the input file, re-encoded without line breaks.
        let embedded = MentorySchema.fileDescriptors.base64Files
        let literal = text.replacingOccurrences(of: "\\\n", with: "").replacingOccurrences(of: " ", with: "")
        for file in embedded { #expect(literal.contains(file)) }
    }

    @Test("mentory_domain.proto gives MentoryDomainSchema, importing MentoryWire and reusing its descriptors")
    func domainSchema() throws {
        let pairs = [("Visibility", "Public"), ("FileNaming", "DropPath")]
        let output = try #require(try Self.generate(Self.domainFiles, pairs).first)
        #expect(output.name == "mentory_domain.schema.swift")
        let text = output.contents
        #expect(text.contains("public enum MentoryDomainSchema {}"))
        #expect(text.contains("import MentoryWire\n"))
        #expect(
            text.contains(
                "public static let add = "
                    + "MethodSchema<Diary, Mentory_V1_DiaryAddRequest, Mentory_V1_DiaryEntry>(name: \"add\")"
            )
        )
        #expect(text.contains("public static let diaryTopic ="))
        #expect(text.contains("public static let `get` = "))
        #expect(text.contains("base64Files: MentorySchema.fileDescriptors.base64Files + ["))
    }

    @Test("Markdown output lists every method and topic")
    func markdown() throws {
        let output = try #require(try Self.generate(Self.files, [("Output", "Markdown")]).first)
        #expect(output.name == "mentory.namespaces.md")
        #expect(output.contents.contains("| `freezeEngine` | `google.protobuf.UInt32Value` | `Empty` |"))
        #expect(output.contents.contains("| `DaemonReloadReply` | `PRIVILEGE_OWNER` |"))
        #expect(output.contents.contains("| `Empty` | `PRIVILEGE_ROOT` |"))
        #expect(output.contents.contains("| `ping` | `Empty` | `Empty` |  |"), "no privilege: an empty cell")
        #expect(!output.contents.contains("| topic |"), "no namespace of mentory.proto publishes: no topic table")
        let domain = try #require(try Self.generate(Self.domainFiles, [("Output", "Markdown")]).first)
        #expect(domain.name == "mentory_domain.namespaces.md")
        #expect(domain.contents.contains("| `diary` | 1 | `add` | `DiaryAddRequest` | `DiaryEntry` |  |"))
        #expect(domain.contents.contains("| `diary` | `diary` | `DiaryChange` | `DiarySnapshot` |"))
    }

    /// Method options declaring `(mentory.v1.privilege) = value`.
    static func privilegeOptions(_ value: UInt64) throws -> Google_Protobuf_MethodOptions {
        try Google_Protobuf_MethodOptions(
            serializedBytes: varint(UInt64(optionNumber("privilege") << 3)) + varint(value))
    }

    @Test("(privilege) on an rpc becomes its MethodSchema's privilege; an undeclared value fails, naming the values")
    func privilege() throws {
        let rooted = try Self.domainChanged { proto in
            let diary = proto.service.firstIndex { $0.name == "Diary" }!
            proto.service[diary].method[0].options = try Self.privilegeOptions(2)
        }
        let text = try #require(try Self.generate(rooted).first).contents
        #expect(text.contains("(name: \"add\", privilege: .root)"))
        #expect(text.contains("PRIVILEGE_ROOT`): the daemon refuses every"))
        let unknown = try Self.domainChanged { proto in
            let diary = proto.service.firstIndex { $0.name == "Diary" }!
            proto.service[diary].method[0].options = try Self.privilegeOptions(9)
        }
        let error = try #require(Self.error(unknown))
        #expect(error.contains("rpc add"), "\(error)")
        #expect(error.contains("PRIVILEGE_OWNER"), "\(error)")
    }

    @Test("Markdown output also lists every message and enum as .proto source, for docs/PROTOCOL.md")
    func messageListings() throws {
        let outputs = try Self.generate(Self.files, [("Output", "Markdown")])
        let listings = try #require(outputs.first { $0.name == "mentory.messages.txt" })
        #expect(listings.contents.contains("@@ Request\nmessage Request {\n"))
        #expect(listings.contents.contains("  uint32 timeout_ms = 5;\n"))
        #expect(listings.contents.contains("  oneof result {\n    bytes body = 2;\n"))
        #expect(listings.contents.contains("@@ ErrorCode\nenum ErrorCode {\n"))
        let domain = try Self.generate(Self.domainFiles, [("Output", "Markdown")])
        let domainListings = try #require(domain.first { $0.name == "mentory_domain.messages.txt" })
        #expect(domainListings.contents.contains("@@ DiaryEntry\nmessage DiaryEntry {\n"))
        #expect(domainListings.contents.contains("  optional string analysis = 7;\n"))
        #expect(!domainListings.contents.contains("@@ Request\n"))
    }

    @Test("a service without (namespace) beside ones with it fails, naming it")
    func missingNamespace() throws {
        let protos = Self.mentoryChanged { $0.service[1].options = Google_Protobuf_ServiceOptions() }
        let message = try #require(Self.error(protos))
        #expect(message.contains("mentory.proto: service Storage has no (mentory.v1.namespace) option"))
    }

    @Test("a file without namespaces gives no output")
    func noNamespaces() throws {
        let protos = Self.mentoryChanged { proto in
            for index in proto.service.indices { proto.service[index].options = Google_Protobuf_ServiceOptions() }
        }
        #expect(try Self.generate(protos).isEmpty)
    }

    @Test("repeated namespace, method and topic names fail")
    func duplicates() throws {
        let namespace = try Self.domainChanged { $0.service[1].options = try Self.options(namespace: "mentor") }
        #expect(Self.error(namespace)?.contains("namespace \"mentor\" is already declared by service Mentor") == true)

        let method = Self.domainChanged { $0.service[2].method.append($0.service[2].method[0]) }
        #expect(Self.error(method)?.contains("service Diary: method \"add\" is declared twice") == true)

        let topic = try Self.domainChanged { proto in
            proto.service.append(proto.service[0])
            proto.service[3].name = "Daemon"
            proto.service[3].options = try Self.options(
                namespace: "daemon",
                topics: [("diary", "mentory.v1.DiaryChange", "mentory.v1.DiarySnapshot")]
            )
        }
        #expect(
            Self.error(topic)?.contains("service Daemon: topic \"diary\" is already declared by service Diary") == true)
    }

    @Test("a topic whose message is not declared fails, naming it")
    func unknownTopicMessage() throws {
        let protos = try Self.mentoryChanged { proto in
            proto.service[2].options = try Self.options(
                namespace: "daemon",
                topics: [("daemon", "mentory.v1.DaemonChange", "mentory.v1.Empty")]
            )
        }
        let message = try #require(Self.error(protos))
        #expect(message.contains("service Daemon: topic \"daemon\": change message \"mentory.v1.DaemonChange\""))
        #expect(message.contains("is not declared in mentory.proto or the files it imports"))
    }

    @Test("a method whose Swift name would clash with a NamespaceSchema member fails")
    func clash() throws {
        let protos = Self.mentoryChanged { $0.service[2].method[0].name = "version" }
        #expect(Self.error(protos)?.contains("rpc version would clash with the NamespaceSchema member") == true)
    }

    @Test("unknown options and values fail, naming the accepted ones")
    func badOptions() {
        #expect(throws: SchemaGenerationError.self) { try SchemaGeneratorOptions(pairs: [("Visibility", "Open")]) }
        #expect(throws: SchemaGenerationError.self) { try SchemaGeneratorOptions(pairs: [("Colour", "Blue")]) }
        #expect(throws: SchemaGenerationError.self) { try SchemaGeneratorOptions(pairs: [("SchemaName", "a b")]) }
    }

    @Test("a file of another package that imports mentory.proto imports MentoryWire and names its own schema")
    func thirdParty() throws {
        var greeter = Google_Protobuf_FileDescriptorProto()
        greeter.name = "acme/greeter.proto"
        greeter.package = "acme.greeter.v1beta1"
        greeter.syntax = "proto3"
        greeter.dependency = ["mentory.proto"]
        var request = Google_Protobuf_DescriptorProto()
        request.name = "HelloRequest"
        greeter.messageType = [request]
        var service = Google_Protobuf_ServiceDescriptorProto()
        service.name = "Greeter"
        service.options = try Self.options(
            namespace: "greeter",
            topics: [("greetings", ".acme.greeter.v1beta1.HelloRequest", "mentory.v1.Empty")]
        )
        var method = Google_Protobuf_MethodDescriptorProto()
        method.name = "hello"
        method.inputType = ".acme.greeter.v1beta1.HelloRequest"
        method.outputType = ".mentory.v1.Empty"
        service.method = [method]
        greeter.service = [service]

        let output = try #require(try Self.generate(Self.files + [greeter], []).first)
        #expect(output.name == "acme/greeter.schema.swift")
        #expect(output.contents.contains("import MentoryWire\n"))
        #expect(output.contents.contains("enum AcmeGreeterSchema {}"))
        #expect(
            output.contents.contains(
                "MethodSchema<Greeter, Acme_Greeter_V1beta1_HelloRequest, Mentory_V1_Empty>(name: \"hello\")"
            )
        )
        #expect(!output.contents.contains("public "))

        let renamed = try #require(
            try Self.generate(Self.files + [greeter], [("SchemaName", "Greetings"), ("ImportMentoryWire", "false")])
                .first
        )
        #expect(renamed.contents.contains("enum Greetings {}"))
        #expect(!renamed.contents.contains("import MentoryWire"))
    }

    @Test(
        "a second file of mentory.proto's package imports MentoryWire, is named after its file and reuses MentorySchema's descriptors"
    )
    func secondFileOfThePackage() throws {
        var domain = Google_Protobuf_FileDescriptorProto()
        domain.name = "mentory_domain.proto"
        domain.package = "mentory.v1"
        domain.syntax = "proto3"
        domain.dependency = ["mentory.proto"]
        var note = Google_Protobuf_DescriptorProto()
        note.name = "Note"
        domain.messageType = [note]
        var service = Google_Protobuf_ServiceDescriptorProto()
        service.name = "Notes"
        service.options = try Self.options(
            namespace: "notes", topics: [("notes", ".mentory.v1.Note", ".mentory.v1.Note")])
        var method = Google_Protobuf_MethodDescriptorProto()
        method.name = "add"
        method.inputType = ".mentory.v1.Note"
        method.outputType = ".mentory.v1.Empty"
        service.method = [method]
        domain.service = [service]

        let output = try #require(try Self.generate(Self.files + [domain]).first)
        #expect(output.name == "mentory_domain.schema.swift")
        #expect(output.contents.contains("import MentoryWire\n"))
        #expect(output.contents.contains("public enum MentoryDomainSchema {}"))
        #expect(!output.contents.contains("enum MentorySchema {}"))
        #expect(output.contents.contains("MethodSchema<Notes, Mentory_V1_Note, Mentory_V1_Empty>(name: \"add\")"))
        #expect(output.contents.contains("base64Files: MentorySchema.fileDescriptors.base64Files + ["))
    }
}
