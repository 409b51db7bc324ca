import Foundation
import SwiftProtobuf
import SwiftProtobufPluginLibrary

/// One `service` carrying `(mentory.v1.namespace)`, read and checked.
public struct NamespaceDeclaration {
    /// One topic of the namespace, its messages resolved.
    public struct Topic {
        public var name: String
        public var change: Descriptor
        public var snapshot: Descriptor
        /// The methods (`namespace.method`) a subscriber must be allowed to call: `TopicDeclaration.reads`.
        public var reads: [String] = []
    }

    public var service: ServiceDescriptor
    /// The namespace's name on the wire.
    public var name: String
    public var version: UInt32
    public var methods: [MethodDescriptor]
    public var topics: [Topic]
    /// The `(mentory.v1.privilege)` of each method declaring one other than `PRIVILEGE_UNSPECIFIED`,
    /// by method name: who may call it whatever the access rules say.
    public var privileges: [String: EnumValueDescriptor] = [:]

    /// The privilege `method` declares, `nil` when it declares none (anyone the access rules allow).
    public func privilege(of method: MethodDescriptor) -> EnumValueDescriptor? {
        self.privileges[method.name]
    }
}

/// The names under which `mentory.proto` declares the schema options.
enum SchemaOptionNames {
    static let namespace = "mentory.v1.namespace"
    static let namespaceVersion = "mentory.v1.namespace_version"
    static let topic = "mentory.v1.topic"
    static let extendee = "google.protobuf.ServiceOptions"
    static let privilege = "mentory.v1.privilege"
    static let methodExtendee = "google.protobuf.MethodOptions"
}

/// The schema option extensions as a file and its imports declare them.
///
/// The field numbers are read from the declarations themselves (the `extend
/// google.protobuf.ServiceOptions` block in mentory.proto), so they are written down only there; the
/// plugin then decodes the options from the services' unknown option fields.
struct SchemaOptionFields {
    var namespace: Int
    var namespaceVersion: Int?
    var topic: Int?
    /// `TopicDeclaration`'s field numbers for `name`, `change`, `snapshot` and `reads`.
    var topicName: Int?
    var topicChange: Int?
    var topicSnapshot: Int?
    var topicReads: Int?
    /// The method option `(mentory.v1.privilege)`, when the files declare it (an older mentory.proto does not).
    var privilege: FieldDescriptor?

    /// The declarations visible from `file`, or `nil` when `file` cannot use the options.
    init?(visibleFrom file: FileDescriptor) {
        var found: [String: FieldDescriptor] = [:]
        for candidate in closure(of: file) {
            for field in candidate.extensions where field.containingType.fullName == SchemaOptionNames.extendee {
                found[field.fullName] = field
            }
            for field in candidate.extensions
            where field.containingType.fullName == SchemaOptionNames.methodExtendee
                && field.fullName == SchemaOptionNames.privilege && field.type == .enum
            {
                self.privilege = field
            }
        }
        guard let namespace = found[SchemaOptionNames.namespace] else { return nil }
        self.namespace = Int(namespace.number)
        self.namespaceVersion = found[SchemaOptionNames.namespaceVersion].map { Int($0.number) }
        if let topic = found[SchemaOptionNames.topic] {
            self.topic = Int(topic.number)
            if topic.type == .message, let declaration = topic.messageType {
                for field in declaration.fields {
                    switch field.name {
                    case "name": self.topicName = Int(field.number)
                    case "change": self.topicChange = Int(field.number)
                    case "snapshot": self.topicSnapshot = Int(field.number)
                    case "reads": self.topicReads = Int(field.number)
                    default: break
                    }
                }
            }
        }
    }
}

/// `file` and every file it imports, transitively; dependencies before dependents, each once.
func closure(of file: FileDescriptor) -> [FileDescriptor] {
    var seen: Set<String> = []
    var ordered: [FileDescriptor] = []
    func visit(_ file: FileDescriptor) {
        guard seen.insert(file.name).inserted else { return }
        for dependency in file.dependencies { visit(dependency) }
        ordered.append(file)
    }
    visit(file)
    return ordered
}

/// Every message declared in `files`, nested ones included, by full name (no leading dot).
func messagesByName(in files: [FileDescriptor]) -> [String: Descriptor] {
    var result: [String: Descriptor] = [:]
    func add(_ message: Descriptor) {
        result[message.fullName] = message
        message.messages.forEach(add)
    }
    for file in files { file.messages.forEach(add) }
    return result
}

