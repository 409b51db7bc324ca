import MentoryDomain
import MentoryHandlerKit
import MentoryHandlerTesting
import MentoryReachability
import MentoryWire
import Testing

@Suite("Reachability handler")
struct ReachabilityHandlerTests {
    typealias Reachability = MentorySchema.Reachability

    private func peer(_ name: String, reachable: Bool = true) -> Mentory_V1_PeerState {
        var peer = Mentory_V1_PeerState()
        peer.peer = name
        peer.isPaired = true
        peer.isAppInstalled = true
        peer.isReachable = reachable
        return peer
    }

    private func open() async throws -> HandlerTestHarness<ReachabilityHandler> {
        try await HandlerTestHarness.open(ReachabilityHandler(), clock: FixedSessionClock())
    }

    @Test("get returns every reported peer, sorted by name")
    func reportAndGet() async throws {
        let harness = try await self.open()
        _ = try await harness.call(Reachability.report, self.peer("watch"), from: .test(id: 2))
        _ = try await harness.call(Reachability.report, self.peer("phone"), from: .test(id: 1))
        let snapshot = try await harness.call(Reachability.get, Mentory_V1_Empty())
        #expect(snapshot.peers.map(\.peer) == ["phone", "watch"])
        #expect(snapshot.peers.allSatisfy { $0.isReachable && $0.updatedAtUnixMs == 1_795_300_000_000 })
        #expect(try await harness.snapshot(of: Reachability.reachabilityTopic) == snapshot)
    }

    @Test("both methods answer without suspending, so the daemon answers them on the event loop")
    func immediate() async throws {
        let harness = try await self.open()
        #expect(try await harness.answersImmediately(Reachability.get, Mentory_V1_Empty()))
        #expect(try await harness.answersImmediately(Reachability.report, self.peer("phone")))
    }

    @Test("a peer turns unreachable when its reporting connection closes, and that is published")
    func disconnectFlipsReachability() async throws {
        let harness = try await self.open()
        _ = try await harness.call(Reachability.report, self.peer("phone"), from: .test(id: 7))
        try await harness.closeConnection(ConnectionID(8))
        #expect(try await harness.published(on: Reachability.reachabilityTopic).count == 1)
        try await harness.closeConnection(ConnectionID(7))
        let published = try await harness.published(on: Reachability.reachabilityTopic)
        #expect(published.map(\.isReachable) == [true, false])
        #expect(published.last?.peer == "phone")
        #expect(published.last?.isPaired == true, "pairing survives a disconnect")
    }

    @Test("bad peer names are refused", arguments: ["", "phone 2", String(repeating: "p", count: 65), "a/b"])
    func badNames(_ name: String) async throws {
        let harness = try await self.open()
        await #expect(throws: MentoryError.self) {
            try await harness.call(Reachability.report, self.peer(name))
        }
        #expect(try await harness.published(on: Reachability.reachabilityTopic).isEmpty)
    }

    @Test("a body that is not a PeerState is refused with INVALID_ARGUMENT; get refuses any body")
    func garbage() async throws {
        let harness = try await self.open()
        do {
            _ = try await harness.callRaw("report", body: Data([0xFF, 0xFF, 0xFF]))
            Issue.record("garbage was accepted")
        } catch let error as MentoryError {
            #expect(error.code == .invalidArgument)
        }
        do {
            _ = try await harness.callRaw("get", body: self.peer("phone").wireBody())
            Issue.record("a body for get was accepted")
        } catch let error as MentoryError {
            #expect(error.code == .invalidArgument)
        }
    }

    @Test("reporting the same state again succeeds and publishes nothing")
    func noOpReport() async throws {
        let harness = try await self.open()
        let first = try await harness.call(Reachability.report, self.peer("phone"))
        #expect(try await harness.call(Reachability.report, self.peer("phone")) == first)
        let away = try await harness.call(Reachability.report, self.peer("phone", reachable: false))
        #expect(try await harness.published(on: Reachability.reachabilityTopic) == [first, away])
    }

    @Test("at most 64 peers are kept: a new 65th is refused, known peers still report")
    func peerCount() async throws {
        let harness = try await self.open()
        for index in 0..<FieldLimits.peerCount.maximum {
            _ = try await harness.call(Reachability.report, self.peer("peer-\(index)"))
        }
        do {
            _ = try await harness.call(Reachability.report, self.peer("one-too-many"))
            Issue.record("a 65th peer was accepted")
        } catch let error as MentoryError {
            #expect(error.code == .invalidArgument)
            #expect(error.message.contains("\(FieldLimits.peerCount.maximum)"))
        }
        _ = try await harness.call(Reachability.report, self.peer("peer-0", reachable: false))
    }
}

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
