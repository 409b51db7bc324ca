import Foundation
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

    @Test("docs/PROTOCOL.md lists exactly the methods and topics MentorySchema declares")
    func protocolDocument() throws {
        let rows = try Self.documentedRows()
        let methodHeader = try #require(rows.firstIndex { $0.first == "namespace" && $0.contains("method") })
        let topicHeader = try #require(rows.firstIndex { $0.first == "topic" })
        #expect(methodHeader < topicHeader)
        #expect(rows[methodHeader].prefix(6).last == "privilege")
        let documentedMethods = rows[(methodHeader + 1)..<topicHeader].map { Array($0.prefix(6)) }
        let documentedTopics = rows[(topicHeader + 1)...].map { Array($0.prefix(4)) }
        let declaredMethods = MentorySchema.namespaces.flatMap { namespace in
            namespace.methods.map { method in
                [
                    namespace.name, String(namespace.version), method.name, Self.documented(method.request),
                    Self.documented(method.reply),
                    method.privilege == .unspecified ? "" : "PRIVILEGE_\(method.privilege)".uppercased(),
                ]
            }
        }
        let declaredTopics = MentorySchema.namespaces.flatMap { namespace in
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

    @Test("typed methods and topics carry their namespace and message types")
    func typed() {
        #expect(MentorySchema.Diary.add.namespace == "diary")
        #expect(
            MentorySchema.Diary.add.info
                == MethodInfo(name: "add", request: "mentory.v1.DiaryAddRequest", reply: "mentory.v1.DiaryEntry"))
        #expect(MentorySchema.Diary.diaryTopic.info.change == Mentory_V1_DiaryChange.protoMessageName)
        #expect(MentorySchema.Debug.freezeEngine.info.request == Google_Protobuf_UInt32Value.protoMessageName)
        #expect(WireNames.diary == MentorySchema.Diary.name)
        #expect(Set(MentorySchema.namespaces.map(\.name)).count == MentorySchema.namespaces.count)
    }
}
