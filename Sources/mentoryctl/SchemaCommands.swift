import ArgumentParser
import Foundation
import MentoryClient
import MentoryDescriptors
import MentoryWire
import SwiftProtobuf

/// `mentoryctl describe`: the daemon's namespaces, as `session.describe` reports them.
struct Describe: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "describe",
        abstract: "List the daemon's namespaces: methods, topics and versions, and the messages they use.",
        discussion: """
            Every namespace the daemon serves, built in or not, with each method's request and reply \
            message and each topic's change and snapshot message. Naming a namespace also lists the \
            fields of its request messages, as `call` takes them in JSON. With --json the whole \
            session.describe reply is printed, the protobuf descriptors included.
            """
    )

    @ParentCommand var mentoryctl: Mentoryctl
    var options: ClientOptions { self.mentoryctl.options }

    @Argument(help: "Only this namespace (default: every namespace).")
    var namespace: String?

    func run() throws {
        try self.options.withConnection { client in
            let reply = try client.describe(namespace: self.namespace ?? "")
            if self.options.json {
                Output.printJSON(reply)
                return
            }
            if let namespace = self.namespace, !reply.namespaces.contains(where: { $0.namespace == namespace }) {
                let known = reply.namespaces.map(\.namespace).joined(separator: ", ")
                Output.error("the daemon has no namespace '\(namespace)'" + (known.isEmpty ? "" : "; it has \(known)"))
                throw ExitCode.failure
            }
            let pool: DescriptorPool?
            do {
                pool = try DescriptorPool(reply.descriptors)
            } catch let error as DescriptorError {
                Output.error("the daemon's descriptors are unusable (\(error.message)); listing names only")
                pool = nil
            }
            print(Self.render(reply.namespaces, pool: pool, withFields: self.namespace != nil), terminator: "")
        }
    }

    static func render(
        _ namespaces: [Mentory_V1_NamespaceDescription], pool: DescriptorPool?, withFields: Bool
    ) -> String {
        var text = ""
        for namespace in namespaces {
            text += "\(namespace.namespace) (version \(namespace.version))\n"
            let width = (namespace.methods.map(\.name.count) + namespace.topics.map(\.name.count)).max() ?? 0
            func padded(_ name: String) -> String { name + String(repeating: " ", count: width - name.count) }
            for method in namespace.methods {
                text += "  \(padded(method.name))  \(method.request) -> \(method.reply)\(Self.note(method.privilege))\n"
            }
            for topic in namespace.topics {
                text += "  \(padded(topic.name))  topic: changes \(topic.change), snapshots \(topic.snapshot)\n"
            }
            if withFields, let pool {
                text += Self.messages(namespace.methods.map(\.request), pool: pool)
            }
        }
        return text
    }

    /// How `describe` notes a privileged method: who alone may call it.
    static func note(_ privilege: Mentory_V1_Privilege) -> String {
        switch privilege {
        case .unspecified: ""
        case .owner: "  (privileged: root and the daemon's user only)"
        case .root: "  (privileged: root only)"
        case .UNRECOGNIZED(let value): "  (privileged: \(value))"
        }
    }

    /// The fields of `roots` and of the messages they contain, each message once.
    private static func messages(_ roots: [String], pool: DescriptorPool) -> String {
        var text = ""
        var seen: Set<String> = []
        var queue = roots
        while !queue.isEmpty {
            let name = queue.removeFirst()
            guard seen.insert(name).inserted, let message = pool.message(named: name), !message.isMapEntry else {
                continue
            }
            text += "\n  message \(name)" + (message.fields.isEmpty ? " (no fields: {})\n" : "\n")
            let width = message.fields.map(\.jsonName.count).max() ?? 0
            for field in message.fields {
                var (type, nested) = Self.typeName(field, pool: pool)
                if let oneof = field.oneofIndex { type += "  (oneof \(message.oneofs[oneof]))" }
                text += "    \(field.jsonName)\(String(repeating: " ", count: width - field.jsonName.count))  \(type)\n"
                // Well-known types are written as JSON values; their fields are not listed.
                queue += nested.filter { !$0.hasPrefix("google.protobuf.") }
            }
        }
        return text
    }

    private static func typeName(_ field: FieldDescriptor, pool: DescriptorPool) -> (String, [String]) {
        if let entry = pool.mapEntry(of: field), let key = entry.field(number: 1), let value = entry.field(number: 2) {
            let (valueType, nested) = Self.typeName(value, pool: pool)
            return ("map<\(Self.typeName(key, pool: pool).0), \(valueType)>", nested)
        }
        var name: String
        var nested: [String] = []
        switch field.kind {
        case .message(let message), .group(let message):
            name = message
            nested = [message]
        case .enumeration(let enumName):
            let values = pool.enumType(named: enumName)?.values.map(\.name) ?? []
            name = "\(enumName) (\(values.joined(separator: ", ")))"
        default:
            name = "\(field.kind)"
        }
        if field.isRepeated {
            name = "repeated " + name
        } else if field.hasPresence, field.oneofIndex == nil, !nested.contains(name) {
            name = "optional " + name
        }
        return (name, nested)
    }
}

