import Foundation
import MentoryDomain
import MentoryEngine
import MentoryHandlerKit
import MentoryWire
import MentoryWireFixtures
import Testing

@Suite("session.monitor")
struct MonitorTests {
    private let root = PeerCredentials(pid: 42, uid: 0, gid: 0)

    private func records(_ events: [Mentory_V1_Event]) throws -> [Mentory_V1_MonitorRecord] {
        try events.map { event in
            #expect(event.topic == "session.monitor")
            #expect(event.kind == .change)
            return try Mentory_V1_MonitorRecord(serializedBytes: event.body)
        }
    }

    @Test("a monitor sees every other connection's calls, with caller, code and sizes, and every event")
    func seesCallsAndEvents() async throws {
        let fixture = try await EngineFixture()
        let (monitor, sink) = await fixture.connect(name: "watcher", credentials: self.root)
        _ = try await fixture.call(
            "session", "monitor", Mentory_V1_MonitorRequest(), from: monitor, as: Mentory_V1_MonitorReply.self)
        let (client, _) = await fixture.connect(name: "app", credentials: PeerCredentials(pid: 7, uid: 1000, gid: 1000))

        _ = try await fixture.call("session", "ping", Mentory_V1_Empty(), from: client, as: Mentory_V1_Empty.self)
        var missing = Mentory_V1_DiaryGetRequest()
        missing.id = "nope"
        #expect(try await fixture.failure("diary", "get", missing, from: client) == .notFound)
        let add = Mentory_V1_DiaryAddRequest.make("2001-01-01")
        _ = try await fixture.call("diary", "add", add, from: client, as: Mentory_V1_DiaryEntry.self)

        let records = try self.records(await sink.next(4))
        #expect(records.map { $0.call.method } == ["ping", "get", "", "add"])
        let ping = records[0].call
        #expect(ping.namespace == "session" && ping.clientName == "app" && ping.uid == 1000 && ping.pid == 7)
        #expect(ping.code == 0 && ping.requestBytes == 0)
        #expect(records[1].call.code == UInt32(Mentory_V1_ErrorCode.notFound.rawValue))
        #expect(records[2].event.topic == "diary" && records[2].event.sequence == 1 && records[2].event.bytes > 0)
        #expect(records[3].call.requestBytes == UInt32(add.wireBody().count) && records[3].call.replyBytes > 0)
    }

    @Test("filters: only the namespaces and topics asked for")
    func filters() async throws {
        let fixture = try await EngineFixture()
        let (monitor, sink) = await fixture.connect(credentials: self.root)
        var request = Mentory_V1_MonitorRequest()
        request.namespaces = ["mentor"]
        request.topics = ["mentor"]
        _ = try await fixture.call("session", "monitor", request, from: monitor, as: Mentory_V1_MonitorReply.self)
        let (client, _) = await fixture.connect()
        _ = try await fixture.call(
            "diary", "add", Mentory_V1_DiaryAddRequest.make("2001-01-02"), from: client, as: Mentory_V1_DiaryEntry.self)
        _ = try await fixture.call(
            "mentor", "set", Mentory_V1_MentorSetRequest.make("hello"), from: client, as: Mentory_V1_MentorState.self)
        let records = try self.records(await sink.next(2))
        #expect(records[0].event.topic == "mentor")
        #expect(records[1].call.namespace == "mentor" && records[1].call.method == "set")
    }

    @Test("a monitor that falls behind loses records, is told how many, and slows nobody")
    func fallsBehind() async throws {
        let fixture = try await EngineFixture()
        let (monitor, sink) = await fixture.connect(credentials: self.root)
        _ = try await fixture.call(
            "session", "monitor", Mentory_V1_MonitorRequest(), from: monitor, as: Mentory_V1_MonitorReply.self)
        let (client, _) = await fixture.connect()
        sink.accepting.store(false, ordering: .relaxed)
        for _ in 0..<3 {
            _ = try await fixture.call("session", "ping", Mentory_V1_Empty(), from: client, as: Mentory_V1_Empty.self)
        }
        sink.accepting.store(true, ordering: .relaxed)
        _ = try await fixture.call(
            "session", "status", Mentory_V1_Empty(), from: client, as: Mentory_V1_StatusReply.self)
        let events = await sink.next(2)
        #expect(events.map(\.sequence) == [1, 2], "sequence numbers count the records taken")
        let records = try self.records(events)
        #expect(records[0].missed == 3)
        #expect(records[1].call.method == "status")
    }

    @Test("by default only root and the daemon's own user may monitor")
    func accessPolicy() async throws {
        let fixture = try await EngineFixture()
        let (alice, _) = await fixture.connect(credentials: PeerCredentials(pid: 9, uid: 1000, gid: 1000))
        #expect(
            try await fixture.failure("session", "monitor", Mentory_V1_MonitorRequest(), from: alice)
                == .permissionDenied)
        let (unknown, _) = await fixture.connect(credentials: nil)
        #expect(
            try await fixture.failure("session", "monitor", Mentory_V1_MonitorRequest(), from: unknown)
                == .permissionDenied)
    }
}
