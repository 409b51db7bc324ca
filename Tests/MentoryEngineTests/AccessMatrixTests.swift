import Foundation
import MentoryDomain
import MentoryEngine
import MentoryHandlerKit
import MentoryWire
import SwiftProtobuf
import Testing

/// A namespace declared for these tests only, whose topic is derived from the diary: a streak of days written.
enum StreakSchema: NamespaceSchema {
    static let name = "streaks"
    static let version: UInt32 = 1
    static let current = MethodSchema<StreakSchema, Mentory_V1_Empty, Google_Protobuf_UInt32Value>(name: "current")
    static let streaksTopic = TopicSchema<StreakSchema, Google_Protobuf_UInt32Value, Google_Protobuf_UInt32Value>(
        name: "streaks", reads: ["diary.list"])
    static let methods: [MethodInfo] = [current.info]
    static let topics: [TopicInfo] = [streaksTopic.info]
    static var fileDescriptors: SchemaDescriptors { MentoryDomainSchema.fileDescriptors }
}

/// Reads the caller's diary on its behalf, and publishes what it computed from it.
struct StreakHandler: MentoryHandler {
    typealias Namespace = StreakSchema

    func routes(_ routes: inout HandlerRoutes<Self>) {
        routes.onAsync(Namespace.current) { _, call, context in
            let list = try await context.call(
                MentoryDomainSchema.Diary.list, Mentory_V1_DiaryListRequest(), for: call)
            let streak = Google_Protobuf_UInt32Value(UInt32(list.entries.count))
            context.publish(streak, on: Namespace.streaksTopic)
            return streak
        }
        routes.snapshot(Namespace.streaksTopic) { _ in Google_Protobuf_UInt32Value(0) }
    }
}

/// Stands in for the storage administration handler, so that its privileged methods are served.
private struct StorageStandIn: MentoryHandler {
    typealias Namespace = MentorySchema.Storage

    func routes(_ routes: inout HandlerRoutes<Self>) {
        routes.on(Namespace.backup) { _, _, _ in Mentory_V1_StorageBackupReply() }
        routes.on(Namespace.backupRead) { _, _, _ in Mentory_V1_StorageBackupReadReply() }
    }
}

/// Every method and topic the engine serves, checked for every path against the schema's declarations: what
/// a method's `(privilege)` and a topic's `reads` say is what a caller gets, whatever the rule list leaves out.
/// A method or topic added to any schema joins these checks with no edit here.
@Suite("The access matrix, generated from the schema")
struct AccessMatrixTests {
    /// A person who is neither root nor the daemon's user.
    let alice = PeerCredentials(pid: 10, uid: 1000, gid: 1000)
    static let daemonUID: UInt32 = 999
    static let denied = UInt32(Mentory_V1_ErrorCode.permissionDenied.rawValue)

    /// Rule lists that leave the old default rule out, as an operator's own `access.rules` does.
    static let customRuleLists: [[String]] = [
        [], ["deny uid=1002 diary.* subscribe:diary"], ["allow any *"], ["allow uid=1000 *"],
        ["allow any session.* plugin.* storage.* debug.* subscribe:*"],
    ]

    private func fixture(_ rules: [String]) async throws -> EngineFixture {
        let fixture = try await EngineFixture(
            accessPolicy: try AccessPolicy(parsing: rules), daemonUID: Self.daemonUID)
        try await fixture.engine.register(StreakHandler())
        try await fixture.engine.register(StorageStandIn())
        return fixture
    }

    private func call(
        _ fixture: EngineFixture, _ namespace: String, _ method: String, from id: ConnectionID
    ) async -> Mentory_V1_Response {
        var request = Mentory_V1_Request()
        request.id = 1
        request.namespace = namespace
        request.method = method
        return await fixture.engine.respond(to: request, from: id)
    }

