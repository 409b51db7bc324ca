import Foundation
import MentoryDomain
import MentoryEngine
import MentoryHandlerKit
import MentoryWire
import MentoryWireFixtures
import SwiftProtobuf
import Testing

/// One documented limit, exercised through the method that checks it.
struct LimitCase: Sendable, CustomTestStringConvertible {
    let limit: FieldLimit
    let namespace: String
    let method: String
    /// The request with the limited field at `size` (bytes or items).
    let request: @Sendable (Int) -> any SwiftProtobuf.Message
    /// What the error message calls the field.
    let fieldName: String

    var testDescription: String { "\(self.namespace).\(self.method) \(self.fieldName)" }

    static func text(_ size: Int) -> String {
        String(repeating: "é", count: size / 2) + String(repeating: "x", count: size % 2)
    }

    static let all: [LimitCase] = [
        LimitCase(
            limit: FieldLimits.diaryTitle, namespace: WireNames.diary, method: "add",
            request: { size in
                Mentory_V1_DiaryAddRequest.make("2026-01-01", title: text(size))
            }, fieldName: FieldLimits.diaryTitle.field),
        LimitCase(
            limit: FieldLimits.diaryText, namespace: WireNames.diary, method: "add",
            request: { size in
                Mentory_V1_DiaryAddRequest.make("2026-01-01", text: text(size))
            }, fieldName: FieldLimits.diaryText.field),
        LimitCase(
            limit: FieldLimits.diaryAnalysis, namespace: WireNames.diary, method: "add",
            request: { size in
                var request = Mentory_V1_DiaryAddRequest.make("2026-01-01")
                request.analysis = text(size)
                return request
            }, fieldName: FieldLimits.diaryAnalysis.field),
        LimitCase(
            limit: FieldLimits.actionItemCount, namespace: WireNames.diary, method: "add",
            request: { size in
                Mentory_V1_DiaryAddRequest.make("2026-01-01", suggestions: (0..<size).map { "step \($0)" })
            }, fieldName: FieldLimits.actionItemCount.field),
        LimitCase(
            limit: FieldLimits.actionItemText, namespace: WireNames.diary, method: "add",
            request: { size in
                Mentory_V1_DiaryAddRequest.make("2026-01-01", suggestions: ["short", text(size)])
            }, fieldName: "the text of action item 2"),
        LimitCase(
            limit: FieldLimits.id, namespace: WireNames.diary, method: "add",
            request: { size in
                var request = Mentory_V1_DiaryAddRequest.make("2026-01-01", suggestions: ["step"])
                request.actionItems[0].id = String(repeating: "i", count: size)
                return request
            }, fieldName: "the id of action item 1"),
        LimitCase(
            limit: FieldLimits.mentorContent, namespace: WireNames.mentor, method: "set",
            request: { size in
                Mentory_V1_MentorSetRequest.make(text(size))
            }, fieldName: FieldLimits.mentorContent.field),
        LimitCase(
            limit: FieldLimits.actionItemCount, namespace: WireNames.mentor, method: "set",
            request: { size in
                Mentory_V1_MentorSetRequest.make("advice", todos: (0..<size).map { "step \($0)" })
            }, fieldName: FieldLimits.actionItemCount.field),
        LimitCase(
            limit: FieldLimits.actionItemText, namespace: WireNames.mentor, method: "set",
            request: { size in
                Mentory_V1_MentorSetRequest.make("advice", todos: [text(size)])
            }, fieldName: "the text of action item 1"),
        LimitCase(
            limit: FieldLimits.peerName, namespace: WireNames.reachability, method: "report",
            request: { size in
                var peer = Mentory_V1_PeerState()
                peer.peer = text(size)
                return peer
            }, fieldName: FieldLimits.peerName.field),
    ]
}

@Suite("Field limits")
struct FieldLimitTests {
    @Test(
        "a field at its limit is accepted; one unit more is refused with code 8 naming field, size and limit",
        arguments: LimitCase.all)
    func limit(_ limitCase: LimitCase) async throws {
        let fixture = try await EngineFixture()
        let (client, _) = await fixture.connect()
        let maximum = limitCase.limit.maximum
        let over = try await fixture.send(
            limitCase.namespace, limitCase.method, limitCase.request(maximum + 1), from: client)
        #expect(over.error.code == UInt32(Mentory_V1_ErrorCode.invalidArgument.rawValue))
        #expect(over.error.message.contains(limitCase.fieldName))
        #expect(over.error.message.contains("\(maximum + 1)"))
        #expect(over.error.message.contains("limit of \(maximum)"))
        let at = try await fixture.send(limitCase.namespace, limitCase.method, limitCase.request(maximum), from: client)
        if case .error(let error) = at.result {
            Issue.record("at the limit: \(error.message)")
        }
    }

