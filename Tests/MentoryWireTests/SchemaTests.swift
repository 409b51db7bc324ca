import Foundation
import MentoryDomain
import MentoryWire
import SwiftProtobuf
import Testing

@Suite("MentorySchema")
struct SchemaTests {
    /// The rows of the Markdown tables between the generated-namespaces markers, cells unquoted.
    static func documentedRows() throws -> [[String]] {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let text = try String(contentsOf: root.appendingPathComponent("docs/PROTOCOL.md"), encoding: .utf8)
        let begin = try #require(text.range(of: "<!-- BEGIN GENERATED: namespaces -->\n"))
        let end = try #require(text.range(of: "<!-- END GENERATED: namespaces -->"))
        #expect(begin.upperBound <= end.lowerBound)
        return text[begin.upperBound..<end.lowerBound].split(separator: "\n").filter { $0.hasPrefix("| ") }
            .map { line in
                line.split(separator: "|", omittingEmptySubsequences: false).dropFirst().dropLast().map {
                    $0.trimmingCharacters(in: .whitespaces).trimmingCharacters(in: CharacterSet(charactersIn: "`"))
                }
            }
            .filter { $0.first != "---" }
    }

    /// A message name as the tables write it: without the `mentory.v1.` package, others in full.
    static func documented(_ fullName: String) -> String {
        fullName.hasPrefix("mentory.v1.") ? String(fullName.dropFirst("mentory.v1.".count)) : fullName
    }

    /// The protocol's namespaces, then the built-in domain's: the order of docs/PROTOCOL.md's tables.
    static let namespaces = MentorySchema.namespaces + MentoryDomainSchema.namespaces

    @Test("docs/PROTOCOL.md lists exactly the methods and topics MentorySchema and MentoryDomainSchema declare")
    func protocolDocument() throws {
        // One method table per file (mentory.proto's, then mentory_domain.proto's), and the topic table
        // of the file whose namespaces publish.
        var documentedMethods: [[String]] = []
        var documentedTopics: [[String]] = []
        var table: String?
        for row in try Self.documentedRows() {
            if row.first == "namespace" && row.contains("method") {
                #expect(row.prefix(6).last == "privilege")
                table = "methods"
            } else if row.first == "topic" {
                table = "topics"
            } else if table == "methods" {
                documentedMethods.append(Array(row.prefix(6)))
            } else if table == "topics" {
                documentedTopics.append(Array(row.prefix(4)))
            } else {
                Issue.record("a row before any table's header: \(row)")
            }
        }
        let declaredMethods = Self.namespaces.flatMap { namespace in
            namespace.methods.map { method in
                [
                    namespace.name, String(namespace.version), method.name, Self.documented(method.request),
                    Self.documented(method.reply),
                    method.privilege == .unspecified ? "" : "PRIVILEGE_\(method.privilege)".uppercased(),
                ]
            }
        }
        let declaredTopics = Self.namespaces.flatMap { namespace in
            namespace.topics.map { topic in
                [topic.name, namespace.name, Self.documented(topic.change), Self.documented(topic.snapshot)]
            }
        }
        #expect(documentedMethods == declaredMethods)
        #expect(documentedTopics == declaredTopics)
        #expect(declaredMethods.count >= 19)
    }

    @Test("the typed tables agree with the embedded descriptors of mentory.proto")
    func descriptors() throws {
        let files = MentorySchema.fileDescriptors.files
        #expect(files.count == MentorySchema.fileDescriptors.base64Files.count)
        #expect(files.map(\.name).last == "mentory.proto")
        let proto = try #require(files.last)
        // Every import comes before the file.
        let names = files.map(\.name)
        #expect(proto.dependency.allSatisfy { names.firstIndex(of: $0)! < names.count - 1 })
        #expect(proto.service.count == MentorySchema.namespaces.count)
        for (service, namespace) in zip(proto.service, MentorySchema.namespaces) {
            #expect(
                service.method.map { [$0.name, $0.inputType, $0.outputType] }
                    == namespace.methods.map { [$0.name, "." + $0.request, "." + $0.reply] }
            )
        }
    }

    @Test("the domain's typed tables agree with the descriptors of mentory_domain.proto, after mentory.proto's")
    func domainDescriptors() throws {
        let base64Files = MentoryDomainSchema.fileDescriptors.base64Files
        #expect(Array(base64Files.dropLast()) == MentorySchema.fileDescriptors.base64Files)
        let files = MentoryDomainSchema.fileDescriptors.files
        #expect(files.map(\.name).suffix(2) == ["mentory.proto", "mentory_domain.proto"])
        let proto = try #require(files.last)
        #expect(proto.package == "mentory.v1")
        #expect(proto.dependency == ["mentory.proto"])
        #expect(proto.service.count == MentoryDomainSchema.namespaces.count)
        for (service, namespace) in zip(proto.service, MentoryDomainSchema.namespaces) {
            #expect(
                service.method.map { [$0.name, $0.inputType, $0.outputType] }
                    == namespace.methods.map { [$0.name, "." + $0.request, "." + $0.reply] }
            )
        }
        // The protocol names no message of the domain.
        let protocolFile = try #require(MentorySchema.fileDescriptors.files.last)
        let domainTypes = proto.messageType.map(\.name) + proto.enumType.map(\.name)
        let domainMessages = Set(domainTypes.map { ".mentory.v1." + $0 })
        let protocolReferences =
            protocolFile.messageType.flatMap(\.field).map(\.typeName)
            + protocolFile.service.flatMap(\.method).flatMap { [$0.inputType, $0.outputType] }
        #expect(domainMessages.isDisjoint(with: protocolReferences))
    }

    @Test("typed methods and topics carry their namespace and message types")
    func typed() {
        #expect(MentorySchema.Diary.add.namespace == "diary")
        #expect(
            MentorySchema.Diary.add.info
                == MethodInfo(name: "add", request: "mentory.v1.DiaryAddRequest", reply: "mentory.v1.DiaryEntry"))
        #expect(MentorySchema.Diary.diaryTopic.info.change == Mentory_V1_DiaryChange.protoMessageName)
        #expect(MentorySchema.Debug.freezeEngine.info.request == Google_Protobuf_UInt32Value.protoMessageName)
        #expect(WireNames.diary == MentorySchema.Diary.name)
        #expect(MentorySchema.Diary.self == MentoryDomainSchema.Diary.self)
        #expect(WireNames.mentor == MentoryDomainSchema.Mentor.name)
        #expect(!MentorySchema.namespaces.contains { $0.name == WireNames.diary })
        #expect(Set(Self.namespaces.map(\.name)).count == Self.namespaces.count)
    }
}