/// `mentoryctl call`: any method of any namespace, with a JSON body.
struct Call: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "call",
        abstract: "Call any method of any namespace with a proto3-JSON request; print the reply as JSON.",
        discussion: """
            The request and reply messages come from the daemon's session.describe, so this works for \
            every namespace the daemon serves, including ones this mentoryctl was not built with. The \
            body is proto3 JSON (field names as `mentoryctl describe NAMESPACE` lists them; 64-bit \
            integers as strings or numbers; enums by name or number) and defaults to {}; `-` reads it \
            from standard input. The reply is printed as proto3 JSON, indented, or on one line with \
            --json. When the daemon answers with an error, the code, its name and the message go to \
            standard error and the exit status is 1; a body that does not fit the request message exits 64. \
            Example: mentoryctl call diary.get '{"id": "ENTRY-ID"}'.
            """
    )

    @ParentCommand var mentoryctl: Mentoryctl
    var options: ClientOptions { self.mentoryctl.options }

    @Argument(help: "The method, as NAMESPACE.METHOD (e.g. diary.list).")
    var method: String

    @Argument(help: "The request as proto3 JSON, or - to read it from standard input.")
    var body: String = "{}"

    func validate() throws {
        guard let dot = self.method.firstIndex(of: "."), dot != self.method.startIndex,
            self.method.index(after: dot) != self.method.endIndex
        else {
            throw ValidationError("name the method as NAMESPACE.METHOD, e.g. diary.list; not '\(self.method)'")
        }
    }

    func run() throws {
        let dot = self.method.firstIndex(of: ".")!
        let namespace = String(self.method[..<dot])
        let method = String(self.method[self.method.index(after: dot)...])
        let json = try self.readBody()
        try self.options.withConnection { client in
            // A namespace the daemon does not serve fails here, with the daemon's own error.
            let schema = try Self.reportingFailure(of: "\(namespace).\(method)", json: self.options.json) {
                try DaemonSchema.fetch(client, namespace: namespace)
            }
            let reply: Data
            let replyMessage: String?
            if let description = schema.namespace(namespace)?.methods.first(where: { $0.name == method }) {
                let request: Data
                do {
                    request = try schema.pool.binary(fromJSON: json, messageName: description.request)
                } catch let error as DescriptorError {
                    Output.error("the body is not a valid \(description.request): \(error.message)")
                    throw ExitCode(64)
                }
                reply = try self.call(client, namespace, method, request)
                replyMessage = description.reply
            } else {
                // Not described: the daemon itself says what is wrong (unknown namespace or method).
                // Only an empty body can be sent without knowing the request message.
                guard Self.isEmptyObject(json) else {
                    let known = schema.namespace(namespace).map { described in
                        described.methods.isEmpty
                            ? "namespace '\(namespace)' describes no methods yet: it is served by a plugin that has"
                                + " not registered with this daemon since its state directory was created, so the"
                                + " body cannot be encoded (mentoryctl status shows the plugin; start it)"
                            : "namespace '\(namespace)' has no method '\(method)'; its methods: "
                                + described.methods.map(\.name).joined(separator: ", ")
                    }
                    Output.error(
                        known ?? "the daemon describes no namespace '\(namespace)', so the body cannot be encoded")
                    throw ExitCode.failure
                }
                reply = try self.call(client, namespace, method, Data())
                replyMessage = nil
            }
            guard let replyMessage else {
                print(reply.isEmpty ? "{}" : "\"\(reply.base64EncodedString())\"")
                return
            }
            do {
                print(
                    try schema.pool.jsonString(
                        fromBinary: reply, messageName: replyMessage,
                        options: JSONOutputOptions(pretty: !self.options.json)))
            } catch let error as DescriptorError {
                Output.error("the reply is not a valid \(replyMessage): \(error.message)")
                throw ExitCode.failure
            }
        }
    }

    /// Calls, printing a daemon error as `error CODE NAME: message` and exiting 1.
    private func call(_ client: BlockingMentoryConnection, _ namespace: String, _ method: String, _ body: Data) throws
        -> Data
    {
        try Self.reportingFailure(of: "\(namespace).\(method)", json: self.options.json) {
            try client.call(namespace, method, body: body)
        }
    }

    /// Runs `body`, printing a daemon error as `NAMESPACE.METHOD failed: error CODE NAME: message (reason R)` and
    /// exiting 1; with `json`, the error also goes to standard output as `{"error": {code, message, reason}}`.
    private static func reportingFailure<T>(of call: String, json: Bool, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as MentoryClientError {
            guard case .remote(let code, let message, let reason) = error, error.remoteCode != .startupFailed else {
                throw error
            }
            Output.error(
                "\(call) failed: error \(code) \(DaemonSchema.errorName(code)): \(message)"
                    + (reason.isEmpty ? "" : " (reason \(reason))"))
            if json, let wire = error.remoteError { Output.line(Output.errorJSON(wire)) }
            throw ExitCode.failure
        }
    }

    private func readBody() throws -> Data {
        guard self.body == "-" else { return Data(self.body.utf8) }
        let limit = TranscodingLimits().maxJSONBytes
        var data = Data()
        while let chunk = try FileHandle.standardInput.read(upToCount: 1 << 16), !chunk.isEmpty {
            data += chunk
            guard data.count <= limit else {
                Output.error("the body on standard input exceeds \(limit) bytes")
                throw ExitCode(64)
            }
        }
        return data
    }

    private static func isEmptyObject(_ json: Data) -> Bool {
        String(decoding: json, as: UTF8.self).filter { !$0.isWhitespace } == "{}"
    }
}
