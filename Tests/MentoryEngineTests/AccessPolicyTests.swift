import MentoryEngine
import MentoryWire
import Testing

@Suite("Access policy")
struct AccessPolicyTests {
    private let alice = PeerCredentials(pid: 10, uid: 1000, gid: 1000, groups: [1000, 2000])
    private let root = PeerCredentials(pid: 1, uid: 0, gid: 0)

    @Test("rules parse and print back")
    func parsing() throws {
        let policy = try AccessPolicy(parsing: [
            "deny any debug.*", "allow gid=2000 diary.get diary.list subscribe:diary",
        ])
        #expect(
            policy.rules.map(\.description) == [
                "deny any debug.*", "allow gid=2000 diary.get diary.list subscribe:diary",
            ])
        #expect(throws: MentoryError.self) { try AccessPolicy(parsing: ["permit any *"]) }
        #expect(throws: MentoryError.self) { try AccessPolicy(parsing: ["deny uid=bob *"]) }
        #expect(throws: MentoryError.self) { try AccessPolicy(parsing: ["deny any"]) }
    }

    @Test("the first matching rule decides; no match allows; root may do anything")
    func evaluation() throws {
        let policy = try AccessPolicy(parsing: [
            "allow gid=2000 diary.get diary.list",
            "deny gid=2000 diary.*",
            "deny uid=1000 subscribe:reachability",
            "deny any debug.*",
        ])
        #expect(policy.allowsCall(self.alice, namespace: "diary", method: "list"))
        #expect(
            !policy.allowsCall(self.alice, namespace: "diary", method: "delete"), "supplementary group 2000 matches")
        #expect(policy.allowsCall(self.alice, namespace: "mentor", method: "set"))
        #expect(!policy.allowsSubscription(self.alice, topic: "reachability"))
        #expect(policy.allowsSubscription(self.alice, topic: "mentor"))
        #expect(!policy.allowsCall(self.alice, namespace: "debug", method: "freezeEngine"))
        #expect(policy.allowsCall(self.root, namespace: "debug", method: "freezeEngine"))
        #expect(
            !policy.allowsCall(nil, namespace: "debug", method: "freezeEngine"), "unknown peers are treated as nobody")
    }

    @Test("'*' covers calls but not subscriptions")
    func wildcard() throws {
        let policy = try AccessPolicy(parsing: ["deny uid=1000 *"])
        #expect(!policy.allowsCall(self.alice, namespace: "session", method: "ping"))
        #expect(policy.allowsSubscription(self.alice, topic: "mentor"))
    }

    @Test("a denied call gets a permission-denied reply naming the method, and the connection keeps working")
    func engineDenies() async throws {
        let fixture = try await EngineFixture(
            accessPolicy: try AccessPolicy(parsing: ["deny uid=1000 diary.add subscribe:diary"]))
        let (client, _) = await fixture.connect(credentials: self.alice)
        let response = try await fixture.send(
            WireNames.diary, "add", Mentory_V1_DiaryAddRequest.make("2026-11-21"), from: client)
        #expect(response.error.code == UInt32(Mentory_V1_ErrorCode.permissionDenied.rawValue))
        #expect(response.error.message.contains("diary.add"))
        var subscribe = Mentory_V1_SubscribeRequest()
        var topic = Mentory_V1_TopicSubscription()
        topic.topic = WireNames.diary
        subscribe.topics = [topic]
        #expect(try await fixture.failure(WireNames.session, "subscribe", subscribe, from: client) == .permissionDenied)
        _ = try await fixture.call(
            WireNames.diary, "list", Mentory_V1_DiaryListRequest(), from: client, as: Mentory_V1_DiaryListReply.self)
        #expect(await fixture.store.entries(limit: 10, before: nil).isEmpty)
    }

    @Test("the default policy keeps fault injection and storage administration for root")
    func defaults() {
        #expect(!AccessPolicy.default.allowsCall(self.alice, namespace: "debug", method: "freezeEngine"))
        #expect(!AccessPolicy.default.allowsCall(self.alice, namespace: "storage", method: "backup"))
        #expect(AccessPolicy.default.allowsCall(self.alice, namespace: "diary", method: "delete"))
        #expect(AccessPolicy.default.allowsCall(self.root, namespace: "storage", method: "backup"))
    }
}
