import MentoryEngine
import MentoryWire
import Testing

@Suite("Reachability handler")
struct ReachabilityHandlerTests {
    private func peer(_ name: String, reachable: Bool = true) -> Mentory_V1_PeerState {
        var peer = Mentory_V1_PeerState()
        peer.peer = name
        peer.isPaired = true
        peer.isAppInstalled = true
        peer.isReachable = reachable
        return peer
    }

    @Test("get returns every reported peer, sorted by name")
    func reportAndGet() async throws {
        let fixture = try await EngineFixture()
        let (phone, _) = await fixture.connect()
        let (watch, _) = await fixture.connect()
        _ = try await fixture.call(
            WireNames.reachability, "report", self.peer("watch"), from: watch, as: Mentory_V1_PeerState.self)
        _ = try await fixture.call(
            WireNames.reachability, "report", self.peer("phone"), from: phone, as: Mentory_V1_PeerState.self)
        let snapshot = try await fixture.call(
            WireNames.reachability, "get", Mentory_V1_Empty(), from: phone, as: Mentory_V1_ReachabilitySnapshot.self
        )
        #expect(snapshot.peers.map(\.peer) == ["phone", "watch"])
        #expect(snapshot.peers.allSatisfy { $0.isReachable && $0.updatedAtUnixMs == 1_795_300_000_000 })
    }

    @Test("a peer turns unreachable when its reporting connection closes, and subscribers are told")
    func disconnectFlipsReachability() async throws {
        let fixture = try await EngineFixture()
        let (phone, _) = await fixture.connect()
        let (observer, sink) = await fixture.connect()
        _ = try await fixture.call(
            WireNames.reachability, "report", self.peer("phone"), from: phone, as: Mentory_V1_PeerState.self)
        _ = try await fixture.subscribe(observer, to: [WireNames.reachability])
        let snapshot = try #require(await sink.next().first)
        #expect(snapshot.kind == .snapshot)
        await fixture.engine.detach(phone)
        let change = try #require(await sink.next().first)
        #expect(change.kind == .change)
        #expect(change.sequence == snapshot.sequence + 1)
        let peer = try Mentory_V1_PeerState(serializedBytes: change.body)
        #expect(peer.peer == "phone")
        #expect(!peer.isReachable)
        #expect(peer.isPaired, "pairing survives a disconnect")
    }

    @Test("bad peer names are refused", arguments: ["", "phone 2", String(repeating: "p", count: 65), "a/b"])
    func badNames(_ name: String) async throws {
        let fixture = try await EngineFixture()
        let (client, _) = await fixture.connect()
        #expect(
            try await fixture.failure(WireNames.reachability, "report", self.peer(name), from: client)
                == .invalidArgument)
    }

    @Test("reporting the same state again succeeds and publishes nothing")
    func noOpReport() async throws {
        let fixture = try await EngineFixture()
        let (phone, sink) = await fixture.connect()
        let first = try await fixture.call(
            WireNames.reachability, "report", self.peer("phone"), from: phone, as: Mentory_V1_PeerState.self)
        _ = try await fixture.subscribe(phone, to: [WireNames.reachability])
        let snapshot = try #require(await sink.next().first)
        #expect(
            try await fixture.call(
                WireNames.reachability, "report", self.peer("phone"), from: phone, as: Mentory_V1_PeerState.self)
                == first)
        let away = try await fixture.call(
            WireNames.reachability, "report", self.peer("phone", reachable: false), from: phone,
            as: Mentory_V1_PeerState.self)
        let event = try #require(await sink.next().first)
        #expect(event.sequence == snapshot.sequence + 1)
        #expect(try Mentory_V1_PeerState(serializedBytes: event.body) == away)
    }

    @Test("at most 64 peers are kept: a new 65th is refused, known peers still report")
    func peerCount() async throws {
        let fixture = try await EngineFixture()
        let (client, _) = await fixture.connect()
        for index in 0..<FieldLimits.peerCount.maximum {
            _ = try await fixture.call(
                WireNames.reachability, "report", self.peer("peer-\(index)"), from: client,
                as: Mentory_V1_PeerState.self)
        }
        let response = try await fixture.send(WireNames.reachability, "report", self.peer("one-too-many"), from: client)
        #expect(response.error.code == UInt32(Mentory_V1_ErrorCode.invalidArgument.rawValue))
        #expect(response.error.message.contains("\(FieldLimits.peerCount.maximum)"))
        _ = try await fixture.call(
            WireNames.reachability, "report", self.peer("peer-0", reachable: false), from: client,
            as: Mentory_V1_PeerState.self)
    }
}