    @Test("ids in lookups are bounded: one over the limit is refused with code 8, not echoed back")
    func lookupIDs() async throws {
        let fixture = try await EngineFixture()
        let (client, _) = await fixture.connect()
        var get = Mentory_V1_DiaryGetRequest()
        get.id = String(repeating: "z", count: FieldLimits.id.maximum)
        #expect(try await fixture.failure(WireNames.diary, "get", get, from: client) == .notFound)
        get.id = String(repeating: "z", count: 900_000)
        let response = try await fixture.send(WireNames.diary, "get", get, from: client)
        #expect(response.error.code == UInt32(Mentory_V1_ErrorCode.invalidArgument.rawValue))
        #expect(response.error.message.utf8.count < 200)
        var complete = Mentory_V1_MentorCompleteTodoRequest()
        complete.id = String(repeating: "z", count: FieldLimits.id.maximum + 1)
        #expect(try await fixture.failure(WireNames.mentor, "completeTodo", complete, from: client) == .invalidArgument)
        var list = Mentory_V1_DiaryListRequest()
        list.before = String(repeating: "9", count: 500_000)
        let badBefore = try await fixture.send(WireNames.diary, "list", list, from: client)
        #expect(badBefore.error.code == UInt32(Mentory_V1_ErrorCode.invalidArgument.rawValue))
        #expect(badBefore.error.message.utf8.count < 200, "a bad value is quoted, cut short")
    }

    @Test("a 900 KB diary text is refused")
    func hugeText() async throws {
        let fixture = try await EngineFixture()
        let (client, _) = await fixture.connect()
        let request = Mentory_V1_DiaryAddRequest.make("2026-01-01", text: String(repeating: "x", count: 900_000))
        #expect(try await fixture.failure(WireNames.diary, "add", request, from: client) == .invalidArgument)
        #expect(await fixture.store.entries(limit: 10, before: nil).isEmpty)
    }

    @Test("a maximal entry fits a reply, and the smallest allowed frame holds it")
    func maximalEntryFits() async throws {
        let fixture = try await EngineFixture()
        let (client, _) = await fixture.connect()
        let response = try await fixture.send(WireNames.diary, "add", maximalAdd("2026-01-01"), from: client)
        let body = try #require(response.body.isEmpty ? nil : response.body)
        #expect(body.count + ReplyBudget.envelopeReserve < ReplyBudget.minimumMaxFrameLength / 2)
        #expect(try frameSize(response) <= body.count + ReplyBudget.envelopeReserve)
    }

    @Test("docs/PROTOCOL.md shows exactly the declared limits")
    func documented() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let text = try String(contentsOf: root.appendingPathComponent("docs/PROTOCOL.md"), encoding: .utf8)
        let begin = try #require(text.range(of: "<!-- field-limits:begin -->\n"))
        let end = try #require(text.range(of: "\n<!-- field-limits:end -->"))
        #expect(String(text[begin.upperBound..<end.lowerBound]) == FieldLimits.markdownTable)
    }
}

@Suite("Entity ids")
struct EntityIDTests {
    @Test("random ids are distinct lowercase version-4 UUIDs")
    func random() {
        let ids = (0..<1000).map { _ in EntityID.random() }
        #expect(Set(ids).count == 1000)
        for id in ids {
            #expect(EntityID.canonical(id) == id)
            #expect(UUID(uuidString: id)?.uuidString.lowercased() == id)
            #expect(Array(id.utf8)[14] == UInt8(ascii: "4"))
            #expect("89ab".utf8.contains(Array(id.utf8)[19]))
        }
    }

    @Test("canonical forms are lowercase; anything but a UUID has none")
    func canonical() {
        #expect(EntityID.canonical("6F1C2A52-9C51-4C39-8D3C-0D5BB7C7E9A1") == "6f1c2a52-9c51-4c39-8d3c-0d5bb7c7e9a1")
        #expect(EntityID.canonical("6f1c2a52-9c51-4c39-8d3c-0d5bb7c7e9a1") == "6f1c2a52-9c51-4c39-8d3c-0d5bb7c7e9a1")
        for bad in [
            "", "not-a-uuid", "6f1c2a52-9c51-4c39-8d3c-0d5bb7c7e9a", "6f1c2a52x9c51-4c39-8d3c-0d5bb7c7e9a1",
            "6g1c2a52-9c51-4c39-8d3c-0d5bb7c7e9a1",
        ] {
            #expect(EntityID.canonical(bad) == nil)
        }
        #expect(EntityID.normalized("item-1") == "item-1")
    }
}
