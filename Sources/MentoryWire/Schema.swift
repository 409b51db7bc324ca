#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import SwiftProtobuf

/// A namespace's interface as its `.proto` `service` declares it: methods, topics and a version.
///
/// `protoc-gen-mentory` generates one conforming enum per `service` (see `scripts/generate-protos.sh`),
/// such as `MentorySchema.Session` (or MentoryDomain's `MentoryDomainSchema.Diary`). The enum is also a marker type: ``MethodSchema`` and ``TopicSchema``
/// carry it, so a handler can only be given its own methods and publish only on its own topics.
public protocol NamespaceSchema: Sendable {
    /// The namespace's name on the wire, e.g. `diary`.
    static var name: String { get }
    /// The version of the namespace's interface.
    static var version: UInt32 { get }
    /// Every method, in declaration order.
    static var methods: [MethodInfo] { get }
    /// Every topic, in declaration order.
    static var topics: [TopicInfo] { get }
    /// The descriptors of the `.proto` file declaring the namespace and of every file it imports.
    static var fileDescriptors: SchemaDescriptors { get }
}

extension NamespaceSchema {
    /// The namespace's description, untyped.
    public static var info: NamespaceInfo {
        NamespaceInfo(name: Self.name, version: Self.version, methods: Self.methods, topics: Self.topics)
    }
}

/// One method of namespace `Namespace`, typed by its request and reply messages.
public struct MethodSchema<Namespace: NamespaceSchema, Request: SwiftProtobuf.Message, Reply: SwiftProtobuf.Message>:
    Sendable
{
    /// The method's name on the wire, e.g. `add`.
    public let name: String
    /// Who may call it whatever the access rules say: its `(mentory.v1.privilege)` option.
    public let privilege: Mentory_V1_Privilege

    /// Declares a method that anyone the access rules allow may call; generated code does this.
    public init(name: String) {
        self.init(name: name, privilege: .unspecified)
    }

    /// Declares a method; generated code does this, passing `privilege` when the rpc declares one.
    public init(name: String, privilege: Mentory_V1_Privilege) {
        self.name = name
        self.privilege = privilege
    }

    /// The namespace's name on the wire.
    public var namespace: String { Namespace.name }

    /// The method's untyped description.
    public var info: MethodInfo {
        MethodInfo(
            name: self.name, request: Request.protoMessageName, reply: Reply.protoMessageName,
            privilege: self.privilege)
    }
}

/// One topic of namespace `Namespace`, typed by the messages its events carry.
public struct TopicSchema<Namespace: NamespaceSchema, Change: SwiftProtobuf.Message, Snapshot: SwiftProtobuf.Message>:
    Sendable
{
    /// The topic's name, as subscribers name it.
    public let name: String
    /// The methods (`namespace.method`) a subscriber must be allowed to call to be sent its events: its
    /// `reads` in the schema. Empty: the topic is for the privileged alone (``TopicInfo/reads``).
    public let reads: [String]

    /// Declares a topic that declares no `reads`; generated code does this.
    public init(name: String) {
        self.init(name: name, reads: [])
    }

    /// Declares a topic whose events carry what `reads` return; generated code does this.
    public init(name: String, reads: [String]) {
        self.name = name
        self.reads = reads
    }

    /// The topic's untyped description.
    public var info: TopicInfo {
        TopicInfo(
            name: self.name, change: Change.protoMessageName, snapshot: Snapshot.protoMessageName, reads: self.reads)
    }
}

/// A method as `session.describe` lists it.
public struct MethodInfo: Sendable, Hashable {
    /// The method's name, e.g. `add`.
    public var name: String
    /// The full protobuf name of the request message, e.g. `mentory.v1.DiaryAddRequest`.
    public var request: String
    /// The full protobuf name of the reply message.
    public var reply: String
    /// Who may call it whatever the access rules say (its `(mentory.v1.privilege)` option): the
    /// daemon refuses anyone else before it reads `access.rules`, which cannot grant it.
    public var privilege: Mentory_V1_Privilege