/// Reads and checks the namespaces `file` declares.
///
/// Returns an empty list for a file without any service carrying `(mentory.v1.namespace)`. Throws,
/// naming the file, service and what to fix, for: a service without `(namespace)` beside ones with it,
/// an empty or repeated namespace name, a repeated method or topic name, a streaming rpc, and a topic
/// whose change or snapshot message is not declared in the file or the files it imports.
public func namespaceDeclarations(in file: FileDescriptor) throws(SchemaGenerationError) -> [NamespaceDeclaration] {
    guard !file.services.isEmpty, let fields = SchemaOptionFields(visibleFrom: file) else { return [] }
    let options = try file.services.map { service throws(SchemaGenerationError) in
        (service, try ServiceSchemaOptions(service.options.unknownFields.data, fields: fields, file: file.name))
    }
    let withNamespace = options.filter { $0.1.namespace != nil }
    guard !withNamespace.isEmpty else { return [] }
    if let missing = options.first(where: { $0.1.namespace == nil }) {
        throw .message(
            "\(file.name): service \(missing.0.name) has no (mentory.v1.namespace) option; every service in a "
                + "file with namespaces must declare one, e.g. "
                + "option (mentory.v1.namespace) = \"\(missing.0.name.lowercased())\";"
        )
    }
    let messages = messagesByName(in: closure(of: file))
    var namespaceNames: [String: String] = [:]
    var topicNames: [String: String] = [:]
    var declarations: [NamespaceDeclaration] = []
    for (service, option) in options {
        let context = "\(file.name): service \(service.name)"
        let name = option.namespace ?? ""
        guard !name.isEmpty else { throw .message("\(context): (mentory.v1.namespace) is empty") }
        if let other = namespaceNames.updateValue(service.name, forKey: name) {
            throw .message("\(context): namespace \"\(name)\" is already declared by service \(other)")
        }
        var methodNames: Set<String> = []
        var privileges: [String: EnumValueDescriptor] = [:]
        for method in service.methods {
            guard methodNames.insert(method.name).inserted else {
                throw .message("\(context): method \"\(method.name)\" is declared twice")
            }
            if let privilege = try methodPrivilege(method, fields: fields, context: context) {
                privileges[method.name] = privilege
            }
            if method.clientStreaming || method.serverStreaming {
                throw .message(
                    "\(context): rpc \(method.name) streams; mentoryd methods take one request and one reply")
            }
        }
        var topics: [NamespaceDeclaration.Topic] = []
        for topic in option.topics {
            guard !topic.name.isEmpty else { throw .message("\(context): a (mentory.v1.topic) has no name") }
            if let other = topicNames.updateValue(service.name, forKey: topic.name) {
                throw .message("\(context): topic \"\(topic.name)\" is already declared by service \(other)")
            }
            func resolve(_ messageName: String, _ role: String) throws(SchemaGenerationError) -> Descriptor {
                let trimmed = messageName.hasPrefix(".") ? String(messageName.dropFirst()) : messageName
                guard let message = messages[trimmed] else {
                    throw .message(
                        "\(context): topic \"\(topic.name)\": \(role) message \"\(messageName)\" is not declared in "
                            + "\(file.name) or the files it imports; give a message's full name, "
                            + "package included (\"mentory.v1.DiaryChange\")"
                    )
                }
                return message
            }
            for read in topic.reads {
                let parts = read.split(separator: ".", omittingEmptySubsequences: false)
                guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else {
                    throw .message(
                        "\(context): topic \"\(topic.name)\": reads \"\(read)\" must name one method as "
                            + "namespace.method, e.g. reads: \"diary.list\"")
                }
            }
            topics.append(
                .init(
                    name: topic.name,
                    change: try resolve(topic.change, "change"),
                    snapshot: try resolve(topic.snapshot, "snapshot"),
                    reads: topic.reads
                )
            )
        }
        declarations.append(
            NamespaceDeclaration(
                service: service,
                name: name,
                version: option.version,
                methods: service.methods,
                topics: topics,
                privileges: privileges
            )
        )
    }
    return declarations
}