    private func subscribe(
        _ fixture: EngineFixture, _ topic: String, from id: ConnectionID, resumingIn epoch: UInt64? = nil
    ) async -> Mentory_V1_Response {
        var subscription = Mentory_V1_TopicSubscription()
        subscription.topic = topic
        if let epoch {
            subscription.epoch = epoch
            subscription.resumeAfter = 0
        }
        var subscribe = Mentory_V1_SubscribeRequest()
        subscribe.topics = [subscription]
        var request = Mentory_V1_Request()
        request.id = 2
        request.namespace = WireNames.session
        request.method = "subscribe"
        request.body = (try? subscribe.serializedData()) ?? Data()
        return await fixture.engine.respond(to: request, from: id)
    }

    @Test("no rule list opens a privileged method to a person it does not name", arguments: customRuleLists)
    func privilegedMethodsStayClosed(rules: [String]) async throws {
        let fixture = try await self.fixture(rules)
        let (client, _) = await fixture.connect(credentials: self.alice)
        var checked = 0
        for namespace in await fixture.engine.namespaces {
            for method in namespace.methods where method.privilege != .unspecified {
                let response = await self.call(fixture, namespace.name, method.name, from: client)
                #expect(
                    response.error.code == Self.denied,
                    "\(namespace.name).\(method.name) (\(method.privilege)) under \(rules)")
                checked += 1
            }
        }
        #expect(checked >= 6, "session.monitor, plugin.register/publish/call, storage.backup/backupRead at least")
    }

    @Test("a rule naming a person and a PRIVILEGE_OWNER method grants it to that person alone")
    func explicitGrants() async throws {
        let engineNamespaces = try await self.fixture([]).engine.namespaces
        for namespace in engineNamespaces {
            for method in namespace.methods where method.privilege == .owner {
                let fixture = try await self.fixture(["allow uid=1000 \(namespace.name).\(method.name)"])
                let (alice, _) = await fixture.connect(credentials: self.alice)
                let (bob, _) = await fixture.connect(credentials: PeerCredentials(pid: 11, uid: 1001, gid: 1001))
                // The method may still refuse the empty request for its own reasons (plugin.register: no plugin
                // declares the empty namespace), but not for want of the privilege.
                let refusal = "you may not call \(namespace.name).\(method.name)"
                let granted = await self.call(fixture, namespace.name, method.name, from: alice)
                #expect(
                    !granted.error.message.hasSuffix(refusal), "\(namespace.name).\(method.name) granted to uid 1000")
                let other = await self.call(fixture, namespace.name, method.name, from: bob)
                #expect(other.error.code == Self.denied, "\(namespace.name).\(method.name) not granted to uid 1001")
                #expect(other.error.message.hasSuffix(refusal))
            }
        }
    }

    @Test("a person denied what a topic reads gets nothing of the topic; one allowed it gets its snapshot")
    func topicsFollowTheirData() async throws {
        let engineNamespaces = try await self.fixture([]).engine.namespaces
        var checked = 0
        for topic in engineNamespaces.flatMap(\.topics) {
            for read in topic.reads {
                let fixture = try await self.fixture(["deny uid=1000 \(read)"])
                let (alice, _) = await fixture.connect(credentials: self.alice)
                let response = await self.subscribe(fixture, topic.name, from: alice)
                #expect(response.error.code == Self.denied, "\(topic.name) reads \(read), which uid 1000 may not call")
                #expect(response.error.message.contains(read))
                let resumed = await self.subscribe(fixture, topic.name, from: alice, resumingIn: fixture.engine.epoch)
                #expect(resumed.error.code == Self.denied, "a resume of \(topic.name) is refused alike")
                #expect(await fixture.engine.subscribedTopics(of: alice).isEmpty)
            }
            let open = try await self.fixture(["deny uid=1002 diary.*"])
            let (alice, sink) = await open.connect(credentials: self.alice)
            let response = await self.subscribe(open, topic.name, from: alice)
            if topic.reads.isEmpty {
                #expect(response.error.code == Self.denied, "\(topic.name) declares no reads: privileged")
            } else {
                #expect(!response.isFailure, "\(topic.name): \(response.error.message)")
                #expect(await sink.next().first?.kind == .snapshot)
            }
            checked += 1
        }
        #expect(checked >= 4, "mentor, reachability, diary and streaks at least")
    }

    @Test("the streaks topic, derived from the diary, is refused to a person denied the diary, as its method is")
    func derivedTopicAndNestedCall() async throws {
        let fixture = try await self.fixture(["deny uid=1000 diary.* subscribe:diary"])
        let (alice, _) = await fixture.connect(credentials: self.alice)
        let nested = await self.call(fixture, "streaks", "current", from: alice)
        #expect(nested.error.code == Self.denied, "the nested diary.list is made with alice's rights")
        let subscribed = await self.subscribe(fixture, "streaks", from: alice)
        #expect(subscribed.error.code == Self.denied)
        #expect(subscribed.error.message.contains("diary.list"))
        let (bob, _) = await fixture.connect(credentials: PeerCredentials(pid: 11, uid: 1001, gid: 1001))
        #expect(!(await self.subscribe(fixture, "streaks", from: bob)).isFailure)
    }

    @Test("a topic without reads opens only to a person a rule allows subscribe:TOPIC by name")
    func privilegedTopic() async throws {
        for (rules, granted) in [
            (["allow uid=1000 subscribe:echoes"], true), (["allow any subscribe:*"], false), ([String](), false),
        ] {
            let fixture = try await EngineFixture(
                accessPolicy: try AccessPolicy(parsing: rules), daemonUID: Self.daemonUID)
            try await fixture.engine.register(UndeclaredEchoHandler())
            let (alice, _) = await fixture.connect(credentials: self.alice)
            let response = await self.subscribe(fixture, "echoes", from: alice)
            #expect(response.isFailure == !granted, "\(rules)")
            let (owner, _) = await fixture.connect(credentials: PeerCredentials(pid: 12, uid: Self.daemonUID, gid: 1))
            #expect(!(await self.subscribe(fixture, "echoes", from: owner)).isFailure, "the daemon's user holds it")
        }
    }

    @Test("a nested call reaches monitors with its chain, as the client's, and is counted in its method's metrics")
    func nestedCallsAreMonitored() async throws {
        let fixture = try await self.fixture(["deny uid=1000 diary.*"])
        let (monitor, records) = await fixture.connect(credentials: PeerCredentials(pid: 1, uid: 0, gid: 0))
        _ = try await fixture.call(
            WireNames.session, "monitor", Mentory_V1_MonitorRequest(), from: monitor,
            as: Mentory_V1_MonitorReply.self)
        let (alice, _) = await fixture.connect(credentials: self.alice)
        let (bob, _) = await fixture.connect(credentials: PeerCredentials(pid: 11, uid: 1001, gid: 1001))
        #expect(await self.call(fixture, "streaks", "current", from: alice).error.code == Self.denied)
        #expect(!(await self.call(fixture, "streaks", "current", from: bob)).isFailure)
        var calls: [Mentory_V1_MonitorCall] = []
        for event in await records.next(4) where event.topic == "session.monitor" {
            let record = try Mentory_V1_MonitorRecord(serializedBytes: event.body)
            if case .call(let call) = record.what { calls.append(call) }
        }
        let nested = calls.filter { !$0.chain.isEmpty }
        #expect(nested.map(\.chain) == ["streaks -> diary.list"], "alice's refused before it ran; bob's ran")
        #expect(nested.first?.uid == 1001, "the client the call was made for")
        #expect(nested.first?.code == 0)
        #expect(calls.filter(\.chain.isEmpty).map(\.uid) == [1000, 1001])
        let metrics = await fixture.engine.metricsSnapshot()
        let listed = metrics.families.first { $0.name == "mentoryd_requests_total" }?.samples.filter { sample in
            sample.labels.contains { $0.name == "method" && $0.value == "list" }
                && sample.labels.contains { $0.name == "namespace" && $0.value == "diary" }
        }
        #expect(listed?.reduce(0) { $0 + $1.value } == 1, "bob's nested diary.list is counted")
    }

    @Test("a method open to every caller is closed by the next request after a reload whose rule names it")
    func reloadClosesAnOpenMethod() async throws {
        let fixture = try await self.fixture([])
        let (alice, _) = await fixture.connect(credentials: self.alice)
        let (bob, _) = await fixture.connect(credentials: PeerCredentials(pid: 11, uid: 1001, gid: 1001))
        // No rule names session.ping and it declares no privilege: open to all, checked without the rules.
        #expect(!(await self.call(fixture, "session", "ping", from: alice)).isFailure)
        #expect(!(await self.call(fixture, "session", "ping", from: alice)).isFailure)
        await fixture.engine.updateAccessPolicy(try AccessPolicy(parsing: ["deny uid=1000 session.ping"]))
        #expect((await self.call(fixture, "session", "ping", from: alice)).error.code == Self.denied)
        #expect(!(await self.call(fixture, "session", "ping", from: bob)).isFailure)
        await fixture.engine.updateAccessPolicy(try AccessPolicy(parsing: []))
        #expect(!(await self.call(fixture, "session", "ping", from: alice)).isFailure)
    }

    @Test("a reload that takes away a subscriber's right to read ends its subscription with an ENDED event")
    func reloadEndsSubscriptions() async throws {
        let fixture = try await self.fixture([])
        let (alice, sink) = await fixture.connect(credentials: self.alice)
        let (bob, _) = await fixture.connect(credentials: PeerCredentials(pid: 11, uid: 1001, gid: 1001))
        for topic in ["diary", "streaks", "mentor"] {
            #expect(!(await self.subscribe(fixture, topic, from: alice)).isFailure)
            #expect(!(await self.subscribe(fixture, topic, from: bob)).isFailure)
        }
        #expect(await sink.next(3).allSatisfy { $0.kind == .snapshot })
        await fixture.engine.updateAccessPolicy(try AccessPolicy(parsing: ["deny uid=1000 diary.list"]))
        let ended = await sink.next(2)
        #expect(Set(ended.map(\.topic)) == ["diary", "streaks"])
        for event in ended {
            #expect(event.kind == .ended)
            #expect(event.error.code == Self.denied)
            #expect(event.error.message.contains("diary.list"))
        }
        #expect(await fixture.engine.subscribedTopics(of: alice) == ["mentor"])
        #expect(await fixture.engine.subscribedTopics(of: bob) == ["diary", "mentor", "streaks"])
        #expect(await fixture.engine.subscriptionsAreConsistent)
        // Live events: bob's diary change reaches bob, not alice; the mentor change after it reaches both, and it is
        // the next event alice gets.
        var add = Mentory_V1_DiaryAddRequest()
        add.recordDate = "2026-11-20"
        add.emotion = .pleasant
        add.title = "bob's"
        add.text = "only bob's"
        _ = try await fixture.call(WireNames.diary, "add", add, from: bob, as: Mentory_V1_DiaryEntry.self)
        var mentor = Mentory_V1_MentorSetRequest()
        mentor.content = "a walk"
        mentor.character = .warm
        _ = try await fixture.call(WireNames.mentor, "set", mentor, from: bob, as: Mentory_V1_MentorState.self)
        let next = await sink.next().first
        #expect(next?.topic == "mentor", "nothing of the diary reached alice after her subscription ended")
        #expect(next?.kind == .change)
    }
}

/// The echo namespace with its topic declaring no reads.
enum UndeclaredEchoSchema: NamespaceSchema {
    static let name = "undeclared"
    static let version: UInt32 = 1
    static let echo = MethodSchema<UndeclaredEchoSchema, Mentory_V1_Empty, Mentory_V1_Empty>(name: "echo")
    static let echoesTopic = TopicSchema<UndeclaredEchoSchema, Mentory_V1_Empty, Mentory_V1_Empty>(name: "echoes")
    static let methods: [MethodInfo] = [echo.info]
    static let topics: [TopicInfo] = [echoesTopic.info]
    static var fileDescriptors: SchemaDescriptors { MentoryDomainSchema.fileDescriptors }
}

struct UndeclaredEchoHandler: MentoryHandler {
    typealias Namespace = UndeclaredEchoSchema

    func routes(_ routes: inout HandlerRoutes<Self>) {
        routes.on(Namespace.echo) { request, _, _ in request }
        routes.snapshot(Namespace.echoesTopic) { _ in Mentory_V1_Empty() }
    }
}

extension Mentory_V1_Response {
    /// Whether the request failed.
    fileprivate var isFailure: Bool {
        if case .error = self.result { return true }
        return false
    }
}
