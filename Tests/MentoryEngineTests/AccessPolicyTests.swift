import Foundation
import MentoryDomain
import MentoryEngine
import MentoryHandlerKit
import MentoryWire
import MentoryWireFixtures
import NIOCore
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
        #expect(!policy.allowsCall(nil, namespace: "debug", method: "freezeEngine"), "unknown peers fail closed")
        #expect(!policy.allowsCall(nil, namespace: "diary", method: "list"), "an unknown peer matches no allow rule")
        #expect(policy.allowsCall(nil, namespace: "mentor", method: "set"), "no deny rule covers mentor.set")
    }

    @Test("unknown credentials match every deny rule and no allow rule, so storage.backup is refused")
    func unknownCredentialsFailClosed() throws {
        #expect(!AccessPolicy.default.allowsCall(nil, namespace: "storage", method: "backup", privilege: .owner))
        #expect(
            !AccessPolicy.default.allowsCall(
                nil, namespace: "storage", method: "backup", privilege: .owner, daemonUID: 0))
        let opened = try AccessPolicy(parsing: ["allow any storage.backup", "allow uid=65534 debug.*", "deny any *"])
        #expect(!opened.allowsCall(nil, namespace: "storage", method: "backup"), "allow any does not cover unknown")
        #expect(!opened.allowsCall(nil, namespace: "debug", method: "freezeEngine"), "unknown is not nobody")
        #expect(opened.allowsCall(self.alice, namespace: "storage", method: "backup"))
        let named = try AccessPolicy(parsing: ["deny uid=4242 storage.*"])
        #expect(!named.allowsCall(nil, namespace: "storage", method: "backup"), "unknown might be uid 4242")
        #expect(named.allowsSubscription(nil, topic: "diary"), "what no rule covers stays open")
    }

    @Test("the daemon's own user is trusted like root; without it only root is")
    func daemonUser() {
        let policy = AccessPolicy.default
        #expect(
            policy.allowsCall(self.alice, namespace: "storage", method: "backup", privilege: .owner, daemonUID: 1000))
        #expect(
            !policy.allowsCall(
                self.alice, namespace: "debug", method: "freezeEngine", privilege: .root, daemonUID: 1000),
            "PRIVILEGE_ROOT is root's alone")
        #expect(
            !policy.allowsCall(self.alice, namespace: "storage", method: "backup", privilege: .owner, daemonUID: 1001))
        #expect(!policy.allowsCall(self.alice, namespace: "storage", method: "backup", privilege: .owner))
    }

    @Test("the engine lets the daemon's own user and root reach storage.backup, and refuses unknown peers")
    func engineStorageBackup() async throws {
        let fixture = try await EngineFixture(daemonUID: 1000)
        try await fixture.engine.register(FakeStorageHandler())
        let request = Mentory_V1_StorageBackupRequest()
        let (unknown, _) = await fixture.connect(credentials: nil)
        #expect(try await fixture.failure("storage", "backup", request, from: unknown) == .permissionDenied)
        let (bob, _) = await fixture.connect(credentials: PeerCredentials(pid: 11, uid: 1001, gid: 1001))
        #expect(try await fixture.failure("storage", "backup", request, from: bob) == .permissionDenied)
        for credentials in [self.alice, self.root] {
            let (client, _) = await fixture.connect(credentials: credentials)
            let reply = try await fixture.call(
                "storage", "backup", request, from: client, as: Mentory_V1_StorageBackupReply.self)
            #expect(reply.bytes == FakeStorageHandler.snapshotSize, "the handler answered")
        }
    }

    @Test(
        "patterns match whole actions or prefixes, part by part",
        arguments: [
            // (pattern, namespace, method, denied)
            ("diary.list", "diary", "list", true), ("diary.list", "diary", "lis", false),
            ("diary.list", "diary", "listed", false), ("diary.lis", "diary", "list", false),
            ("diary.*", "diary", "list", true), ("diary*", "diary", "list", true), ("dia*", "diary", "x", true),
            ("diary.*", "diaryx", "list", false), ("diary.list*", "diary", "listed", true),
            ("diary.listed*", "diary", "list", false), ("diary.", "diary", "", true), (".*", "", "x", true),
            ("subscribe:*", "diary", "list", false), ("*", "anything", "at-all", true),
        ]
    )
    func patternMatching(pattern: String, namespace: String, method: String, denied: Bool) throws {
        let policy = try AccessPolicy(parsing: ["deny any \(pattern)"])
        #expect(policy.allowsCall(self.alice, namespace: namespace, method: method) == !denied)
    }

    @Test("subscription patterns match topics after the subscribe: prefix, and privileged actions by name")
    func subscriptionAndPrivilegedPatterns() throws {
        let policy = try AccessPolicy(parsing: [
            "deny any subscribe:dia*", "deny any subscribe:mentor", "allow uid=1000 plugin.reg*",
        ])
        #expect(!policy.allowsSubscription(self.alice, topic: "diary"))
        #expect(!policy.allowsSubscription(self.alice, topic: "mentor"))
        #expect(policy.allowsSubscription(self.alice, topic: "mentors"))
        #expect(policy.allowsSubscription(self.alice, topic: "reachability"))
        #expect(policy.allowsCall(self.alice, namespace: "plugin", method: "register", privilege: .owner))
        #expect(
            !policy.allowsCall(self.alice, namespace: "plugin", method: "publish", privilege: .owner),
            "no rule: privileged is refused")
        #expect(
            !policy.allowsCall(self.alice, namespace: "plugin", method: "re", privilege: .owner),
            "the pattern is longer than the action")
    }

    @Test(
        "a privileged method opens only to a uid or group a rule allows it by name; never through any or *",
        arguments: [
            (["allow uid=1000 session.monitor"], true), (["allow gid=1000 session.*"], true),
            (["allow any session.monitor"], false), (["allow uid=1000 *"], false), (["allow uid=1000 session*"], true),
            (["deny uid=1000 diary.*"], false), ([], false),
            (["deny any session.monitor", "allow uid=1000 session.monitor"], false),
            (["allow any *", "allow uid=1000 session.monitor"], true), (["allow uid=1001 session.monitor"], false),
        ])
    func privilegedGrants(rules: [String], granted: Bool) throws {
        let policy = try AccessPolicy(parsing: rules)
        #expect(
            policy.allowsCall(self.alice, namespace: "session", method: "monitor", privilege: .owner, daemonUID: 999)
                == granted)
        #expect(
            !policy.allowsCall(self.alice, namespace: "session", method: "monitor", privilege: .root, daemonUID: 999),
            "PRIVILEGE_ROOT is never granted")
        #expect(policy.allowsCall(nil, namespace: "session", method: "monitor", privilege: .owner) == false)
        #expect(
            policy.allowsCall(
                PeerCredentials(pid: 1, uid: 999, gid: 999), namespace: "session", method: "monitor", privilege: .owner,
                daemonUID: 999),
            "the daemon's user holds it")
    }

    @Test("the grants beyond the defaults are listed one per privileged action and rule")
    func grantsListed() throws {
        let policy = try AccessPolicy(parsing: [
            "allow uid=1001 session.monitor plugin.*", "allow any storage.*", "allow gid=7 subscribe:streaks",
            "deny uid=1002 diary.*",
        ])
        let grants = policy.privilegedGrants(of: [
            "session.monitor", "plugin.register", "storage.backup", "subscribe:streaks", "subscribe:advice",
        ])
        #expect(
            grants == [
                #"session.monitor to uid=1001 (rule "allow uid=1001 session.monitor plugin.*")"#,
                #"plugin.register to uid=1001 (rule "allow uid=1001 session.monitor plugin.*")"#,
                #"subscribe:streaks to gid=7 (rule "allow gid=7 subscribe:streaks")"#,
            ])
        #expect(AccessPolicy.default.privilegedGrants(of: ["session.monitor"]).isEmpty)
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

    @Test("a policy change applies to the methods a connection already called, whose routes it keeps")
    func policyChangeReachesKeptRoutes() async throws {
        let fixture = try await EngineFixture()
        let (client, _) = await fixture.connect(credentials: self.alice)
        let engine = fixture.engine
        func ping() async -> UInt32? {
            let request = InboundRequest(id: 1, namespace: WireNames.session, method: "ping", body: ByteBuffer())
            guard case .answered(let response) = await engine.respond(to: request, from: client, received: .now) else {
                return nil
            }
            return response.code
        }
        let denied = UInt32(Mentory_V1_ErrorCode.permissionDenied.rawValue)
        #expect(await ping() == 0)
        await engine.updateAccessPolicy(try AccessPolicy(parsing: ["deny uid=1000 session.ping"]))
        #expect(await ping() == denied, "the route the connection keeps picks the new rules")
        #expect(await ping() == denied)
        await engine.updateAccessPolicy(.default)
        #expect(await ping() == 0)
        // Counted under the declared names, per code, as requests routed by name are.
        let requests = await engine.metricsSnapshot().families.first { $0.name == "mentoryd_requests_total" }
        let counts = Dictionary(
            uniqueKeysWithValues: (requests?.samples ?? []).map { sample in
                (sample.labels.map { "\($0.name)=\($0.value)" }.sorted().joined(separator: ","), sample.value)
            })
        #expect(counts["code=OK,method=ping,namespace=session"] == 2)
        #expect(counts["code=PERMISSION_DENIED,method=ping,namespace=session"] == 2)
    }

    @Test("the default policy has no rules: privileges keep fault injection, storage and the monitor closed")
    func defaults() {
        #expect(AccessPolicy.default.rules.isEmpty)
        #expect(
            !AccessPolicy.default.allowsCall(self.alice, namespace: "debug", method: "freezeEngine", privilege: .root))
        #expect(!AccessPolicy.default.allowsCall(self.alice, namespace: "storage", method: "backup", privilege: .owner))
        #expect(
            !AccessPolicy.default.allowsCall(self.alice, namespace: "session", method: "monitor", privilege: .owner))
        #expect(AccessPolicy.default.allowsCall(self.alice, namespace: "diary", method: "delete"))
        #expect(AccessPolicy.default.allowsCall(self.root, namespace: "storage", method: "backup", privilege: .owner))
    }
}

/// Stands in for the storage administration handler: answers `backup` without taking a snapshot.
private struct FakeStorageHandler: MentoryHandler {
    typealias Namespace = MentorySchema.Storage
    static let snapshotSize: UInt64 = 4096

    func routes(_ routes: inout HandlerRoutes<Self>) {
        routes.on(Namespace.backup) { _, _, _ in
            var reply = Mentory_V1_StorageBackupReply()
            reply.bytes = Self.snapshotSize
            return reply
        }
        routes.on(Namespace.backupRead) { _, _, _ in Mentory_V1_StorageBackupReadReply() }
    }
}