/// The `(mentory.v1.privilege)` `method` declares, decoded from its options' unknown fields; `nil` for
/// none or `PRIVILEGE_UNSPECIFIED`. Throws for a number the `Privilege` enum does not declare.
func methodPrivilege(
    _ method: MethodDescriptor, fields: SchemaOptionFields, context: String
) throws(SchemaGenerationError) -> EnumValueDescriptor? {
    guard let field = fields.privilege, let values = field.enumType else { return nil }
    var number: Int32?
    do {
        for option in try WireFields(method.options.unknownFields.data) where option.number == Int(field.number) {
            number = Int32(truncatingIfNeeded: try option.varint())
        }
    } catch {
        throw .message("\(context): cannot decode the options of rpc \(method.name): \(error)")
    }
    guard let number, number != 0 else { return nil }
    guard let value = values.values.first(where: { $0.number == number }) else {
        throw .message(
            "\(context): rpc \(method.name): (mentory.v1.privilege) = \(number) is not a value of "
                + "\(values.fullName); use one of \(values.values.map(\.name).joined(separator: ", "))")
    }
    return value
}

/// The schema options of one service, decoded from its options' unknown fields.
struct ServiceSchemaOptions {
    struct Topic {
        var name = ""
        var change = ""
        var snapshot = ""
        var reads: [String] = []
    }

    var namespace: String?
    var version: UInt32 = 0
    var topics: [Topic] = []

    init(_ data: Data, fields: SchemaOptionFields, file: String) throws(SchemaGenerationError) {
        do {
            for field in try WireFields(data) {
                switch field.number {
                case fields.namespace:
                    self.namespace = try field.string()
                case fields.namespaceVersion:
                    self.version = UInt32(truncatingIfNeeded: try field.varint())
                case fields.topic:
                    var topic = Topic()
                    for inner in try WireFields(try field.bytes()) {
                        switch inner.number {
                        case fields.topicName: topic.name = try inner.string()
                        case fields.topicChange: topic.change = try inner.string()
                        case fields.topicSnapshot: topic.snapshot = try inner.string()
                        case fields.topicReads: topic.reads.append(try inner.string())
                        default: break
                        }
                    }
                    self.topics.append(topic)
                default:
                    break
                }
            }
        } catch {
            throw .message("\(file): cannot decode a service's options: \(error)")
        }
    }
}

/// The fields of a serialized protobuf message, in order.
struct WireFields: Sequence {
    enum DecodingError: Error, CustomStringConvertible {
        case truncated
        case unsupportedWireType(Int)
        case wrongWireType(field: Int)
        case invalidUTF8(field: Int)

        var description: String {
            switch self {
            case .truncated: return "truncated field"
            case .unsupportedWireType(let type): return "unsupported wire type \(type)"
            case .wrongWireType(let field): return "field \(field) has an unexpected wire type"
            case .invalidUTF8(let field): return "field \(field) is not UTF-8"
            }
        }
    }

    struct Field {
        var number: Int
        var wireType: Int
        var payload: Data
        var value: UInt64

        func varint() throws(DecodingError) -> UInt64 {
            guard self.wireType == 0 else { throw .wrongWireType(field: self.number) }
            return self.value
        }

        func bytes() throws(DecodingError) -> Data {
            guard self.wireType == 2 else { throw .wrongWireType(field: self.number) }
            return self.payload
        }

        func string() throws(DecodingError) -> String {
            guard let string = String(data: try self.bytes(), encoding: .utf8) else {
                throw .invalidUTF8(field: self.number)
            }
            return string
        }
    }

    private let fields: [Field]

    init(_ data: Data) throws(DecodingError) {
        let bytes = [UInt8](data)
        var index = 0
        func varint() throws(DecodingError) -> UInt64 {
            var result: UInt64 = 0
            var shift: UInt64 = 0
            while true {
                guard index < bytes.count, shift < 64 else { throw .truncated }
                let byte = bytes[index]
                index += 1
                result |= UInt64(byte & 0x7F) << shift
                if byte & 0x80 == 0 { return result }
                shift += 7
            }
        }
        var fields: [Field] = []
        while index < bytes.count {
            let key = try varint()
            let number = Int(key >> 3)
            let wireType = Int(key & 7)
            switch wireType {
            case 0:
                fields.append(Field(number: number, wireType: 0, payload: Data(), value: try varint()))
            case 1, 5:
                let size = wireType == 1 ? 8 : 4
                guard index + size <= bytes.count else { throw .truncated }
                index += size
            case 2:
                let length = try varint()
                guard length <= UInt64(bytes.count - index) else { throw .truncated }
                let end = index + Int(length)
                fields.append(Field(number: number, wireType: 2, payload: Data(bytes[index..<end]), value: 0))
                index = end
            default:
                throw .unsupportedWireType(wireType)
            }
        }
        self.fields = fields
    }

    func makeIterator() -> IndexingIterator<[Field]> { self.fields.makeIterator() }
}