    /// A method that anyone the access rules allow may call.
    public init(name: String, request: String, reply: String) {
        self.init(name: name, request: request, reply: reply, privilege: .unspecified)
    }

    /// A method only `privilege`'s holders may call.
    public init(name: String, request: String, reply: String, privilege: Mentory_V1_Privilege) {
        self.name = name
        self.request = request
        self.reply = reply
        self.privilege = privilege
    }
}

/// A topic as `session.describe` lists it.
public struct TopicInfo: Sendable, Hashable {
    /// The topic's name.
    public var name: String
    /// The full protobuf name of the message CHANGE events carry.
    public var change: String
    /// The full protobuf name of the message SNAPSHOT and RESET events carry.
    public var snapshot: String
    /// The methods (`namespace.method`) a subscriber must be allowed to call to be sent the topic's events,
    /// since the events carry (or are derived from) what those methods return. The daemon checks them
    /// for the subscriber at subscribe, at every snapshot and resume, and after every reload. Empty: the
    /// topic is for the privileged alone (root, the daemon's user, and a uid or group an access rule
    /// allows `subscribe:TOPIC` explicitly).
    public var reads: [String]

    /// A topic that declares no `reads`: for the privileged alone.
    public init(name: String, change: String, snapshot: String) {
        self.init(name: name, change: change, snapshot: snapshot, reads: [])
    }

    /// A topic whose subscribers must be allowed to call each of `reads`.
    public init(name: String, change: String, snapshot: String, reads: [String]) {
        self.name = name
        self.change = change
        self.snapshot = snapshot
        self.reads = reads
    }
}

/// A namespace as `session.describe` lists it.
public struct NamespaceInfo: Sendable, Hashable {
    public var name: String
    public var version: UInt32
    public var methods: [MethodInfo]
    public var topics: [TopicInfo]

    public init(name: String, version: UInt32, methods: [MethodInfo], topics: [TopicInfo]) {
        self.name = name
        self.version = version
        self.methods = methods
        self.topics = topics
    }

    /// The method named `name`, if the namespace has one.
    public func method(named name: String) -> MethodInfo? {
        self.methods.first { $0.name == name }
    }

    /// The description as `session.describe` sends it.
    public var wireDescription: Mentory_V1_NamespaceDescription {
        var description = Mentory_V1_NamespaceDescription()
        description.namespace = self.name
        description.version = self.version
        description.methods = self.methods.map { method in
            var wire = Mentory_V1_MethodDescription()
            wire.name = method.name
            wire.request = method.request
            wire.reply = method.reply
            wire.privilege = method.privilege
            return wire
        }
        description.topics = self.topics.map { topic in
            var wire = Mentory_V1_TopicDescription()
            wire.name = topic.name
            wire.change = topic.change
            wire.snapshot = topic.snapshot
            wire.reads = topic.reads
            return wire
        }
        return description
    }
}

/// The `FileDescriptorProto`s of one `.proto` file and of every file it imports, as generated
/// code embeds them: each serialized and then base64-encoded, dependencies first.
public struct SchemaDescriptors: Sendable {
    /// Each file's serialized `google.protobuf.FileDescriptorProto`, base64-encoded.
    public let base64Files: [String]

    /// Wraps the encoded files; generated code does this.
    public init(base64Files: [String]) {
        self.base64Files = base64Files
    }

    /// The files, decoded. Generated descriptors always decode; a file that does not is skipped.
    public var files: [Google_Protobuf_FileDescriptorProto] {
        self.base64Files.compactMap { encoded in
            Data(base64Encoded: encoded).flatMap { try? Google_Protobuf_FileDescriptorProto(serializedBytes: $0) }
        }
    }

    /// Merges descriptor sets, keeping the first file of each name, dependencies before dependents.
    public static func merged(_ sets: [SchemaDescriptors]) -> Google_Protobuf_FileDescriptorSet {
        var seen: Set<String> = []
        var merged = Google_Protobuf_FileDescriptorSet()
        for set in sets {
            for file in set.files where seen.insert(file.name).inserted {
                merged.file.append(file)
            }
        }
        return merged
    }
}
